//! Workloads and their containers: where each kind keeps its pod spec, which images it lists
//! (containers' and image volumes'), and the pull policy the kubelet will apply to each.
//!
//! Our own types rather than `k8s-openapi`'s `PodSpec`, holding only what the policy reads
//! (names, images and pull policies of containers and image volumes, pull secrets,
//! ServiceAccount, the scheduling fields as raw JSON): a custom kind's template may hold
//! placeholders (`terminationGracePeriodSeconds: "{{…}}"`) in typed fields the policy never
//! reads, and those must not turn the request into a 400. (`k8s-openapi` stays a dependency
//! only to pick the Kubernetes version the SDK is built for.)

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::scheduling::{LazyJson, Placement};
use json_extent::{self, list_elements, struct_members, struct_members_at, Scanner, REFUSED};

/// The kinds whose pods the kubelet will start, and so whose images must be pullable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// `v1/Pod`
    Pod,
    /// `apps/v1/Deployment`
    Deployment,
    /// `apps/v1/ReplicaSet`
    ReplicaSet,
    /// `apps/v1/StatefulSet`
    StatefulSet,
    /// `apps/v1/DaemonSet`
    DaemonSet,
    /// `batch/v1/Job`
    Job,
    /// `batch/v1/CronJob`
    CronJob,
    /// `v1/ReplicationController`
    ReplicationController,
}

impl WorkloadKind {
    /// The workload kind of an admission request's `kind`, if the policy handles it.
    pub fn from_group_kind(group: &str, kind: &str) -> Option<Self> {
        Some(match (group, kind) {
            ("", "Pod") => WorkloadKind::Pod,
            ("", "ReplicationController") => WorkloadKind::ReplicationController,
            ("apps", "Deployment") => WorkloadKind::Deployment,
            ("apps", "ReplicaSet") => WorkloadKind::ReplicaSet,
            ("apps", "StatefulSet") => WorkloadKind::StatefulSet,
            ("apps", "DaemonSet") => WorkloadKind::DaemonSet,
            ("batch", "Job") => WorkloadKind::Job,
            ("batch", "CronJob") => WorkloadKind::CronJob,
            _ => return None,
        })
    }

    /// JSON pointer to the pod spec inside an object of this kind.
    pub fn pod_spec_pointer(self) -> &'static str {
        match self {
            WorkloadKind::Pod => "/spec",
            WorkloadKind::CronJob => "/spec/jobTemplate/spec/template/spec",
            _ => "/spec/template/spec",
        }
    }

    /// The kind as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Pod => "Pod",
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::ReplicaSet => "ReplicaSet",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
            WorkloadKind::Job => "Job",
            WorkloadKind::CronJob => "CronJob",
            WorkloadKind::ReplicationController => "ReplicationController",
        }
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a pod spec lists an image: its three container lists, its image volumes, or a custom
/// kind's image field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContainerList {
    /// `initContainers`, run before the others.
    Init,
    /// `containers`
    Regular,
    /// `ephemeralContainers`, added for debugging.
    Ephemeral,
    /// `volumes[].image` (KEP-4639): an OCI image or artifact the kubelet pulls like a
    /// container's image, with the pod's pull secrets, and mounts before any container starts.
    Volume,
    /// An image field of a custom kind, found by a JSONPath from the settings.
    Field,
}

impl ContainerList {
    /// How messages name a container of this list.
    pub fn label(self) -> &'static str {
        match self {
            ContainerList::Init => "init container",
            ContainerList::Regular => "container",
            ContainerList::Ephemeral => "ephemeral container",
            ContainerList::Volume => "volume",
            ContainerList::Field => "image field",
        }
    }
}

/// The kubelet's `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// Resolve the reference at every start.
    Always,
    /// Pull only when the node lacks the image.
    IfNotPresent,
    /// Never contact a registry: the image must already be on the node.
    Never,
}

