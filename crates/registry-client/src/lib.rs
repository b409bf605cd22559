//! Registry access for the test host (`crates/test-host`) and the lookup broker (`broker/`),
//! one implementation for both.
//!
//! Every operation parses the reference like `oci_client::Reference`
//! (`busybox` → `docker.io/library/busybox:latest`), picks credentials from
//! the Docker config, and runs through [`RegistryClient::try_with_protocols`]:
//! HTTPS (system or custom CAs), then — only for insecure sources — HTTPS
//! without verification, then plain HTTP; only the last error is reported.
//! [`credential_loop`] is the kubelet's credential loop and what a registry's answer proves,
//! shared by the broker and the test host's `oci/v1/resolve_images`.
//! Errors are [`RegistryError`]. The variants a guest sees (a lookup's failure) keep the
//! `Display`/`source` chain of policy-fetcher's errors, so that `{:?}` gives the texts a guest
//! gets from a policy server, which the policy classifies by substring
//! (`src/host/error.rs`); the texts of the others are this client's own.
//!
//! One connection pool, protocol decision and token cache per registry; manifest lookups
//! bounded in time and size; it also pushes and pulls the policy as an OCI artifact. Tested by
//! its unit tests (some against an in-process registry) and, through its users, by the e2e
//! suites against Debian's `docker-registry`.

pub mod auth;
pub mod credential_loop;
pub mod docker_config;
pub mod pool;
pub mod sources;

use std::collections::BTreeMap;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oci_client::client::{
    Certificate as OciCertificate, CertificateEncoding, ClientConfig,
    ClientProtocol as OciClientProtocol, Config, ImageLayer,
};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{self, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use docker_config::DockerConfig;
use pool::{Pool, UrlSlot};
use sources::{Certificate, Sources};

/// Errors of registry operations.
///
/// The prefixes `Fail to interact with OCI registry: ` and `Invalid OCI image reference: ` are
/// policy-fetcher's, kept word for word: guests receive them as from a policy server, the
/// policy strips the first before classifying (`src/host/error.rs`), recorded sessions hold
/// them, and the e2e suites compare them (`45-certainty.bats` the second).
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Anything oci-client reports (HTTP status, OCI error envelope, transport).
    #[error("Fail to interact with OCI registry: {0}")]
    Oci(#[from] OciDistributionError),
    /// A 404 whose OCI error envelope names no not-found code: oci-client's text, the status
    /// kept, since a 404 to a manifest request fails the kubelet's pull whatever code it
    /// carries.
    #[error("Fail to interact with OCI registry: {0}")]
    NotFoundStatus(#[source] OciDistributionError),
    /// The lookup did not finish within `--oci-timeout-secs`.
    #[error("Fail to interact with OCI registry: {0}")]
    Timeout(#[source] RequestTimeout),
    /// The image reference does not parse.
    #[error("Invalid OCI image reference: {0}")]
    InvalidReference(#[from] oci_client::ParseError),
    /// The registry took a push, but the manifest URL it answered with does not end in the
    /// stored manifest's digest, so there is no immutable reference to report.
    #[error("the registry took the push but named no manifest digest: {manifest_url}")]
    PushedWithoutDigest {
        /// The manifest URL the registry answered with.
        manifest_url: String,
    },
    /// A push destination without the `registry://` scheme.
    #[error("a push destination is written registry://HOST[:PORT]/REPOSITORY[:TAG]")]
    InvalidDestination,
    /// No protocol was left to try for a registry (its sources allow none).
    #[error("no protocol to try for the registry")]
    NoProtocol,
    /// A registry answer that is not the JSON expected.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A pulled policy artifact without layers.
    #[error("the artifact {0} holds no wasm layer")]
    EmptyLayers(String),
    /// A pulled policy artifact whose layer is not a wasm module.
    #[error("the artifact's layer is not a wasm module")]
    InvalidWasm,
}

/// A configuration file of the client (`config.json`, `sources.yaml`) that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {what} {}", path.display())]
    Read {
        /// "docker config", "sources file".
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file's content is not valid.
    #[error("invalid {what} {}", path.display())]
    Invalid {
        /// "docker config", "sources file".
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        #[source]
        source: Box<ConfigError>,
    },
    /// A certificate file named by `sources.yaml` could not be read.
    #[error("cannot read the certificate authority {}", path.display())]
    Certificate {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The document is not the JSON expected.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The document is not the YAML expected.
    #[error("{0}")]
    Yaml(#[from] serde_yaml::Error),
    /// An `auth` entry that is not base64.
    #[error("invalid base64 `auth` for {key}")]
    Base64 {
        /// The `auths` key.
        key: String,
        /// Why.
        #[source]
        source: base64::DecodeError,
    },
    /// An `auth` entry that is not UTF-8 once decoded.
    #[error("`auth` for {key} is not UTF-8")]
    Utf8 {
        /// The `auths` key.
        key: String,
        /// Why.
        #[source]
        source: std::string::FromUtf8Error,
    },
}

impl ConfigError {
    /// This error, as the content of `path` (a `what`).
    fn in_file(self, what: &'static str, path: std::path::PathBuf) -> Self {
        ConfigError::Invalid {
            what,
            path,
            source: Box::new(self),
        }
    }
}

/// Reported when `--oci-timeout-secs` elapses, shaped like reqwest's own
/// transport errors so that guests classify it as "could not reach".
#[derive(Debug)]
pub struct RequestTimeout {
    url: String,
}

impl RequestTimeout {
    /// The time-out of a lookup that was working on `url`.
    pub fn new(url: impl Into<String>) -> Self {
        RequestTimeout { url: url.into() }
    }
}

/// Leaf cause of [`RequestTimeout`].
#[derive(Debug)]
struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "operation timed out")
    }
}

impl std::error::Error for TimedOut {}

impl std::fmt::Display for RequestTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error sending request for url ({})", self.url)
    }
}

impl std::error::Error for RequestTimeout {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&TimedOut)
    }
}

