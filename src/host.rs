//! The host boundary: every call the policy makes out of the sandbox goes through [`Host`], so
//! the decision logic runs unchanged under unit tests (an in-memory fake), the project's test
//! host and a real Kubewarden policy server.

/// The capabilities the policy needs from its host.
pub trait Host {
    /// Asks the registry for the digest of `reference` (`oci/v1/manifest_digest`). The error is
    /// the host's text, which [`crate::verdict::classify_host_error`] interprets.
    fn manifest_digest(&self, reference: &str) -> Result<String, String>;
}

/// The waPC host of a Kubewarden policy server (or of `kwctl run`).
#[derive(Debug, Clone, Copy, Default)]
pub struct WapcHost;

/// The binding every Kubewarden host capability lives under.
const BINDING: &str = "kubewarden";

impl WapcHost {
    /// One host call with a JSON request and a JSON answer. Errors become their text, so a
    /// failed call is a verdict for the caller to decide on, never an `Err` out of `validate`.
    fn call<T: serde::de::DeserializeOwned>(
        &self,
        namespace: &str,
        operation: &str,
        request: &impl serde::Serialize,
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
#[derive(serde::Deserialize)]
struct ManifestDigest {
    digest: String,
}

impl Host for WapcHost {
    fn manifest_digest(&self, reference: &str) -> Result<String, String> {
        self.call::<ManifestDigest>("oci", "v1/manifest_digest", &reference)
            .map(|answer| answer.digest)
    }
}

/// A host that answers from memory, for unit tests, fuzzing and benchmarks: the same decision
/// code runs against it as against a policy server. Unknown references answer the registry's
/// "manifest unknown" text.
#[derive(Debug, Default)]
pub struct InMemoryHost {
    answers: std::collections::HashMap<String, Result<String, String>>,
    calls: std::cell::RefCell<Vec<String>>,
}

impl InMemoryHost {
    /// An empty registry: every lookup answers "manifest unknown".
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `reference` resolve to `digest`.
    pub fn with_digest(mut self, reference: &str, digest: &str) -> Self {
        self.answers
            .insert(reference.to_owned(), Ok(digest.to_owned()));
        self
    }

    /// Makes the lookup of `reference` fail with the host error `text`.
    pub fn with_error(mut self, reference: &str, text: &str) -> Self {
        self.answers
            .insert(reference.to_owned(), Err(text.to_owned()));
        self
    }

    /// Every reference looked up so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }
}

impl Host for InMemoryHost {
    fn manifest_digest(&self, reference: &str) -> Result<String, String> {
        self.calls.borrow_mut().push(reference.to_owned());
        self.answers.get(reference).cloned().unwrap_or_else(|| {
            Err(format!(
                "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://{reference}, envelope: OCI API errors: [OCI API error: manifest unknown]"
            ))
        })
    }
}
