//! Image pull secrets and the kubelet's keyring: which registry credentials a pull of a given
//! image will try, ported rule for rule from the kubelet's `pkg/credentialprovider`
//! (`keyring.go`, `config.go`, `secrets/secrets.go`), so that the policy checks an image with
//! exactly the credentials the kubelet would send, or with none when it would pull anonymously.
//!
//! URLs are parsed by a port of the part of Go's `net/url` the keyring relies on rather than by
//! the `url` crate: WHATWG parsing lowercases and IDNA-encodes hosts, drops default ports,
//! resolves dot segments and refuses `[` in hosts, and each of those changes which `auths` key
//! matches an image. Likewise the JSON of a secret is read with Go's `encoding/json` rules
//! (case-insensitive field names, `null` as "unset", duplicate keys applied in order).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
const DOCKERCFG_KEY: &str = ".dockercfg";
/// The keyring key whose credentials serve Docker Hub images no key matched
/// (`https://index.docker.io/v1/` is stored under it).
const DEFAULT_REGISTRY_HOST: &[u8] = b"index.docker.io";

/// Registry credentials from a pull secret. Deliberately without derived `Debug`, `Display` or
/// `Serialize`, so that no log line or error message can carry them by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    username: String,
    password: String,
    identity_token: Option<String>,
    registry_token: Option<String>,
}

impl Credential {
    /// A username/password pair: all the kubelet ever takes from a pull secret.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credential {
            username: username.into(),
            password: password.into(),
            identity_token: None,
            registry_token: None,
        }
    }

    /// The same credential with an OAuth identity token, for sources other than pull secrets.
    pub fn with_identity_token(mut self, token: impl Into<String>) -> Self {
        self.identity_token = Some(token.into());
        self
    }

    /// The same credential with a registry bearer token, for sources other than pull secrets.
    pub fn with_registry_token(mut self, token: impl Into<String>) -> Self {
        self.registry_token = Some(token.into());
        self
    }

    /// The username (possibly empty: the kubelet keeps entries without one).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password (possibly empty).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The identity token. Always `None` for pull secrets: the kubelet does not read
    /// `identitytoken` from them.
    pub fn identity_token(&self) -> Option<&str> {
        self.identity_token.as_deref()
    }

    /// The registry token. Always `None` for pull secrets: the kubelet does not read
    /// `registrytoken` from them.
    pub fn registry_token(&self) -> Option<&str> {
        self.registry_token.as_deref()
    }

    /// The credential as the credentialed host capability takes it: `username` and `password`,
    /// plus `identityToken` / `registryToken` when present.
    pub fn to_capability_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("username".into(), Value::String(self.username.clone()));
        object.insert("password".into(), Value::String(self.password.clone()));
        if let Some(token) = &self.identity_token {
            object.insert("identityToken".into(), Value::String(token.clone()));
        }
        if let Some(token) = &self.registry_token {
            object.insert("registryToken".into(), Value::String(token.clone()));
        }
        Value::Object(object)
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential { username: <redacted>, password: <redacted>, .. }")
    }
}

/// Why a pull secret cannot be used. The texts name the secret, its data key and the `auths`
/// entry, never a byte of the credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretError {
    /// Not a docker-config secret: the kubelet silently skips it.
    WrongType {
        /// `namespace/name` of the secret.
        secret: String,
        /// The secret's `type` (empty when absent).
        found: String,
    },
    /// The type is right but the data key is absent: the kubelet silently skips it.
    MissingKey {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
    },
    /// The type is right but the data key is empty: the kubelet silently skips it.
    EmptyKey {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
    },
    /// The data value is not base64 (or not a string).
    BadBase64 {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
    },
    /// The decoded data is not JSON.
    BadJson {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// Where the syntax error is (1-based).
        line: usize,
        /// Where the syntax error is (1-based).
        column: usize,
    },
    /// The JSON does not have the shape the kubelet decodes (e.g. `"auths"` is not an object).
    BadDocument {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// What is wrong, naming fields only.
        problem: &'static str,
    },
    /// One registry entry cannot be decoded.
    BadEntry {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// The entry's registry key, with any `user:password@` replaced by `<redacted>@`.
        entry: String,
        /// What is wrong with it.
        problem: EntryProblem,
    },
}

/// What is wrong with one registry entry of a pull secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryProblem {
    /// The entry is neither an object nor `null`.
    NotAnObject,
    /// The named field is neither a string nor `null`.
    NotAString(&'static str),
    /// `auth` is not base64.
    AuthNotBase64,
    /// `auth` decodes to text without the `:` between username and password.
    AuthNoSeparator,
}

impl SecretError {
    /// True when the kubelet skips this secret without a word (it is not a docker-config
    /// secret, or has no data under its type's key); false when the secret is malformed, which
    /// makes the kubelet fail every pull of the pod.
    pub fn is_wrong_type(&self) -> bool {
        matches!(
            self,
            SecretError::WrongType { .. }
                | SecretError::MissingKey { .. }
                | SecretError::EmptyKey { .. }
        )
    }
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::WrongType { secret, found } => write!(
                f,
                "secret {secret:?} has type {found:?}, not {DOCKER_CONFIG_JSON_TYPE} or {DOCKERCFG_TYPE}"
            ),
            SecretError::MissingKey { secret, key } => {
                write!(f, "secret {secret:?}: key {key:?} is missing")
            }
            SecretError::EmptyKey { secret, key } => {
                write!(f, "secret {secret:?}: key {key:?} is empty")
            }
            SecretError::BadBase64 { secret, key } => {
                write!(f, "secret {secret:?}: key {key:?} is not valid base64")
            }
            SecretError::BadJson {
                secret,
                key,
                line,
                column,
            } => write!(
                f,
                "secret {secret:?}: key {key:?} is not valid JSON (line {line}, column {column})"
            ),
            SecretError::BadDocument {
                secret,
                key,
                problem,
            } => write!(f, "secret {secret:?}: key {key:?}: {problem}"),
            SecretError::BadEntry {
                secret,
                key,
                entry,
                problem,
            } => {
                write!(f, "secret {secret:?}: key {key:?}: entry {entry:?}: ")?;
                match problem {
                    EntryProblem::NotAnObject => f.write_str("is not an object"),
                    EntryProblem::NotAString(field) => write!(f, "{field:?} is not a string"),
                    EntryProblem::AuthNotBase64 => f.write_str("\"auth\" is not valid base64"),
                    EntryProblem::AuthNoSeparator => f.write_str("\"auth\" has no ':' separator"),
                }
            }
        }
    }
}

