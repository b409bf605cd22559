//! Image references, parsed and normalised as `distribution/reference` v0.6.0
//! (`ParseNormalizedNamed`) does, because that is what the kubelet runs before every pull:
//! an image this module refuses is one the kubelet reports as `InvalidImageName`.
//!
//! Written by hand rather than with `oci-client`'s or `oci-spec`'s parser: those follow
//! containers/image and older distribution rules (domain counted in the 255-character limit, no
//! uppercase-domain rule). The rules, as this module applies them:
//!
//! - The first `/`-separated component is the registry when it holds a `.` or a `:`, is
//!   `localhost`, or has an uppercase letter; otherwise the registry is `docker.io`, and a
//!   one-component name gets `library/` in front. `index.docker.io` is `docker.io`.
//! - The registry is dot-separated labels of letters, digits and inner dashes (or a bracketed
//!   IPv6 address), with an optional numeric port.
//! - The repository path is lowercase, at most 255 characters (the registry not counted), and
//!   made of components `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` joined by `/`.
//! - A tag is `[\w][\w.-]{0,127}`; a digest is `sha256:` and 64 hex digits, `sha384:` and 96,
//!   or `sha512:` and 128; `name:tag@digest` keeps both, and the pull uses the digest.
//! - A bare 64-hex string is refused (it reads as an image ID); no tag means `latest`.
//!
//! A refusal names the part at fault and the rule it breaks, in the project's words: the
//! kubelet's event words the same refusal in distribution's. The tests are the project's own
//! cases, one or more per rule, and the shared normalisation vectors when `../shared/vectors`
//! is beside the clone; they and the `reference` fuzz target hold [`ImageReference::parse`] to
//! [`ImageReference::parse_by_grammar`], the grammar alone, on every input.

use std::fmt;

use crate::vocabulary::text::truncate;

/// Docker Hub's canonical domain: where names without a registry component live.
pub const DEFAULT_REGISTRY: &str = "docker.io";
const LEGACY_DEFAULT_REGISTRY: &str = "index.docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";
const NAME_TOTAL_LENGTH_MAX: usize = 255;
const TAG_LENGTH_MAX: usize = 128;
/// Longest part of an image an error quotes: a refusal names the part, it need not repeat it.
const QUOTE_MAX: usize = 64;

/// Why a string is not an image reference: which part is wrong, and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The image is the empty string.
    #[error("the reference is empty")]
    Empty,
    /// A bare 64-hex string, which Docker reserves for image IDs.
    #[error("a bare 64-digit hex string is an image ID, not a repository name")]
    HexIdentifier,
    /// The registry is not a host name, IPv4 or bracketed IPv6 address with an optional port.
    #[error(
        "registry {0:?} is not a host name or IP address (IPv6 in brackets) with an optional numeric port"
    )]
    Registry(String),
    /// A component of the repository path has an uppercase letter.
    #[error(
        "repository path component {0:?} has uppercase letters: a repository path is lowercase (the registry and the tag may have capitals)"
    )]
    Uppercase(String),
    /// A `/` with nothing on one side of it, or no repository before the tag or digest.
    #[error(
        "the repository path has an empty component: a leading, trailing or doubled '/', or nothing before ':' or '@'"
    )]
    EmptyPathComponent,
    /// A component of the repository path breaks the component grammar.
    #[error(
        "repository path component {0:?} is not lowercase letters and digits joined by '.', '_', '__' or dashes"
    )]
    PathComponent(String),
    /// The repository path (the registry not counted) is longer than 255 characters.
    #[error("the repository path is {0} characters long; at most 255 are allowed")]
    NameTooLong(usize),
    /// The tag breaks the tag grammar.
    #[error(
        "tag {0:?} is not letters, digits, '_', '.' and '-' starting with a letter, digit or '_'"
    )]
    Tag(String),
    /// The tag is longer than 128 characters.
    #[error("the tag is {0} characters long; at most 128 are allowed")]
    TagTooLong(usize),
    /// The digest is not `algorithm:hex` with at least 32 hex digits.
    #[error("digest {0:?} is not algorithm:hex (such as sha256: and 64 hex digits)")]
    Digest(String),
    /// The digest algorithm is not one the runtime can verify.
    #[error("digest algorithm {0:?} is not sha256, sha384 or sha512, which pulls can verify")]
    UnsupportedDigest(String),
    /// The digest's hex digits are not lowercase: the runtime refuses `A`-`F`.
    #[error("{0} digest has uppercase hex digits; digests are written in lowercase")]
    DigestCase(&'static str),
    /// The digest's hex part has the wrong length for its algorithm.
    #[error("{algorithm} digest has {found} hex digits; it needs exactly {expected}")]
    DigestLength {
        /// The digest's algorithm.
        algorithm: &'static str,
        /// How many hex digits that algorithm's digests have.
        expected: usize,
        /// How many the image has.
        found: usize,
    },
}