/// How to talk to a registry for one attempt.
#[derive(Debug, Clone)]
enum ClientProtocol {
    Http,
    Https(TlsMode),
}

#[derive(Debug, Clone)]
enum TlsMode {
    SystemCa,
    CustomCa(Vec<Certificate>),
    NoVerification,
}

impl ClientProtocol {
    fn scheme(&self) -> &'static str {
        match self {
            ClientProtocol::Http => "http",
            ClientProtocol::Https(_) => "https",
        }
    }
}

/// Registry client configured from `sources.yaml` and the Docker config.
/// Clones share one [`Pool`]: manifest lookups reuse its connections,
/// protocol decisions, pings and tokens for the life of the process.
#[derive(Clone)]
pub struct RegistryClient {
    sources: Sources,
    docker_config: DockerConfig,
    timeout: Duration,
    pool: Arc<Pool>,
}

/// Makes ring the TLS provider of every client of the process (the pool's and oci-client's),
/// before the first is built; idempotent.
pub fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // fails only when a provider is already installed, which nothing else here does
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Parse an image reference the way upstream does (`registry://` accepted).
pub fn parse_reference(image: &str) -> Result<Reference, RegistryError> {
    let image = image.strip_prefix("registry://").unwrap_or(image);
    if let Some(reference) = plain_reference(image) {
        return Ok(reference);
    }
    Ok(Reference::try_from(image)?)
}

/// The references a policy nearly always sends (`host[:port]/path:tag` or `…@sha256:…`, in
/// ASCII), parsed without oci-spec's regular expression, whose compilation (its tag pattern is
/// a Unicode `\w` repeated 128 times) costs about 20 ms of every run. `None` for anything
/// else, including every invalid reference: those go to oci-spec, so that errors, Docker Hub
/// names and every other case read exactly as upstream's. Where it answers, the answer is
/// oci-spec's (`plain_references_parse_like_oci_spec`).
fn plain_reference(image: &str) -> Option<Reference> {
    let (registry, rest) = image.split_once('/')?;
    let (host, port) = match registry.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (registry, None),
    };
    // a first component without `.` or `:` is a Docker Hub namespace unless it is localhost
    let qualified = host.contains('.') || port.is_some() || host == "localhost";
    if !qualified
        || matches!(host, "docker.io" | "index.docker.io")
        || !host.split('.').all(is_domain_component)
        || port.is_some_and(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let (name_and_tag, digest) = match rest.split_once('@') {
        Some((left, digest)) => (left, Some(digest)),
        None => (rest, None),
    };
    let (repository, tag) = match name_and_tag.rsplit_once(':') {
        Some((repository, tag)) => (repository, Some(tag)),
        None => (name_and_tag, None),
    };
    if repository.is_empty()
        || repository.len() > 255
        || !repository.split('/').all(is_path_component)
        || !tag.is_none_or(is_tag)
        || !digest.is_none_or(is_supported_digest)
    {
        return None;
    }
    let (registry, repository) = (registry.to_owned(), repository.to_owned());
    Some(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.into(), digest.into())
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.into()),
        (tag, None) => Reference::with_tag(registry, repository, tag.unwrap_or("latest").into()),
    })
}

