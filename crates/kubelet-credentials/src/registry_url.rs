//! An `auths` key or an image name read as the kubelet reads it: as the rest of an `https://`
//! URL, with the rules of Go's `url.Parse` (<https://pkg.go.dev/net/url#Parse>) and
//! `net.SplitHostPort` (<https://pkg.go.dev/net#SplitHostPort>).
//!
//! Not WHATWG parsing (the `url` crate): hosts keep their case, default ports stay, dot
//! segments are not resolved and `[` may appear in hosts, and each of those changes which
//! `auths` key matches an image.

/// The parts of a URL the keyring reads, percent-decoded. Bytes, because decoding may leave
/// any bytes.
pub(super) struct RegistryUrl {
    /// The host with its `:port`, and the brackets of an IP literal.
    pub(super) host: Vec<u8>,
    /// The path, empty or starting with `/`.
    pub(super) path: Vec<u8>,
}

impl RegistryUrl {
    /// Reads `rest`, the text after `https://` or `http://`: `[userinfo@]host[/path]`, then an
    /// optional `?query` and `#fragment`, which are dropped. `None` when Go refuses the URL:
    /// - a control character (below U+0020, or U+007F) before the fragment;
    /// - a `%` not followed by two hex digits, anywhere but in the query;
    /// - a userinfo character other than letters, digits and ``-._:~!$&'()*+,;=%@``;
    /// - a host Go refuses (see [`decode_host`]).
    pub(super) fn parse(rest: &[u8]) -> Option<Self> {
        let (before_fragment, fragment) = split_at_first(rest, b'#');
        percent_decode(fragment, |_| true)?;
        if before_fragment.iter().any(|&b| b < 0x20 || b == 0x7f) {
            return None;
        }
        let (before_query, _query) = split_at_first(before_fragment, b'?');
        let slash = before_query.iter().position(|&b| b == b'/');
        let (authority, path) = before_query.split_at(slash.unwrap_or(before_query.len()));
        let host = match authority.iter().rposition(|&b| b == b'@') {
            Some(at) => {
                check_userinfo(&authority[..at])?;
                &authority[at + 1..]
            }
            None => authority,
        };
        Some(Self {
            host: decode_host(host)?,
            path: percent_decode(path, |_| true)?,
        })
    }

    /// The host's dot-separated labels and its port. The port is empty when the host has
    /// none, or when Go's `net.SplitHostPort` refuses it; the labels are then those of the
    /// whole host, any `:port` and brackets included.
    pub(super) fn labels_and_port(&self) -> (Vec<&[u8]>, &[u8]) {
        let (name, port) = name_and_port(&self.host).unwrap_or((&self.host, b""));
        (name.split(|&b| b == b'.').collect(), port)
    }
}

/// `s` before the first `sep`, and after it (empty when there is none).
fn split_at_first(s: &[u8], sep: u8) -> (&[u8], &[u8]) {
    match s.iter().position(|&b| b == sep) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, b""),
    }
}

/// Userinfo is not kept, but Go refuses characters it does not allow there, and bad escapes.
fn check_userinfo(userinfo: &[u8]) -> Option<()> {
    let allowed = |b: &u8| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(b);
    if !userinfo.iter().all(allowed) {
        return None;
    }
    percent_decode(userinfo, |_| true).map(drop)
}

/// A byte of a percent-encoded text, as written or as a `%XX` escape.
#[derive(Clone, Copy)]
enum Encoded {
    Plain(u8),
    Escaped(u8),
}

/// Decodes `%XX` escapes; `None` on a `%` without two hex digits after it, or on a byte
/// `accept` refuses.
fn percent_decode(s: &[u8], accept: impl Fn(Encoded) -> bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len());
    let mut rest = s;
    while let Some((&first, after)) = rest.split_first() {
        let encoded = if first == b'%' {
            let digits = after.get(..2)?;
            let hex = std::str::from_utf8(digits).ok()?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            rest = &after[2..];
            Encoded::Escaped(u8::from_str_radix(hex, 16).ok()?)
        } else {
            rest = after;
            Encoded::Plain(first)
        };
        if !accept(encoded) {
            return None;
        }
        out.push(match encoded {
            Encoded::Plain(b) | Encoded::Escaped(b) => b,
        });
    }
    Some(out)
}

