//! The glob the keyring matches each host label of an `auths` key with: the behaviour of Go's
//! `path.Match` (<https://pkg.go.dev/path#Match>), on bytes, since percent-decoded hosts need
//! not be UTF-8.
//!
//! A pattern is compiled first, so that a malformed one is refused whatever the name (Go
//! reports `ErrBadPattern` even when the name already failed), then matched.

/// A malformed pattern: Go's `path.ErrBadPattern`. The keyring treats it as no match.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BadPattern;

/// One unit of a compiled pattern. Units other than [`Unit::Star`] each take a fixed part of
/// the name at a given position.
#[derive(Debug, PartialEq, Eq)]
enum Unit {
    /// One byte, as written or after `\`.
    Byte(u8),
    /// `?`: one character other than `/`.
    AnyChar,
    /// `[...]`: one character inside (or, with `^`, outside) any of the inclusive ranges.
    Class {
        negated: bool,
        ranges: Vec<(u32, u32)>,
    },
    /// A run of `*`: any bytes other than `/`.
    Star,
}

/// A compiled glob.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct LabelGlob {
    units: Vec<Unit>,
}

impl LabelGlob {
    /// Compiles `pattern`. It is malformed when:
    /// - a `\` ends it;
    /// - a `[` class is not closed by a `]`, or is empty (`[]`, `[^]`: a `]` right after `[`
    ///   or `[^` is not a member);
    /// - a class member is an unescaped `-` or `]` where a character is expected (so `[-a]`,
    ///   `[a-]`, `[a--]` are malformed; write `[\-a]`), or a byte that is not UTF-8.
    ///
    /// `\` makes the next byte literal, in a class the next character.
    pub(super) fn compile(pattern: &[u8]) -> Result<Self, BadPattern> {
        let mut units = Vec::new();
        let mut rest = pattern;
        while let Some((&first, after)) = rest.split_first() {
            rest = after;
            let unit = match first {
                b'*' if units.last() == Some(&Unit::Star) => continue,
                b'*' => Unit::Star,
                b'?' => Unit::AnyChar,
                b'[' => {
                    let (class, after) = compile_class(rest)?;
                    rest = after;
                    class
                }
                b'\\' => {
                    let (&escaped, after) = rest.split_first().ok_or(BadPattern)?;
                    rest = after;
                    Unit::Byte(escaped)
                }
                byte => Unit::Byte(byte),
            };
            units.push(unit);
        }
        Ok(Self { units })
    }

    /// Whether the glob matches all of `name`.
    ///
    /// The units between stars form segments. Each segment after a star is placed at the
    /// first position, from where the previous one ended up to the next `/`, where it matches
    /// (the last segment: where it matches up to the end of the name); an earlier segment is
    /// never moved to let a later one match. This is Go's order of search, observable where a
    /// segment can end past where a later one could start (a class taking `/`, or a character
    /// read from the middle of a multi-byte one).
    pub(super) fn matches(&self, name: &[u8]) -> bool {
        let mut segments = self.units.split(|unit| *unit == Unit::Star);
        let first = segments.next().unwrap_or_default();
        let floating: Vec<&[Unit]> = segments.collect();
        let Some(mut at) = match_segment(first, name, 0) else {
            return false;
        };
        if floating.is_empty() {
            return at == name.len();
        }
        for (index, segment) in floating.iter().enumerate() {
            let last = index + 1 == floating.len();
            let reach = name[at..].iter().position(|&b| b == b'/');
            let latest = at + reach.unwrap_or(name.len() - at);
            let placed = (at..=latest).find_map(|start| {
                let end = match_segment(segment, name, start)?;
                (!last || end == name.len()).then_some(end)
            });
            let Some(end) = placed else { return false };
            at = end;
        }
        true
    }
}

/// Whether `pattern` matches `name` as Go's `path.Match` does: `Err` for a malformed pattern.
pub(super) fn glob_match(pattern: &[u8], name: &[u8]) -> Result<bool, BadPattern> {
    Ok(LabelGlob::compile(pattern)?.matches(name))
}

/// The class whose `[` was just read: its unit and the pattern after its `]`.
fn compile_class(pattern: &[u8]) -> Result<(Unit, &[u8]), BadPattern> {
    let (negated, mut rest) = match pattern.strip_prefix(b"^") {
        Some(after) => (true, after),
        None => (false, pattern),
    };
    let mut ranges = Vec::new();
    loop {
        if let (false, Some(after)) = (ranges.is_empty(), rest.strip_prefix(b"]")) {
            return Ok((Unit::Class { negated, ranges }, after));
        }
        let (low, after) = class_member(rest)?;
        let (high, after) = match after.strip_prefix(b"-") {
            Some(after_dash) => class_member(after_dash)?,
            None => (low, after),
        };
        ranges.push((low, high));
        rest = after;
    }
}

