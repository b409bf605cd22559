//! The lookup broker's reference encoding: the contract between the policy, which rewrites a
//! lookup to `BROKER_HOST/<encoded name>:<tag>` (or `@<digest>`), and the broker, which decodes
//! the name back into the namespace, the credentials to use, the registry and the repository.
//!
//! The policy server's reference parser must accept every encoded reference, so the name is
//! made of lowercase path components (`[a-z0-9]+` joined by `.`, `_`, `__` or `-`, separated
//! by `/`), and the whole name, broker host included, is at most 255 characters. The encoding
//! is canonical: [`BrokeredName::decode`] accepts exactly the strings
//! [`BrokeredName::encode`] produces, so two different lookups never share an encoded name
//! (and never share an entry of the policy server's cache). The layout, the sealed message, the
//! expiry and the refusals are specified in [`spec`].
//!
//! Security rests on who can write the name. The broker answers only names sealed with its
//! key ([`SealingKey`]), which the policy reads from a Secret that only it is granted, so
//! another module on the same policy server, or a Pod author who writes an image on the
//! broker's host, cannot choose whose secrets are spent. A sealed name is good for one tag or
//! digest, on one broker host, for minutes ([`expiry`], [`Unsealing`]): whoever copies it
//! from a log or a cache holds no lasting capability. The policy fills in the namespace of
//! the admission request, never anything from the image; and it never sends a reference on
//! the broker's host that it did not write itself ([`is_broker_host`]).
//!
//! Used by the policy (compiled into its wasm) and the broker, so that both read one encoding;
//! tested by its unit tests and the broker's suites (`e2e-tests/9[4-7]-broker*.bats`).

pub mod spec;
pub mod suggested_tags;

/// The first component of every encoded name: the version of this encoding.
pub const VERSION: &str = "r4";
/// The seal's length in hex digits: the first 128 bits of the keyed hash.
pub const SEAL_LENGTH: usize = 32;
/// The longest name (registry host included) distribution's reference parser accepts.
pub const NAME_TOTAL_LENGTH_MAX: usize = 255;
/// The longest tag a reference may have.
pub const TAG_LENGTH_MAX: usize = 128;
/// Seals expire on a multiple of this many seconds ([`expiry`]): every lookup of an image in
/// one window gets the same reference, so the policy server's per-reference cache still
/// serves it.
pub const EXPIRY_WINDOW_SECONDS: u64 = 300;
/// How far apart the policy server's clock and the broker's may be.
pub const CLOCK_SKEW_MAX_SECONDS: u64 = 60;
/// The furthest expiry the broker accepts, from its own clock: the longest lifetime [`expiry`]
/// gives (under two windows) and the skew allowed. A name that claims longer was not written
/// by this encoder with a sane clock.
pub const EXPIRES_AHEAD_MAX_SECONDS: u64 = 2 * EXPIRY_WINDOW_SECONDS + CLOCK_SKEW_MAX_SECONDS;

/// The expiry the policy writes at `now` (Unix seconds): the next multiple of
/// [`EXPIRY_WINDOW_SECONDS`] at or after `now`, plus one window. A seal therefore lives at
/// least one window (a lookup in flight never outlives it) and less than two, and the
/// references written within one window are identical.
pub fn expiry(now: u64) -> u64 {
    now.div_ceil(EXPIRY_WINDOW_SECONDS)
        .saturating_mul(EXPIRY_WINDOW_SECONDS)
        .saturating_add(EXPIRY_WINDOW_SECONDS)
}

/// What the broker accepts a seal for: its keys, the host names it is reached by (`--own-host`),
/// and its clock.
#[derive(Debug, Clone, Copy)]
pub struct Unsealing<'a> {
    /// Every key of the broker (two during a rotation).
    pub keys: &'a [SealingKey],
    /// The broker's own host names, `host[:port]`, compared as [`registry_key`] spells them.
    pub own_hosts: &'a [String],
    /// The broker's clock, Unix seconds.
    pub now: u64,
}

