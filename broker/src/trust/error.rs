//! Why the broker cannot start. Each error names the file, option or address at fault, never
//! the content of a credential file.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::cluster::ClusterError;
use crate::registries::destinations::{InvalidNetwork, InvalidRegistryName};

/// A configuration the broker cannot serve with.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// A configuration file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The caller credential's directory holds an empty username or password.
    #[error("{}: empty username or password", dir.display())]
    EmptyCaller {
        /// The directory.
        dir: PathBuf,
    },
    /// A caller password shorter than the minimum.
    #[error("{}: a caller password must be at least {min} bytes", path.display())]
    ShortPassword {
        /// The file.
        path: PathBuf,
        /// The minimum.
        min: usize,
    },
    /// A file of `--key-dir` is not a sealing key.
    #[error("{}: {refusal}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        refusal: broker_reference::Refusal,
    },
    /// `--key-dir` holds no key.
    #[error("{}: no sealing key", dir.display())]
    NoKey {
        /// The directory.
        dir: PathBuf,
    },
    /// A `--deny-destination` or `--allow-destination` that is not a network.
    #[error(transparent)]
    Network(#[from] InvalidNetwork),
    /// An `--allow-registry` that is not `host[:port]`.
    #[error(transparent)]
    RegistryName(#[from] InvalidRegistryName),
    /// The API server's configuration.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// `--image-credential-provider-config` cannot be used.
    #[error(transparent)]
    CredentialProviders(#[from] credential_provider::ConfigError),
    /// `--provider-namespaces` cannot be used.
    #[error(transparent)]
    ProviderNamespaces(#[from] crate::cluster::providers::ServedError),
    /// `--sources` does not parse.
    #[error(transparent)]
    Sources(#[from] registry_client::ConfigError),
    /// The TLS certificate or key is not PEM.
    #[error("{}: {source}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The certificate and key do not make a TLS configuration.
    #[error("TLS configuration: {0}")]
    Tls(#[source] rustls::Error),
    /// Plain HTTP on an address other than loopback.
    #[error("plain HTTP is served on loopback only: give --tls-cert and --tls-key")]
    PlainHttp,
    /// An address to listen on is taken or not ours.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// SIGTERM or SIGINT cannot be listened for: the broker could not drain on a rollout.
    #[error("cannot listen for SIGTERM and SIGINT: {0}")]
    Signal(#[source] std::io::Error),
}
