//! The first step of a decision: what to check. Which pod specs the object holds, which of
//! their images the kubelet will pull (new ones only on UPDATE, never `Never`, not exempt),
//! with which pull secrets, and through which chain of locations.
//!
//! The folder holds what the plan reads, the admission request ([`admission`]) and the pull
//! secrets of each pod ([`pull_secrets`]), and the finding ([`finding`]) that this step and
//! the next ones produce.

pub mod admission;
pub mod finding;
pub mod pull_secrets;

use std::collections::HashSet;

use crate::host::Host;
use crate::plan::admission::{AdmissionRequest, Operation};
use crate::plan::finding::AlsoAsked;
use crate::plan::pull_secrets::PullSecrets;
use crate::settings::custom_kinds::CustomKind;
use crate::settings::mirrors::{Chain, Location, Refusal};
use crate::settings::short_names::{self, Resolution, ShortNames};
use crate::settings::{OwnedObjects, Settings};
use crate::vocabulary::failure::{Failure, FailureKind, Observed};
use crate::vocabulary::object::{Metadata, Object, Resource};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::workload::{
    read_pod_spec, ContainerImage, ContainerList, PodSpecView, PullPolicy, WorkloadError,
    WorkloadKind,
};
use kubelet_credentials::Keyring;

/// The annotation the kubelet puts on the API's copy of a static Pod.
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// What one request asks the registries about.
#[derive(Debug)]
pub struct Plan {
    /// The object, as messages name it.
    pub resource: Resource,
    /// Its pod specs, each with its own images, pull secrets and chains.
    pub pods: Vec<Pod>,
    /// Warnings about the check itself (e.g. pull secrets that could not be read).
    pub notes: Vec<String>,
}

impl Plan {
    /// True when planning asked the host for pull secrets or ServiceAccounts.
    pub fn asked_the_cluster(&self) -> bool {
        self.pods
            .iter()
            .any(|pod| pod.secrets.as_ref().is_some_and(|s| s.asked_the_cluster))
    }
}

/// Identifies a pod spec of the request, so that lookups made with its credentials are kept
/// apart from other pods'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodId(usize);

/// A pod spec of the request (or a custom kind's bare image fields, which have none), with
/// everything that decides how its images are pulled.
#[derive(Debug)]
pub struct Pod {
    /// Which pod spec this is.
    pub id: PodId,
    /// The rest of the pod spec (its containers are in `checks`); `None` for bare image fields.
    pub spec: Option<PodSpecView>,
    /// The pull secrets the kubelet will use; `None` where there is no pod spec, nothing to
    /// check, or consulting is off.
    pub secrets: Option<PullSecrets>,
    /// The images to look up.
    pub checks: Vec<Check>,
}

impl Pod {
    /// On UPDATE, keeps the checks of images the old object did not run (`running`): scaling or
    /// relabelling a workload whose running image has since vanished is never blocked. Unless
    /// what decides the pull changed since `old` (the pull secrets or ServiceAccount, or, with
    /// required platforms, the scheduling fields): the new pods then pull every image afresh.
    fn keep_new_images(
        &mut self,
        old: Option<&Pod>,
        running: &HashSet<String>,
        settings: &Settings,
    ) {
        if let (Some(spec), Some(old_spec)) = (&self.spec, old.and_then(|old| old.spec.as_ref())) {
            let scheduling_matters = !settings.required_platforms().is_empty();
            if spec.credentials_context() != old_spec.credentials_context()
                || (scheduling_matters
                    && spec.scheduling_context() != old_spec.scheduling_context())
            {
                return;
            }
        }
        self.checks
            .retain(|check| !running.contains(&check.identity()));
    }

    /// The keyring of secrets that were read, for credentialed lookups.
    pub fn keyring(&self) -> Option<&Keyring> {
        self.secrets
            .as_ref()
            .filter(|secrets| secrets.consulted())
            .map(|secrets| &secrets.keyring)
    }
}

