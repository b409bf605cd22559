//! Dispatch of waPC host calls, following policy-evaluator's `host_callback`.
//!
//! The order of the checks matters because it decides which error a guest
//! sees: binding first, then the host-capability allow-list (never for
//! `tracing`), then the namespace/operation, then the payload, then the
//! `contextAwareResources` gate, then the evaluation itself. Errors are plain
//! `Err` values handed back to the guest, never traps. Their texts are
//! policy-evaluator's, word for word: the policy classifies them by substring
//! (`src/host/error.rs`), and the README's table and `tests/host.bats` pin them.

use std::sync::{Arc, Mutex};

use crate::allow_list::{HostCapabilitiesAllowList, KubernetesAccess};
use crate::call_meter::CallMeter;
use crate::callback_requests::{
    CallbackRequestType, GetResourceRequest, ListAllResourcesRequest,
    ListResourcesByNamespaceRequest,
};
use crate::resolve_images::ResolveImagesRequest;

/// The error a host call hands back to the guest.
pub type HostError = Box<dyn std::error::Error + Send + Sync>;

/// What wapc expects a host callback to return.
pub type HostCallbackResult = Result<Vec<u8>, HostError>;

/// Something that answers typed guest requests: the live registry/cluster,
/// a recorder wrapped around it, or a replayed session.
pub trait Backend: Send {
    /// Answer one request with the payload handed to the guest.
    fn evaluate(&mut self, request: &CallbackRequestType) -> anyhow::Result<Vec<u8>>;

    /// Called once after the evaluation, e.g. to write a recorded session.
    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The host side of the waPC protocol: gates plus a backend.
pub struct HostCapabilities {
    allow_list: HostCapabilitiesAllowList,
    kubernetes_access: KubernetesAccess,
    resolve_images: bool,
    backend: Mutex<Box<dyn Backend>>,
    meter: Option<Arc<CallMeter>>,
}

fn unknown_operation<T>(operation: &str) -> Result<T, HostError> {
    Err(format!("unknown operation: {operation}").into())
}

/// `tracing/log`: the guest's log events, printed; the only `tracing` operation.
fn tracing_call(operation: &str, payload: &[u8]) -> HostCallbackResult {
    match operation {
        "log" => {
            log_guest_event(payload);
            Ok(Vec::new())
        }
        _ => unknown_operation(operation),
    }
}

/// The request of a `kubernetes` call.
fn kubernetes_request(operation: &str, payload: &[u8]) -> Result<CallbackRequestType, HostError> {
    Ok(match operation {
        "get_resource" => serde_json::from_slice::<GetResourceRequest>(payload)?.into(),
        "list_resources_by_namespace" => {
            serde_json::from_slice::<ListResourcesByNamespaceRequest>(payload)?.into()
        }
        "list_resources_all" => serde_json::from_slice::<ListAllResourcesRequest>(payload)?.into(),
        _ => return unknown_operation(operation),
    })
}

impl HostCapabilities {
    /// Assemble the host from its gates and the backend answering requests.
    pub fn new(
        allow_list: HostCapabilitiesAllowList,
        kubernetes_access: KubernetesAccess,
        backend: Box<dyn Backend>,
    ) -> Self {
        Self {
            allow_list,
            kubernetes_access,
            resolve_images: false,
            backend: Mutex::new(backend),
            meter: None,
        }
    }

