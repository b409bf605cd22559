//! Platforms: an image that exists but has no manifest for the node's OS and architecture fails
//! just as surely as a missing tag (`no matching manifest for linux/arm64`). The matching rules
//! are pure functions; [`PlatformChecker`] reads what they need through the host.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::host::budget::Budget;
use crate::host::{Host, HostError, ListAllRequest};
use crate::vocabulary::failure::{Failure, FailureKind};
use crate::vocabulary::field_error::FieldError;
pub use crate::vocabulary::platform::{Platform, PlatformError};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::scheduling::{nodes_of, Node, Placement, NODE_FIELDS};

/// A refused `requiredPlatforms` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct RequirementError {
    /// Its position in the list.
    pub index: usize,
    /// What is wrong with it.
    #[source]
    pub error: PlatformError,
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

/// One entry of an index: its platform when the index says it, and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// `platform`, when present.
    pub platform: Option<Platform>,
    /// The entry's manifest digest, to read its config when the platform is not given.
    pub digest: String,
}

/// The entries of an index or manifest list; `None` for a single image manifest, whose
/// platform is in its config.
pub fn index_entries(manifest: &Value) -> Option<Vec<IndexEntry>> {
    let manifests = manifest["manifests"].as_array()?;
    Some(
        manifests
            .iter()
            .map(|m| IndexEntry {
                platform: m.get("platform").and_then(Platform::from_json),
                digest: m["digest"].as_str().unwrap_or_default().to_owned(),
            })
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

/// How a node uses an image, which decides what its platform must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Use {
    /// A container runs it: the manifest the runtime picks must be of the node's platform.
    Run,
    /// An image volume mounts it (KEP-4639): nothing in it is executed, and it may be an OCI
    /// artifact with no platform at all. The runtime's platform matters only where an index
    /// offers a choice: containerd and CRI-O pull a single manifest whatever its config says
    /// (containerd checks the platform of index entries only, never the root manifest's; CRI-O
    /// copies an artifact as it is), and CRI-O's index matching (containers/image's
    /// `ChooseInstance`) falls back to an entry without a platform, so such an entry may serve
    /// any node.
    Mount,
}

/// The platforms an image offers, as far as they decide a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Available {
    /// The runtime takes it on any node (a mounted single manifest, or an index with an entry
    /// without a platform).
    Anywhere,
    /// Only nodes one of these platforms serves.
    Only(Vec<Platform>),
}

/// Checks found images against `requiredPlatforms`, reading each image digest's platforms
/// once per request and use, and the cluster's Nodes at most once.
pub struct PlatformChecker<'a, H: Host> {
    requirement: &'a Requirement,
    host: &'a H,
    budget: &'a Budget,
    nodes: Option<Vec<Node>>,
    available: BTreeMap<(Use, String), Result<Available, Failure>>,
    /// Why some pods' platforms were not checked (they fit no node).
    pub notes: Vec<String>,
}

impl<'a, H: Host> PlatformChecker<'a, H> {
    /// A checker for `requirement`, whose host calls stop when `budget` is spent.
    pub fn new(requirement: &'a Requirement, host: &'a H, budget: &'a Budget) -> Self {
        PlatformChecker {
            requirement,
            host,
            budget,
            nodes: None,
            available: BTreeMap::new(),
            notes: Vec::new(),
        }
    }

