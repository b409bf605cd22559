//! What nodes do with an image written without a registry (`nginx:1.25`, `library/nginx`): a
//! "short name". containerd (and Docker) always expand it to Docker Hub,
//! `docker.io/library/nginx:1.25`, which is how [`ImageReference`] normalises it. CRI-O resolves
//! it through containers/image's `shortnames.Resolve` and the node's `registries.conf`
//! (containers-registries.conf(5)):
//! 1. an alias (`[aliases]`, `"nginx" = "docker.io/library/nginx"`) always wins, in every mode;
//! 2. otherwise each of `unqualified-search-registries` is a candidate, in order
//!    (`quay.io/nginx:1.25`); with none, the pull fails;
//! 3. `short-name-mode = "disabled"` tries every candidate; with one candidate there is no
//!    ambiguity; with more, `permissive` tries every candidate (CRI-O has no TTY to prompt on)
//!    and `enforcing` fails: "short-name resolution enforced but cannot prompt without a TTY"
//!    (CRI-O says "short name mode is enforcing, but image name … returns ambiguous list").
//!    CRI-O 1.34 honours `enforcing` (cri-o PR #9401), the default of containers-common.
//!
//! A name is short when its first component (before a `/`) has no `.` or `:` and is not
//! `localhost`, as `parseUnnormalizedShortName` decides.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::reference::ImageReference;

/// How the nodes' runtime resolves short names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShortNameMode {
    /// containerd and Docker: Docker Hub (`docker.io/library/…`), whatever else is configured.
    #[default]
    Docker,
    /// CRI-O ≥ 1.34 with `short-name-mode = "enforcing"`: more than one search registry and no
    /// alias fails the pull.
    Enforcing,
    /// CRI-O with `short-name-mode = "permissive"`: every search registry, in order.
    Permissive,
    /// CRI-O with `short-name-mode = "disabled"` (and CRI-O before 1.34, which did not read
    /// the mode): every search registry, in order.
    Disabled,
}

/// The `shortNames` settings, as operators write them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ShortNameRules {
    /// What the nodes' runtime is.
    pub mode: ShortNameMode,
    /// `unqualified-search-registries`, `host[:port]` each, in order.
    pub search_registries: Vec<String>,
    /// `[aliases]`: short name (no tag or digest) to a fully qualified repository.
    pub aliases: BTreeMap<String, String>,
}

/// Validated short-name rules.
#[derive(Debug, Clone, Default)]
pub struct ShortNames {
    mode: ShortNameMode,
    search_registries: Vec<String>,
    aliases: BTreeMap<String, String>,
}

/// What a node pulls for an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The reference as the policy parsed it: a qualified name, or containerd's expansion.
    AsParsed,
    /// The references a node tries, in order, until one pulls (at least one).
    Candidates(Vec<ImageReference>),
    /// The node cannot resolve the name: the pull certainly fails, for this reason.
    Fails(String),
}

impl ShortNames {
    /// Validates `rules`, naming the offending field relative to `shortNames`.
    pub fn new(rules: ShortNameRules) -> Result<Self, ShortNameError> {
        let crio = rules.mode != ShortNameMode::Docker;
        if !crio && (!rules.search_registries.is_empty() || !rules.aliases.is_empty()) {
            let field = if rules.search_registries.is_empty() {
                ".aliases"
            } else {
                ".searchRegistries"
            };
            return Err(ShortNameError::new(
                field,
                "only CRI-O reads it: set mode to enforcing, permissive or disabled",
            ));
        }
        for (i, registry) in rules.search_registries.iter().enumerate() {
            let qualified = !registry.contains('/')
                && is_registry(registry)
                && ImageReference::parse(&format!("{registry}/x")).is_ok();
            if !qualified {
                return Err(ShortNameError::new(
                    format!(".searchRegistries[{i}]"),
                    format!("{registry:?} is not a registry host[:port] (with a '.' or a port, or localhost), e.g. quay.io"),
                ));
            }
        }
        for (name, target) in &rules.aliases {
            let at = || format!(".aliases[{name:?}]");
            if !is_short(name) || has_tag_or_digest(name) || ImageReference::parse(name).is_err() {
                return Err(ShortNameError::new(
                    at(),
                    "an alias is a short name (no registry, tag or digest), e.g. nginx",
                ));
            }
            if is_short(target)
                || has_tag_or_digest(target)
                || ImageReference::parse(target).is_err()
            {
                return Err(ShortNameError::new(
                    at(),
                    format!("{target:?} is not a fully qualified repository without tag or digest, e.g. docker.io/library/nginx"),
                ));
            }
        }
        Ok(ShortNames {
            mode: rules.mode,
            search_registries: rules.search_registries,
            aliases: rules.aliases,
        })
    }