/// Whose credentials the broker looks the image up with, as the kubelet would pick them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Credentials {
    /// These pull secrets of the namespace, in the pod's order (empty: anonymous).
    PullSecrets(Vec<String>),
    /// The pull secrets listed by this ServiceAccount of the namespace (a pod template that
    /// names none of its own, before the ServiceAccount admission plugin fills them in).
    ServiceAccount(String),
}

/// One brokered lookup's name: everything but the tag or digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokeredName {
    /// The namespace of the admission request: whose secrets may be read.
    pub namespace: String,
    /// Which credentials to try.
    pub credentials: Credentials,
    /// The real registry, `host[:port]` as in the image (`docker.io`, `[::1]:5000`).
    pub registry: String,
    /// The repository path in that registry (`library/busybox`).
    pub repository: String,
}

/// The tag or digest of a manifest request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ManifestReference {
    /// A tag (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`).
    Tag(String),
    /// A digest (`algorithm:hex`).
    Digest(String),
}

impl ManifestReference {
    /// Parses the `<reference>` of `/v2/<name>/manifests/<reference>`: a tag or a digest, with
    /// distribution's grammar, so that nothing else reaches an upstream URL.
    pub fn parse(reference: &str) -> Result<Self, Refusal> {
        if reference.contains(':') {
            if is_digest(reference) {
                Ok(ManifestReference::Digest(reference.to_owned()))
            } else {
                Err(Refusal::Digest)
            }
        } else if is_tag(reference) {
            Ok(ManifestReference::Tag(reference.to_owned()))
        } else {
            Err(Refusal::Tag)
        }
    }

    /// The text to put in a manifest URL.
    pub fn as_str(&self) -> &str {
        match self {
            ManifestReference::Tag(s) | ManifestReference::Digest(s) => s,
        }
    }
}

/// Why a lookup cannot be encoded, or a name is not an encoding. Texts never quote the input
/// (a broker logs them for names any caller may send).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The namespace is not a DNS-1123 label.
    #[error("the namespace is not a DNS-1123 label")]
    Namespace,
    /// A pull secret or ServiceAccount name is not a DNS-1123 subdomain (no such object can
    /// exist).
    #[error("a pull secret or ServiceAccount name is not a DNS-1123 subdomain")]
    ObjectName,
    /// The registry is not a `host[:port]` of a reference.
    #[error("the registry is not a host with an optional port")]
    Registry,
    /// The repository is not lowercase path components.
    #[error("the repository is not lowercase path components")]
    Repository,
    /// The tag does not have a tag's grammar.
    #[error("the tag is not a valid tag")]
    Tag,
    /// The digest does not have a digest's grammar.
    #[error("the digest is not a valid digest")]
    Digest,
    /// The broker host is not a `host[:port]`.
    #[error("the broker host is not a host with an optional port")]
    BrokerHost,
    /// The encoded name would be longer than 255 characters.
    #[error("the brokered name would be longer than 255 characters")]
    TooLong,
    /// The name is not this encoding (another version, such as the retired `r2`, a missing or
    /// malformed component, not canonical).
    #[error("the name is not a brokered lookup of encoding r4")]
    NotEncoded,
    /// The name is this encoding but its seal is not one of the broker's keys' for one of its
    /// host names and the tag or digest asked: the policy did not write it, wrote it for
    /// another broker or another tag or digest, or holds another key.
    #[error("the name is not sealed with a key of the lookup broker for this broker host and this tag or digest")]
    Unsealed,
    /// The seal's expiry has passed on the broker's clock.
    #[error("the name's seal has expired")]
    Expired,
    /// The seal's expiry is further ahead than any the policy writes
    /// ([`EXPIRES_AHEAD_MAX_SECONDS`]): a forged lifetime, or clocks too far apart.
    #[error(
        "the name's seal expires further ahead than the lookup broker accepts (clocks apart?)"
    )]
    ExpiresTooLate,
    /// A sealing key shorter than [`SealingKey::MIN_LENGTH`] bytes.
    #[error("the sealing key is shorter than 32 bytes")]
    ShortKey,
}

