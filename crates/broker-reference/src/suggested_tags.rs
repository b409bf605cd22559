//! Tag suggestions on the lookup broker's 404: the one piece of registry text the broker passes
//! on, written after the message of its `MANIFEST_UNKNOWN` error as ` (nearest tags: a b c)`,
//! where the stock policy server's error text (oci-client's "OCI API errors: [OCI API error:
//! MESSAGE]") carries it to the policy on the error's first line. Every name is checked against
//! the reference grammar's tag rule on both sides: a name that is not a tag is never written
//! nor read, and a tag can hold neither a space nor a `)`, so the list cannot be extended.

use crate::is_tag;

/// What opens the list, after the error's message.
pub const OPENING: &str = " (nearest tags: ";
/// The most names a list carries: a warning keeps 256 characters.
pub const MAX_TAGS: usize = 3;
/// The most characters the names of a list take together (a tag may be 128 long).
pub const MAX_LENGTH: usize = 80;

/// The marker for `tags`, in order: the first [`MAX_TAGS`] valid tags that fit
/// [`MAX_LENGTH`]; empty when none does.
pub fn mark<S: AsRef<str>>(tags: &[S]) -> String {
    let kept = kept(tags.iter().map(AsRef::as_ref));
    if kept.is_empty() {
        return String::new();
    }
    format!("{OPENING}{})", kept.join(" "))
}

/// The tags of the last marker in `text` (at most [`MAX_TAGS`], each a valid tag), and `text`
/// without every marker, so that messages quote the error without it.
pub fn read(text: &str) -> (Vec<String>, String) {
    let mut rest = text;
    let mut without = String::with_capacity(text.len());
    let mut tags = Vec::new();
    while let Some(at) = rest.find(OPENING) {
        without.push_str(&rest[..at]);
        let after = &rest[at + OPENING.len()..];
        let Some(end) = after.find(')') else {
            // not closed: not a marker the broker wrote
            without.push_str(&rest[at..]);
            rest = "";
            break;
        };
        tags = kept(after[..end].split(' '))
            .into_iter()
            .map(str::to_owned)
            .collect();
        rest = &after[end + 1..];
    }
    without.push_str(rest);
    (tags, without)
}

/// The names of `tags` a list keeps: valid tags, distinct, at most [`MAX_TAGS`] and
/// [`MAX_LENGTH`] characters in all.
fn kept<'t>(tags: impl Iterator<Item = &'t str>) -> Vec<&'t str> {
    let mut kept: Vec<&str> = Vec::new();
    let mut length = 0;
    for tag in tags.filter(|t| is_tag(t)) {
        if kept.len() == MAX_TAGS {
            break;
        }
        // a name too long for the room left gives way to the next
        if length + tag.len() <= MAX_LENGTH && !kept.contains(&tag) {
            length += tag.len();
            kept.push(tag);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_list_reads_back_and_leaves_the_message_clean() {
        let message = format!("manifest unknown{}", mark(&["1.25.5", "1.25-alpine"]));
        assert_eq!(
            message,
            "manifest unknown (nearest tags: 1.25.5 1.25-alpine)"
        );
        let text =
            format!("Registry error: url u, envelope: OCI API errors: [OCI API error: {message}]");
        let (tags, without) = read(&text);
        assert_eq!(tags, ["1.25.5", "1.25-alpine"]);
        assert_eq!(
            without,
            "Registry error: url u, envelope: OCI API errors: [OCI API error: manifest unknown]"
        );
    }

    #[test]
    fn names_that_are_not_tags_are_never_written_nor_read() {
        let bad = ["-x", ".hidden", "a b", "a)b", "", "ü", &"a".repeat(129)];
        assert_eq!(mark(&bad), "");
        assert_eq!(mark(&["-x", "v1", "a)b"]), " (nearest tags: v1)");
        let (tags, _) = read("m (nearest tags: v1 ../x -y v2 <script>)");
        assert_eq!(tags, ["v1", "v2"]);
    }

    #[test]
    fn at_most_three_names_and_eighty_characters() {
        assert_eq!(mark(&["a", "b", "c", "d"]), " (nearest tags: a b c)");
        let long = "t".repeat(60);
        assert_eq!(
            mark(&[long.as_str(), "u".repeat(30).as_str(), "v"]),
            format!(" (nearest tags: {long} v)")
        );
        let (tags, _) = read("m (nearest tags: a b c d e)");
        assert_eq!(tags, ["a", "b", "c"]);
    }

    #[test]
    fn text_without_a_closed_marker_is_kept_as_it_is() {
        for text in [
            "manifest unknown",
            "m (nearest tags: v1",
            "(nearest tags:v1)",
        ] {
            assert_eq!(read(text), (Vec::new(), text.to_owned()), "{text}");
        }
    }
}