impl PullPolicy {
    /// The policy the kubelet applies: the explicit one, else `Always` for images resolved
    /// through `latest`, else `IfNotPresent` (Kubernetes' `SetDefaults_Container`).
    pub fn effective(explicit: Option<&str>, reference: &ImageReference) -> Self {
        match explicit {
            Some("Always") => PullPolicy::Always,
            Some("IfNotPresent") => PullPolicy::IfNotPresent,
            Some("Never") => PullPolicy::Never,
            _ if reference.resolves_latest() => PullPolicy::Always,
            _ => PullPolicy::IfNotPresent,
        }
    }
}

/// One container's (or image volume's) image, with where it sits so messages can point at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerImage {
    /// Which list the container is in.
    pub list: ContainerList,
    /// The container's (or volume's) name.
    pub name: String,
    /// The image exactly as written (empty when missing): a container's `image`, a volume's
    /// `image.reference`.
    pub image: String,
    /// The explicit `imagePullPolicy` (a volume's `image.pullPolicy`), if any.
    pub pull_policy: Option<String>,
    /// JSON pointer to the image field in the object, where a pinned digest is written.
    pub pointer: String,
}

impl ContainerImage {
    /// True for an image volume's reference, which is mounted and never run: its platform
    /// matters only where an index offers a choice (see `platforms`).
    pub fn is_volume(&self) -> bool {
        self.list == ContainerList::Volume
    }
}

impl fmt::Display for ContainerImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?}", self.list.label(), self.name)
    }
}

/// Why the images of an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// The object has no pod spec where its kind keeps one.
    #[error("the object has no pod spec at {pointer}")]
    MissingPodSpec {
        /// Where the pod spec was expected.
        pointer: String,
    },
    /// The pod spec is not a valid `PodSpec`.
    #[error("the pod spec at {pointer} is malformed: {reason}")]
    Malformed {
        /// Where the pod spec is.
        pointer: String,
        /// The decoding error.
        reason: String,
    },
    /// The custom kind's rule does not compile: settings the host did not validate.
    #[error("the settings' rule for {kind} is invalid: {reason}")]
    InvalidRule {
        /// The custom kind.
        kind: String,
        /// Which path, and why.
        reason: String,
    },
}

/// What the policy reads from a pod spec: its images, where their credentials come from, and
/// what narrows the nodes its pods can land on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodSpecView {
    /// Every image: init containers, containers, ephemeral containers, then image volumes.
    pub containers: Vec<ContainerImage>,
    /// The names in `imagePullSecrets`, in order, as written: an entry with an empty name
    /// still makes the list non-empty for the ServiceAccount plugin, and the kubelet skips it.
    pub image_pull_secrets: Vec<String>,
    /// `serviceAccountName`, when set.
    pub service_account_name: Option<String>,
    /// `nodeSelector`: narrows the platforms the pods can land on.
    pub node_selector: std::collections::BTreeMap<String, String>,
    /// `affinity`, as written: read by the platform rules, compared on UPDATE.
    pub affinity: LazyJson,
    /// `tolerations`, as written: read by the platform rules, compared on UPDATE.
    pub tolerations: LazyJson,
    /// True for a Pod, which the ServiceAccount admission plugin has already completed: its
    /// `imagePullSecrets` are final. False for templates.
    pub admitted_pod: bool,
    /// True for a DaemonSet's template, whose pods get the controller's tolerations.
    pub daemon_set: bool,
}

impl PodSpecView {
    /// Where the kubelet takes these pods' pull secret names from: their own, else their
    /// ServiceAccount's.
    pub fn secret_source(&self) -> kubelet_credentials::SecretSource {
        kubelet_credentials::SecretSource::of(
            self.admitted_pod,
            &self.image_pull_secrets,
            self.service_account_name.as_deref(),
        )
    }

    /// The ServiceAccount its pods run as: `serviceAccountName`, else the one the
    /// ServiceAccount admission plugin gives them.
    pub fn service_account(&self) -> &str {
        self.service_account_name
            .as_deref()
            .unwrap_or(kubelet_credentials::pod_secrets::DEFAULT_SERVICE_ACCOUNT)
    }

