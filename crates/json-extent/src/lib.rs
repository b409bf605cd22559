//! Where a JSON value ends, found without parsing it, and a byte comparison a word at a time:
//! the code of resolvable-images-policy that needs `unsafe` (WebAssembly SIMD loads, `memcmp`)
//! lives in this crate alone, so that the policy crate can `forbid(unsafe_code)`.
//!
//! The policy server hands the policy its settings inside every request's payload, on a fresh
//! instance, so a request that reads the settings with serde pays for every byte of them. A
//! request needs few of them: [`Scanner`] finds the members' extents sixty-four bytes at a
//! time, and serde then parses only the members a request reads; some questions (is this
//! namespace listed, may this string match) are answered from the text.
//!
//! The scanner trusts what the host serialised: walking an object's members or a list's
//! elements it checks their punctuation; skipping a value it checks only what finding its end
//! needs (strings end, brackets balance); literals and numbers are left to serde, which reads
//! every member a request uses. It notes what the Kubewarden UI writes for "nothing", which the
//! settings read the careful way: an empty string anywhere, a `null` as the value itself (a
//! `null` inside a list or object is left to the reader: serde refuses it where the careful
//! reading would remove it, or reads it as the absent value removing it gives).
//!
//! [`compare`], and in the wasm build the module's `memcmp`, compare eight bytes a step where
//! wasi-libc's compares one, for every string `==` and ordered map of the policy. Used by the
//! policy (`src/`) only; tested by the unit tests (natively everything but the SIMD
//! comparisons), the policy's decision tests and the `json_extent` fuzz target (the scanner
//! agrees with serde_json on every valid document, `compare` with slice ordering on every
//! pair). Every `unsafe` block carries a `SAFETY:` comment saying why it holds.

use std::borrow::Cow;

mod blocks;
pub mod compare;

pub use blocks::ascii_text;
use blocks::quote_or_backslash;

/// Text that is not the JSON the scanner expected, at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not JSON at byte {offset}: {expected}")]
pub struct ExtentError {
    /// Where the text stopped making sense.
    pub offset: usize,
    /// What was expected there.
    pub expected: &'static str,
}

/// A cursor over JSON text.
#[derive(Clone)]
pub struct Scanner<'a> {
    text: &'a str,
    at: usize,
    /// A `null` or an empty string was skipped since the last [`Scanner::take_blanks`].
    blanks: bool,
}

