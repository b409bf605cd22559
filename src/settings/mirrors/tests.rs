use super::*;

const DIGEST: &str = "sha256:5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

fn mirror(location: &str, pull_from_mirror: PullFromMirror) -> Mirror {
    Mirror {
        location: location.into(),
        insecure: false,
        pull_from_mirror,
    }
}

fn rule(prefix: &str, location: Option<&str>, mirrors: Vec<Mirror>) -> RegistryRule {
    RegistryRule {
        prefix: prefix.into(),
        location: location.map(str::to_owned),
        mirrors,
        blocked: false,
    }
}

/// A rule with one mirror that serves every reference.
fn mirrored(prefix: &str, location: &str) -> RegistryRule {
    rule(prefix, None, vec![mirror(location, PullFromMirror::All)])
}

/// The locations of `image`, each as it is looked up and whether it is a mirror.
fn chain(mirrors: &Mirrors, image: &str) -> Vec<(String, bool)> {
    let reference = ImageReference::parse(image).expect(image);
    mirrors
        .locations(&reference)
        .into_iter()
        .map(|l| (l.reference.lookup_reference(), l.is_mirror))
        .collect()
}

/// The locations of `image`, as they are looked up.
fn lookups(mirrors: &Mirrors, image: &str) -> Vec<String> {
    chain(mirrors, image).into_iter().map(|(l, _)| l).collect()
}

/// A name, a literal prefix, and the part of the name the prefix matches.
#[rustfmt::skip]
const LITERAL: &[(&str, &str, Option<&str>)] = &[
    // the prefix is the whole name
    ("registry.example.test", "registry.example.test", Some("registry.example.test")),
    ("registry.example.test/team-a/app", "registry.example.test/team-a/app",
     Some("registry.example.test/team-a/app")),
    // followed by `/`: a host, or a namespace, of the name
    ("registry.example.test/team-a/app", "registry.example.test", Some("registry.example.test")),
    ("registry.example.test/team-a/app", "registry.example.test/team-a",
     Some("registry.example.test/team-a")),
    // followed by `:`: a host prefix without a port also covers the host on any port
    ("registry.example.test:5000/team-a/app", "registry.example.test", Some("registry.example.test")),
    ("registry.example.test:5000/team-a", "registry.example.test:5000",
     Some("registry.example.test:5000")),
    // followed by `@`
    ("registry.example.test/team-a/app@sha256:00", "registry.example.test/team-a/app",
     Some("registry.example.test/team-a/app")),
    // followed by anything else: not a whole component
    ("registry.example.test/team-ab/app", "registry.example.test/team-a", None),
    ("registry.example.testing/app", "registry.example.test", None),
    ("registry.example.test.internal/app", "registry.example.test", None),
    ("registry.example.test:50001/team-a", "registry.example.test:5000", None),
    // a port in the prefix must be in the name
    ("registry.example.test/team-a", "registry.example.test:5000", None),
    // the name is shorter than the prefix, or starts elsewhere
    ("registry.example.test", "registry.example.test/team-a", None),
    ("mirror.internal.test/team-a", "registry.example.test", None),
    ("registry.example.test/team-a/app", "team-a", None),
    ("", "registry.example.test", None),
];

#[test]
fn literal_prefixes_match_whole_components_from_the_start() {
    for (name, prefix, matched) in LITERAL {
        let got = prefix_match(name, prefix).map(|end| &name[..end]);
        assert_eq!(got, *matched, "{name} with prefix {prefix}");
    }
}

