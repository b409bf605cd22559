//! The pull secrets of a lookup, read from the API server: the named Secrets of the lookup's
//! namespace, or those its ServiceAccount lists, turned into the kubelet's keyring by the
//! policy's own rules (the `kubelet-credentials` crate). Objects are cached for a few
//! seconds (a burst of lookups for one pod reads each once), in a bounded cache.
//!
//! Two GETs are all the broker needs from the API server, so they are plain HTTPS requests
//! with the pod's ServiceAccount token (in-cluster) rather than a Kubernetes client library.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use broker_reference::Credentials;
use kubelet_credentials::{parse_pull_secret, service_account_secret_names, Keyring};
use serde_json::Value;

/// Where the in-cluster credentials are mounted.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The most objects kept in the cache.
const MAX_CACHED: usize = 4096;

/// Why the pull secrets of a lookup could not be read: the lookup cannot know which
/// credentials the kubelet would have.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// `--apiserver` was not given outside a cluster.
    #[error("not in a cluster (KUBERNETES_SERVICE_HOST unset): give --apiserver")]
    NotInCluster,
    /// A file of the configuration could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The API server's CA is not PEM.
    #[error("{}: {source}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The HTTP client could not be built.
    #[error("cannot build the API client: {0}")]
    Client(#[source] reqwest::Error),
    /// The request did not reach the API server or its answer broke off.
    #[error("API server: {0}")]
    Transport(#[source] reqwest::Error),
    /// The API server answered with an object that is not JSON.
    #[error("API server: unreadable {object}")]
    Unreadable {
        /// `resource namespace/name`.
        object: String,
    },
    /// The API server answered with an unexpected status.
    #[error("API server answered HTTP {status} for {object}")]
    Status {
        /// The status.
        status: u16,
        /// `resource namespace/name`.
        object: String,
    },
    /// The lookup's deadline passed first.
    #[error("the API server did not answer in time")]
    NoAnswer,
}

/// How to reach the API server.
#[derive(Debug, Clone)]
pub struct ApiServer {
    /// `https://host:port` (or `http://127.0.0.1:port` for the tests' fake API server).
    pub url: String,
    /// The bearer token's file, read on every cache miss (projected tokens rotate).
    pub token_file: Option<PathBuf>,
    /// The API server's CA (PEM), `None` for the system roots.
    pub ca_file: Option<PathBuf>,
}

impl ApiServer {
    /// The in-cluster API server, from the environment Kubernetes gives every pod.
    pub fn in_cluster() -> Result<Self, ClusterError> {
        let host =
            std::env::var("KUBERNETES_SERVICE_HOST").map_err(|_| ClusterError::NotInCluster)?;
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        Ok(ApiServer {
            url: format!("https://{host}:{port}"),
            token_file: Some(PathBuf::from(SERVICE_ACCOUNT_DIR).join("token")),
            ca_file: Some(PathBuf::from(SERVICE_ACCOUNT_DIR).join("ca.crt")),
        })
    }
}

#[derive(Clone)]
enum Fetched {
    Object(Arc<Value>),
    Missing,
}

/// The API server client with its cache.
pub struct Cluster {
    api: ApiServer,
    client: reqwest::Client,
    ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, Fetched)>>,
}

/// The keyring of a lookup, and what was skipped on the way (names only).
pub struct PullSecrets {
    /// The credentials every usable secret gives, in the kubelet's order.
    pub keyring: Keyring,
    /// Secrets that were missing or unusable, for the log line.
    pub skipped: Vec<String>,
}

impl Cluster {
    /// A client of `api`, caching objects for `ttl`; every request is bounded by `timeout`.
    pub fn new(api: ApiServer, ttl: Duration, timeout: Duration) -> Result<Self, ClusterError> {
        let mut builder = reqwest::Client::builder().timeout(timeout);
        if let Some(ca) = &api.ca_file {
            let pem = std::fs::read(ca).map_err(|source| ClusterError::Read {
                path: ca.clone(),
                source,
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                ClusterError::Certificate {
                    path: ca.clone(),
                    source,
                }
            })?;
            builder = builder.tls_certs_only(certs);
        }
        let client = builder.build().map_err(ClusterError::Client)?;
        Ok(Cluster {
            api,
            client,
            ttl,
            cache: Mutex::default(),
        })
    }

    /// The keyring `credentials` give in `namespace`. Missing and malformed secrets are
    /// skipped, as the kubelet skips them; an API server that cannot answer is an error (the
    /// lookup cannot know which credentials the kubelet would have).
    pub async fn pull_secrets(
        &self,
        namespace: &str,
        credentials: &Credentials,
    ) -> Result<PullSecrets, ClusterError> {
        let mut skipped = Vec::new();
        let names: Vec<String> = match credentials {
            Credentials::PullSecrets(names) => names.clone(),
            Credentials::ServiceAccount(account) => {
                match self.get("serviceaccounts", namespace, account).await? {
                    Fetched::Missing => {
                        skipped.push(format!("serviceaccount/{account}"));
                        Vec::new()
                    }
                    Fetched::Object(object) => service_account_secret_names(&object),
                }
            }
        };
        let mut keyring = Keyring::new();
        for name in names {
            if !broker_reference::is_dns_subdomain(&name) {
                skipped.push(format!("secret/{name}"));
                continue;
            }
            match self.get("secrets", namespace, &name).await? {
                Fetched::Missing => skipped.push(format!("secret/{name}")),
                Fetched::Object(secret) => match parse_pull_secret(&name, &secret) {
                    Ok(entries) => {
                        for (key, credential) in entries {
                            keyring.add(&key, credential);
                        }
                    }
                    Err(_) => skipped.push(format!("secret/{name}")),
                },
            }
        }
        Ok(PullSecrets { keyring, skipped })
    }

    async fn get(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Fetched, ClusterError> {
        let key = format!("{resource}/{namespace}/{name}");
        if let Some((at, fetched)) = self.cache.lock().ok().and_then(|c| c.get(&key).cloned()) {
            if at.elapsed() < self.ttl {
                return Ok(fetched);
            }
        }
        let url = format!(
            "{}/api/v1/namespaces/{namespace}/{resource}/{name}",
            self.api.url.trim_end_matches('/')
        );
        let mut request = self.client.get(&url);
        if let Some(file) = &self.api.token_file {
            let token =
                tokio::fs::read_to_string(file)
                    .await
                    .map_err(|source| ClusterError::Read {
                        path: file.clone(),
                        source,
                    })?;
            request = request.bearer_auth(token.trim());
        }
        let response = request
            .send()
            .await
            .map_err(|e| ClusterError::Transport(e.without_url()))?;
        let object = || format!("{resource} {namespace}/{name}");
        let fetched = match response.status().as_u16() {
            200 => Fetched::Object(Arc::new(
                response
                    .json::<Value>()
                    .await
                    .map_err(|_| ClusterError::Unreadable { object: object() })?,
            )),
            404 => Fetched::Missing,
            status => {
                return Err(ClusterError::Status {
                    status,
                    object: object(),
                })
            }
        };
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= MAX_CACHED {
                let ttl = self.ttl;
                cache.retain(|_, (at, _)| at.elapsed() < ttl);
                if cache.len() >= MAX_CACHED {
                    cache.clear();
                }
            }
            cache.insert(key, (Instant::now(), fetched.clone()));
        }
        Ok(fetched)
    }
}
