//! The third step of a decision: what each planned image's lookups add up to. A chain that
//! failed is explained with the pod's pull secrets; a found image is checked against the
//! required platforms; what was found is remembered for pins and the mirror annotation.
//!
//! The folder holds the images the nodes already have ([`node_images`]), read only when they
//! could save an absent image, and the nodes' credential provider plugins ([`providers`]),
//! which may give a pod credentials the policy cannot use.

pub mod node_images;
pub mod providers;

use crate::host::budget::Budget;
use crate::host::Host;
use crate::judge::node_images::{name_nodes, NodeImages};
use crate::judge::providers::{Coverage, ProviderCoverage};
use crate::lookup::{Found, Lookups};
use crate::plan::finding::{Finding, Subject};
use crate::plan::{Check, Plan, Pod};
use crate::settings::credential_providers::{covering, VerificationPolicy};
use crate::settings::mirrors::Chain;
use crate::settings::platforms::{PlatformChecker, Use};
use crate::settings::Settings;
use crate::vocabulary::failure::{Failure, FailureKind, Observed};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::scheduling::Placement;
use crate::vocabulary::text::truncate;
use crate::vocabulary::workload::{PodSpecView, PullPolicy};

/// The findings of one request, and what its found images leave behind.
#[derive(Debug, Default)]
pub struct Judgement {
    /// Every failure, pull secrets first, then images in container order.
    pub findings: Vec<Finding>,
    /// Images to rewrite when pinning: (JSON pointer, `image@digest`).
    pub pins: Vec<(String, String)>,
    /// Images found on a mirror rather than their registry, for the audit annotation.
    pub from_mirrors: Vec<String>,
    /// Images left unpinned, and why, for the audit annotation.
    pub not_pinned: Vec<String>,
    /// Warnings about the check itself (e.g. a pod that fits no node).
    pub notes: Vec<String>,
}

/// What judging one request needs at hand.
struct Judge<'a, 's, 'p, H: Host> {
    plan: &'a Plan,
    settings: &'a Settings<'p>,
    budget: &'a Budget,
    host: &'a H,
    lookups: &'a mut Lookups<'s>,
    platforms: PlatformChecker<'a, H>,
    node_images: NodeImages<'a, H>,
    providers: ProviderCoverage<'a, H>,
    judgement: Judgement,
}

/// Judges every check of `plan`, looking up what the batch did not already answer.
pub fn judge(
    plan: &Plan,
    lookups: &mut Lookups<'_>,
    settings: &Settings,
    budget: &Budget,
    host: &impl Host,
) -> Judgement {
    let mut judge = Judge {
        plan,
        settings,
        budget,
        host,
        lookups,
        platforms: PlatformChecker::new(settings.required_platforms(), host, budget),
        node_images: NodeImages::new(host, budget),
        providers: ProviderCoverage::new(settings.credential_providers(), host, budget),
        judgement: Judgement {
            findings: secret_findings(plan),
            ..Judgement::default()
        },
    };
    for pod in &plan.pods {
        for check in &pod.checks {
            if let Some(failure) = judge.check(pod, check) {
                let finding = Finding::image(
                    check.container.clone(),
                    check.reference.clone().ok(),
                    failure,
                );
                judge
                    .judgement
                    .findings
                    .push(finding.also_asked(check.also_asked()));
            }
        }
    }
    let mut judgement = judge.judgement;
    judgement.notes.append(&mut judge.platforms.notes);
    judgement
}

