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
//! kubelet's event words the same refusal in distribution's.

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
mod tests {
    use super::*;

    /// A sha256 digest of the tests' own (any 64 lowercase hex digits).
    const SHA: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn normalised(image: &str) -> String {
        ImageReference::parse(image)
            .unwrap_or_else(|e| panic!("{image}: {e}"))
            .to_string()
    }

    fn error(image: &str) -> ReferenceError {
        ImageReference::parse(image).expect_err(image)
    }

    /// Each `(image, normalised form)` parses to that form.
    fn assert_normalised(cases: &[(&str, &str)]) {
        for (image, expected) in cases {
            assert_eq!(normalised(image), *expected, "{image:?}");
        }
    }

    /// Each `(image, error)` is refused with that error.
    fn assert_refused(cases: &[(String, ReferenceError)]) {
        for (image, expected) in cases {
            assert_eq!(&error(image), expected, "{image:?}");
        }
    }

    /// `n` lowercase hex digits.
    fn hex(n: usize) -> String {
        "0123456789abcdef".chars().cycle().take(n).collect()
    }

    #[test]
    fn has_uppercase_agrees_with_lowercasing() {
        for s in [
            "nginx",
            "Nginx",
            "library/app",
            "É",
            "é",
            "ǅ",
            "Σ",
            "aΣ",
            "İ",
            "ß",
            "ｱ",
            "",
        ] {
            assert_eq!(has_uppercase(s), s.to_lowercase() != s, "{s:?}");
        }
    }

    /// The first component is the registry when it has a `.`, a `:`, an uppercase letter, or
    /// is exactly `localhost`, and a `/` follows it; anything else is a Docker Hub name.
    #[test]
    fn the_first_component_is_a_registry_only_when_it_looks_like_one() {
        assert_normalised(&[
            // a dot
            (
                "registry.example.test/team-a/app",
                "registry.example.test/team-a/app:latest",
            ),
            ("10.20.30.40/app:1", "10.20.30.40/app:1"),
            // a port
            ("mirror:5000/app", "mirror:5000/app:latest"),
            (
                "registry.example.test:5000/team-a/app",
                "registry.example.test:5000/team-a/app:latest",
            ),
            // localhost, with or without a port
            ("localhost/app", "localhost/app:latest"),
            (
                "localhost:5000/team-a/app:2.0",
                "localhost:5000/team-a/app:2.0",
            ),
            // an uppercase letter
            ("Mirror/app", "Mirror/app:latest"),
            ("MIRROR/team-a/app:1", "MIRROR/team-a/app:1"),
            // none of these: a Docker Hub namespace
            ("team-a/app", "docker.io/team-a/app:latest"),
            ("mirror/app", "docker.io/mirror/app:latest"),
            (
                "localhost-mirror/app",
                "docker.io/localhost-mirror/app:latest",
            ),
            // no `/` after it: a Docker Hub repository, and `:` starts its tag
            ("app:5000", "docker.io/library/app:5000"),
            ("localhost:5000", "docker.io/library/localhost:5000"),
            ("localhost", "docker.io/library/localhost:latest"),
            (
                "registry.example.test:5000",
                "docker.io/library/registry.example.test:5000",
            ),
        ]);
    }

    /// Docker Hub is `docker.io`, also when written `index.docker.io`, and its one-component
    /// names live under `library/`.
    #[test]
    fn docker_hub_names_get_their_registry_and_library_prefix() {
        assert_normalised(&[
            ("app", "docker.io/library/app:latest"),
            ("app:3.1", "docker.io/library/app:3.1"),
            ("docker.io/app", "docker.io/library/app:latest"),
            ("docker.io/library/app:3.1", "docker.io/library/app:3.1"),
            ("docker.io/team-a/app", "docker.io/team-a/app:latest"),
            ("index.docker.io/app:3.1", "docker.io/library/app:3.1"),
            ("index.docker.io/team-a/app", "docker.io/team-a/app:latest"),
            ("team-a/app/worker", "docker.io/team-a/app/worker:latest"),
            // only Docker Hub's exact spellings are Docker Hub
            (
                "registry.example.test/app",
                "registry.example.test/app:latest",
            ),
            ("Docker.IO/app", "Docker.IO/app:latest"),
            ("docker.io:443/app", "docker.io:443/app:latest"),
        ]);
        let legacy = ImageReference::parse("index.docker.io/app").expect("valid");
        assert_eq!(legacy.registry(), "docker.io");
        assert_eq!(legacy.repository(), "library/app");
    }

