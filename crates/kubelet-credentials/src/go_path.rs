//! Go's `path.Match` (what `filepath.Match` is on Linux), which the keyring applies to each
//! host label of an `auths` key: `*`, `?`, `[...]` classes and `\` escapes, on bytes.

/// A malformed glob (`path.ErrBadPattern`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BadPattern;

/// Go's `path.Match` (what `filepath.Match` is on Linux), on bytes.
pub(super) fn path_match(mut pattern: &[u8], mut name: &[u8]) -> Result<bool, BadPattern> {
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // Stars end the pattern: they take whatever is left, short of a `/`.
            return Ok(!name.contains(&b'/'));
        }
        if let Some(rest) = match_chunk(chunk, name)? {
            if rest.is_empty() || !pattern.is_empty() {
                name = rest;
                continue;
            }
        }
        if star {
            let mut i = 0;
            while i < name.len() && name[i] != b'/' {
                if let Some(rest) = match_chunk(chunk, &name[i + 1..])? {
                    if rest.is_empty() || !pattern.is_empty() {
                        name = rest;
                        continue 'pattern;
                    }
                }
                i += 1;
            }
        }
        // A mismatch is only `false` when the unread pattern is well formed: Go reports a
        // bad class anywhere in it, whatever the name.
        while !pattern.is_empty() {
            let (_, chunk, rest) = scan_chunk(pattern);
            pattern = rest;
            match_chunk(chunk, b"")?;
        }
        return Ok(false);
    }
    Ok(name.is_empty())
}

/// `scanChunk`: leading stars, then everything up to the next star outside `[...]`.
fn scan_chunk(mut pattern: &[u8]) -> (bool, &[u8], &[u8]) {
    let mut star = false;
    while let Some(rest) = pattern.strip_prefix(b"*") {
        pattern = rest;
        star = true;
    }
    let mut in_range = false;
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 < pattern.len() => i += 1,
            b'[' => in_range = true,
            b']' => in_range = false,
            b'*' if !in_range => break,
            _ => {}
        }
        i += 1;
    }
    (star, &pattern[..i], &pattern[i..])
}

/// `matchChunk`: matches a star-free chunk at the start of `s`, returning what is left.
fn match_chunk<'a>(mut chunk: &[u8], mut s: &'a [u8]) -> Result<Option<&'a [u8]>, BadPattern> {
    // Once the name fails, parsing goes on without it: a bad class later in the chunk is
    // still an error.
    let mut failed = false;
    while let Some(&c) = chunk.first() {
        if !failed && s.is_empty() {
            failed = true;
        }
        match c {
            b'[' => {
                let mut rune = 0;
                if !failed {
                    let (r, n) = decode_rune(s);
                    rune = r;
                    s = s.get(n..).unwrap_or_default();
                }
                chunk = &chunk[1..];
                let negated = chunk.first() == Some(&b'^');
                if negated {
                    chunk = &chunk[1..];
                }
                let mut matched = false;
                let mut ranges = 0;
                loop {
                    if ranges > 0 && chunk.first() == Some(&b']') {
                        chunk = &chunk[1..];
                        break;
                    }
                    let (lo, rest) = get_esc(chunk)?;
                    chunk = rest;
                    let mut hi = lo;
                    if let Some(rest) = chunk.strip_prefix(b"-") {
                        (hi, chunk) = get_esc(rest)?;
                    }
                    if lo <= rune && rune <= hi {
                        matched = true;
                    }
                    ranges += 1;
                }
                if matched == negated {
                    failed = true;
                }
            }
            b'?' => {
                if !failed {
                    if s.first() == Some(&b'/') {
                        failed = true;
                    }
                    let (_, n) = decode_rune(s);
                    s = s.get(n..).unwrap_or_default();
                }
                chunk = &chunk[1..];
            }
            _ => {
                let mut literal = c;
                if c == b'\\' {
                    chunk = &chunk[1..];
                    literal = *chunk.first().ok_or(BadPattern)?;
                }
                if !failed {
                    if s.first() != Some(&literal) {
                        failed = true;
                    }
                    s = s.get(1..).unwrap_or_default();
                }
                chunk = &chunk[1..];
            }
        }
    }
    Ok(if failed { None } else { Some(s) })
}

/// `getEsc`: one possibly escaped character of a `[...]` class, and what follows it (which must
/// not be empty: the class is still open).
fn get_esc(chunk: &[u8]) -> Result<(u32, &[u8]), BadPattern> {
    let chunk = match chunk.first() {
        None | Some(b'-') | Some(b']') => return Err(BadPattern),
        Some(b'\\') => &chunk[1..],
        Some(_) => chunk,
    };
    if chunk.is_empty() {
        return Err(BadPattern);
    }
    let (rune, n) = decode_rune(chunk);
    if rune == u32::from(char::REPLACEMENT_CHARACTER) && n == 1 {
        return Err(BadPattern);
    }
    let rest = chunk.get(n..).unwrap_or_default();
    if rest.is_empty() {
        return Err(BadPattern);
    }
    Ok((rune, rest))
}

/// Go's `utf8.DecodeRune`: the first character and its length; invalid UTF-8 is U+FFFD of
/// length 1, an empty input U+FFFD of length 0.
fn decode_rune(s: &[u8]) -> (u32, usize) {
    let replacement = u32::from(char::REPLACEMENT_CHARACTER);
    match s.utf8_chunks().next() {
        None => (replacement, 0),
        Some(chunk) => match chunk.valid().chars().next() {
            Some(c) => (u32::from(c), c.len_utf8()),
            None => (replacement, 1),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credential, Keyring};

    #[test]
    fn globs_follow_go_path_match() {
        let cases: [(&str, &str, Result<bool, BadPattern>); 18] = [
            // `*` takes any run of characters, including none.
            ("*", "registry", Ok(true)),
            ("*", "", Ok(true)),
            ("reg*", "reg", Ok(true)),
            ("reg*try", "registry", Ok(true)),
            ("reg*try", "regentry-eu", Ok(false)),
            // `?` takes exactly one character.
            ("reg?", "reg1", Ok(true)),
            ("reg?", "reg", Ok(false)),
            // A class takes one character in (or, with `^`, out of) its ranges.
            ("eu[0-9]", "eu4", Ok(true)),
            ("eu[0-9]", "eux", Ok(false)),
            ("eu[^0-9]", "eu4", Ok(false)),
            ("eu[^0-9]", "eux", Ok(true)),
            // `\` makes the next character literal.
            ("team\\*", "team*", Ok(true)),
            ("team\\*", "teams", Ok(false)),
            // Malformed patterns fail whatever the name: an open class, a dangling escape, an
            // empty class.
            ("[", "r", Err(BadPattern)),
            ("eu[0-", "eu4", Err(BadPattern)),
            ("team\\", "team", Err(BadPattern)),
            ("x[]]", "]", Err(BadPattern)),
            ("reg*[", "registry", Err(BadPattern)),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(
                path_match(pattern.as_bytes(), name.as_bytes()),
                expected,
                "{pattern} {name}"
            );
        }
        // A class inside a host label, and a malformed one that never matches.
        let mut keyring = Keyring::new();
        keyring.add("reg[0-9].example.com", Credential::new("u", "p"));
        keyring.add("bad[.example.com", Credential::new("x", "y"));
        assert_eq!(keyring.lookup("reg7.example.com/app").len(), 1);
        assert!(keyring.lookup("regx.example.com/app").is_empty());
        assert!(keyring.lookup("bad[.example.com/app").is_empty());
    }
}
