//! The decision for one admission request: which images to check, whose credentials apply,
//! where a node would pull them from, one lookup per distinct location, platforms, and the
//! findings handed to [`crate::report`]. Pure apart from the [`Host`].

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use crate::admission::{AdmissionRequest, Operation, ValidationPayload};
use crate::credentials::Keyring;
use crate::custom_kinds::CustomKind;
use crate::host::{Host, ListAllRequest};
use crate::mirrors::Location;
use crate::platforms::{self, Platform};
use crate::pull_secrets::{self, PullSecrets};
use crate::reference::ImageReference;
use crate::registry::{chain_verdict, look_up, Budget, ChainVerdict, LookupRequest, Lookups};
use crate::report::{decide, Decision, Finding, Resource, Subject};
use crate::settings::Settings;
use crate::verdict::{classify_host_error, Failure, FailureKind};
use crate::workload::{
    read_pod_spec, ContainerImage, PodSpecView, PullPolicy, WorkloadError, WorkloadKind,
};

/// The audit annotation that names images found on a mirror rather than their registry.
pub const MIRROR_ANNOTATION: &str = "resolvable-images/resolved-from-mirror";

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
    let Some(target) = Target::of(request, settings) else {
        return Decision::accept();
    };
    if !matches!(request.operation, Operation::Create | Operation::Update)
        || settings.is_namespace_exempt(&request.namespace)
    {
        return Decision::accept();
    }
    let resource = Resource {
        kind: target.kind_name().to_owned(),
        namespace: request.namespace.clone(),
        name: request.display_name(),
    };
    let units = match target.extract(&request.object) {
        Ok(units) => units,
        Err(e) => return Decision::malformed(format!("{resource}: {e}")),
    };
    let already_running = match request.operation {
        Operation::Update => previous_images(&target, &request.old_object),
        _ => HashSet::new(),
    };
    let checks: Vec<Check> = units
        .iter()
        .enumerate()
        .flat_map(|(unit, u)| {
            u.containers
                .iter()
                .map(move |c| Check::new(c.clone(), unit))
        })
        .filter(|check| !already_running.contains(&check.identity()))
        .filter(|check| check.needs_registry(settings))
        .collect();
    if checks.is_empty() {
        return Decision::accept();
    }

    let mut notes = Vec::new();
    let secrets = read_secrets(
        &units,
        &checks,
        settings,
        &request.namespace,
        host,
        &mut notes,
    );
    let chains: Vec<Vec<Location>> = checks
        .iter()
        .map(|check| match &check.reference {
            Ok(reference) => settings.mirrors.locations(reference),
            Err(_) => Vec::new(),
        })
        .collect();
    let requests: Vec<LookupRequest<'_>> = checks
        .iter()
        .zip(&chains)
        .flat_map(|(check, chain)| {
            chain.iter().map(|location| LookupRequest {
                reference: &location.reference,
                unit: check.unit,
            })
        })
        .collect();
    let keyrings: Option<Vec<&Keyring>> = settings
        .pull_secrets
        .credentialed_lookups
        .then(|| {
            secrets
                .iter()
                .map(|s| s.as_ref().filter(|s| s.consulted()).map(|s| &s.keyring))
                .collect()
        })
        .flatten();
    let lookups = look_up(&requests, keyrings.as_deref(), &budget, host);
    if let Some(reason) = &lookups.fallback {
        notes.push(format!(
            "credentialed lookups (oci/v1/resolve_images) are not available here ({reason}); images were checked with the policy server's credentials"
        ));
    }

    let mut findings: Vec<Finding> = secrets
        .iter()
        .flatten()
        .filter(|s| s.consulted())
        .flat_map(|s| s.findings.iter())
        .map(|finding| Finding {
            subject: Subject::PullSecret {
                description: finding.description.clone(),
            },
            failure: finding.failure.clone(),
        })
        .collect();
    let mut judge = Judge {
        host,
        budget: &budget,
        lookups,
        secrets: &secrets,
        units: &units,
        namespace: &request.namespace,
        platforms: PlatformChecker::new(settings, host, &budget),
        pins: Vec::new(),
        from_mirrors: Vec::new(),
    };
    for (check, chain) in checks.into_iter().zip(&chains) {
        if let Some(failure) = judge.failure(&check, chain) {
            let finding = Finding::image(check.container, check.reference.ok(), failure);
            findings.push(finding.with_mirrors(chain.len() > 1));
        }
    }
    let Judge {
        pins, from_mirrors, ..
    } = judge;
    let mut decision = decide(&resource, &findings, &notes, &settings.actions);
    if !from_mirrors.is_empty() {
        decision
            .audit_annotations
            .insert(MIRROR_ANNOTATION.to_owned(), from_mirrors.join("; "));
    }
    if decision.accepted && settings.pin_digests && !pins.is_empty() {
        decision.mutated_object = Some(pin(&request.object, &pins));
    }
    decision
}