    /// The repository path is lowercase; the registry and the tag may have capitals.
    #[test]
    fn the_repository_path_is_lowercase() {
        assert_normalised(&[
            (
                "registry.example.test/team-a/app:V1.0-RC",
                "registry.example.test/team-a/app:V1.0-RC",
            ),
            (
                "Registry.Example.Test/team-a/app",
                "Registry.Example.Test/team-a/app:latest",
            ),
        ]);
        let upper = |component: &str| ReferenceError::Uppercase(component.into());
        assert_refused(&[
            ("registry.example.test/Team-A/app".into(), upper("Team-A")),
            ("registry.example.test/team-a/App:1".into(), upper("App")),
            ("App".into(), upper("App")),
            ("team-a/App".into(), upper("App")),
            ("docker.io/Team-A/app".into(), upper("Team-A")),
            ("Mirror/App".into(), upper("App")),
            ("registry.example.test/ÄPP".into(), upper("ÄPP")),
            (
                format!("registry.example.test/Team-A/app@{SHA}"),
                upper("Team-A"),
            ),
        ]);
    }

    /// Components of lowercase letters and digits, joined inside by one `.`, one or two `_`,
    /// or any number of `-`; components joined by single `/`s.
    #[test]
    fn path_components_follow_the_component_grammar() {
        assert_normalised(&[
            (
                "registry.example.test/team_a/app.v2/app__x/app-y/app--z",
                "registry.example.test/team_a/app.v2/app__x/app-y/app--z:latest",
            ),
            (
                "registry.example.test/0/42",
                "registry.example.test/0/42:latest",
            ),
            ("team-a/a", "docker.io/team-a/a:latest"),
        ]);
        let component = |c: &str| ReferenceError::PathComponent(c.into());
        let empty = ReferenceError::EmptyPathComponent;
        assert_refused(&[
            ("registry.example.test/team-a//app".into(), empty.clone()),
            ("registry.example.test/team-a/app/".into(), empty.clone()),
            ("registry.example.test/".into(), empty.clone()),
            ("/team-a/app".into(), empty.clone()),
            (":1.0".into(), empty.clone()),
            (format!("@{SHA}"), empty),
            ("team-a/.app".into(), component(".app")),
            ("team-a/app.".into(), component("app.")),
            ("team-a/app..x".into(), component("app..x")),
            ("team-a/app___x".into(), component("app___x")),
            ("team-a/app_-x".into(), component("app_-x")),
            ("team-a/-app".into(), component("-app")),
            ("team-a/app-".into(), component("app-")),
            ("team-a/app+x".into(), component("app+x")),
            ("team a/app".into(), component("team a")),
            (" app".into(), component(" app")),
            ("app\n".into(), component("app\n")),
            ("registry.example.test/tëam".into(), component("tëam")),
            // a bracketed host needs a path after it, else it is read as a Hub name
            ("[fd00::7]".into(), component("[fd00:")),
        ]);
    }

    /// At most 255 characters of repository path, `library/` included; the registry and the
    /// tag do not count.
    #[test]
    fn the_path_alone_is_limited_to_255_characters() {
        let path = |n: usize| "a".repeat(n);
        for image in [
            format!("registry.example.test:5000/{}", path(255)),
            format!("team-a/{}", path(248)),
            path(247),
            format!("registry.example.test/{}:{}", path(255), "t".repeat(128)),
            format!("registry.example.test/{}", ["abc"; 64].join("/")),
        ] {
            assert!(ImageReference::parse(&image).is_ok(), "{image}");
        }
        assert_refused(&[
            (
                format!("registry.example.test/{}", path(256)),
                ReferenceError::NameTooLong(256),
            ),
            (path(248), ReferenceError::NameTooLong(256)),
            (
                format!("registry.example.test/abcd/{}", ["abc"; 63].join("/")),
                ReferenceError::NameTooLong(256),
            ),
            (
                format!("{}/app@{SHA}", "x".repeat(300)),
                ReferenceError::NameTooLong(304),
            ),
        ]);
    }

