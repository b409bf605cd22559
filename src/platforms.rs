//! Platforms: an image that exists but has no manifest for the node's OS and architecture fails
//! just as surely as a missing tag (`no matching manifest for linux/arm64`).

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// An OCI platform: `os/architecture[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Platform {
    /// `linux`, `windows`, …
    pub os: String,
    /// `amd64`, `arm64`, …
    pub architecture: String,
    /// `v8`, `v7`, … when it matters.
    pub variant: Option<String>,
}

impl Platform {
    /// Parses `os/architecture[/variant]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('/').collect();
        let valid = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        match parts.as_slice() {
            [os, architecture] if valid(os) && valid(architecture) => {
                Ok(Platform::new(os, architecture, None))
            }
            [os, architecture, variant] if valid(os) && valid(architecture) && valid(variant) => {
                Ok(Platform::new(os, architecture, Some(variant)))
            }
            _ => Err(format!(
                "{text:?} is not os/architecture[/variant], e.g. linux/arm64/v8"
            )),
        }
    }

    fn new(os: &str, architecture: &str, variant: Option<&str>) -> Self {
        Platform {
            os: os.to_owned(),
            architecture: architecture.to_owned(),
            variant: variant.map(str::to_owned),
        }
    }

    /// The variant as containerd normalises it: `arm64` means `v8`, `arm` means `v7`.
    fn normalised_variant(&self) -> Option<&str> {
        match (self.architecture.as_str(), self.variant.as_deref()) {
            ("arm64", None) => Some("v8"),
            ("arm", None) => Some("v7"),
            (_, variant) => variant,
        }
    }

    /// True when an image manifest for `available` runs on a node of this platform. A
    /// requirement without a variant accepts any variant.
    pub fn is_served_by(&self, available: &Platform) -> bool {
        self.os == available.os
            && self.architecture == available.architecture
            && (self.variant.is_none()
                || self.normalised_variant() == available.normalised_variant())
    }

    /// Reads `{os, architecture, variant}` as OCI indexes and image configs write it.
    pub fn from_json(value: &Value) -> Option<Self> {
        let os = value["os"].as_str()?;
        let architecture = value["architecture"].as_str()?;
        Some(Platform::new(os, architecture, value["variant"].as_str()))
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(variant) = &self.variant {
            write!(f, "/{variant}")?;
        }
        Ok(())
    }
}

/// What the operator requires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirement {
    /// Platforms named explicitly.
    pub platforms: Vec<Platform>,
    /// Also the platforms of the cluster's Nodes.
    pub cluster: bool,
}

impl Requirement {
    /// Parses `requiredPlatforms`: platforms, and `cluster` for the Nodes' platforms.
    pub fn parse(entries: &[String]) -> Result<Self, (usize, String)> {
        let mut requirement = Requirement::default();
        for (i, entry) in entries.iter().enumerate() {
            if entry == "cluster" {
                requirement.cluster = true;
            } else {
                requirement
                    .platforms
                    .push(Platform::parse(entry).map_err(|e| (i, e))?);
            }
        }
        Ok(requirement)
    }

    /// True when no platform is required.
    pub fn is_empty(&self) -> bool {
        self.platforms.is_empty() && !self.cluster
    }
}

/// Keeps the platforms a pod can land on given its `nodeSelector` on `kubernetes.io/os` and
/// `kubernetes.io/arch`.
pub fn restrict_to_node_selector(
    platforms: Vec<Platform>,
    selector: &BTreeMap<String, String>,
) -> Vec<Platform> {
    let os = selector.get("kubernetes.io/os");
    let arch = selector.get("kubernetes.io/arch");
    platforms
        .into_iter()
        .filter(|p| {
            os.is_none_or(|os| *os == p.os) && arch.is_none_or(|arch| *arch == p.architecture)
        })
        .collect()
}

/// The `kubernetes.io/os` / `kubernetes.io/arch` platforms of a `NodeList`, de-duplicated.
pub fn node_platforms(list: &Value) -> Vec<Platform> {
    let mut platforms: Vec<Platform> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|node| {
            let labels = &node["metadata"]["labels"];
            let info = &node["status"]["nodeInfo"];
            let os = labels["kubernetes.io/os"]
                .as_str()
                .or(info["operatingSystem"].as_str())?;
            let arch = labels["kubernetes.io/arch"]
                .as_str()
                .or(info["architecture"].as_str())?;
            Some(Platform::new(os, arch, None))
        })
        .collect();
    platforms.sort();
    platforms.dedup();
    platforms
}

