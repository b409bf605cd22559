//! The broker's command line (every option also an environment variable), and what each
//! option makes: the API server, the pool, the limits, the destinations, the broker.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use credential_provider::RunLimits;
use registry_client::pool::{Pool, PoolOptions};
use registry_client::sources::Sources;

use crate::cluster::providers;
use crate::cluster::tenancy::Tenancy;
use crate::cluster::{ApiServer, Cluster};
use crate::http::server;
use crate::http::tls::ReloadingCertificate;
use crate::lookup::gates;
use crate::lookup::service::{Broker, Limits, Parts};
use crate::registries::destinations::{AllowedRegistry, Destinations, Network};
use crate::registries::{destinations, tag_lists};
use crate::telemetry::metrics::Metrics;
use crate::trust::error::StartupError;
use crate::trust::{caller, keys};

/// The broker's command line; every option also reads an environment variable.
#[derive(Parser, Debug)]
#[command(version, about)]
pub struct Args {
    /// Where the distribution API listens.
    #[arg(long, env = "BROKER_LISTEN", default_value = "0.0.0.0:8443")]
    pub listen: SocketAddr,
    /// Where `/metrics`, `/readyz` and `/healthz` listen (plain HTTP).
    #[arg(long, env = "BROKER_METRICS_LISTEN", default_value = "0.0.0.0:9090")]
    pub metrics_listen: SocketAddr,
    /// The TLS certificate chain (PEM), read again at a handshake when the last reading is
    /// over 10 s old (a renewed certificate needs no restart). Without it and --tls-key,
    /// plain HTTP, on loopback only.
    #[arg(long, env = "BROKER_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, env = "BROKER_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A directory with `username` and `password`: the caller credential the policy server
    /// holds for the broker's host (a mounted `kubernetes.io/basic-auth` Secret).
    #[arg(long, env = "BROKER_CALLER_DIR")]
    pub caller_dir: PathBuf,
    /// A directory of sealing keys (a mounted Secret, each file one key of at least 32 bytes):
    /// the broker answers only names sealed with one of them, the policy seals with the one its
    /// `lookupBroker.keySecret` names. Read again every 10 s, for rotation.
    #[arg(long, env = "BROKER_KEY_DIR")]
    pub key_dir: PathBuf,
    /// The API server's URL; without it, a kubeconfig (`KUBECONFIG`, `~/.kube/config`),
    /// else the in-cluster configuration.
    #[arg(long, env = "BROKER_APISERVER")]
    pub apiserver: Option<String>,
    /// The API server's bearer token file (with --apiserver).
    #[arg(long, env = "BROKER_APISERVER_TOKEN_FILE")]
    pub apiserver_token_file: Option<PathBuf>,
    /// The API server's CA (PEM; with --apiserver).
    #[arg(long, env = "BROKER_APISERVER_CA_FILE")]
    pub apiserver_ca_file: Option<PathBuf>,
    /// A `sources.yaml` for registries (insecure sources, extra CAs), as the policy server's.
    #[arg(long, env = "BROKER_SOURCES")]
    pub sources: Option<PathBuf>,
    /// The broker's own host names (`host[:port]`), never looked up; repeat for each. A seal
    /// names the host the policy's `lookupBroker.host` gives, which must be one of them.
    #[arg(
        long = "own-host",
        env = "BROKER_OWN_HOSTS",
        value_delimiter = ',',
        required = true
    )]
    pub own_hosts: Vec<String>,
    /// Networks (CIDR) never connected to, beyond the defaults (loopback, link-local,
    /// unspecified, private, CGNAT, unique-local, NAT64, metadata...): the cluster's own pod and
    /// service ranges when they are public addresses.
    #[arg(
        long = "deny-destination",
        env = "BROKER_DENY_DESTINATIONS",
        value_delimiter = ','
    )]
    pub deny_destinations: Vec<String>,
    /// Networks (CIDR) allowed although denied (tests allow 127.0.0.0/8 explicitly).
    #[arg(
        long = "allow-destination",
        env = "BROKER_ALLOW_DESTINATIONS",
        value_delimiter = ','
    )]
    pub allow_destinations: Vec<String>,
    /// Registries (`host[:port]`) asked whatever their names resolve to, a private address
    /// included (an internal mirror): with a port, only that port of the name.
    #[arg(
        long = "allow-registry",
        env = "BROKER_ALLOW_REGISTRIES",
        value_delimiter = ','
    )]
    pub allow_registries: Vec<String>,
    /// The broker's own namespace, never served (from the downward API; without it, the
    /// ServiceAccount's namespace file when in a cluster).
    #[arg(long, env = "BROKER_NAMESPACE")]
    pub own_namespace: Option<String>,
    /// Namespaces never served whatever their labels, beyond kube-system, kube-public,
    /// kube-node-lease and the broker's own.
    #[arg(
        long = "protected-namespace",
        env = "BROKER_PROTECTED_NAMESPACES",
        value_delimiter = ',',
        default_value = "kubewarden"
    )]
    pub protected_namespaces: Vec<String>,
    /// One registry request, per credential (ms).
    #[arg(long, env = "BROKER_ATTEMPT_TIMEOUT_MS", default_value_t = 1500)]
    pub attempt_timeout_ms: u64,
    /// A whole lookup, every credential included (ms): keep it under the policy's budget.
    #[arg(long, env = "BROKER_LOOKUP_TIMEOUT_MS", default_value_t = 2500)]
    pub lookup_timeout_ms: u64,
    /// Opening a connection (ms).
    #[arg(long, env = "BROKER_CONNECT_TIMEOUT_MS", default_value_t = 1000)]
    pub connect_timeout_ms: u64,
    /// Lookups in flight in the whole broker.
    #[arg(long, env = "BROKER_MAX_CONCURRENT", default_value_t = 64)]
    pub max_concurrent: usize,
    /// Lookups in flight to one registry.
    #[arg(long, env = "BROKER_MAX_PER_REGISTRY", default_value_t = 8)]
    pub max_per_registry: usize,
    /// Lookups in flight to one registry for one namespace (default: half of
    /// --max-per-registry, rounded up), so that one namespace cannot take a registry's slots.
    #[arg(long, env = "BROKER_MAX_PER_NAMESPACE")]
    pub max_per_namespace: Option<usize>,
    /// Lookups in flight in the whole broker for one namespace, whatever registries it names
    /// (default: half of --max-concurrent, rounded up).
    #[arg(long, env = "BROKER_MAX_CONCURRENT_PER_NAMESPACE")]
    pub max_concurrent_per_namespace: Option<usize>,
    /// Registries silent for one namespace at once (each within --silent-backoff-seconds of a
    /// time-out) before its lookups of registries that have not answered it are answered 503
    /// at once: rotating made-up host names cannot evade the back-off.
    #[arg(long, env = "BROKER_MAX_SILENT_REGISTRIES", default_value_t = 4)]
    pub max_silent_registries: usize,
    /// Registries whose state is kept at once.
    #[arg(long, env = "BROKER_MAX_REGISTRIES", default_value_t = 1024)]
    pub max_registries: usize,
    /// After a registry let a namespace's lookup time out, how long that namespace's lookups
    /// of it fail at once (s); so too a plugin's lookups of an image, after a run for that
    /// namespace failed or outlived its lookup.
    #[arg(long, env = "BROKER_SILENT_BACKOFF_SECONDS", default_value_t = 30)]
    pub silent_backoff_seconds: u64,
    /// How long Secrets and ServiceAccounts are cached (s).
    #[arg(long, env = "BROKER_CACHE_SECONDS", default_value_t = 10)]
    pub cache_seconds: u64,
    /// How long a repository's tag listing, made for the suggestions of a 404, is kept per
    /// namespace and credential (s).
    #[arg(long, env = "BROKER_TAG_LIST_SECONDS", default_value_t = 60)]
    pub tag_list_seconds: u64,
    /// Answer a 404 without suggesting the repository's nearest tags (no tag listing).
    #[arg(long, env = "BROKER_NO_TAG_SUGGESTIONS")]
    pub no_tag_suggestions: bool,
    /// How often the keys, caller credentials and TLS certificate are read again (s).
    #[arg(long, env = "BROKER_RELOAD_SECONDS", default_value_t = 10)]
    pub reload_seconds: u64,
    /// How long reading the keys, caller credentials or certificate again may fail (the old
    /// ones kept) before `/readyz` answers 503, until a reading succeeds (s).
    #[arg(long, env = "BROKER_RELOAD_FAILURE_SECONDS", default_value_t = 60)]
    pub reload_failure_seconds: u64,
    /// Connections the distribution API serves at once; past it, new ones wait in the
    /// kernel's backlog until one closes (the metrics port has its own 64).
    #[arg(long, env = "BROKER_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: u32,
    /// How long a client has for the TLS handshake and for each request's headers, on both
    /// ports (ms): a client that trickles them holds a connection no longer.
    #[arg(long, env = "BROKER_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// On SIGTERM or SIGINT, how long the broker keeps accepting and answering lookups with
    /// `/readyz` already answering 503 (ms): the time for the Service's endpoints to drop the
    /// pod, so that a policy server routed to it still gets an answer. Then the drain.
    #[arg(long, env = "BROKER_DRAIN_GRACE_MS", default_value_t = 3000)]
    pub drain_grace_ms: u64,
    /// After the grace period, how long the lookups in flight may take to finish before the
    /// broker exits (s); keep --drain-grace-ms and it under the pod's
    /// `terminationGracePeriodSeconds` (30 s by default), and it over --lookup-timeout-ms.
    #[arg(long, env = "BROKER_DRAIN_SECONDS", default_value_t = 5)]
    pub drain_seconds: u64,
    /// The node's CredentialProviderConfig (the kubelet's flag of the same name): lookups also
    /// try the credentials of the plugins matching the image, after the pull secrets'. A file,
    /// or a directory whose .json/.yaml/.yml files are merged in lexical order (kubelet 1.34).
    #[arg(
        long,
        env = "BROKER_IMAGE_CREDENTIAL_PROVIDER_CONFIG",
        requires = "image_credential_provider_bin_dir"
    )]
    pub image_credential_provider_config: Option<PathBuf>,
    /// Where the plugins of --image-credential-provider-config are.
    #[arg(
        long,
        env = "BROKER_IMAGE_CREDENTIAL_PROVIDER_BIN_DIR",
        requires = "image_credential_provider_config"
    )]
    pub image_credential_provider_bin_dir: Option<PathBuf>,
    /// `NAME=SELECTOR`, repeated (`;` between entries in the variable): the namespaces whose
    /// labels SELECTOR matches are the only ones provider NAME serves; a list of namespaces is
    /// `kubernetes.io/metadata.name in (a,b)`, an empty SELECTOR is every namespace. A provider
    /// not named serves every namespace when it has `tokenAttributes` (the pod's own token),
    /// none otherwise (the broker's cloud identity must not serve every team).
    #[arg(
        long = "provider-namespaces",
        env = "BROKER_PROVIDER_NAMESPACES",
        value_delimiter = ';',
        requires = "image_credential_provider_config"
    )]
    pub provider_namespaces: Vec<String>,
    /// Credential provider plugin runs in flight at once.
    #[arg(long, env = "BROKER_MAX_PLUGIN_RUNS", default_value_t = 8)]
    pub max_plugin_runs: usize,
    /// Plugin runs in flight for one namespace (default: half of --max-plugin-runs, rounded
    /// up), so that one namespace cannot take every run.
    #[arg(long, env = "BROKER_MAX_PLUGIN_RUNS_PER_NAMESPACE")]
    pub max_plugin_runs_per_namespace: Option<usize>,
}