    /// A registry is dot-separated labels of letters, digits and inner dashes, or an IPv6
    /// address in brackets, with an optional numeric port.
    #[test]
    fn registries_are_host_names_or_ip_addresses_with_an_optional_port() {
        for image in [
            "registry.example.test:5000/app",
            "10.0.0.7:30500/team-a/app:1",
            "[fd00::7]:5000/team-a/app:1",
            "[fd00::7]/app",
            "[::1]/app",
            "my-registry.example.test/app",
            "Registry.Example.Test:443/app",
            "a.b-c.d/app",
        ] {
            let expected = if image.ends_with(":1") {
                image.to_owned()
            } else {
                format!("{image}:latest")
            };
            assert_eq!(normalised(image), expected, "{image}");
        }
        let reference = ImageReference::parse("[fd00::7]:5000/team-a/app:1").expect("valid");
        assert_eq!(reference.registry(), "[fd00::7]:5000");
        let registry = |r: &str| ReferenceError::Registry(r.into());
        assert_refused(&[
            ("[fd00::7/app".into(), registry("[fd00::7")),
            (
                "[fd00::7%eth0]:5000/app".into(),
                registry("[fd00::7%eth0]:5000"),
            ),
            ("[fd00::g]:5000/app".into(), registry("[fd00::g]:5000")),
            ("[]:5000/app".into(), registry("[]:5000")),
            ("fd00::7/app".into(), registry("fd00::7")),
            (
                "registry.example.test:http/app".into(),
                registry("registry.example.test:http"),
            ),
            (
                "registry.example.test:/app".into(),
                registry("registry.example.test:"),
            ),
            (
                "registry.example.test:5000:6000/app".into(),
                registry("registry.example.test:5000:6000"),
            ),
            (
                "registry_a.example.test/app".into(),
                registry("registry_a.example.test"),
            ),
            (
                "-registry.example.test/app".into(),
                registry("-registry.example.test"),
            ),
            (
                "registry-.example.test/app".into(),
                registry("registry-.example.test"),
            ),
            (
                "registry..example.test/app".into(),
                registry("registry..example.test"),
            ),
            (".example.test/app".into(), registry(".example.test")),
        ]);
    }

    /// A tag is a letter, digit or `_`, then up to 127 letters, digits, `_`, `.` or `-`.
    #[test]
    fn tags_follow_the_tag_grammar() {
        let longest = "t".repeat(TAG_LENGTH_MAX);
        for tag in ["v1.2.3", "_build", "1", "RC-1_final", "a.-_b", &longest] {
            let image = format!("registry.example.test/app:{tag}");
            let reference = ImageReference::parse(&image).expect(&image);
            assert_eq!(reference.tag(), Some(tag));
        }
        let tag = |t: &str| ReferenceError::Tag(t.into());
        assert_refused(&[
            ("registry.example.test/app:-v1".into(), tag("-v1")),
            ("registry.example.test/app:.v1".into(), tag(".v1")),
            ("registry.example.test/app:".into(), tag("")),
            ("registry.example.test/app:v1+build".into(), tag("v1+build")),
            ("registry.example.test/app:v1/x".into(), tag("v1/x")),
            ("registry.example.test/app:vé".into(), tag("vé")),
            (
                format!("registry.example.test/app:{longest}x"),
                ReferenceError::TagTooLong(129),
            ),
            // only the last `:` starts the tag
            (
                "registry.example.test/app:v1:v2".into(),
                ReferenceError::PathComponent("app:v1".into()),
            ),
        ]);
    }