/// The platforms an index or manifest list serves; `None` for a single image manifest, whose
/// platform is in its config.
pub fn index_platforms(manifest: &Value) -> Option<Vec<Platform>> {
    let manifests = manifest["manifests"].as_array()?;
    Some(
        manifests
            .iter()
            .filter_map(|m| Platform::from_json(&m["platform"]))
            .collect(),
    )
}

/// The required platforms no available platform serves.
pub fn missing<'a>(required: &'a [Platform], available: &[Platform]) -> Vec<&'a Platform> {
    required
        .iter()
        .filter(|r| !available.iter().any(|a| r.is_served_by(a)))
        .collect()
}

/// `linux/amd64, linux/arm64`
pub fn list(platforms: &[impl std::borrow::Borrow<Platform>]) -> String {
    let names: Vec<String> = platforms.iter().map(|p| p.borrow().to_string()).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(text: &str) -> Platform {
        Platform::parse(text).unwrap()
    }

    #[test]
    fn parses_and_prints() {
        assert_eq!(p("linux/arm64/v8").to_string(), "linux/arm64/v8");
        assert_eq!(p("linux/amd64").variant, None);
        for bad in [
            "linux",
            "linux/",
            "/amd64",
            "linux/arm64/v8/x",
            "linux amd64",
            "",
        ] {
            assert!(Platform::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn variants_match_as_containerd_normalises_them() {
        assert!(p("linux/arm64").is_served_by(&p("linux/arm64/v8")));
        assert!(p("linux/arm64/v8").is_served_by(&p("linux/arm64")));
        assert!(!p("linux/arm/v7").is_served_by(&p("linux/arm/v6")));
        assert!(p("linux/arm/v7").is_served_by(&p("linux/arm")));
        assert!(p("linux/amd64").is_served_by(&p("linux/amd64/v3")));
        assert!(!p("linux/amd64").is_served_by(&p("windows/amd64")));
        assert!(!p("linux/arm64").is_served_by(&p("linux/amd64")));
    }

    #[test]
    fn indexes_list_their_platforms_and_missing_ones_are_named() {
        let index = json!({"manifests": [
            {"platform": {"os": "linux", "architecture": "amd64"}},
            {"platform": {"os": "linux", "architecture": "arm", "variant": "v6"}},
            {"platform": {"os": "unknown", "architecture": "unknown"}},
            {"mediaType": "attestation without platform"}]});
        let available = index_platforms(&index).unwrap();
        assert_eq!(
            list(&available),
            "linux/amd64, linux/arm/v6, unknown/unknown"
        );
        let required = [p("linux/amd64"), p("linux/arm64"), p("linux/arm/v7")];
        assert_eq!(
            list(&missing(&required, &available)),
            "linux/arm64, linux/arm/v7"
        );
        assert_eq!(index_platforms(&json!({"config": {}})), None);
    }

    #[test]
    fn cluster_platforms_come_from_node_labels_and_node_selectors_narrow_them() {
        let nodes = json!({"items": [
            {"metadata": {"labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}},
            {"metadata": {"labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}}},
            {"metadata": {"labels": {}}, "status": {"nodeInfo": {"operatingSystem": "linux", "architecture": "arm64"}}},
            {"metadata": {}}]});
        let platforms = node_platforms(&nodes);
        assert_eq!(list(&platforms), "linux/amd64, linux/arm64");
        let selector = BTreeMap::from([("kubernetes.io/arch".to_owned(), "arm64".to_owned())]);
        assert_eq!(
            list(&restrict_to_node_selector(platforms, &selector)),
            "linux/arm64"
        );
    }

    #[test]
    fn requirements_parse_cluster_and_name_bad_entries() {
        let requirement = Requirement::parse(&["cluster".into(), "linux/amd64".into()]).unwrap();
        assert!(requirement.cluster);
        assert_eq!(requirement.platforms, [p("linux/amd64")]);
        assert_eq!(
            Requirement::parse(&["linux/amd64".into(), "arm64".into()])
                .unwrap_err()
                .0,
            1
        );
        assert!(Requirement::parse(&[]).unwrap().is_empty());
    }
}
