//! The registry client that keeps its state for the life of the process, as a
//! real client does: manifest lookups (`oci/v1/manifest_digest`, and the
//! lookups of `oci/v1/resolve_images`) cost one request each once a registry
//! is known.
//!
//! - one pooled `reqwest` client per TLS configuration (system roots, a
//!   registry's `source_authorities`, no verification), built on first use,
//!   so connections are kept alive and reused across lookups;
//! - one protocol decision per registry: HTTPS, or for insecure sources HTTPS
//!   without verification then HTTP (see [`Pool::protocols`]); the first
//!   protocol that gets any HTTP answer is used from then on;
//! - no `GET /v2/` ping: the manifest request is the first request, and the
//!   `WWW-Authenticate` of a 401 says how to authenticate; that challenge is
//!   kept per registry and protocol, so later lookups authenticate at once.
//!   This is containerd's resolver's way; oci-client's ping would cost every
//!   first lookup of a registry one more round trip, for nothing where the
//!   registry needs no authentication;
//! - bearer tokens reused per registry, repository scope and credential
//!   ([`super::auth`]), never across credentials.
//!
//! Errors are oci-client's, with the same texts and the manifest URL, so a
//! guest cannot tell this client from oci-client's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use oci_client::errors::{DigestError, OciDistributionError, OciEnvelope};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use reqwest::{Method, StatusCode};
use sha2::{Digest, Sha256, Sha512};

use super::auth::{Challenge, Identity, TokenAnswer, TokenCache, TokenKey};
use super::credential_loop::one_line;
use super::sources::{Certificate, Sources};
use super::{manifest_url, RegistryError};

mod tags;
pub use tags::{TagLimits, TagListError};

/// What oci-client sends as `Accept` for a manifest.
pub const MANIFEST_MEDIA_TYPES: &[&str] = &[
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
];
/// oci-client's user agent, so registries' logs look the same.
const USER_AGENT: &str = "oci-client/0.18.0";
/// The largest manifest read: containers/image's `iolimits.MaxManifestBodySize` and the
/// distribution registry's own limit, so CRI-O would refuse a larger one too; and a registry a
/// Pod author names cannot make the process read without end.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// The largest token answer read (containers/image's `MaxAuthTokenBodySize`).
const MAX_TOKEN_ANSWER_BYTES: usize = 1 << 20;
/// How much of an error body is read: a registry's JSON error envelope fits many times over;
/// the rest is never read (and that connection is not reused).
const MAX_ERROR_BYTES: usize = 64 << 10;

/// How to talk to a registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTPS verified with the system roots or the registry's `source_authorities`.
    Https,
    /// HTTPS without certificate verification (insecure sources only).
    HttpsNoVerification,
    /// Plain HTTP (insecure sources only).
    Http,
}

impl Protocol {
    fn index(self) -> usize {
        self as usize
    }

    fn scheme(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Https | Protocol::HttpsNoVerification => "https",
        }
    }
}

/// Which pooled HTTP client a protocol uses.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum ClientKind {
    Plain,
    SystemRoots,
    ExtraRoots(String),
    NoVerification,
}

/// What the process knows about one registry.
#[derive(Default)]
struct RegistryState {
    /// The protocol that answered, once one did.
    decided: Mutex<Option<Protocol>>,
    /// The challenge of the registry's first 401 per protocol (by [`Protocol::index`]).
    challenges: [Mutex<Option<Challenge>>; 3],
}

impl RegistryState {
    fn challenge(&self, protocol: Protocol) -> Option<Challenge> {
        self.challenges[protocol.index()]
            .lock()
            .ok()
            .and_then(|c| c.clone())
    }

    /// Keeps the registry's latest challenge: a registry that moves its token service is
    /// followed at its next 401, not held to its first answer for the life of the process.
    fn remember(&self, protocol: Protocol, challenge: &Challenge) {
        if let Ok(mut known) = self.challenges[protocol.index()].lock() {
            *known = Some(challenge.clone());
        }
    }