/// `[a-zA-Z0-9]` or `[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`.
fn is_domain_component(component: &str) -> bool {
    let b = component.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
}

/// `[a-z0-9]+` runs joined by `.`, `_`, `__` or any number of `-`.
fn is_path_component(component: &str) -> bool {
    let alnum = |x: &u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    let b = component.as_bytes();
    b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.split(alnum)
            .all(|sep| matches!(sep, b"" | b"." | b"_" | b"__") || sep.iter().all(|x| *x == b'-'))
}

/// `[\w][\w.-]{0,127}`, ASCII only.
fn is_tag(tag: &str) -> bool {
    let word = |x: &u8| x.is_ascii_alphanumeric() || *x == b'_';
    let b = tag.as_bytes();
    b.len() <= 128
        && b.first().is_some_and(word)
        && b.iter().all(|x| word(x) || matches!(x, b'.' | b'-'))
}

/// A digest oci-spec accepts: sha256, sha384 or sha512 with its exact hex length.
fn is_supported_digest(digest: &str) -> bool {
    let hex_of =
        |hex: &str, len: usize| hex.len() == len && hex.bytes().all(|b| b.is_ascii_hexdigit());
    match digest.split_once(':') {
        Some(("sha256", hex)) => hex_of(hex, 64),
        Some(("sha384", hex)) => hex_of(hex, 96),
        Some(("sha512", hex)) => hex_of(hex, 128),
        _ => false,
    }
}

fn manifest_url(scheme: &str, reference: &Reference) -> String {
    let target = reference
        .digest()
        .or_else(|| reference.tag())
        .unwrap_or("latest");
    format!(
        "{scheme}://{}/v2/{}/manifests/{target}",
        reference.resolve_registry(),
        reference.repository()
    )
}

impl RegistryClient {
    /// Build a client; `timeout` bounds each whole lookup (all protocol attempts).
    pub fn new(sources: Sources, docker_config: DockerConfig, timeout: Duration) -> Self {
        install_tls_provider();
        Self {
            pool: Arc::new(Pool::new(sources.clone())),
            sources,
            docker_config,
            timeout,
        }
    }

    /// Run a pooled lookup within the timeout; on time-out the error names
    /// the URL the lookup was working on (written to `slot`), as
    /// [`Self::try_with_protocols`] does.
    async fn bounded<T>(
        &self,
        slot: &UrlSlot,
        lookup: impl Future<Output = Result<T, RegistryError>>,
    ) -> Result<T, RegistryError> {
        match tokio::time::timeout(self.timeout, lookup).await {
            Ok(result) => result,
            Err(_) => {
                let url = slot.lock().map(|u| u.clone()).unwrap_or_default();
                Err(RegistryError::Timeout(RequestTimeout { url }))
            }
        }
    }

    fn client(protocol: &ClientProtocol) -> Client {
        let mut config = ClientConfig {
            protocol: match protocol {
                ClientProtocol::Http => OciClientProtocol::Http,
                ClientProtocol::Https(_) => OciClientProtocol::Https,
            },
            ..Default::default()
        };
        if let ClientProtocol::Https(mode) = protocol {
            match mode {
                TlsMode::SystemCa => {}
                TlsMode::CustomCa(certs) => {
                    config.extra_root_certificates = certs
                        .iter()
                        .map(|c| match c {
                            Certificate::Pem(data) => OciCertificate {
                                encoding: CertificateEncoding::Pem,
                                data: data.clone(),
                            },
                            Certificate::Der(data) => OciCertificate {
                                encoding: CertificateEncoding::Der,
                                data: data.clone(),
                            },
                        })
                        .collect();
                }
                TlsMode::NoVerification => config.accept_invalid_certificates = true,
            }
        }
        Client::new(config)
    }

