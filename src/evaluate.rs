//! The decision for one admission request, in four steps: [`plan`](crate::plan) what to check,
//! [`look up`](crate::lookup) the registries, [`judge`](crate::judge) what the answers mean,
//! and [`answer`](crate::answer) with the configured actions. Pure apart from the [`Host`].

use std::rc::Rc;

use serde_json::Value;

use crate::answer::audit::{self, Origin};
use crate::answer::{decide, Decision};
use crate::host::budget::Budget;
use crate::host::Host;
use crate::judge::{judge, Judgement};
use crate::lookup::broker::{BrokerGuard, BrokerRoutes, Issued};
use crate::lookup::Lookups;
use crate::plan::admission::{AdmissionRequest, PayloadError, ValidationPayload};
use crate::plan::{plan, Plan, Planned};
use crate::settings::Settings;

/// The audit annotation that names images found on a mirror rather than their registry.
pub const MIRROR_ANNOTATION: &str = "resolvable-images/resolved-from-mirror";
/// The audit annotation that names images `pinDigests` left unpinned, and why.
pub const NOT_PINNED_ANNOTATION: &str = "resolvable-images/not-pinned";

/// Answers waPC `validate`: never an error, so a malformed request or a failing host becomes
/// an explained decision instead of an HTTP 500 for the user's deploy. The settings are read
/// as the request needs them; a member that cannot be read (the host did not validate it)
/// answers the request with its error.
pub fn validate_payload(payload: &[u8], host: &impl Host) -> Vec<u8> {
    let decision = match ValidationPayload::parse(payload) {
        Err(PayloadError::Settings(e)) => {
            Decision::malformed(format!("resolvable-images-policy: {e}"))
        }
        Err(e) => Decision::malformed(format!(
            "resolvable-images-policy cannot read the admission request: {e}"
        )),
        Ok(ValidationPayload { settings, request }) => {
            let decision = evaluate(&request, &settings, host);
            match settings.problem() {
                Some(e) => Decision::malformed(format!("resolvable-images-policy: {e}")),
                None => decision,
            }
        }
    };
    decision.to_json()
}

/// Decides one admission request: plan, look up, judge, answer.
pub fn evaluate(request: &AdmissionRequest, settings: &Settings, host: &impl Host) -> Decision {
    let origin = Origin::of(request, || request.object().metadata());
    if origin == Origin::Audit && !settings.audit().lookups {
        return audit::not_audited();
    }
    // with a lookup broker, no image a Pod author wrote may reach the broker's host
    let issued = Issued::default();
    let guarded = BrokerGuard::new(host, settings.lookup_broker(), Rc::clone(&issued));
    let host = &guarded;
    let budget = Budget::start(host, settings.time_budget());
    let plan = match plan(request, settings, host) {
        Planned::Check(plan) => plan,
        Planned::Nothing => return Decision::accept(),
        Planned::Malformed(message) => return Decision::malformed(message),
    };
    // the pull secrets planning read are not a lookup; without them, no clock reading
    if plan.asked_the_cluster() {
        budget.resume(host);
    }
    let credentialed = settings.pull_secrets().credentialed_lookups;
    let mut lookups = Lookups::start(&plan.pods, settings, credentialed, &budget, host);
    if let Some(broker) = settings.lookup_broker() {
        lookups.through_broker(BrokerRoutes::plan(
            broker,
            &plan.resource.namespace,
            &plan.pods,
            settings.credential_providers(),
            issued,
            host,
        ));
    }
    let judgement = judge(&plan, &mut lookups, settings, &budget, host);
    answer(request, origin, plan, &lookups, judgement, settings)
}

/// The policy's answer: the configured actions applied to the findings, the mirror annotation,
/// and the pinned object when pinning is on and the request is admitted.
fn answer(
    request: &AdmissionRequest,
    origin: Origin,
    plan: Plan,
    lookups: &Lookups<'_>,
    judgement: Judgement,
    settings: &Settings,
) -> Decision {
    let mut notes = plan.notes;
    notes.extend(judgement.notes);
    if let Some(reason) = &lookups.fallback {
        notes.push(format!(
            "credentialed lookups (oci/v1/resolve_images) are not available here ({reason}); images were checked with the policy server's credentials"
        ));
    }
    if origin == Origin::Audit {
        return audit::report(
            &plan.resource,
            request.object(),
            &judgement.findings,
            &notes,
            settings,
        );
    }
    let mut decision = decide(&plan.resource, &judgement.findings, &notes, settings);
    if !judgement.from_mirrors.is_empty() {
        decision.audit_annotations.insert(
            MIRROR_ANNOTATION.to_owned(),
            judgement.from_mirrors.join("; "),
        );
    }
    if !judgement.not_pinned.is_empty() {
        decision.audit_annotations.insert(
            NOT_PINNED_ANNOTATION.to_owned(),
            judgement.not_pinned.join("; "),
        );
    }
    if decision.accepted && settings.pin_digests() && !judgement.pins.is_empty() {
        decision.mutated_object = Some(pin(request.object().value(), &judgement.pins));
    }
    decision
}

/// `object` with each image at a pointer replaced by its pinned form.
fn pin(mut pinned: Value, pins: &[(String, String)]) -> Value {
    for (pointer, image) in pins {
        if let Some(field) = pinned.pointer_mut(pointer) {
            *field = Value::String(image.clone());
        }
    }
    pinned
}
