//! Gates that decide whether a guest may use a capability at all.
//!
//! Two gates exist upstream and both are reproduced here: the host-capability
//! allow-list (PolicyServer `namespacedPoliciesCapabilities`, Kubewarden 1.35+)
//! and the policy's `contextAwareResources` for Kubernetes reads.

use std::collections::BTreeSet;

/// Allow-list of `"{namespace}/{operation}"` capability paths.
#[derive(Debug, Clone)]
pub struct HostCapabilitiesAllowList {
    patterns: Vec<String>,
}

impl HostCapabilitiesAllowList {
    /// Parse a comma-separated list such as `oci/*,kubernetes/get_resource`.
    /// Blank entries are ignored, so an empty string denies everything.
    pub fn parse(spec: &str) -> Self {
        let patterns = spec
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        Self { patterns }
    }

    /// Does any pattern grant `capability` (e.g. `oci/v1/manifest_digest`)?
    /// `*` grants everything, `prefix/*` grants everything below `prefix/`,
    /// anything else must match exactly.
    pub fn allows(&self, capability: &str) -> bool {
        self.patterns.iter().any(|p| {
            if p == "*" {
                true
            } else if let Some(prefix) = p.strip_suffix('*') {
                prefix.ends_with('/') && capability.starts_with(prefix)
            } else {
                p == capability
            }
        })
    }
}

impl std::fmt::Display for HostCapabilitiesAllowList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.patterns.join(","))
    }
}

/// Which Kubernetes resources the policy may read.
#[derive(Debug, Clone)]
pub enum KubernetesAccess {
    /// `--allow-context-aware` not given: every read is denied, as with kwctl.
    Denied,
    /// Only these `(apiVersion, kind)` pairs, from the metadata's `contextAwareResources`.
    Resources(BTreeSet<(String, String)>),
    /// No metadata was available: nothing restricts the reads.
    All,
}

impl KubernetesAccess {
    /// May the guest read resources of this `apiVersion`/`kind`?
    pub fn allows(&self, api_version: &str, kind: &str) -> bool {
        match self {
            KubernetesAccess::Denied => false,
            KubernetesAccess::All => true,
            KubernetesAccess::Resources(set) => {
                set.contains(&(api_version.to_owned(), kind.to_owned()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_allows_everything() {
        let l = HostCapabilitiesAllowList::parse("*");
        assert!(l.allows("oci/v1/manifest_digest"));
        assert!(l.allows("kubernetes/get_resource"));
    }

    #[test]
    fn namespace_wildcard() {
        let l = HostCapabilitiesAllowList::parse("oci/*");
        assert!(l.allows("oci/v1/manifest_digest"));
        assert!(l.allows("oci/v1/oci_manifest"));
        assert!(!l.allows("kubernetes/get_resource"));
        assert!(!l.allows("ocix/v1/foo"));
    }

    #[test]
    fn versioned_wildcard_and_exact() {
        let l = HostCapabilitiesAllowList::parse(" oci/v1/* , kubernetes/get_resource");
        assert!(l.allows("oci/v1/manifest_digest"));
        assert!(!l.allows("oci/v2/verify"));
        assert!(l.allows("kubernetes/get_resource"));
        assert!(!l.allows("kubernetes/list_resources_all"));
    }

    #[test]
    fn exact_only() {
        let l = HostCapabilitiesAllowList::parse("oci/v1/manifest_digest");
        assert!(l.allows("oci/v1/manifest_digest"));
        assert!(!l.allows("oci/v1/oci_manifest"));
    }

    #[test]
    fn empty_denies_everything() {
        let l = HostCapabilitiesAllowList::parse("");
        assert!(!l.allows("oci/v1/manifest_digest"));
    }

    #[test]
    fn kubernetes_access() {
        let mut set = BTreeSet::new();
        set.insert(("v1".to_owned(), "Secret".to_owned()));
        let a = KubernetesAccess::Resources(set);
        assert!(a.allows("v1", "Secret"));
        assert!(!a.allows("v1", "ServiceAccount"));
        assert!(!KubernetesAccess::Denied.allows("v1", "Secret"));
        assert!(KubernetesAccess::All.allows("v1", "Secret"));
    }
}