    /// Runs `operation` on `image`'s registry with the host's own credentials for it, over
    /// the protocols its sources allow: the shape shared by every call that is not a
    /// per-lookup credential (manifests, configurations, policy pulls).
    async fn with_host_credentials<T, F, Fut>(
        &self,
        image: &str,
        operation: F,
    ) -> Result<T, RegistryError>
    where
        F: Fn(Client, Reference, RegistryAuth) -> Fut,
        Fut: Future<Output = Result<T, RegistryError>>,
    {
        let reference = parse_reference(image)?;
        let auth = self.docker_config.auth(reference.registry());
        self.try_with_protocols(
            reference.registry(),
            |scheme| manifest_url(scheme, &reference),
            |client| operation(client, reference.clone(), auth.clone()),
        )
        .await
    }

    /// Run `operation` with HTTPS, then (insecure sources only) HTTPS without
    /// verification, then HTTP, the whole sequence bounded by the timeout.
    async fn try_with_protocols<T, F, Fut>(
        &self,
        host: &str,
        url_for: impl Fn(&str) -> String,
        operation: F,
    ) -> Result<T, RegistryError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, RegistryError>>,
    {
        let current_url = Arc::new(Mutex::new(String::new()));
        let set_url = |protocol: &ClientProtocol| {
            if let Ok(mut u) = current_url.lock() {
                *u = url_for(protocol.scheme());
            }
        };
        let attempts = async {
            let first = match self.sources.source_authority(host) {
                Some(certs) => ClientProtocol::Https(TlsMode::CustomCa(certs.to_vec())),
                None => ClientProtocol::Https(TlsMode::SystemCa),
            };
            set_url(&first);
            match operation(Self::client(&first)).await {
                Ok(v) => return Ok(v),
                Err(e) if !self.sources.is_insecure_source(host) => return Err(e),
                Err(_) => {}
            }
            let second = ClientProtocol::Https(TlsMode::NoVerification);
            set_url(&second);
            if let Ok(v) = operation(Self::client(&second)).await {
                return Ok(v);
            }
            let third = ClientProtocol::Http;
            set_url(&third);
            operation(Self::client(&third)).await
        };
        match tokio::time::timeout(self.timeout, attempts).await {
            Ok(result) => result,
            Err(_) => {
                let url = current_url.lock().map(|u| u.clone()).unwrap_or_default();
                Err(RegistryError::Timeout(RequestTimeout { url }))
            }
        }
    }

    /// `oci/v1/manifest_digest`: HEAD (then GET) the manifest, return its
    /// digest, through the pool with the Docker config's credential.
    pub async fn manifest_digest(&self, image: &str) -> Result<String, RegistryError> {
        let reference = parse_reference(image)?;
        let auth = self.docker_config.auth(reference.registry());
        let slot = UrlSlot::default();
        let lookup = self.pool.manifest_digest(&reference, &auth, &slot);
        self.bounded(&slot, lookup).await
    }

