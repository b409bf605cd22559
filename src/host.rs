//! The host boundary: every call the policy makes out of the sandbox goes through [`Host`], so
//! the decision logic runs unchanged under unit tests (an in-memory fake), the project's test
//! host and a real Kubewarden policy server.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The binding every Kubewarden host capability lives under.
const BINDING: &str = "kubewarden";

/// The credentialed batch lookup this project proposes (`docs/credentialed-lookups.md`).
pub const RESOLVE_IMAGES_OPERATION: &str = "v1/resolve_images";

/// The capabilities the policy needs from its host. Errors are the host's own text, which the
/// callers classify: a failed call is a verdict to decide on, never an `Err` out of `validate`.
pub trait Host {
    /// `oci/v1/manifest_digest`: the digest of `reference`, with the host's own credentials.
    fn manifest_digest(&self, reference: &str) -> Result<String, String>;

    /// `kubernetes/get_resource`: one object from the cluster.
    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, String>;

    /// `oci/v1/oci_manifest`: the manifest or index `reference` names.
    fn oci_manifest(&self, reference: &str) -> Result<Value, String>;

    /// `oci/v1/oci_manifest_config`: an image manifest with its config (for its platform).
    fn oci_manifest_config(&self, reference: &str) -> Result<Value, String>;

    /// `kubernetes/list_resources_all`: every object of a cluster-wide kind (Nodes).
    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, String>;

    /// Monotonic time since an arbitrary origin: the policy's time budget is measured with it
    /// (the WASI clock under a real host, a simulated one in tests).
    fn now(&self) -> Duration;

    /// `oci/v1/resolve_images`: all of a request's lookups, each with the credentials the
    /// kubelet would try. Stock hosts answer `unknown operation`.
    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, String>;
}

/// The request of `kubernetes/get_resource`, field for field as the host expects it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceRequest {
    /// `v1` for ServiceAccounts and Secrets.
    pub api_version: String,
    /// `ServiceAccount`, `Secret`, …
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    pub namespace: Option<String>,
    /// Bypasses the host's 5 s cache.
    pub disable_cache: bool,
    /// Dot paths the host keeps in its answer: less secret material crosses the boundary.
    pub field_masks: Option<Vec<String>>,
}

impl ResourceRequest {
    /// A namespaced core (`v1`) object, pruned to `fields`.
    pub fn core(kind: &str, namespace: &str, name: &str, fields: &[&str]) -> Self {
        ResourceRequest {
            api_version: "v1".to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: Some(namespace.to_owned()),
            disable_cache: false,
            field_masks: Some(fields.iter().map(|f| (*f).to_owned()).collect()),
        }
    }
}

/// The request of `kubernetes/list_resources_all`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListAllRequest {
    /// `v1` for Nodes.
    pub api_version: String,
    /// `Node`.
    pub kind: String,
    /// A label selector, if any.
    pub label_selector: Option<String>,
    /// A field selector, if any.
    pub field_selector: Option<String>,
    /// Dot paths the host keeps in each item.
    pub field_masks: Option<Vec<String>>,
}

/// The request of `oci/v1/resolve_images`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveImagesRequest {
    /// One entry per distinct image, answered in the same order.
    pub lookups: Vec<ImageLookup>,
    /// The longest the host may spend on any one lookup.
    pub timeout_ms: u64,
}

/// One image and the credentials to try for it, in the kubelet's order.
#[derive(Clone, PartialEq, Serialize)]
pub struct ImageLookup {
    /// The normalised reference.
    pub image: String,
    /// Credentials to try in order; empty means anonymous. Serialised only into the host call.
    pub credentials: Vec<Value>,
}

impl std::fmt::Debug for ImageLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageLookup")
            .field("image", &self.image)
            .field("credentials", &self.credentials.len())
            .finish()
    }
}

/// The answer of `oci/v1/resolve_images`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResolveImagesResponse {
    /// One result per lookup, in request order.
    pub results: Vec<ImageResolution>,
}

/// What the host established about one image.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum ImageResolution {
    /// The manifest exists for one of the credentials (or anonymously).
    Found {
        /// The image the result is for.
        image: String,
        /// The manifest digest.
        digest: String,
        /// The manifest's media type.
        #[serde(default, rename = "mediaType")]
        media_type: Option<String>,
    },
    /// A registry that let the client see the repository answered 404.
    NotFound {
        /// The image the result is for.
        image: String,
        /// The registry's message.
        #[serde(default)]
        detail: String,
    },
    /// Every credential (or the anonymous request) was refused.
    Unauthorized {
        /// The image the result is for.
        image: String,
        /// The registry's message.
        #[serde(default)]
        detail: String,
    },
    /// The registry could not be asked, or gave no usable answer.
    Unreachable {
        /// The image the result is for.
        image: String,
        /// What went wrong.
        #[serde(default)]
        detail: String,
    },
}

