//! Which namespaces the broker serves. A sealed name says which namespace's pull secrets to
//! spend, and whoever can reach the policy server can have the policy seal any namespace (an
//! admission request is only as trusted as the path it came by): so a namespace is served only
//! when its own Namespace object opted in with [`ENABLED_LABEL`]`=`[`ENABLED_VALUE`], which
//! only those allowed to label namespaces can set; and the cluster's system namespaces, the
//! broker's own and the `--protected-namespace` list are never served, whatever their labels.
//! The decision is made before any Secret or ServiceAccount is read and before any registry is
//! asked, so the RBAC that goes with it is a cluster-wide `get` on namespaces and a per-namespace
//! RoleBinding for Secrets and ServiceAccounts.
//!
//! An anonymous lookup (no pull secret named, no plugin covering the image) spends nothing of
//! its namespace: it is served for every namespace that is not protected, opted in or not, so
//! that with every lookup sent through the broker (`use: all`) a namespace that did not opt in
//! still has its typos rejected; only the protected ones stay refused by name.

use serde_json::Value;

/// The label a namespace opts in with.
pub const ENABLED_LABEL: &str = "resolvable-images.kubewarden.io/broker";
/// Its value.
pub const ENABLED_VALUE: &str = "enabled";
/// Namespaces never served, whatever their labels: the cluster's own.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// Why a namespace is not served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotServed {
    /// A system namespace, the broker's own, or one of `--protected-namespace`.
    Protected,
    /// No opt-in label (or the namespace does not exist).
    NotOptedIn,
}

impl NotServed {
    /// The end of the caller's message, after the namespace's name.
    pub fn words(self) -> String {
        match self {
            NotServed::Protected => "is never served by the lookup broker".into(),
            NotServed::NotOptedIn => {
                format!(
                    "has not opted in to the lookup broker (label {ENABLED_LABEL}={ENABLED_VALUE})"
                )
            }
        }
    }
}

/// The namespaces never served beyond the system ones.
#[derive(Debug, Clone, Default)]
pub struct Tenancy {
    protected: Vec<String>,
}

impl Tenancy {
    /// The broker's own namespace (when known) and the `--protected-namespace` list.
    pub fn new(own: Option<String>, protected: Vec<String>) -> Self {
        let mut protected: Vec<String> = protected
            .into_iter()
            .chain(own)
            .map(|ns| ns.trim().to_owned())
            .filter(|ns| !ns.is_empty())
            .collect();
        protected.sort();
        protected.dedup();
        Tenancy { protected }
    }

    /// Whether `namespace` is refused by name alone (nothing read).
    pub fn protected(&self, namespace: &str) -> bool {
        SYSTEM_NAMESPACES.contains(&namespace) || self.protected.iter().any(|p| p == namespace)
    }
}

/// What a lookup needs before it is made, decided by name alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Refused without a read.
    Refused(NotServed),
    /// Served without a read: anonymous, and the namespace is not protected.
    Served,
    /// Served only if the Namespace object opted in ([`opted_in`]).
    IfOptedIn,
}

impl Tenancy {
    /// Whether a lookup of `namespace` is served, refused, or waits for its Namespace's
    /// label; `anonymous` when it spends no credential of the namespace.
    pub fn admission(&self, namespace: &str, anonymous: bool) -> Admission {
        if self.protected(namespace) {
            Admission::Refused(NotServed::Protected)
        } else if anonymous {
            Admission::Served
        } else {
            Admission::IfOptedIn
        }
    }
}

/// Whether a Namespace object (as the API server returns it) opted in.
pub fn opted_in(namespace: &Value) -> bool {
    namespace
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(ENABLED_LABEL))
        .and_then(Value::as_str)
        == Some(ENABLED_VALUE)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Protected by `Tenancy::new(Some("broker-ns"), ["kubewarden"])`.
    const PROTECTED: [&str; 5] = [
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "kubewarden",
        "broker-ns",
    ];

    #[test]
    fn system_own_and_listed_namespaces_are_protected_by_name() {
        let t = Tenancy::new(
            Some("broker-ns".into()),
            vec!["kubewarden".into(), " ".into()],
        );
        for ns in PROTECTED {
            assert!(t.protected(ns), "{ns}");
        }
        for ns in ["team-a", "default", "kube-systems", "Kube-system", ""] {
            assert!(!t.protected(ns), "{ns}");
        }
    }

    #[test]
    fn only_the_exact_label_value_opts_in() {
        let with = |labels: Value| json!({"metadata": {"name": "team-a", "labels": labels}});
        assert!(opted_in(&with(json!({ENABLED_LABEL: "enabled"}))));
        for labels in [
            json!({ENABLED_LABEL: "Enabled"}),
            json!({ENABLED_LABEL: "true"}),
            json!({ENABLED_LABEL: ""}),
            json!({"resolvable-images.kubewarden.io/other": "enabled"}),
            json!({}),
            json!(null),
        ] {
            assert!(!opted_in(&with(labels.clone())), "{labels}");
        }
        assert!(!opted_in(&json!({"metadata": {"name": "team-a"}})));
    }

    #[test]
    fn anonymous_lookups_need_no_opt_in_but_protected_namespaces_stay_refused() {
        let t = Tenancy::new(Some("broker-ns".into()), vec!["kubewarden".into()]);
        assert_eq!(t.admission("team-a", true), Admission::Served);
        assert_eq!(t.admission("team-a", false), Admission::IfOptedIn);
        for ns in PROTECTED {
            for anonymous in [true, false] {
                assert_eq!(
                    t.admission(ns, anonymous),
                    Admission::Refused(NotServed::Protected),
                    "{ns} {anonymous}"
                );
            }
        }
    }

    /// The policy's warning is the refusal's words up to the operator's hint, after
    /// "not checked: namespace NAME": docs/broker.md's table must give each.
    #[test]
    fn each_refusal_has_the_wording_docs_broker_md_gives() {
        let docs =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/broker.md"))
                .expect("docs/broker.md");
        for why in [NotServed::Protected, NotServed::NotOptedIn] {
            let words = why.words();
            let warned = words.split(" (").next().unwrap_or(&words);
            let documented = format!("`not checked: namespace NAMESPACE {warned}`");
            assert!(docs.contains(&documented), "{documented}");
        }
    }

    #[test]
    fn the_refusal_says_why_plainly() {
        assert_eq!(
            NotServed::NotOptedIn.words(),
            "has not opted in to the lookup broker (label resolvable-images.kubewarden.io/broker=enabled)"
        );
        assert!(NotServed::Protected.words().contains("never served"));
    }
}
