//! The typed form of a guest's request to the host.
//!
//! Compatibility, not design: the enum's variant and field names are kwctl's
//! recorded-session format (serde_yaml renders a variant as a YAML tag such as
//! `!OciManifestDigest`, its fields as the tag's keys), so that a session written
//! here replays in kwctl and the other way round. Names and fields follow that
//! format exactly; nothing else here does.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::resolve_images::ImageLookup;

/// One request a guest can make through a host capability that needs the
/// "outside world" (registry, cluster). `tracing/log` is not one of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CallbackRequestType {
    /// `oci/v1/manifest_digest`: the digest of the manifest the reference points to.
    OciManifestDigest {
        /// The image reference exactly as the guest wrote it.
        image: String,
    },
    /// `oci/v1/oci_manifest`: the manifest (image manifest or index) itself.
    OciManifest {
        /// The image reference exactly as the guest wrote it.
        image: String,
    },
    /// `oci/v1/oci_manifest_config`: manifest, digest and image configuration.
    OciManifestAndConfig {
        /// The image reference exactly as the guest wrote it.
        image: String,
    },
    /// `oci/v1/resolve_images` (this project's proposal, opt-in): lookups
    /// with the guest's credentials, recorded as `<redacted>`.
    OciResolveImages {
        /// Images and the credentials to try for each.
        lookups: Vec<ImageLookup>,
        /// Longest time for one lookup, in milliseconds.
        timeout_ms: u64,
    },
    /// `kubernetes/list_resources_by_namespace`.
    KubernetesListResourceNamespace {
        /// apiVersion of the resources (`v1`, `apps/v1`, ...).
        api_version: String,
        /// Singular PascalCase kind.
        kind: String,
        /// Namespace scoping the search.
        namespace: String,
        /// Label selector, everything when absent.
        label_selector: Option<String>,
        /// Field selector, everything when absent.
        field_selector: Option<String>,
        /// Dot paths to keep in each returned object.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field_masks: Option<BTreeSet<String>>,
    },
    /// `kubernetes/list_resources_all`.
    KubernetesListResourceAll {
        /// apiVersion of the resources.
        api_version: String,
        /// Singular PascalCase kind.
        kind: String,
        /// Label selector, everything when absent.
        label_selector: Option<String>,
        /// Field selector, everything when absent.
        field_selector: Option<String>,
        /// Dot paths to keep in each returned object.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field_masks: Option<BTreeSet<String>>,
    },
    /// `kubernetes/get_resource`.
    KubernetesGetResource {
        /// apiVersion of the resource.
        api_version: String,
        /// Singular PascalCase kind.
        kind: String,
        /// Name of the object.
        name: String,
        /// Namespace of the object, `None` for cluster-scoped resources.
        namespace: Option<String>,
        /// Ask the host to bypass its cache (meaningless here, kept for fidelity).
        disable_cache: bool,
        /// Dot paths to keep in the returned object.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        field_masks: Option<BTreeSet<String>>,
    },
}

impl CallbackRequestType {
    /// The Kubernetes `(apiVersion, kind)` a request reads, used to apply the
    /// policy's `contextAwareResources` gate.
    pub fn kubernetes_resource(&self) -> Option<(&str, &str)> {
        match self {
            CallbackRequestType::KubernetesListResourceNamespace {
                api_version, kind, ..
            }
            | CallbackRequestType::KubernetesListResourceAll {
                api_version, kind, ..
            }
            | CallbackRequestType::KubernetesGetResource {
                api_version, kind, ..
            } => Some((api_version.as_str(), kind.as_str())),
            _ => None,
        }
    }
}

/// Payload of `kubernetes/get_resource`, as the SDK's `GetResourceRequest` sends it.
#[derive(Debug, Deserialize)]
pub struct GetResourceRequest {
    /// apiVersion of the resource.
    pub api_version: String,
    /// Singular PascalCase kind.
    pub kind: String,
    /// Name of the object.
    pub name: String,
    /// Namespace, `None` for cluster-scoped resources.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Cache bypass flag.
    #[serde(default)]
    pub disable_cache: bool,
    /// Dot paths to keep.
    #[serde(default)]
    pub field_masks: Option<BTreeSet<String>>,
}

impl From<GetResourceRequest> for CallbackRequestType {
    fn from(r: GetResourceRequest) -> Self {
        CallbackRequestType::KubernetesGetResource {
            api_version: r.api_version,
            kind: r.kind,
            name: r.name,
            namespace: r.namespace,
            disable_cache: r.disable_cache,
            field_masks: r.field_masks,
        }
    }
}

/// Payload of `kubernetes/list_resources_by_namespace`.
#[derive(Debug, Deserialize)]
pub struct ListResourcesByNamespaceRequest {
    /// apiVersion of the resources.
    pub api_version: String,
    /// Singular PascalCase kind.
    pub kind: String,
    /// Namespace scoping the search.
    pub namespace: String,
    /// Label selector.
    #[serde(default)]
    pub label_selector: Option<String>,
    /// Field selector.
    #[serde(default)]
    pub field_selector: Option<String>,
    /// Dot paths to keep.
    #[serde(default)]
    pub field_masks: Option<BTreeSet<String>>,
}

impl From<ListResourcesByNamespaceRequest> for CallbackRequestType {
    fn from(r: ListResourcesByNamespaceRequest) -> Self {
        CallbackRequestType::KubernetesListResourceNamespace {
            api_version: r.api_version,
            kind: r.kind,
            namespace: r.namespace,
            label_selector: r.label_selector,
            field_selector: r.field_selector,
            field_masks: r.field_masks,
        }
    }
}

/// Payload of `kubernetes/list_resources_all`.
#[derive(Debug, Deserialize)]
pub struct ListAllResourcesRequest {
    /// apiVersion of the resources.
    pub api_version: String,
    /// Singular PascalCase kind.
    pub kind: String,
    /// Label selector.
    #[serde(default)]
    pub label_selector: Option<String>,
    /// Field selector.
    #[serde(default)]
    pub field_selector: Option<String>,
    /// Dot paths to keep.
    #[serde(default)]
    pub field_masks: Option<BTreeSet<String>>,
}

impl From<ListAllResourcesRequest> for CallbackRequestType {
    fn from(r: ListAllResourcesRequest) -> Self {
        CallbackRequestType::KubernetesListResourceAll {
            api_version: r.api_version,
            kind: r.kind,
            label_selector: r.label_selector,
            field_selector: r.field_selector,
            field_masks: r.field_masks,
        }
    }
}
