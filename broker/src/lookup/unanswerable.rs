//! Why the broker answers a lookup without asking the registry: each case has its outcome word
//! (logs, metrics), its HTTP status and OCI error code, and a message that names the machine at
//! fault, the broker or the registry.

use std::time::Duration;

use broker_reference::{Refusal, NAMESPACE_NOT_ENABLED};

use crate::cluster::tenancy::NotServed;
use crate::cluster::ClusterError;
use crate::lookup::reply::Reply;

/// A lookup the broker could not make.
#[derive(Debug, thiserror::Error)]
pub enum Unanswerable {
    /// The path is not a brokered reference.
    #[error("not a lookup the broker can decode: {0}")]
    Undecodable(#[source] Refusal),
    /// The namespace is not one the broker serves: decided before anything is read for it.
    #[error("denied: {NAMESPACE_NOT_ENABLED}: namespace {namespace} {}", why.words())]
    NamespaceNotServed {
        /// The lookup's namespace.
        namespace: String,
        /// Why it is not served.
        why: NotServed,
    },
    /// The lookup's Namespace could not be read: whether it opted in is unknown.
    #[error("the lookup broker could not read namespace {namespace}: {error}")]
    NamespaceUnreadable {
        /// The lookup's namespace.
        namespace: String,
        /// What the API server did.
        #[source]
        error: ClusterError,
    },
    /// The destination is refused by the broker's network rules.
    #[error("the lookup broker does not ask {registry}: {reason}")]
    RefusedDestination {
        /// The registry asked for.
        registry: String,
        /// Which rule refused it.
        reason: String,
    },
    /// The registry let a recent lookup of this namespace time out and is not asked again yet
    /// for it.
    #[error("{registry} gave no definitive answer: {}", silent_reason(registry, *backoff))]
    Silent {
        /// The registry.
        registry: String,
        /// How long a silent registry is left alone.
        backoff: Duration,
    },
    /// The namespace has too many registries silent, and this one has not answered it: a
    /// tenant rotating made-up host names must not find each one new.
    #[error("{registry} not asked: too many silent registries for this namespace ({})", too_many_silent(*limit, *backoff))]
    SilentRegistries {
        /// The registry asked for.
        registry: String,
        /// How many silent registries a namespace may have.
        limit: usize,
        /// How long a silent registry counts.
        backoff: Duration,
    },
    /// The broker is at one of its limits.
    #[error("the lookup broker is {why} {registry}")]
    Overloaded {
        /// The registry asked for.
        registry: String,
        /// Which limit.
        why: Overload,
    },
    /// The pull secrets could not be read.
    #[error("the lookup broker could not read the pull secrets of namespace {namespace}: {error}")]
    SecretsUnavailable {
        /// The namespace of the lookup.
        namespace: String,
        /// What the API server did.
        #[source]
        error: ClusterError,
    },
}

/// Which of the broker's limits a lookup hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Overload {
    /// `--max-registries`, every followed registry busy.
    #[error("following too many registries to add")]
    Registries,
    /// `--max-per-registry` or `--max-concurrent`, until the lookup's deadline.
    #[error("at its limit of concurrent lookups to")]
    Lookups,
}

impl Unanswerable {
    /// The outcome word of logs and metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            Unanswerable::Undecodable(Refusal::Unsealed) => "unsealed",
            Unanswerable::Undecodable(Refusal::Expired | Refusal::ExpiresTooLate) => "expired",
            Unanswerable::Undecodable(_) => "invalid",
            Unanswerable::RefusedDestination { .. } => "refusedDestination",
            Unanswerable::Overloaded { .. } | Unanswerable::SilentRegistries { .. } => "overloaded",
            Unanswerable::NamespaceNotServed { .. } => "namespaceNotEnabled",
            Unanswerable::Silent { .. }
            | Unanswerable::SecretsUnavailable { .. }
            | Unanswerable::NamespaceUnreadable { .. } => "unreachable",
        }
    }

    /// The log line's `reason`: the cause without the message around it.
    pub fn reason(&self) -> Option<String> {
        match self {
            Unanswerable::Undecodable(refusal) => Some(refusal.to_string()),
            Unanswerable::RefusedDestination { reason, .. } => Some(reason.clone()),
            Unanswerable::Silent { registry, backoff } => Some(silent_reason(registry, *backoff)),
            Unanswerable::SecretsUnavailable { error, .. }
            | Unanswerable::NamespaceUnreadable { error, .. } => Some(error.to_string()),
            Unanswerable::NamespaceNotServed { why, .. } => Some(why.words()),
            Unanswerable::SilentRegistries { limit, backoff, .. } => {
                Some(too_many_silent(*limit, *backoff))
            }
            Unanswerable::Overloaded { .. } => None,
        }
    }

    /// The distribution API's answer.
    pub fn reply(&self) -> Reply {
        let (status, code) = match self {
            // not the policy's name, or no longer: like a wrong caller credential, nothing
            // about the image
            Unanswerable::Undecodable(
                Refusal::Unsealed | Refusal::Expired | Refusal::ExpiresTooLate,
            ) => (401, "UNAUTHORIZED"),
            Unanswerable::Undecodable(_) => (400, "NAME_INVALID"),
            Unanswerable::RefusedDestination { .. } => (400, "UNSUPPORTED"),
            // a DENIED the policy recognises by its words (NAMESPACE_NOT_ENABLED): a warning
            // saying the namespace has not opted in, never a verdict on the image
            Unanswerable::NamespaceNotServed { .. } => (403, "DENIED"),
            _ => (503, "UNAVAILABLE"),
        };
        Reply::error(status, code, &self.to_string())
    }
}