/// The secret the policy and the broker share: only a holder can write a name the broker
/// answers. Held as the BLAKE3 key derived from the Secret's bytes ([`spec`]), read once per
/// request: the policy seals every image of a request in a fresh instance, and BLAKE3's keyed
/// hash of a name costs the guest about a third of HMAC-SHA256's (docs/performance.md). Never
/// printed: its `Debug` shows no byte.
#[derive(Clone)]
pub struct SealingKey([u8; blake3::KEY_LEN]);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(..)")
    }
}

/// The BLAKE3 key derivation context of the seal's key ([`spec`]).
pub const KEY_CONTEXT: &str = "resolvable-images-policy lookup broker r4 seal key";

impl SealingKey {
    /// The keyed hash's own security: a shorter secret would be the weakest part.
    pub const MIN_LENGTH: usize = 32;

    /// A key of at least [`SealingKey::MIN_LENGTH`] bytes (any bytes: the text of a random
    /// string is as good as raw bytes).
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Self, Refusal> {
        let bytes = bytes.as_ref();
        if bytes.len() < Self::MIN_LENGTH {
            return Err(Refusal::ShortKey);
        }
        Ok(SealingKey(blake3::derive_key(KEY_CONTEXT, bytes)))
    }

    /// The key a Secret holds (a `data` entry or a mounted file): its bytes without the
    /// trailing newlines an editor or `--from-file` adds, so that the policy (which reads the
    /// Secret through the API) and the broker (which reads the mount) hold the same key.
    pub fn from_secret(bytes: &[u8]) -> Result<Self, Refusal> {
        let end = bytes
            .iter()
            .rposition(|b| !matches!(b, b'\n' | b'\r'))
            .map_or(0, |i| i + 1);
        Self::new(&bytes[..end])
    }

    /// The keyed hash of the message [`SealedParts::pieces`] spells, fed piece by piece: no
    /// message is written out.
    fn mac(&self, parts: &SealedParts<'_>) -> blake3::Hash {
        let mut hasher = blake3::Hasher::new_keyed(&self.0);
        for piece in parts.pieces() {
            hasher.update(piece.as_bytes());
        }
        hasher.finalize()
    }

    /// The seal of `parts`: the first 128 bits of their keyed hash, in lowercase hex, appended
    /// to `out`.
    fn push_seal(&self, out: &mut String, parts: &SealedParts<'_>) {
        push_hex(out, &self.mac(parts).as_bytes()[..SEAL_LENGTH / 2]);
    }

    /// The seal of a message written out (the tests forge names with it).
    #[cfg(test)]
    fn seal(&self, message: &str) -> String {
        let mut seal = String::new();
        push_hex(
            &mut seal,
            &blake3::keyed_hash(&self.0, message.as_bytes()).as_bytes()[..SEAL_LENGTH / 2],
        );
        seal
    }

    /// True when `seal` is this key's seal of `parts`, compared in constant time.
    fn verifies(&self, seal: &[u8], parts: &SealedParts<'_>) -> bool {
        seal.len() == SEAL_LENGTH / 2
            && constant_time_eq::constant_time_eq(seal, &self.mac(parts).as_bytes()[..seal.len()])
    }
}

/// The tag or digest a seal is for, borrowed.
#[derive(Debug, Clone, Copy)]
enum Asked<'a> {
    Tag(&'a str),
    Digest(&'a str),
}

impl<'a> Asked<'a> {
    /// The separator before it in a reference, and its text.
    fn parts(self) -> (&'static str, &'a str) {
        match self {
            Asked::Tag(tag) => (":", tag),
            Asked::Digest(digest) => ("@", digest),
        }
    }
}

impl ManifestReference {
    fn asked(&self) -> Asked<'_> {
        match self {
            ManifestReference::Tag(tag) => Asked::Tag(tag),
            ManifestReference::Digest(digest) => Asked::Digest(digest),
        }
    }
}

/// What a seal covers, in its parts.
struct SealedParts<'a> {
    host_key: &'a str,
    expires: &'a str,
    body: &'a str,
    asked: Asked<'a>,
}