/// A name, a `*.domain` prefix, and the part of the name the prefix matches.
#[rustfmt::skip]
const WILDCARD: &[(&str, &str, Option<&str>)] = &[
    // a subdomain host, whatever follows it
    ("build.example.test", "*.example.test", Some("build.example.test")),
    ("build.example.test/team-a/app", "*.example.test", Some("build.example.test")),
    ("build.example.test@sha256:00", "*.example.test", Some("build.example.test")),
    // any depth of subdomain
    ("a.b.c.example.test/app", "*.example.test", Some("a.b.c.example.test")),
    ("build.eu.example.test/app", "*.eu.example.test", Some("build.eu.example.test")),
    // the port is not part of the match
    ("build.example.test:5000/app", "*.example.test", Some("build.example.test")),
    // the domain itself is not its own subdomain
    ("example.test/app", "*.example.test", None),
    ("eu.example.test/app", "*.eu.example.test", None),
    // the domain starts at a dot and ends the host
    ("buildexample.test/app", "*.example.test", None),
    ("build.example.testing/app", "*.example.test", None),
    ("build.us.example.test/app", "*.eu.example.test", None),
    // only the host is matched, never the path
    ("registry.other.test/build.example.test/app", "*.example.test", None),
    ("registry.other.test/team.example.test", "*.example.test", None),
    // the first `.domain` of the name decides
    ("a.example.test.example.test/app", "*.example.test", None),
    // a bare star names no domain
    ("build.example.test/app", "*", None),
];

#[test]
fn wildcard_prefixes_match_subdomain_hosts_only() {
    for (name, prefix, matched) in WILDCARD {
        let got = prefix_match(name, prefix).map(|end| &name[..end]);
        assert_eq!(got, *matched, "{name} with prefix {prefix}");
    }
}

/// Rules whose single mirror names the rule, to tell which one an image chose.
fn overlapping_rules() -> Vec<RegistryRule> {
    vec![
        mirrored("registry.example.test", "host.mirror.test"),
        mirrored("registry.example.test/team-a", "team-a.mirror.test"),
        mirrored("registry.example.test/team-a/tools", "tools.mirror.test/t"),
        mirrored("*.example.test", "sub.mirror.test"),
        mirrored("*.eu.example.test", "eu.mirror.test"),
        // as long as `*.eu.example.test`
        mirrored("b.eu.example.test", "b.mirror.test"),
        mirrored("cache.eu.example.test:5000", "cache.mirror.test"),
    ]
}

/// An image and the first location of its chain under [`overlapping_rules`].
#[rustfmt::skip]
const CHOICES: &[(&str, &str)] = &[
    // the longest literal prefix: host, namespace, repository
    ("registry.example.test/team-b/app:1", "host.mirror.test/team-b/app:1"),
    ("registry.example.test/team-a/app:1", "team-a.mirror.test/app:1"),
    ("registry.example.test/team-a/tools/lint:1", "tools.mirror.test/t/lint:1"),
    ("registry.example.test/team-a/tools:1", "tools.mirror.test/t:1"),
    // a longer name that is not a whole component falls back to a shorter prefix
    ("registry.example.test/team-ab/app:1", "host.mirror.test/team-ab/app:1"),
    // the host prefix covers a port, which stays in the rest; the literal host is
    // longer than the wildcard that also matches it
    ("registry.example.test:5000/team-a/app:1", "host.mirror.test:5000/team-a/app:1"),
    // wildcards: any other subdomain, the longer domain first
    ("other.example.test/app:1", "sub.mirror.test/app:1"),
    ("a.b.example.test/app:1", "sub.mirror.test/app:1"),
    ("x.eu.example.test/app:1", "eu.mirror.test/app:1"),
    // a tie in length goes to the prefix that sorts first, and `*` sorts before letters
    ("b.eu.example.test/app:1", "eu.mirror.test/app:1"),
    // a literal host with a port beats the wildcard, on that port only
    ("cache.eu.example.test:5000/app:1", "cache.mirror.test/app:1"),
    ("cache.eu.example.test:6000/app:1", "eu.mirror.test:6000/app:1"),
    // no rule: the image as written
    ("example.test/app:1", "example.test/app:1"),
    ("registry.example.testing/app:1", "registry.example.testing/app:1"),
    ("registry.other.test/team-a/app:1", "registry.other.test/team-a/app:1"),
];

#[test]
fn the_longest_matching_prefix_chooses_the_rule_in_any_order() {
    let rules = overlapping_rules();
    let mut reversed = rules.clone();
    reversed.reverse();
    for rules in [rules, reversed] {
        let mirrors = Mirrors::new(rules).expect("valid rules");
        for (image, first) in CHOICES {
            assert_eq!(lookups(&mirrors, image)[0], *first, "{image}");
        }
    }
}

