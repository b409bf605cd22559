//! The third step of a decision: what each planned image's lookups add up to. A chain that
//! failed is explained with the pod's pull secrets; a found image is checked against the
//! required platforms; what was found is remembered for pins and the mirror annotation.

use crate::failure::{Failure, FailureKind};
use crate::host::Host;
use crate::lookup::{Budget, Found, Lookups};
use crate::node_images::{name_nodes, NodeImages};
use crate::plan::{Check, Plan, Pod};
use crate::platforms::PlatformChecker;
use crate::reference::ImageReference;
use crate::report::{Finding, Subject};
use crate::settings::Settings;
use crate::workload::PullPolicy;

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
    let mut node_images = NodeImages::new(host);
    for pod in &plan.pods {
        for check in &pod.checks {
            let failure = match &check.reference {
                Err(invalid) => Some(invalid.clone()),
                Ok(reference) => match lookups.chain(pod.id, &check.chain, budget, host) {
                    Err(failure) => {
                        let failure = explain(failure, pod, check, plan, lookups, settings);
                        Some(cached_on_nodes(failure, check, reference, &mut node_images))
                    }
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

/// A failed chain, explained by the pod's pull secrets where that says more: a refusal of a
/// single location, or a 404 from a registry that may hide what its caller may not see.
fn explain(
    failure: Failure,
    pod: &Pod,
    check: &Check,
    plan: &Plan,
    lookups: &Lookups,
    settings: &Settings,
) -> Failure {
    let Ok(reference) = &check.reference else {
        return failure;
    };
    let namespace = &plan.resource.namespace;
    let pod_credentials = lookups.used_pod_credentials();
    if failure.kind == FailureKind::Absent && !pod_credentials {
        let hiding = check
            .chain
            .iter()
            .map(|location| location.reference.registry())
            .find(|registry| settings.not_found_may_mean_denied(registry));
        let covered = pod.secrets.as_ref().is_none_or(|secrets| {
            !secrets.consulted() || !secrets.keyring.lookup(&reference.name()).is_empty()
        });
        if let (Some(registry), true) = (hiding, covered) {
            return Failure::new(
                FailureKind::Unauthorized,
                format!(
                    "{registry} may answer 404 to hide repositories from callers without access (notFoundMayMeanDenied), and the pod's own pull secrets were not used for this check: {}",
                    failure.detail
                ),
            );
        }
    }
    match &pod.secrets {
        Some(secrets) if check.chain.len() == 1 => {
            secrets.explain_refusal(failure, reference, namespace, pod_credentials)
        }
        _ => failure,
    }
}

/// An absent image that nodes still hold is not certain to fail when the kubelet pulls it only
/// if the node lacks it (`IfNotPresent`): pods placed on those nodes start.
fn cached_on_nodes<H: Host>(
    failure: Failure,
    check: &Check,
    reference: &ImageReference,
    node_images: &mut NodeImages<'_, H>,
) -> Failure {
    let policy = PullPolicy::effective(check.container.pull_policy.as_deref(), reference);
    if failure.kind != FailureKind::Absent || policy != PullPolicy::IfNotPresent {
        return failure;
    }
    let nodes = node_images.holding(reference);
    if nodes.is_empty() {
        return failure;
    }
    Failure::new(
        FailureKind::CachedOnNodes,
        format!(
            "cached on {} node(s) ({}), where IfNotPresent starts pods without a pull; the registry said: {}",
            nodes.len(),
            name_nodes(&nodes),
            failure.detail
        ),
    )
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