    /// `sha256:` and 64, `sha384:` and 96, or `sha512:` and 128 lowercase hex digits; the
    /// digest wins over a tag for the pull.
    #[test]
    fn digests_name_their_algorithm_and_exact_length() {
        for (algorithm, digits) in [("sha256", 64), ("sha384", 96), ("sha512", 128)] {
            let digest = format!("{algorithm}:{}", hex(digits));
            let image = format!("registry.example.test/team-a/app@{digest}");
            assert_eq!(normalised(&image), image);
            let reference = ImageReference::parse(&image).expect(&image);
            assert_eq!(
                reference.digest().map(Digest::as_str),
                Some(digest.as_str())
            );
        }
        let image = |digest: &str| format!("registry.example.test/app@{digest}");
        let length = |algorithm, expected, found| ReferenceError::DigestLength {
            algorithm,
            expected,
            found,
        };
        let malformed = |digest: &str| ReferenceError::Digest(quote(digest));
        assert_refused(&[
            (
                image(&format!("sha256:{}", hex(63))),
                length("sha256", 64, 63),
            ),
            (
                image(&format!("sha256:{}", hex(65))),
                length("sha256", 64, 65),
            ),
            (
                image(&format!("sha384:{}", hex(64))),
                length("sha384", 96, 64),
            ),
            (
                image(&format!("sha512:{}", hex(64))),
                length("sha512", 128, 64),
            ),
            (
                image(&format!("sha256:{}", hex(64).to_uppercase())),
                ReferenceError::DigestCase("sha256"),
            ),
            (
                image(&format!("md5:{}", hex(32))),
                ReferenceError::UnsupportedDigest("md5".into()),
            ),
            (
                image(&format!("blake3:{}", hex(64))),
                ReferenceError::UnsupportedDigest("blake3".into()),
            ),
            (
                image(&format!("sha256:{}", hex(31))),
                malformed(&format!("sha256:{}", hex(31))),
            ),
            (
                image(&format!("sha256:{}", "g".repeat(64))),
                malformed(&format!("sha256:{}", "g".repeat(64))),
            ),
            (image("sha256"), malformed("sha256")),
            (image(""), malformed("")),
            (
                image(&format!("256:{}", hex(64))),
                malformed(&format!("256:{}", hex(64))),
            ),
        ]);
    }

    /// The empty string, and a bare 64-hex string (an image ID), are no references; 64 hex
    /// digits anywhere else make an ordinary name.
    #[test]
    fn empty_and_image_id_strings_are_refused() {
        assert_refused(&[
            (String::new(), ReferenceError::Empty),
            (hex(64), ReferenceError::HexIdentifier),
            (
                hex(64).to_uppercase(),
                ReferenceError::Uppercase(hex(64).to_uppercase()),
            ),
        ]);
        for image in [
            hex(63),
            hex(65),
            format!("{}:1", hex(64)),
            format!("team-a/{}", hex(64)),
            format!("registry.example.test/{}", hex(64)),
        ] {
            assert!(ImageReference::parse(&image).is_ok(), "{image}");
        }
    }

    /// `name:tag@digest` keeps both; without a tag or a digest the tag is `latest`.
    #[test]
    fn a_tag_and_a_digest_are_both_kept_and_no_tag_means_latest() {
        let both = format!("registry.example.test:5000/team-a/app:1.4@{SHA}");
        let reference = ImageReference::parse(&both).expect("valid");
        assert_eq!(reference.to_string(), both);
        assert_eq!(reference.tag(), Some("1.4"));
        assert_eq!(
            reference.lookup_reference(),
            format!("registry.example.test:5000/team-a/app@{SHA}")
        );
        let untagged = ImageReference::parse("registry.example.test/team-a/app").expect("valid");
        assert_eq!(untagged.tag(), None);
        assert_eq!(
            untagged.to_string(),
            "registry.example.test/team-a/app:latest"
        );
        assert_eq!(
            normalised(&format!("team-a/app@{SHA}")),
            format!("docker.io/team-a/app@{SHA}")
        );
    }