#[test]
fn mirrors_are_tried_in_order_and_the_primary_last() {
    let mirrors = Mirrors::new(vec![rule(
        "registry.example.test/team-a",
        None,
        vec![
            mirror("mirror.internal.test/cache/team-a", PullFromMirror::All),
            mirror("backup.internal.test:5000", PullFromMirror::All),
        ],
    )])
    .expect("valid rules");
    assert_eq!(
        chain(&mirrors, "registry.example.test/team-a/api/server:3.1"),
        [
            (
                "mirror.internal.test/cache/team-a/api/server:3.1".to_owned(),
                true
            ),
            ("backup.internal.test:5000/api/server:3.1".to_owned(), true),
            (
                "registry.example.test/team-a/api/server:3.1".to_owned(),
                false
            ),
        ]
    );
}

#[test]
fn a_location_moves_the_primary_and_mirrors_keep_the_prefix_rest() {
    let mirrors = Mirrors::new(vec![rule(
        "legacy.example.test/team-a",
        Some("registry.example.test:8443/team-a-moved"),
        vec![mirror("mirror.internal.test/team-a", PullFromMirror::All)],
    )])
    .expect("valid rules");
    assert_eq!(
        chain(&mirrors, "legacy.example.test/team-a/app:2"),
        [
            ("mirror.internal.test/team-a/app:2".to_owned(), true),
            (
                "registry.example.test:8443/team-a-moved/app:2".to_owned(),
                false
            ),
        ]
    );
    // the image at the prefix itself: the rest is empty
    assert_eq!(
        lookups(&mirrors, "legacy.example.test/team-a:2"),
        [
            "mirror.internal.test/team-a:2",
            "registry.example.test:8443/team-a-moved:2"
        ]
    );
}

#[test]
fn every_location_is_asked_for_the_same_tag_or_digest() {
    let mirrors = Mirrors::new(vec![mirrored(
        "registry.example.test/team-a",
        "mirror.internal.test/team-a",
    )])
    .expect("valid rules");
    let image = "registry.example.test/team-a/app";
    let cases = [
        (format!("{image}:1.2"), ":1.2".to_owned()),
        // no tag is `latest`
        (image.to_owned(), ":latest".to_owned()),
        (format!("{image}@{DIGEST}"), format!("@{DIGEST}")),
        // a digest pins the image: the tag beside it is not asked
        (format!("{image}:1.2@{DIGEST}"), format!("@{DIGEST}")),
    ];
    for (image, version) in cases {
        assert_eq!(
            lookups(&mirrors, &image),
            [
                format!("mirror.internal.test/team-a/app{version}"),
                format!("registry.example.test/team-a/app{version}"),
            ],
            "{image}"
        );
    }
}

#[test]
fn pull_from_mirror_chooses_the_mirrors_of_tags_or_of_digests() {
    use PullFromMirror::{All, DigestOnly, TagOnly};
    // which references a mirror of each kind serves: by tag, by digest
    for (kind, by_tag, by_digest) in [
        (All, true, true),
        (DigestOnly, false, true),
        (TagOnly, true, false),
    ] {
        let mirrors = Mirrors::new(vec![rule(
            "registry.example.test",
            None,
            vec![mirror("mirror.internal.test", kind)],
        )])
        .expect("valid rules");
        for (image, served) in [
            ("registry.example.test/app:1".to_owned(), by_tag),
            (format!("registry.example.test/app@{DIGEST}"), by_digest),
        ] {
            let chain = chain(&mirrors, &image);
            assert_eq!(chain.len(), 1 + usize::from(served), "{kind:?} {image}");
            assert_eq!(chain[0].1, served, "{kind:?} {image}");
            let primary = chain.last().expect("a primary");
            assert_eq!(primary, &(image.clone(), false), "{kind:?}");
        }
    }
}

#[test]
fn mirrors_of_mixed_kinds_keep_their_order() {
    use PullFromMirror::{All, DigestOnly, TagOnly};
    let mirrors = Mirrors::new(vec![rule(
        "registry.example.test",
        None,
        vec![
            mirror("pinned.internal.test", DigestOnly),
            mirror("tags.internal.test", TagOnly),
            mirror("any.internal.test", All),
        ],
    )])
    .expect("valid rules");
    assert_eq!(
        lookups(&mirrors, "registry.example.test/app:1"),
        [
            "tags.internal.test/app:1",
            "any.internal.test/app:1",
            "registry.example.test/app:1"
        ]
    );
    assert_eq!(
        lookups(&mirrors, &format!("registry.example.test/app@{DIGEST}")),
        [
            format!("pinned.internal.test/app@{DIGEST}"),
            format!("any.internal.test/app@{DIGEST}"),
            format!("registry.example.test/app@{DIGEST}"),
        ]
    );
}