/// Nesting deeper than this is refused: serde, which reads the members afterwards, stops at
/// 128 too.
const MAX_DEPTH: usize = 128;

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Scanner {
            text,
            at: 0,
            blanks: false,
        }
    }

    /// The byte offset the scanner is at.
    pub fn offset(&self) -> usize {
        self.at
    }

    /// True when only whitespace is left.
    pub fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.at == self.text.len()
    }

    /// Whether a `null` or `""` was skipped since the last call.
    pub fn take_blanks(&mut self) -> bool {
        std::mem::take(&mut self.blanks)
    }

    fn error(&self, expected: &'static str) -> ExtentError {
        ExtentError {
            offset: self.at,
            expected,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        let bytes = self.text.as_bytes();
        while matches!(bytes.get(self.at), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    /// Consumes `byte` after whitespace.
    fn require(&mut self, byte: u8, expected: &'static str) -> Result<(), ExtentError> {
        self.skip_whitespace();
        if self.peek() != Some(byte) {
            return Err(self.error(expected));
        }
        self.at += 1;
        Ok(())
    }

    /// Consumes `byte` after whitespace when it is next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_whitespace();
        let next = self.peek() == Some(byte);
        if next {
            self.at += 1;
        }
        next
    }

    /// A string's raw contents (escapes left as written), the scanner past its closing quote,
    /// and whether the string holds an escape.
    fn escaped_string(&mut self) -> Result<(&'a str, bool), ExtentError> {
        self.require(b'"', "a string")?;
        let start = self.at;
        let bytes = self.text.as_bytes();
        // most strings have no escape: their first quote or backslash is the closing quote
        let ends = quote_or_backslash(bytes, start).and_then(|found| match bytes[found] {
            b'"' => Some((found, false)),
            _ => string_end(bytes, found + 2).map(|end| (end, true)),
        });
        let Some((end, escaped)) = ends else {
            self.at = self.text.len();
            return Err(self.error("the end of a string"));
        };
        self.at = end + 1;
        self.blanks |= end == start;
        // both ends are ASCII quotes, so the slice is on character boundaries
        Ok((&self.text[start..end], escaped))
    }

    /// A string, decoded when it holds escapes.
    pub fn string(&mut self) -> Result<Cow<'a, str>, ExtentError> {
        let (raw, escaped) = self.escaped_string()?;
        if !escaped {
            return Ok(Cow::Borrowed(raw));
        }
        unescape(raw, self.at - raw.len() - 2).map(Cow::Owned)
    }

    /// Skips one value, returning its text. The text is trusted to be JSON (the host
    /// serialised it, and serde parses every member a request reads), so only what finding
    /// the value's end depends on is checked: strings end, brackets balance, nesting stays
    /// within [`MAX_DEPTH`]. A list or object is skipped sixty-four bytes at a time
    /// ([`blocks`]); one with an escape byte by byte.
    pub fn value(&mut self) -> Result<&'a str, ExtentError> {
        self.skip_whitespace();
        let bytes = self.text.as_bytes();
        let start = self.at;
        let Some(&first @ (b'"' | b'{' | b'[')) = bytes.get(start) else {
            self.literal()?;
            return Ok(&self.text[start..self.at]);
        };
        if first != b'"' {
            if let Ok(end) = blocks::container_end(bytes, start, MAX_DEPTH as u32) {
                self.blanks |= end.blanks;
                self.at = end.at;
                return Ok(&self.text[start..end.at]);
            }
        }
        // an escape, or text that does not end the value: byte by byte, which follows escapes
        // and says what is wrong
        let mut depth = 0usize;
        let mut at = start;
        loop {
            let Some(&byte) = bytes.get(at) else {
                self.at = at;
                return Err(self.error("the end of a list or object"));
            };
            match byte {
                b'"' => {
                    let Some(end) = string_end(bytes, at + 1) else {
                        self.at = bytes.len();
                        return Err(self.error("the end of a string"));
                    };
                    self.blanks |= end == at + 1;
                    at = end;
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        self.at = at;
                        return Err(self.error("less nesting"));
                    }
                }
                b'}' | b']' => depth -= 1,
                _ => {}
            }
            at += 1;
            if depth == 0 {
                self.at = at;
                return Ok(&self.text[start..at]);
            }
        }
    }

    /// Skips `true`, `false`, `null` or a number, noting a `null`.
    fn literal(&mut self) -> Result<(), ExtentError> {
        let bytes = self.text.as_bytes();
        let start = self.at;
        while matches!(bytes.get(self.at), Some(b) if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.'))
        {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.error("a value"));
        }
        self.blanks |= &bytes[start..self.at] == b"null";
        Ok(())
    }

    /// The text from the scanner on.
    pub fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    /// Moves the scanner `bytes` on, past a value another parser read from [`Scanner::rest`].
    pub fn advance(&mut self, bytes: usize) {
        self.at = (self.at + bytes).min(self.text.len());
    }

    /// Enters the object at the scanner; [`Scanner::next_key`] then walks its members.
    pub fn enter_object(&mut self) -> Result<(), ExtentError> {
        self.require(b'{', "an object")
    }

    /// The raw key of the next member of the object entered, the scanner at its value (which
    /// the caller must consume), or `None` past the object's end.
    pub fn next_key(&mut self, first: bool) -> Result<Option<&'a str>, ExtentError> {
        Ok(self.next_escaped_key(first)?.map(|(key, _)| key))
    }

    /// [`Scanner::next_key`] decoded: the name a key written with an escape spells, for an
    /// object whose keys are few and compared once (the payload's own).
    pub fn next_decoded_key(&mut self, first: bool) -> Result<Option<Cow<'a, str>>, ExtentError> {
        let member = self.at;
        let Some((key, escaped)) = self.next_escaped_key(first)? else {
            return Ok(None);
        };
        if !escaped {
            return Ok(Some(Cow::Borrowed(key)));
        }
        unescape(key, member).map(|key| Some(Cow::Owned(key)))
    }

    /// [`Scanner::next_key`], and whether the key holds an escape.
    fn next_escaped_key(&mut self, first: bool) -> Result<Option<(&'a str, bool)>, ExtentError> {
        if self.eat(b'}') {
            return Ok(None);
        }
        if !first {
            self.require(b',', "a comma or the end of the object")?;
        }
        let key = self.escaped_string()?;
        self.require(b':', "a colon")?;
        Ok(Some(key))
    }

    /// Calls `each` with every member of the object at the scanner: its raw key and its value's
    /// text ([`Scanner::take_blanks`] then tells that value's blanks). A key written with an
    /// escape stops the walk: compared as written, it would not match the name it spells, so
    /// the object is the careful reader's (serde's, which decodes keys) to read.
    pub fn members(
        &mut self,
        mut each: impl FnMut(&'a str, &'a str, &mut Self) -> Result<(), ExtentError>,
    ) -> Result<(), ExtentError> {
        self.members_in_place(|key, scanner| {
            // what `take_blanks` then tells is this member's value's, not what came before
            scanner.take_blanks();
            let value = scanner.value()?;
            each(key, value, scanner)
        })
    }

    /// [`Scanner::members`] with the scanner at each member's value, which `each` must
    /// consume: a value read where it is (walked into) rather than skipped first and read
    /// again, which scanned its bytes once more per level of nesting.
    pub fn members_in_place(
        &mut self,
        mut each: impl FnMut(&'a str, &mut Self) -> Result<(), ExtentError>,
    ) -> Result<(), ExtentError> {
        self.enter_object()?;
        let mut first = true;
        while let Some((key, escaped)) = self.next_escaped_key(std::mem::take(&mut first))? {
            if escaped {
                return Err(self.error("a key without escapes"));
            }
            each(key, self)?;
        }
        Ok(())
    }

    /// The first byte of the next value, after whitespace.
    pub fn next_byte(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.peek()
    }

    /// The text from `start` (an earlier [`Scanner::offset`]) to the scanner.
    pub fn since(&self, start: usize) -> &'a str {
        self.text.get(start..self.at).unwrap_or_default()
    }

    /// Calls `each` with the scanner at every element of the list at the scanner; `each` must
    /// consume the element.
    pub fn elements(
        &mut self,
        mut each: impl FnMut(&mut Self) -> Result<(), ExtentError>,
    ) -> Result<(), ExtentError> {
        self.require(b'[', "a list")?;
        if self.eat(b']') {
            return Ok(());
        }
        loop {
            each(self)?;
            if self.eat(b']') {
                return Ok(());
            }
            self.require(b',', "a comma or the end of the list")?;
        }
    }
}

