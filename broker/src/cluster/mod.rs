//! The cluster side: the pull secrets of a lookup, and whether its namespace opted in, read
//! from the API server: the named Secrets of the lookup's
//! namespace, or those its ServiceAccount lists, turned into the kubelet's keyring by the
//! policy's own rules (the `kubelet-credentials` crate). Objects are cached for a few
//! seconds (a burst of lookups for one pod reads each once), in a cache bounded by bytes.
//!
//! The API server is read with `kube`: its configuration from the cluster (the pod's
//! ServiceAccount), a kubeconfig, or `--apiserver` with a token file, and typed objects.

pub mod providers;
pub mod tenancy;
pub mod token_binding;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use broker_reference::Credentials;
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use kube::api::Api;
use kubelet_credentials::{parse_pull_secret, service_account_secret_names, Keyring};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::Value;

/// The most objects kept in the cache.
const MAX_CACHED: usize = 4096;
/// The most bytes of objects kept in the cache (as JSON): Secrets are up to 1 MiB each, so a
/// count alone would allow gigabytes.
const MAX_CACHED_BYTES: usize = 16 << 20;

/// Why the pull secrets of a lookup could not be read: the lookup cannot know which
/// credentials the kubelet would have.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Neither a kubeconfig nor the in-cluster environment says where the API server is.
    #[error("no API server configuration (no kubeconfig, not in a cluster): give --apiserver")]
    NoConfiguration(#[source] Box<kube::config::InferConfigError>),
    /// `--apiserver` is not a URL.
    #[error("--apiserver {url:?} is not a URL")]
    Url {
        /// What was given.
        url: String,
    },
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
        source: rustls::pki_types::pem::Error,
    },
    /// The client could not be built from the configuration.
    #[error("cannot build the API client: {0}")]
    Client(#[source] Box<kube::Error>),
    /// The API server refused the read, failed, or could not be reached.
    #[error("API server: {object}: {source}")]
    Api {
        /// `resource namespace/name`.
        object: String,
        /// What `kube` says (a status and reason, or the transport's error).
        #[source]
        source: Box<kube::Error>,
    },
    /// The object read is not what `kubelet-credentials` reads.
    #[error("API server: unreadable {object}")]
    Unreadable {
        /// `resource namespace/name`.
        object: String,
    },
    /// The lookup's deadline passed first.
    #[error("the API server did not answer in time")]
    NoAnswer,
}

/// How to reach the API server: from a kubeconfig or the cluster, or given on the command line.
#[derive(Debug, Clone, Default)]
pub struct ApiServer {
    /// `--apiserver`: `https://host:port` (or `http://127.0.0.1:port` for the tests' fake API
    /// server); `None` to infer (`KUBECONFIG`, `~/.kube/config`, then in-cluster).
    pub url: Option<String>,
    /// The bearer token's file, read again as it rotates (projected tokens do).
    pub token_file: Option<PathBuf>,
    /// The API server's CA (PEM), `None` for the system roots.
    pub ca_file: Option<PathBuf>,
}

impl ApiServer {
    /// The `kube` configuration, every request bounded by `timeout`.
    async fn config(&self, timeout: Duration) -> Result<kube::Config, ClusterError> {
        let mut config = match &self.url {
            None => kube::Config::infer()
                .await
                .map_err(|e| ClusterError::NoConfiguration(Box::new(e)))?,
            Some(url) => {
                let uri = url
                    .parse()
                    .map_err(|_| ClusterError::Url { url: url.clone() })?;
                let mut config = kube::Config::new(uri);
                config.auth_info.token_file = self
                    .token_file
                    .as_ref()
                    .map(|path| path.display().to_string());
                if let Some(ca) = &self.ca_file {
                    config.root_cert = Some(read_ca(ca)?);
                }
                config
            }
        };
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        Ok(config)
    }
}