/// One container's image on its way to a finding.
#[derive(Debug)]
pub struct Check {
    /// The container and its image as written.
    pub container: ContainerImage,
    /// The parsed reference, or why the kubelet would refuse it.
    pub reference: Result<ImageReference, Failure>,
    /// Where a node looks for it, mirrors first; empty for an invalid reference.
    pub chain: Vec<Location>,
    /// The further references a node tries when `reference` does not pull: CRI-O's other
    /// unqualified-search registries for a short name (`shortNames`); their locations follow
    /// `reference`'s in `chain`.
    pub alternatives: Vec<ImageReference>,
    /// The locations the nodes never contact (`registries[i].blocked`), left out of `chain`.
    pub refused: Vec<Refusal>,
    /// The registries of `reference` and `alternatives` whose every location is refused,
    /// when another's are not: messages do not say they were asked.
    pub unasked: Vec<String>,
    /// Why the pull fails before any lookup, when the nodes refuse every location.
    pub blocked: Option<Failure>,
}

impl Check {
    /// Parses the image of `container`.
    fn new(container: ContainerImage) -> Self {
        let reference = parse_image(&container.image);
        Check {
            container,
            reference,
            chain: Vec::new(),
            alternatives: Vec::new(),
            refused: Vec::new(),
            unasked: Vec::new(),
            blocked: None,
        }
    }

    /// Replaces the parsed reference by what the nodes' runtime pulls for a short name.
    fn resolve_short_name(&mut self, short_names: &ShortNames) {
        if self.reference.is_err() {
            return;
        }
        match short_names.resolve(&self.container.image) {
            Resolution::AsParsed => {}
            Resolution::Candidates(mut candidates) => {
                self.alternatives = candidates.split_off(1.min(candidates.len()));
                if let Some(first) = candidates.pop() {
                    self.reference = Ok(first);
                }
            }
            Resolution::Fails(reason) => {
                self.reference = Err(Failure::new(FailureKind::UnresolvedShortName, reason));
            }
        }
    }

    /// What else than the reference's registry a node asks, for messages.
    pub fn also_asked(&self) -> AlsoAsked {
        match &self.reference {
            Ok(reference) if !self.alternatives.is_empty() => AlsoAsked::SearchRegistries(
                std::iter::once(reference)
                    .chain(&self.alternatives)
                    .map(|r| r.registry().to_owned())
                    .filter(|registry| !self.unasked.contains(registry))
                    .collect(),
            ),
            _ if !self.refused.is_empty() && !self.chain.is_empty() => AlsoAsked::WithoutRefused {
                asked: self
                    .chain
                    .iter()
                    .map(|location| location.reference.lookup_reference())
                    .collect(),
                refused: self.refused_prefixes(),
            },
            _ if self.chain.len() > 1 => AlsoAsked::Mirrors,
            _ => AlsoAsked::Nothing,
        }
    }

    /// The prefixes of the blocked rules that refuse a location of the chain, once each.
    fn refused_prefixes(&self) -> Vec<String> {
        let mut prefixes: Vec<String> = Vec::new();
        for refusal in &self.refused {
            if !prefixes.contains(&refusal.prefix) {
                prefixes.push(refusal.prefix.clone());
            }
        }
        prefixes
    }

    /// The locations a node tries for this image, in order: each reference's mirrors, then
    /// the reference itself; those a blocked rule refuses are left out, and when none is
    /// left the pull is known to fail (`blockedRegistry`).
    fn locate(&mut self, settings: &Settings) {
        let Ok(reference) = &self.reference else {
            return;
        };
        let chains: Vec<Chain> = std::iter::once(reference)
            .chain(&self.alternatives)
            .map(|reference| settings.chain(reference))
            .collect();
        let refusals: Vec<String> = chains.iter().filter_map(Chain::refusal).collect();
        let unrewritable = chains.iter().any(|chain| chain.unrewritable.is_some());
        let candidates = std::iter::once(reference).chain(&self.alternatives);
        self.unasked = candidates
            .zip(&chains)
            .filter(|(_, chain)| chain.locations.is_empty())
            .map(|(candidate, _)| candidate.registry().to_owned())
            .collect();
        for chain in chains {
            self.chain.extend(chain.locations);
            self.refused.extend(chain.refused);
        }
        if self.chain.is_empty() {
            self.unasked.clear();
        }
        if self.chain.is_empty() && !refusals.is_empty() {
            let observed = if unrewritable {
                Observed::Unrewritable
            } else {
                Observed::AsKind
            };
            self.blocked = Some(Failure::observed(
                FailureKind::BlockedRegistry,
                observed,
                refusals.join("; "),
            ));
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
                    && !settings.is_reference_exempt(reference)
            }
        }
    }
}