    /// The failure of an image found at `location` with `digest`, used as `usage` says by pods
    /// placed as `placement` says, if a platform they can land on has no manifest, or the
    /// platforms could not be read.
    pub fn check(
        &mut self,
        location: &ImageReference,
        digest: &str,
        usage: Use,
        placement: &Placement<'_>,
    ) -> Option<Failure> {
        if self.requirement.is_empty() {
            return None;
        }
        let required = self.required(placement);
        if required.is_empty() {
            return None;
        }
        let at = format!("{}@{digest}", location.name());
        let key = (usage, at);
        let available = match self.available.get(&key) {
            Some(cached) => cached.clone(),
            None => {
                let read = match usage {
                    Use::Run => self.read_platforms(location, &key.1).map(Available::Only),
                    Use::Mount => self.read_mounted(&key.1),
                };
                self.available.insert(key, read.clone());
                read
            }
        };
        let available = match available {
            Err(failure) => return Some(failure),
            Ok(Available::Anywhere) => return None,
            Ok(Available::Only(available)) => available,
        };
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

    /// The platforms pods placed as `placement` can run on: the named ones their node
    /// selection allows, and (for `cluster`) those of the Nodes they fit.
    fn required(&mut self, placement: &Placement<'_>) -> Vec<Platform> {
        let mut required: Vec<Platform> = self
            .requirement
            .platforms
            .iter()
            .filter(|p| {
                let labels = BTreeMap::from([
                    ("kubernetes.io/os".to_owned(), p.os.clone()),
                    ("kubernetes.io/arch".to_owned(), p.architecture.clone()),
                ]);
                placement.may_fit_labels(&labels)
            })
            .cloned()
            .collect();
        if self.requirement.cluster {
            let nodes = self.nodes();
            let any_node = !nodes.is_empty();
            let fitting: Vec<Platform> = nodes
                .iter()
                .filter(|n| placement.fits(n))
                .map(|n| n.platform.clone())
                .collect();
            if any_node && fitting.is_empty() {
                let note = "the pod fits no Node of the cluster (nodeSelector, node affinity, taints); the cluster's platforms were not required of its images".to_owned();
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
            }
            required.extend(fitting);
        }
        required.sort();
        required.dedup();
        required
    }

    /// The cluster's Nodes, listed once per request.
    fn nodes(&mut self) -> &[Node] {
        let (host, budget) = (self.host, self.budget);
        self.nodes.get_or_insert_with(|| {
            let request = ListAllRequest {
                api_version: "v1".into(),
                kind: "Node".into(),
                label_selector: None,
                field_selector: None,
                field_masks: Some(NODE_FIELDS.iter().map(|f| (*f).to_owned()).collect()),
            };
            budget.outside(host, || {
                host.list_resources_all(&request)
                    .map(|list| nodes_of(&list))
                    .unwrap_or_default()
            })
        })
    }

    /// An index's platforms (an entry without one judged by its config), or a single
    /// manifest's from its config; attestations are left out.
    fn read_platforms(
        &self,
        location: &ImageReference,
        at: &str,
    ) -> Result<Vec<Platform>, Failure> {
        let manifest = self.call(|host| host.oci_manifest(at))?;
        let Some(entries) = index_entries(&manifest) else {
            return Ok(self.config_platform(at)?.into_iter().collect());
        };
        let mut platforms = Vec::new();
        for entry in entries {
            let platform = match entry.platform {
                Some(platform) => Some(platform),
                None if !entry.digest.is_empty() => {
                    self.config_platform(&format!("{}@{}", location.name(), entry.digest))?
                }
                None => None,
            };
            platforms.extend(platform.filter(|p| !p.is_attestation()));
        }
        platforms.dedup();
        Ok(platforms)
    }

    /// What a mounted image offers ([`Use::Mount`]): a single manifest serves any node; an
    /// index serves its entries' platforms, or any node when one entry has none. Configs are
    /// never read: an artifact's is not an image config.
    fn read_mounted(&self, at: &str) -> Result<Available, Failure> {
        let manifest = self.call(|host| host.oci_manifest(at))?;
        let Some(entries) = index_entries(&manifest) else {
            return Ok(Available::Anywhere);
        };
        let mut platforms = Vec::new();
        for entry in entries {
            match entry.platform {
                None => return Ok(Available::Anywhere),
                Some(platform) if !platform.is_attestation() => platforms.push(platform),
                Some(_) => {}
            }
        }
        platforms.dedup();
        Ok(Available::Only(platforms))
    }

    /// The platform in the config of the image manifest at `at`.
    fn config_platform(&self, at: &str) -> Result<Option<Platform>, Failure> {
        let answer = self.call(|host| host.oci_manifest_config(at))?;
        Ok(Platform::from_json(&answer["config"]))
    }

    /// One host call within the budget.
    fn call(&self, call: impl FnOnce(&H) -> Result<Value, HostError>) -> Result<Value, Failure> {
        self.budget.call(self.host, || call(self.host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::InMemoryHost;
    use crate::vocabulary::scheduling::LazyJson;
    use serde_json::json;

    fn p(text: &str) -> Platform {
        Platform::parse(text).expect(text)
    }

    /// An entry as written and as it is printed once normalised.
    #[rustfmt::skip]
    const NORMALISED: &[(&str, &str)] = &[
        // already normal
        ("linux/amd64", "linux/amd64"),
        ("linux/riscv64", "linux/riscv64"),
        ("linux/arm/v6", "linux/arm/v6"),
        ("linux/arm64/v8.2", "linux/arm64/v8.2"),
        // other names of an architecture
        ("linux/aarch64", "linux/arm64"),
        ("linux/aarch64/v8.3", "linux/arm64/v8.3"),
        ("linux/x86_64", "linux/amd64"),
        ("linux/x86-64/v3", "linux/amd64/v3"),
        ("linux/i386", "linux/386"),
        ("linux/armhf", "linux/arm/v7"),
        ("linux/armel", "linux/arm/v6"),
        // a baseline variant is no variant; a 32-bit arm without one is v7
        ("linux/amd64/v1", "linux/amd64"),
        ("linux/arm64/v8", "linux/arm64"),
        ("linux/arm64/v8.0", "linux/arm64"),
        ("linux/arm64/8", "linux/arm64"),
        ("linux/arm", "linux/arm/v7"),
        // variants written as numbers, and v9.0 as v9
        ("linux/arm/6", "linux/arm/v6"),
        ("linux/arm/7", "linux/arm/v7"),
        ("linux/arm64/v9.0", "linux/arm64/v9"),
        ("linux/arm64/9", "linux/arm64/v9"),
        // case, and macOS as Darwin
        ("Linux/ARM64", "linux/arm64"),
        ("linux/AMD64/V2", "linux/amd64/v2"),
        ("macos/arm64", "darwin/arm64"),
        // a Windows build is kept as written
        ("windows(10.0.20348)/amd64", "windows(10.0.20348)/amd64"),
        ("windows(10.0.20348.2340)/arm64", "windows(10.0.20348.2340)/arm64"),
    ];

    #[test]
    fn entries_are_normalised_so_that_equal_platforms_print_alike() {
        for (entry, printed) in NORMALISED {
            assert_eq!(p(entry).to_string(), *printed, "{entry}");
            assert_eq!(p(entry), p(printed), "{entry}");
        }
        assert_eq!(p("linux/amd64").variant, None);
        assert_eq!(
            p("windows(10.0.20348)/amd64").os_version.as_deref(),
            Some("10.0.20348")
        );
    }

    #[test]
    fn entries_that_are_not_os_architecture_variant_are_refused() {
        for bad in [
            "",
            "linux",
            "linux/",
            "/arm64",
            "linux//arm64",
            "linux/arm64/",
            "linux/arm64/v8/extra",
            "linux arm64",
            "linux/arm64 ",
            "linux/arm64+v8",
            "windows(/amd64",
            "windows()/amd64",
            "windows(10.0.20348/amd64",
            "windows(10.0.20348)x/amd64",
            "windows(10 0)/amd64",
        ] {
            let error = Platform::parse(bad).expect_err(bad);
            assert_eq!(error.entry, bad);
        }
    }

    /// A node's platform, an image's, whether the node runs the image, and whether it does
    /// under exact matching.
    #[rustfmt::skip]
    const SERVES: &[(&str, &str, bool, bool)] = &[
        // the same platform, however written
        ("linux/amd64", "linux/amd64", true, true),
        ("linux/x86_64", "linux/amd64/v1", true, true),
        ("linux/arm64/v8", "linux/aarch64", true, true),
        ("linux/arm/v7", "linux/arm", true, true),
        ("darwin/arm64", "macos/arm64", true, true),
        // another OS never
        ("linux/amd64", "windows/amd64", false, false),
        ("windows/amd64", "linux/amd64", false, false),
        ("freebsd/amd64", "linux/amd64", false, false),
        // amd64 runs its lower levels and 386, never a higher level
        ("linux/amd64/v3", "linux/amd64/v2", true, false),
        ("linux/amd64/v3", "linux/amd64", true, false),
        ("linux/amd64/v4", "linux/amd64/v3", true, false),
        ("linux/amd64", "linux/386", true, false),
        ("linux/amd64/v2", "linux/i386", true, false),
        ("linux/amd64", "linux/amd64/v2", false, false),
        ("linux/amd64/v2", "linux/amd64/v3", false, false),
        ("linux/386", "linux/amd64", false, false),
        // 32-bit arm runs lower variants down to v5
        ("linux/arm/v8", "linux/arm/v7", true, false),
        ("linux/arm/v8", "linux/arm/v5", true, false),
        ("linux/arm/v7", "linux/arm/v6", true, false),
        ("linux/arm/v7", "linux/armel", true, false),
        ("linux/arm/v6", "linux/arm/v5", true, false),
        ("linux/arm/v6", "linux/arm", false, false),
        ("linux/arm/v7", "linux/arm/v8", false, false),
        ("linux/armhf", "linux/arm/v7", true, true),
        // ... never below v5; v5 and lower run only themselves
        ("linux/arm/v7", "linux/arm/v4", false, false),
        ("linux/arm/v5", "linux/arm/v5", true, true),
        ("linux/arm/v5", "linux/arm/v4", false, false),
        ("linux/arm/v4", "linux/arm/v4", true, true),
        ("linux/arm/v4", "linux/arm/v3", false, false),
        // 32-bit arm never runs 64-bit
        ("linux/arm/v8", "linux/arm64", false, false),
        // arm64 runs 32-bit arm from v8 down to v5
        ("linux/arm64", "linux/arm/v8", true, false),
        ("linux/arm64", "linux/arm", true, false),
        ("linux/arm64", "linux/arm/v5", true, false),
        ("linux/arm64", "linux/arm/v4", false, false),
        ("linux/arm64/v8.4", "linux/arm/v6", true, false),
        ("linux/arm64/v9.3", "linux/arm/v7", true, false),
        // arm64 v8.x runs the v8 releases before it
        ("linux/arm64/v8.3", "linux/arm64/v8.2", true, false),
        ("linux/arm64/v8.3", "linux/arm64/v8.1", true, false),
        ("linux/arm64/v8.3", "linux/arm64", true, false),
        ("linux/arm64/v8.3", "linux/arm64/v8.4", false, false),
        ("linux/arm64", "linux/arm64/v8.1", false, false),
        ("linux/arm64/v8.9", "linux/arm64/v9", false, false),
        // arm64 v9.x runs the v9 releases before it and v8 up to v8.(x+5)
        ("linux/arm64/v9.2", "linux/arm64/v9.1", true, false),
        ("linux/arm64/v9.2", "linux/arm64/v9", true, false),
        ("linux/arm64/v9.2", "linux/arm64/v8.7", true, false),
        ("linux/arm64/v9.2", "linux/arm64/v8.3", true, false),
        ("linux/arm64/v9.2", "linux/arm64", true, false),
        ("linux/arm64/v9.2", "linux/arm64/v8.8", false, false),
        ("linux/arm64/v9.2", "linux/arm64/v9.3", false, false),
        ("linux/arm64/v9", "linux/arm64/v8.5", true, false),
        ("linux/arm64/v9", "linux/arm64/v8.6", false, false),
        ("linux/arm64/v9", "linux/arm64/v9.1", false, false),
        // 64-bit arm and x86 never run each other
        ("linux/arm64", "linux/amd64", false, false),
        ("linux/amd64/v4", "linux/arm64", false, false),
        ("linux/amd64", "linux/arm/v7", false, false),
        // other architectures run only themselves
        ("linux/s390x", "linux/s390x", true, true),
        ("linux/ppc64le", "linux/ppc64", false, false),
        ("linux/riscv64", "linux/amd64", false, false),
        ("linux/mips64le", "linux/mips64le", true, true),
        // a Windows node that names a build runs images of that build, or of none
        ("windows(10.0.20348)/amd64", "windows(10.0.20348.2340)/amd64", true, true),
        ("windows(10.0.20348)/amd64", "windows(10.0.20348)/amd64", true, true),
        ("windows(10.0.20348.2340)/amd64", "windows(10.0.20348)/amd64", true, true),
        ("windows(10.0.20348)/amd64", "windows/amd64", true, true),
        ("windows(10.0.20348)/amd64", "windows(10.0.26100.1)/amd64", false, false),
        // ... a build is matched whole, never as a string prefix
        ("windows(10.0.2034)/amd64", "windows(10.0.20348)/amd64", false, false),
        ("windows(10.0.20348)/amd64", "windows(10.0.203481)/amd64", false, false),
        // ... and its architecture still must match
        ("windows(10.0.20348)/amd64", "windows(10.0.20348.2340)/arm64", false, false),
        // a node without a build runs any build
        ("windows/amd64", "windows(10.0.26100.1)/amd64", true, true),
        ("windows/arm64", "windows(10.0.26100.1)/arm64", true, true),
    ];

    #[test]
    fn a_node_runs_the_images_its_platform_is_compatible_with() {
        for (node, image, served, strictly) in SERVES {
            let (node_platform, image_platform) = (p(node), p(image));
            assert_eq!(
                node_platform.is_served_by(&image_platform),
                *served,
                "{node} runs {image}"
            );
            assert_eq!(
                node_platform.is_served_strictly_by(&image_platform),
                *strictly,
                "{node} runs {image} under exact matching"
            );
        }
    }

    #[test]
    fn compatibility_is_reflexive_one_way_and_wider_than_exact_matching() {
        let platforms: Vec<Platform> = SERVES
            .iter()
            .flat_map(|(node, image, _, _)| [p(node), p(image)])
            .collect();
        for a in &platforms {
            assert!(a.is_served_by(a) && a.is_served_strictly_by(a), "{a}");
            for b in &platforms {
                if a.is_served_strictly_by(b) {
                    assert!(a.is_served_by(b), "{a} strictly runs {b}");
                }
                if a != b && a.os_version.is_none() && b.os_version.is_none() {
                    assert!(
                        !(a.is_served_by(b) && b.is_served_by(a)),
                        "{a} and {b} run each other"
                    );
                }
            }
        }
    }

    #[test]
    fn unknown_platforms_are_attestations() {
        for (entry, attestation) in [
            ("unknown/unknown", true),
            ("unknown/amd64", true),
            ("linux/unknown", true),
            ("linux/amd64", false),
            ("windows/arm64", false),
        ] {
            assert_eq!(p(entry).is_attestation(), attestation, "{entry}");
        }
    }

    #[test]
    fn missing_names_the_required_platforms_nothing_serves() {
        let available = [p("linux/amd64/v2"), p("linux/arm/v7")];
        let required = [
            p("linux/amd64/v3"),
            p("linux/amd64"),
            p("linux/arm64"),
            p("linux/arm/v6"),
            p("linux/s390x"),
        ];
        assert_eq!(
            list(&missing(&required, &available)),
            "linux/amd64, linux/arm/v6, linux/s390x"
        );
        assert!(missing(&required[..1], &available).is_empty());
        assert_eq!(
            list(&missing(&required[..2], &[])),
            "linux/amd64/v3, linux/amd64"
        );
        assert_eq!(list(&[] as &[Platform]), "none");
    }

    #[test]
    fn index_entries_are_read_from_an_index_only() {
        let index = json!({"manifests": [
            {"digest": "sha256:a1", "platform": {"os": "linux", "architecture": "aarch64"}},
            {"digest": "sha256:b2"},
            {"platform": {"os": "linux"}}]});
        let entries = index_entries(&index).expect("an index");
        assert_eq!(
            entries,
            [
                IndexEntry {
                    platform: Some(p("linux/arm64")),
                    digest: "sha256:a1".into()
                },
                IndexEntry {
                    platform: None,
                    digest: "sha256:b2".into()
                },
                IndexEntry {
                    platform: None,
                    digest: String::new()
                },
            ]
        );
        assert_eq!(index_entries(&json!({"config": {}, "layers": []})), None);
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

    const IMAGE: &str = "r.io/app";
    const SHA: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn check(host: &InMemoryHost, required: &[&str], placement: &Placement<'_>) -> Option<Failure> {
        check_use(host, required, Use::Run, placement)
    }

    fn check_use(
        host: &InMemoryHost,
        required: &[&str],
        usage: Use,
        placement: &Placement<'_>,
    ) -> Option<Failure> {
        let entries: Vec<String> = required.iter().map(|s| (*s).to_owned()).collect();
        let requirement = Requirement::parse(&entries).unwrap();
        let budget = Budget::start(host, std::time::Duration::from_secs(1));
        let mut checker = PlatformChecker::new(&requirement, host, &budget);
        checker.check(
            &ImageReference::parse(&format!("{IMAGE}:1")).unwrap(),
            SHA,
            usage,
            placement,
        )
    }

    fn unplaced<'a>(selector: &'a BTreeMap<String, String>, null: &'a LazyJson) -> Placement<'a> {
        Placement {
            node_selector: selector,
            affinity: null,
            tolerations: null,
            daemon_set: false,
        }
    }

    #[test]
    fn entries_without_a_platform_are_judged_by_their_config_and_attestations_left_out() {
        let child = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
        let host = InMemoryHost::new()
            .with_manifest(&format!("{IMAGE}@{SHA}"), json!({"manifests": [
                {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64", "variant": "v3"}},
                {"digest": child},
                {"digest": "sha256:cc", "platform": {"os": "unknown", "architecture": "unknown"}}]}))
            .with_manifest(&format!("{IMAGE}@{child}"), json!({"config": {}}))
            .with_config(&format!("{IMAGE}@{child}"), json!({"os": "linux", "architecture": "arm", "variant": "v6"}));
        let (selector, null) = (BTreeMap::new(), LazyJson::default());
        let placement = unplaced(&selector, &null);
        assert_eq!(
            check(
                &host,
                &["linux/arm/v7", "linux/arm64", "linux/amd64/v4"],
                &placement
            ),
            None,
            "arm/v7 and arm64 nodes run arm/v6; amd64/v4 nodes run v3"
        );
        let failure = check(&host, &["linux/amd64"], &placement).unwrap();
        assert_eq!(
            failure.detail,
            "no manifest for linux/amd64; the image has linux/amd64/v3, linux/arm/v6",
            "a baseline amd64 node cannot run a v3-only image"
        );
    }

    #[test]
    fn named_platforms_are_narrowed_by_the_pods_node_selection() {
        let host = InMemoryHost::new().with_manifest(
            &format!("{IMAGE}@{SHA}"),
            json!({"manifests": [
                {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}}]}),
        );
        let null = LazyJson::default();
        let arm = BTreeMap::from([("kubernetes.io/arch".to_owned(), "amd64".to_owned())]);
        assert_eq!(
            check(
                &host,
                &["linux/amd64", "linux/arm64"],
                &unplaced(&arm, &null)
            ),
            None
        );
        let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["arm64"]},
                {"key": "pool", "operator": "In", "values": ["general"]}]}]}}});
        let empty = BTreeMap::new();
        let placement = Placement {
            node_selector: &empty,
            affinity: &LazyJson::from(affinity.clone()),
            tolerations: &null,
            daemon_set: false,
        };
        assert_eq!(
            check(&host, &["linux/amd64", "linux/arm64"], &placement),
            None,
            "labels a named platform does not have are not judged"
        );
        assert!(check(
            &host,
            &["linux/amd64", "linux/arm64"],
            &unplaced(&empty, &null)
        )
        .is_some());
    }

    #[test]
    fn cluster_platforms_are_those_of_the_nodes_the_pod_fits() {
        let nodes = json!({"items": [
            {"metadata": {"name": "a", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}},
            {"metadata": {"name": "b", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}},
             "spec": {"taints": [{"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"}]}}]});
        let host = InMemoryHost::new().with_nodes(nodes).with_manifest(
            &format!("{IMAGE}@{SHA}"),
            json!({"manifests": [
                {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}}]}),
        );
        let (empty, null) = (BTreeMap::new(), LazyJson::default());
        assert_eq!(
            check(&host, &["cluster"], &unplaced(&empty, &null)),
            None,
            "the tainted arm64 pool never runs it"
        );
        let tolerations =
            LazyJson::from(json!([{"key": "kubernetes.io/arch", "operator": "Exists"}]));
        let tolerant = Placement {
            node_selector: &empty,
            affinity: &null,
            tolerations: &tolerations,
            daemon_set: false,
        };
        let failure = check(&host, &["cluster"], &tolerant).unwrap();
        assert!(
            failure.detail.starts_with("no manifest for linux/arm64"),
            "{}",
            failure.detail
        );
        assert!(host.calls().iter().any(|c| c == "list Node"));
    }

    #[test]
    fn a_mounted_single_manifest_serves_every_node_and_its_config_is_not_read() {
        // an OCI artifact: its config is not an image config and names no platform
        let artifact = json!({"mediaType": "application/vnd.oci.image.manifest.v1+json",
            "artifactType": "application/vnd.example.model",
            "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": "sha256:44"}});
        let host = InMemoryHost::new()
            .with_manifest(&format!("{IMAGE}@{SHA}"), artifact)
            .with_config(&format!("{IMAGE}@{SHA}"), json!({}));
        let (selector, null) = (BTreeMap::new(), LazyJson::default());
        let placement = unplaced(&selector, &null);
        let required = ["linux/amd64", "linux/arm64"];
        assert_eq!(check_use(&host, &required, Use::Mount, &placement), None);
        assert!(
            !host.calls().iter().any(|c| c.starts_with("config ")),
            "{:?}",
            host.calls()
        );
        assert_eq!(
            check_use(&host, &required, Use::Run, &placement).map(|f| f.kind),
            Some(FailureKind::MissingPlatform),
            "a container cannot run what has no platform"
        );
        // an image of another platform is mounted too: nothing in it is executed
        let image = InMemoryHost::new()
            .with_manifest(&format!("{IMAGE}@{SHA}"), json!({"config": {}}))
            .with_config(
                &format!("{IMAGE}@{SHA}"),
                json!({"os": "linux", "architecture": "s390x"}),
            );
        assert_eq!(check_use(&image, &required, Use::Mount, &placement), None);
    }

    #[test]
    fn a_mounted_index_is_matched_unless_an_entry_has_no_platform() {
        let platformed = json!({"manifests": [
            {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}},
            {"digest": "sha256:cc", "platform": {"os": "unknown", "architecture": "unknown"}}]});
        let host = InMemoryHost::new().with_manifest(&format!("{IMAGE}@{SHA}"), platformed);
        let (selector, null) = (BTreeMap::new(), LazyJson::default());
        let placement = unplaced(&selector, &null);
        let failure = check_use(
            &host,
            &["linux/amd64", "linux/arm64"],
            Use::Mount,
            &placement,
        )
        .unwrap();
        assert_eq!(failure.kind, FailureKind::MissingPlatform);
        assert_eq!(
            failure.detail,
            "no manifest for linux/arm64; the image has linux/amd64"
        );
        // CRI-O falls back to an entry without a platform: arm64 nodes may still mount it
        let fallback = json!({"manifests": [
            {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}},
            {"digest": "sha256:bb"}]});
        let host = InMemoryHost::new().with_manifest(&format!("{IMAGE}@{SHA}"), fallback);
        assert_eq!(
            check_use(&host, &["linux/arm64"], Use::Mount, &placement),
            None
        );
        assert!(!host.calls().iter().any(|c| c.starts_with("config ")));
    }
}