    /// What a node pulls for `image` (as written, already a valid reference).
    pub fn resolve(&self, image: &str) -> Resolution {
        if self.mode == ShortNameMode::Docker || !is_short(image) {
            return Resolution::AsParsed;
        }
        let (repository, suffix) = split_suffix(image);
        if let Some(target) = self.aliases.get(repository) {
            return match ImageReference::parse(&format!("{target}{suffix}")) {
                Ok(reference) => Resolution::Candidates(vec![reference]),
                Err(e) => Resolution::Fails(format!("its alias {target} gives {e}")),
            };
        }
        let candidates: Vec<ImageReference> = self
            .search_registries
            .iter()
            .filter_map(|registry| ImageReference::parse(&format!("{registry}/{image}")).ok())
            .collect();
        match (candidates.len(), self.mode) {
            (0, _) => Resolution::Fails(format!(
                "{repository:?} is a short name with no alias in shortNames.aliases, and the nodes have no unqualified-search registries (shortNames.searchRegistries)"
            )),
            (1, _) | (_, ShortNameMode::Permissive | ShortNameMode::Disabled) => {
                Resolution::Candidates(candidates)
            }
            (n, _) => Resolution::Fails(format!(
                "{repository:?} is a short name with no alias, and CRI-O's short-name-mode enforcing refuses to choose among the {n} unqualified-search registries ({})",
                self.search_registries.join(", ")
            )),
        }
    }
}

/// True for a name whose first component is not a registry: CRI-O resolves it.
pub fn is_short(name: &str) -> bool {
    match name.split_once('/') {
        Some((first, _)) => !is_registry(first),
        None => true,
    }
}

/// containers/image's test for a registry component: a `.` or `:`, or `localhost`.
fn is_registry(component: &str) -> bool {
    component.contains(['.', ':']) || component == "localhost"
}

/// True when a name (no registry port, since it is short or checked separately) carries a tag
/// or a digest.
fn has_tag_or_digest(name: &str) -> bool {
    let last = name.rsplit('/').next().unwrap_or(name);
    last.contains([':', '@'])
}

/// `nginx:1.25` → (`nginx`, `:1.25`); `a/b@sha256:…` → (`a/b`, `@sha256:…`). Only for short
/// names, whose first component has no port.
fn split_suffix(image: &str) -> (&str, &str) {
    let at = image.find(['@', ':']).unwrap_or(image.len());
    image.split_at(at)
}

/// A `shortNames` field that does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct ShortNameError {
    field: String,
    problem: String,
}

