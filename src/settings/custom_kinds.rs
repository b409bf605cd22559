//! Custom kinds (Argo Workflows, Tekton Tasks, Knative Services, …): operators name where their
//! images and pod specs are with JSONPath.
//!
//! `serde_json_path` is used because it implements RFC 9535 (the JSONPath standard) and is
//! tested against its compliance suite, so expressions behave as the standard says rather than
//! as one of the many pre-standard dialects do; it also reports each match's location, which
//! becomes the JSON pointer a pinned digest is written to. Its `regex` feature is left out:
//! RFC 9535's `match()` and `search()` would need a regex engine that nearly doubles the module
//! (1.69 MB → 0.88 MB after `wasm-opt`); a path using them is refused when the policy loads.

use std::cell::OnceCell;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use serde_json_path::JsonPath;

use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::workload::{
    read_pod_spec_at, ContainerImage, ContainerList, PodSpecView, WorkloadError,
};

/// One custom kind as operators write it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CustomResourceRule {
    /// `group/version`, e.g. `argoproj.io/v1alpha1`.
    pub api_version: String,
    /// The kind, e.g. `Workflow`.
    pub kind: String,
    /// JSONPath expressions selecting image strings.
    #[serde(default)]
    pub images: Vec<String>,
    /// JSONPath expressions selecting pod specs, whose containers, pull secrets and pull
    /// policies are then read like a Deployment's template.
    #[serde(default)]
    pub pod_specs: Vec<String>,
}

/// A validated custom kind.
#[derive(Debug, Clone)]
pub struct CustomKind {
    group: String,
    version: String,
    /// The kind, as messages name it.
    pub kind: String,
    images: Paths,
    pod_specs: Paths,
}

/// One list of a rule's JSONPath expressions, compiled when an object of the kind first needs
/// them: the parser is a large share of the module's code, and most requests are of other
/// kinds. Settings validation compiles them at once ([`CustomKind::compile_paths`]).
#[derive(Clone)]
struct Paths {
    field: &'static str,
    texts: Vec<String>,
    compiled: OnceCell<Result<Vec<JsonPath>, CustomKindError>>,
}

/// The paths as written, compiled yet or not.
impl fmt::Debug for Paths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.texts).finish()
    }
}

impl Paths {
    fn new(field: &'static str, texts: Vec<String>) -> Self {
        Paths {
            field,
            texts,
            compiled: OnceCell::new(),
        }
    }

    /// The compiled expressions, or the first that does not compile.
    fn compiled(&self) -> Result<&[JsonPath], &CustomKindError> {
        let compiled = self.compiled.get_or_init(|| {
            self.texts
                .iter()
                .enumerate()
                .map(|(index, path)| {
                    JsonPath::parse(path).map_err(|e| CustomKindError::JsonPath {
                        field: self.field,
                        index,
                        path: path.clone(),
                        reason: e.to_string(),
                    })
                })
                .collect()
        });
        compiled.as_deref()
    }
}

/// The images and pod specs found in an object of a custom kind.
#[derive(Debug, Clone, Default)]
pub struct CustomImages {
    /// Pod specs found by `podSpecs`.
    pub pod_specs: Vec<PodSpecView>,
    /// Bare image fields found by `images`.
    pub fields: Vec<ContainerImage>,
}

impl CustomKind {
    /// Validates a rule; the error names the field relative to the rule.
    pub fn new(rule: CustomResourceRule) -> Result<Self, CustomKindError> {
        let (group, version) = match rule.api_version.rsplit_once('/') {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (String::new(), rule.api_version.clone()),
        };
        if version.is_empty() || rule.api_version.chars().any(char::is_whitespace) {
            return Err(CustomKindError::ApiVersion);
        }
        if rule.kind.is_empty() || !rule.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(CustomKindError::Kind);
        }
        if rule.images.is_empty() && rule.pod_specs.is_empty() {
            return Err(CustomKindError::NoPaths);
        }
        Ok(CustomKind {
            images: Paths::new("images", rule.images),
            pod_specs: Paths::new("podSpecs", rule.pod_specs),
            group,
            version,
            kind: rule.kind,
        })
    }

    /// Compiles every JSONPath now: what validating the settings needs, so that a bad path is
    /// refused when the policy is loaded, naming it.
    pub fn compile_paths(&self) -> Result<(), CustomKindError> {
        self.images.compiled().map_err(Clone::clone)?;
        self.pod_specs.compiled().map_err(Clone::clone)?;
        Ok(())
    }

    /// True when an admission request's kind is this one.
    pub fn matches(&self, group: &str, version: &str, kind: &str) -> bool {
        self.group == group && self.version == version && self.kind == kind
    }

    /// Every pod spec and image field the expressions select in `object`.
    pub fn extract(&self, object: &Value) -> Result<CustomImages, WorkloadError> {
        let invalid = |error: &CustomKindError| WorkloadError::InvalidRule {
            kind: self.kind.clone(),
            reason: format!("customResources{}: {error}", error.field()),
        };
        let mut found = CustomImages::default();
        for path in self.pod_specs.compiled().map_err(invalid)? {
            for node in path.query_located(object).all() {
                found.pod_specs.push(read_pod_spec_at(
                    &node.location().to_json_pointer(),
                    object,
                )?);
            }
        }
        for path in self.images.compiled().map_err(invalid)? {
            for node in path.query_located(object).all() {
                let Some(image) = node.node().as_str() else {
                    continue;
                };
                found.fields.push(ContainerImage {
                    list: ContainerList::Field,
                    name: node.location().to_string(),
                    image: image.to_owned(),
                    pull_policy: None,
                    pointer: node.location().to_json_pointer(),
                });
            }
        }
        Ok(found)
    }
}