    /// What decides which credentials the kubelet uses: a change re-checks every image.
    pub fn credentials_context(&self) -> (&[String], Option<&str>) {
        (
            &self.image_pull_secrets,
            self.service_account_name.as_deref(),
        )
    }

    /// What decides which nodes (and so platforms) the pods land on.
    pub fn scheduling_context(
        &self,
    ) -> (
        &std::collections::BTreeMap<String, String>,
        &LazyJson,
        &LazyJson,
    ) {
        (&self.node_selector, &self.affinity, &self.tolerations)
    }

    /// How the scheduler places the pods.
    pub fn placement(&self) -> Placement<'_> {
        Placement {
            node_selector: &self.node_selector,
            affinity: &self.affinity,
            tolerations: &self.tolerations,
            daemon_set: self.daemon_set,
        }
    }
}

/// The fields of a pod spec the policy needs, and nothing else: a custom kind's template may
/// hold placeholders (`terminationGracePeriodSeconds: "{{…}}"`) in fields the policy does not
/// read, and those must never fail a request. Read from the request's text only (a custom
/// kind's pod spec is written back to text first), so that `volumes` can stay text.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodSpecFields<'a> {
    #[serde(default, deserialize_with = "null_as_default")]
    init_containers: Vec<ContainerFields>,
    containers: Vec<ContainerFields>,
    #[serde(default, deserialize_with = "null_as_default")]
    ephemeral_containers: Vec<ContainerFields>,
    /// Kept as text and read entry by entry ([`lenient_volumes`]): a pod's volumes are mostly
    /// not images (every Pod has its projected ServiceAccount token), and building a `Value`
    /// of them cost more than the rest of a one-container Pod's spec on a fresh instance.
    #[serde(
        default,
        borrow,
        deserialize_with = "crate::vocabulary::object::raw_text"
    )]
    volumes: Option<&'a str>,
    #[serde(default, deserialize_with = "null_as_default")]
    image_pull_secrets: Vec<SecretReference>,
    #[serde(default)]
    service_account_name: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    node_selector: std::collections::BTreeMap<String, String>,
    #[serde(default, deserialize_with = "lazy_json")]
    affinity: LazyJson,
    #[serde(default, deserialize_with = "lazy_json")]
    tolerations: LazyJson,
}

/// A member serde reads whole, as a [`LazyJson`] already parsed.
fn lazy_json<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<LazyJson, D::Error> {
    Value::deserialize(deserializer).map(LazyJson::from)
}

/// The fields of a container the policy needs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerFields {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    image_pull_policy: Option<String>,
}

/// The fields of a volume the policy needs: its name and, for an image volume, its source.
#[derive(Deserialize)]
struct VolumeFields {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default)]
    image: Option<ImageVolumeFields>,
}

/// `volumes[].image` (`ImageVolumeSource`). `reference` is optional in templates, as a
/// container's `image` is, for tools that fill it in later.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImageVolumeFields {
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    pull_policy: Option<String>,
}

/// An `imagePullSecrets` entry.
#[derive(Deserialize)]
struct SecretReference {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
}

