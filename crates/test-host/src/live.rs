//! The backend that really answers requests: registries for `oci/*`, the
//! cluster directory for `kubernetes/*`.
//!
//! waPC host callbacks are synchronous while registry access is async, so
//! each request is driven to completion on the tokio runtime (the guest is
//! blocked on the host call meanwhile, exactly as upstream).

use anyhow::{anyhow, Result};
use tokio::runtime::Handle;

use crate::callback_requests::CallbackRequestType;
use crate::capabilities::Backend;
use crate::cluster::{apply_field_masks, ClusterStore};
use crate::oci::RegistryClient;
use crate::resolve_images::{resolve_images, ResolveImagesRequest, DEFAULT_PER_REGISTRY};

/// Answers requests against real registries and the cluster directory.
pub struct LiveBackend {
    runtime: Handle,
    registry: RegistryClient,
    cluster: Option<ClusterStore>,
    resolve_per_registry: usize,
}

impl LiveBackend {
    /// `cluster` is `None` when no `--cluster-dir` was given.
    pub fn new(runtime: Handle, registry: RegistryClient, cluster: Option<ClusterStore>) -> Self {
        Self {
            runtime,
            registry,
            cluster,
            resolve_per_registry: DEFAULT_PER_REGISTRY,
        }
    }

    /// How many lookups of one `oci/v1/resolve_images` call may run at the
    /// same time against one registry (`--resolve-images-concurrency`).
    pub fn with_resolve_concurrency(mut self, per_registry: usize) -> Self {
        self.resolve_per_registry = per_registry;
        self
    }

    fn cluster(&self) -> Result<&ClusterStore> {
        // policy-evaluator's text when it has no Kubernetes client, kept word for word: the
        // guest gets it as from `kwctl run` without a cluster (README's error table).
        self.cluster
            .as_ref()
            .ok_or_else(|| anyhow!("kube::Client was not initialized properly"))
    }
}

impl Backend for LiveBackend {
    fn evaluate(&mut self, request: &CallbackRequestType) -> Result<Vec<u8>> {
        let value = match request {
            CallbackRequestType::OciManifestDigest { image } => {
                let digest = self
                    .runtime
                    .block_on(self.registry.manifest_digest(image))?;
                serde_json::json!({ "digest": digest })
            }
            CallbackRequestType::OciManifest { image } => {
                self.runtime.block_on(self.registry.manifest(image))?
            }
            CallbackRequestType::OciManifestAndConfig { image } => self
                .runtime
                .block_on(self.registry.manifest_and_config(image))?,
            CallbackRequestType::OciResolveImages {
                lookups,
                timeout_ms,
            } => {
                let request = ResolveImagesRequest {
                    lookups: lookups.clone(),
                    timeout_ms: *timeout_ms,
                };
                self.runtime.block_on(resolve_images(
                    &self.registry,
                    &request,
                    self.registry.timeout(),
                    self.resolve_per_registry,
                ))?
            }
            CallbackRequestType::KubernetesGetResource {
                api_version,
                kind,
                name,
                namespace,
                field_masks,
                ..
            } => {
                let obj = self
                    .cluster()?
                    .get(api_version, kind, name, namespace.as_deref())?;
                apply_field_masks(&obj, field_masks.as_ref())
            }
            CallbackRequestType::KubernetesListResourceNamespace {
                api_version,
                kind,
                namespace,
                label_selector,
                field_selector,
                field_masks,
            } => self.cluster()?.list(
                api_version,
                kind,
                Some(namespace),
                label_selector.as_deref(),
                field_selector.as_deref(),
                field_masks.as_ref(),
            )?,
            CallbackRequestType::KubernetesListResourceAll {
                api_version,
                kind,
                label_selector,
                field_selector,
                field_masks,
            } => self.cluster()?.list(
                api_version,
                kind,
                None,
                label_selector.as_deref(),
                field_selector.as_deref(),
                field_masks.as_ref(),
            )?,
        };
        Ok(serde_json::to_vec(&value)?)
    }
}