/// A refused custom kind rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CustomKindError {
    /// `apiVersion` is not `group/version`.
    #[error("must be group/version, e.g. argoproj.io/v1alpha1")]
    ApiVersion,
    /// `kind` is not a Kubernetes kind.
    #[error("must be a Kubernetes kind, e.g. Workflow")]
    Kind,
    /// Neither `images` nor `podSpecs` has a path.
    #[error("give at least one JSONPath in images or podSpecs")]
    NoPaths,
    /// A path is not RFC 9535 JSONPath (or uses what this build leaves out).
    #[error("invalid JSONPath {path:?}: {reason}")]
    JsonPath {
        /// `images` or `podSpecs`.
        field: &'static str,
        /// Its position in that list.
        index: usize,
        /// The path as written.
        path: String,
        /// The parser's reason.
        reason: String,
    },
}

impl FieldError for CustomKindError {
    fn field(&self) -> String {
        match self {
            CustomKindError::ApiVersion => ".apiVersion".to_owned(),
            CustomKindError::Kind => ".kind".to_owned(),
            CustomKindError::NoPaths => ".images".to_owned(),
            CustomKindError::JsonPath { field, index, .. } => format!(".{field}[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(images: &[&str], pod_specs: &[&str]) -> CustomResourceRule {
        CustomResourceRule {
            api_version: "argoproj.io/v1alpha1".into(),
            kind: "Workflow".into(),
            images: images.iter().map(|s| (*s).to_owned()).collect(),
            pod_specs: pod_specs.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The rule as settings validation checks it: every path compiled.
    fn kind(images: &[&str], pod_specs: &[&str]) -> Result<CustomKind, CustomKindError> {
        let kind = CustomKind::new(rule(images, pod_specs))?;
        kind.compile_paths()?;
        Ok(kind)
    }

    #[test]
    fn a_path_compiles_when_an_object_needs_it_and_an_error_is_explained() {
        let lazy = CustomKind::new(rule(&["$.spec.image", "$[?"], &[])).unwrap();
        assert!(lazy.images.compiled.get().is_none());
        let error = lazy
            .extract(&json!({"spec": {"image": "a/b:1"}}))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the settings' rule for Workflow is invalid: customResources.images[1]: invalid JSONPath \"$[?\": ".to_owned()
                + &JsonPath::parse("$[?").unwrap_err().to_string()
        );
        let fine = CustomKind::new(rule(&["$.spec.image"], &[])).unwrap();
        assert_eq!(
            fine.extract(&json!({"spec": {"image": "a/b:1"}}))
                .unwrap()
                .fields
                .len(),
            1
        );
    }

    #[test]
    fn images_are_found_with_their_pointers() {
        let workflow = kind(
            &[
                "$.spec.templates[*].container.image",
                "$.spec.templates[*].script.image",
            ],
            &[],
        )
        .unwrap();
        assert!(workflow.matches("argoproj.io", "v1alpha1", "Workflow"));
        assert!(!workflow.matches("argoproj.io", "v1", "Workflow"));
        let object = json!({"spec": {"templates": [
            {"name": "a", "container": {"image": "alpine:3.20"}},
            {"name": "b", "script": {"image": "python:3.12"}},
            {"name": "c", "container": {"image": 7}}]}});
        let found = workflow.extract(&object).unwrap();
        let images: Vec<_> = found
            .fields
            .iter()
            .map(|f| (f.image.as_str(), f.pointer.as_str()))
            .collect();
        assert_eq!(
            images,
            [
                ("alpine:3.20", "/spec/templates/0/container/image"),
                ("python:3.12", "/spec/templates/1/script/image")
            ]
        );
        assert_eq!(
            found.fields[0].name,
            "$['spec']['templates'][0]['container']['image']"
        );
    }

    #[test]
    fn pod_specs_are_read_like_templates() {
        let service = kind(&[], &["$.spec.template.spec"]).unwrap();
        let object = json!({"spec": {"template": {"spec": {
            "imagePullSecrets": [{"name": "regcred"}],
            "containers": [{"name": "user-container", "image": "ghcr.io/a/b:1"}]}}}});
        let found = service.extract(&object).unwrap();
        assert_eq!(found.pod_specs.len(), 1);
        assert_eq!(found.pod_specs[0].image_pull_secrets, ["regcred"]);
        assert_eq!(
            found.pod_specs[0].containers[0].pointer,
            "/spec/template/spec/containers/0/image"
        );
    }

    #[test]
    fn bad_rules_name_their_field() {
        assert_eq!(kind(&[], &[]).unwrap_err().field(), ".images");
        assert_eq!(
            kind(&["$.ok", "$[?"], &[]).unwrap_err().field(),
            ".images[1]"
        );
        assert_eq!(
            kind(&[], &["spec.template"]).unwrap_err().field(),
            ".podSpecs[0]"
        );
        // match() and search() need the regex engine this build leaves out (the module's doc).
        let regex = kind(
            &["$.spec.templates[?match(@.name, 'b.*')].container.image"],
            &[],
        );
        assert_eq!(regex.unwrap_err().field(), ".images[0]");
        assert!(kind(
            &["$.spec.templates[?length(@.name) > 1].container.image"],
            &[]
        )
        .is_ok());
        let bad_version = CustomKind::new(CustomResourceRule {
            api_version: "argoproj.io/".into(),
            kind: "Workflow".into(),
            images: vec!["$.a".into()],
            pod_specs: vec![],
        });
        assert_eq!(bad_version.unwrap_err().field(), ".apiVersion");
    }
}
