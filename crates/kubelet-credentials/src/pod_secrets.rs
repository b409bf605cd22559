//! Which pull secrets the kubelet uses for a pod: the pod's own `imagePullSecrets` when it
//! names any, else those of its ServiceAccount (`default` when it names none). An admitted Pod
//! is the exception: the ServiceAccount admission plugin has already copied the account's
//! secrets into a Pod that named none, so what the Pod says is final, even when it is empty.
//! The policy (reading Secrets itself) and the lookup broker (reading them for a brokered
//! lookup) both follow this one rule.

use std::collections::HashSet;
use std::fmt;

use serde_json::Value;

/// The ServiceAccount the kubelet's pods run as when their spec names none.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// Where a pod's pull secret names come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// The pod spec's own `imagePullSecrets`.
    PodSpec,
    /// The `imagePullSecrets` of this ServiceAccount, in the pod's namespace.
    ServiceAccount(String),
}

impl SecretSource {
    /// The source for a pod spec that names `pod_names` and runs as `service_account`;
    /// `admitted_pod` is true for a Pod (not a template), which the admission plugin has
    /// already given its ServiceAccount's secrets.
    pub fn of(admitted_pod: bool, pod_names: &[String], service_account: Option<&str>) -> Self {
        if admitted_pod || !pod_names.is_empty() {
            SecretSource::PodSpec
        } else {
            SecretSource::ServiceAccount(
                service_account
                    .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
                    .to_owned(),
            )
        }
    }
}

/// How messages name the source: "the pod spec", "ServiceAccount \"builder\"".
impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::PodSpec => f.write_str("the pod spec"),
            SecretSource::ServiceAccount(name) => write!(f, "ServiceAccount {name:?}"),
        }
    }
}

/// The names the kubelet reads, in order: each once, empty names skipped (they are valid API
/// objects that name no Secret).
pub fn distinct_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .filter(|name| !name.is_empty() && seen.insert(*name))
        .collect()
}

/// The `imagePullSecrets[].name` of a ServiceAccount object, in order, empty ones skipped.
pub fn service_account_secret_names(service_account: &Value) -> Vec<String> {
    service_account["imagePullSecrets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|reference| reference["name"].as_str())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::service_account;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_pod_spec_naming_secrets_uses_them() {
        assert_eq!(
            SecretSource::of(false, &names(&["a"]), Some("builder")),
            SecretSource::PodSpec
        );
    }

    #[test]
    fn a_template_naming_none_uses_its_service_account_or_default() {
        assert_eq!(
            SecretSource::of(false, &[], Some("builder")),
            SecretSource::ServiceAccount("builder".into())
        );
        assert_eq!(
            SecretSource::of(false, &[], None),
            SecretSource::ServiceAccount("default".into())
        );
    }

    #[test]
    fn an_admitted_pod_naming_none_has_none() {
        assert_eq!(
            SecretSource::of(true, &[], Some("builder")),
            SecretSource::PodSpec
        );
    }

    #[test]
    fn names_are_read_once_in_order_without_empty_ones() {
        assert_eq!(distinct_names(["b", "", "a", "b"]), vec!["b", "a"]);
    }

    #[test]
    fn a_service_account_lists_its_secret_names() {
        let account = service_account("default", &["x", "", "y"]);
        assert_eq!(service_account_secret_names(&account), names(&["x", "y"]));
        assert!(service_account_secret_names(&serde_json::json!({})).is_empty());
    }
}