/// A member's value that is a string or `null`: `Some(None)` for `null`, the string decoded
/// when it holds escapes; `None` for any other value, which the caller leaves to serde.
pub fn string_or_null(value: &str) -> Option<Option<String>> {
    if value == "null" {
        return Some(None);
    }
    let mut scanner = Scanner::new(value);
    let string = scanner.string().ok()?;
    scanner.at_end().then(|| Some(string.into_owned()))
}

/// A string member as serde reads it into a `String` with `null` as its default; `None` for any
/// other value.
pub fn string_or_default(value: &str) -> Option<String> {
    string_or_null(value).map(Option::unwrap_or_default)
}

/// The member `name` of the object `value` as serde reads a struct whose one field is that
/// `String` (`null` as its default, other members ignored, the field written twice refused);
/// `None` for what serde must read.
pub fn string_field(value: &str, name: &str) -> Option<String> {
    let mut field = String::new();
    struct_members(value, |key, value| {
        if key != name {
            return Some(0);
        }
        field = string_or_default(value)?;
        Some(1)
    })?;
    Some(field)
}

/// The contents `raw` of a string written with escapes, decoded as serde decodes them;
/// `offset` says where the string is when an escape is not valid JSON.
fn unescape(raw: &str, offset: usize) -> Result<String, ExtentError> {
    serde_json::from_str(&format!("\"{raw}\"")).map_err(|_| ExtentError {
        offset,
        expected: "a valid string escape",
    })
}

/// What stops a walk whose caller refused a member or element: the value is then serde's.
pub const REFUSED: ExtentError = ExtentError {
    offset: 0,
    expected: "a value the caller reads",
};

/// Walks the object `value` (`null` has no members), calling `each` with every member's raw
/// key and value; `None` when `value` is neither, a key holds an escape, or `each` refuses a
/// member: the object is then serde's to read.
pub fn object_members<'v>(
    value: &'v str,
    mut each: impl FnMut(&'v str, &'v str) -> Option<()>,
) -> Option<()> {
    if value == "null" {
        return Some(());
    }
    Scanner::new(value)
        .members(|key, value, _| each(key, value).ok_or(REFUSED))
        .ok()
}

