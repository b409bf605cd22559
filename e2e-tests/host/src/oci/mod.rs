//! Registry access, following policy-fetcher's `Registry`.
//!
//! Every operation parses the reference like `oci_client::Reference`
//! (`busybox` → `docker.io/library/busybox:latest`), picks credentials from
//! the Docker config, and runs through [`RegistryClient::try_with_protocols`]:
//! HTTPS (system or custom CAs), then — only for insecure sources — HTTPS
//! without verification, then plain HTTP; only the last error is reported.
//! Errors are [`RegistryError`], whose `Display`/`source` chain matches
//! policy-fetcher's so that `{:?}` gives the texts guests see upstream.

pub mod auth;
pub mod docker_config;
pub mod pool;
#[cfg(test)]
mod pool_tests;
pub mod sources;
#[cfg(test)]
mod test_registry;

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

/// Errors of registry operations; texts follow policy-fetcher's `RegistryError`.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Anything oci-client reports (HTTP status, OCI error envelope, transport).
    #[error("Fail to interact with OCI registry: {0}")]
    Oci(#[from] OciDistributionError),
    /// The lookup did not finish within `--oci-timeout-secs`.
    #[error("Fail to interact with OCI registry: {0}")]
    Timeout(#[source] RequestTimeout),
    /// The image reference does not parse.
    #[error("Invalid OCI image reference: {0}")]
    InvalidReference(#[from] oci_client::ParseError),
    /// The registry answered a push with an unusable manifest URL.
    #[error("{0}")]
    BuildImmutableReference(String),
    /// A push destination without the `registry://` scheme.
    #[error("Invalid destination format")]
    InvalidDestination,
    /// A registry answer that is not the JSON expected.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A pulled policy artifact without layers.
    #[error("could not pull policy {0}: empty layers")]
    EmptyLayers(String),
    /// A pulled policy artifact whose layer is not a wasm module.
    #[error("invalid wasm file")]
    InvalidWasm,
}

/// Reported when `--oci-timeout-secs` elapses, shaped like reqwest's own
/// transport errors so that guests classify it as "could not reach".
#[derive(Debug)]
pub struct RequestTimeout {
    url: String,
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

/// Parse an image reference the way upstream does (`registry://` accepted).
pub fn parse_reference(image: &str) -> Result<Reference, RegistryError> {
    let image = image.strip_prefix("registry://").unwrap_or(image);
    Ok(Reference::try_from(image)?)
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
        let reference = parse_reference(image)?;
        let auth = self.docker_config.auth(reference.registry());
        let manifest = self
            .try_with_protocols(
                reference.registry(),
                |scheme| manifest_url(scheme, &reference),
                |client| {
                    let reference = reference.clone();
                    let auth = auth.clone();
                    async move { Ok(client.pull_manifest(&reference, &auth).await?.0) }
                },
            )
            .await?;
        Ok(serde_json::to_value(manifest)?)
    }

    /// `oci/v1/oci_manifest_config`: image manifest (index resolved to this
    /// host's platform), its digest and the image configuration.
    pub async fn manifest_and_config(
        &self,
        image: &str,
    ) -> Result<serde_json::Value, RegistryError> {
        let reference = parse_reference(image)?;
        let auth = self.docker_config.auth(reference.registry());
        let (manifest, digest, config) = self
            .try_with_protocols(
                reference.registry(),
                |scheme| manifest_url(scheme, &reference),
                |client| {
                    let reference = reference.clone();
                    let auth = auth.clone();
                    async move { Ok(client.pull_manifest_and_config(&reference, &auth).await?) }
                },
            )
            .await?;
        let config: serde_json::Value = serde_json::from_str(&config)?;
        Ok(serde_json::json!({"manifest": manifest, "digest": digest, "config": config}))
    }

    /// Pull a policy pushed as a Kubernetes OCI artifact; returns the wasm bytes.
    pub async fn pull_policy(&self, url: &str) -> Result<Vec<u8>, RegistryError> {
        let reference = parse_reference(url)?;
        let auth = self.docker_config.auth(reference.registry());
        let data = self
            .try_with_protocols(
                reference.registry(),
                |scheme| manifest_url(scheme, &reference),
                |client| {
                    let reference = reference.clone();
                    let auth = auth.clone();
                    async move {
                        let image = client
                            .pull(&reference, &auth, vec![manifest::WASM_LAYER_MEDIA_TYPE])
                            .await?;
                        image
                            .layers
                            .into_iter()
                            .next()
                            .map(|l| l.data.to_vec())
                            .ok_or_else(|| RegistryError::EmptyLayers(url.to_owned()))
                    }
                },
            )
            .await?;
        if !data.starts_with(b"\0asm") {
            return Err(RegistryError::InvalidWasm);
        }
        Ok(data)
    }

    /// Push `policy` to `destination` (`registry://host:port/repo:tag`) the way
    /// policy-fetcher does: config blob `{}` of type
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
        let digest = manifest_url
            .rsplit_once('/')
            .map(|(_, d)| d.to_owned())
            .filter(|d| d.starts_with("sha256:") || d.starts_with("sha512:"))
            .ok_or_else(|| {
                RegistryError::BuildImmutableReference(format!(
                    "Cannot extract manifest digest from the OCI registry response: {manifest_url}"
                ))
            })?;
        let immutable = format!(
            "{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        );
        Ok((immutable, digest))
    }
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
    fn timeout_error_reads_like_a_transport_error() {
        let e = anyhow::Error::from(RegistryError::Timeout(RequestTimeout {
            url: "http://127.0.0.1:1/v2/a/manifests/b".into(),
        }));
        assert_eq!(
            crate::capabilities::error_chain(&e),
            "Fail to interact with OCI registry: error sending request for url (http://127.0.0.1:1/v2/a/manifests/b)\n\nCaused by:\n    0: error sending request for url (http://127.0.0.1:1/v2/a/manifests/b)\n    1: operation timed out"
        );
    }
}