#[test]
fn docker_hub_names_are_matched_once_normalised() {
    let mirrors = Mirrors::new(vec![
        mirrored("docker.io", "hub.mirror.test/proxy"),
        mirrored("docker.io/library", "official.mirror.test"),
    ])
    .expect("valid rules");
    assert_eq!(
        chain(&mirrors, "team-a/app:1"),
        [
            ("hub.mirror.test/proxy/team-a/app:1".to_owned(), true),
            ("docker.io/team-a/app:1".to_owned(), false),
        ]
    );
    assert_eq!(
        lookups(&mirrors, "toolbox"),
        [
            "official.mirror.test/toolbox:latest",
            "docker.io/library/toolbox:latest"
        ]
    );
}

#[test]
fn a_wildcard_rule_drops_the_subdomain_and_keeps_the_port() {
    let mirrors = Mirrors::new(vec![rule(
        "*.example.test",
        Some("primary.internal.test"),
        vec![mirror("mirror.internal.test", PullFromMirror::All)],
    )])
    .expect("valid rules");
    assert_eq!(
        chain(&mirrors, "build.example.test/team-a/app:1"),
        [
            ("mirror.internal.test/team-a/app:1".to_owned(), true),
            ("primary.internal.test/team-a/app:1".to_owned(), false),
        ]
    );
    assert_eq!(
        lookups(&mirrors, "build.example.test:5000/app:1"),
        [
            "mirror.internal.test:5000/app:1",
            "primary.internal.test:5000/app:1"
        ]
    );
}

/// A rewrite that is no reference fails the pull, as containers/image's `rewriteReference`
/// error does (see [`a_rewrite_to_a_name_that_is_not_canonical_fails_the_pull`]).
#[test]
fn a_rewrite_that_is_no_reference_fails_the_pull() {
    // a port kept from the name after a location's own port, or after its path
    let mirrors = Mirrors::new(vec![
        rule(
            "*.example.test",
            None,
            vec![
                mirror("ported.internal.test:6000", PullFromMirror::All),
                mirror("mirror.internal.test", PullFromMirror::All),
            ],
        ),
        rule(
            "*.moved.test",
            Some("primary.internal.test/moved"),
            vec![mirror("mirror.internal.test", PullFromMirror::All)],
        ),
    ])
    .expect("valid rules");
    for image in [
        "build.example.test:5000/app:1",
        "build.moved.test:5000/app:1",
    ] {
        let chain = mirrors.chain(&ImageReference::parse(image).expect("valid"));
        assert!(chain.locations.is_empty(), "{image}: {chain:?}");
        assert!(
            chain
                .refusal()
                .is_some_and(|r| r.contains("not a canonical image name")),
            "{image}: {chain:?}"
        );
    }
    assert_eq!(
        lookups(&mirrors, "build.example.test/app:1"),
        [
            "ported.internal.test:6000/app:1",
            "mirror.internal.test/app:1",
            "build.example.test/app:1"
        ]
    );
}

#[test]
fn without_rules_an_image_has_its_primary_only() {
    for mirrors in [Mirrors::default(), Mirrors::new(vec![]).expect("no rules")] {
        assert!(mirrors.is_empty());
        assert_eq!(
            chain(&mirrors, "registry.example.test/team-a/app:1"),
            [("registry.example.test/team-a/app:1".to_owned(), false)]
        );
    }
    let mirrors = Mirrors::new(vec![mirrored("registry.example.test", "m.internal.test")])
        .expect("valid rules");
    assert!(!mirrors.is_empty());
}

