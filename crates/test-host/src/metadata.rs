//! Kubewarden policy metadata (`policy-metadata.yml`, or the wasm custom
//! section `io.kubewarden.metadata`), modelled on policy-evaluator's
//! `Metadata` so annotated modules carry the same JSON as kwctl writes.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Name of the wasm custom section holding the metadata JSON.
pub const METADATA_SECTION: &str = "io.kubewarden.metadata";

/// A Kubernetes admission rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// API groups (`""` for core).
    pub api_groups: Vec<String>,
    /// API versions.
    pub api_versions: Vec<String>,
    /// Resources, e.g. `pods`.
    pub resources: Vec<String>,
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    pub operations: Vec<String>,
}

/// A Kubernetes resource type the policy may read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextAwareResource {
    /// apiVersion, e.g. `v1`.
    pub api_version: String,
    /// Kind, e.g. `Secret`.
    pub kind: String,
}

fn default_true() -> bool {
    true
}

fn default_execution_mode() -> String {
    "kubewarden-wapc".to_owned()
}

fn default_policy_type() -> String {
    "kubernetes".to_owned()
}

/// Policy metadata; field order and defaults follow upstream's serialization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// waPC protocol version (`v1`), filled in by `annotate`.
    #[serde(default)]
    pub protocol_version: Option<String>,
    /// Admission rules.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// Free-form annotations (`io.kubewarden.policy.*`, `io.artifacthub.*`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Whether the policy mutates.
    pub mutating: bool,
    /// Whether the policy takes part in background audits.
    #[serde(default = "default_true")]
    pub background_audit: bool,
    /// `kubewarden-wapc` for this kind of policy.
    #[serde(default = "default_execution_mode")]
    pub execution_mode: String,
    /// `kubernetes` or `raw`.
    #[serde(default = "default_policy_type")]
    pub policy_type: String,
    /// Kubernetes resources the policy reads.
    #[serde(default)]
    pub context_aware_resources: Vec<ContextAwareResource>,
    /// Host capabilities the policy declares it uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_capabilities: Vec<String>,
    /// Minimum Kubewarden version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum_kubewarden_version: Option<String>,
}

impl Metadata {
    /// Read a `policy-metadata.yml` (YAML or JSON).
    pub fn from_yaml_path(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read metadata file {}", path.display()))?;
        serde_yaml::from_str(&text)
            .with_context(|| format!("invalid metadata file {}", path.display()))
    }

    /// Read the `io.kubewarden.metadata` custom section of a module, if any.
    pub fn from_wasm(module: &[u8]) -> Result<Option<Self>> {
        for payload in wasmparser::Parser::new(0).parse_all(module) {
            if let wasmparser::Payload::CustomSection(reader) =
                payload.context("cannot parse wasm module")?
            {
                if reader.name() == METADATA_SECTION {
                    return Ok(Some(
                        serde_json::from_slice(reader.data())
                            .context("invalid io.kubewarden.metadata section")?,
                    ));
                }
            }
        }
        Ok(None)
    }
}