impl SealedParts<'_> {
    /// The message the seal is the keyed hash of, piece by piece: the reference as the policy
    /// wrote it, the seal left out, with only the tag or the digest that the manifest URL asks
    /// for (a digest when the image has one, as the policy server's client and the test host
    /// ask), the broker host spelled as [`registry_key`] spells it: `<host>/r4/<expires>/
    /// <body>:<tag>` or `…/<body>@<digest>`. Unambiguous: the host has no `/`, the body ends
    /// with path components, which hold neither `:` nor `@`, and a tag holds neither.
    fn pieces(&self) -> [&str; 9] {
        let (separator, asked) = self.asked.parts();
        [
            self.host_key,
            "/",
            VERSION,
            "/",
            self.expires,
            "/",
            self.body,
            separator,
            asked,
        ]
    }
}

/// The message [`SealedParts::pieces`] spells, written out (the tests forge names with it).
#[cfg(test)]
fn seal_message(host_key: &str, expires: &str, body: &str, asked: &ManifestReference) -> String {
    SealedParts {
        host_key,
        expires,
        body,
        asked: asked.asked(),
    }
    .pieces()
    .concat()
}

/// `bytes` in lowercase hex, appended to `out` digit by digit (`format!` per byte costs the
/// policy thousands of wasm instructions for each name it seals).
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
}

impl BrokeredName {
    /// The encoded name (no broker host) for looking up `asked` (the tag or digest the
    /// manifest URL will carry) through `broker_host` until `expires` (Unix seconds, see
    /// [`expiry`]), sealed with `key`; or why this lookup cannot be encoded. The length limit
    /// is checked by [`reference()`], which writes the broker host in front.
    pub fn encode(
        &self,
        key: &SealingKey,
        broker_host: &str,
        asked: &ManifestReference,
        expires: u64,
    ) -> Result<String, Refusal> {
        let sealer = Sealer::new(key.clone(), broker_host, &self.namespace, expires)?;
        let body = self.body()?;
        let mut encoded = String::new();
        sealer.push_encoded(&mut encoded, &body, asked.asked());
        Ok(encoded)
    }

    /// What the seal covers besides the host, the expiry and the tag or digest:
    /// `<namespace>/<credentials>/<registry>/<repository>`.
    fn body(&self) -> Result<String, Refusal> {
        if !is_dns_label(&self.namespace) {
            return Err(Refusal::Namespace);
        }
        let mut body = String::new();
        push_body(
            &mut body,
            &self.namespace,
            &self.credentials,
            &self.registry,
            &self.repository,
        )?;
        Ok(body)
    }

    /// Decodes a name the broker received in `/v2/<name>/manifests/<asked>`, accepting exactly
    /// what [`BrokeredName::encode`] produces with one of the broker's keys, for one of its
    /// host names and for `asked`, and only before its expiry. The seal is checked before
    /// anything else of the name is believed; the expiry right after it.
    pub fn decode(
        name: &str,
        asked: &ManifestReference,
        unsealing: &Unsealing<'_>,
    ) -> Result<Self, Refusal> {
        if name.len() > NAME_TOTAL_LENGTH_MAX {
            return Err(Refusal::TooLong);
        }
        let mut parts = name.splitn(4, '/');
        let (Some(VERSION), Some(seal), Some(expires), Some(body)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refusal::NotEncoded);
        };
        let seal = is_seal(seal)
            .then(|| decode_hex(seal))
            .flatten()
            .ok_or(Refusal::NotEncoded)?;
        let expires_at = parse_expiry(expires).ok_or(Refusal::NotEncoded)?;
        // the seal first: nothing of an unsealed name is looked at further
        let sealed = unsealing.own_hosts.iter().any(|host| {
            let parts = SealedParts {
                host_key: &registry_key(host),
                expires,
                body,
                asked: asked.asked(),
            };
            unsealing.keys.iter().any(|key| key.verifies(&seal, &parts))
        });
        if !sealed {
            return Err(Refusal::Unsealed);
        }
        if expires_at <= unsealing.now {
            return Err(Refusal::Expired);
        }
        if expires_at - unsealing.now > EXPIRES_AHEAD_MAX_SECONDS {
            return Err(Refusal::ExpiresTooLate);
        }
        Self::decode_body(body)
    }

    /// The lookup a sealed body names, if it is what the encoder writes.
    fn decode_body(body: &str) -> Result<Self, Refusal> {
        let mut parts = body.splitn(4, '/');
        let (Some(namespace), Some(credentials), Some(registry), Some(repository)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refusal::NotEncoded);
        };
        let credentials = if credentials == "n" {
            Credentials::PullSecrets(Vec::new())
        } else if let Some(list) = credentials.strip_prefix("s.") {
            Credentials::PullSecrets(list.split("__").map(str::to_owned).collect())
        } else if let Some(name) = credentials.strip_prefix("a.") {
            Credentials::ServiceAccount(name.to_owned())
        } else {
            return Err(Refusal::NotEncoded);
        };
        let decoded = BrokeredName {
            namespace: namespace.to_owned(),
            credentials,
            registry: decode_registry(registry)?,
            repository: repository.to_owned(),
        };
        // Canonical: only what the encoder would write is accepted, so decoding is injective.
        match decoded.body() {
            Ok(again) if again == body => Ok(decoded),
            Ok(_) => Err(Refusal::NotEncoded),
            Err(refusal) => Err(refusal),
        }
    }
}