    /// Count every host call and the bytes it moves (`test-host bench`).
    pub fn with_meter(mut self, meter: Arc<CallMeter>) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Offer `oci/v1/resolve_images` (the project's proposal); a stock host
    /// answers `unknown operation`, which is the default here too.
    pub fn with_resolve_images(mut self, enabled: bool) -> Self {
        self.resolve_images = enabled;
        self
    }

    /// Entry point registered with wapc for every `host_call` of the guest.
    pub fn host_callback(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> HostCallbackResult {
        let result = self.dispatch(binding, namespace, operation, payload);
        if let Some(meter) = &self.meter {
            let answer = match &result {
                Ok(bytes) => bytes.len(),
                Err(e) => e.to_string().len(),
            };
            meter.record(payload.len(), answer);
        }
        result
    }

    /// The checks in the order the module documentation gives, then the backend.
    fn dispatch(
        &self,
        binding: &str,
        namespace: &str,
        operation: &str,
        payload: &[u8],
    ) -> HostCallbackResult {
        if binding != "kubewarden" {
            return Err(format!("unknown binding: {binding}").into());
        }
        // "tracing" is never gated, and never reaches the backend.
        if namespace == "tracing" {
            return tracing_call(operation, payload);
        }
        self.check_allowed(namespace, operation)?;
        let request = match namespace {
            "oci" => self.oci_request(operation, payload)?,
            "kubernetes" => kubernetes_request(operation, payload)?,
            _ => return Err(format!("unknown namespace: {namespace}").into()),
        };
        self.check_kubernetes_access(&request)?;
        self.evaluate(&request)
    }

    /// The host-capability allow-list (`--host-capabilities`).
    fn check_allowed(&self, namespace: &str, operation: &str) -> Result<(), HostError> {
        let capability = format!("{namespace}/{operation}");
        if self.allow_list.allows(&capability) {
            return Ok(());
        }
        eprintln!(
            "test-host: refused {capability}, not in --host-capabilities '{}'",
            self.allow_list
        );
        Err(format!(
            "Policy has not been granted access to the '{capability}' host capability. The violation has been reported."
        )
        .into())
    }

    /// The request of an `oci` call; `v1/resolve_images` only when offered.
    fn oci_request(
        &self,
        operation: &str,
        payload: &[u8],
    ) -> Result<CallbackRequestType, HostError> {
        let image = || serde_json::from_slice::<String>(payload);
        Ok(match operation {
            "v1/manifest_digest" => CallbackRequestType::OciManifestDigest { image: image()? },
            "v1/oci_manifest" => CallbackRequestType::OciManifest { image: image()? },
            "v1/oci_manifest_config" => {
                CallbackRequestType::OciManifestAndConfig { image: image()? }
            }
            "v1/resolve_images" if self.resolve_images => {
                let request: ResolveImagesRequest =
                    serde_json::from_slice(payload).map_err(|e| format!("invalid request: {e}"))?;
                CallbackRequestType::OciResolveImages {
                    lookups: request.lookups,
                    timeout_ms: request.timeout_ms,
                }
            }
            _ => return unknown_operation(operation),
        })
    }

    /// The `contextAwareResources` gate, for requests that read Kubernetes objects.
    fn check_kubernetes_access(&self, request: &CallbackRequestType) -> Result<(), HostError> {
        match request.kubernetes_resource() {
            Some((api_version, kind)) if !self.kubernetes_access.allows(api_version, kind) => {
                Err(format!(
                    "Policy has not been granted access to Kubernetes {api_version}/{kind} resources. The violation has been reported."
                )
                .into())
            }
            _ => Ok(()),
        }
    }

    /// Hand the request to the backend; its errors reach the guest as policy-evaluator's do.
    fn evaluate(&self, request: &CallbackRequestType) -> HostCallbackResult {
        let mut backend = self
            .backend
            .lock()
            .map_err(|_| "host capability backend poisoned by an earlier panic")?;
        backend
            .evaluate(request)
            .map_err(|e| format!("Callback evaluation failure: {}", error_chain(&e)).into())
    }

    /// Let the backend finish its work (write a recorded session, ...).
    pub fn finish(&self) -> anyhow::Result<()> {
        let mut backend = self
            .backend
            .lock()
            .map_err(|_| anyhow::anyhow!("host capability backend poisoned by an earlier panic"))?;
        backend.finish()
    }
}

/// Render an error and its causes exactly like anyhow's `{:?}` (what
/// policy-evaluator uses), but never with a backtrace: an inherited
/// `RUST_BACKTRACE=1` must not change the texts guests match on.
pub fn error_chain(error: &anyhow::Error) -> String {
    let mut out = error.to_string();
    let causes: Vec<String> = error.chain().skip(1).map(ToString::to_string).collect();
    if causes.is_empty() {
        return out;
    }
    out.push_str("\n\nCaused by:");
    let numbered = causes.len() > 1;
    for (i, cause) in causes.iter().enumerate() {
        let prefix = if numbered {
            format!("{i: >5}: ")
        } else {
            "    ".to_owned()
        };
        let continuation = " ".repeat(prefix.len());
        for (j, line) in cause.lines().enumerate() {
            out.push('\n');
            if j == 0 {
                out.push_str(&prefix);
            } else if !line.is_empty() {
                out.push_str(&continuation);
            }
            out.push_str(line);
        }
    }
    out
}

/// Print a guest log event (a JSON slog record from the SDK) on stderr, one
/// line per event, so it never mixes with the AdmissionResponse on stdout.
fn log_guest_event(payload: &[u8]) {
    eprintln!("{}", String::from_utf8_lossy(payload).trim_end());
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex as StdMutex};

    /// Backend answering every request with a fixed payload and remembering it.
    struct Fake(Arc<StdMutex<Vec<CallbackRequestType>>>);

    impl Backend for Fake {
        fn evaluate(&mut self, request: &CallbackRequestType) -> anyhow::Result<Vec<u8>> {
            self.0.lock().expect("lock").push(request.clone());
            match request {
                CallbackRequestType::OciManifestDigest { image } if image == "bad" => {
                    Err(anyhow::anyhow!("Fail to interact with OCI registry: boom"))
                }
                _ => Ok(b"{\"digest\":\"sha256:00\"}".to_vec()),
            }
        }
    }

    fn host(
        allow: &str,
        k8s: KubernetesAccess,
    ) -> (HostCapabilities, Arc<StdMutex<Vec<CallbackRequestType>>>) {
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let h = HostCapabilities::new(
            HostCapabilitiesAllowList::parse(allow),
            k8s,
            Box::new(Fake(seen.clone())),
        );
        (h, seen)
    }

    fn err(r: HostCallbackResult) -> String {
        match r {
            Ok(v) => panic!("expected an error, got {}", String::from_utf8_lossy(&v)),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn unknown_binding_namespace_operation() {
        let (h, _) = host("*", KubernetesAccess::All);
        assert_eq!(
            err(h.host_callback("other", "oci", "v1/manifest_digest", b"\"x\"")),
            "unknown binding: other"
        );
        assert_eq!(
            err(h.host_callback("kubewarden", "nope", "op", b"")),
            "unknown namespace: nope"
        );
        assert_eq!(
            err(h.host_callback("kubewarden", "oci", "v9/nope", b"\"x\"")),
            "unknown operation: v9/nope"
        );
        assert_eq!(
            err(h.host_callback("kubewarden", "tracing", "nope", b"")),
            "unknown operation: nope"
        );
        assert_eq!(
            err(h.host_callback("kubewarden", "kubernetes", "nope", b"{}")),
            "unknown operation: nope"
        );
    }

    #[test]
    fn allow_list_denial_text_and_tracing_never_gated() {
        let (h, seen) = host("kubernetes/*", KubernetesAccess::All);
        assert_eq!(
            err(h.host_callback("kubewarden", "oci", "v1/manifest_digest", b"\"busybox\"")),
            "Policy has not been granted access to the 'oci/v1/manifest_digest' host capability. The violation has been reported."
        );
        assert!(seen.lock().expect("lock").is_empty());
        assert!(h
            .host_callback("kubewarden", "tracing", "log", b"{\"message\":\"hi\"}")
            .is_ok());
    }

    #[test]
    fn oci_success_and_error_wrapping() {
        let (h, seen) = host("*", KubernetesAccess::All);
        let ok = h
            .host_callback("kubewarden", "oci", "v1/manifest_digest", b"\"busybox\"")
            .expect("ok");
        assert_eq!(ok, b"{\"digest\":\"sha256:00\"}");
        assert_eq!(
            seen.lock().expect("lock")[0],
            CallbackRequestType::OciManifestDigest {
                image: "busybox".into()
            }
        );
        assert_eq!(
            err(h.host_callback("kubewarden", "oci", "v1/manifest_digest", b"\"bad\"")),
            "Callback evaluation failure: Fail to interact with OCI registry: boom"
        );
    }

    #[test]
    fn error_chain_matches_anyhow_debug_without_backtrace() {
        let single = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_chain(&single), "outer\n\nCaused by:\n    inner");
        let multi = anyhow::anyhow!("c").context("b").context("a");
        assert_eq!(error_chain(&multi), "a\n\nCaused by:\n    0: b\n    1: c");
        assert_eq!(error_chain(&anyhow::anyhow!("alone")), "alone");
    }

    #[test]
    fn resolve_images_is_opt_in() {
        let payload = br#"{"lookups":[{"image":"r/a:1","credentials":[]}],"timeoutMs":1500}"#;
        let (h, _) = host("*", KubernetesAccess::All);
        assert_eq!(
            err(h.host_callback("kubewarden", "oci", "v1/resolve_images", payload)),
            "unknown operation: v1/resolve_images"
        );
        let (h, seen) = host("*", KubernetesAccess::All);
        let h = h.with_resolve_images(true);
        assert!(h
            .host_callback("kubewarden", "oci", "v1/resolve_images", payload)
            .is_ok());
        assert!(matches!(
            &seen.lock().expect("lock")[0],
            CallbackRequestType::OciResolveImages {
                timeout_ms: 1500,
                ..
            }
        ));
        assert!(
            err(h.host_callback("kubewarden", "oci", "v1/resolve_images", b"{}"))
                .starts_with("invalid request: ")
        );
    }

    #[test]
    fn context_aware_gate() {
        let (h, _) = host("*", KubernetesAccess::Denied);
        let payload = br#"{"api_version":"v1","kind":"Secret","name":"regcred","namespace":"team-a","disable_cache":false,"field_masks":null}"#;
        assert_eq!(
            err(h.host_callback("kubewarden", "kubernetes", "get_resource", payload)),
            "Policy has not been granted access to Kubernetes v1/Secret resources. The violation has been reported."
        );
        let mut set = BTreeSet::new();
        set.insert(("v1".to_owned(), "Secret".to_owned()));
        let (h, seen) = host("*", KubernetesAccess::Resources(set));
        assert!(h
            .host_callback("kubewarden", "kubernetes", "get_resource", payload)
            .is_ok());
        assert_eq!(seen.lock().expect("lock").len(), 1);
    }
}