impl<H: Host> Judge<'_, '_, '_, H> {
    /// Why `check`'s image will not (or may not) pull, if it will not.
    fn check(&mut self, pod: &Pod, check: &Check) -> Option<Failure> {
        let image = match &check.reference {
            Err(invalid) => return Some(invalid.clone()),
            Ok(image) => image,
        };
        if let Some(blocked) = &check.blocked {
            // no location to ask: the node fails before any lookup, unless it never pulls
            return Some(cached_on_nodes(
                blocked.clone(),
                check,
                image,
                &mut self.node_images,
                self.settings,
            ));
        }
        match self
            .lookups
            .chain(pod.id, image, &check.chain, self.budget, self.host)
        {
            Err(failure) => {
                let failure = explain(failure, pod, check, self.plan, self.lookups, self.settings);
                let failure = self.with_providers(failure, pod, check);
                Some(cached_on_nodes(
                    failure,
                    check,
                    image,
                    &mut self.node_images,
                    self.settings,
                ))
            }
            Ok(found) => self.found(pod, check, image, found),
        }
    }

    /// A refusal of an image the nodes' credential providers cover: they may give the kubelet
    /// credentials the policy cannot use, so it is a plain `unauthorized` (never
    /// `uncoveredRegistry`), saying so; when every provider covering it is skipped for this
    /// pod, the refusal stands, saying why they give the pod nothing.
    fn with_providers(&mut self, failure: Failure, pod: &Pod, check: &Check) -> Failure {
        let refused = matches!(
            failure.kind,
            FailureKind::Unauthorized | FailureKind::UncoveredRegistry
        );
        let Ok(image) = &check.reference else {
            return failure;
        };
        if !refused || !self.providers.cover(image) {
            return failure;
        }
        let account = pod.spec.as_ref().map(PodSpecView::service_account);
        let namespace = &self.plan.resource.namespace;
        let registry = image.registry();
        match self.providers.coverage(namespace, account, image) {
            Coverage::None => failure,
            Coverage::Runs(names) => {
                // the cause, which a warning keeps whole
                let brokered = self.lookups.used_pod_credentials_for(pod.id, image);
                let how = if brokered {
                    "covers it (the lookup broker runs the plugins it is configured with)"
                } else {
                    "may give the node credentials the policy cannot use"
                };
                let cause = format!(
                    "credential provider {} {how} for {registry}",
                    name_nodes(&names)
                );
                Failure::caused(
                    FailureKind::Unauthorized,
                    failure.observed,
                    &cause,
                    &failure.detail,
                )
            }
            Coverage::Skipped(why) => {
                let (first, others) = why.split_first().unwrap_or((&failure.detail, &[]));
                let rest: Vec<&str> = others
                    .iter()
                    .map(String::as_str)
                    .chain([failure.detail.as_str()])
                    .collect();
                Failure::caused(failure.kind, failure.observed, first, &rest.join("; "))
            }
        }
    }

    /// Records an image a chain found, and returns the failure of its platforms, if any.
    fn found(
        &mut self,
        pod: &Pod,
        check: &Check,
        image: &ImageReference,
        found: Found,
    ) -> Option<Failure> {
        let container = &check.container;
        if found.location.is_mirror {
            self.judgement.from_mirrors.push(format!(
                "{container} {}: {}",
                container.image,
                found.location.reference.lookup_reference()
            ));
        }
        let placement = match &pod.spec {
            Some(spec) => spec.placement(),
            None => Placement::anywhere(),
        };
        let usage = if container.is_volume() {
            Use::Mount
        } else {
            Use::Run
        };
        let failure =
            self.platforms
                .check(&found.location.reference, &found.digest, usage, &placement);
        if failure.is_none() && image.digest().is_none() && self.settings.pin_digests() {
            self.pin(pod, check, image, &found);
        }
        failure
    }

    /// Pins `image` to the digest `found` when a pull by that digest reaches a location that
    /// has it: a digest pull skips `tag-only` mirrors, so a digest found on one is checked on
    /// the first location a digest pull tries, and the image is left unpinned (and said so)
    /// when that location does not have it.
    fn pin(&mut self, pod: &Pod, check: &Check, image: &ImageReference, found: &Found) {
        let container = &check.container;
        let pinned = format!("{}@{}", container.image, found.digest);
        let by_digest = ImageReference::parse(&format!("{}@{}", image.name(), found.digest));
        let digest_chain = by_digest.as_ref().ok().map(|r| self.settings.chain(r));
        let locations = digest_chain.as_ref().map_or(&[][..], |c| &c.locations[..]);
        let reaches_found = locations
            .iter()
            .any(|location| location.reference.name() == found.location.reference.name());
        let refusal = digest_chain.as_ref().and_then(Chain::refusal);
        let verdict = match (reaches_found, &by_digest, locations.first()) {
            (true, _, _) => Ok(()),
            (false, Ok(by_digest), Some(first)) => self
                .lookups
                .chain(pod.id, by_digest, std::slice::from_ref(first), self.budget, self.host)
                .map(|_| ())
                .map_err(|failure| {
                    format!(
                        "a pull by digest skips the tag-only mirror {} and asks {} first, which does not have {} ({})",
                        found.location.reference.registry(),
                        first.reference.lookup_reference(),
                        found.digest,
                        failure.kind
                    )
                }),
            (false, Ok(_), None) => Err(format!(
                "a pull by digest asks no location: {}",
                refusal.as_deref().unwrap_or("its chain is empty")
            )),
            _ => Err("the digest reference is not valid".to_owned()),
        };
        match verdict {
            Ok(()) => self
                .judgement
                .pins
                .push((container.pointer.clone(), pinned)),
            Err(why) => self
                .judgement
                .not_pinned
                .push(format!("{container} {}: {why}", container.image)),
        }
    }
}

/// A failed chain, explained by the pod's pull secrets where that says more: a refusal of a
/// single location, or a 404 from a registry that may hide what its caller may not see.
fn explain(
    failure: Failure,
    pod: &Pod,
    check: &Check,
    plan: &Plan,
    lookups: &Lookups<'_>,
    settings: &Settings,
) -> Failure {
    let Ok(reference) = &check.reference else {
        return failure;
    };
    let namespace = &plan.resource.namespace;
    let pod_credentials = lookups.used_pod_credentials_for(pod.id, reference);
    if failure.kind == FailureKind::Absent && !pod_credentials {
        let hiding = check
            .chain
            .iter()
            .map(|location| location.reference.registry())
            .find(|registry| settings.not_found_may_mean_denied(registry));
        // a node's credential provider may see what the policy's lookup could not
        let name = reference.name();
        let provider = covering(settings.credential_providers(), &name)
            .next()
            .is_some();
        let covered = provider
            || pod.secrets.as_ref().is_none_or(|secrets| {
                !secrets.consulted() || secrets.keyring.covers(&reference.name())
            });
        if let (Some(registry), true) = (hiding, covered) {
            let cause = format!(
                "{registry} may answer 404 to hide repositories from callers without access (notFoundMayMeanDenied)"
            );
            let rest = format!(
                "the pod's own pull secrets were not used for this check: {}",
                failure.detail
            );
            return Failure::caused(FailureKind::Unauthorized, Observed::AsKind, &cause, &rest);
        }
    }
    match &pod.secrets {
        Some(secrets) if check.chain.len() == 1 => {
            secrets.explain_refusal(failure, reference, namespace, pod_credentials)
        }
        _ => failure,
    }
}

