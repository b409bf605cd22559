//! `ImageReference::parse` on any string: never panics, answers what distribution's grammar
//! alone answers (`parse_by_grammar`: the one-pass reading of plain images agrees with it),
//! and what it accepts is a fixed point. The lookup reference parses back to the same lookup
//! reference (so spellings share one host cache entry), and the normalised form parses back to
//! the same normalised form and parts.

use resolvable_images_policy::vocabulary::reference::ImageReference;

/// One input of the target.
pub fn run(data: &[u8]) {
    let Ok(image) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = ImageReference::parse(image);
    assert_eq!(
        parsed,
        ImageReference::parse_by_grammar(image),
        "image {image:?}"
    );
    let Ok(reference) = parsed else {
        return;
    };

    let lookup = reference.lookup_reference();
    let reparsed = ImageReference::parse(&lookup)
        .unwrap_or_else(|e| panic!("lookup reference {lookup:?} of {image:?} does not parse: {e}"));
    assert_eq!(reparsed.lookup_reference(), lookup, "image {image:?}");

    let normalised = reference.to_string();
    let reparsed = ImageReference::parse(&normalised).unwrap_or_else(|e| {
        panic!("normalised form {normalised:?} of {image:?} does not parse: {e}")
    });
    assert_eq!(reparsed.to_string(), normalised, "image {image:?}");
    assert_eq!(reparsed.lookup_reference(), lookup, "image {image:?}");
    assert_eq!(reparsed.registry(), reference.registry(), "image {image:?}");
    assert_eq!(
        reparsed.repository(),
        reference.repository(),
        "image {image:?}"
    );
    assert_eq!(reparsed.digest(), reference.digest(), "image {image:?}");
    // Only the implicit `latest` may become explicit.
    assert_eq!(
        reparsed.tag(),
        reference
            .tag()
            .or(reference.digest().is_none().then_some("latest")),
        "image {image:?}"
    );
    assert_eq!(reparsed.resolves_latest(), reference.resolves_latest());
}
