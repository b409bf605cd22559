//! A host that answers from memory, for unit tests, fuzzing and benchmarks.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;

use super::{
    Attempt, AttemptOutcome, Host, HostError, ListAllRequest, LookupAnswer, ResolveImagesRequest,
    ResolveImagesResponse, ResourceRequest, RESOLVE_IMAGES_OPERATION,
};

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
    /// Per (image, credential username): what that credential's attempt gets, overriding
    /// `credentialed` (a registry that answers per user).
    user_answers: HashMap<(String, String), (AttemptOutcome, String)>,
    manifests: HashMap<String, Value>,
    configs: HashMap<String, Value>,
    nodes: Option<Value>,
    latency: Duration,
    clock: Cell<Duration>,
    readings: Cell<usize>,
    /// The wall clock, when a test sets it; else [`InMemoryHost::UNIX_TIME`].
    unix_time: Option<Duration>,
    calls: RefCell<Vec<String>>,
}

impl InMemoryHost {
    /// An empty registry and an empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes `reference` exist with `digest`.
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

    /// Implements `oci/v1/resolve_images` (if not yet) and makes the attempt of the credential
    /// named `user` on `image` end with `outcome` and `detail`, as a registry that answers per
    /// user does (404 to one, 401 to another); for `Found`, `detail` is the digest.
    pub fn with_user_answer(
        mut self,
        image: &str,
        user: &str,
        outcome: AttemptOutcome,
        detail: &str,
    ) -> Self {
        self.credentialed.get_or_insert_with(HashMap::new);
        self.user_answers.insert(
            (image.to_owned(), user.to_owned()),
            (outcome, detail.to_owned()),
        );
        self
    }

