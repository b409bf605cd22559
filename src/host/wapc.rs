//! The waPC host of a Kubewarden policy server (or of `kwctl run`, or the test host).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    Host, HostError, ListAllRequest, ResolveImagesRequest, ResolveImagesResponse, ResourceRequest,
    RESOLVE_IMAGES_OPERATION,
};

/// The binding every Kubewarden host capability lives under.
const BINDING: &str = "kubewarden";

/// Calls the real host through `wapc_guest::host_call`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WapcHost;

impl WapcHost {
    /// One host call with a JSON request and a JSON answer; the error is the host's text.
    fn call<T: serde::de::DeserializeOwned>(
        &self,
        namespace: &str,
        operation: &str,
        request: &impl Serialize,
    ) -> Result<T, String> {
        let payload =
            serde_json::to_vec(request).map_err(|e| format!("cannot encode request: {e}"))?;
        let answer = wapc_guest::host_call(BINDING, namespace, operation, &payload)
            .map_err(|e| format!("error invoking host capability {namespace}.{operation}: {e}"))?;
        serde_json::from_slice(&answer).map_err(|e| {
            format!("host capability {namespace}.{operation} gave an unreadable answer: {e}")
        })
    }

    /// A registry capability.
    fn oci<T: serde::de::DeserializeOwned>(
        &self,
        operation: &str,
        request: &impl Serialize,
    ) -> Result<T, HostError> {
        self.call("oci", operation, request)
            .map_err(HostError::lookup)
    }

    /// A Kubernetes capability.
    fn kubernetes(&self, operation: &str, request: &impl Serialize) -> Result<Value, HostError> {
        self.call("kubernetes", operation, request)
            .map_err(HostError::kubernetes)
    }
}

/// The answer of `oci/v1/manifest_digest`.
#[derive(Deserialize)]
struct ManifestDigest {
    digest: String,
}

impl Host for WapcHost {
    fn now(&self) -> Duration {
        static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        ORIGIN.get_or_init(std::time::Instant::now).elapsed()
    }

    fn unix_time(&self) -> Duration {
        // WASI's realtime clock; a host that reports a time before the epoch gives expired
        // seals, which the broker refuses (a warning, never a denial)
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    }

    fn manifest_digest(&self, reference: &str) -> Result<String, HostError> {
        self.oci::<ManifestDigest>("v1/manifest_digest", &reference)
            .map(|answer| answer.digest)
    }

    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, HostError> {
        self.kubernetes("get_resource", request)
    }

    fn oci_manifest(&self, reference: &str) -> Result<Value, HostError> {
        self.oci("v1/oci_manifest", &reference)
    }

    fn oci_manifest_config(&self, reference: &str) -> Result<Value, HostError> {
        self.oci("v1/oci_manifest_config", &reference)
    }

    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, HostError> {
        self.kubernetes("list_resources_all", request)
    }

    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, HostError> {
        self.oci(RESOLVE_IMAGES_OPERATION, request)
    }
}
