//! The kubelet's image credential provider plugins
//! (<https://kubernetes.io/docs/tasks/administer-cluster/kubelet-credential-provider/>), run by
//! the lookup broker as the kubelet runs them, so that a lookup is made with the credentials the
//! node's plugins give it (ECR, GCR/Artifact Registry, ACR, or any other):
//!
//! - `config`: `CredentialProviderConfig`, the `--image-credential-provider-config` file;
//! - `duration`: Go's duration format, which its durations use;
//! - `protocol`: the request a plugin reads on stdin and the response it writes;
//! - `exec`: one run of a plugin;
//! - `plugins`: which plugins an image asks, and their caches.

pub mod config;
mod duration;
mod exec;
pub mod plugins;
pub mod protocol;

pub use config::{load, ConfigError, Provider, TokenAttributes, TokenCacheType};
pub use duration::parse_go_duration;
pub use plugins::{Account, Auth, Plugin, Plugins};
pub use protocol::AuthEntry;