/// `{spec}/{field}/{index}{leaf}` (`leaf` is `/image`, or `/image/reference` for a volume),
/// built without the formatting machinery: one is made for every container of every request.
fn image_pointer(spec: &str, field: &str, index: usize, leaf: &str) -> String {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    let mut rest = index;
    loop {
        start -= 1;
        digits[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let index = std::str::from_utf8(&digits[start..]).unwrap_or("0");
    let mut pointer =
        String::with_capacity(spec.len() + field.len() + index.len() + leaf.len() + 2);
    for part in [spec, "/", field, "/", index, leaf] {
        pointer.push_str(part);
    }
    pointer
}

/// `volumes`, entry by entry: an entry that does not decode (a custom kind's template may hold
/// a placeholder where a volume goes) reads as `None`, keeping the others' indexes, and
/// anything but a list reads as empty. The API server has validated a Pod's volumes already.
fn lenient_volumes(volumes: Option<&str>) -> Vec<Option<VolumeFields>> {
    let Some(text) = volumes else {
        return Vec::new();
    };
    // each entry found by the scanner, and read by it unless serde must say what it is
    let mut scanned = Vec::new();
    let walked = list_elements(text, |entry| {
        scanned
            .push(VolumeFields::scan(entry).unwrap_or_else(|| VolumeFields::read_by_serde(entry)));
        Some(())
    });
    match walked {
        Some(()) => scanned,
        None => volumes_by_serde(text),
    }
}

/// [`lenient_volumes`] by serde, for a list the scanner does not walk; out of line.
#[cold]
#[inline(never)]
fn volumes_by_serde(text: &str) -> Vec<Option<VolumeFields>> {
    let Ok(entries) = serde_json::from_str::<Vec<&RawValue>>(text) else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|entry| VolumeFields::read_by_serde(entry.get()))
        .collect()
}

/// The members of [`PodSpecFields`] in [`PodSpecFields::scan`]'s order, by their JSON names.
const SPEC_FIELDS: [&str; 9] = [
    "initContainers",
    "containers",
    "ephemeralContainers",
    "volumes",
    "imagePullSecrets",
    "serviceAccountName",
    "nodeSelector",
    "affinity",
    "tolerations",
];

impl<'a> PodSpecFields<'a> {
    /// The fields as serde reads them from the pod spec `raw`, found by the scanner: serde
    /// walked every byte of the spec (each container's env, resources and probes, every
    /// volume) to read these few. `None` where serde must read the spec, to name what does not
    /// fit: a member of the wrong type, one written twice, a key with an escape.
    fn scan(raw: &'a str) -> Option<Self> {
        let mut texts: [Option<&str>; SPEC_FIELDS.len()] = [None; SPEC_FIELDS.len()];
        // the container lists read where they are (`null`: none), not delimited first
        let mut lists: [Option<Vec<ContainerFields>>; 3] = [None, None, None];
        struct_members_at(&mut Scanner::new(raw), |key, scanner| {
            let Some(field) = SPEC_FIELDS.iter().position(|f| *f == key) else {
                scanner.value().ok()?;
                return Some(0);
            };
            match lists.get_mut(field) {
                Some(list) => *list = ContainerFields::scan_list_at(scanner)?,
                None => texts[field] = Some(scanner.value().ok()?),
            }
            Some(1 << field)
        })?;
        let [_, _, _, volumes, secrets, account, selector, affinity, tolerations] = texts;
        let [init, containers, ephemeral] = lists;
        Some(PodSpecFields {
            init_containers: init.unwrap_or_default(),
            // required: serde names it missing, or refuses `null`
            containers: containers?,
            ephemeral_containers: ephemeral.unwrap_or_default(),
            volumes: volumes.filter(|text| *text != "null"),
            image_pull_secrets: SecretReference::scan_list(secrets)?,
            service_account_name: account.map_or(Some(None), json_extent::string_or_null)?,
            node_selector: match selector {
                None => BTreeMap::new(),
                Some(text) => serde_json::from_str::<Option<_>>(text)
                    .ok()?
                    .unwrap_or_default(),
            },
            affinity: affinity.map(LazyJson::from_text).unwrap_or_default(),
            tolerations: tolerations.map(LazyJson::from_text).unwrap_or_default(),
        })
    }

    /// The fields read by serde, for a spec the scanner's reading does not cover; out of line
    /// like the request's fallback ([`crate::plan::admission::AdmissionRequest::read_from`]).
    #[cold]
    #[inline(never)]
    fn read_by_serde(raw: &'a str, pointer: &str) -> Result<Self, WorkloadError> {
        serde_json::from_str(raw).map_err(|e| WorkloadError::Malformed {
            pointer: pointer.to_owned(),
            reason: without_position(&e),
        })
    }
}

impl ContainerFields {
    /// The list of containers at `scanner`, which it moves past the list, as serde reads it:
    /// `Some(None)` for `null`; `None` where serde must read it.
    fn scan_list_at(scanner: &mut Scanner<'_>) -> Option<Option<Vec<Self>>> {
        if scanner.next_byte() == Some(b'n') {
            return (scanner.value().ok()? == "null").then_some(None);
        }
        let mut containers = Vec::new();
        scanner
            .elements(|scanner| {
                containers.push(Self::scan_at(scanner).ok_or(REFUSED)?);
                Ok(())
            })
            .ok()?;
        Some(Some(containers))
    }

    /// The fields of the container at `scanner`, its other members skipped; `None` for an
    /// entry that is not an object (serde refuses `null` there).
    fn scan_at(scanner: &mut Scanner<'_>) -> Option<Self> {
        let mut container = ContainerFields {
            name: String::new(),
            image: None,
            image_pull_policy: None,
        };
        struct_members_at(scanner, |key, scanner| {
            let value = scanner.value().ok()?;
            Some(match key {
                "name" => {
                    container.name = json_extent::string_or_default(value)?;
                    1
                }
                "image" => {
                    container.image = json_extent::string_or_null(value)?;
                    1 << 1
                }
                "imagePullPolicy" => {
                    container.image_pull_policy = json_extent::string_or_null(value)?;
                    1 << 2
                }
                _ => 0,
            })
        })?;
        Some(container)
    }
}

impl SecretReference {
    /// `imagePullSecrets` (absent or `null`: none), as serde reads it; `None` where serde must.
    fn scan_list(text: Option<&str>) -> Option<Vec<Self>> {
        let mut secrets = Vec::new();
        let Some(text) = text.filter(|text| *text != "null") else {
            return Some(secrets);
        };
        list_elements(text, |entry| {
            if entry == "null" {
                return None;
            }
            secrets.push(SecretReference {
                name: json_extent::string_field(entry, "name")?,
            });
            Some(())
        })?;
        Some(secrets)
    }
}

impl VolumeFields {
    /// One volume read by serde: `None` when it cannot read it. Out of line.
    #[cold]
    #[inline(never)]
    fn read_by_serde(entry: &str) -> Option<Self> {
        serde_json::from_str(entry).ok()
    }

    /// One volume's name and image source, as serde reads them; `None` where serde must say
    /// (the entry then reads as serde reads it: a volume it cannot read is skipped).
    fn scan(entry: &str) -> Option<Option<Self>> {
        if entry == "null" {
            return None;
        }
        let mut volume = VolumeFields {
            name: String::new(),
            image: None,
        };
        struct_members(entry, |key, value| match key {
            "name" => {
                volume.name = json_extent::string_or_default(value)?;
                Some(1)
            }
            "image" => {
                volume.image = ImageVolumeFields::scan(value)?;
                Some(1 << 1)
            }
            _ => Some(0),
        })?;
        Some(Some(volume))
    }
}

impl ImageVolumeFields {
    /// `volumes[].image` (`null`: none), as serde reads it.
    fn scan(value: &str) -> Option<Option<Self>> {
        if value == "null" {
            return Some(None);
        }
        let mut image = ImageVolumeFields {
            reference: None,
            pull_policy: None,
        };
        struct_members(value, |key, value| {
            Some(match key {
                "reference" => {
                    image.reference = json_extent::string_or_null(value)?;
                    1
                }
                "pullPolicy" => {
                    image.pull_policy = json_extent::string_or_null(value)?;
                    1 << 1
                }
                _ => 0,
            })
        })?;
        Some(Some(image))
    }
}

/// Treats an explicit JSON `null` like an absent field.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Reads the pod spec of an object of `kind` from `found`, the JSON at the kind's
/// [pointer](WorkloadKind::pod_spec_pointer) of the object
/// ([`crate::vocabulary::object::Object::metadata_and_at`] finds it in the pass that reads the
/// metadata).
pub fn read_pod_spec(
    kind: WorkloadKind,
    found: Option<&str>,
) -> Result<PodSpecView, WorkloadError> {
    let pointer = kind.pod_spec_pointer();
    let missing = || WorkloadError::MissingPodSpec {
        pointer: pointer.to_owned(),
    };
    let raw = found.filter(|raw| *raw != "null").ok_or_else(missing)?;
    let mut spec = read_fields(raw, pointer)?;
    spec.admitted_pod = kind == WorkloadKind::Pod;
    spec.daemon_set = kind == WorkloadKind::DaemonSet;
    Ok(spec)
}

/// Reads the pod spec at a JSON `pointer` of `object` (a custom kind's, found by JSONPath).
/// Written back to text and read as a built-in kind's is: custom kinds are rare, and one
/// reader means one behaviour (and one wording of errors) for both.
pub fn read_pod_spec_at(pointer: &str, object: &Value) -> Result<PodSpecView, WorkloadError> {
    let spec = match object.pointer(pointer) {
        None | Some(Value::Null) => {
            return Err(WorkloadError::MissingPodSpec {
                pointer: pointer.to_owned(),
            })
        }
        Some(spec) => spec,
    };
    let text = serde_json::value::to_raw_value(spec).map_err(|e| WorkloadError::Malformed {
        pointer: pointer.to_owned(),
        reason: e.to_string(),
    })?;
    read_fields(text.get(), pointer)
}

/// The pod spec in `raw` (at `pointer`, for messages) decoded.
fn read_fields(raw: &str, pointer: &str) -> Result<PodSpecView, WorkloadError> {
    let fields = match PodSpecFields::scan(raw) {
        Some(fields) => fields,
        None => PodSpecFields::read_by_serde(raw, pointer)?,
    };
    Ok(view(fields, pointer))
}

/// A decoding error as a `Value` would have told it: without the position in the text.
fn without_position(error: &serde_json::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_owned(),
        None => text,
    }
}

