//! The third step of a decision: what each planned image's lookups add up to. A chain that
//! failed is explained with the pod's pull secrets; a found image is checked against the
//! required platforms; what was found is remembered for pins and the mirror annotation.

use crate::failure::Failure;
use crate::host::Host;
use crate::lookup::{Budget, Found, Lookups};
use crate::plan::{Check, Plan, Pod};
use crate::platforms::PlatformChecker;
use crate::report::{Finding, Subject};
use crate::settings::Settings;

/// The findings of one request, and what its found images leave behind.
#[derive(Debug, Default)]
pub struct Judgement {
    /// Every failure, pull secrets first, then images in container order.
    pub findings: Vec<Finding>,
    /// Images to rewrite when pinning: (JSON pointer, `image@digest`).
    pub pins: Vec<(String, String)>,
    /// Images found on a mirror rather than their registry, for the audit annotation.
    pub from_mirrors: Vec<String>,
}

/// Judges every check of `plan`, looking up what the batch did not already answer.
pub fn judge(
    plan: &Plan,
    lookups: &mut Lookups,
    settings: &Settings,
    budget: &Budget,
    host: &impl Host,
) -> Judgement {
    let mut judgement = Judgement {
        findings: secret_findings(plan),
        ..Judgement::default()
    };
    let mut platforms = PlatformChecker::new(&settings.required_platforms, host, budget);
    for pod in &plan.pods {
        for check in &pod.checks {
            let failure = match &check.reference {
                Err(invalid) => Some(invalid.clone()),
                Ok(_) => match lookups.chain(pod.id, &check.chain, budget, host) {
                    Err(failure) => Some(explain(failure, pod, check, plan, lookups)),
                    Ok(found) => judgement.found(pod, check, found, &mut platforms),
                },
            };
            if let Some(failure) = failure {
                let finding = Finding::image(
                    check.container.clone(),
                    check.reference.clone().ok(),
                    failure,
                );
                judgement
                    .findings
                    .push(finding.with_mirrors(check.chain.len() > 1));
            }
        }
    }
    judgement
}

impl Judgement {
    /// Records an image a chain found, and returns the failure of its platforms, if any.
    fn found<H: Host>(
        &mut self,
        pod: &Pod,
        check: &Check,
        found: Found,
        platforms: &mut PlatformChecker<'_, H>,
    ) -> Option<Failure> {
        let container = &check.container;
        if found.location.is_mirror {
            self.from_mirrors.push(format!(
                "{container} {}: {}",
                container.image,
                found.location.reference.lookup_reference()
            ));
        }
        let node_selector = pod.spec.as_ref().map(|spec| &spec.node_selector);
        let failure = platforms.check(&found.location.reference, &found.digest, node_selector);
        let pinned = check
            .reference
            .as_ref()
            .is_ok_and(|reference| reference.digest().is_some());
        if failure.is_none() && !pinned {
            self.pins.push((
                container.pointer.clone(),
                format!("{}@{}", container.image, found.digest),
            ));
        }
        failure
    }
}

/// A failed chain, explained by the pod's pull secrets where that says more. Only for images
/// with a single location: a mirror chain's detail already names every location.
fn explain(failure: Failure, pod: &Pod, check: &Check, plan: &Plan, lookups: &Lookups) -> Failure {
    match (&pod.secrets, &check.reference) {
        (Some(secrets), Ok(reference)) if check.chain.len() == 1 => secrets.explain_refusal(
            failure,
            reference,
            &plan.resource.namespace,
            lookups.used_pod_credentials(),
        ),
        _ => failure,
    }
}

/// The findings of the pull secrets that were read.
fn secret_findings(plan: &Plan) -> Vec<Finding> {
    plan.pods
        .iter()
        .filter_map(|pod| pod.secrets.as_ref())
        .filter(|secrets| secrets.consulted())
        .flat_map(|secrets| &secrets.findings)
        .map(|finding| Finding {
            subject: Subject::PullSecret {
                description: finding.description.clone(),
            },
            failure: finding.failure.clone(),
        })
        .collect()
}