/// What the checks of one request share while their verdicts are worked out, and what the
/// resolved ones leave behind (digests to pin, images found on mirrors).
struct Judge<'a, H: Host> {
    host: &'a H,
    budget: &'a Budget,
    lookups: Lookups,
    secrets: &'a [Option<PullSecrets>],
    units: &'a [Unit],
    namespace: &'a str,
    platforms: PlatformChecker<'a, H>,
    pins: Vec<(String, String)>,
    from_mirrors: Vec<String>,
}

impl<H: Host> Judge<'_, H> {
    /// Why `check`'s image will not (or may not) pull from `chain`, if it will not.
    fn failure(&mut self, check: &Check, chain: &[Location]) -> Option<Failure> {
        let reference = match &check.reference {
            Err(failure) => return Some(failure.clone()),
            Ok(reference) => reference,
        };
        let (lookups, budget, host) = (&mut self.lookups, self.budget, self.host);
        let verdict = chain_verdict(chain, |r| {
            Some(lookups.verdict(check.unit, r, budget, host))
        });
        let (digest, location, is_mirror) = match verdict {
            ChainVerdict::Failed(failure) => {
                return Some(explain_refusal(
                    failure,
                    reference,
                    chain.len(),
                    self.secrets.get(check.unit).and_then(Option::as_ref),
                    self.namespace,
                    &self.lookups,
                ))
            }
            ChainVerdict::Resolved {
                digest,
                location,
                is_mirror,
            } => (digest, location, is_mirror),
        };
        let container = &check.container;
        if is_mirror {
            self.from_mirrors.push(format!(
                "{container} {}: {}",
                container.image,
                location.lookup_reference()
            ));
        }
        let node_selector = self.units[check.unit]
            .spec
            .as_ref()
            .map(|s| &s.node_selector);
        let failure = self.platforms.check(&location, &digest, node_selector);
        if failure.is_none() && reference.digest().is_none() {
            self.pins.push((
                container.pointer.clone(),
                format!("{}@{digest}", container.image),
            ));
        }
        failure
    }
}

/// Where the images of a request's object are.
enum Target<'a> {
    /// A kind the policy knows.
    Builtin(WorkloadKind),
    /// A kind configured in `customResources`.
    Custom(&'a CustomKind),
}

/// A pod spec's containers, or a custom kind's bare image fields, with the credentials source.
struct Unit {
    containers: Vec<ContainerImage>,
    /// The pod spec, when there is one (bare image fields have none, so no pull secrets).
    spec: Option<PodSpecView>,
    /// True for a Pod: the ServiceAccount plugin has already set its pull secrets.
    admitted_pod: bool,
}

impl<'a> Target<'a> {
    fn of(request: &AdmissionRequest, settings: &'a Settings) -> Option<Self> {
        let kind = &request.kind;
        WorkloadKind::from_group_kind(&kind.group, &kind.kind)
            .map(Target::Builtin)
            .or_else(|| {
                settings
                    .custom_kinds
                    .iter()
                    .find(|custom| custom.matches(&kind.group, &kind.version, &kind.kind))
                    .map(Target::Custom)
            })
    }