    /// A refusal names the part at fault, cut short when it is long.
    #[test]
    fn refusals_name_the_part_at_fault_briefly() {
        let text = |image: &str| error(image).to_string();
        assert!(text("registry.example.test/Team-A/app").contains("\"Team-A\""));
        assert!(text("registry_a.example.test/app").contains("\"registry_a.example.test\""));
        assert!(text("registry.example.test/app:-v1").contains("\"-v1\""));
        assert_eq!(
            text(&format!("registry.example.test/app@sha256:{}", hex(63))),
            "sha256 digest has 63 hex digits; it needs exactly 64"
        );
        for image in [
            format!("registry.example.test/{}$", "a".repeat(10_000)),
            format!("registry.example.test/app:-{}", "t".repeat(10_000)),
            format!("{}_/app", "r.".repeat(10_000)),
            format!("app@sha256:{}", "g".repeat(10_000)),
        ] {
            let message = error(&image).to_string();
            assert!(message.len() < 200 && message.contains('…'), "{message}");
        }
    }

    /// The one-pass reading of plain images gives what the grammar gives, for every string
    /// of a quarter million made of the pieces where the two could part (separators, ports,
    /// Docker Hub's names, uppercase, digests, non-ASCII), and takes the common shapes.
    #[test]
    fn plain_images_read_in_one_pass_as_the_grammar_reads_them() {
        const PIECES: [&str; 30] = [
            "a",
            "z",
            "0",
            "9",
            "B",
            ".",
            "..",
            "_",
            "__",
            "___",
            "-",
            "--",
            "/",
            "//",
            ":",
            ":5000",
            ":x",
            "@",
            "@sha256:",
            "localhost",
            "docker.io",
            "index.docker.io",
            "127.0.0.1",
            "[::1]",
            "é",
            " ",
            "latest",
            "v1.2",
            "Tag",
            "library",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        const REGISTRIES: [&str; 14] = [
            "a.b",
            "127.0.0.1",
            "a.b:5000",
            "localhost:5000",
            "docker.io",
            "index.docker.io",
            "localhost",
            "A.b",
            "a-.b",
            "a..b",
            "a.b:",
            "[::1]:5000",
            "x",
            "a-b.c-d:1",
        ];
        const COMPONENTS: [&str; 13] = [
            "a", "a.b", "a__b", "a___b", "a-b", "a--b", "a_-b", "-a", "a-", "", "B", "é", "0_9",
        ];
        const TAGS: [&str; 8] = ["", ":1.0", ":Tag_1", ":-x", ":", ":a:b", "@sha256:0", ":é"];
        let mut pick = |from: &[&'static str]| from[(next() % from.len() as u64) as usize];
        let mut plain = 0;
        for round in 0..250_000 {
            let image: String = if round % 2 == 0 {
                let mut image = pick(&REGISTRIES).to_owned();
                for _ in 0..1 + round % 3 {
                    image.push('/');
                    image.push_str(pick(&COMPONENTS));
                }
                image + pick(&TAGS)
            } else {
                (0..1 + round % 9).map(|_| pick(&PIECES)).collect()
            };
            let by_grammar = ImageReference::parse_by_grammar(&image);
            if let Some(reference) = parse_plain(&image) {
                assert_eq!(Ok(&reference), by_grammar.as_ref(), "{image:?}");
                plain += 1;
            }
            assert_eq!(ImageReference::parse(&image), by_grammar, "{image:?}");
        }
        assert!(plain > 1_000, "only {plain} plain images drawn");
        for image in [
            "127.0.0.1:5000/bench/img-0:1.0",
            "ghcr.io/org/app:v1.2.3",
            "registry.k8s.io/pause:3.10",
            "quay.io/a__b/c-d.e_f/g---h",
            "localhost:5000/x",
            "my-registry.example.com:443/team/app:RC_1",
        ] {
            let reference = parse_plain(image).unwrap_or_else(|| panic!("{image}"));
            assert_eq!(reference.to_string().trim_end_matches(":latest"), image);
        }
        for image in [
            "docker.io/library/nginx:1",
            "nginx",
            "a.b/x@sha256:00",
            "A.b/x",
        ] {
            assert!(parse_plain(image).is_none(), "{image}");
        }
    }

    #[test]
    fn accepts_sha512_digests() {
        let image = format!("repo@sha512:{}", "a".repeat(128));
        assert!(ImageReference::parse(&image).is_ok());
    }

    #[test]
    fn lookup_reference_prefers_digest_and_defaults_latest() {
        let parse = |s: &str| ImageReference::parse(s).expect(s);
        assert_eq!(
            parse("nginx").lookup_reference(),
            "docker.io/library/nginx:latest"
        );
        assert_eq!(
            parse("docker.io/library/nginx:latest").lookup_reference(),
            parse("nginx").lookup_reference()
        );
        assert_eq!(
            parse(&format!("ghcr.io/a/b:1@{SHA}")).lookup_reference(),
            format!("ghcr.io/a/b@{SHA}")
        );
        assert_eq!(parse("a.io/b:2").lookup_reference(), "a.io/b:2");
    }

    #[test]
    fn latest_resolution_follows_kubelet_defaulting() {
        let latest = |s: &str| ImageReference::parse(s).expect(s).resolves_latest();
        assert!(latest("nginx"));
        assert!(latest("nginx:latest"));
        assert!(latest(&format!("nginx:latest@{SHA}")));
        assert!(!latest("nginx:1.25"));
        assert!(!latest(&format!("nginx@{SHA}")));
    }

    #[test]
    fn accessors_expose_the_parts() {
        let reference = ImageReference::parse(&format!("[::1]:5000/team/app:v1@{SHA}")).unwrap();
        assert_eq!(reference.registry(), "[::1]:5000");
        assert_eq!(reference.repository(), "team/app");
        assert_eq!(reference.tag(), Some("v1"));
        assert_eq!(reference.digest().map(Digest::as_str), Some(SHA));
        assert_eq!(reference.name(), "[::1]:5000/team/app");
    }

    /// A string field of a vector case, `None` when null or absent.
    fn field<'a>(case: &'a serde_json::Value, name: &str) -> Option<&'a str> {
        case.get(name).and_then(serde_json::Value::as_str)
    }