#[test]
fn well_formed_locations_are_accepted() {
    for location in [
        "registry.example.test",
        "registry.example.test:5000",
        "registry.example.test/team-a/sub",
        "localhost",
        "localhost:5000/team-a",
        "10.20.30.40:5000",
    ] {
        let rules = vec![rule(
            location,
            Some(location),
            vec![mirror(location, PullFromMirror::All)],
        )];
        assert!(Mirrors::new(rules).is_ok(), "{location}");
    }
    assert!(Mirrors::new(vec![rule("*.example.test", None, vec![])]).is_ok());
}

/// Where a refused text is written in a rule.
#[derive(Debug, Clone, Copy)]
enum At {
    Prefix,
    Location,
    Mirror,
}

/// The refusal's variant, by name.
fn kind(problem: &LocationError) -> &'static str {
    match problem {
        LocationError::Empty => "Empty",
        LocationError::Scheme => "Scheme",
        LocationError::NotHostPath(_) => "NotHostPath",
        LocationError::WildcardOutsidePrefix => "WildcardOutsidePrefix",
        LocationError::WildcardWithPath(_) => "WildcardWithPath",
        LocationError::MisplacedWildcard(_) => "MisplacedWildcard",
        LocationError::NotQualified(_) => "NotQualified",
        LocationError::Invalid { .. } => "Invalid",
        LocationError::ConflictingBlocked { .. } => "ConflictingBlocked",
    }
}

/// Where a text is written, the text, and why it is refused.
#[rustfmt::skip]
const REFUSED: &[(At, &str, &str)] = &[
    (At::Prefix, "", "Empty"),
    (At::Location, "", "Empty"),
    (At::Prefix, "https://registry.example.test", "Scheme"),
    (At::Mirror, "http://mirror.internal.test", "Scheme"),
    // a trailing slash, a blank, a digest
    (At::Prefix, "registry.example.test/", "NotHostPath"),
    (At::Prefix, "registry .example.test", "NotHostPath"),
    (At::Mirror, "mirror.internal.test/\tcache", "NotHostPath"),
    (At::Prefix, "registry.example.test/app@sha256:5e5e", "NotHostPath"),
    // a tag, capitals in the path
    (At::Prefix, "registry.example.test/app:1", "Invalid"),
    (At::Mirror, "Mirror.internal.test/Team-A", "Invalid"),
    // a wildcard is `*.domain`, in a prefix only
    (At::Prefix, "*.", "WildcardWithPath"),
    (At::Prefix, "*.example.test:5000", "WildcardWithPath"),
    (At::Prefix, "*.example.test/team-a", "WildcardWithPath"),
    (At::Prefix, "**.example.test", "MisplacedWildcard"),
    (At::Prefix, "build*.example.test", "MisplacedWildcard"),
    (At::Prefix, "registry.*.test", "MisplacedWildcard"),
    (At::Location, "*.example.test", "WildcardOutsidePrefix"),
    (At::Mirror, "*.internal.test", "WildcardOutsidePrefix"),
    // a first component that is no host would be a Docker Hub name
    (At::Prefix, "team-a", "NotQualified"),
    (At::Location, "team-a/app", "NotQualified"),
    (At::Mirror, "mirror/cache", "NotQualified"),
];

#[test]
fn a_refused_rule_names_its_field_and_why() {
    for (at, text, why) in REFUSED {
        let (rule, field) = match at {
            At::Prefix => (rule(text, None, vec![]), "[0].prefix"),
            At::Location => (
                rule("registry.example.test", Some(text), vec![]),
                "[0].location",
            ),
            At::Mirror => (
                mirrored("registry.example.test", text),
                "[0].mirrors[0].location",
            ),
        };
        let error = Mirrors::new(vec![rule]).expect_err(text);
        assert_eq!(error.field(), field, "{at:?} {text:?}: {error}");
        assert_eq!(kind(&error.problem), *why, "{at:?} {text:?}: {error}");
    }
    // the index of the rule, and of the mirror within it
    let second = rule(
        "other.example.test",
        None,
        vec![
            mirror("mirror.internal.test", PullFromMirror::All),
            mirror("cache", PullFromMirror::All),
        ],
    );
    let error = Mirrors::new(vec![mirrored("registry.example.test", "m.test"), second])
        .expect_err("the second rule's second mirror");
    assert_eq!(error.field(), "[1].mirrors[1].location");
}