/// The object at `scanner`, which it moves past the object, read as serde's derived reader
/// reads a struct: `each` reads a member where it is (the scanner at its value, which `each`
/// must consume) and answers its field's bit (0 for a member the struct has not), and a field
/// written twice refuses the object, as serde refuses it. `None` for anything but an object.
pub fn struct_members_at<'v>(
    scanner: &mut Scanner<'v>,
    mut each: impl FnMut(&'v str, &mut Scanner<'v>) -> Option<u32>,
) -> Option<()> {
    let mut seen = 0u32;
    scanner
        .members_in_place(|key, scanner| {
            let field = each(key, scanner).ok_or(REFUSED)?;
            let first = seen & field == 0;
            seen |= field;
            first.then_some(()).ok_or(REFUSED)
        })
        .ok()
}

/// [`struct_members_at`] of the object `value` (`null` has no members), `each` given each
/// member's text.
pub fn struct_members<'v>(
    value: &'v str,
    mut each: impl FnMut(&'v str, &'v str) -> Option<u32>,
) -> Option<()> {
    if value == "null" {
        return Some(());
    }
    struct_members_at(&mut Scanner::new(value), |key, scanner| {
        each(key, scanner.value().ok()?)
    })
}

/// Calls `each` with every element's text of the list `value`; `None` when `value` is not a
/// list or `each` refuses an element.
pub fn list_elements<'v>(
    value: &'v str,
    mut each: impl FnMut(&'v str) -> Option<()>,
) -> Option<()> {
    Scanner::new(value)
        .elements(|scanner| {
            let element = scanner.value()?;
            each(element).ok_or(REFUSED)
        })
        .ok()
}

/// The offset of the quote that closes the string whose contents start at `from`. Inlined: it is
/// the inner loop of [`Scanner::value`], where a call per string costs a twentieth of a request.
#[inline(always)]
fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let found = quote_or_backslash(bytes, from)?;
        if bytes[found] == b'"' {
            return Some(found);
        }
        // a backslash escapes the byte after it
        from = found + 2;
    }
}

/// The strings of a list written without escapes (`["a", "b"]`), borrowed from `text`, found
/// by their quotes sixteen bytes at a time; `None` for anything else (an escape, an element
/// that is not a string, misplaced punctuation), which the scanner then reads and explains.
pub fn string_list(text: &str) -> Option<Vec<Cow<'_, str>>> {
    let bytes = text.as_bytes();
    let mut strings = Vec::new();
    // the text before the first string, and between strings, holds only punctuation
    let mut gap_start = 0;
    let mut well_formed = true;
    let ended = blocks::string_spans(bytes, |start, end| {
        let before = if strings.is_empty() { b'[' } else { b',' };
        well_formed &= only_separator(&bytes[gap_start..start - 1], before);
        strings.push(Cow::Borrowed(&text[start..end]));
        gap_start = end + 1;
    });
    let closing = bytes.get(gap_start..).unwrap_or_default();
    let closed = if strings.is_empty() {
        only_separator(closing.trim_ascii_end().strip_suffix(b"]")?, b'[')
    } else {
        only_separator(closing, b']')
    };
    (ended && well_formed && closed).then_some(strings)
}

/// Calls `each` with every string of `text` written without escapes (the elements of a list
/// of strings), in order, found by their quotes without building a list; false, having called
/// it for none or some, when a string has an escape, which the scanner must then decode.
/// Nothing between the strings is checked: the settings were validated when they were loaded,
/// and a caller only asks whether some string answers a question.
pub fn each_plain_string(text: &str, each: impl FnMut(&str)) -> bool {
    blocks::string_spans(text.as_bytes(), each_span(text, each))
}

/// `each` of the text between two offsets a walk of [`blocks`] found: both at ASCII quotes,
/// so on character boundaries.
fn each_span<'t>(
    text: &'t str,
    mut each: impl FnMut(&'t str) + 't,
) -> impl FnMut(usize, usize) + 't {
    move |start, end| {
        if let Some(string) = text.get(start..end) {
            each(string);
        }
    }
}

/// [`each_plain_string`] of the strings whose first byte is one of `firsts` (never an empty
/// one): the question a caller asks can only be true of them. Found a block at a time without
/// pairing the quotes when `firsts` are letters, digits or glob wildcards, none of which
/// follows a closing quote in JSON; otherwise by [`each_plain_string`].
pub fn each_plain_string_starting(text: &str, firsts: [u8; 4], mut each: impl FnMut(&str)) -> bool {
    let opens_only = |byte: &u8| byte.is_ascii_alphanumeric() || matches!(byte, b'*' | b'?' | b'[');
    if !firsts.iter().all(opens_only) {
        return each_plain_string(text, |string| {
            if string
                .as_bytes()
                .first()
                .is_some_and(|byte| firsts.contains(byte))
            {
                each(string);
            }
        });
    }
    blocks::strings_starting(text.as_bytes(), firsts, each_span(text, each))
}

