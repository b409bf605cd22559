//! Background audit. Kubewarden's audit scanner sends every stored workload again, as a CREATE,
//! to `/audit/<policy>`, and records `allowed: false` as a **fail** and `true` as a **pass**,
//! with `status.message`; it drops warnings (docs/audit.md). The policy server does not say
//! which endpoint called, so an audit request is known by its shape; its answer says what the
//! next pull of the object's images will do, not whether a request would be admitted.

use serde::Deserialize;

use crate::answer::Decision;
use crate::plan::admission::{AdmissionRequest, Operation};
use crate::plan::finding::{Finding, Subject};
use crate::settings::ActionFor;
use crate::vocabulary::action::Action;
use crate::vocabulary::failure::{FailureKind, Observed};
use crate::vocabulary::object::{Metadata, Object, Resource};
use crate::vocabulary::text::truncate;

/// The longest message an audit answer carries: Policy Reporter and the Kubewarden UI show
/// a result's message in a table cell, and a report is stored in etcd once per resource.
pub const AUDIT_MESSAGE_MAX: usize = 2048;

/// Where a request comes from, as its shape tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The API server, admitting a change.
    Admission,
    /// The audit scanner, re-sending a stored object.
    Audit,
}

impl Origin {
    /// The audit scanner sends a CREATE with an empty `userInfo` and the object as stored, with
    /// its `resourceVersion` (`internal/audit-scanner/scanner/admission_request.go`). The API
    /// server always names the user and refuses a CREATE that carries a `resourceVersion`, so
    /// neither signal alone is trusted, and an admission request pays for one string comparison.
    pub fn of(request: &AdmissionRequest, metadata: impl FnOnce() -> Metadata) -> Origin {
        if request.operation == Operation::Create
            && request.user_info.username.is_empty()
            && !metadata().resource_version.is_empty()
        {
            Origin::Audit
        } else {
            Origin::Admission
        }
    }
}

/// The answer to an audit request on an instance whose `audit.lookups` is off: a pass that says
/// nothing was checked, so that a report never reads as a clean bill of health.
pub fn not_audited() -> Decision {
    Decision {
        message: Some(
            "not audited: this instance answers admission and does not look images up for the audit scanner (audit.lookups is false); audit with an instance of its own (docs/audit.md)"
                .to_owned(),
        ),
        ..Decision::accept()
    }
}

/// True when an audit reports `finding` as a failure: what admission would reject, and an
/// image gone from its registry (or from every location the nodes contact) that only some
/// nodes' caches still hold, since the next Pod may land on any node.
fn fails(finding: &Finding, actions: &impl ActionFor) -> bool {
    let kind = finding.failure.kind;
    let uncached = match finding.failure.observed {
        Observed::RefusedButCached => FailureKind::BlockedRegistry,
        _ => FailureKind::Absent,
    };
    actions.action_for(kind) == Action::Reject
        || (kind == FailureKind::CachedOnNodes && actions.action_for(uncached) == Action::Reject)
}

/// The audit answer for the findings about `object`: a fail that names each image that will
/// not pull and what breaks next, or a pass that lists what could not be verified and why that
/// is no failure. `notes` are the check's own warnings, which the scanner would drop.
pub fn report(
    resource: &Resource,
    object: Object<'_>,
    findings: &[Finding],
    notes: &[String],
    actions: &impl ActionFor,
) -> Decision {
    let (failed, unverified): (Vec<&Finding>, Vec<&Finding>) =
        findings.iter().partition(|f| fails(f, actions));
    let mut lines: Vec<String> = Vec::new();
    if !failed.is_empty() {
        let noun = if failed.len() == 1 { "image" } else { "images" };
        lines.push(format!(
            "{resource}: {} {noun} will not pull. Next: {}.",
            failed.len(),
            what_breaks_next(&resource.kind)
        ));
        let running = RunningImages::of(object);
        lines.extend(failed.iter().map(|f| match running.pin_hint(f) {
            Some(hint) => format!("{} {hint}", f.rejection_line()),
            None => f.rejection_line(),
        }));
    }
    if !unverified.is_empty() {
        let records: Vec<String> = unverified.iter().map(|f| f.audit_record()).collect();
        lines.push(format!(
            "not verified, so no failure (the next pull may still succeed): {}",
            records.join("; ")
        ));
    }
    lines.extend(notes.iter().cloned());
    Decision {
        accepted: failed.is_empty(),
        message: (!lines.is_empty()).then(|| truncate(&lines.join("\n"), AUDIT_MESSAGE_MAX)),
        ..Decision::default()
    }
}