/// An expiry as the encoder writes it: decimal Unix seconds without a leading zero.
fn parse_expiry(text: &str) -> Option<u64> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    canonical.then(|| text.parse().ok()).flatten()
}

/// The full reference the policy asks the policy server about: `broker_host/<name>` with the
/// tag and/or digest of the original image, sealed for the one the manifest URL will carry
/// (the digest when there is one) and for `expires` (Unix seconds, see [`expiry`]). Refuses
/// what would not parse or is too long.
pub fn reference(
    broker_host: &str,
    name: &BrokeredName,
    key: &SealingKey,
    tag: Option<&str>,
    digest: Option<&str>,
    expires: u64,
) -> Result<String, Refusal> {
    Sealer::new(key.clone(), broker_host, &name.namespace, expires)?.reference(
        &name.credentials,
        &name.registry,
        &name.repository,
        tag,
        digest,
    )
}

/// What every brokered name of one admission request shares, checked and spelt once: the key,
/// the broker host, the expiry and the namespace. The policy writes the names of a request's
/// images with one, each in one string and one keyed hash over its parts, since it seals every
/// image of every request in a fresh instance.
#[derive(Debug, Clone)]
pub struct Sealer {
    key: SealingKey,
    /// As the reference writes it.
    host: String,
    /// As the seal covers it ([`registry_key`]).
    host_key: String,
    expires: String,
    namespace: String,
}

impl Sealer {
    /// The names of `namespace`'s lookups through `broker_host` until `expires` (Unix seconds,
    /// see [`expiry`]), sealed with `key`; refused when the host or the namespace cannot be
    /// encoded.
    pub fn new(
        key: SealingKey,
        broker_host: &str,
        namespace: &str,
        expires: u64,
    ) -> Result<Self, Refusal> {
        if plain_host_and_port(broker_host).is_none() {
            return Err(Refusal::BrokerHost);
        }
        if !is_dns_label(namespace) {
            return Err(Refusal::Namespace);
        }
        Ok(Sealer {
            key,
            host: broker_host.to_owned(),
            host_key: registry_key(broker_host),
            expires: expires.to_string(),
            namespace: namespace.to_owned(),
        })
    }

    /// The full reference the policy asks the policy server about (see [`reference()`]) for
    /// looking up `registry/repository` with `credentials`.
    pub fn reference(
        &self,
        credentials: &Credentials,
        registry: &str,
        repository: &str,
        tag: Option<&str>,
        digest: Option<&str>,
    ) -> Result<String, Refusal> {
        if tag.is_some_and(|tag| !is_tag(tag)) {
            return Err(Refusal::Tag);
        }
        let asked = match (tag, digest) {
            (_, Some(digest)) if is_digest(digest) => Asked::Digest(digest),
            (_, Some(_)) => return Err(Refusal::Digest),
            (Some(tag), None) => Asked::Tag(tag),
            (None, None) => return Err(Refusal::Tag),
        };
        let mut body = String::with_capacity(NAME_TOTAL_LENGTH_MAX);
        push_body(
            &mut body,
            &self.namespace,
            credentials,
            registry,
            repository,
        )?;
        let mut out = String::with_capacity(2 * NAME_TOTAL_LENGTH_MAX);
        out.push_str(&self.host);
        out.push('/');
        self.push_encoded(&mut out, &body, asked);
        // the name, `<host>/r4/<seal>/<expires>/<body>`; the tag and digest follow it
        if out.len() > NAME_TOTAL_LENGTH_MAX {
            return Err(Refusal::TooLong);
        }
        for (separator, text) in [(':', tag), ('@', digest)] {
            if let Some(text) = text {
                out.push(separator);
                out.push_str(text);
            }
        }
        Ok(out)
    }