    /// Cases of `reference-normalize.json` this module answers differently, with the reason.
    /// The vectors give the kubelet's answers, so an entry here is a known divergence.
    const NORMALIZE_EXCEPTIONS: &[(&str, &str)] = &[];

    /// Where this module's answer for a `reference-normalize.json` case differs, if it does.
    fn normalize_disagreement(case: &serde_json::Value) -> Option<String> {
        let input = field(case, "input").expect("input");
        let valid = case["valid"].as_bool().expect("valid");
        let parsed = ImageReference::parse(input);
        let reference = match (&parsed, valid) {
            (Ok(reference), true) => reference,
            (Err(_), false) => return None,
            (Ok(reference), false) => return Some(format!("accepted as {reference}")),
            (Err(e), true) => return Some(format!("refused: {e}")),
        };
        let expected = field(case, "normalized").expect("normalized");
        let expected_full = field(case, "normalized_with_tag").unwrap_or(expected);
        let ours = [
            ("normalized", Some(reference.lookup_reference())),
            ("normalized_with_tag", Some(reference.to_string())),
            ("domain", Some(reference.registry().to_owned())),
            ("path", Some(reference.repository().to_owned())),
            ("tag", reference.tag().map(str::to_owned)),
            ("digest", reference.digest().map(|d| d.as_str().to_owned())),
        ];
        ours.into_iter()
            .find(|(name, ours)| {
                let theirs = match *name {
                    "normalized_with_tag" => Some(expected_full),
                    _ => field(case, name),
                };
                ours.as_deref() != theirs
            })
            .map(|(name, ours)| format!("{name} is {ours:?}, expected {:?}", field(case, name)))
    }