/// A careful reading that refuses every rule, naming a field.
fn refuse(_: &str) -> Result<RegistryRule, (String, String)> {
    Err(("mirrors".to_owned(), "not a list of mirrors".to_owned()))
}

#[test]
fn rules_read_from_text_are_parsed_when_an_image_first_matches_them() {
    let text = r#"[
        {"prefix": "registry.example.test", "mirrors": [{"location": "mirror.internal.test"}]},
        {"prefix": "other.example.test", "mirrors": "mirror.internal.test"}
    ]"#;
    let mirrors = Mirrors::from_text(text, refuse).expect("a list of rules");
    assert_eq!(
        lookups(&mirrors, "registry.example.test/app:1"),
        ["mirror.internal.test/app:1", "registry.example.test/app:1"]
    );
    assert_eq!(mirrors.problem(), None, "the second rule is not read yet");
    // the rule that does not read leaves the image its primary
    assert_eq!(
        lookups(&mirrors, "other.example.test/app:1"),
        ["other.example.test/app:1"]
    );
    let problem = (1, "mirrors".to_owned(), "not a list of mirrors".to_owned());
    assert_eq!(mirrors.problem(), Some(&problem));
    for not_rules in [
        r#"{"prefix": "a.test"}"#,
        r#"[{"location": "a.test"}]"#,
        "[1]",
        "[] x",
    ] {
        assert!(
            Mirrors::from_text(not_rules, refuse).is_none(),
            "{not_rules}"
        );
    }
}

/// `rule` with `blocked: true`.
fn blocked(prefix: &str, location: Option<&str>, mirrors: Vec<Mirror>) -> RegistryRule {
    RegistryRule {
        blocked: true,
        ..rule(prefix, location, mirrors)
    }
}

/// The chain of `image`: what is asked, and what is refused with the refusing rule.
fn asked_and_refused(mirrors: &Mirrors, image: &str) -> (Vec<String>, Vec<(String, usize)>) {
    let chain = mirrors.chain(&ImageReference::parse(image).expect(image));
    (
        chain
            .locations
            .iter()
            .map(|l| l.reference.lookup_reference())
            .collect(),
        chain
            .refused
            .iter()
            .map(|r| (r.location.reference.lookup_reference(), r.rule))
            .collect(),
    )
}

/// The refusal of `image`'s chain, if the nodes refuse every location.
fn refusal(mirrors: &Mirrors, image: &str) -> Option<String> {
    mirrors
        .chain(&ImageReference::parse(image).expect(image))
        .refusal()
}

#[test]
fn a_blocked_rule_leaves_out_its_primary_and_keeps_its_mirrors() {
    let mirrors = Mirrors::new(vec![blocked(
        "registry.example.test/team-a",
        None,
        vec![
            mirror("mirror.internal.test/team-a", PullFromMirror::All),
            mirror("backup.internal.test:5000/team-a", PullFromMirror::All),
        ],
    )])
    .expect("valid rules");
    let image = "registry.example.test/team-a/app:2";
    assert_eq!(
        chain(&mirrors, image),
        [
            ("mirror.internal.test/team-a/app:2".to_owned(), true),
            ("backup.internal.test:5000/team-a/app:2".to_owned(), true),
        ]
    );
    let (_, refused) = asked_and_refused(&mirrors, image);
    assert_eq!(refused, [(image.to_owned(), 0)]);
    assert_eq!(refusal(&mirrors, image), None, "mirrors are left to ask");
    // outside the prefix nothing is refused
    assert_eq!(
        chain(&mirrors, "registry.example.test/team-b/app:2"),
        [("registry.example.test/team-b/app:2".to_owned(), false)]
    );
}

#[test]
fn a_blocked_rule_without_mirrors_leaves_nothing_and_names_its_setting() {
    let mirrors = Mirrors::new(vec![
        mirrored("other.example.test", "mirror.internal.test"),
        blocked("registry.example.test", None, vec![]),
    ])
    .expect("valid rules");
    for image in [
        "registry.example.test/app:1".to_owned(),
        format!("registry.example.test/team-a/app@{DIGEST}"),
        "registry.example.test:5000/app".to_owned(),
    ] {
        assert_eq!(chain(&mirrors, &image), [], "{image}");
        assert_eq!(
            refusal(&mirrors, &image).as_deref(),
            Some("nodes refuse pulls from registry.example.test (registries[1].blocked), with no mirror: no location is left to pull from"),
            "{image}"
        );
    }
}