/// Why a silent registry is not asked: the log's reason and the answer's message share it.
fn silent_reason(registry: &str, backoff: Duration) -> String {
    format!(
        "{registry} let a lookup of this namespace time out in the last {} s; not asked again yet",
        backoff.as_secs()
    )
}

/// Why a namespace's lookup of a registry that has not answered it is not made.
fn too_many_silent(limit: usize, backoff: Duration) -> String {
    format!(
        "{limit} or more registries let its lookups time out in the last {} s",
        backoff.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_case_has_its_status_code_and_words() {
        let silent = Unanswerable::Silent {
            registry: "r.example".into(),
            backoff: Duration::from_secs(30),
        };
        assert_eq!(silent.outcome(), "unreachable");
        assert_eq!(silent.reply().status, 503);
        assert_eq!(
            silent.to_string(),
            "r.example gave no definitive answer: r.example let a lookup of this namespace time out in the last 30 s; not asked again yet"
        );
        let closed = Unanswerable::NamespaceNotServed {
            namespace: "team-c".into(),
            why: NotServed::NotOptedIn,
        };
        assert_eq!(closed.outcome(), "namespaceNotEnabled");
        let answer = closed.reply();
        assert_eq!(answer.status, 403);
        let body: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
        assert_eq!(body["errors"][0]["code"], "DENIED");
        assert_eq!(
            body["errors"][0]["message"],
            "denied: namespace not enabled for the lookup broker: namespace team-c has not opted in to the lookup broker (label resolvable-images.kubewarden.io/broker=enabled)"
        );
        let system = Unanswerable::NamespaceNotServed {
            namespace: "kube-system".into(),
            why: NotServed::Protected,
        };
        assert!(system
            .to_string()
            .ends_with("namespace kube-system is never served by the lookup broker"));
        let busy = Unanswerable::Overloaded {
            registry: "r.example".into(),
            why: Overload::Lookups,
        };
        assert_eq!(
            busy.to_string(),
            "the lookup broker is at its limit of concurrent lookups to r.example"
        );
        assert_eq!(busy.reason(), None);
        let rotating = Unanswerable::SilentRegistries {
            registry: "made-up.example".into(),
            limit: 4,
            backoff: Duration::from_secs(30),
        };
        assert_eq!(rotating.outcome(), "overloaded");
        assert_eq!(rotating.reply().status, 503);
        assert_eq!(
            rotating.to_string(),
            "made-up.example not asked: too many silent registries for this namespace (4 or more registries let its lookups time out in the last 30 s)"
        );
        let refused = Unanswerable::RefusedDestination {
            registry: "10.0.0.1".into(),
            reason: "a private network".into(),
        };
        assert_eq!(refused.reply().status, 400);
        let forged = Unanswerable::Undecodable(Refusal::Unsealed);
        assert_eq!(forged.outcome(), "unsealed");
        assert_eq!(forged.reply().status, 401);
        assert!(String::from_utf8_lossy(&forged.reply().body).contains("not sealed"));
        // an expired seal, or one that claims too long a life: the same 401, its own word
        for refusal in [Refusal::Expired, Refusal::ExpiresTooLate] {
            let stale = Unanswerable::Undecodable(refusal);
            assert_eq!(stale.outcome(), "expired");
            assert_eq!(stale.reply().status, 401);
            assert!(String::from_utf8_lossy(&stale.reply().body).contains("UNAUTHORIZED"));
        }
        assert!(String::from_utf8_lossy(&refused.reply().body).contains("UNSUPPORTED"));
    }
}
