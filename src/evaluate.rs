//! The decision for one admission request: which images to check, whose credentials apply,
//! one lookup per distinct reference, and the findings handed to [`crate::report`]. Pure apart
//! from the [`Host`].

use std::collections::HashSet;

use crate::admission::{AdmissionRequest, Operation, ValidationPayload};
use crate::host::Host;
use crate::pull_secrets::{self, PullSecrets};
use crate::reference::ImageReference;
use crate::registry::{look_up, Budget};
use crate::report::{decide, Decision, Finding, Resource, Subject};
use crate::settings::Settings;
use crate::verdict::{Failure, FailureKind, Verdict};
use crate::workload::{read_pod_spec, ContainerImage, PullPolicy, WorkloadKind};

/// Answers waPC `validate`: never an error, so a malformed request or a failing host becomes
/// an explained decision instead of an HTTP 500 for the user's deploy.
pub fn validate_payload(payload: &[u8], host: &impl Host) -> Vec<u8> {
    let decision = match serde_json::from_slice::<ValidationPayload>(payload) {
        Err(e) => Decision::malformed(format!(
            "resolvable-images-policy cannot read the admission request: {e}"
        )),
        Ok(payload) => match Settings::from_value(&payload.settings) {
            Err(e) => Decision::malformed(format!("resolvable-images-policy: {e}")),
            Ok(settings) => evaluate(&payload.request, &settings, host),
        },
    };
    decision.to_json()
}

/// Decides one admission request.
pub fn evaluate(request: &AdmissionRequest, settings: &Settings, host: &impl Host) -> Decision {
    let budget = Budget::start(host, settings.time_budget);
    let Some(kind) = WorkloadKind::from_group_kind(&request.kind.group, &request.kind.kind) else {
        return Decision::accept();
    };
    if !matches!(request.operation, Operation::Create | Operation::Update)
        || settings.is_namespace_exempt(&request.namespace)
    {
        return Decision::accept();
    }
    let resource = Resource {
        kind,
        namespace: request.namespace.clone(),
        name: request.display_name(),
    };
    let spec = match read_pod_spec(kind, &request.object) {
        Ok(spec) => spec,
        Err(e) => return Decision::malformed(format!("{resource}: {e}")),
    };
    let already_running = match request.operation {
        Operation::Update => previous_images(kind, &request.old_object),
        _ => HashSet::new(),
    };
    let checks: Vec<Check> = spec
        .containers
        .iter()
        .cloned()
        .map(Check::new)
        .filter(|check| !already_running.contains(&check.identity()))
        .filter(|check| check.needs_registry(settings))
        .collect();
    if checks.is_empty() {
        return Decision::accept();
    }

    let mut notes = Vec::new();
    let secrets = settings
        .pull_secrets
        .consult
        .then(|| pull_secrets::resolve(kind, &spec, &request.namespace, host));
    if let Some(reason) = secrets.as_ref().and_then(|s| s.unavailable.as_deref()) {
        notes.push(format!(
            "pull secrets were not consulted ({reason}); images were checked with the policy server's credentials"
        ));
    }
    let consulted = secrets.as_ref().filter(|s| s.consulted());
    let keyring = consulted
        .filter(|_| settings.pull_secrets.credentialed_lookups)
        .map(|s| &s.keyring);
    let lookups = look_up(
        checks.iter().filter_map(|c| c.reference.as_ref().ok()),
        keyring,
        &budget,
        host,
    );
    if let Some(reason) = &lookups.fallback {
        notes.push(format!(
            "credentialed lookups (oci/v1/resolve_images) are not available here ({reason}); images were checked with the policy server's credentials"
        ));
    }
    let with_pod_credentials = keyring.is_some() && lookups.fallback.is_none();

    let mut findings: Vec<Finding> = consulted
        .into_iter()
        .flat_map(|s| s.findings.iter())
        .map(|finding| Finding {
            subject: Subject::PullSecret {
                description: finding.description.clone(),
            },
            failure: finding.failure.clone(),
        })
        .collect();
    for check in checks {
        let failure = match &check.reference {
            Err(failure) => failure.clone(),
            Ok(reference) => match lookups.verdicts.get(&reference.lookup_reference()) {
                Some(Verdict::Failed(failure)) => explain_refusal(
                    failure,
                    reference,
                    consulted,
                    &request.namespace,
                    with_pod_credentials,
                ),
                Some(Verdict::Resolved { .. }) | None => continue,
            },
        };
        findings.push(Finding::image(
            check.container,
            check.reference.ok(),
            failure,
        ));
    }
    decide(&resource, &findings, &notes, &settings.actions)
}

/// A refused lookup means more once the pod's secrets are known: no secret covering the
/// registry is its own finding; a covering secret the lookup could not use is said so.
fn explain_refusal(
    failure: &Failure,
    reference: &ImageReference,
    secrets: Option<&PullSecrets>,
    namespace: &str,
    with_pod_credentials: bool,
) -> Failure {
    let Some(secrets) = secrets.filter(|_| failure.kind == FailureKind::Unauthorized) else {
        return failure.clone();
    };
    if secrets.keyring.lookup(&reference.name()).is_empty() {
        Failure::new(
            FailureKind::UncoveredRegistry,
            format!(
                "no pull secret in namespace {namespace} covers {}; {}",
                reference.registry(),
                failure.detail
            ),
        )
    } else if with_pod_credentials {
        Failure::new(
            FailureKind::Unauthorized,
            format!(
                "the pod's pull secrets for {} were refused: {}",
                reference.registry(),
                failure.detail
            ),
        )
    } else {
        Failure::new(
            FailureKind::Unauthorized,
            format!(
                "the pod's pull secrets cover {} but this check used the policy server's credentials; {}",
                reference.registry(),
                failure.detail
            ),
        )
    }
}

/// One container's image on its way to a verdict.
struct Check {
    container: ContainerImage,
    reference: Result<ImageReference, Failure>,
}

impl Check {
    fn new(container: ContainerImage) -> Self {
        let reference = ImageReference::parse(&container.image)
            .map_err(|e| Failure::new(FailureKind::InvalidReference, e.to_string()));
        Check {
            container,
            reference,
        }
    }

    /// What identifies the pulled image: the lookup reference, or the raw string if invalid.
    fn identity(&self) -> String {
        match &self.reference {
            Ok(reference) => reference.lookup_reference(),
            Err(_) => self.container.image.clone(),
        }
    }

    /// False for images the kubelet will never fetch (`Never`) and for exempt images; invalid
    /// references always count, since the kubelet refuses them before any pull policy applies.
    fn needs_registry(&self, settings: &Settings) -> bool {
        match &self.reference {
            Err(_) => true,
            Ok(reference) => {
                PullPolicy::effective(self.container.pull_policy.as_deref(), reference)
                    != PullPolicy::Never
                    && !settings.is_image_exempt(&reference.to_string())
                    && !settings.is_image_exempt(&reference.lookup_reference())
            }
        }
    }
}

/// The images of the object before an UPDATE; unreadable old objects count as having none.
fn previous_images(kind: WorkloadKind, old_object: &serde_json::Value) -> HashSet<String> {
    read_pod_spec(kind, old_object)
        .map(|spec| spec.containers)
        .unwrap_or_default()
        .into_iter()
        .map(|container| Check::new(container).identity())
        .collect()
}