    fn decide(&self, protocol: Protocol) {
        if let Ok(mut decided) = self.decided.lock() {
            decided.get_or_insert(protocol);
        }
    }
}

/// A place a lookup writes the URL it is working on, for the time-out's text.
pub type UrlSlot = Arc<Mutex<String>>;

/// What a long-running user of the pool (the lookup broker) bounds that the test host does not
/// need to: where connections may go, how long a connection may take, how many registries are
/// remembered.
#[derive(Clone, Default)]
pub struct PoolOptions {
    /// Resolves registry host names (the broker's refuses loopback, link-local and metadata
    /// addresses); `None` for the system's resolver.
    pub resolver: Option<Arc<dyn reqwest::dns::Resolve>>,
    /// The longest a TCP connection may take to open; `None` for no limit.
    pub connect_timeout: Option<std::time::Duration>,
    /// How many registries' protocol decisions and challenges are kept; when one more comes,
    /// all are forgotten (a Pod author chooses registry names). `None` for no limit.
    pub max_registries: Option<usize>,
    /// Says whether a URL may be requested at all (manifest, token realm, redirect target):
    /// the resolver never sees IP literals, which a registry can put in a realm or a redirect.
    /// `None` allows every URL.
    pub allow_url: Option<UrlGuard>,
    /// The registries are chosen by people the process must not trust (the broker's Pod
    /// authors): proxies from the environment are ignored (a proxy would make the connection,
    /// and the connect-time checks would see only the proxy), a redirect must keep its host and
    /// never go from HTTPS to HTTP, and credentials never go to a plain-HTTP token realm of a
    /// registry reached over HTTPS. `false` behaves as oci-client (the test host's).
    pub untrusted_registries: bool,
}

/// See [`PoolOptions::allow_url`].
pub type UrlGuard = Arc<dyn Fn(&reqwest::Url) -> bool + Send + Sync>;

/// The error of a request [`PoolOptions::allow_url`] refused.
fn refused_url(url: &str) -> RegistryError {
    OciDistributionError::GenericError(Some(format!("destination refused by policy: {url}"))).into()
}

/// The error of a body longer than the process reads.
fn too_large(what: &str, url: &str, limit: usize) -> RegistryError {
    OciDistributionError::GenericError(Some(format!(
        "{what} from {url} is larger than {} KiB, more than is read",
        limit >> 10
    )))
    .into()
}