/// The pod spec at `pointer`, its containers each with the pointer to its image.
fn view(spec: PodSpecFields<'_>, pointer: &str) -> PodSpecView {
    let lists = [
        (ContainerList::Init, "initContainers", spec.init_containers),
        (ContainerList::Regular, "containers", spec.containers),
        (
            ContainerList::Ephemeral,
            "ephemeralContainers",
            spec.ephemeral_containers,
        ),
    ];
    let containers = lists
        .into_iter()
        .flat_map(|(list, field, containers)| {
            containers
                .into_iter()
                .enumerate()
                .map(move |(index, container)| ContainerImage {
                    list,
                    name: container.name,
                    image: container.image.unwrap_or_default(),
                    pull_policy: container.image_pull_policy,
                    pointer: image_pointer(pointer, field, index, "/image"),
                })
        })
        .chain(
            lenient_volumes(spec.volumes)
                .into_iter()
                .enumerate()
                .filter_map(|(index, volume)| {
                    let volume = volume?;
                    Some((index, volume.name, volume.image?))
                })
                .map(|(index, name, image)| ContainerImage {
                    list: ContainerList::Volume,
                    name,
                    image: image.reference.unwrap_or_default(),
                    pull_policy: image.pull_policy,
                    pointer: image_pointer(pointer, "volumes", index, "/image/reference"),
                }),
        )
        .collect();
    PodSpecView {
        containers,
        image_pull_secrets: spec
            .image_pull_secrets
            .into_iter()
            .map(|reference| reference.name)
            .collect(),
        service_account_name: spec.service_account_name.filter(|name| !name.is_empty()),
        node_selector: spec.node_selector,
        affinity: spec.affinity,
        tolerations: spec.tolerations,
        admitted_pod: false,
        daemon_set: false,
    }
}

#[cfg(test)]
mod tests;
