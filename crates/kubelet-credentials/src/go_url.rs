//! Go's `net/url` (and `net.SplitHostPort`), as far as the keyring reads them: unlike WHATWG
//! parsing (the `url` crate), hosts keep their case, default ports stay, dot segments are not
//! resolved and `[` may appear in hosts, and each of those changes which `auths` key matches an
//! image.

/// What the keyring reads of a parsed URL: `Host` (with its port, percent-decoded) and `Path`
/// (percent-decoded). Bytes, because Go strings may hold any bytes after decoding.
pub(super) struct GoUrl {
    pub(super) host: Vec<u8>,
    pub(super) path: Vec<u8>,
}

/// Go's `url.Parse` for a URL starting with `https:` or `http:` (the only ones the keyring
/// builds): fragment and query are cut off, control characters, bad percent-escapes, bad ports
/// and characters Go refuses in hosts fail.
pub(super) fn parse_http_url(raw: &[u8]) -> Option<GoUrl> {
    let (raw, fragment) = match raw.iter().position(|&b| b == b'#') {
        Some(i) => (&raw[..i], &raw[i + 1..]),
        None => (raw, &b""[..]),
    };
    unescape(fragment, Escaping::Other)?;
    if raw.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return None;
    }
    let rest = raw
        .strip_prefix(b"https:")
        .or_else(|| raw.strip_prefix(b"http:"))?;
    let rest = match rest.iter().position(|&b| b == b'?') {
        Some(i) => &rest[..i],
        None => rest,
    };
    let (host, path) = if let Some(after) = rest.strip_prefix(b"//") {
        let (authority, path) = match after.iter().position(|&b| b == b'/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, &b""[..]),
        };
        (parse_authority(authority)?, path)
    } else if rest.starts_with(b"/") {
        (Vec::new(), rest)
    } else {
        // Opaque URL: no host, no path.
        return Some(GoUrl {
            host: Vec::new(),
            path: Vec::new(),
        });
    };
    Some(GoUrl {
        host,
        path: unescape(path, Escaping::Other)?,
    })
}