impl std::error::Error for SecretError {}

/// Parses a Secret object as the Kubernetes API returns it (`type`, and `data` with base64
/// values) into its registry entries, as the kubelet's `MakeDockerKeyring` reads them:
/// `kubernetes.io/dockerconfigjson` holds `{"auths": {KEY: ENTRY}}` under `.dockerconfigjson`,
/// `kubernetes.io/dockercfg` holds `{KEY: ENTRY}` under `.dockercfg`. An entry's `auth`
/// (base64 `user:password`, padded or not) overrides its `username`/`password`; other fields,
/// `identitytoken` and `registrytoken` included, are ignored as the kubelet ignores them.
///
/// `secret_name` is `namespace/name`, for messages. Entries come sorted by key, which is as good
/// as the kubelet's (random) map order since [`Keyring`] sorts its keys anyway.
pub fn parse_pull_secret(
    secret_name: &str,
    secret: &Value,
) -> Result<Vec<(String, Credential)>, SecretError> {
    let secret_type = secret.get("type").and_then(Value::as_str).unwrap_or("");
    let (key, is_config_json) = match secret_type {
        DOCKER_CONFIG_JSON_TYPE => (DOCKER_CONFIG_JSON_KEY, true),
        DOCKERCFG_TYPE => (DOCKERCFG_KEY, false),
        _ => {
            return Err(SecretError::WrongType {
                secret: secret_name.to_owned(),
                found: secret_type.to_owned(),
            })
        }
    };
    let name = || secret_name.to_owned();
    let bad_base64 = || SecretError::BadBase64 {
        secret: name(),
        key,
    };
    let encoded = match secret.get("data").and_then(|data| data.get(key)) {
        None | Some(Value::Null) => {
            return Err(SecretError::MissingKey {
                secret: name(),
                key,
            })
        }
        Some(Value::String(encoded)) => encoded,
        Some(_) => return Err(bad_base64()),
    };
    // Go's encoding/json decodes `[]byte` with base64.StdEncoding.
    let bytes = decode_base64(encoded.as_bytes(), true).ok_or_else(bad_base64)?;
    if bytes.is_empty() {
        return Err(SecretError::EmptyKey {
            secret: name(),
            key,
        });
    }
    // Go replaces invalid UTF-8 in JSON strings instead of failing.
    let document: GoJson =
        serde_json::from_str(&String::from_utf8_lossy(&bytes)).map_err(|error| {
            SecretError::BadJson {
                secret: name(),
                key,
                line: error.line(),
                column: error.column(),
            }
        })?;
    let decoded = if is_config_json {
        decode_config_json(&document)
    } else {
        decode_dockercfg(&document)
    };
    decoded
        .map(|entries| entries.into_iter().collect())
        .map_err(|problem| match problem {
            Problem::Document(problem) => SecretError::BadDocument {
                secret: name(),
                key,
                problem,
            },
            Problem::Entry(entry, problem) => SecretError::BadEntry {
                secret: name(),
                key,
                entry: redact_userinfo(&entry),
                problem,
            },
        })
}

/// The kubelet's `BasicDockerKeyring`: credentials by registry key, looked up by image.
#[derive(Default, Clone)]
pub struct Keyring {
    /// Credentials by key (`host[:port][/path]`), each list in insertion order. Iterated in
    /// reverse, the keys are the kubelet's reverse-sorted index: longer paths come first.
    creds: BTreeMap<Vec<u8>, Vec<Credential>>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.creds.len())
            .finish_non_exhaustive()
    }
}

impl Keyring {
    /// An empty keyring: every lookup pulls anonymously.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one `auths` entry, as `BasicDockerKeyring.Add` does: `https://` is put in front of a
    /// key without `https://` or `http://`, the URL is parsed as Go's `net/url` does (a key
    /// that does not parse is skipped, as the kubelet skips it), a `/v1/` or `/v2/` path prefix
    /// is dropped, and the credential is filed under `host[:port]` plus the path unless that is
    /// empty or `/`. Call it in the order of the pod's secrets.
    pub fn add(&mut self, key: &str, credential: Credential) {
        let url = if key.starts_with("https://") || key.starts_with("http://") {
            parse_http_url(key.as_bytes())
        } else {
            parse_http_url(format!("https://{key}").as_bytes())
        };
        let Some(url) = url else { return };
        let mut path = url.path.as_slice();
        if path.starts_with(b"/v2/") || path.starts_with(b"/v1/") {
            path = &path[3..];
        }
        let mut index_key = url.host;
        if !path.is_empty() && path != b"/" {
            index_key.extend_from_slice(path);
        }
        self.creds.entry(index_key).or_default().push(credential);
    }

    /// True when no entry was added: the kubelet pulls anonymously.
    pub fn is_empty(&self) -> bool {
        self.creds.is_empty()
    }

    /// Every credential the kubelet tries for `image`, in its order: keys in reverse-sorted
    /// order (more specific paths first), each key's credentials in insertion order. When no
    /// key matches and the image is on Docker Hub, the `index.docker.io` entry. Empty means an
    /// anonymous pull.
    ///
    /// `image` is the normalised repository without tag or digest, as the kubelet passes it:
    /// `docker.io/library/busybox`, `registry.example.com:5000/team/app`.
    pub fn lookup(&self, image: &str) -> Vec<&Credential> {
        let matched: Vec<&Credential> = self
            .creds
            .iter()
            .rev()
            .filter(|(key, _)| urls_match_str(key, image.as_bytes()))
            .flat_map(|(_, credentials)| credentials)
            .collect();
        if !matched.is_empty() {
            return matched;
        }
        if is_default_registry_match(image) {
            if let Some(credentials) = self.creds.get(DEFAULT_REGISTRY_HOST) {
                return credentials.iter().collect();
            }
        }
        Vec::new()
    }
}