    /// Every case of the shared `reference-normalize.json` (the kubelet's answers for the
    /// inputs of upstream tests) gets the same validity and normalised parts here.
    #[test]
    fn agrees_with_the_shared_normalisation_vectors() {
        let Some(cases) = crate::testing::shared_vectors("reference-normalize.json") else {
            return;
        };
        assert!(!cases.is_empty());
        let mut failures = Vec::new();
        for case in &cases {
            let input = field(case, "input").expect("input");
            let disagreement = normalize_disagreement(case);
            match NORMALIZE_EXCEPTIONS.iter().find(|(i, _)| *i == input) {
                Some(_) if disagreement.is_none() => {
                    failures.push(format!("{input:?}: listed as an exception, yet agrees"))
                }
                Some(_) => {}
                None => failures.extend(disagreement.map(|d| format!("{input:?}: {d}"))),
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    /// `[registry/]path` by this module's grammar, the registry taken when it can be one: the
    /// shape of a name without tag or digest, before normalisation.
    fn is_name(name: &str) -> bool {
        let with_registry = name
            .split_once('/')
            .is_some_and(|(registry, path)| is_valid_domain(registry) && check_path(path).is_ok());
        with_registry || check_path(name).is_ok()
    }

    /// Where this module's answer for a `reference-regexp.json` case differs, if it does;
    /// `None` too for kinds that do not map onto this module.
    fn regexp_disagreement(case: &serde_json::Value) -> Option<String> {
        let input = field(case, "input").expect("input");
        let matches = case["match"].as_bool().expect("match");
        let ours = match field(case, "kind").expect("kind") {
            "domain_regexp" => is_valid_domain(input),
            "anchored_name_regexp" => is_name(input),
            "anchored_identifier_regexp" => {
                ImageReference::parse(input) == Err(ReferenceError::HexIdentifier)
            }
            "reference_regexp" => return reference_disagreement(case, input, matches),
            _ => return None,
        };
        (ours != matches).then(|| format!("ours {ours}, expected {matches}"))
    }

    /// A `reference_regexp` case: valid as expected, and the same name, tag and digest.
    fn reference_disagreement(
        case: &serde_json::Value,
        input: &str,
        matches: bool,
    ) -> Option<String> {
        let parsed = ImageReference::parse(input);
        let reference = match (parsed, matches) {
            (Ok(reference), true) => reference,
            (Err(_), false) => return None,
            (parsed, _) => return Some(format!("ours {parsed:?}, expected match {matches}")),
        };
        let subs: Vec<&str> = case["subs"]
            .as_array()
            .expect("subs")
            .iter()
            .map(|sub| sub.as_str().expect("a string"))
            .collect();
        let name = ImageReference::parse(subs[0]).map(|name| name.name());
        let tag = Some(subs[1]).filter(|tag| !tag.is_empty());
        let digest = Some(subs[2]).filter(|digest| !digest.is_empty());
        let agrees = name.as_ref() == Ok(&reference.name())
            && reference.tag() == tag
            && reference.digest().map(Digest::as_str) == digest;
        (!agrees).then(|| format!("ours {reference:?}, expected parts {subs:?}"))
    }

    /// Cases of `reference-regexp.json` this module answers differently, with the reason.
    const REGEXP_EXCEPTIONS: &[(&str, &str, &str)] = &[];

    /// The shared `reference-regexp.json` cases that map onto this module: registries,
    /// `[registry/]path` names, image IDs, and whole references split into their parts.
    #[test]
    fn agrees_with_the_shared_grammar_vectors() {
        let Some(cases) = crate::testing::shared_vectors("reference-regexp.json") else {
            return;
        };
        assert!(!cases.is_empty());
        let mut failures = Vec::new();
        for case in &cases {
            let input = field(case, "input").expect("input");
            let kind = field(case, "kind").expect("kind");
            let disagreement = regexp_disagreement(case);
            let excepted = REGEXP_EXCEPTIONS
                .iter()
                .any(|(k, i, _)| *k == kind && *i == input);
            match (excepted, disagreement) {
                (true, None) => failures.push(format!(
                    "{kind} {input:?}: listed as an exception, yet agrees"
                )),
                (false, Some(d)) => failures.push(format!("{kind} {input:?}: {d}")),
                _ => {}
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