/// `part` as a refusal quotes it: cut to [`QUOTE_MAX`] bytes.
fn quote(part: &str) -> String {
    truncate(part, QUOTE_MAX)
}

/// A content digest (`sha256:…`), validated for an algorithm the runtime supports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest(String);

impl Digest {
    /// Parses `algorithm:hex` with go-digest's rules: only sha256, sha384 and sha512 are
    /// verifiable, each with its exact number of lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        let malformed = || ReferenceError::Digest(quote(s));
        let (algorithm, hex) = s.split_once(':').ok_or_else(malformed)?;
        if !is_digest_algorithm(algorithm) || hex.len() < 32 || !is_hex(hex) {
            return Err(malformed());
        }
        let (algorithm, expected) = match algorithm {
            "sha256" => ("sha256", 64),
            "sha384" => ("sha384", 96),
            "sha512" => ("sha512", 128),
            _ => return Err(ReferenceError::UnsupportedDigest(quote(algorithm))),
        };
        if hex.len() != expected {
            return Err(ReferenceError::DigestLength {
                algorithm,
                expected,
                found: hex.len(),
            });
        }
        if !is_lower_hex(hex) {
            return Err(ReferenceError::DigestCase(algorithm));
        }
        Ok(Digest(s.to_owned()))
    }

    /// The digest as `algorithm:hex`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A parsed, normalised image reference: what the kubelet will ask the registry for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageReference {
    /// `registry/repository[:tag]` in one string: built, cloned and dropped for every image
    /// checked, and the prefix of every string the policy makes of it.
    text: String,
    /// Where the registry ends in `text`.
    registry_len: usize,
    /// Where `registry/repository` ends in `text`; a tag follows after a `:` when written.
    name_len: usize,
    digest: Option<Digest>,
}

impl ImageReference {
    /// Parses an image as written in a container spec, applying Docker Hub defaults.
    ///
    /// Most images are written `registry/path[:tag]` in lowercase ASCII, the registry a domain
    /// or IPv4 address: those are read in one pass ([`parse_plain`]), about a third of what
    /// reading them by the grammar costs, and every request reads every image. Anything else
    /// is read by distribution's grammar ([`ImageReference::parse_by_grammar`]), which names
    /// the reason for a refusal.
    pub fn parse(image: &str) -> Result<Self, ReferenceError> {
        match parse_plain(image) {
            Some(reference) => Ok(reference),
            None => Self::parse_by_grammar(image),
        }
    }

    /// [`ImageReference::parse`] without its one-pass reading of plain images: the grammar
    /// alone, which the tests and the `reference` fuzz target hold the one-pass reading to.
    pub fn parse_by_grammar(image: &str) -> Result<Self, ReferenceError> {
        if image.is_empty() {
            return Err(ReferenceError::Empty);
        }
        if image.len() == 64 && is_lower_hex(image) {
            return Err(ReferenceError::HexIdentifier);
        }
        let (registry, remainder) = split_registry(image);
        let remainder = remainder.as_ref();
        let remote_name = remainder.split(':').next().unwrap_or(remainder);
        if has_uppercase(remote_name) {
            let component = remote_name.split('/').find(|c| has_uppercase(c));
            return Err(ReferenceError::Uppercase(quote(
                component.unwrap_or(remote_name),
            )));
        }

        let (name_and_tag, digest) = match remainder.split_once('@') {
            Some((left, digest)) => (left, Some(Digest::parse(digest)?)),
            None => (remainder, None),
        };
        let (repository, tag) = match name_and_tag.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag)),
            None => (name_and_tag, None),
        };
        if !is_valid_domain(registry) {
            return Err(ReferenceError::Registry(quote(registry)));
        }
        check_path(repository)?;
        if let Some(tag) = tag {
            check_tag(tag)?;
        }
        if repository.len() > NAME_TOTAL_LENGTH_MAX {
            return Err(ReferenceError::NameTooLong(repository.len()));
        }
        let tag_len = tag.map_or(0, |tag| 1 + tag.len());
        let mut text = String::with_capacity(registry.len() + 1 + repository.len() + tag_len);
        text.push_str(registry);
        text.push('/');
        text.push_str(repository);
        let name_len = text.len();
        if let Some(tag) = tag {
            text.push(':');
            text.push_str(tag);
        }
        Ok(ImageReference {
            text,
            registry_len: registry.len(),
            name_len,
            digest,
        })
    }

    /// The registry host (and port) the kubelet will contact, e.g. `docker.io`, `[::1]:5000`.
    pub fn registry(&self) -> &str {
        &self.text[..self.registry_len]
    }

    /// The repository path within the registry, e.g. `library/nginx`.
    pub fn repository(&self) -> &str {
        &self.text[self.registry_len + 1..self.name_len]
    }

    /// The tag as written; `None` when the image names no tag.
    pub fn tag(&self) -> Option<&str> {
        self.text.get(self.name_len + 1..)
    }

    /// The digest pinned by the image, if any; it takes precedence over the tag when pulling.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `registry/repository`: the name credentials are matched against.
    pub fn name(&self) -> String {
        self.name_with(0)
    }

    /// [`ImageReference::name`] in a string with room for `extra` more bytes: one allocation
    /// for the strings built on it, which the policy builds for every image it checks.
    fn name_with(&self, extra: usize) -> String {
        let mut name = String::with_capacity(self.name_len + extra);
        name.push_str(&self.text[..self.name_len]);
        name
    }

    /// True when the kubelet resolves this image through the `latest` tag: it names `latest`,
    /// or names neither a tag nor a digest. Such images default to `imagePullPolicy: Always`.
    pub fn resolves_latest(&self) -> bool {
        match (self.tag(), &self.digest) {
            (Some(tag), _) => tag == "latest",
            (None, digest) => digest.is_none(),
        }
    }

    /// The reference the registry is asked for: the digest when there is one (the tag is then
    /// ignored by the pull), otherwise the tag, defaulting to `latest`. Spelling variants of
    /// one image produce the same string, so they share one lookup and one host cache entry.
    pub fn lookup_reference(&self) -> String {
        let (separator, version) = match (&self.digest, self.tag()) {
            (Some(digest), _) => ('@', digest.as_str()),
            (None, Some(_)) => return self.text.clone(),
            (None, None) => (':', "latest"),
        };
        let mut reference = self.name_with(1 + version.len());
        reference.push(separator);
        reference.push_str(version);
        reference
    }
}

