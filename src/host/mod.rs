//! The host boundary: every call the policy makes out of the sandbox goes through [`Host`], so
//! the decision logic runs unchanged under unit tests ([`InMemoryHost`]), the project's test
//! host and a real Kubewarden policy server ([`WapcHost`]). Failed calls come back as a
//! [`HostError`], classified once, here, from the host's text. The calls of one evaluation
//! spend one time [`budget`].

pub mod budget;
mod error;
mod memory;
mod wapc;

use std::time::Duration;

pub use error::{summarise, HostError, HostErrorKind};
pub use memory::InMemoryHost;
pub use wapc::WapcHost;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The credentialed batch lookup this project proposes (`docs/design/credentialed-lookups.md`).
pub const RESOLVE_IMAGES_OPERATION: &str = "v1/resolve_images";

/// The capabilities the policy needs from its host. A failed call is a [`HostError`] to decide
/// on, never an `Err` out of `validate`.
pub trait Host {
    /// `oci/v1/manifest_digest`: the digest of `reference`, with the host's own credentials.
    fn manifest_digest(&self, reference: &str) -> Result<String, HostError>;

    /// `kubernetes/get_resource`: one object from the cluster.
    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, HostError>;

    /// `oci/v1/oci_manifest`: the manifest or index `reference` names.
    fn oci_manifest(&self, reference: &str) -> Result<Value, HostError>;

    /// `oci/v1/oci_manifest_config`: an image manifest with its config (for its platform).
    fn oci_manifest_config(&self, reference: &str) -> Result<Value, HostError>;

    /// `kubernetes/list_resources_all`: every object of a cluster-wide kind (Nodes).
    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, HostError>;

    /// Monotonic time since an arbitrary origin: the policy's time budget is measured with it
    /// (the WASI clock under a real host, a simulated one in tests).
    fn now(&self) -> Duration;

    /// Wall-clock time since the Unix epoch: the expiry of the lookup broker's seals, which
    /// the broker checks with its own clock (the WASI realtime clock under a real host, a
    /// fixed instant in tests).
    fn unix_time(&self) -> Duration;

    /// `oci/v1/resolve_images`: all of a request's lookups, each with the credentials the
    /// kubelet would try. Stock hosts answer `unknown operation`.
    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, HostError>;
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
    pub results: Vec<LookupAnswer>,
}

/// What the host established about one image, after trying every credential it was given in
/// order, as the kubelet does (`docs/design/credentialed-lookups.md`): `notFound` only when every
/// credential was tried and got a definitive answer, at least one a 404.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum LookupAnswer {
    /// The manifest exists for one of the credentials (or anonymously).
    Found {
        /// The image the result is for.
        image: String,
        /// The manifest digest.
        digest: String,
        /// The manifest's media type.
        #[serde(default, rename = "mediaType")]
        media_type: Option<String>,
        /// Which credential (its index in the lookup) read it; absent for anonymous lookups
        /// and from hosts that do not say.
        #[serde(default)]
        credential: Option<usize>,
    },
    /// Every credential was tried and none read the manifest; at least one got a 404.
    NotFound {
        /// The image the result is for.
        image: String,
        /// The registry's message.
        #[serde(default)]
        detail: String,
        /// How each credential's attempt ended, in order (empty when the host does not say).
        #[serde(default)]
        attempts: Vec<Attempt>,
    },
    /// Every credential (or the anonymous request) was refused.
    Unauthorized {
        /// The image the result is for.
        image: String,
        /// The registry's message.
        #[serde(default)]
        detail: String,
        /// How each credential's attempt ended, in order (empty when the host does not say).
        #[serde(default)]
        attempts: Vec<Attempt>,
    },
    /// The registry could not be asked, or gave no usable answer for some credential.
    Unreachable {
        /// The image the result is for.
        image: String,
        /// What went wrong.
        #[serde(default)]
        detail: String,
        /// How each credential's attempt ended, in order (empty when the host does not say);
        /// fewer than the credentials when time ran out.
        #[serde(default)]
        attempts: Vec<Attempt>,
    },
}

/// How one credential's attempt ended, as the host reports it, so that messages can say which
/// pull secret saw a 404 and which was refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Attempt {
    /// The attempt's outcome.
    pub outcome: AttemptOutcome,
    /// The registry's message or the transport error; never a credential.
    #[serde(default)]
    pub detail: String,
}

/// The outcome of one credential's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AttemptOutcome {
    /// The manifest was read.
    Found,
    /// A definitive 404.
    NotFound,
    /// A definitive refusal (401/403).
    Unauthorized,
    /// No definitive answer (transport, time-out, 5xx, 429, not a manifest).
    Unreachable,
}

impl LookupAnswer {
    /// The image this result is about.
    pub fn image(&self) -> &str {
        match self {
            LookupAnswer::Found { image, .. }
            | LookupAnswer::NotFound { image, .. }
            | LookupAnswer::Unauthorized { image, .. }
            | LookupAnswer::Unreachable { image, .. } => image,
        }
    }
}