/// One character of a class (after a `\` if any) and what follows it, which cannot be empty
/// since the class still has to close.
fn class_member(pattern: &[u8]) -> Result<(u32, &[u8]), BadPattern> {
    let text = match pattern.split_first() {
        None | Some((b'-' | b']', _)) => return Err(BadPattern),
        Some((b'\\', escaped)) => escaped,
        Some(_) => pattern,
    };
    let (c, len) = first_char(text).ok_or(BadPattern)?;
    match text.get(len..) {
        Some(after) if !after.is_empty() => Ok((u32::from(c), after)),
        _ => Err(BadPattern),
    }
}

/// The first character of `bytes` and its length in bytes; `None` when it is empty or does
/// not start with UTF-8.
fn first_char(bytes: &[u8]) -> Option<(char, usize)> {
    let valid = bytes.utf8_chunks().next()?.valid();
    valid.chars().next().map(|c| (c, c.len_utf8()))
}

/// Where the units of a star-free segment, placed at `start` in `name`, end; `None` when they
/// do not match there.
fn match_segment(segment: &[Unit], name: &[u8], start: usize) -> Option<usize> {
    segment.iter().try_fold(start, |at, unit| {
        let rest = &name[at..];
        let taken = match unit {
            Unit::Byte(byte) => (rest.first() == Some(byte)).then_some(1)?,
            Unit::AnyChar if rest.first() == Some(&b'/') => return None,
            Unit::AnyChar => char_at(rest)?.1,
            Unit::Class { negated, ranges } => {
                let (c, len) = char_at(rest)?;
                let inside = ranges.iter().any(|&(low, high)| (low..=high).contains(&c));
                (inside != *negated).then_some(len)?
            }
            Unit::Star => return None,
        };
        Some(at + taken)
    })
}