/// The fully normalised form, keeping both tag and digest: `docker.io/library/nginx:1.25@sha256:…`.
impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)?;
        match (self.tag(), &self.digest) {
            (None, None) => write!(f, ":latest"),
            (_, Some(digest)) => write!(f, "@{digest}"),
            (Some(_), None) => Ok(()),
        }
    }
}

/// `registry/path[:tag]` read in one pass when it is plainly valid: a registry of dot-separated
/// lowercase labels (a domain name or an IPv4 address) with a `.` or a port, which
/// distribution's `splitDockerDomain` takes for a registry, other than Docker Hub's (whose
/// names are rewritten); path components of lowercase letters and digits joined by `.`, `_`,
/// `__` or dashes; a tag of word characters, dots and dashes; no digest. Such an image is its
/// own normalised text. `None` for anything else, valid or not: the grammar reads it.
fn parse_plain(image: &str) -> Option<ImageReference> {
    let registry_len = plain_registry(image)?;
    let path_start = registry_len + 1;
    let name_len = plain_path_end(image.as_bytes(), path_start)?;
    if name_len - path_start > NAME_TOTAL_LENGTH_MAX {
        return None;
    }
    if let Some(rest) = image.get(name_len..).filter(|rest| !rest.is_empty()) {
        if !rest.starts_with(':') || !is_valid_tag(&rest[1..]) {
            return None;
        }
    }
    Some(ImageReference {
        text: image.to_owned(),
        registry_len,
        name_len,
        digest: None,
    })
}

/// Where [`parse_plain`]'s registry ends (a `/` follows): labels of lowercase letters, digits
/// and inner dashes joined by dots, then an optional port; a dot or a port at least (what
/// makes the first component a registry), and not Docker Hub's.
fn plain_registry(image: &str) -> Option<usize> {
    let bytes = image.as_bytes();
    let mut at = 0;
    let mut marked = false;
    loop {
        let start = at;
        while bytes
            .get(at)
            .is_some_and(|&b| is_lower_alnum(b) || b == b'-')
        {
            at += 1;
        }
        if at == start || bytes[start] == b'-' || bytes[at - 1] == b'-' {
            return None;
        }
        if bytes.get(at) != Some(&b'.') {
            break;
        }
        marked = true;
        at += 1;
    }
    if bytes.get(at) == Some(&b':') {
        at += 1;
        let start = at;
        while bytes.get(at).is_some_and(u8::is_ascii_digit) {
            at += 1;
        }
        if at == start {
            return None;
        }
        marked = true;
    }
    let registry = &image[..at];
    let plain = marked
        && bytes.get(at) == Some(&b'/')
        && registry != DEFAULT_REGISTRY
        && registry != LEGACY_DEFAULT_REGISTRY;
    plain.then_some(at)
}