/// An absent image, or one whose every location the nodes refuse, is not certain to fail
/// when nodes still hold it and the kubelet pulls only if the node lacks it (`IfNotPresent`):
/// pods placed on those nodes may start. Under every `imagePullCredentialsVerificationPolicy`
/// some copy serves the pod without a pull (one the kubelet pulled anonymously or with node
/// credentials serves every pod even under `AlwaysVerify`, and the policy cannot see how a
/// copy got there), so it stays `cachedOnNodes`; the message says what the policy means for it.
fn cached_on_nodes<H: Host>(
    failure: Failure,
    check: &Check,
    reference: &ImageReference,
    node_images: &mut NodeImages<'_, H>,
    settings: &Settings,
) -> Failure {
    let policy = PullPolicy::effective(check.container.pull_policy.as_deref(), reference);
    let (observed, said) = match failure.kind {
        FailureKind::Absent => (Observed::AsKind, "the registry said"),
        FailureKind::BlockedRegistry => (Observed::RefusedButCached, "elsewhere"),
        _ => return failure,
    };
    if policy != PullPolicy::IfNotPresent {
        return failure;
    }
    let nodes = node_images.holding(reference);
    if nodes.is_empty() {
        return failure;
    }
    let (how, also) = match settings.verification_policy() {
        None => (UNSET_POLICY.to_owned(), String::new()),
        Some(policy) => verification_note(policy, &check.container.image, reference, settings),
    };
    let nodes = format!("cached on {} node(s) ({})", nodes.len(), name_nodes(&nodes));
    let rest = [also, nodes, format!("{said}: {}", failure.detail)];
    let rest: Vec<&String> = rest.iter().filter(|part| !part.is_empty()).collect();
    let rest: Vec<&str> = rest.iter().map(|part| part.as_str()).collect();
    Failure::caused(FailureKind::CachedOnNodes, observed, &how, &rest.join("; "))
}

/// What a copy means to kubelets whose `imagePullCredentialsVerificationPolicy` is not said:
/// the gate `KubeletEnsureSecretPulledImages` is off by default up to 1.34 (no check), and
/// from 1.35 on, defaulting to `NeverVerifyPreloadedImages` (pkg/kubelet/apis/config/v1beta1/
/// defaults.go).
const UNSET_POLICY: &str = "before 1.35 any pod starts from it; from 1.35, by default, only one preloaded or pulled without pod credentials";

/// The longest allowlist entry a message quotes.
const ENTRY_QUOTE_MAX: usize = 48;

/// What the nodes' verification `policy` (KEP-2535) means for a copy of `reference` (written
/// in the pod as `written`) they hold: when the kubelet starts a pod from it without asking the
/// registry, and, for an allowlist entry that covers it on some kubelets only, why. The first
/// is the cause a warning keeps whole; the second follows it.
fn verification_note(
    policy: VerificationPolicy,
    written: &str,
    reference: &ImageReference,
    settings: &Settings,
) -> (String, String) {
    let pulls_again = format!(
        "{policy} nodes pull again unless the kubelet pulled their copy anonymously, with node or this pod's credentials"
    );
    let note = match policy {
        VerificationPolicy::NeverVerify => format!("{policy} nodes start any pod from their copy"),
        VerificationPolicy::NeverVerifyPreloadedImages => format!(
            "{policy} nodes start any pod from a copy preloaded or pulled without pod credentials"
        ),
        VerificationPolicy::AlwaysVerify => pulls_again,
        VerificationPolicy::NeverVerifyAllowlistedImages => {
            let entries = settings.preloaded_allowlist();
            let name = reference.name();
            let quote =
                |entry: &dyn std::fmt::Display| truncate(&entry.to_string(), ENTRY_QUOTE_MAX);
            if let Some(entry) = entries.iter().find(|e| e.matches_written(written)) {
                format!(
                    "allowlisted by {}: {policy} nodes start any pod from their copy",
                    quote(entry)
                )
            } else if let Some(entry) = entries.iter().find(|e| e.matches(&name)) {
                let cause = format!(
                    "allowlisted by {} on kubelets from 1.36 only: earlier ones compare the image as the Pod writes it, tag included",
                    quote(entry)
                );
                return (cause, format!("else {pulls_again}"));
            } else {
                format!("not allowlisted: {pulls_again}")
            }
        }
    };
    (note, String::new())
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