    /// The lookup timeout this client was built with.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// GET the raw manifest of `image` with an explicit `auth` (never the
    /// Docker config): used by `oci/v1/resolve_images`, whose credentials
    /// come from the guest. Returns the body and its digest.
    pub async fn manifest_raw_with_auth(
        &self,
        image: &str,
        auth: RegistryAuth,
        accept: &'static [&'static str],
    ) -> Result<(Vec<u8>, String), RegistryError> {
        let reference = parse_reference(image)?;
        let slot = UrlSlot::default();
        let lookup = self.pool.manifest_raw(&reference, &auth, accept, &slot);
        self.bounded(&slot, lookup).await
    }

    /// `oci/v1/oci_manifest`: the manifest (image manifest or index) as JSON.
    pub async fn manifest(&self, image: &str) -> Result<serde_json::Value, RegistryError> {
        let manifest = self
            .with_host_credentials(image, |client, reference, auth| async move {
                Ok(client.pull_manifest(&reference, &auth).await?.0)
            })
            .await?;
        Ok(serde_json::to_value(manifest)?)
    }

    /// `oci/v1/oci_manifest_config`: image manifest (index resolved to this
    /// host's platform), its digest and the image configuration.
    pub async fn manifest_and_config(
        &self,
        image: &str,
    ) -> Result<serde_json::Value, RegistryError> {
        let (manifest, digest, config) = self
            .with_host_credentials(image, |client, reference, auth| async move {
                Ok(client.pull_manifest_and_config(&reference, &auth).await?)
            })
            .await?;
        let config: serde_json::Value = serde_json::from_str(&config)?;
        Ok(serde_json::json!({"manifest": manifest, "digest": digest, "config": config}))
    }

    /// Pull a policy pushed as a Kubernetes OCI artifact; returns the wasm bytes.
    pub async fn pull_policy(&self, url: &str) -> Result<Vec<u8>, RegistryError> {
        let data = self
            .with_host_credentials(url, |client, reference, auth| async move {
                let image = client
                    .pull(&reference, &auth, vec![manifest::WASM_LAYER_MEDIA_TYPE])
                    .await?;
                image
                    .layers
                    .into_iter()
                    .next()
                    .map(|l| l.data.to_vec())
                    .ok_or_else(|| RegistryError::EmptyLayers(url.to_owned()))
            })
            .await?;
        if !data.starts_with(b"\0asm") {
            return Err(RegistryError::InvalidWasm);
        }
        Ok(data)
    }

    /// Push `policy` to `destination` (`registry://host:port/repo:tag`) as a Kubewarden
    /// policy artifact, the layout policy-server and kwctl pull: config blob `{}` of type
    /// `application/vnd.wasm.config.v1+json`, one layer of type
    /// `application/vnd.wasm.content.layer.v1+wasm`, `annotations` on the
    /// manifest. Returns `(immutable reference, digest)`.
    pub async fn push(
        &self,
        policy: &[u8],
        destination: &str,
        annotations: Option<BTreeMap<String, String>>,
    ) -> Result<(String, String), RegistryError> {
        let image = destination
            .strip_prefix("registry://")
            .ok_or(RegistryError::InvalidDestination)?;
        let reference = Reference::from_str(image)?;
        let auth = self.docker_config.auth(reference.registry());
        let layers = vec![ImageLayer::new(
            policy.to_vec(),
            manifest::WASM_LAYER_MEDIA_TYPE.to_string(),
            None,
        )];
        let config = Config::new(
            b"{}".to_vec(),
            manifest::WASM_CONFIG_MEDIA_TYPE.to_string(),
            None,
        );
        let image_manifest = OciImageManifest::build(&layers, &config, annotations);
        let manifest_url = self
            .try_with_protocols(
                reference.registry(),
                |scheme| manifest_url(scheme, &reference),
                |client| {
                    let reference = reference.clone();
                    let auth = auth.clone();
                    let layers = layers.clone();
                    let config = config.clone();
                    let image_manifest = image_manifest.clone();
                    async move {
                        Ok(client
                            .push(&reference, &layers, config, &auth, Some(image_manifest))
                            .await?
                            .manifest_url)
                    }
                },
            )
            .await?;
        let digest = pushed_digest(&manifest_url)?;
        let immutable = format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        );
        Ok((immutable, digest.to_owned()))
    }
}