/// What fails next for an object of `kind` whose image will not pull: running Pods keep running
/// while their nodes keep the image, so the report says which new Pods will not start.
fn what_breaks_next(kind: &str) -> &'static str {
    match kind {
        "CronJob" => "its next scheduled run fails with ErrImagePull",
        "Job" => "Pods the Job still starts (retries, further completions) fail with ErrImagePull",
        "DaemonSet" => {
            "its Pod on a new or replaced node, and any Pod restarted where the node no longer caches the image, fails with ErrImagePull"
        }
        "Pod" => {
            "this Pod is not re-created by a controller: once evicted, or restarted on a node that no longer caches the image (or with imagePullPolicy Always), it fails with ErrImagePull"
        }
        _ => {
            "new Pods (a scale-up, a rollout, a Pod rescheduled after an eviction or a node failure) fail with ErrImagePull; running Pods keep running while their nodes keep the image"
        }
    }
}

/// The digests a Pod's containers run, from `status.containerStatuses[].imageID` (and the init
/// and ephemeral containers'): the version a failing tag pointed to when the Pod started.
#[derive(Debug, Default)]
struct RunningImages(Vec<(String, String)>);

impl RunningImages {
    fn of(object: Object<'_>) -> Self {
        let Some(status) = object.at("/status") else {
            return RunningImages::default();
        };
        let status: PodStatus = serde_json::from_str(status).unwrap_or_default();
        RunningImages(
            status
                .container_statuses
                .into_iter()
                .chain(status.init_container_statuses)
                .chain(status.ephemeral_container_statuses)
                .filter_map(|s| Some((s.name, digest_of(&s.image_id)?.to_owned())))
                .collect(),
        )
    }

    /// "It runs sha256:…; pin …@sha256:… to keep that version", for a container that runs one.
    fn pin_hint(&self, finding: &Finding) -> Option<String> {
        let Subject::Image {
            container,
            reference,
            ..
        } = &finding.subject
        else {
            return None;
        };
        let (_, digest) = self.0.iter().find(|(name, _)| *name == container.name)?;
        let name = reference
            .as_ref()
            .map_or_else(|| container.image.clone(), |r| r.name());
        Some(format!(
            "It runs {digest}: to keep that version, set the image to {name}@{digest} if the registry still has it."
        ))
    }
}

/// The digest of an `imageID` (`docker.io/library/nginx@sha256:…`,
/// `docker-pullable://nginx@sha256:…`); `None` for a runtime's local image id.
fn digest_of(image_id: &str) -> Option<&str> {
    let (_, digest) = image_id.rsplit_once('@')?;
    digest.starts_with("sha256:").then_some(digest)
}

/// The part of a Pod's `status` that names what its containers run; a field of the wrong
/// shape reads as empty, since a status never fails an audit.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PodStatus {
    #[serde(deserialize_with = "statuses")]
    container_statuses: Vec<ContainerStatus>,
    #[serde(deserialize_with = "statuses")]
    init_container_statuses: Vec<ContainerStatus>,
    #[serde(deserialize_with = "statuses")]
    ephemeral_container_statuses: Vec<ContainerStatus>,
}

/// One entry of a Pod's container statuses.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ContainerStatus {
    name: String,
    #[serde(rename = "imageID")]
    image_id: String,
}

/// A list of container statuses; anything else, and any entry of the wrong shape, is skipped.
fn statuses<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<ContainerStatus>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    let entries = match value {
        serde_json::Value::Array(entries) => entries,
        _ => Vec::new(),
    };
    Ok(entries
        .into_iter()
        .filter_map(|entry| serde_json::from_value(entry).ok())
        .collect())
}

#[cfg(test)]
mod tests;
