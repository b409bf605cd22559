//! Platforms: an image that exists but has no manifest for the node's OS and architecture fails
//! just as surely as a missing tag (`no matching manifest for linux/arm64`). The matching rules
//! are pure functions; [`PlatformChecker`] reads what they need through the host.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::failure::{Failure, FailureKind};
use crate::host::{Host, ListAllRequest};
use crate::lookup::Budget;
use crate::reference::ImageReference;
use crate::settings::FieldError;

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
    pub fn parse(text: &str) -> Result<Self, PlatformError> {
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
            _ => Err(PlatformError {
                entry: text.to_owned(),
            }),
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

/// A platform that is not `os/architecture[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformError {
    /// The entry as written.
    pub entry: String,
}

impl fmt::Display for PlatformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not os/architecture[/variant], e.g. linux/arm64/v8",
            self.entry
        )
    }
}

/// A refused `requiredPlatforms` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequirementError {
    /// Its position in the list.
    pub index: usize,
    /// What is wrong with it.
    pub error: PlatformError,
}

impl fmt::Display for RequirementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl FieldError for RequirementError {
    fn field(&self) -> String {
        format!("[{}]", self.index)
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
    pub fn parse(entries: &[String]) -> Result<Self, RequirementError> {
        let mut requirement = Requirement::default();
        for (index, entry) in entries.iter().enumerate() {
            if entry == "cluster" {
                requirement.cluster = true;
            } else {
                let platform =
                    Platform::parse(entry).map_err(|error| RequirementError { index, error })?;
                requirement.platforms.push(platform);
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

/// Checks found images against `requiredPlatforms`, reading each image digest's platforms
/// once per request and the cluster's Nodes at most once.
pub struct PlatformChecker<'a, H: Host> {
    requirement: &'a Requirement,
    host: &'a H,
    budget: &'a Budget,
    cluster: Option<Vec<Platform>>,
    available: BTreeMap<String, Result<Vec<Platform>, Failure>>,
}

impl<'a, H: Host> PlatformChecker<'a, H> {
    /// A checker for `requirement`, whose host calls stop when `budget` is spent.
    pub fn new(requirement: &'a Requirement, host: &'a H, budget: &'a Budget) -> Self {
        PlatformChecker {
            requirement,
            host,
            budget,
            cluster: None,
            available: BTreeMap::new(),
        }
    }

    /// The failure of an image found at `location` with `digest`, if a required platform is
    /// missing or the platforms could not be read.
    pub fn check(
        &mut self,
        location: &ImageReference,
        digest: &str,
        node_selector: Option<&BTreeMap<String, String>>,
    ) -> Option<Failure> {
        let requirement = self.requirement;
        if requirement.is_empty() {
            return None;
        }
        let mut required = requirement.platforms.clone();
        if requirement.cluster {
            required.extend(self.cluster_platforms());
        }
        if let Some(selector) = node_selector {
            required = restrict_to_node_selector(required, selector);
        }
        if required.is_empty() {
            return None;
        }
        let at = format!("{}@{digest}", location.name());
        let available = match self.available.get(&at) {
            Some(cached) => cached.clone(),
            None => {
                let read = self.read_platforms(&at);
                self.available.insert(at, read.clone());
                read
            }
        };
        match available {
            Err(failure) => Some(failure),
            Ok(available) => {
                let missing = missing(&required, &available);
                (!missing.is_empty()).then(|| {
                    Failure::new(
                        FailureKind::MissingPlatform,
                        format!(
                            "no manifest for {}; the image has {}",
                            list(&missing),
                            list(&available)
                        ),
                    )
                })
            }
        }
    }

    /// The platforms of the cluster's Nodes, listed once per request.
    fn cluster_platforms(&mut self) -> Vec<Platform> {
        let host = self.host;
        self.cluster
            .get_or_insert_with(|| {
                let request = ListAllRequest {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    label_selector: None,
                    field_selector: None,
                    field_masks: Some(vec!["metadata.labels".into(), "status.nodeInfo".into()]),
                };
                host.list_resources_all(&request)
                    .map(|list| node_platforms(&list))
                    .unwrap_or_default()
            })
            .clone()
    }

    /// An index's platforms, or a single manifest's from its config.
    fn read_platforms(&self, at: &str) -> Result<Vec<Platform>, Failure> {
        let (budget, host) = (self.budget, self.host);
        if !budget.can_start(host) {
            return Err(budget.not_checked(host));
        }
        let manifest = budget
            .measure(host, || host.oci_manifest(at))
            .map_err(|e| e.failure())?;
        if let Some(platforms) = index_platforms(&manifest) {
            return Ok(platforms);
        }
        let answer = budget
            .measure(host, || host.oci_manifest_config(at))
            .map_err(|e| e.failure())?;
        Ok(Platform::from_json(&answer["config"]).into_iter().collect())
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
                .index,
            1
        );
        assert!(Requirement::parse(&[]).unwrap().is_empty());
    }
}