/// The digest a push's manifest URL names. The distribution API answers a stored manifest
/// with its location, `…/v2/<repository>/manifests/<digest>`, possibly with a query; the
/// digest must be one [`is_supported_digest`] accepts, since it becomes the immutable
/// reference reported for the push.
fn pushed_digest(manifest_url: &str) -> Result<&str, RegistryError> {
    let path = manifest_url
        .split(['?', '#'])
        .next()
        .unwrap_or(manifest_url);
    path.rsplit_once("/manifests/")
        .map(|(_, digest)| digest)
        .filter(|digest| is_supported_digest(digest))
        .ok_or_else(|| RegistryError::PushedWithoutDigest {
            manifest_url: manifest_url.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_parsing_like_upstream() {
        let r = parse_reference("busybox").expect("parse");
        assert_eq!(r.registry(), "docker.io");
        assert_eq!(r.repository(), "library/busybox");
        assert_eq!(r.tag(), Some("latest"));
        let r = parse_reference("registry://127.0.0.1:5000/test/app:v1").expect("parse");
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(
            manifest_url("http", &r),
            "http://127.0.0.1:5000/v2/test/app/manifests/v1"
        );
        assert!(parse_reference("Test/App").is_err());
    }

    #[test]
    fn plain_references_parse_like_oci_spec() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let long_tag = "t".repeat(128);
        let taken = [
            "127.0.0.1:5000/test/app:v1".to_owned(),
            "registry.example/team/app".to_owned(),
            "localhost/app:1.0".to_owned(),
            "localhost:5000/a__b/c.d/e---f:V_1.0-rc".to_owned(),
            format!("ghcr.io/org/app@{digest}"),
            format!("ghcr.io/org/app:1.2@{digest}"),
            format!("ghcr.io/org/app@sha512:{}", "0".repeat(128)),
            format!("my-registry.example:443/x:{long_tag}"),
            format!("r.example/{}", "b".repeat(255)),
        ];
        for image in &taken {
            let fast = plain_reference(image).unwrap_or_else(|| panic!("fast path for {image}"));
            assert_eq!(
                Some(fast),
                Reference::try_from(image.as_str()).ok(),
                "{image}"
            );
        }
        // everything else is left to oci-spec: Docker Hub names, unusual or invalid forms
        let left = [
            "busybox".to_owned(),
            "library/busybox:1".to_owned(),
            "docker.io/library/busybox".to_owned(),
            "index.docker.io/library/busybox".to_owned(),
            "r.example/Upper/app".to_owned(),
            "r.example/app:".to_owned(),
            "r.example/app:-tag".to_owned(),
            format!("r.example/app:{long_tag}x"),
            "r.example/a..b".to_owned(),
            "r.example/a_-b".to_owned(),
            "r.example/app/".to_owned(),
            "r.example//app".to_owned(),
            "-r.example/app".to_owned(),
            "r.example:/app".to_owned(),
            "r.example:50a/app".to_owned(),
            "[::1]:5000/app".to_owned(),
            "r.example/app@sha256:abc".to_owned(),
            format!("r.example/app@md5:{}", "a".repeat(32)),
            format!("r.example/{}", "b".repeat(256)),
            "r.example/app:tag\u{e9}".to_owned(),
        ];
        for image in &left {
            assert_eq!(plain_reference(image), None, "{image}");
        }
    }

    #[test]
    fn a_push_answer_ending_in_a_digest_gives_that_digest() {
        let sha256 = format!("sha256:{}", "3f".repeat(32));
        let sha512 = format!("sha512:{}", "0a".repeat(64));
        let answers = [
            (
                format!("https://registry.example.test/v2/team-a/app/manifests/{sha256}"),
                &sha256,
            ),
            (
                format!("http://127.0.0.1:5000/v2/policies/pinning/manifests/{sha512}"),
                &sha512,
            ),
            // a query (oci-client adds `?ns=` for a mirrored namespace) is not the digest's
            (
                format!(
                    "https://mirror.example.test/v2/team-a/app/manifests/{sha256}?ns=docker.io"
                ),
                &sha256,
            ),
        ];
        for (manifest_url, digest) in &answers {
            assert_eq!(
                pushed_digest(manifest_url).ok(),
                Some(digest.as_str()),
                "{manifest_url}"
            );
        }
    }

    #[test]
    fn a_push_answer_without_a_usable_digest_is_an_error_naming_it() {
        let hex = "3f".repeat(32);
        let answers = [
            // the tag pushed to, not what was stored
            "https://registry.example.test/v2/team-a/app/manifests/v1".to_owned(),
            // a digest of the wrong length, or of an algorithm oci-spec does not take
            "https://registry.example.test/v2/team-a/app/manifests/sha256:3f3f".to_owned(),
            format!("https://registry.example.test/v2/team-a/app/manifests/md5:{hex}"),
            // a digest, but of a blob
            format!("https://registry.example.test/v2/team-a/app/blobs/sha256:{hex}"),
            format!("https://registry.example.test/v2/team-a/app/manifests/sha256:{hex}/"),
            String::new(),
        ];
        for manifest_url in &answers {
            match pushed_digest(manifest_url) {
                Err(error @ RegistryError::PushedWithoutDigest { .. }) => {
                    assert!(
                        error.to_string().ends_with(manifest_url.as_str()),
                        "{error}"
                    );
                }
                other => panic!("{manifest_url}: {other:?}"),
            }
        }
    }
}
