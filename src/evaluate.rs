//! The decision for one admission request: which images to check, one lookup per distinct
//! reference, and the findings handed to [`crate::report`]. Pure apart from the [`Host`].

use std::collections::{BTreeMap, HashSet};

use crate::admission::{AdmissionRequest, Operation, ValidationPayload};
use crate::host::Host;
use crate::reference::ImageReference;
use crate::report::{decide, Decision, Finding, Resource};
use crate::settings::Settings;
use crate::verdict::{classify_host_error, Failure, FailureKind, Verdict};
use crate::workload::{container_images, ContainerImage, PullPolicy, WorkloadKind};

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
    let containers = match container_images(kind, &request.object) {
        Ok(containers) => containers,
        Err(e) => return Decision::malformed(format!("{resource}: {e}")),
    };
    let already_running = match request.operation {
        Operation::Update => previous_images(kind, &request.old_object),
        _ => HashSet::new(),
    };

    let checks: Vec<Check> = containers
        .into_iter()
        .map(Check::new)
        .filter(|check| !already_running.contains(&check.identity()))
        .filter(|check| check.needs_registry(settings))
        .collect();
    let verdicts = look_up(&checks, host);
    let findings: Vec<Finding> = checks
        .into_iter()
        .filter_map(|check| check.into_finding(&verdicts))
        .collect();
    decide(&resource, &findings, &settings.actions)
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

    fn into_finding(self, verdicts: &BTreeMap<String, Verdict>) -> Option<Finding> {
        let failure = match &self.reference {
            Err(failure) => failure.clone(),
            Ok(reference) => match verdicts.get(&reference.lookup_reference()) {
                Some(Verdict::Failed(failure)) => failure.clone(),
                Some(Verdict::Resolved { .. }) | None => return None,
            },
        };
        Some(Finding {
            container: self.container,
            reference: self.reference.ok(),
            failure,
        })
    }
}

/// One host call per distinct lookup reference, however many containers share it.
fn look_up(checks: &[Check], host: &impl Host) -> BTreeMap<String, Verdict> {
    let mut verdicts = BTreeMap::new();
    for reference in checks.iter().filter_map(|c| c.reference.as_ref().ok()) {
        verdicts
            .entry(reference.lookup_reference())
            .or_insert_with_key(|key| match host.manifest_digest(key) {
                Ok(digest) => Verdict::Resolved { digest },
                Err(text) => Verdict::Failed(classify_host_error(&text)),
            });
    }
    verdicts
}

/// The images of the object before an UPDATE; unreadable old objects count as having none.
fn previous_images(kind: WorkloadKind, old_object: &serde_json::Value) -> HashSet<String> {
    container_images(kind, old_object)
        .unwrap_or_default()
        .into_iter()
        .map(|container| Check::new(container).identity())
        .collect()
}