    fn kind_name(&self) -> &str {
        match self {
            Target::Builtin(kind) => kind.as_str(),
            Target::Custom(custom) => &custom.kind,
        }
    }

    fn extract(&self, object: &Value) -> Result<Vec<Unit>, WorkloadError> {
        // The containers move out of the spec: the rest of it only serves secrets and platforms.
        let unit = |mut spec: PodSpecView, admitted_pod| Unit {
            containers: std::mem::take(&mut spec.containers),
            spec: Some(spec),
            admitted_pod,
        };
        match self {
            Target::Builtin(kind) => Ok(vec![unit(
                read_pod_spec(*kind, object)?,
                *kind == WorkloadKind::Pod,
            )]),
            Target::Custom(custom) => {
                let found = custom.extract(object)?;
                let mut units: Vec<Unit> = found
                    .pod_specs
                    .into_iter()
                    .map(|spec| unit(spec, false))
                    .collect();
                units.push(Unit {
                    containers: found.fields,
                    spec: None,
                    admitted_pod: false,
                });
                Ok(units)
            }
        }
    }
}

/// The pull secrets of every pod spec that has an image to check (`None` where there is no
/// pod spec or consulting is off); notes once if they could not be read.
fn read_secrets(
    units: &[Unit],
    checks: &[Check],
    settings: &Settings,
    namespace: &str,
    host: &impl Host,
    notes: &mut Vec<String>,
) -> Vec<Option<PullSecrets>> {
    let secrets: Vec<Option<PullSecrets>> = units
        .iter()
        .enumerate()
        .map(|(i, unit)| {
            let spec = unit
                .spec
                .as_ref()
                .filter(|_| settings.pull_secrets.consult)?;
            checks
                .iter()
                .any(|c| c.unit == i)
                .then(|| pull_secrets::resolve(unit.admitted_pod, spec, namespace, host))
        })
        .collect();
    if let Some(reason) = secrets
        .iter()
        .flatten()
        .find_map(|s| s.unavailable.as_deref())
    {
        notes.push(format!(
            "pull secrets were not consulted ({reason}); images were checked with the policy server's credentials"
        ));
    }
    secrets
}

/// A refused lookup means more once the pod's secrets are known: no secret covering the
/// registry is its own finding; a covering secret the lookup could not use is said so. Only
/// for images with a single location: a mirror chain's detail already names every location.
fn explain_refusal(
    failure: Failure,
    reference: &ImageReference,
    locations: usize,
    secrets: Option<&PullSecrets>,
    namespace: &str,
    lookups: &Lookups,
) -> Failure {
    let Some(secrets) = secrets
        .filter(|s| s.consulted() && failure.kind == FailureKind::Unauthorized && locations == 1)
    else {
        return failure;
    };
    let registry = reference.registry();
    if secrets.keyring.lookup(&reference.name()).is_empty() {
        Failure::new(
            FailureKind::UncoveredRegistry,
            format!(
                "no pull secret in namespace {namespace} covers {registry}; {}",
                failure.detail
            ),
        )
    } else if lookups.used_pod_credentials() {
        Failure::new(
            FailureKind::Unauthorized,
            format!(
                "the pod's pull secrets for {registry} were refused: {}",
                failure.detail
            ),
        )
    } else {
        Failure::new(
            FailureKind::Unauthorized,
            format!(
                "the pod's pull secrets cover {registry} but this check used the policy server's credentials; {}",
                failure.detail
            ),
        )
    }
}

/// Checks resolved images against `requiredPlatforms`, once per image digest.
struct PlatformChecker<'a, H: Host> {
    settings: &'a Settings,
    host: &'a H,
    budget: &'a Budget,
    cluster: Option<Vec<Platform>>,
    available: BTreeMap<String, Result<Vec<Platform>, Failure>>,
}