/// The certificates of a PEM file, as DER.
fn read_ca(path: &PathBuf) -> Result<Vec<Vec<u8>>, ClusterError> {
    let certificate = |source| ClusterError::Certificate {
        path: path.clone(),
        source,
    };
    std::fs::metadata(path).map_err(|source| ClusterError::Read {
        path: path.clone(),
        source,
    })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect())
        .map_err(certificate)?;
    Ok(certs.into_iter().map(|c| c.to_vec()).collect())
}

/// An object read (as JSON), or its absence.
#[derive(Clone)]
pub(crate) enum Fetched {
    /// The object.
    Object(Arc<Value>),
    /// The API server said it does not exist.
    Missing,
}

/// The API server client with its cache.
pub struct Cluster {
    client: kube::Client,
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
    pub async fn new(
        api: &ApiServer,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<Self, ClusterError> {
        let config = api.config(timeout).await?;
        let client =
            kube::Client::try_from(config).map_err(|e| ClusterError::Client(Box::new(e)))?;
        Ok(Cluster {
            client,
            ttl,
            cache: Mutex::default(),
        })
    }

    /// A client of an address nothing answers on, for tests whose code must not reach the
    /// API server.
    #[cfg(test)]
    pub fn unreachable_for_tests() -> Self {
        let url = "http://127.0.0.1:9".parse().expect("a fixed URL");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("a client of a URL");
        Cluster {
            client,
            ttl: Duration::from_secs(10),
            cache: Mutex::default(),
        }
    }

    /// The API client, for requests that are not cached reads (TokenRequests).
    pub(crate) fn client(&self) -> kube::Client {
        self.client.clone()
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
                match self.get::<ServiceAccount>(namespace, account).await? {
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
            match self.get::<Secret>(namespace, &name).await? {
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

    /// The Namespace `name` as JSON (`None` when it does not exist), from the cache while it
    /// is fresh: what the broker reads to decide whether it serves a namespace at all.
    pub async fn namespace(&self, name: &str) -> Result<Option<Arc<Value>>, ClusterError> {
        let api = Api::<Namespace>::all(self.client.clone());
        match self.fetch(api, "", name).await? {
            Fetched::Object(object) => Ok(Some(object)),
            Fetched::Missing => Ok(None),
        }
    }

    /// The object `namespace/name` of kind `K` as JSON (what `kubelet-credentials` reads), from
    /// the cache while it is fresh.
    pub(crate) async fn get<K>(&self, namespace: &str, name: &str) -> Result<Fetched, ClusterError>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
        K::DynamicType: Default,
    {
        let api = Api::<K>::namespaced(self.client.clone(), namespace);
        self.fetch(api, namespace, name).await
    }

    /// `name` through `api` (of `namespace`, empty for a cluster-scoped kind) as JSON, cached.
    async fn fetch<K>(
        &self,
        api: Api<K>,
        namespace: &str,
        name: &str,
    ) -> Result<Fetched, ClusterError>
    where
        K: kube::Resource
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
        K::DynamicType: Default,
    {
        let kind = K::kind(&K::DynamicType::default()).into_owned();
        let key = format!("{kind}/{namespace}/{name}");
        if let Some(fetched) = self.cache.lock().ok().and_then(|c| c.get(&key, self.ttl)) {
            return Ok(fetched);
        }
        let object = || match namespace {
            "" => format!("{kind} {name}"),
            _ => format!("{kind} {namespace}/{name}"),
        };
        let read = api
            .get_opt(name)
            .await
            .map_err(|source| ClusterError::Api {
                object: object(),
                source: Box::new(source),
            })?;
        let (fetched, size) = match read {
            Some(found) => {
                let text = serde_json::to_vec(&found)
                    .map_err(|_| ClusterError::Unreadable { object: object() })?;
                let value = serde_json::from_slice::<Value>(&text)
                    .map_err(|_| ClusterError::Unreadable { object: object() })?;
                (Fetched::Object(Arc::new(value)), text.len())
            }
            None => (Fetched::Missing, 0),
        };
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(key.clone(), fetched.clone(), key.len() + size, self.ttl);
        }
        Ok(fetched)
    }
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
