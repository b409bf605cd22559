//! Image references, parsed and normalised exactly as `distribution/reference` v0.6.0
//! (`ParseNormalizedNamed`) does, because that is what the kubelet runs before every pull.
//!
//! Written by hand rather than with `oci-client`'s or `oci-spec`'s parser: those follow
//! containers/image and older distribution rules (domain counted in the 255-character limit, no
//! uppercase-domain rule) and return their own error texts, while a rejection here must quote
//! the very reason the kubelet would give in its `InvalidImageName` event.

use std::fmt;

/// Docker Hub's canonical domain: where names without a registry component live.
pub const DEFAULT_REGISTRY: &str = "docker.io";
const LEGACY_DEFAULT_REGISTRY: &str = "index.docker.io";
const OFFICIAL_REPO_PREFIX: &str = "library/";
const NAME_TOTAL_LENGTH_MAX: usize = 255;
const TAG_LENGTH_MAX: usize = 128;

/// Why a string is not an image reference; the texts are distribution/reference's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The image field is empty: the kubelet reports `InvalidImageName`.
    #[error("repository name must have at least one component")]
    Empty,
    /// Does not match the reference grammar.
    #[error("invalid reference format")]
    InvalidFormat,
    /// The repository path has an uppercase letter.
    #[error("repository name must be lowercase")]
    Uppercase,
    /// The repository path is longer than 255 characters.
    #[error("repository name must not be more than 255 characters")]
    NameTooLong,
    /// A bare 64-hex string, which Docker reserves for image IDs.
    #[error("cannot specify 64-byte hexadecimal strings as a repository name")]
    HexIdentifier,
    /// The digest algorithm is not one the runtime can verify.
    #[error("unsupported digest algorithm")]
    UnsupportedDigest,
    /// The digest's hex part has the wrong length for its algorithm.
    #[error("invalid checksum digest length")]
    DigestLength,
}

/// A content digest (`sha256:…`), validated for an algorithm the runtime supports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Digest(String);

impl Digest {
    /// Parses `algorithm:hex` with go-digest's rules: only sha256, sha384 and sha512 are
    /// verifiable, each with its exact hex length.
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        let (algorithm, hex) = s.split_once(':').ok_or(ReferenceError::InvalidFormat)?;
        if !is_digest_algorithm(algorithm) || hex.len() < 32 || !is_hex(hex) {
            return Err(ReferenceError::InvalidFormat);
        }
        let expected = match algorithm {
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => return Err(ReferenceError::UnsupportedDigest),
        };
        if hex.len() != expected {
            return Err(ReferenceError::DigestLength);
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
            return Err(ReferenceError::Uppercase);
        }