impl<'a, H: Host> PlatformChecker<'a, H> {
    fn new(settings: &'a Settings, host: &'a H, budget: &'a Budget) -> Self {
        PlatformChecker {
            settings,
            host,
            budget,
            cluster: None,
            available: BTreeMap::new(),
        }
    }

    /// The failure of an image found at `location` with `digest`, if a required platform is
    /// missing or the platforms could not be read.
    fn check(
        &mut self,
        location: &ImageReference,
        digest: &str,
        node_selector: Option<&BTreeMap<String, String>>,
    ) -> Option<Failure> {
        let requirement = &self.settings.required_platforms;
        if requirement.is_empty() {
            return None;
        }
        let mut required = requirement.platforms.clone();
        if requirement.cluster {
            required.extend(self.cluster_platforms());
        }
        if let Some(selector) = node_selector {
            required = platforms::restrict_to_node_selector(required, selector);
        }
        if required.is_empty() {
            return None;
        }
        let at = format!("{}@{digest}", location.name());
        let available = match self.available.get(&at) {
            Some(cached) => cached.clone(),
            None => {
                let read = self.read_platforms(&at);
                self.available.insert(at, read.clone());
                read
            }
        };
        match available {
            Err(failure) => Some(failure),
            Ok(available) => {
                let missing = platforms::missing(&required, &available);
                (!missing.is_empty()).then(|| {
                    Failure::new(
                        FailureKind::MissingPlatform,
                        format!(
                            "no manifest for {}; the image has {}",
                            platforms::list(&missing),
                            platforms::list(&available)
                        ),
                    )
                })
            }
        }
    }

    /// The platforms of the cluster's Nodes, listed once per request.
    fn cluster_platforms(&mut self) -> Vec<Platform> {
        let host = self.host;
        self.cluster
            .get_or_insert_with(|| {
                let request = ListAllRequest {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    label_selector: None,
                    field_selector: None,
                    field_masks: Some(vec!["metadata.labels".into(), "status.nodeInfo".into()]),
                };
                host.list_resources_all(&request)
                    .map(|list| platforms::node_platforms(&list))
                    .unwrap_or_default()
            })
            .clone()
    }

    /// An index's platforms, or a single manifest's from its config.
    fn read_platforms(&self, at: &str) -> Result<Vec<Platform>, Failure> {
        if self.budget.is_spent(self.host) {
            return Err(self.budget.not_checked());
        }
        let manifest = self
            .host
            .oci_manifest(at)
            .map_err(|e| classify_host_error(&e))?;
        if let Some(platforms) = platforms::index_platforms(&manifest) {
            return Ok(platforms);
        }
        let answer = self
            .host
            .oci_manifest_config(at)
            .map_err(|e| classify_host_error(&e))?;
        Ok(Platform::from_json(&answer["config"]).into_iter().collect())
    }
}

/// `object` with each image at a pointer replaced by its pinned form.
fn pin(object: &Value, pins: &[(String, String)]) -> Value {
    let mut pinned = object.clone();
    for (pointer, image) in pins {
        if let Some(field) = pinned.pointer_mut(pointer) {
            *field = Value::String(image.clone());
        }
    }
    pinned
}

/// One container's image on its way to a verdict.
struct Check {
    container: ContainerImage,
    reference: Result<ImageReference, Failure>,
    /// The pod spec (unit) the container belongs to.
    unit: usize,
}

impl Check {
    fn new(container: ContainerImage, unit: usize) -> Self {
        let reference = ImageReference::parse(&container.image)
            .map_err(|e| Failure::new(FailureKind::InvalidReference, e.to_string()));
        Check {
            container,
            reference,
            unit,
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
fn previous_images(target: &Target<'_>, old_object: &Value) -> HashSet<String> {
    target
        .extract(old_object)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|unit| unit.containers)
        .map(|container| Check::new(container, 0).identity())
        .collect()
}