#[test]
fn mirrors_serving_only_the_other_kind_of_reference_leave_nothing() {
    use PullFromMirror::{DigestOnly, TagOnly};
    let by_digest = format!("registry.example.test/app@{DIGEST}");
    // (the mirror's kind, the reference it does not serve, the words for it)
    for (kind, unserved, served, words) in [
        (
            DigestOnly,
            "registry.example.test/app:1",
            by_digest.as_str(),
            "digest",
        ),
        (
            TagOnly,
            by_digest.as_str(),
            "registry.example.test/app:1",
            "tag",
        ),
    ] {
        let mirrors = Mirrors::new(vec![blocked(
            "registry.example.test",
            None,
            vec![
                mirror("mirror.internal.test", kind),
                mirror("backup.internal.test", kind),
            ],
        )])
        .expect("valid rules");
        assert_eq!(chain(&mirrors, unserved), [], "{kind:?}");
        let why = refusal(&mirrors, unserved).expect("refused");
        assert!(
            why.contains(&format!(
                "registries[0].blocked), and 2 mirror(s) of the rule serve only pulls by {words} (pullFromMirror)"
            )),
            "{kind:?}: {why}"
        );
        assert_eq!(chain(&mirrors, served).len(), 2, "{kind:?}");
        assert!(chain(&mirrors, served).iter().all(|(_, m)| *m), "{kind:?}");
    }
}

#[test]
fn a_longer_rule_that_is_not_blocked_lets_its_names_through() {
    let mirrors = Mirrors::new(vec![
        blocked("registry.example.test", None, vec![]),
        mirrored(
            "registry.example.test/team-a",
            "mirror.internal.test/team-a",
        ),
        blocked("registry.example.test/team-a/secret", None, vec![]),
    ])
    .expect("valid rules");
    // the longer rule decides, blocked or not, in either direction
    assert_eq!(
        lookups(&mirrors, "registry.example.test/team-a/app:1"),
        [
            "mirror.internal.test/team-a/app:1",
            "registry.example.test/team-a/app:1"
        ]
    );
    assert_eq!(
        lookups(&mirrors, "registry.example.test/team-b/app:1"),
        [] as [&str; 0]
    );
    let (asked, refused) = asked_and_refused(&mirrors, "registry.example.test/team-a/secret/app:1");
    assert_eq!(asked, [] as [&str; 0]);
    assert_eq!(
        refused,
        [("registry.example.test/team-a/secret/app:1".to_owned(), 2)]
    );
}

#[test]
fn each_location_is_refused_by_the_rule_that_matches_its_own_name() {
    let mirrors = Mirrors::new(vec![
        rule(
            "registry.example.test",
            None,
            vec![
                mirror("quarantine.internal.test/cache", PullFromMirror::All),
                mirror("mirror.internal.test", PullFromMirror::All),
            ],
        ),
        blocked("quarantine.internal.test", None, vec![]),
        // moved: the moved location is looked up, not the prefix
        blocked(
            "legacy.example.test",
            Some("registry.internal.test/legacy"),
            vec![],
        ),
        blocked(
            "old.example.test",
            Some("quarantine.internal.test/old"),
            vec![],
        ),
        blocked(
            "*.blocked.test",
            None,
            vec![mirror("mirror.internal.test", PullFromMirror::All)],
        ),
    ])
    .expect("valid rules");
    let (asked, refused) = asked_and_refused(&mirrors, "registry.example.test/app:1");
    assert_eq!(
        asked,
        ["mirror.internal.test/app:1", "registry.example.test/app:1"]
    );
    assert_eq!(
        refused,
        [("quarantine.internal.test/cache/app:1".to_owned(), 1)]
    );
    // a blocked rule whose location lies outside every blocked prefix: containers/image
    // looks the moved primary up under its own name, which no blocked rule matches
    assert_eq!(
        lookups(&mirrors, "legacy.example.test/app:1"),
        ["registry.internal.test/legacy/app:1"]
    );
    let (asked, refused) = asked_and_refused(&mirrors, "old.example.test/app:1");
    assert_eq!(asked, [] as [&str; 0]);
    assert_eq!(
        refused,
        [("quarantine.internal.test/old/app:1".to_owned(), 1)]
    );
    assert_eq!(
        refusal(&mirrors, "old.example.test/app:1").as_deref(),
        Some("nodes refuse pulls from quarantine.internal.test (registries[1].blocked), with no mirror: no location is left to pull from")
    );
    // a wildcard blocks every subdomain's primary
    assert_eq!(
        chain(&mirrors, "build.blocked.test/app:1"),
        [("mirror.internal.test/app:1".to_owned(), true)]
    );
}