    /// `r4/<seal>/<expires>/<body>`, appended to `out`.
    fn push_encoded(&self, out: &mut String, body: &str, asked: Asked<'_>) {
        let parts = SealedParts {
            host_key: &self.host_key,
            expires: &self.expires,
            body,
            asked,
        };
        out.push_str(VERSION);
        out.push('/');
        self.key.push_seal(out, &parts);
        out.push('/');
        out.push_str(&self.expires);
        out.push('/');
        out.push_str(body);
    }
}

/// `<namespace>/<credentials>/<registry>/<repository>` appended to `out`, the namespace taken
/// as checked; or why the lookup cannot be encoded.
fn push_body(
    out: &mut String,
    namespace: &str,
    credentials: &Credentials,
    registry: &str,
    repository: &str,
) -> Result<(), Refusal> {
    out.push_str(namespace);
    out.push('/');
    match credentials {
        Credentials::PullSecrets(names) if names.is_empty() => out.push('n'),
        Credentials::PullSecrets(names) => {
            out.push_str("s.");
            for (i, name) in names.iter().enumerate() {
                if !is_dns_subdomain(name) {
                    return Err(Refusal::ObjectName);
                }
                if i > 0 {
                    out.push_str("__");
                }
                out.push_str(name);
            }
        }
        Credentials::ServiceAccount(name) => {
            if !is_dns_subdomain(name) {
                return Err(Refusal::ObjectName);
            }
            out.push_str("a.");
            out.push_str(name);
        }
    }
    out.push('/');
    push_registry(out, registry)?;
    if !is_repository(repository) {
        return Err(Refusal::Repository);
    }
    out.push('/');
    out.push_str(repository);
    Ok(())
}

/// What the broker's 403 `DENIED` says, after `denied: `, when a pull secret of the pod does
/// not decode (the kubelet then fails every pull of the pod); the policy reads it as
/// `malformedPullSecret`. Only the broker writes a `DENIED` of its own: it passes on no
/// registry's.
pub const MALFORMED_PULL_SECRET: &str = "malformed pull secret";

/// What the broker's 403 `DENIED` says, after `denied: `, when the lookup's namespace is one
/// it does not serve (not opted in, or protected), followed by `: ` and the reason; the policy
/// reads it as "not checked", a warning naming that reason, never a verdict on the image.
pub const NAMESPACE_NOT_ENABLED: &str = "namespace not enabled for the lookup broker";

/// True when `host` can be the broker's host in an encoded reference: a lowercase DNS name
/// or IPv4 address with an optional port.
pub fn is_valid_broker_host(host: &str) -> bool {
    plain_host_and_port(host).is_some()
}

/// True when `registry` names the broker (`broker_host`), compared as hosts are (see
/// [`registry_key`]). The policy never looks such an image up itself (the policy server would
/// send the broker's caller credential along with a name a Pod author wrote), and the broker
/// never forwards a lookup to itself.
pub fn is_broker_host(registry: &str, broker_host: &str) -> bool {
    // most registries differ from the broker's host in their first byte
    if let (Some(a), Some(b)) = (registry.bytes().next(), broker_host.bytes().next()) {
        if !a.eq_ignore_ascii_case(&b) {
            return false;
        }
    }
    // `registry_key` of both, compared without writing either out: every lookup asks
    let (host, port) = host_and_port(registry);
    let (broker, broker_port) = host_and_port(broker_host);
    host.eq_ignore_ascii_case(broker) && port == broker_port
}