/// An image as the kubelet would read it. An empty or blank image is no reference at all:
/// the API server refuses a Pod without one (`image: Required value`, or leading and trailing
/// whitespace), so no kubelet is ever asked to pull it, and a template's blank image is a
/// placeholder some tools fill in later. Nothing to look up, and nothing proven: `notLookedUp`,
/// saying so, rather than the parser's "the reference is empty".
fn parse_image(image: &str) -> Result<ImageReference, Failure> {
    if image.trim().is_empty() {
        let what = if image.is_empty() {
            "empty"
        } else {
            "blank (whitespace only)"
        };
        return Err(Failure::observed(
            FailureKind::NotLookedUp,
            Observed::EmptyImage,
            format!("the image is {what}: there is no reference to look up"),
        ));
    }
    ImageReference::parse(image)
        .map_err(|e| Failure::new(FailureKind::InvalidReference, e.to_string()))
}

/// What [`plan`] found: something to check, nothing, or a request it cannot read.
#[derive(Debug)]
pub enum Planned {
    /// Images to look up.
    Check(Plan),
    /// Nothing the policy looks at: admit.
    Nothing,
    /// The object cannot be read: the explanation for a 400.
    Malformed(String),
}

/// Plans the checks of `request`, reading the pull secrets of the pods that have images to
/// check.
pub fn plan(request: &AdmissionRequest, settings: &Settings, host: &impl Host) -> Planned {
    let Some(target) = Target::of(request, settings) else {
        return Planned::Nothing;
    };
    if !matches!(request.operation, Operation::Create | Operation::Update)
        || settings.is_namespace_exempt(&request.namespace)
    {
        return Planned::Nothing;
    }
    // one pass over the object for its metadata and its pod spec
    let (metadata, found) = request.object().metadata_and_at(target.pod_spec_pointer());
    if target.is_mirror_pod(&metadata) {
        return Planned::Nothing;
    }
    let resource = Resource {
        kind: target.kind_name().to_owned(),
        namespace: request.namespace.clone(),
        name: request.display_name(&metadata),
    };
    let mut pods = match target.pods(request.object(), found) {
        Ok(pods) => pods,
        Err(e) => return Planned::Malformed(format!("{resource}: {e}")),
    };
    if target.is_owned(&metadata, settings) {
        // Its owner was the admission point; only ephemeral containers (kubectl debug) are
        // added to a Pod after its controller created it (templates cannot have any).
        for pod in &mut pods {
            pod.checks
                .retain(|check| check.container.list == ContainerList::Ephemeral);
        }
    }
    if request.operation == Operation::Update {
        let old = request.old_object();
        let old_found = target
            .pod_spec_pointer()
            .and_then(|pointer| old.at(pointer));
        let old_pods = target.pods(old, old_found).unwrap_or_default();
        let running: HashSet<String> = old_pods
            .iter()
            .flat_map(|pod| &pod.checks)
            .map(Check::identity)
            .collect();
        for (i, pod) in pods.iter_mut().enumerate() {
            pod.keep_new_images(old_pods.get(i), &running, settings);
        }
    }
    for pod in &mut pods {
        for check in &mut pod.checks {
            // the short-name rules are read only for an image that needs them
            if short_names::is_short(&check.container.image) {
                check.resolve_short_name(settings.short_names());
            }
        }
        pod.checks.retain(|check| check.needs_registry(settings));
        for check in &mut pod.checks {
            check.locate(settings);
        }
    }
    if pods.iter().all(|pod| pod.checks.is_empty()) {
        return Planned::Nothing;
    }
    let notes = read_secrets(&mut pods, settings, &request.namespace, host);
    Planned::Check(Plan {
        resource,
        pods,
        notes,
    })
}