    /// One credential's attempt (`None`: anonymous) on `image`, and the digest if found.
    fn attempt(&self, image: &str, user: Option<&str>) -> (Attempt, Option<String>) {
        if let Some((outcome, detail)) =
            user.and_then(|u| self.user_answers.get(&(image.to_owned(), u.to_owned())))
        {
            let digest = (*outcome == AttemptOutcome::Found).then(|| detail.clone());
            let attempt = Attempt {
                outcome: *outcome,
                detail: detail.clone(),
            };
            return (attempt, digest);
        }
        let images = self.credentialed.as_ref();
        let (outcome, detail, digest) = match images.and_then(|i| i.get(image)) {
            Some((allowed, digest))
                if allowed.is_empty() || user.is_some_and(|u| allowed.iter().any(|a| a == u)) =>
            {
                (AttemptOutcome::Found, String::new(), Some(digest.clone()))
            }
            Some(_) => (
                AttemptOutcome::Unauthorized,
                "401 Unauthorized".into(),
                None,
            ),
            None => (AttemptOutcome::NotFound, "manifest unknown".into(), None),
        };
        (Attempt { outcome, detail }, digest)
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

    /// The wall clock of a host whose test did not set one: 2026-01-01T00:00:00Z.
    pub const UNIX_TIME: Duration = Duration::from_secs(1_767_225_600);

    /// Sets the wall clock ([`Host::unix_time`]), which does not run.
    pub fn with_unix_time(mut self, since_epoch: Duration) -> Self {
        self.unix_time = Some(since_epoch);
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

    /// How often the policy read the clock: under a real host, each reading is a WASI call.
    pub fn clock_readings(&self) -> usize {
        self.readings.get()
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
    fn unix_time(&self) -> Duration {
        self.unix_time.unwrap_or(Self::UNIX_TIME)
    }

    fn now(&self) -> Duration {
        self.readings.set(self.readings.get() + 1);
        self.clock.get()
    }

    fn oci_manifest(&self, reference: &str) -> Result<Value, HostError> {
        self.record(format!("manifest {reference}"));
        self.manifests
            .get(reference)
            .cloned()
            .ok_or_else(|| manifest_unknown("oci_manifest", reference))
    }

    fn oci_manifest_config(&self, reference: &str) -> Result<Value, HostError> {
        self.record(format!("config {reference}"));
        match (self.manifests.get(reference), self.configs.get(reference)) {
            (Some(manifest), Some(config)) => {
                Ok(serde_json::json!({"manifest": manifest, "digest": "", "config": config}))
            }
            _ => Err(manifest_unknown("oci_manifest_config", reference)),
        }
    }

    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, HostError> {
        self.record(format!("list {}", request.kind));
        if let Some(error) = &self.resource_error {
            return Err(HostError::kubernetes(error.as_str()));
        }
        Ok(self.nodes.clone().unwrap_or_else(
            || serde_json::json!({"apiVersion": "v1", "kind": "NodeList", "items": []}),
        ))
    }

    fn manifest_digest(&self, reference: &str) -> Result<String, HostError> {
        self.record(format!("digest {reference}"));
        match self.digests.get(reference) {
            Some(Ok(digest)) => Ok(digest.clone()),
            Some(Err(text)) => Err(HostError::lookup(text.as_str())),
            None => Err(manifest_unknown("manifest_digest", reference)),
        }
    }

    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, HostError> {
        let namespace = request.namespace.clone().unwrap_or_default();
        self.record(format!(
            "get {} {}/{}",
            request.kind, namespace, request.name
        ));
        if let Some(error) = &self.resource_error {
            return Err(HostError::kubernetes(error.as_str()));
        }
        self.objects
            .get(&(request.kind.clone(), namespace.clone(), request.name.clone()))
            .cloned()
            .ok_or_else(|| {
                HostError::kubernetes(format!(
                    "error invoking host capability kubernetes.get_resource: Host error: Cannot find {}/{} named '{}' inside of namespace 'Some(\"{}\")'",
                    request.api_version, request.kind, request.name, namespace
                ))
            })
    }

    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, HostError> {
        self.record(format!(
            "resolve {} within {}ms",
            request.lookups.len(),
            request.timeout_ms
        ));
        if self.credentialed.is_none() {
            return Err(HostError::lookup(format!(
                "error invoking host capability oci.{RESOLVE_IMAGES_OPERATION}: Host error: unknown operation: {RESOLVE_IMAGES_OPERATION}"
            )));
        }
        let results = request
            .lookups
            .iter()
            .map(|lookup| self.resolve_one(&lookup.image, &lookup.credentials))
            .collect();
        Ok(ResolveImagesResponse { results })
    }
}

impl InMemoryHost {
    /// The kubelet's loop, as the capability's contract has it: every credential in order, the
    /// first success wins, any failure moves on; `notFound` when every attempt was a 404 or a
    /// refusal and one was a 404; anonymous only without credentials.
    fn resolve_one(&self, image: &str, credentials: &[Value]) -> LookupAnswer {
        let image = image.to_owned();
        let users: Vec<Option<&str>> = if credentials.is_empty() {
            vec![None]
        } else {
            credentials
                .iter()
                .map(|c| Some(c["username"].as_str().unwrap_or_default()))
                .collect()
        };
        let mut attempts = Vec::new();
        for (index, user) in users.into_iter().enumerate() {
            let (attempt, digest) = self.attempt(&image, user);
            if let Some(digest) = digest {
                return LookupAnswer::Found {
                    image,
                    digest,
                    media_type: None,
                    credential: (!credentials.is_empty()).then_some(index),
                };
            }
            attempts.push(attempt);
        }
        let any = |o| attempts.iter().any(|a: &Attempt| a.outcome == o);
        let (unreachable, not_found) = (
            any(AttemptOutcome::Unreachable),
            any(AttemptOutcome::NotFound),
        );
        let detail = attempts
            .iter()
            .map(|a| a.detail.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let attempts = if credentials.is_empty() {
            Vec::new()
        } else {
            attempts
        };
        if unreachable {
            LookupAnswer::Unreachable {
                image,
                detail,
                attempts,
            }
        } else if not_found {
            LookupAnswer::NotFound {
                image,
                detail,
                attempts,
            }
        } else {
            LookupAnswer::Unauthorized {
                image,
                detail,
                attempts,
            }
        }
    }
}

/// The text a registry's 404 `manifest unknown` reaches the guest as.
fn manifest_unknown(operation: &str, reference: &str) -> HostError {
    HostError::lookup(format!(
        "error invoking host capability oci.{operation}: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://{reference}, envelope: OCI API errors: [OCI API error: manifest unknown]"
    ))
}