impl ImageResolution {
    /// The image this result is about.
    pub fn image(&self) -> &str {
        match self {
            ImageResolution::Found { image, .. }
            | ImageResolution::NotFound { image, .. }
            | ImageResolution::Unauthorized { image, .. }
            | ImageResolution::Unreachable { image, .. } => image,
        }
    }
}

/// The waPC host of a Kubewarden policy server (or of `kwctl run`, or the test host).
#[derive(Debug, Clone, Copy, Default)]
pub struct WapcHost;

impl WapcHost {
    /// One host call with a JSON request and a JSON answer.
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

    fn manifest_digest(&self, reference: &str) -> Result<String, String> {
        self.call::<ManifestDigest>("oci", "v1/manifest_digest", &reference)
            .map(|answer| answer.digest)
    }

    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, String> {
        self.call("kubernetes", "get_resource", request)
    }

    fn oci_manifest(&self, reference: &str) -> Result<Value, String> {
        self.call("oci", "v1/oci_manifest", &reference)
    }

    fn oci_manifest_config(&self, reference: &str) -> Result<Value, String> {
        self.call("oci", "v1/oci_manifest_config", &reference)
    }

    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, String> {
        self.call("kubernetes", "list_resources_all", request)
    }

    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, String> {
        self.call("oci", RESOLVE_IMAGES_OPERATION, request)
    }
}

/// A host that answers from memory, for unit tests, fuzzing and benchmarks: the same decision
/// code runs against it as against a policy server. Unknown references answer the registry's
/// "manifest unknown" text; unknown objects the Kubernetes "Cannot find" text; and
/// `resolve_images` is a stock host's `unknown operation` unless enabled.
#[derive(Debug, Default)]
pub struct InMemoryHost {
    digests: HashMap<String, Result<String, String>>,
    objects: HashMap<(String, String, String), Value>,
    resource_error: Option<String>,
    /// Per image: the credential usernames that may see it (empty: public), and its digest.
    credentialed: Option<HashMap<String, (Vec<String>, String)>>,
    manifests: HashMap<String, Value>,
    configs: HashMap<String, Value>,
    nodes: Option<Value>,
    latency: Duration,
    clock: Cell<Duration>,
    calls: RefCell<Vec<String>>,
}

impl InMemoryHost {
    /// An empty registry and an empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `reference` resolve to `digest`.
    pub fn with_digest(mut self, reference: &str, digest: &str) -> Self {
        self.digests
            .insert(reference.to_owned(), Ok(digest.to_owned()));
        self
    }

    /// Makes the lookup of `reference` fail with the host error `text`.
    pub fn with_error(mut self, reference: &str, text: &str) -> Self {
        self.digests
            .insert(reference.to_owned(), Err(text.to_owned()));
        self
    }

    /// Adds a namespaced object (its `kind`, `metadata.namespace` and `metadata.name`).
    pub fn with_object(mut self, object: Value) -> Self {
        let field = |pointer: &str| {
            object
                .pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let key = (
            field("/kind"),
            field("/metadata/namespace"),
            field("/metadata/name"),
        );
        self.objects.insert(key, object);
        self
    }

    /// Makes every `get_resource` fail with `text` (e.g. the "not been granted access" refusal).
    pub fn with_resource_error(mut self, text: &str) -> Self {
        self.resource_error = Some(text.to_owned());
        self
    }

    /// Implements `oci/v1/resolve_images`: `image` exists with `digest` and is visible to the
    /// credentials whose username is in `users` (to anyone when `users` is empty).
    pub fn with_private_image(mut self, image: &str, users: &[&str], digest: &str) -> Self {
        let users = users.iter().map(|u| (*u).to_owned()).collect();
        self.credentialed
            .get_or_insert_with(HashMap::new)
            .insert(image.to_owned(), (users, digest.to_owned()));
        self
    }

    /// Serves `manifest` (an image manifest or an index) for `reference`.
    pub fn with_manifest(mut self, reference: &str, manifest: Value) -> Self {
        self.manifests.insert(reference.to_owned(), manifest);
        self
    }

    /// Serves `config` (an image config with `os`/`architecture`) with the manifest of `reference`.
    pub fn with_config(mut self, reference: &str, config: Value) -> Self {
        self.configs.insert(reference.to_owned(), config);
        self
    }

    /// Serves `nodes` (a `NodeList`) for `list_resources_all` of Nodes.
    pub fn with_nodes(mut self, nodes: Value) -> Self {
        self.nodes = Some(nodes);
        self
    }

    /// Makes every registry and Kubernetes call take `latency` on the simulated clock.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Records a call and lets the simulated clock run for it.
    fn record(&self, call: String) {
        self.clock.set(self.clock.get() + self.latency);
        self.calls.borrow_mut().push(call);
    }

    /// Every call so far, in order: `digest <ref>`, `get <Kind> <ns>/<name>`,
    /// `resolve <n> within <timeout>ms`.
    pub fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }

    /// Only the references looked up with `manifest_digest`.
    pub fn digest_calls(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| c.strip_prefix("digest ").map(str::to_owned))
            .collect()
    }
}

impl Host for InMemoryHost {
    fn now(&self) -> Duration {
        self.clock.get()
    }

    fn oci_manifest(&self, reference: &str) -> Result<Value, String> {
        self.record(format!("manifest {reference}"));
        self.manifests.get(reference).cloned().ok_or_else(|| {
            format!("error invoking host capability oci.oci_manifest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://{reference}, envelope: OCI API errors: [OCI API error: manifest unknown]")
        })
    }

    fn oci_manifest_config(&self, reference: &str) -> Result<Value, String> {
        self.record(format!("config {reference}"));
        match (self.manifests.get(reference), self.configs.get(reference)) {
            (Some(manifest), Some(config)) => Ok(serde_json::json!({"manifest": manifest, "digest": "", "config": config})),
            _ => Err(format!("error invoking host capability oci.oci_manifest_config: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://{reference}, envelope: OCI API errors: [OCI API error: manifest unknown]")),
        }
    }

    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, String> {
        self.record(format!("list {}", request.kind));
        if let Some(error) = &self.resource_error {
            return Err(error.clone());
        }
        Ok(self.nodes.clone().unwrap_or_else(
            || serde_json::json!({"apiVersion": "v1", "kind": "NodeList", "items": []}),
        ))
    }

    fn manifest_digest(&self, reference: &str) -> Result<String, String> {
        self.record(format!("digest {reference}"));
        self.digests.get(reference).cloned().unwrap_or_else(|| {
            Err(format!(
                "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://{reference}, envelope: OCI API errors: [OCI API error: manifest unknown]"
            ))
        })
    }

    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, String> {
        let namespace = request.namespace.clone().unwrap_or_default();
        self.record(format!(
            "get {} {}/{}",
            request.kind, namespace, request.name
        ));
        if let Some(error) = &self.resource_error {
            return Err(error.clone());
        }
        self.objects
            .get(&(request.kind.clone(), namespace.clone(), request.name.clone()))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "error invoking host capability kubernetes.get_resource: Host error: Cannot find {}/{} named '{}' inside of namespace 'Some(\"{}\")'",
                    request.api_version, request.kind, request.name, namespace
                )
            })
    }

    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, String> {
        self.record(format!(
            "resolve {} within {}ms",
            request.lookups.len(),
            request.timeout_ms
        ));
        let Some(images) = &self.credentialed else {
            return Err(format!(
                "error invoking host capability oci.{RESOLVE_IMAGES_OPERATION}: Host error: unknown operation: {RESOLVE_IMAGES_OPERATION}"
            ));
        };
        let results = request
            .lookups
            .iter()
            .map(|lookup| {
                let image = lookup.image.clone();
                let users: Vec<&str> = lookup
                    .credentials
                    .iter()
                    .filter_map(|c| c["username"].as_str())
                    .collect();
                match images.get(&image) {
                    Some((allowed, digest))
                        if allowed.is_empty()
                            || users.iter().any(|u| allowed.iter().any(|a| a == u)) =>
                    {
                        ImageResolution::Found {
                            image,
                            digest: digest.clone(),
                            media_type: None,
                        }
                    }
                    Some(_) => ImageResolution::Unauthorized {
                        image,
                        detail: "401 Unauthorized".into(),
                    },
                    None => ImageResolution::NotFound {
                        image,
                        detail: "manifest unknown".into(),
                    },
                }
            })
            .collect();
        Ok(ResolveImagesResponse { results })
    }
}