/// Reads the pull secrets of every pod spec that has an image to check; notes once if they
/// could not be read.
fn read_secrets(
    pods: &mut [Pod],
    settings: &Settings,
    namespace: &str,
    host: &impl Host,
) -> Vec<String> {
    if settings.pull_secrets().consult {
        for pod in pods.iter_mut().filter(|pod| !pod.checks.is_empty()) {
            if let Some(spec) = &pod.spec {
                pod.secrets = Some(pull_secrets::read(spec, namespace, host));
            }
        }
    }
    pods.iter()
        .filter_map(|pod| pod.secrets.as_ref()?.unavailable.as_deref())
        .next()
        .map(|reason| {
            format!(
                "pull secrets were not consulted ({reason}); images were checked with the policy server's credentials"
            )
        })
        .into_iter()
        .collect()
}

/// Where the images of a request's object are.
enum Target<'a> {
    /// A kind the policy knows.
    Builtin(WorkloadKind),
    /// A kind configured in `customResources`.
    Custom(&'a CustomKind),
}

impl<'a> Target<'a> {
    fn of(request: &AdmissionRequest, settings: &'a Settings) -> Option<Self> {
        let kind = &request.kind;
        WorkloadKind::from_group_kind(&kind.group, &kind.kind)
            .map(Target::Builtin)
            .or_else(|| {
                settings
                    .custom_kinds()
                    .iter()
                    .find(|custom| custom.matches(&kind.group, &kind.version, &kind.kind))
                    .map(Target::Custom)
            })
    }

    /// True for the API's copy of a static Pod, which the kubelet runs from its own files:
    /// never checked.
    fn is_mirror_pod(&self, metadata: &Metadata) -> bool {
        matches!(self, Target::Builtin(WorkloadKind::Pod))
            && metadata.annotations.contains_key(MIRROR_POD_ANNOTATION)
    }

    /// True for an object that a controller the policy checks created: a Deployment's
    /// ReplicaSet, a CronJob's Job, a ReplicaSet's Pod, a custom kind's child. Its template was
    /// judged when that controller was admitted, and the controller re-creates it (self-healing,
    /// every CronJob run) long after a tag may have been deleted. Unless `ownedObjects` is
    /// `check`. A Pod is never a controller.
    fn is_owned(&self, metadata: &Metadata, settings: &Settings) -> bool {
        settings.owned_objects() == OwnedObjects::Skip
            && metadata
                .owner_references
                .iter()
                .filter(|owner| owner.controller)
                .any(|owner| {
                    let (api_version, kind) = (owner.api_version.as_str(), owner.kind.as_str());
                    let (group, version) =
                        api_version.rsplit_once('/').unwrap_or(("", api_version));
                    WorkloadKind::from_group_kind(group, kind)
                        .is_some_and(|kind| kind != WorkloadKind::Pod)
                        || settings
                            .custom_kinds()
                            .iter()
                            .any(|custom| custom.matches(group, version, kind))
                })
    }

    fn kind_name(&self) -> &str {
        match self {
            Target::Builtin(kind) => kind.as_str(),
            Target::Custom(custom) => &custom.kind,
        }
    }

    /// Where a built-in kind's pod spec is; custom kinds find theirs by JSONPath.
    fn pod_spec_pointer(&self) -> Option<&'static str> {
        match self {
            Target::Builtin(kind) => Some(kind.pod_spec_pointer()),
            Target::Custom(_) => None,
        }
    }

    /// The pod specs of `object`, each with a check per container; `found` is the JSON at
    /// [`Target::pod_spec_pointer`], already found.
    fn pods(&self, object: Object<'_>, found: Option<&str>) -> Result<Vec<Pod>, WorkloadError> {
        let (specs, fields) = match self {
            Target::Builtin(kind) => (vec![read_pod_spec(*kind, found)?], None),
            Target::Custom(custom) => {
                let found = custom.extract(&object.value())?;
                (found.pod_specs, Some(found.fields))
            }
        };
        // The containers move out of the spec: the rest of it only serves secrets and platforms.
        let pods = specs
            .into_iter()
            .map(|mut spec| (std::mem::take(&mut spec.containers), Some(spec)))
            .chain(fields.map(|fields| (fields, None)))
            .enumerate()
            .map(|(i, (containers, spec))| Pod {
                id: PodId(i),
                spec,
                secrets: None,
                checks: containers.into_iter().map(Check::new).collect(),
            })
            .collect();
        Ok(pods)
    }
}