/// Where [`parse_plain`]'s path from `at` ends: components of lowercase letters and digits
/// joined by `.`, `_`, `__` or dashes, themselves joined by `/`.
fn plain_path_end(bytes: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let start = at;
        while bytes.get(at).is_some_and(|&b| is_lower_alnum(b)) {
            at += 1;
        }
        if at == start {
            return None;
        }
        match bytes.get(at) {
            Some(b'.' | b'/') => at += 1,
            Some(b'_') => at += 1 + usize::from(bytes.get(at + 1) == Some(&b'_')),
            Some(b'-') => {
                while bytes.get(at) == Some(&b'-') {
                    at += 1;
                }
            }
            _ => return Some(at),
        }
    }
}

fn is_lower_alnum(byte: u8) -> bool {
    byte.is_ascii_lowercase() || byte.is_ascii_digit()
}

/// distribution's `splitDockerDomain`: the first component is a registry when it has `.` or
/// `:`, is `localhost`, or has an uppercase letter; Docker Hub names get `library/`.
fn split_registry(image: &str) -> (&str, std::borrow::Cow<'_, str>) {
    let (registry, remainder) = match image.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':']) || first == "localhost" || has_uppercase(first) =>
        {
            (first, rest)
        }
        _ => (DEFAULT_REGISTRY, image),
    };
    let registry = if registry == LEGACY_DEFAULT_REGISTRY {
        DEFAULT_REGISTRY
    } else {
        registry
    };
    if registry == DEFAULT_REGISTRY && !remainder.contains('/') {
        (
            registry,
            format!("{OFFICIAL_REPO_PREFIX}{remainder}").into(),
        )
    } else {
        (registry, remainder.into())
    }
}

/// True when lowercasing changes `s` (Go's `strings.ToLower(s) != s`), without building the
/// lowercase copy: every image is checked, and nearly all are ASCII.
fn has_uppercase(s: &str) -> bool {
    if s.is_ascii() {
        return s.bytes().any(|b| b.is_ascii_uppercase());
    }
    s.chars().any(|c| !c.to_lowercase().eq([c]))
}

/// `host[:port]` where host is a domain name, an IPv4 address or a bracketed IPv6 address.
fn is_valid_domain(domain: &str) -> bool {
    let (host, port) = split_port(domain);
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(ipv6) => !ipv6.is_empty() && ipv6.chars().all(|c| c.is_ascii_hexdigit() || c == ':'),
        None => host.split('.').all(is_valid_domain_component),
    };
    host_ok && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Splits `host:port`, leaving the colons of a bracketed IPv6 address alone.
fn split_port(domain: &str) -> (&str, Option<&str>) {
    match domain.rfind(':') {
        Some(i) if !domain.starts_with('[') || domain[..i].ends_with(']') => {
            (&domain[..i], Some(&domain[i + 1..]))
        }
        _ => (domain, None),
    }
}

/// `[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`
fn is_valid_domain_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

/// Path components joined by `/`, each `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`; the error names
/// the first component that is not.
fn check_path(path: &str) -> Result<(), ReferenceError> {
    for component in path.split('/') {
        if component.is_empty() {
            return Err(ReferenceError::EmptyPathComponent);
        }
        if !is_valid_path_component(component) {
            return Err(ReferenceError::PathComponent(quote(component)));
        }
    }
    Ok(())
}

fn is_valid_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && is_lower_alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let separator_start = i;
        while i < bytes.len() && !is_lower_alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[separator_start..i];
        let valid_separator = matches!(separator, "." | "_" | "__")
            || (!separator.is_empty() && separator.bytes().all(|b| b == b'-'));
        if !valid_separator || i == bytes.len() {
            return false;
        }
    }
    false
}

/// `[\w][\w.-]{0,127}`
fn is_valid_tag(tag: &str) -> bool {
    tag.len() <= TAG_LENGTH_MAX && is_tag_shaped(tag)
}

/// [`is_valid_tag`], saying which of its rules `tag` breaks.
fn check_tag(tag: &str) -> Result<(), ReferenceError> {
    if !is_tag_shaped(tag) {
        Err(ReferenceError::Tag(quote(tag)))
    } else if tag.len() > TAG_LENGTH_MAX {
        Err(ReferenceError::TagTooLong(tag.len()))
    } else {
        Ok(())
    }
}

/// `[\w][\w.-]*`: the tag grammar without its length limit.
fn is_tag_shaped(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    bytes.first().is_some_and(|&b| word(b))
        && bytes.iter().all(|&b| word(b) || b == b'.' || b == b'-')
}

/// `[A-Za-z][A-Za-z0-9]*([+._-][A-Za-z][A-Za-z0-9]*)*`
fn is_digest_algorithm(algorithm: &str) -> bool {
    algorithm.split(['+', '.', '_', '-']).all(|component| {
        let mut chars = component.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric())
    })
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests;
