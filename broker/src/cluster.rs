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
/// The most bytes of objects kept in the cache (as the API server sent them): Secrets are up
/// to 1 MiB each, so a count alone would allow gigabytes.
const MAX_CACHED_BYTES: usize = 16 << 20;
/// The largest object read: etcd stores at most 1.5 MiB per object, so a longer answer is no
/// object of the cluster.
const MAX_OBJECT_BYTES: usize = 2 << 20;

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
    cache: Mutex<Cache>,
}

/// Fetched objects by key, with when they were fetched and their size.
#[derive(Default)]
struct Cache {
    entries: HashMap<String, (Instant, Fetched, usize)>,
    bytes: usize,
}

impl Cache {
    fn get(&self, key: &str, ttl: Duration) -> Option<Fetched> {
        let (at, fetched, _) = self.entries.get(key)?;
        (at.elapsed() < ttl).then(|| fetched.clone())
    }

    /// Keeps `fetched` within the cache's bounds: expired entries go first, then all.
    fn insert(&mut self, key: String, fetched: Fetched, size: usize, ttl: Duration) {
        if let Some((_, _, old)) = self.entries.remove(&key) {
            self.bytes -= old;
        }
        if self.entries.len() >= MAX_CACHED || self.bytes + size > MAX_CACHED_BYTES {
            self.entries.retain(|_, (at, _, _)| at.elapsed() < ttl);
            self.bytes = self.entries.values().map(|(_, _, size)| size).sum();
            if self.entries.len() >= MAX_CACHED || self.bytes + size > MAX_CACHED_BYTES {
                *self = Cache::default();
            }
        }
        self.bytes += size;
        self.entries.insert(key, (Instant::now(), fetched, size));
    }
}

/// The keyring of a lookup, and what was skipped on the way (names only).
pub struct PullSecrets {
    /// The credentials every usable secret gives, in the kubelet's order.
    pub keyring: Keyring,
    /// Secrets that were missing or of another type, for the log line (the kubelet skips
    /// them).
    pub skipped: Vec<String>,
    /// Why a pull secret does not decode (names the secret and key, never a byte of it): the
    /// kubelet then fails every pull of the pod.
    pub malformed: Option<String>,
}

impl Cluster {
    /// A client of `api`, caching objects for `ttl`; every request is bounded by `timeout`.
    pub fn new(api: ApiServer, ttl: Duration, timeout: Duration) -> Result<Self, ClusterError> {
        // the API server is in the cluster: no proxy from the environment stands in between
        let mut builder = reqwest::Client::builder().timeout(timeout).no_proxy();
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

    /// The keyring `credentials` give in `namespace`. Missing secrets and secrets of another
    /// type are skipped, as the kubelet skips them; the first that does not decode is kept in
    /// `malformed`, since the kubelet's keyring fails on it; an API server that cannot answer
    /// is an error (the lookup cannot know which credentials the kubelet would have).
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
        let mut malformed = None;
        for name in names {
            if !broker_reference::is_dns_subdomain(&name) {
                skipped.push(format!("secret/{name}"));
                continue;
            }
            match self.get("secrets", namespace, &name).await? {
                Fetched::Missing => skipped.push(format!("secret/{name}")),
                Fetched::Object(secret) => {
                    match parse_pull_secret(&format!("{namespace}/{name}"), &secret) {
                        Ok(entries) => {
                            for (key, credential) in entries {
                                keyring.add(&key, credential);
                            }
                        }
                        Err(error) if error.is_wrong_type() => {
                            skipped.push(format!("secret/{name}"))
                        }
                        Err(error) => {
                            skipped.push(format!("secret/{name}"));
                            malformed.get_or_insert_with(|| error.to_string());
                        }
                    }
                }
            }
        }
        Ok(PullSecrets {
            keyring,
            skipped,
            malformed,
        })
    }

    async fn get(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Fetched, ClusterError> {
        let key = format!("{resource}/{namespace}/{name}");
        if let Some(fetched) = self.cache.lock().ok().and_then(|c| c.get(&key, self.ttl)) {
            return Ok(fetched);
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
        let (fetched, size) = match response.status().as_u16() {
            200 => {
                let body = read_object(response)
                    .await
                    .ok_or_else(|| ClusterError::Unreadable { object: object() })?;
                let value = serde_json::from_slice::<Value>(&body)
                    .map_err(|_| ClusterError::Unreadable { object: object() })?;
                (Fetched::Object(Arc::new(value)), body.len())
            }
            404 => (Fetched::Missing, 0),
            status => {
                return Err(ClusterError::Status {
                    status,
                    object: object(),
                })
            }
        };
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key.clone(), fetched.clone(), key.len() + size, self.ttl);
        }
        Ok(fetched)
    }
}

/// The body of an API answer, `None` beyond [`MAX_OBJECT_BYTES`] or when it breaks off.
async fn read_object(mut response: reqwest::Response) -> Option<Vec<u8>> {
    if response
        .content_length()
        .is_some_and(|length| length > MAX_OBJECT_BYTES as u64)
    {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_OBJECT_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded_by_bytes() {
        let ttl = Duration::from_secs(60);
        let mut cache = Cache::default();
        let object = Fetched::Object(Arc::new(Value::Null));
        for i in 0..40 {
            cache.insert(format!("secret/ns/s{i}"), object.clone(), 1 << 20, ttl);
            assert!(cache.bytes <= MAX_CACHED_BYTES, "{} bytes", cache.bytes);
            assert!(cache.get(&format!("secret/ns/s{i}"), ttl).is_some());
        }
        cache.insert("secret/ns/s39".into(), Fetched::Missing, 10, ttl);
        assert!(matches!(
            cache.get("secret/ns/s39", ttl),
            Some(Fetched::Missing)
        ));
        let sum: usize = cache.entries.values().map(|(_, _, size)| size).sum();
        assert_eq!(cache.bytes, sum);
        assert!(cache.get("secret/ns/s39", Duration::ZERO).is_none());
    }
}