/// `registry_key`'s two parts, borrowed: the host without trailing dots (its case kept) and
/// the port, `None` for the default 443.
fn host_and_port(registry: &str) -> (&str, Option<&str>) {
    let (host, port) = match registry.rsplit_once(':') {
        Some((h, p))
            if !h.is_empty() && !p.contains(']') && p.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (h, Some(p))
        }
        _ => (registry, None),
    };
    (
        host.trim_end_matches('.'),
        port.filter(|&port| port != "443"),
    )
}

/// One spelling for each registry (`host[:port]`): the host without regard to ASCII case or a
/// trailing dot, and without the HTTPS port 443 that every lookup uses by default. What is
/// kept per registry (back-off, concurrency) is kept under it, so `Docker.io.`, `docker.io`
/// and `docker.io:443` share one state and a Pod author cannot multiply them.
pub fn registry_key(registry: &str) -> String {
    let (host, port) = host_and_port(registry);
    let host = host.to_ascii_lowercase();
    match port {
        Some(port) => [&host, ":", port].concat(),
        None => host,
    }
}

/// The registry's component ([`spec`]), appended to `out`: `d.<host>[_<port>]` for a lowercase
/// DNS name or IPv4 address with an optional port, else `x.<hex>`.
fn push_registry(out: &mut String, registry: &str) -> Result<(), Refusal> {
    if let Some((host, port)) = plain_host_and_port(registry) {
        out.push_str("d.");
        out.push_str(host);
        if let Some(port) = port {
            out.push('_');
            out.push_str(port);
        }
        return Ok(());
    }
    if registry.is_empty()
        || registry.len() > NAME_TOTAL_LENGTH_MAX
        || !registry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]%".contains(&b))
    {
        return Err(Refusal::Registry);
    }
    out.push_str("x.");
    push_hex(out, registry.as_bytes());
    Ok(())
}

/// The host and port of a registry that [`push_registry`] writes as `d.`, or `None` for any other.
fn plain_host_and_port(registry: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = match registry.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    let port_ok =
        port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    (port_ok && !host.is_empty() && host.split('.').all(is_lower_label)).then_some((host, port))
}

/// Lowercase hex digits, as many as a seal has.
fn is_seal(component: &str) -> bool {
    component.len() == SEAL_LENGTH
        && component
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Lowercase hex (even length) as bytes.
fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

fn decode_registry(component: &str) -> Result<String, Refusal> {
    if let Some(plain) = component.strip_prefix("d.") {
        Ok(match plain.rsplit_once('_') {
            Some((host, port)) => format!("{host}:{port}"),
            None => plain.to_owned(),
        })
    } else if let Some(hex) = component.strip_prefix("x.") {
        decode_hex(hex)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or(Refusal::NotEncoded)
    } else {
        Err(Refusal::NotEncoded)
    }
}

/// A DNS label of lowercase letters, digits and inner hyphens (a hostname label here).
fn is_lower_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Kubernetes' DNS-1123 label: what a namespace name is.
pub fn is_dns_label(s: &str) -> bool {
    is_lower_label(s)
}

/// Kubernetes' DNS-1123 subdomain: what Secret and ServiceAccount names are.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_lower_label)
}

/// distribution's path component: `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return false;
        }
        if i == bytes.len() {
            return true;
        }
        let separator = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let ok = match &bytes[separator..i] {
            b"." | b"_" | b"__" => true,
            s => s.iter().all(|b| *b == b'-'),
        };
        if !ok {
            return false;
        }
    }
}

fn is_repository(repository: &str) -> bool {
    !repository.is_empty() && repository.split('/').all(is_path_component)
}

/// True when `tag` has the reference grammar's tag form (`[\w][\w.-]{0,127}`).
pub fn is_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    !bytes.is_empty()
        && bytes.len() <= TAG_LENGTH_MAX
        && word(&bytes[0])
        && bytes[1..]
            .iter()
            .all(|b| word(b) || *b == b'.' || *b == b'-')
}

fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    let alg_ok = !algorithm.is_empty()
        && algorithm.split(['+', '.', '_', '-']).all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphabetic()
                && b.iter().all(|c| c.is_ascii_alphanumeric())
        });
    alg_ok && hex.len() >= 32 && hex.len() <= 256 && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests;
