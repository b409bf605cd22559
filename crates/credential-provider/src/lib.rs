//! The kubelet's image credential provider plugins
//! (<https://kubernetes.io/docs/tasks/administer-cluster/kubelet-credential-provider/>), run by
//! the lookup broker as the kubelet runs them, so that a lookup is made with the credentials the
//! node's plugins give it (ECR, GCR/Artifact Registry, ACR, or any other):
//!
//! - `config`: `CredentialProviderConfig`, the `--image-credential-provider-config` file;
//! - `duration`: Go's duration format, which its durations use;
//! - `protocol`: the request a plugin reads on stdin and the response it writes;
//! - `exec`: one run of a plugin;
//! - `plugins`: which plugins an image asks, and their caches;
//! - `runs`: when a plugin may run (one run per cache key, a namespace's share, silences).
//!
//! Without the default feature `plugins`, only `config` and `duration` are built: the format
//! and its checks, which the policy's settings read too (one declaration of the format).

pub mod config;
mod duration;
#[cfg(feature = "plugins")]
mod exec;
#[cfg(feature = "plugins")]
pub mod plugins;
#[cfg(feature = "plugins")]
pub mod protocol;
#[cfg(feature = "plugins")]
mod runs;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(feature = "plugins")]
pub use config::{load, ConfigError};
pub use config::{
    ConfigProblem, CredentialProviderConfig, Provider, TokenAttributes, TokenCacheType,
};
pub use duration::parse_go_duration;
#[cfg(feature = "plugins")]
pub use exec::RunError;
#[cfg(feature = "plugins")]
pub use plugins::{Account, Ask, Auth, MissingAnnotation, Plugin, PluginError, Plugins};
#[cfg(feature = "plugins")]
pub use protocol::{AuthEntry, ResponseError};
#[cfg(feature = "plugins")]
pub use runs::{default_share, RunLimits};