/// ASCII Go allows as written in a host: letters, digits and `` -_.~!$&'()*+,;=:[]<>" ``.
fn host_ascii_allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&b)
}

/// What a host may hold outside an IPv6 zone: non-ASCII bytes, written or escaped, ASCII of
/// [`host_ascii_allowed`] as written, and `%25` (an escaped `%`).
fn host_byte(encoded: Encoded) -> bool {
    match encoded {
        Encoded::Plain(b) => !b.is_ascii() || host_ascii_allowed(b),
        Encoded::Escaped(b) => !b.is_ascii() || b == b'%',
    }
}

/// What an IPv6 zone (`%25` up to the `]`) may hold: as a host, except that escapes must be
/// of ASCII, of [`host_ascii_allowed`] or `%` or a space.
fn zone_byte(encoded: Encoded) -> bool {
    match encoded {
        Encoded::Plain(_) => host_byte(encoded),
        Encoded::Escaped(b) => b == b'%' || b == b' ' || (b.is_ascii() && host_ascii_allowed(b)),
    }
}

/// Whether `s` is empty or a `:` followed by ASCII digits (possibly none).
fn is_optional_port(s: &[u8]) -> bool {
    s.is_empty()
        || s.strip_prefix(b":")
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
}

/// The decoded host, or `None` when Go refuses it. A host starting with `[` is an IP literal
/// up to its last `]`, whose zone, if any, starts at the first `%25` inside the brackets;
/// any other host ends at its last `:`. Either may be followed by an optional port.
fn decode_host(host: &[u8]) -> Option<Vec<u8>> {
    let Some(literal) = host.strip_prefix(b"[") else {
        let port_from = host.iter().rposition(|&b| b == b':').unwrap_or(host.len());
        if !is_optional_port(&host[port_from..]) {
            return None;
        }
        return percent_decode(host, host_byte);
    };
    let close = literal.iter().rposition(|&b| b == b']')?;
    let (inside, closed) = literal.split_at(close);
    if !is_optional_port(&closed[1..]) {
        return None;
    }
    let zone_from = inside.windows(3).position(|w| w == b"%25");
    let (address, zone) = inside.split_at(zone_from.unwrap_or(inside.len()));
    let mut decoded = vec![b'['];
    decoded.extend(percent_decode(address, host_byte)?);
    decoded.extend(percent_decode(zone, zone_byte)?);
    decoded.extend(percent_decode(closed, host_byte)?);
    Some(decoded)
}