/// Whether `image` is pulled from Docker Hub, judged by its name as `isDefaultRegistryMatch`.
fn is_default_registry_match(image: &str) -> bool {
    let Some((first, _)) = image.split_once('/') else {
        return !image.is_empty();
    };
    if first.is_empty() {
        return false;
    }
    if first == "docker.io" || first == "index.docker.io" {
        return true;
    }
    !first.contains(['.', ':'])
}

// ---------------------------------------------------------------------------------------------
// Matching keys against images (keyring.go: URLsMatchStr, ParseSchemelessURL, SplitURL).

/// `URLsMatchStr`: both sides parsed as `https://` URLs; equal ports, the same number of host
/// labels, each label matching as a `path.Match` glob, and the key's path a prefix of the
/// image's. Anything that does not parse, or a malformed glob, is no match.
fn urls_match_str(glob: &[u8], target: &[u8]) -> bool {
    let with_scheme = |s: &[u8]| [b"https://".as_slice(), s].concat();
    let (Some(glob), Some(target)) = (
        parse_http_url(&with_scheme(glob)),
        parse_http_url(&with_scheme(target)),
    ) else {
        return false;
    };
    let (glob_labels, glob_port) = split_url(&glob.host);
    let (target_labels, target_port) = split_url(&target.host);
    glob_port == target_port
        && glob_labels.len() == target_labels.len()
        && target.path.starts_with(&glob.path)
        && glob_labels
            .iter()
            .zip(&target_labels)
            .all(|(pattern, label)| path_match(pattern, label) == Ok(true))
}

/// `SplitURL`: the host's dot-separated labels and its port (empty when `net.SplitHostPort`
/// refuses the host, which then keeps any `:port` in its last label).
fn split_url(host: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let (name, port) = split_host_port(host).unwrap_or((host, b""));
    (name.split(|&b| b == b'.').collect(), port)
}