impl ShortNameError {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ShortNameError {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

impl FieldError for ShortNameError {
    fn field(&self) -> String {
        self.field.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(value: serde_json::Value) -> Result<ShortNames, ShortNameError> {
        ShortNames::new(serde_json::from_value(value).expect("rules parse"))
    }

    fn candidates(names: &ShortNames, image: &str) -> Vec<String> {
        match names.resolve(image) {
            Resolution::Candidates(list) => list.iter().map(ToString::to_string).collect(),
            other => panic!("{image}: {other:?}"),
        }
    }

    #[test]
    fn short_names_are_told_as_containers_image_tells_them() {
        for short in [
            "nginx",
            "nginx:1.25",
            "library/nginx",
            "team/app@sha256:abc",
            "a/b/c",
        ] {
            assert!(is_short(short), "{short}");
        }
        for qualified in [
            "docker.io/nginx",
            "localhost/app:1",
            "reg:5000/app",
            "quay.io/a/b:1",
        ] {
            assert!(!is_short(qualified), "{qualified}");
        }
    }

    #[test]
    fn docker_mode_keeps_the_expansion() {
        let names = ShortNames::default();
        assert_eq!(names.resolve("nginx:1.25"), Resolution::AsParsed);
    }

    #[test]
    fn an_alias_wins_in_every_mode() {
        for mode in ["enforcing", "permissive", "disabled"] {
            let names = rules(
                json!({"mode": mode, "searchRegistries": ["quay.io", "docker.io"],
                "aliases": {"nginx": "registry.example.com/mirror/nginx"}}),
            )
            .unwrap();
            assert_eq!(
                candidates(&names, "nginx:1.25"),
                ["registry.example.com/mirror/nginx:1.25"],
                "{mode}"
            );
            // qualified names are never resolved
            assert_eq!(names.resolve("docker.io/nginx:1"), Resolution::AsParsed);
        }
    }

    #[test]
    fn enforcing_with_several_search_registries_and_no_alias_fails() {
        let names = rules(json!({"mode": "enforcing",
            "searchRegistries": ["registry.access.redhat.com", "docker.io"]}))
        .unwrap();
        let Resolution::Fails(reason) = names.resolve("nginx:1.25") else {
            panic!("should fail")
        };
        assert!(
            reason.contains("\"nginx\" is a short name with no alias, and CRI-O's short-name-mode enforcing refuses to choose among the 2 unqualified-search registries (registry.access.redhat.com, docker.io)"),
            "{reason}"
        );
        // one registry: no ambiguity, looked up there (docker.io normalised as containers/image does)
        let one = rules(json!({"mode": "enforcing", "searchRegistries": ["docker.io"]})).unwrap();
        assert_eq!(
            candidates(&one, "nginx:1.25"),
            ["docker.io/library/nginx:1.25"]
        );
        let quay = rules(json!({"mode": "enforcing", "searchRegistries": ["quay.io"]})).unwrap();
        assert_eq!(candidates(&quay, "team/app"), ["quay.io/team/app:latest"]);
        // none: fails in every mode
        let none = rules(json!({"mode": "disabled"})).unwrap();
        assert!(matches!(none.resolve("nginx"), Resolution::Fails(_)));
    }

    #[test]
    fn permissive_and_disabled_try_every_search_registry_in_order() {
        for mode in ["permissive", "disabled"] {
            let names =
                rules(json!({"mode": mode, "searchRegistries": ["quay.io", "docker.io"]})).unwrap();
            assert_eq!(
                candidates(&names, "nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000"),
                [
                    "quay.io/nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000",
                    "docker.io/library/nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000"
                ]
            );
        }
    }

    #[test]
    fn bad_rules_are_named() {
        let error = |value| rules(value).expect_err("refused");
        let e = error(json!({"searchRegistries": ["quay.io"]}));
        assert_eq!(e.field(), ".searchRegistries");
        assert!(e.to_string().contains("only CRI-O reads it"));
        let e = error(json!({"mode": "enforcing", "searchRegistries": ["quay.io", "quay"]}));
        assert_eq!(e.field(), ".searchRegistries[1]");
        assert!(
            e.to_string()
                .contains("\"quay\" is not a registry host[:port]"),
            "{e}"
        );
        let e = error(json!({"mode": "enforcing", "searchRegistries": ["quay.io/team"]}));
        assert_eq!(e.field(), ".searchRegistries[0]");
        let e = error(
            json!({"mode": "enforcing", "aliases": {"docker.io/nginx": "docker.io/library/nginx"}}),
        );
        assert_eq!(e.field(), ".aliases[\"docker.io/nginx\"]");
        let e =
            error(json!({"mode": "enforcing", "aliases": {"nginx:1": "docker.io/library/nginx"}}));
        assert!(e.to_string().contains("an alias is a short name"), "{e}");
        let e = error(json!({"mode": "enforcing", "aliases": {"nginx": "nginx"}}));
        assert!(
            e.to_string().contains("not a fully qualified repository"),
            "{e}"
        );
        let e =
            error(json!({"mode": "enforcing", "aliases": {"nginx": "docker.io/library/nginx:1"}}));
        assert!(
            e.to_string().contains("not a fully qualified repository"),
            "{e}"
        );
        assert!(serde_json::from_value::<ShortNameRules>(json!({"mode": "crio"})).is_err());
    }
}