        let (name_and_tag, digest) = match remainder.split_once('@') {
            Some((left, digest)) => (left, Some(Digest::parse(digest)?)),
            None => (remainder, None),
        };
        let (repository, tag) = match name_and_tag.rsplit_once(':') {
            Some((repository, tag)) => (repository, Some(tag)),
            None => (name_and_tag, None),
        };
        if !is_valid_domain(registry) || !is_valid_path(repository) {
            return Err(ReferenceError::InvalidFormat);
        }
        if let Some(tag) = tag {
            if !is_valid_tag(tag) {
                return Err(ReferenceError::InvalidFormat);
            }
        }
        if repository.len() > NAME_TOTAL_LENGTH_MAX {
            return Err(ReferenceError::NameTooLong);
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

/// Path components joined by `/`, each `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_valid_path(path: &str) -> bool {
    path.split('/').all(is_valid_path_component)
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
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= TAG_LENGTH_MAX
        && word(bytes[0])
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

    const SHA: &str = "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";

    fn normalised(image: &str) -> String {
        ImageReference::parse(image)
            .unwrap_or_else(|e| panic!("{image}: {e}"))
            .to_string()
    }

    fn error(image: &str) -> ReferenceError {
        ImageReference::parse(image).expect_err(image)
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

    /// Cases from distribution/reference's normalize_test.go (TestParseNormalizedNamed and
    /// TestParseRepositoryInfo).
    #[test]
    fn normalises_like_distribution() {
        let cases = [
            ("busybox", "docker.io/library/busybox:latest"),
            ("library/busybox", "docker.io/library/busybox:latest"),
            ("docker.io/busybox", "docker.io/library/busybox:latest"),
            (
                "index.docker.io/busybox",
                "docker.io/library/busybox:latest",
            ),
            (
                "index.docker.io/library/busybox:1",
                "docker.io/library/busybox:1",
            ),
            ("fooo/bar", "docker.io/fooo/bar:latest"),
            ("docker.io/fooo/bar", "docker.io/fooo/bar:latest"),
            ("nothing/busybox:mytag", "docker.io/nothing/busybox:mytag"),
            ("localhost/busybox", "localhost/busybox:latest"),
            ("localhost:5000/busybox", "localhost:5000/busybox:latest"),
            ("127.0.0.1:5000/foo/bar:1.0", "127.0.0.1:5000/foo/bar:1.0"),
            ("[::1]:5000/repo", "[::1]:5000/repo:latest"),
            ("[2001:db8::1]/repo:v1", "[2001:db8::1]/repo:v1"),
            ("Foo/bar", "Foo/bar:latest"),
            ("example.com/a/b/c/d:tag", "example.com/a/b/c/d:tag"),
            (
                "ubuntu-12.04-base",
                "docker.io/library/ubuntu-12.04-base:latest",
            ),
            ("foo.com:8080/a__b", "foo.com:8080/a__b:latest"),
            ("a/b---c", "docker.io/a/b---c:latest"),
            ("localhost:5000", "docker.io/library/localhost:5000"),
            (
                &format!("busybox@{SHA}"),
                &format!("docker.io/library/busybox@{SHA}"),
            ),
            (
                &format!("ghcr.io/org/app:1.2@{SHA}"),
                &format!("ghcr.io/org/app:1.2@{SHA}"),
            ),
        ];
        for (image, expected) in cases {
            assert_eq!(normalised(image), expected, "{image}");
        }
    }

    #[test]
    fn rejects_what_distribution_rejects() {
        let long_path = format!("example.com/{}", "a".repeat(256));
        let ok_path = format!("a.b/{}", "a".repeat(255));
        let cases: Vec<(String, ReferenceError)> = vec![
            ("".into(), ReferenceError::Empty),
            (":justtag".into(), ReferenceError::InvalidFormat),
            (format!("@{SHA}"), ReferenceError::InvalidFormat),
            ("a/a/a/a/".into(), ReferenceError::InvalidFormat),
            ("a//a".into(), ReferenceError::InvalidFormat),
            ("aa/asdf$$^/aa".into(), ReferenceError::InvalidFormat),
            ("a_/b".into(), ReferenceError::InvalidFormat),
            ("a-/b".into(), ReferenceError::InvalidFormat),
            ("-foo/bar".into(), ReferenceError::InvalidFormat),
            ("foo/bar:".into(), ReferenceError::InvalidFormat),
            ("foo/bar:-tag".into(), ReferenceError::InvalidFormat),
            (
                format!("foo:{}", "a".repeat(129)),
                ReferenceError::InvalidFormat,
            ),
            ("Uppercase:tag".into(), ReferenceError::Uppercase),
            ("test.com/Uppercase".into(), ReferenceError::Uppercase),
            ("docker.io/Foo/bar".into(), ReferenceError::Uppercase),
            (
                "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5c7b9a1f3e5d7c9b1a3f".into(),
                ReferenceError::HexIdentifier,
            ),
            (" busybox".into(), ReferenceError::InvalidFormat),
            ("busybox ".into(), ReferenceError::InvalidFormat),
            ("[::1/repo".into(), ReferenceError::InvalidFormat),
            ("[zz::1]:5000/repo".into(), ReferenceError::InvalidFormat),
            ("host:port/repo".into(), ReferenceError::InvalidFormat),
            (
                "foo_bar.com:8080/a__b".into(),
                ReferenceError::InvalidFormat,
            ),
            ("repo@sha256:abc".into(), ReferenceError::InvalidFormat),
            (
                format!("repo@md5:{}", "a".repeat(32)),
                ReferenceError::UnsupportedDigest,
            ),
            (
                format!("repo@sha256:{}", "a".repeat(63)),
                ReferenceError::DigestLength,
            ),
            (long_path, ReferenceError::NameTooLong),
            ("nginx\u{0}".into(), ReferenceError::InvalidFormat),
            ("ngïnx".into(), ReferenceError::InvalidFormat),
        ];
        for (image, expected) in cases {
            assert_eq!(error(&image), expected, "{image:?}");
        }
        // Only the path counts against the limit (distribution v0.6.0).
        assert!(ImageReference::parse(&ok_path).is_ok());
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
}