/// The body of `response`, refused beyond `limit` bytes: by its `Content-Length` before a
/// byte is read, else as the bytes arrive (a registry can send without end).
async fn body_at_most(
    mut response: reqwest::Response,
    limit: usize,
    what: &str,
) -> Result<Vec<u8>, RegistryError> {
    let url = response.url().to_string();
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(too_large(what, &url, limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(OciDistributionError::from)? {
        if body.len() + chunk.len() > limit {
            return Err(too_large(what, &url, limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first `limit` bytes of an error `response`'s body, or fewer when it ends or breaks:
/// only its envelope matters, and the rest is not waited for.
async fn body_prefix(mut response: reqwest::Response, limit: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < limit {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = limit - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    body
}

/// Whether a redirect from `from` to `to` keeps the host and port and does not leave HTTPS.
fn redirect_keeps_origin(from: &reqwest::Url, to: &reqwest::Url) -> bool {
    let downgrade = from.scheme() == "https" && to.scheme() != "https";
    !downgrade
        && from.host_str() == to.host_str()
        && from.port_or_known_default() == to.port_or_known_default()
}

/// What a request asks for in a repository: its manifest, or another path under
/// `/v2/<repository>/` (with its query).
#[derive(Clone, Copy)]
enum Target<'p> {
    Manifest,
    Path(&'p str),
}

/// The registry client shared by every lookup of the process.
pub struct Pool {
    sources: Sources,
    options: PoolOptions,
    clients: Mutex<HashMap<ClientKind, reqwest::Client>>,
    registries: Mutex<HashMap<String, Arc<RegistryState>>>,
    tokens: TokenCache,
}

/// The authorization one request carries.
enum Authorization {
    None,
    Basic(String, String),
    Bearer(String, Option<TokenKey>),
}

/// A lookup connected to its registry: the client, the manifest URL and the authorization.
struct Session<'p> {
    pool: &'p Pool,
    client: reqwest::Client,
    url: String,
    authorization: Authorization,
}

impl Pool {
    /// An empty pool for `sources`; nothing is built until a lookup needs it.
    pub fn new(sources: Sources) -> Self {
        Self::with_options(sources, PoolOptions::default())
    }

    /// An empty pool for `sources`, bounded by `options`.
    pub fn with_options(sources: Sources, options: PoolOptions) -> Self {
        Self {
            sources,
            options,
            clients: Mutex::default(),
            registries: Mutex::default(),
            tokens: TokenCache::default(),
        }
    }

    fn registry(&self, host: &str) -> Arc<RegistryState> {
        match self.registries.lock() {
            Ok(mut map) => {
                if let Some(max) = self.options.max_registries {
                    if map.len() >= max && !map.contains_key(host) {
                        map.clear();
                    }
                }
                map.entry(host.to_owned()).or_default().clone()
            }
            Err(_) => Arc::default(),
        }
    }

    /// Whether [`PoolOptions::allow_url`] lets `url` be requested; with a guard, a URL that
    /// does not parse is refused, since the guard cannot say where it goes.
    fn allows(&self, url: &str) -> bool {
        match (&self.options.allow_url, reqwest::Url::parse(url)) {
            (Some(guard), Ok(url)) => guard(&url),
            (Some(_), Err(_)) => false,
            (None, _) => true,
        }
    }

    fn protocols(&self, host: &str) -> &'static [Protocol] {
        if self.sources.is_insecure_source(host) {
            // policy-fetcher tries verified HTTPS first; for an insecure source its failure only
            // leads to the unverified attempt, which succeeds whenever the verified one would.
            // Starting there gives the same protocol without loading the system's roots
            // (hundreds of files, the largest fixed cost of a run against a local registry).
            &[Protocol::HttpsNoVerification, Protocol::Http]
        } else {
            &[Protocol::Https]
        }
    }

    /// The pooled client for `protocol` to `host`, built on first use.
    fn client(&self, protocol: Protocol, host: &str) -> Result<reqwest::Client, RegistryError> {
        let kind = match protocol {
            Protocol::HttpsNoVerification => ClientKind::NoVerification,
            Protocol::Http => ClientKind::Plain,
            _ if self.sources.source_authority(host).is_some() => {
                ClientKind::ExtraRoots(host.to_owned())
            }
            _ => ClientKind::SystemRoots,
        };
        if let Some(client) = self.clients.lock().ok().and_then(|m| m.get(&kind).cloned()) {
            return Ok(client);
        }
        let mut builder = reqwest::Client::builder().user_agent(USER_AGENT);
        if let Some(resolver) = &self.options.resolver {
            builder = builder.dns_resolver(resolver.clone());
        }
        if let Some(timeout) = self.options.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if self.options.untrusted_registries {
            builder = builder.no_proxy();
        }
        if let Some(guard) = self.options.allow_url.clone() {
            let keep_origin = self.options.untrusted_registries;
            builder = builder.redirect(reqwest::redirect::Policy::custom(move |attempt| {
                let moves = keep_origin
                    && attempt
                        .previous()
                        .last()
                        .is_some_and(|from| !redirect_keeps_origin(from, attempt.url()));
                if attempt.previous().len() >= 10 {
                    attempt.error("too many redirects")
                } else if moves {
                    attempt.error("redirect to another host or from HTTPS to HTTP refused")
                } else if guard(attempt.url()) {
                    attempt.follow()
                } else {
                    attempt.error("redirect destination refused by policy")
                }
            }));
        }
        match &kind {
            ClientKind::SystemRoots => {}
            // no roots to load where nothing is verified
            ClientKind::NoVerification => {
                builder = builder
                    .danger_accept_invalid_certs(true)
                    .tls_certs_only(Vec::new())
            }
            ClientKind::Plain => builder = builder.tls_certs_only(Vec::new()),
            ClientKind::ExtraRoots(host) => {
                let certs = self.sources.source_authority(host).unwrap_or_default();
                let certs = certs
                    .iter()
                    .map(|c| match c {
                        Certificate::Pem(data) => reqwest::Certificate::from_pem(data),
                        Certificate::Der(data) => reqwest::Certificate::from_der(data),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(OciDistributionError::from)?;
                builder = builder.tls_certs_merge(certs);
            }
        }
        let client = builder.build().map_err(OciDistributionError::from)?;
        if let Ok(mut clients) = self.clients.lock() {
            clients.insert(kind, client.clone());
        }
        Ok(client)
    }

    /// Sends `method` for the manifest of `reference`: over the registry's protocol (on first
    /// contact, the first candidate that gets an HTTP answer), with the authorization its
    /// known challenge asks for. Without one, the request goes unauthenticated and a 401's
    /// challenge is kept and answered once. Transport errors carry the manifest URL, as
    /// oci-client's do.
    async fn open(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        method: Method,
        accept: &[&str],
        slot: &UrlSlot,
    ) -> Result<(Session<'_>, reqwest::Response), RegistryError> {
        self.open_at(reference, Target::Manifest, auth, method, accept, slot)
            .await
    }

    /// [`Pool::open`] for `target` of the reference's repository.
    async fn open_at(
        &self,
        reference: &Reference,
        target: Target<'_>,
        auth: &RegistryAuth,
        method: Method,
        accept: &[&str],
        slot: &UrlSlot,
    ) -> Result<(Session<'_>, reqwest::Response), RegistryError> {
        let host = reference.resolve_registry();
        let state = self.registry(host);
        let all = self.protocols(host);
        let decided = state.decided.lock().ok().and_then(|d| *d);
        let candidates = match decided.and_then(|p| all.iter().position(|c| *c == p)) {
            Some(i) => &all[i..=i],
            None => all,
        };
        let mut last = None;
        for &protocol in candidates {
            let url = match target {
                Target::Manifest => manifest_url(protocol.scheme(), reference),
                Target::Path(path) => format!(
                    "{}://{host}/v2/{}/{path}",
                    protocol.scheme(),
                    reference.repository()
                ),
            };
            if let Ok(mut s) = slot.lock() {
                s.clone_from(&url);
            }
            let client = self.client(protocol, host)?;
            let known = state.challenge(protocol);
            let challenge = known.clone().unwrap_or(Challenge::None);
            let authorization = self
                .authorize(&client, &challenge, reference, auth, protocol)
                .await?;
            let mut session = Session {
                pool: self,
                client,
                url,
                authorization,
            };
            let response = match session.send(method.clone(), accept).await {
                Ok(response) => response,
                Err(e) => {
                    last = Some(e);
                    continue;
                }
            };
            state.decide(protocol);
            if response.status() != StatusCode::UNAUTHORIZED {
                return Ok((session, response));
            }
            let challenge =
                Challenge::from_header(response.headers().get(reqwest::header::WWW_AUTHENTICATE));
            // the same challenge again: the credential itself was refused
            if known.as_ref() == Some(&challenge) || matches!(auth, RegistryAuth::Bearer(_)) {
                return Ok((session, response));
            }
            state.remember(protocol, &challenge);
            let authorization = self
                .authorize(&session.client, &challenge, reference, auth, protocol)
                .await?;
            if matches!(authorization, Authorization::None) {
                return Ok((session, response));
            }
            // the body goes, so that the connection returns to the pool
            let _ = body_prefix(response, MAX_ERROR_BYTES).await;
            session.authorization = authorization;
            let response = session.send(method, accept).await?;
            return Ok((session, response));
        }
        Err(last.unwrap_or(RegistryError::NoProtocol))
    }

    /// The authorization for `auth` given the registry's challenge. A token
    /// comes from the cache for exactly this registry, scope and identity, or
    /// is asked for; a refused token request means no authorization (the
    /// manifest request then reports the 401), as with oci-client. A realm the
    /// process may not ask is an error, never a 401: nothing was refused.
    async fn authorize(
        &self,
        client: &reqwest::Client,
        challenge: &Challenge,
        reference: &Reference,
        auth: &RegistryAuth,
        protocol: Protocol,
    ) -> Result<Authorization, RegistryError> {
        let (realm, service) = match (auth, challenge) {
            (RegistryAuth::Bearer(token), _) => {
                return Ok(Authorization::Bearer(token.clone(), None))
            }
            (_, Challenge::None) | (RegistryAuth::Anonymous, Challenge::Basic) => {
                return Ok(Authorization::None)
            }
            (RegistryAuth::Basic(u, p), Challenge::Basic) => {
                return Ok(Authorization::Basic(u.clone(), p.clone()))
            }
            (_, Challenge::Bearer { realm, service }) => (realm, service),
        };
        if !self.allows(realm) {
            return Err(refused_url(realm));
        }
        let in_clear = protocol != Protocol::Http && !realm.starts_with("https://");
        if self.options.untrusted_registries && in_clear && matches!(auth, RegistryAuth::Basic(..))
        {
            return Err(OciDistributionError::GenericError(Some(format!(
                "token realm {realm} is not HTTPS: credentials are not sent in clear"
            )))
            .into());
        }
        let key = TokenKey {
            registry: reference.resolve_registry().to_owned(),
            scope: format!("repository:{}:pull", reference.repository()),
            identity: Identity::of(auth),
        };
        if let Some(token) = self.tokens.get(&key) {
            return Ok(Authorization::Bearer(token, Some(key)));
        }
        let mut query = vec![("scope", key.scope.as_str())];
        if let Some(service) = service {
            query.push(("service", service));
        }
        let mut request = client.get(realm.as_str()).query(&query);
        if let RegistryAuth::Basic(u, p) = auth {
            request = request.basic_auth(u, Some(p));
        }
        // Only the token service's own refusal (401, 403) reads as "no
        // authorization", which the manifest request then reports as refused.
        // Its silence or its failure says nothing about the credential: the
        // lookup has no answer, and the image must not read as private.
        let answer = match request.send().await {
            Ok(r) if r.status() == StatusCode::OK => {
                let body = body_at_most(r, MAX_TOKEN_ANSWER_BYTES, "a token answer").await?;
                serde_json::from_slice::<TokenAnswer>(&body).ok()
            }
            Ok(r) => {
                let status = r.status();
                let _ = body_prefix(r, MAX_ERROR_BYTES).await;
                if !matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                    return Err(token_service_error(realm, &status.to_string()));
                }
                None
            }
            Err(e) => return Err(token_service_error(realm, &one_line(&e))),
        };
        Ok(match answer.and_then(TokenAnswer::into_token) {
            Some((token, ttl)) => {
                self.tokens.insert(key.clone(), token.clone(), ttl);
                Authorization::Bearer(token, Some(key))
            }
            None => Authorization::None,
        })
    }

    /// The manifest digest of `reference`: `HEAD`, then `GET` when the
    /// registry sends no `Docker-Content-Digest` (as oci-client does).
    pub async fn manifest_digest(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        slot: &UrlSlot,
    ) -> Result<String, RegistryError> {
        let (session, head) = self
            .open(reference, auth, Method::HEAD, MANIFEST_MEDIA_TYPES, slot)
            .await?;
        let header = digest_header(head.headers())?;
        let status = head.status();
        if let Some(digest) = header {
            let body = body_prefix(head, MAX_ERROR_BYTES).await;
            session.check(status, &body)?;
            if let Some(expected) = reference.digest() {
                let same_algorithm = expected.split(':').next() == digest.split(':').next();
                if same_algorithm && expected != digest {
                    return Err(OciDistributionError::from(DigestError::VerificationError {
                        expected: expected.to_owned(),
                        actual: digest,
                    })
                    .into());
                }
            }
            return Ok(digest);
        }
        let _ = body_prefix(head, MAX_ERROR_BYTES).await;
        Ok(session
            .get_manifest(reference, MANIFEST_MEDIA_TYPES)
            .await?
            .1)
    }

    /// `GET` the manifest of `reference`: its body and digest.
    pub async fn manifest_raw(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
        accept: &[&str],
        slot: &UrlSlot,
    ) -> Result<(Vec<u8>, String), RegistryError> {
        let (session, response) = self
            .open(reference, auth, Method::GET, accept, slot)
            .await?;
        session.manifest_of(reference, response).await
    }
}

impl Session<'_> {
    async fn send(
        &self,
        method: Method,
        accept: &[&str],
    ) -> Result<reqwest::Response, RegistryError> {
        if !self.pool.allows(&self.url) {
            return Err(refused_url(&self.url));
        }
        let mut request = self
            .client
            .request(method, &self.url)
            .header(reqwest::header::ACCEPT, accept.join(", "));
        request = match &self.authorization {
            Authorization::None => request,
            Authorization::Basic(u, p) => request.basic_auth(u, Some(p)),
            Authorization::Bearer(t, _) => request.bearer_auth(t),
        };
        let response = request.send().await.map_err(OciDistributionError::from)?;
        if response.status() == StatusCode::UNAUTHORIZED {
            if let Authorization::Bearer(token, Some(key)) = &self.authorization {
                self.pool.tokens.forget(key, token);
            }
        }
        Ok(response)
    }

    /// oci-client's `validate_registry_response`: the same errors, the same texts.
    fn check(&self, status: StatusCode, body: &[u8]) -> Result<(), RegistryError> {
        let url = self.url.clone();
        let error = match status {
            StatusCode::OK => return Ok(()),
            StatusCode::UNAUTHORIZED => OciDistributionError::UnauthorizedError { url },
            s if s.is_success() => OciDistributionError::SpecViolationError(format!(
                "Expected HTTP Status {}, got {s} instead",
                StatusCode::OK
            )),
            s if s.is_client_error() => match serde_json::from_slice::<OciEnvelope>(body) {
                Ok(envelope) if s == StatusCode::NOT_FOUND => {
                    return Err(RegistryError::NotFoundStatus(
                        OciDistributionError::RegistryError { envelope, url },
                    ))
                }
                Ok(envelope) => OciDistributionError::RegistryError { envelope, url },
                Err(_) => server_error(s, url, body),
            },
            s => server_error(s, url, body),
        };
        Err(error.into())
    }

    async fn get_manifest(
        &self,
        reference: &Reference,
        accept: &[&str],
    ) -> Result<(Vec<u8>, String), RegistryError> {
        let response = self.send(Method::GET, accept).await?;
        self.manifest_of(reference, response).await
    }

    /// The body and verified digest of a manifest `response`.
    async fn manifest_of(
        &self,
        reference: &Reference,
        response: reqwest::Response,
    ) -> Result<(Vec<u8>, String), RegistryError> {
        let status = response.status();
        let header = digest_header(response.headers())?;
        let body = if status == StatusCode::OK {
            body_at_most(response, MAX_MANIFEST_BYTES, "a manifest").await?
        } else {
            body_prefix(response, MAX_ERROR_BYTES).await
        };
        self.check(status, &body)?;
        let digest = verified_digest(&body, header.as_deref(), reference.digest())?;
        Ok((body, digest))
    }
}

/// A token service that failed or did not answer: an error without an answer
/// from the registry, never its refusal. `realm` comes from the registry's
/// challenge and carries no credential.
fn token_service_error(realm: &str, what: &str) -> RegistryError {
    OciDistributionError::GenericError(Some(format!(
        "the token service {realm} gave no token: {what}"
    )))
    .into()
}

fn server_error(status: StatusCode, url: String, body: &[u8]) -> OciDistributionError {
    OciDistributionError::ServerError {
        code: status.as_u16(),
        url,
        message: String::from_utf8_lossy(body).into_owned(),
    }
}

fn digest_header(headers: &reqwest::header::HeaderMap) -> Result<Option<String>, RegistryError> {
    match headers.get("Docker-Content-Digest") {
        None => Ok(None),
        Some(v) => {
            let text = v
                .to_str()
                .map_err(|e| OciDistributionError::from(DigestError::from(e)))?;
            Ok((!text.is_empty()).then(|| text.to_owned()))
        }
    }
}

/// The digest of `body` in `algorithm` (`sha256`, `sha512`).
fn digest_of(body: &[u8], algorithm: &str) -> Result<String, DigestError> {
    match algorithm {
        "sha256" => Ok(format!("sha256:{:x}", Sha256::digest(body))),
        "sha512" => Ok(format!("sha512:{:x}", Sha512::digest(body))),
        other => Err(DigestError::UnsupportedAlgorithm(other.to_owned())),
    }
}

/// oci-client's `validate_digest`: the body must match the header's digest
/// and the reference's; the header's is the answer, else the body's SHA-256.
fn verified_digest(
    body: &[u8],
    header: Option<&str>,
    reference: Option<&str>,
) -> Result<String, RegistryError> {
    let check = |expected: &str| -> Result<String, DigestError> {
        let (algorithm, _) = expected
            .split_once(':')
            .ok_or(DigestError::MissingAlgorithm)?;
        let actual = digest_of(body, algorithm)?;
        if actual == expected {
            Ok(actual)
        } else {
            Err(DigestError::VerificationError {
                expected: expected.to_owned(),
                actual,
            })
        }
    };
    let result = match (header, reference) {
        (Some(h), Some(r)) if h != r => check(r).and_then(|_| check(h)),
        (Some(h), _) => check(h),
        (None, Some(r)) => check(r),
        (None, None) => digest_of(body, "sha256"),
    };
    Ok(result.map_err(OciDistributionError::from)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_verified_like_oci_client() {
        let body = b"{}";
        let sha = format!("sha256:{:x}", Sha256::digest(body));
        assert_eq!(verified_digest(body, None, None).expect("digest"), sha);
        assert_eq!(
            verified_digest(body, Some(&sha), None).expect("header"),
            sha
        );
        assert!(verified_digest(body, Some("sha256:00"), None).is_err());
        assert!(verified_digest(body, None, Some("sha256:00")).is_err());
        assert!(verified_digest(body, Some("md5:00"), None).is_err());
    }

    #[test]
    fn redirects_of_untrusted_registries_keep_host_port_and_https() {
        let url = |u: &str| reqwest::Url::parse(u).expect("url");
        let from = url("https://reg.example/v2/app/manifests/v1");
        assert!(redirect_keeps_origin(
            &from,
            &url("https://reg.example/v2/x")
        ));
        assert!(redirect_keeps_origin(
            &from,
            &url("https://reg.example:443/x")
        ));
        for to in [
            "http://reg.example/v2/x",
            "https://other.example/v2/x",
            "https://reg.example:8443/x",
            "https://10.0.0.1/x",
        ] {
            assert!(!redirect_keeps_origin(&from, &url(to)), "{to}");
        }
        let plain = url("http://reg.example:5000/v2/");
        assert!(redirect_keeps_origin(
            &plain,
            &url("https://reg.example:5000/x")
        ));
    }

    #[test]
    fn a_guard_refuses_what_it_cannot_parse() {
        let guarded = Pool::with_options(
            Sources::default(),
            PoolOptions {
                allow_url: Some(Arc::new(|_| true)),
                ..PoolOptions::default()
            },
        );
        assert!(guarded.allows("https://reg.example/token"));
        assert!(!guarded.allows("https//no-scheme"));
        assert!(!guarded.allows(""));
        assert!(Pool::new(Sources::default()).allows("https//no-scheme"));
    }
}