/// Go's `net.SplitHostPort`.
fn split_host_port(hostport: &[u8]) -> Option<(&[u8], &[u8])> {
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

/// A malformed glob (`path.ErrBadPattern`).
#[derive(Debug, PartialEq, Eq)]
struct BadPattern;

/// Go's `path.Match` (what `filepath.Match` is on Linux), on bytes.
fn path_match(mut pattern: &[u8], mut name: &[u8]) -> Result<bool, BadPattern> {
    'pattern: while !pattern.is_empty() {
        let (star, chunk, rest) = scan_chunk(pattern);
        pattern = rest;
        if star && chunk.is_empty() {
            // A trailing `*` matches the rest of the name unless it has a `/`.
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
        // No match; the rest of the pattern must still be well formed.
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
    // After a mismatch the chunk is still read through, to report malformed patterns.
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

// ---------------------------------------------------------------------------------------------
// Go's net/url, as far as the keyring reads it.

/// What the keyring reads of a parsed URL: `Host` (with its port, percent-decoded) and `Path`
/// (percent-decoded). Bytes, because Go strings may hold any bytes after decoding.
struct GoUrl {
    host: Vec<u8>,
    path: Vec<u8>,
}

/// Go's `url.Parse` for a URL starting with `https:` or `http:` (the only ones the keyring
/// builds): fragment and query are cut off, control characters, bad percent-escapes, bad ports
/// and characters Go refuses in hosts fail.
fn parse_http_url(raw: &[u8]) -> Option<GoUrl> {
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

// ---------------------------------------------------------------------------------------------
// Secret payloads, decoded as Go's encoding/json decodes them into the kubelet's types.

/// Why a decoded secret payload does not fit the kubelet's types.
enum Problem {
    Document(&'static str),
    Entry(String, EntryProblem),
}

/// A JSON value as far as Go's decoder distinguishes it here. Objects keep their members in
/// document order, because Go applies duplicate keys one after the other.
enum GoJson {
    Null,
    String(String),
    Object(Vec<(String, GoJson)>),
    Other,
}

impl<'de> Deserialize<'de> for GoJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(GoJsonVisitor)
    }
}

struct GoJsonVisitor;

impl<'de> Visitor<'de> for GoJsonVisitor {
    type Value = GoJson;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<GoJson, E> {
        Ok(GoJson::Other)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<GoJson, E> {
        Ok(GoJson::String(value.to_owned()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<GoJson, E> {
        Ok(GoJson::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<GoJson, E> {
        Ok(GoJson::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<GoJson, E> {
        Ok(GoJson::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<GoJson, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(GoJson::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GoJson, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry::<String, GoJson>()? {
            members.push(member);
        }
        Ok(GoJson::Object(members))
    }
}

/// Whether JSON key `key` selects the struct field tagged `field` (lowercase ASCII), by Go's
/// case folding: ASCII case, and the Kelvin sign, long s and Turkish i's, which fold to ASCII.
fn go_field_is(key: &str, field: &str) -> bool {
    let folded = key.chars().map(|c| match c {
        '\u{212A}' => 'k',
        '\u{017F}' => 's',
        '\u{0130}' | '\u{0131}' => 'i',
        c => c.to_ascii_lowercase(),
    });
    folded.eq(field.chars())
}

/// `DockerConfigJSON` (`.dockerconfigjson`): the `auths` map; `HttpHeaders` is checked only.
fn decode_config_json(document: &GoJson) -> Result<BTreeMap<String, Credential>, Problem> {
    let members = match document {
        GoJson::Null => return Ok(BTreeMap::new()),
        GoJson::Object(members) => members,
        _ => return Err(Problem::Document("the document is not an object")),
    };
    let mut auths = BTreeMap::new();
    for (name, value) in members {
        if go_field_is(name, "auths") {
            match value {
                // Go resets the map on null and adds to it on every further object.
                GoJson::Null => auths.clear(),
                GoJson::Object(entries) => decode_entries(entries, &mut auths)?,
                _ => return Err(Problem::Document("\"auths\" is not an object")),
            }
        } else if go_field_is(name, "httpheaders") {
            let strings = match value {
                GoJson::Null => true,
                GoJson::Object(headers) => headers
                    .iter()
                    .all(|(_, v)| matches!(v, GoJson::String(_) | GoJson::Null)),
                _ => false,
            };
            if !strings {
                return Err(Problem::Document(
                    "\"HttpHeaders\" is not an object of strings",
                ));
            }
        }
    }
    Ok(auths)
}

/// `DockerConfig` (`.dockercfg`): the bare map of entries.
fn decode_dockercfg(document: &GoJson) -> Result<BTreeMap<String, Credential>, Problem> {
    let mut entries = BTreeMap::new();
    match document {
        GoJson::Null => {}
        GoJson::Object(members) => decode_entries(members, &mut entries)?,
        _ => return Err(Problem::Document("the document is not an object")),
    }
    Ok(entries)
}

/// Decodes every entry into `into`; a repeated key replaces the earlier entry.
fn decode_entries(
    members: &[(String, GoJson)],
    into: &mut BTreeMap<String, Credential>,
) -> Result<(), Problem> {
    for (key, value) in members {
        let credential =
            decode_entry(value).map_err(|problem| Problem::Entry(key.clone(), problem))?;
        into.insert(key.clone(), credential);
    }
    Ok(())
}

/// `DockerConfigEntry.UnmarshalJSON`: `username`, `password`, `email` and `auth`; a non-empty
/// `auth` replaces username and password. `null` is an entry with empty credentials.
fn decode_entry(value: &GoJson) -> Result<Credential, EntryProblem> {
    let members = match value {
        GoJson::Null => &[][..],
        GoJson::Object(members) => members.as_slice(),
        _ => return Err(EntryProblem::NotAnObject),
    };
    let (mut username, mut password, mut email, mut auth) =
        (String::new(), String::new(), String::new(), String::new());
    for (name, value) in members {
        let (field, slot) = if go_field_is(name, "username") {
            ("username", &mut username)
        } else if go_field_is(name, "password") {
            ("password", &mut password)
        } else if go_field_is(name, "email") {
            ("email", &mut email)
        } else if go_field_is(name, "auth") {
            ("auth", &mut auth)
        } else {
            continue;
        };
        match value {
            GoJson::String(text) => *slot = text.clone(),
            GoJson::Null => {}
            _ => return Err(EntryProblem::NotAString(field)),
        }
    }
    if auth.is_empty() {
        return Ok(Credential::new(username, password));
    }
    decode_auth(&auth)
}

/// `decodeDockerConfigFieldAuth`: base64 (padded when it ends in `=`, unpadded otherwise) of
/// `username:password`, split at the first `:`.
fn decode_auth(auth: &str) -> Result<Credential, EntryProblem> {
    let padded = auth.trim().ends_with('=');
    let decoded = decode_base64(auth.as_bytes(), padded).ok_or(EntryProblem::AuthNotBase64)?;
    let text = String::from_utf8_lossy(&decoded);
    let (username, password) = text.split_once(':').ok_or(EntryProblem::AuthNoSeparator)?;
    Ok(Credential::new(username, password))
}

/// Go's `base64.StdEncoding` (`padded`) or `RawStdEncoding` decoding: CR and LF are skipped,
/// non-zero trailing bits are accepted, anything else out of place fails.
fn decode_base64(input: &[u8], padded: bool) -> Option<Vec<u8>> {
    let symbols: Vec<u8> = input
        .iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect();
    let data = if padded {
        if symbols.len() % 4 != 0 {
            return None;
        }
        let padding = symbols.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 {
            return None;
        }
        &symbols[..symbols.len() - padding]
    } else {
        &symbols[..]
    };
    if data.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 2);
    let (mut bits, mut count) = (0u32, 0u32);
    for &symbol in data {
        let value = match symbol {
            b'A'..=b'Z' => symbol - b'A',
            b'a'..=b'z' => symbol - b'a' + 26,
            b'0'..=b'9' => symbol - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(value);
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}

/// An `auths` key fit for messages: any `user:password@` replaced by `<redacted>@`.
fn redact_userinfo(key: &str) -> String {
    let start = ["https://", "http://"]
        .iter()
        .find(|scheme| key.starts_with(*scheme))
        .map_or(0, |scheme| scheme.len());
    let end = key[start..]
        .find(['/', '?', '#'])
        .map_or(key.len(), |i| start + i);
    match key[start..end].rfind('@') {
        Some(at) => format!("{}<redacted>{}", &key[..start], &key[start + at..]),
        None => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Go's `base64.StdEncoding.EncodeToString`, for fixtures.
    fn b64(data: &str) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for group in data.as_bytes().chunks(3) {
            let n = group
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= group.len() {
                    out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]));
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    fn secret(secret_type: &str, key: &str, payload: &str) -> Value {
        json!({"type": secret_type, "data": {key: b64(payload)}})
    }

    fn dockercfg(payload: &str) -> Value {
        secret(DOCKERCFG_TYPE, DOCKERCFG_KEY, payload)
    }

    fn config_json(payload: &str) -> Value {
        secret(DOCKER_CONFIG_JSON_TYPE, DOCKER_CONFIG_JSON_KEY, payload)
    }

    fn parse(secret: &Value) -> Result<Vec<(String, Credential)>, SecretError> {
        parse_pull_secret("team-a/regcred", secret)
    }

    fn keyring_of(secrets: &[Value]) -> Keyring {
        let mut keyring = Keyring::new();
        for secret in secrets {
            for (key, credential) in parse(secret).unwrap() {
                keyring.add(&key, credential);
            }
        }
        keyring
    }

    /// The fixture of the kubelet's keyring tests: one `.dockercfg` entry for `key`, user
    /// foo, password bar, with an email.
    fn foo_bar_keyring(key: &str) -> Keyring {
        let payload = json!({key: {"email": "foo@bar.baz", "auth": b64("foo:bar")}});
        keyring_of(&[dockercfg(&payload.to_string())])
    }

    fn owned(found: Vec<&Credential>) -> Vec<Credential> {
        found.into_iter().cloned().collect()
    }

    // keyring_test.go: TestURLsMatch.
    #[test]
    fn urls_match() {
        let cases = [
            // match when there is no path component
            ("*.kubernetes.io", "prefix.kubernetes.io", true),
            ("prefix.*.io", "prefix.kubernetes.io", true),
            ("prefix.kubernetes.*", "prefix.kubernetes.io", true),
            ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
            // match with path components
            ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true),
            ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true),
            // match with path components and ports
            (
                "*.kubernetes.io:1111/blah",
                "prefix.kubernetes.io:1111/blah",
                true,
            ),
            (
                "prefix.*.io:1111/foo",
                "prefix.kubernetes.io:1111/foo/bar",
                true,
            ),
            // no match when number of parts mismatch
            ("*.kubernetes.io", "kubernetes.io", false),
            ("*.*.kubernetes.io", "prefix.kubernetes.io", false),
            ("*.*.kubernetes.io", "kubernetes.io", false),
            // no match when some parts mismatch
            ("kubernetes.io", "kubernetes.com", false),
            ("k*.io", "quay.io", false),
            // no match when ports mismatch
            (
                "*.kubernetes.io:1234/blah",
                "prefix.kubernetes.io:1111/blah",
                false,
            ),
            (
                "prefix.*.io/foo",
                "prefix.kubernetes.io:1111/foo/bar",
                false,
            ),
        ];
        for (glob, target, expected) in cases {
            assert_eq!(
                urls_match_str(glob.as_bytes(), target.as_bytes()),
                expected,
                "{glob} vs {target}"
            );
        }
    }

    // keyring_test.go: TestDockerKeyringForGlob.
    #[test]
    fn docker_keyring_for_glob() {
        let cases = [
            ("https://hello.kubernetes.io", "hello.kubernetes.io"),
            ("https://*.docker.io", "prefix.docker.io"),
            ("https://prefix.*.io", "prefix.docker.io"),
            ("https://prefix.docker.*", "prefix.docker.io"),
            ("https://*.docker.io/path", "prefix.docker.io/path"),
            ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
            ("https://prefix.docker.*/path", "prefix.docker.io/path"),
            ("https://*.docker.io:8888", "prefix.docker.io:8888"),
            ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
            ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
            (
                "https://*.docker.io/path:1111",
                "prefix.docker.io/path:1111",
            ),
            ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
            ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
            (
                "https://prefix.docker.*/path:1111",
                "prefix.docker.io/path:1111",
            ),
            ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
            ("*.docker.io:1111", "prefix.docker.io:1111/path"),
        ];
        for (glob, target) in cases {
            let keyring = foo_bar_keyring(glob);
            let found = keyring.lookup(&format!("{target}/foo/bar"));
            assert_eq!(
                owned(found),
                vec![Credential::new("foo", "bar")],
                "{glob} vs {target}"
            );
        }
    }

    // keyring_test.go: TestKeyringMiss.
    #[test]
    fn keyring_miss() {
        let cases = [
            ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
            ("https://*.docker.com", "prefix.docker.io"),
            ("https://suffix.*.io", "prefix.docker.io"),
            ("https://prefix.docker.c*", "prefix.docker.io"),
            (
                "https://prefix.*.io/path:1111",
                "prefix.docker.io/path/subpath:1111",
            ),
            ("suffix.*.io", "prefix.docker.io"),
        ];
        for (glob, lookup) in cases {
            let keyring = foo_bar_keyring(glob);
            assert!(
                keyring.lookup(&format!("{lookup}/foo/bar")).is_empty(),
                "{glob} vs {lookup}"
            );
        }
    }

    // keyring_test.go: TestKeyringMissWithDockerHubCredentials.
    #[test]
    fn keyring_miss_with_docker_hub_credentials() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        assert!(keyring.lookup("world.mesos.org/foo/bar").is_empty());
    }

    // keyring_test.go: TestKeyringHitWithUnqualifiedDockerHub, with the name as written and as
    // the kubelet passes it after normalisation.
    #[test]
    fn keyring_hit_with_unqualified_docker_hub() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        for image in ["google/docker-registry", "docker.io/google/docker-registry"] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("foo", "bar")],
                "{image}"
            );
        }
    }

    // keyring_test.go: TestKeyringHitWithUnqualifiedLibraryDockerHub.
    #[test]
    fn keyring_hit_with_unqualified_library_docker_hub() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        for image in ["jenkins", "docker.io/library/jenkins"] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("foo", "bar")],
                "{image}"
            );
        }
    }

    // keyring_test.go: TestKeyringHitWithQualifiedDockerHub (the kubelet test looks up
    // "index.docker.io/v1/" + "/google/docker-registry", a direct host match).
    #[test]
    fn keyring_hit_with_qualified_docker_hub() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        for image in [
            "index.docker.io/v1//google/docker-registry",
            "index.docker.io/google/docker-registry",
            "docker.io/google/docker-registry",
        ] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("foo", "bar")],
                "{image}"
            );
        }
    }

    // keyring_test.go: TestIsDefaultRegistryMatch.
    #[test]
    fn default_registry_match() {
        let cases = [
            ("foo/bar", true),
            ("docker.io/foo/bar", true),
            ("index.docker.io/foo/bar", true),
            ("foo", true),
            ("", false),
            ("registry.tld/foo/bar", false),
            ("registry:5000/foo/bar", false),
            ("myhostdocker.io/foo/bar", false),
            ("/foo", false),
        ];
        for (image, expected) in cases {
            assert_eq!(is_default_registry_match(image), expected, "{image:?}");
        }
    }

    // keyring_test.go: TestDockerKeyringLookup.
    #[test]
    fn docker_keyring_lookup() {
        let ada = Credential::new("ada", "smash");
        let grace = Credential::new("grace", "squash");
        let mut keyring = Keyring::new();
        keyring.add("bar.example.com/pong", grace.clone());
        keyring.add("bar.example.com", ada.clone());
        let cases: [(&str, Vec<Credential>); 7] = [
            // direct match
            ("bar.example.com", vec![ada.clone()]),
            // direct match deeper than other possible matches
            ("bar.example.com/pong", vec![grace.clone(), ada.clone()]),
            // no direct match, deeper path ignored
            ("bar.example.com/ping", vec![ada.clone()]),
            // match first part of path token
            ("bar.example.com/pongz", vec![grace.clone(), ada.clone()]),
            // match regardless of sub-path
            (
                "bar.example.com/pong/pang",
                vec![grace.clone(), ada.clone()],
            ),
            // no host match
            ("example.com", vec![]),
            ("foo.example.com", vec![]),
        ];
        for (image, expected) in cases {
            assert_eq!(owned(keyring.lookup(image)), expected, "{image}");
        }
    }

    // keyring_test.go: TestIssue3797 — a key with scheme and /v1/ path matches by host.
    #[test]
    fn scheme_and_version_path_match_the_host() {
        let rex = Credential::new("rex", "tiny arms");
        let mut keyring = Keyring::new();
        keyring.add("https://quay.io/v1/", rex.clone());
        for image in ["quay.io", "quay.io/foo", "quay.io/foo/bar"] {
            assert_eq!(owned(keyring.lookup(image)), vec![rex.clone()], "{image}");
        }
    }

    // secrets_test.go: Test_MakeDockerKeyring, the cases about pull secrets.
    #[test]
    fn make_docker_keyring_cases() {
        let user = vec![Credential::new("user", "password")];
        let auth = r#"{"test.registry.io": {"auth": "dXNlcjpwYXNzd29yZA=="}}"#;
        let plain = r#"{"test.registry.io": {"username": "user", "password": "password"}}"#;
        for secret in [
            config_json(&format!(r#"{{"auths": {auth}}}"#)),
            dockercfg(auth),
            config_json(&format!(r#"{{"auths": {plain}}}"#)),
            dockercfg(plain),
        ] {
            assert_eq!(
                owned(keyring_of(&[secret]).lookup("test.registry.io")),
                user
            );
        }
        let not_matching =
            config_json(r#"{"auths": {"foobar.io": {"auth": "dXNlcjpwYXNzd29yZA=="}}}"#);
        assert!(keyring_of(&[not_matching])
            .lookup("test.registry.io")
            .is_empty());

        // A key under the other type's name: skipped by the kubelet.
        let swapped = [
            secret(
                DOCKERCFG_TYPE,
                DOCKER_CONFIG_JSON_KEY,
                &format!(r#"{{"auths": {auth}}}"#),
            ),
            secret(DOCKER_CONFIG_JSON_TYPE, DOCKERCFG_KEY, auth),
        ];
        for secret in swapped {
            let error = parse(&secret).unwrap_err();
            assert!(matches!(error, SecretError::MissingKey { .. }), "{error:?}");
            assert!(error.is_wrong_type());
        }
    }

    #[test]
    fn secrets_add_in_order_and_specific_paths_come_first() {
        let first = config_json(
            &json!({"auths": {
                "registry.example.com": {"username": "first", "password": "1"},
            }})
            .to_string(),
        );
        let second = dockercfg(
            &json!({
                "https://registry.example.com/v2/": {"username": "second", "password": "2"},
                "registry.example.com/team": {"username": "team", "password": "3"},
            })
            .to_string(),
        );
        let keyring = keyring_of(&[first.clone(), second.clone()]);
        let names = |image| -> Vec<String> {
            keyring
                .lookup(image)
                .iter()
                .map(|c| c.username().to_owned())
                .collect()
        };
        assert_eq!(
            names("registry.example.com/team/app"),
            ["team", "first", "second"]
        );
        assert_eq!(names("registry.example.com/other/app"), ["first", "second"]);
        let reversed = keyring_of(&[second, first]);
        let names: Vec<&str> = reversed
            .lookup("registry.example.com/other/app")
            .iter()
            .map(|c| c.username())
            .collect();
        assert_eq!(names, ["second", "first"]);
    }

    #[test]
    fn docker_hub_secret_from_kubectl_covers_normalised_names() {
        let hub = config_json(&json!({"auths": {
            "https://index.docker.io/v1/": {"username": "hub", "password": "pw", "auth": b64("hub:pw")},
        }}).to_string());
        let keyring = keyring_of(&[hub]);
        for image in [
            "docker.io/library/busybox",
            "docker.io/team/app",
            "index.docker.io/team/app",
        ] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("hub", "pw")],
                "{image}"
            );
        }
        assert!(keyring.lookup("ghcr.io/team/app").is_empty());
        // A direct match wins over the Docker Hub fallback.
        let mut both = keyring.clone();
        both.add("docker.io", Credential::new("direct", "pw"));
        let names: Vec<&str> = both
            .lookup("docker.io/library/busybox")
            .iter()
            .map(|c| c.username())
            .collect();
        assert_eq!(names, ["direct"]);
    }

    #[test]
    fn auth_overrides_username_and_password() {
        let payload = json!({"auths": {
            "a.example.com": {"username": "u", "password": "p", "auth": b64("x:y:z")},
            "b.example.com": {"username": "u", "password": "p", "auth": ""},
            "c.example.com": {"username": "u", "auth": b64(":only-password")},
            "d.example.com": {"auth": b64("no-password:")},
            // Unpadded base64 is accepted since the kubelet falls back to RawStdEncoding.
            "e.example.com": {"auth": b64("user:pw").trim_end_matches('=')},
        }});
        let entries = parse(&config_json(&payload.to_string())).unwrap();
        let expected = [
            ("a.example.com", "x", "y:z"),
            ("b.example.com", "u", "p"),
            ("c.example.com", "", "only-password"),
            ("d.example.com", "no-password", ""),
            ("e.example.com", "user", "pw"),
        ];
        assert_eq!(entries.len(), expected.len());
        for ((key, credential), (want_key, user, password)) in entries.iter().zip(expected) {
            assert_eq!(key, want_key);
            assert_eq!(
                (credential.username(), credential.password()),
                (user, password),
                "{key}"
            );
        }
    }

    #[test]
    fn identity_and_registry_tokens_are_ignored_like_the_kubelet() {
        let payload = json!({"auths": {"registry.example.com": {
            "identitytoken": "token-1", "registrytoken": "token-2", "email": "a@b.c",
        }}});
        let entries = parse(&config_json(&payload.to_string())).unwrap();
        let (key, credential) = &entries[0];
        assert_eq!(key, "registry.example.com");
        assert_eq!(credential, &Credential::new("", ""));
        assert_eq!(credential.identity_token(), None);
        assert_eq!(credential.registry_token(), None);
    }

    #[test]
    fn go_json_rules() {
        // Field names match case-insensitively, null leaves a field unset, later duplicates win,
        // unknown fields are ignored, repeated "auths" objects merge and null clears them.
        let payload = r#"{
            "AUTHS": {"a.example.com": {"USERNAME": "u", "Password": "p", "password": null, "extra": [1, {"x": 2}]}},
            "auths": {"b.example.com": null, "c.example.com": {"username": "old"}, "c.example.com": {"username": "new"}},
            "HttpHeaders": {"User-Agent": "x"},
            "credsStore": 5
        }"#;
        let entries = parse(&config_json(payload)).unwrap();
        let expected = vec![
            ("a.example.com".to_owned(), Credential::new("u", "p")),
            ("b.example.com".to_owned(), Credential::new("", "")),
            ("c.example.com".to_owned(), Credential::new("new", "")),
        ];
        assert_eq!(entries, expected);
        let cleared = r#"{"auths": {"a.example.com": {}}, "auths": null}"#;
        assert_eq!(parse(&config_json(cleared)).unwrap(), vec![]);
        assert_eq!(parse(&config_json("null")).unwrap(), vec![]);
        assert_eq!(parse(&config_json("{}")).unwrap(), vec![]);
        assert_eq!(parse(&dockercfg("null")).unwrap(), vec![]);
        // Go folds the Kelvin sign and the long s onto ASCII letters.
        let folded = "{\"auth\u{017F}\": {\"x.io\": {\"u\u{017F}ername\": \"kelvin\"}}}";
        assert_eq!(
            parse(&config_json(folded)).unwrap()[0].1.username(),
            "kelvin"
        );
    }

    #[test]
    fn malformed_documents() {
        let document = |payload: &str| match parse(&config_json(payload)) {
            Err(SecretError::BadDocument { problem, .. }) => problem,
            other => panic!("{payload}: {other:?}"),
        };
        assert_eq!(document("[]"), "the document is not an object");
        assert_eq!(document(r#"{"auths": "x"}"#), "\"auths\" is not an object");
        assert_eq!(
            document(r#"{"HttpHeaders": {"a": 1}}"#),
            "\"HttpHeaders\" is not an object of strings"
        );
        assert!(matches!(
            parse(&dockercfg("\"x\"")),
            Err(SecretError::BadDocument { .. })
        ));

        let entry = |payload: &str| match parse(&dockercfg(payload)) {
            Err(SecretError::BadEntry { entry, problem, .. }) => (entry, problem),
            other => panic!("{payload}: {other:?}"),
        };
        let key = "registry.example.com".to_owned();
        assert_eq!(
            entry(r#"{"registry.example.com": "x"}"#),
            (key.clone(), EntryProblem::NotAnObject)
        );
        assert_eq!(
            entry(r#"{"registry.example.com": {"username": 5}}"#),
            (key.clone(), EntryProblem::NotAString("username"))
        );
        assert_eq!(
            entry(r#"{"registry.example.com": {"auth": "!!!="}}"#),
            (key.clone(), EntryProblem::AuthNotBase64)
        );
        assert_eq!(
            entry(&format!(
                r#"{{"registry.example.com": {{"auth": "{}"}}}}"#,
                b64("nocolon")
            )),
            (key, EntryProblem::AuthNoSeparator)
        );
        let error = parse(&dockercfg(r#"{"registry.example.com": {"auth": "!!!="}}"#)).unwrap_err();
        assert!(!error.is_wrong_type());
        assert_eq!(
            error.to_string(),
            r#"secret "team-a/regcred": key ".dockercfg": entry "registry.example.com": "auth" is not valid base64"#
        );
    }

    #[test]
    fn unusable_secrets() {
        let wrong = parse(&json!({"type": "Opaque", "data": {}})).unwrap_err();
        assert_eq!(
            wrong,
            SecretError::WrongType {
                secret: "team-a/regcred".into(),
                found: "Opaque".into()
            }
        );
        assert!(wrong.is_wrong_type());
        assert!(parse(&json!({"data": {}})).unwrap_err().is_wrong_type());
        assert!(parse(&json!(null)).unwrap_err().is_wrong_type());

        let missing = parse(&json!({"type": DOCKER_CONFIG_JSON_TYPE})).unwrap_err();
        assert_eq!(
            missing.to_string(),
            r#"secret "team-a/regcred": key ".dockerconfigjson" is missing"#
        );
        assert!(missing.is_wrong_type());
        let empty =
            parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": ""}})).unwrap_err();
        assert!(matches!(empty, SecretError::EmptyKey { .. }) && empty.is_wrong_type());

        for data in [json!("not base64!"), json!("QQ="), json!(5)] {
            let error =
                parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": data}})).unwrap_err();
            assert_eq!(
                error.to_string(),
                r#"secret "team-a/regcred": key ".dockercfg" is not valid base64"#
            );
            assert!(!error.is_wrong_type());
        }

        let bad_json = parse(&config_json(r#"{"auths": {"a": }"#)).unwrap_err();
        assert_eq!(
            bad_json.to_string(),
            r#"secret "team-a/regcred": key ".dockerconfigjson" is not valid JSON (line 1, column 17)"#
        );
        assert!(!bad_json.is_wrong_type());
    }

    #[test]
    fn nothing_secret_is_ever_printed() {
        let user = "us3r-n4me";
        let password = "s3cr3t-pa55";
        let auth = b64(&format!("{user}:{password}"));
        let credential = Credential::new(user, password)
            .with_identity_token(password)
            .with_registry_token(password);
        let errors = [
            parse(&config_json(&format!(
                r#"{{"auths": {{"r.io": {{"auth": "{password}"}}}}}}"#
            ))),
            parse(&config_json(&format!(
                r#"{{"auths": {{"r.io": {{"auth": "{}"}}}}}}"#,
                b64(password)
            ))),
            parse(&config_json(&format!(
                r#"{{"auths": {{"r.io": {{"auth": "{auth}", "password": 1}}}}}}"#
            ))),
            parse(&config_json(&format!(
                r#"{{"auths": {{"r.io": {{"username": "{user}", "password": "{password}" }}"#
            ))),
            parse(&config_json(&format!(
                r#"{{"auths": {{"https://{user}:{password}@r.io": 5}}}}"#
            ))),
            parse(&config_json(&format!(r#"{{"auths": "{auth}"}}"#))),
            parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": format!("{password}!")}})),
            parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": auth}})),
        ];
        let mut texts = vec![format!("{credential:?}"), format!("{:?}", Keyring::new())];
        for result in errors {
            let error = result.unwrap_err();
            texts.push(error.to_string());
            texts.push(format!("{error:?}"));
        }
        for text in texts {
            for secret in [user, password, auth.as_str(), b64(password).as_str()] {
                assert!(!text.contains(secret), "{text:?} contains {secret:?}");
            }
        }
        assert_eq!(
            redact_userinfo("https://u:p@r.io/v1/"),
            "https://<redacted>@r.io/v1/"
        );
        assert_eq!(redact_userinfo("r.io/a@b"), "r.io/a@b");
    }

    #[test]
    fn capability_json() {
        assert_eq!(
            Credential::new("u", "p").to_capability_json(),
            json!({"username": "u", "password": "p"})
        );
        assert_eq!(
            Credential::new("u", "p")
                .with_identity_token("i")
                .with_registry_token("r")
                .to_capability_json(),
            json!({"username": "u", "password": "p", "identityToken": "i", "registryToken": "r"})
        );
    }

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

    #[test]
    fn globs_follow_go_path_match() {
        let cases: [(&str, &str, Result<bool, BadPattern>); 14] = [
            ("*", "anything", Ok(true)),
            ("a*c", "abbbc", Ok(true)),
            ("a*c", "abbbd", Ok(false)),
            ("a?c", "abc", Ok(true)),
            ("a?c", "ac", Ok(false)),
            ("[a-c]x", "bx", Ok(true)),
            ("[^a-c]x", "bx", Ok(false)),
            ("[^a-c]x", "dx", Ok(true)),
            ("\\*", "*", Ok(true)),
            ("\\*", "a", Ok(false)),
            ("[", "a", Err(BadPattern)),
            ("a[", "b", Err(BadPattern)),
            ("\\", "a", Err(BadPattern)),
            ("[]a]", "]", Err(BadPattern)),
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

    #[test]
    fn go_base64() {
        assert_eq!(decode_base64(b"QUJD", true), Some(b"ABC".to_vec()));
        assert_eq!(decode_base64(b"QUI=", true), Some(b"AB".to_vec()));
        assert_eq!(decode_base64(b"QQ==\r\n", true), Some(b"A".to_vec()));
        assert_eq!(decode_base64(b"QR==", true), Some(b"A".to_vec()));
        assert_eq!(decode_base64(b"", true), Some(vec![]));
        for bad in [
            &b"QQ="[..],
            b"QQ",
            b"Q===",
            b"====",
            b"QQ==QQ==",
            b"Q-==",
            b"QU I=",
        ] {
            assert_eq!(decode_base64(bad, true), None, "{bad:?}");
        }
        assert_eq!(decode_base64(b"QQ", false), Some(b"A".to_vec()));
        assert_eq!(decode_base64(b"QUI", false), Some(b"AB".to_vec()));
        assert_eq!(decode_base64(b"Q", false), None);
        assert_eq!(decode_base64(b"QQ==", false), None);
    }

    #[test]
    fn no_input_panics() {
        let strings = [
            "",
            "/",
            ":",
            "@",
            "[",
            "]",
            "[]",
            "[:]",
            "[::1]:",
            "%",
            "%2",
            "%25",
            "%ff",
            "*",
            "**",
            "\\",
            "[\\",
            "[a-",
            "[a-]",
            "[^",
            "?",
            "\u{212A}",
            "é.example.com",
            "a:b:c",
            "https://",
            "http://",
            "https:",
            "///",
            "a..b",
            ".",
            "..",
            "#",
            "?x",
            "index.docker.io",
            "docker.io/library/busybox",
            "x/v1/",
            "/v2/",
            "[\u{e9}]",
        ];
        let mut keyring = Keyring::new();
        for key in strings {
            keyring.add(key, Credential::new("u", "p"));
        }
        for image in strings {
            let _ = keyring.lookup(image);
            for pattern in strings {
                let _ = path_match(pattern.as_bytes(), image.as_bytes());
                let _ = urls_match_str(pattern.as_bytes(), image.as_bytes());
            }
            let _ = parse(&config_json(image));
            let _ = parse(&dockercfg(&json!({image: {"auth": image}}).to_string()));
            let _ = parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": image}}));
        }
    }
}
