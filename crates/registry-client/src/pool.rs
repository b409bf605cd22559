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
use super::sources::{Certificate, Sources};
use super::{manifest_url, RegistryError};

/// What oci-client sends as `Accept` for a manifest.
pub const MANIFEST_MEDIA_TYPES: &[&str] = &[
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
];
/// oci-client's user agent, so registries' logs look the same.
const USER_AGENT: &str = "oci-client/0.18.0";

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

    fn remember(&self, protocol: Protocol, challenge: &Challenge) {
        if let Ok(mut known) = self.challenges[protocol.index()].lock() {
            known.get_or_insert_with(|| challenge.clone());
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
}

/// See [`PoolOptions::allow_url`].
pub type UrlGuard = Arc<dyn Fn(&reqwest::Url) -> bool + Send + Sync>;

/// The error of a request [`PoolOptions::allow_url`] refused.
fn refused_url(url: &str) -> RegistryError {
    OciDistributionError::GenericError(Some(format!("destination refused by policy: {url}"))).into()
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

    /// Whether [`PoolOptions::allow_url`] lets `url` be requested (unparsable URLs are left to
    /// reqwest, which refuses them).
    fn allows(&self, url: &str) -> bool {
        match (&self.options.allow_url, reqwest::Url::parse(url)) {
            (Some(guard), Ok(url)) => guard(&url),
            _ => true,
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
        if let Some(guard) = self.options.allow_url.clone() {
            builder = builder.redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 10 {
                    attempt.error("too many redirects")
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
            let url = manifest_url(protocol.scheme(), reference);
            if let Ok(mut s) = slot.lock() {
                s.clone_from(&url);
            }
            let client = self.client(protocol, host)?;
            let known = state.challenge(protocol);
            let challenge = known.clone().unwrap_or(Challenge::None);
            let authorization = self.authorize(&client, &challenge, reference, auth).await;
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
            if response.status() != StatusCode::UNAUTHORIZED || known.is_some() {
                return Ok((session, response));
            }
            let challenge =
                Challenge::from_header(response.headers().get(reqwest::header::WWW_AUTHENTICATE));
            state.remember(protocol, &challenge);
            let authorization = self
                .authorize(&session.client, &challenge, reference, auth)
                .await;
            if matches!(authorization, Authorization::None)
                || !matches!(session.authorization, Authorization::None)
            {
                return Ok((session, response));
            }
            // the body goes, so that the connection returns to the pool
            let _ = response.bytes().await;
            session.authorization = authorization;
            let response = session.send(method, accept).await?;
            return Ok((session, response));
        }
        Err(last
            .unwrap_or_else(|| RegistryError::BuildImmutableReference("no protocol to try".into())))
    }

    /// The authorization for `auth` given the registry's challenge. A token
    /// comes from the cache for exactly this registry, scope and identity, or
    /// is asked for; a refused token request means no authorization (the
    /// manifest request then reports the 401), as with oci-client.
    async fn authorize(
        &self,
        client: &reqwest::Client,
        challenge: &Challenge,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Authorization {
        let (realm, service) = match (auth, challenge) {
            (RegistryAuth::Bearer(token), _) => return Authorization::Bearer(token.clone(), None),
            (_, Challenge::None) | (RegistryAuth::Anonymous, Challenge::Basic) => {
                return Authorization::None
            }
            (RegistryAuth::Basic(u, p), Challenge::Basic) => {
                return Authorization::Basic(u.clone(), p.clone())
            }
            (_, Challenge::Bearer { realm, service }) => (realm, service),
        };
        let key = TokenKey {
            registry: reference.resolve_registry().to_owned(),
            scope: format!("repository:{}:pull", reference.repository()),
            identity: Identity::of(auth),
        };
        if let Some(token) = self.tokens.get(&key) {
            return Authorization::Bearer(token, Some(key));
        }
        let mut query = vec![("scope", key.scope.as_str())];
        if let Some(service) = service {
            query.push(("service", service));
        }
        if !self.allows(realm) {
            return Authorization::None;
        }
        let mut request = client.get(realm.as_str()).query(&query);
        if let RegistryAuth::Basic(u, p) = auth {
            request = request.basic_auth(u, Some(p));
        }
        let answer = match request.send().await {
            Ok(r) if r.status() == StatusCode::OK => r.json::<TokenAnswer>().await.ok(),
            _ => None,
        };
        match answer.and_then(TokenAnswer::into_token) {
            Some((token, ttl)) => {
                self.tokens.insert(key.clone(), token.clone(), ttl);
                Authorization::Bearer(token, Some(key))
            }
            None => Authorization::None,
        }
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
            let body = head.bytes().await.map_err(OciDistributionError::from)?;
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
        let _ = head.bytes().await;
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
        let body = response.bytes().await.map_err(OciDistributionError::from)?;
        self.check(status, &body)?;
        let digest = verified_digest(&body, header.as_deref(), reference.digest())?;
        Ok((body.to_vec(), digest))
    }
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
}