/// Whether `text` (a list of strings) holds the string `needle`, answered without reading the
/// other strings: `None` when the text has an escape (or the needle a quote or backslash),
/// which only the scanner can read.
pub fn has_string(text: &str, needle: &str) -> Option<bool> {
    blocks::has_string(text.as_bytes(), needle.as_bytes())
}

/// True when `gap` is `punctuation` with whitespace around it.
fn only_separator(gap: &[u8], punctuation: u8) -> bool {
    matches!(gap.trim_ascii(), [byte] if *byte == punctuation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skip(text: &str) -> Result<&str, ExtentError> {
        Scanner::new(text).value()
    }

    #[test]
    fn values_end_where_serde_says() {
        for text in [
            r#"{"a": [1, 2, {"b": "}]\"{["}], "c": {}, "d": [], "e": null}"#,
            r#"["x", "y\\", "\"", "", 1.5e3, -2, true, false]"#,
            r#"{"k": {"l": {"m": [[], [{}]]}}}"#,
            r#""a string with \u00e9 and \\ and \" inside""#,
            "  17  ",
            r#"{"a":1,"b":[{"c":2},{"d":[3,{"e":4}]}]}"#,
        ] {
            let end = skip(text).unwrap();
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            let again: serde_json::Value = serde_json::from_str(end).unwrap();
            assert_eq!(value, again, "{text}");
        }
        let mut scanner = Scanner::new(r#"{"a": [1]} , {"b": 2}"#);
        assert_eq!(scanner.value().unwrap(), r#"{"a": [1]}"#);
        assert_eq!(scanner.offset(), 10);
    }

    #[test]
    fn what_keeps_a_value_from_ending_is_refused() {
        for (text, expected) in [
            (r#"["unterminated]"#, "the end of a string"),
            (r#"["escaped quote\"]"#, "the end of a string"),
            ("[1, 2", "the end of a list or object"),
            ("{\"a\": {}", "the end of a list or object"),
            ("", "a value"),
            ("]", "a value"),
        ] {
            assert_eq!(skip(text).unwrap_err().expected, expected, "{text}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert_eq!(skip(&deep).unwrap_err().expected, "less nesting");
        assert!(skip(&"[".repeat(MAX_DEPTH)).is_err());
    }

    #[test]
    fn members_and_elements_check_their_own_punctuation() {
        for (text, expected) in [
            (r#"{"a" 1}"#, "a colon"),
            (r#"{"a": 1 "b": 2}"#, "a comma or the end of the object"),
            ("{1: 2}", "a string"),
            (r#"{"a": 1, "\u0062": 2}"#, "a key without escapes"),
        ] {
            let error = Scanner::new(text).members(|_, _, _| Ok(())).unwrap_err();
            assert_eq!(error.expected, expected, "{text}");
        }
        let error = Scanner::new("[1 2]")
            .elements(|s| s.value().map(drop))
            .unwrap_err();
        assert_eq!(error.expected, "a comma or the end of the list");
    }

    #[test]
    fn members_and_elements_are_walked_in_order() {
        let text = r#"{"a": ["x", "y\"z"], "b": {"c": null}, "d": ""}"#;
        let mut seen = Vec::new();
        let mut blanks = Vec::new();
        Scanner::new(text)
            .members(|key, value, scanner| {
                seen.push((key, value));
                blanks.push(scanner.take_blanks());
                Ok(())
            })
            .unwrap();
        assert_eq!(
            seen,
            [
                ("a", r#"["x", "y\"z"]"#),
                ("b", r#"{"c": null}"#),
                ("d", r#""""#)
            ]
        );
        // an empty string is a blank; a `null` inside an object is left to its reader
        assert_eq!(blanks, [false, false, true]);
        let mut strings = Vec::new();
        Scanner::new(r#"["x", "y\"z", "\u00e9"]"#)
            .elements(|scanner| {
                strings.push(scanner.string()?);
                Ok(())
            })
            .unwrap();
        assert_eq!(strings, ["x", "y\"z", "é"]);
        assert!(matches!(strings[0], Cow::Borrowed(_)));
    }

    #[test]
    fn lists_of_strings_are_read_by_their_quotes_or_not_at_all() {
        let strings = |text| {
            string_list(text).map(|l| l.into_iter().map(Cow::into_owned).collect::<Vec<_>>())
        };
        assert_eq!(
            strings(r#" ["a", "b c" ,"[]{}"] "#),
            Some(vec!["a".into(), "b c".into(), "[]{}".into()])
        );
        assert_eq!(strings("[ ]"), Some(vec![]));
        for refused in [
            r#"["a" "b"]"#,
            r#"["a", null]"#,
            r#"["a",]"#,
            r#"["a\"b"]"#,
            r#""a""#,
            r#"{"a": "b"}"#,
            r#"["a"#,
        ] {
            assert_eq!(strings(refused), None, "{refused}");
        }
    }

    #[test]
    fn strings_by_their_first_byte_are_those_of_every_string_so_starting() {
        let texts = [
            r#"["registry.internal/team-0/*", "docker.io/x:*", "*.corp", "?a", "[ab]c", "r"]"#,
            r#"[{"prefix":"reg.example","mirrors":[{"location":"m:5000/s","insecure":false}]}]"#,
            r#"["kube-system","team-a","team-exempt-1","t"]"#,
            r#"["a\"b", "r"]"#,
        ];
        let firsts_tried = [
            *b"r*?[",
            *b"dddd",
            *b"tttt",
            *b"m*mm",
            *b",,,,",
            *b"\"\"\"\"",
        ];
        for text in texts {
            for firsts in firsts_tried {
                // shifted so that every quote falls on every position of a block
                for pad in 0..18 {
                    let padded = format!("{}{text}", " ".repeat(pad));
                    let (mut all, mut some) = (Vec::new(), Vec::new());
                    let every = each_plain_string(&padded, |s| {
                        if s.as_bytes().first().is_some_and(|b| firsts.contains(b)) {
                            all.push(s.to_owned());
                        }
                    });
                    let starting =
                        each_plain_string_starting(&padded, firsts, |s| some.push(s.to_owned()));
                    assert_eq!(starting, every, "{padded} {firsts:?}");
                    if every {
                        assert_eq!(some, all, "{padded} {firsts:?}");
                    }
                }
            }
        }
        // a string asked about that does not end stops the search
        assert!(!each_plain_string_starting(
            r#"["unterminated"#,
            *b"uuuu",
            |_| {}
        ));
        let mut found = Vec::new();
        assert!(each_plain_string_starting(texts[0], *b"r*?[", |s| found.push(s.to_owned())));
        assert_eq!(
            found,
            ["registry.internal/team-0/*", "*.corp", "?a", "[ab]c", "r"]
        );
    }

    #[test]
    fn a_string_is_found_by_its_text_as_a_list_holds_it() {
        let names = [
            "team-a",
            "xteam-a",
            "team-a-not",
            "kube-system",
            "a",
            "team-exempt-19",
        ];
        for name in names {
            for pad in 0..70 {
                // the name at every offset of a chunk, among names it starts or ends like
                let others = ["team-a-", "-team-a", "eam-a", "team-", "a-b"];
                let list: Vec<String> = others
                    .iter()
                    .chain([&name])
                    .map(|s| format!("\"{s}\""))
                    .collect();
                let text = format!("{}[{}]", " ".repeat(pad), list.join(","));
                for sought in names.iter().chain(&others) {
                    let expected = *sought == name || others.contains(sought);
                    assert_eq!(
                        has_string(&text, sought),
                        Some(expected),
                        "{sought} in {text}"
                    );
                }
            }
        }
        assert_eq!(has_string(r#"["a\"b", "c"]"#, "c"), None, "an escape");
        assert_eq!(
            has_string(r#"["a", "c"]"#, r#"a""#),
            None,
            "a quote in the needle"
        );
        assert_eq!(has_string(r#"["a", "c"]"#, ""), None, "an empty needle");
        assert_eq!(has_string("[]", "a"), Some(false));
    }

    #[test]
    fn quotes_and_backslashes_are_found_at_every_offset() {
        for len in 0..40 {
            for at in 0..len {
                for sought in [b'"', b'\\'] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = sought;
                    for from in 0..=at {
                        assert_eq!(quote_or_backslash(&bytes, from), Some(at));
                    }
                    assert_eq!(quote_or_backslash(&bytes, at + 1), None);
                }
            }
        }
        // bytes one above and below the sought ones, and high bytes, are not matches
        let near = [b'!', b'#', b'[', b']', 0x80, 0xa2, 0xdc, 0xff, 0x00];
        assert_eq!(quote_or_backslash(&near, 0), None);
    }
}