#[test]
fn blocked_reads_as_a_boolean_and_defaults_to_false() {
    let read = |text: &str| serde_json::from_str::<RegistryRule>(text);
    assert!(!read(r#"{"prefix": "a.test"}"#).expect("no blocked").blocked);
    assert!(
        read(r#"{"prefix": "a.test", "blocked": true}"#)
            .expect("bool")
            .blocked
    );
    for not_bool in [r#""true""#, "1", "null", "[]"] {
        let text = format!(r#"{{"prefix": "a.test", "blocked": {not_bool}}}"#);
        assert!(read(&text).is_err(), "{text}");
    }
}

/// containers/image's `rewriteReference` (pkg/sysregistriesv2/system_registries_v2.go) parses
/// the rewritten name with `reference.ParseNamed`, which refuses a name that is not canonical,
/// and `PullSourcesFromReference` returns that error: the pull fails before any location is
/// tried. A location without a path, for an image exactly at the prefix, is such a rewrite
/// (`tools.mirror.test:1` would be `docker.io/library/tools.mirror.test:1`).
#[test]
fn a_rewrite_to_a_name_that_is_not_canonical_fails_the_pull() {
    for rules in [
        vec![rule(
            "registry.example.test/tools",
            Some("tools.mirror.test"),
            vec![],
        )],
        vec![mirrored("registry.example.test/tools", "tools.mirror.test")],
    ] {
        let mirrors = Mirrors::new(rules).expect("valid rules");
        let at_prefix = ImageReference::parse("registry.example.test/tools:1").expect("valid");
        let chain = mirrors.chain(&at_prefix);
        assert!(chain.locations.is_empty(), "{chain:?}");
        let refusal = chain.refusal().expect("the pull fails");
        assert!(refusal.contains("\"tools.mirror.test:1\""), "{refusal}");
        // under the prefix, the rewrite has a path and is canonical
        assert_eq!(
            lookups(&mirrors, "registry.example.test/tools/lint:1")[0],
            "tools.mirror.test/lint:1"
        );
    }
}

/// `loadConfigFile` (pkg/sysregistriesv2/system_registries_v2.go) keeps the first rule of a
/// prefix and drops the later ones ("the first longest prefix always wins").
#[test]
fn of_two_rules_with_one_prefix_the_first_counts() {
    let mirrors = Mirrors::new(vec![
        mirrored("registry.example.test", "first.mirror.test"),
        mirrored("registry.example.test", "second.mirror.test"),
    ])
    .expect("valid rules");
    assert_eq!(
        lookups(&mirrors, "registry.example.test/app:1"),
        ["first.mirror.test/app:1", "registry.example.test/app:1"]
    );
}

/// `postProcessRegistries` refuses rules that share a location (a rule's prefix when it has
/// none) and disagree on `blocked`.
#[test]
fn rules_sharing_a_location_must_agree_on_blocked() {
    let error = Mirrors::new(vec![
        rule("registry.example.test", None, vec![]),
        blocked("registry.example.test", None, vec![]),
    ])
    .expect_err("conflicting blocked");
    assert_eq!(error.field, "[1].blocked");
    assert_eq!(kind(&error.problem), "ConflictingBlocked");
    assert!(Mirrors::new(vec![
        rule(
            "registry.example.test/a",
            Some("shared.example.test"),
            vec![]
        ),
        rule(
            "registry.example.test/b",
            Some("shared.example.test"),
            vec![]
        ),
    ])
    .is_ok());
}