fn networks(list: &[String]) -> Result<Vec<Network>, StartupError> {
    list.iter()
        .map(|n| Network::parse(n).map_err(StartupError::from))
        .collect()
}

impl Args {
    /// Where the API server is and how to authenticate to it (inferred without --apiserver).
    pub fn api_server(&self) -> ApiServer {
        ApiServer {
            url: self.apiserver.clone(),
            token_file: self.apiserver_token_file.clone(),
            ca_file: self.apiserver_ca_file.clone(),
        }
    }

    /// The registry client, its destinations checked at connect time and per URL.
    pub fn pool(&self, destinations: &Arc<Destinations>) -> Result<Pool, StartupError> {
        let sources = match &self.sources {
            Some(path) => Sources::from_path(path)?,
            None => Sources::default(),
        };
        let guard = destinations.clone();
        Ok(Pool::with_options(
            sources,
            PoolOptions {
                resolver: Some(destinations.resolver()),
                connect_timeout: Some(Duration::from_millis(self.connect_timeout_ms)),
                max_registries: Some(self.max_registries),
                allow_url: Some(Arc::new(move |url| guard.allows_url(url))),
                untrusted_registries: true,
            },
        ))
    }

    /// The TLS certificate of the distribution API, its failed reloads counted in `metrics`;
    /// `None` for plain HTTP, allowed only on loopback.
    pub fn certificate(
        &self,
        metrics: &Arc<Metrics>,
    ) -> Result<Option<Arc<ReloadingCertificate>>, StartupError> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(Arc::new(
                ReloadingCertificate::new(cert, key)?.reloading(self.reload(), metrics.clone()),
            ))),
            _ if server::plain_http_allowed(&self.listen) => Ok(None),
            _ => Err(StartupError::PlainHttp),
        }
    }

    /// How often the keys, caller credentials and certificate are read again.
    pub fn reload(&self) -> Duration {
        Duration::from_secs(self.reload_seconds.max(1))
    }

    pub fn limits(&self) -> Limits {
        Limits {
            attempt_timeout: Duration::from_millis(self.attempt_timeout_ms),
            lookup_timeout: Duration::from_millis(self.lookup_timeout_ms),
            max_concurrent: self.max_concurrent.max(1),
            max_per_registry: self.max_per_registry.max(1),
            max_per_namespace: self
                .max_per_namespace
                .unwrap_or_else(|| gates::default_share(self.max_per_registry)),
            max_concurrent_per_namespace: self
                .max_concurrent_per_namespace
                .unwrap_or_else(|| gates::default_share(self.max_concurrent)),
            max_silent_per_namespace: self.max_silent_registries.max(1),
            max_registries: self.max_registries.max(1),
            silent_backoff: Duration::from_secs(self.silent_backoff_seconds),
        }
    }

    /// The limits of the credential provider plugins' runs; a key they could not answer is
    /// silenced as a silent registry is.
    pub fn plugin_limits(&self) -> RunLimits {
        let total = self.max_plugin_runs.max(1);
        RunLimits {
            total,
            per_namespace: self
                .max_plugin_runs_per_namespace
                .unwrap_or_else(|| credential_provider::default_share(total)),
            silence: Duration::from_secs(self.silent_backoff_seconds),
        }
    }

    /// The broker's own namespace: given, else the ServiceAccount's (in a cluster).
    pub fn own_namespace(&self) -> Option<String> {
        const IN_CLUSTER: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
        self.own_namespace
            .clone()
            .or_else(|| std::fs::read_to_string(IN_CLUSTER).ok())
            .map(|ns| ns.trim().to_owned())
    }

    /// The destination rules.
    pub fn destinations(&self) -> Result<Destinations, StartupError> {
        let mut denied = destinations::default_denied();
        denied.extend(networks(&self.deny_destinations)?);
        let allowed_registries = self
            .allow_registries
            .iter()
            .map(|name| AllowedRegistry::parse(name).map_err(StartupError::from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Destinations::new(
            denied,
            networks(&self.allow_destinations)?,
            self.own_hosts.clone(),
        )
        .allowing_registries(allowed_registries))
    }

    /// The broker these options describe.
    pub async fn broker(&self, metrics: Arc<Metrics>) -> Result<Broker, StartupError> {
        let reload = self.reload();
        metrics.set_reload_grace(Duration::from_secs(self.reload_failure_seconds));
        let caller = caller::Caller::from_dir(&self.caller_dir)?.reloading(reload, metrics.clone());
        let keys = keys::Keys::from_dir(&self.key_dir)?.reloading(reload, metrics.clone());
        let limits = self.limits();
        let cluster = Cluster::new(
            &self.api_server(),
            Duration::from_secs(self.cache_seconds),
            limits.attempt_timeout,
        )
        .await?;
        let destinations = Arc::new(self.destinations()?);
        let pool = self.pool(&destinations)?;
        let tenancy = Tenancy::new(self.own_namespace(), self.protected_namespaces.clone());
        let parts = Parts {
            caller,
            keys,
            cluster,
            pool,
            destinations,
            metrics,
            tenancy,
        };
        let mut broker = Broker::new(parts, limits);
        if !self.no_tag_suggestions {
            let ttl = Duration::from_secs(self.tag_list_seconds);
            broker = broker.with_tag_suggestions(tag_lists::TagLists::new(ttl));
        }
        Ok(
            match (
                &self.image_credential_provider_config,
                &self.image_credential_provider_bin_dir,
            ) {
                (Some(config), Some(bin_dir)) => broker.with_providers(
                    providers::ProviderRunner::load(config, bin_dir)?
                        .serving(&self.provider_namespaces, self.plugin_limits())?,
                ),
                _ => broker,
            },
        )
    }
}