/// The character a `?` or a class reads at the start of `rest`: a byte that does not start
/// UTF-8 is read alone, as U+FFFD. `None` at the end of the name.
fn char_at(rest: &[u8]) -> Option<(u32, usize)> {
    if rest.is_empty() {
        return None;
    }
    let (c, len) = first_char(rest).unwrap_or((char::REPLACEMENT_CHARACTER, 1));
    Some((u32::from(c), len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credential, Keyring};

    /// A `(pattern, name, expected)` case.
    type Case<'a> = (&'a [u8], &'a [u8], Result<bool, BadPattern>);

    /// Checks `glob_match` on cases.
    fn assert_globs(cases: &[Case]) {
        for (pattern, name, expected) in cases {
            let shown = (pattern.escape_ascii(), name.escape_ascii());
            assert_eq!(
                &glob_match(pattern, name),
                expected,
                "{} vs {}",
                shown.0,
                shown.1
            );
        }
    }

    #[test]
    fn other_bytes_match_themselves_and_the_whole_name() {
        assert_globs(&[
            (b"mirror", b"mirror", Ok(true)),
            (b"mirror", b"mirrors", Ok(false)),
            (b"mirror", b"mirro", Ok(false)),
            (b"mirror", b"Mirror", Ok(false)),
            (b"", b"", Ok(true)),
            (b"", b"m", Ok(false)),
            (b"team-a.eu", b"team-a.eu", Ok(true)),
            // `^`, `!`, `-` and `]` outside a class are plain bytes.
            (b"a^b!c-d]", b"a^b!c-d]", Ok(true)),
        ]);
    }

    #[test]
    fn a_star_takes_any_run_short_of_a_slash() {
        assert_globs(&[
            (b"*", b"", Ok(true)),
            (b"*", b"team-a", Ok(true)),
            (b"team-*", b"team-", Ok(true)),
            (b"team-*", b"team-blue", Ok(true)),
            (b"*-blue", b"team-blue", Ok(true)),
            (b"t*-*e", b"team-blue", Ok(true)),
            (b"t*-*e", b"team-blues", Ok(false)),
            // Runs of stars are one star.
            (b"t***e", b"tame", Ok(true)),
            // The last part must reach the end of the name, even past an earlier fit.
            (b"*ab", b"abab", Ok(true)),
            (b"*ab", b"aba", Ok(false)),
            // Never across a `/`.
            (b"*", b"team/app", Ok(false)),
            (b"team*", b"team/app", Ok(false)),
            (b"*/app", b"team/app", Ok(true)),
            (b"*/*", b"team/app", Ok(true)),
        ]);
    }

    #[test]
    fn a_question_mark_takes_one_character_but_a_slash() {
        assert_globs(&[
            (b"eu?", b"eu1", Ok(true)),
            (b"eu?", b"eu", Ok(false)),
            (b"eu?", b"eu12", Ok(false)),
            (b"e?1", b"e/1", Ok(false)),
            // A character, not a byte: `é` is two bytes.
            ("caf?".as_bytes(), "café".as_bytes(), Ok(true)),
            ("caf??".as_bytes(), "café".as_bytes(), Ok(false)),
        ]);
    }

    #[test]
    fn a_class_takes_one_character_of_its_ranges() {
        assert_globs(&[
            (b"node[1-3]", b"node2", Ok(true)),
            (b"node[1-3]", b"node4", Ok(false)),
            (b"node[13]", b"node3", Ok(true)),
            (b"node[13]", b"node2", Ok(false)),
            (b"node[a-c1-3x]", b"nodex", Ok(true)),
            // A reversed range holds nothing.
            (b"node[3-1]", b"node2", Ok(false)),
            // `^` first negates it.
            (b"node[^1-3]", b"node4", Ok(true)),
            (b"node[^1-3]", b"node2", Ok(false)),
            (b"node[^1-3]", b"node", Ok(false)),
            // `*`, `?`, `[` and `^` after the first are members; a class may take a `/`.
            (b"node[*?[]", b"node?", Ok(true)),
            (b"a[x^]b", b"a^b", Ok(true)),
            (b"a[/]b", b"a/b", Ok(true)),
            // Members and names are compared by character.
            ("caf[à-ë]".as_bytes(), "café".as_bytes(), Ok(true)),
            ("caf[^é]".as_bytes(), "café".as_bytes(), Ok(false)),
        ]);
    }

    #[test]
    fn a_backslash_makes_the_next_character_literal() {
        assert_globs(&[
            (b"team\\*", b"team*", Ok(true)),
            (b"team\\*", b"teams", Ok(false)),
            (b"eu\\?", b"eu?", Ok(true)),
            (b"eu\\?", b"eu1", Ok(false)),
            (b"\\[a]", b"[a]", Ok(true)),
            (b"\\m\\x", b"mx", Ok(true)),
            (b"\\\\", b"\\", Ok(true)),
            // In a class too, where it lets `-` and `]` be members.
            (b"[\\]]", b"]", Ok(true)),
            (b"[\\-x]", b"-", Ok(true)),
            (b"[a\\-z]", b"m", Ok(false)),
            (b"[\\a-\\c]", b"b", Ok(true)),
        ]);
    }

    #[test]
    fn malformed_patterns_fail_whatever_the_name() {
        let malformed: [&[u8]; 12] = [
            // A trailing backslash.
            b"team\\",
            // A class that is not closed.
            b"node[",
            b"node[1-",
            b"node[1-3",
            b"node[\\]",
            // An empty class.
            b"node[]",
            b"node[^]",
            // `-` or `]` where a member is expected.
            b"node[-1]",
            b"node[1-]",
            b"node[1--]",
            b"node[]1]",
            // A member that is not UTF-8.
            b"node[\xff]",
        ];
        for pattern in malformed {
            for name in [&b""[..], b"node1", b"other", b"node]", b"node/"] {
                assert_globs(&[(pattern, name, Err(BadPattern))]);
            }
        }
        // Even where the name fails before the flaw, or a star could have ended the match.
        assert_globs(&[
            (b"x*[", b"y", Err(BadPattern)),
            (b"*\\", b"abc", Err(BadPattern)),
            (b"node*[1-", b"node1", Err(BadPattern)),
            // Well-formed after all: an escaped `]` or `*` inside the class.
            (b"node[*]", b"node*", Ok(true)),
            (b"node[\\]*]", b"node*", Ok(true)),
        ]);
    }

    #[test]
    fn names_need_not_be_utf8() {
        assert_globs(&[
            // A byte that does not start UTF-8 is one character, outside any class's ranges.
            (b"?", b"\xff", Ok(true)),
            (b"[^a]", b"\xff", Ok(true)),
            (b"[\x01-\x7f]", b"\xff", Ok(false)),
            (b"a\xffb", b"a\xffb", Ok(true)),
            // A truncated character is read byte by byte.
            (b"??", b"\xc3\xc3", Ok(true)),
        ]);
    }

    #[test]
    fn earlier_parts_keep_their_first_place() {
        // `[^x]` first fits at `a`, and the star after it cannot cross the `/`; no other place
        // is tried, though `a` for the first star and `/` for the class would have fit.
        assert_globs(&[(b"*[^x]*b", b"a/b", Ok(false))]);
        // `?` first fits the whole of a four-byte character, leaving nothing for its last two
        // bytes; reading from its second byte would have fit.
        assert_globs(&[(b"*?*\x98\x80", "\u{1F600}".as_bytes(), Ok(false))]);
    }

    #[test]
    fn the_keyring_globs_each_host_label() {
        let mut keyring = Keyring::new();
        keyring.add("node[0-9].example.test", Credential::new("numbered", "p"));
        keyring.add("open[.example.test", Credential::new("malformed", "p"));
        let names = |image| -> Vec<String> {
            let found = keyring.lookup(image);
            found.iter().map(|c| c.username().to_owned()).collect()
        };
        assert_eq!(names("node7.example.test/team-a/app"), ["numbered"]);
        assert!(names("nodes.example.test/team-a/app").is_empty());
        assert!(names("open[.example.test/team-a/app").is_empty());
    }
}