/// `host:port` split as Go's `net.SplitHostPort` splits it: the port is after the last `:`;
/// the name before it is either `[...]` (returned without brackets) or free of `:`; neither
/// the name inside any brackets nor the port may hold `[` or `]`. `None` otherwise.
fn name_and_port(host: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = host.iter().rposition(|&b| b == b':')?;
    let (name, port) = (&host[..colon], &host[colon + 1..]);
    let name = match name.strip_prefix(b"[") {
        Some(bracketed) => bracketed.strip_suffix(b"]")?,
        None if name.contains(&b':') => return None,
        None => name,
    };
    let bracket = |s: &[u8]| s.iter().any(|&b| b == b'[' || b == b']');
    if bracket(name) || bracket(port) {
        return None;
    }
    Some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Credential, Keyring};

    /// The host and path `rest` parses to, as text (lossily), or `None`.
    fn parsed(rest: &str) -> Option<(String, String)> {
        let url = RegistryUrl::parse(rest.as_bytes())?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Some((text(&url.host), text(&url.path)))
    }

    /// Checks `(rest, Some((host, path)))` and `(rest, None)` cases.
    fn assert_parses(cases: &[(&str, Option<(&str, &str)>)]) {
        for &(rest, expected) in cases {
            let expected = expected.map(|(h, p)| (h.to_owned(), p.to_owned()));
            assert_eq!(parsed(rest), expected, "{rest:?}");
        }
    }

    #[test]
    fn host_then_path_query_and_fragment_dropped() {
        assert_parses(&[
            ("registry.example.test", Some(("registry.example.test", ""))),
            (
                "registry.example.test/",
                Some(("registry.example.test", "/")),
            ),
            (
                "registry.example.test/team-a/app",
                Some(("registry.example.test", "/team-a/app")),
            ),
            (
                "registry.example.test?tag=v1",
                Some(("registry.example.test", "")),
            ),
            (
                "registry.example.test/team-a#top",
                Some(("registry.example.test", "/team-a")),
            ),
            (
                "registry.example.test/a?b/c#d?e",
                Some(("registry.example.test", "/a")),
            ),
            // The host ends at the first `/`, even an empty one.
            ("/team-a", Some(("", "/team-a"))),
            ("", Some(("", ""))),
        ]);
    }

    #[test]
    fn userinfo_is_dropped_but_checked() {
        assert_parses(&[
            (
                "bot:token@registry.example.test",
                Some(("registry.example.test", "")),
            ),
            // The host starts after the last `@`.
            (
                "bot@team@registry.example.test",
                Some(("registry.example.test", "")),
            ),
            (
                "b%6Ft:t!$&'()*+,;=~@registry.example.test",
                Some(("registry.example.test", "")),
            ),
            ("bot token@registry.example.test", None),
            ("bot{x}@registry.example.test", None),
            ("bot%zz@registry.example.test", None),
            ("bot%4@registry.example.test", None),
        ]);
    }

    #[test]
    fn control_characters_fail_before_the_fragment_only() {
        assert_parses(&[
            ("registry.example.test/a\u{1}", None),
            ("registry.example.test/a\u{7f}", None),
            ("registry.example.test?q=\t", None),
            (
                "registry.example.test#\u{1}",
                Some(("registry.example.test", "")),
            ),
        ]);
    }

    #[test]
    fn escapes_decode_in_the_path_and_are_checked_in_the_fragment() {
        assert_parses(&[
            (
                "registry.example.test/te%61m-a",
                Some(("registry.example.test", "/team-a")),
            ),
            (
                "registry.example.test/a%2Fb",
                Some(("registry.example.test", "/a/b")),
            ),
            (
                "registry.example.test/caf%C3%A9",
                Some(("registry.example.test", "/café")),
            ),
            // Dot segments stay.
            (
                "registry.example.test/a/../b",
                Some(("registry.example.test", "/a/../b")),
            ),
            ("registry.example.test/%zz", None),
            ("registry.example.test/%4", None),
            ("registry.example.test#%zz", None),
            // The query is not read at all.
            (
                "registry.example.test?%zz",
                Some(("registry.example.test", "")),
            ),
        ]);
    }

    #[test]
    fn a_port_is_digits_after_the_last_colon() {
        assert_parses(&[
            (
                "registry.example.test:5000",
                Some(("registry.example.test:5000", "")),
            ),
            // A default port stays, and an empty one is allowed.
            (
                "registry.example.test:443/a",
                Some(("registry.example.test:443", "/a")),
            ),
            (
                "registry.example.test:",
                Some(("registry.example.test:", "")),
            ),
            ("registry.example.test:http", None),
            ("registry.example.test:50 0", None),
            ("registry:5000:6000", Some(("registry:5000:6000", ""))),
            ("registry:x:6000", Some(("registry:x:6000", ""))),
        ]);
    }

    #[test]
    fn hosts_keep_their_case_and_allow_only_some_ascii() {
        assert_parses(&[
            ("Registry.Example.TEST", Some(("Registry.Example.TEST", ""))),
            ("*.example.test", Some(("*.example.test", ""))),
            (
                "node[0-9]!$&'()+,;=~_<>\".test",
                Some(("node[0-9]!$&'()+,;=~_<>\".test", "")),
            ),
            ("café.test", Some(("café.test", ""))),
            ("bad host.test", None),
            ("bad{host}.test", None),
            ("bad\\host.test", None),
            ("bad|host.test", None),
            // Escapes of non-ASCII bytes decode; of ASCII only `%25` (a `%`) is allowed.
            ("caf%C3%A9.test", Some(("café.test", ""))),
            ("a%25b.test", Some(("a%b.test", ""))),
            ("%41.test", None),
            ("a%2Eb.test", None),
            ("a%zz.test", None),
        ]);
    }

    #[test]
    fn ip_literals_keep_their_brackets_and_may_have_a_zone() {
        assert_parses(&[
            ("[::1]", Some(("[::1]", ""))),
            ("[::1]:5000/a", Some(("[::1]:5000", "/a"))),
            ("[::1]:", Some(("[::1]:", ""))),
            ("[::1", None),
            ("[::1]5000", None),
            ("[::1]:50x", None),
            // The literal runs to the last `]`.
            ("[a]b]", Some(("[a]b]", ""))),
            // A zone starts at the first `%25`; its escapes may be of ASCII allowed in hosts, a
            // space or `%`, and no other.
            ("[fe80::1%25eth0]:5000", Some(("[fe80::1%eth0]:5000", ""))),
            ("[fe80::1%25%41%20%25]", Some(("[fe80::1%A %]", ""))),
            ("[fe80::1%25%7B]", None),
            ("[fe80::1%25%C3%A9]", None),
            ("[fe80::1%25{]", None),
            // Outside the zone the host's rules hold.
            ("[fe80::%C3%A9%25x]", Some(("[fe80::é%x]", ""))),
            ("[fe80::%41%25x]", None),
        ]);
    }

    /// The labels and port of a host, as text.
    fn labels_and_port(host: &str) -> (Vec<String>, String) {
        let url = RegistryUrl {
            host: host.as_bytes().to_vec(),
            path: Vec::new(),
        };
        let (labels, port) = url.labels_and_port();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (labels.into_iter().map(text).collect(), text(port))
    }

    #[test]
    fn hosts_split_into_labels_and_port() {
        let cases: [(&str, &[&str], &str); 12] = [
            (
                "registry.example.test",
                &["registry", "example", "test"],
                "",
            ),
            (
                "registry.example.test:5000",
                &["registry", "example", "test"],
                "5000",
            ),
            ("registry:", &["registry"], ""),
            ("", &[""], ""),
            ("a..b", &["a", "", "b"], ""),
            ("[::1]:5000", &["::1"], "5000"),
            ("[]:5000", &[""], "5000"),
            // Refused splits leave the whole host, `:port` and brackets included, as labels.
            ("[::1]", &["[::1]"], ""),
            ("a:b:5000", &["a:b:5000"], ""),
            ("r]x.test:5000", &["r]x", "test:5000"], ""),
            ("[a[b]:5000", &["[a[b]:5000"], ""),
            ("[a]x]:5000", &["[a]x]:5000"], ""),
        ];
        for (host, labels, port) in cases {
            let expected = (
                labels.iter().map(|l| l.to_string()).collect(),
                port.to_owned(),
            );
            assert_eq!(labels_and_port(host), expected, "{host:?}");
        }
    }

    #[test]
    fn the_keyring_skips_keys_that_do_not_parse() {
        for key in [
            "registry.example.test:http",
            "registry example.test",
            "registry.example.test/%zz",
            "registry.example.test\u{7f}",
            "[fe80::1",
            "reg%69stry.example.test",
            "https://bot token@registry.example.test",
        ] {
            let mut keyring = Keyring::new();
            keyring.add(key, Credential::new("bot", "pw"));
            assert!(keyring.is_empty(), "{key:?}");
        }
        let mut keyring = Keyring::new();
        keyring.add("http://bot:pw@[::1]:5000/v2/", Credential::new("bot", "pw"));
        assert!(keyring.covers("[::1]:5000/team-a/app"));
        assert!(!keyring.covers("[::1]:5001/team-a/app"));
    }
}