/// `parseAuthority`: the host, after checking any `userinfo@` before it.
fn parse_authority(authority: &[u8]) -> Option<Vec<u8>> {
    let (userinfo, host) = match authority.iter().rposition(|&b| b == b'@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let host = parse_host(host)?;
    if let Some(userinfo) = userinfo {
        let valid = |b: &u8| b.is_ascii_alphanumeric() || b"-._:~!$&'()*+,;=%@".contains(b);
        if !userinfo.iter().all(valid) {
            return None;
        }
        unescape(userinfo, Escaping::Other)?;
    }
    Some(host)
}

/// `parseHost`: an `[IP-literal]` with an optional zone, or a name; either with an optional
/// all-digit `:port`.
fn parse_host(host: &[u8]) -> Option<Vec<u8>> {
    if host.first() == Some(&b'[') {
        let close = host.iter().rposition(|&b| b == b']')?;
        if !valid_optional_port(&host[close + 1..]) {
            return None;
        }
        let zone = host[..close].windows(3).position(|w| w == b"%25");
        if let Some(zone) = zone {
            let mut decoded = unescape(&host[..zone], Escaping::Host)?;
            decoded.extend(unescape(&host[zone..close], Escaping::Zone)?);
            decoded.extend(unescape(&host[close..], Escaping::Host)?);
            return Some(decoded);
        }
    } else if let Some(colon) = host.iter().rposition(|&b| b == b':') {
        if !valid_optional_port(&host[colon..]) {
            return None;
        }
    }
    unescape(host, Escaping::Host)
}

/// `validOptionalPort`: empty, or `:` followed by digits only.
fn valid_optional_port(port: &[u8]) -> bool {
    match port.split_first() {
        None => true,
        Some((&b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

/// Which part of a URL `unescape` decodes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escaping {
    Host,
    Zone,
    Other,
}

/// Go's `unescape`: decodes `%XX`, failing on malformed escapes and, in hosts, on ASCII
/// characters Go does not allow there and on escapes of ASCII other than `%25`.
fn unescape(s: &[u8], mode: Escaping) -> Option<Vec<u8>> {
    let hex = |b: Option<&u8>| b.and_then(|b| char::from(*b).to_digit(16));
    let in_host = mode != Escaping::Other;
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&c) = s.get(i) {
        if c == b'%' {
            let (hi, lo) = (hex(s.get(i + 1))?, hex(s.get(i + 2))?);
            let byte = u8::try_from(hi << 4 | lo).ok()?;
            let refused = match mode {
                Escaping::Host => hi < 8 && byte != b'%',
                Escaping::Zone => byte != b'%' && byte != b' ' && host_refuses(byte),
                Escaping::Other => false,
            };
            if refused {
                return None;
            }
            out.push(byte);
            i += 3;
        } else {
            if in_host && c < 0x80 && host_refuses(c) {
                return None;
            }
            out.push(c);
            i += 1;
        }
    }
    Some(out)
}

/// `shouldEscape(c, encodeHost)` for ASCII: true for what Go refuses unescaped in a host.
fn host_refuses(c: u8) -> bool {
    !(c.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:[]<>\"".contains(&c))
}

/// Go's `net.SplitHostPort`.
pub(super) fn split_host_port(hostport: &[u8]) -> Option<(&[u8], &[u8])> {
    let last_colon = hostport.iter().rposition(|&b| b == b':')?;
    let (host, open_from, close_from) = if hostport.first() == Some(&b'[') {
        let end = hostport.iter().position(|&b| b == b']')?;
        if end + 1 != last_colon {
            return None;
        }
        (&hostport[1..end], 1, end + 1)
    } else {
        let host = &hostport[..last_colon];
        if host.contains(&b':') {
            return None;
        }
        (host, 0, 0)
    };
    if hostport[open_from..].contains(&b'[') || hostport[close_from..].contains(&b']') {
        return None;
    }
    Some((host, &hostport[last_colon + 1..]))
}

#[cfg(test)]
mod tests {
    use crate::{Credential, Keyring};

    #[test]
    fn keys_parse_as_go_net_url_does() {
        let hit = |key: &str, image: &str| {
            let mut keyring = Keyring::new();
            keyring.add(key, Credential::new("u", "p"));
            !keyring.lookup(image).is_empty()
        };
        // userinfo, query and fragment are dropped; the port is kept, even a default one.
        assert!(hit(
            "https://user:pw@registry.example.com?x=1#frag",
            "registry.example.com/app"
        ));
        assert!(hit(
            "registry.example.com:443",
            "registry.example.com:443/app"
        ));
        assert!(!hit("registry.example.com:443", "registry.example.com/app"));
        assert!(!hit(
            "registry.example.com",
            "registry.example.com:5000/app"
        ));
        // Percent-escapes in the path are decoded; hosts are not lowercased.
        assert!(hit(
            "registry.example.com/te%61m",
            "registry.example.com/team/app"
        ));
        assert!(!hit("Registry.example.com", "registry.example.com/app"));
        // /v1/ and /v2/ are dropped only as a prefix with its slash.
        assert!(hit(
            "registry.example.com/v2/team",
            "registry.example.com/team/app"
        ));
        assert!(!hit(
            "registry.example.com/v2team",
            "registry.example.com/team/app"
        ));
        // Keys Go refuses are skipped.
        for key in [
            "registry.example.com:port",
            "bad host.io",
            "r.io/%zz",
            "r.io\u{7f}",
            "[::1",
            "a%41.io",
        ] {
            let mut keyring = Keyring::new();
            keyring.add(key, Credential::new("u", "p"));
            assert!(keyring.is_empty(), "{key:?}");
        }
        // IPv6 literals keep their brackets in the host.
        assert!(hit("[::1]:5000", "[::1]:5000/app"));
        assert!(!hit("[::1]:5000", "[::1]:5001/app"));
    }
}
