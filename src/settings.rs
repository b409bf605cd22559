//! Policy settings: what operators may configure, parsed strictly so that a typo in a
//! `ClusterAdmissionPolicy` is refused when the policy loads instead of silently ignored.

use std::cell::OnceCell;
use std::fmt;

use serde::Deserialize;

pub use crate::action::Action;
use crate::broker_settings::BrokerSettings;
use crate::custom_kinds::{CustomKind, CustomResourceRule};
use crate::failure::FailureKind;
use crate::field_error::FieldError;
use crate::globs::Glob;
use crate::lookup_scope::LookupScope;
use crate::mirrors::{Mirrors, RegistryRule};
use crate::platforms::Requirement;
use crate::reference::ImageReference;
use crate::short_names::{ShortNameRules, ShortNames};
use crate::ui_form;

/// One action per failure class, keyed by [`FailureKind`]'s setting keys; a kind the operator
/// does not name gets its [default](FailureKind::default_action), which rejects only what is
/// certain to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions([Action; FailureKind::COUNT]);

impl Default for Actions {
    fn default() -> Self {
        Actions(FailureKind::ALL.map(FailureKind::default_action))
    }
}

impl Actions {
    /// The configured action for a failure class.
    pub fn for_kind(&self, kind: FailureKind) -> Action {
        self.0[kind.index()]
    }

    /// These actions, with `kind` handled by `action`.
    pub fn with(mut self, kind: FailureKind, action: Action) -> Self {
        self.0[kind.index()] = action;
        self
    }
}

impl<'de> Deserialize<'de> for Actions {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ActionsVisitor;
        impl<'de> serde::de::Visitor<'de> for ActionsVisitor {
            type Value = Actions;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from failure kinds to reject, warn or allow")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Actions, A::Error> {
                let mut actions = Actions::default();
                let mut seen = [false; FailureKind::COUNT];
                while let Some(kind) = map.next_key::<FailureKind>()? {
                    if std::mem::replace(&mut seen[kind.index()], true) {
                        return Err(serde::de::Error::duplicate_field(kind.setting_key()));
                    }
                    actions = actions.with(kind, map.next_value()?);
                }
                Ok(actions)
            }
        }
        deserializer.deserialize_map(ActionsVisitor)
    }
}

/// How the policy uses the pods' image pull secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PullSecretSettings {
    /// Read pull secrets and ServiceAccounts (`kubernetes/get_resource`) to report missing,
    /// wrong or malformed secrets and registries no secret covers.
    pub consult: bool,
    /// Look images up with the pods' own credentials through `oci/v1/resolve_images`, on
    /// hosts that implement it; stock hosts fall back to `oci/v1/manifest_digest`.
    pub credentialed_lookups: bool,
}

impl Default for PullSecretSettings {
    fn default() -> Self {
        PullSecretSettings {
            consult: true,
            credentialed_lookups: false,
        }
    }
}

/// Whether objects created by a controller the policy checks (a Deployment's ReplicaSets, a
/// CronJob's Jobs, a ReplicaSet's Pods, a custom kind's children) are looked up again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OwnedObjects {
    /// Their owner was the admission point: check only the ephemeral containers added to Pods.
    #[default]
    Skip,
    /// Look them up like any object.
    Check,
}

/// `audit`: what an instance does with the requests of Kubewarden's audit scanner, which shares
/// the policy server's workers with admission (docs/audit.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AuditSettings {
    /// Look the images of audited objects up. Off by default: a sweep of cold lookups on the
    /// policy server that answers the API server holds admission for as long as it lasts, so
    /// only an instance on a policy server of its own should turn it on.
    pub lookups: bool,
}

/// Registries that answer 404 instead of 401/403 to callers that may not see a repository
/// (Artifactory's "hide existence of unauthorized resources"; JFrog's SaaS runs it).
pub const DEFAULT_NOT_FOUND_MAY_MEAN_DENIED: [&str; 1] = ["*.jfrog.io"];

/// Default time budget: comfortably under the policy server's default 2 s evaluation time-out.
pub const DEFAULT_TIME_BUDGET_MS: u64 = 1_500;
/// The policy server stops any evaluation after at most 30 s.
const MAX_TIME_BUDGET_MS: u64 = 30_000;

/// The settings as operators write them (camelCase JSON/YAML).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
struct RawSettings {
    actions: Actions,
    pull_secrets: PullSecretSettings,
    time_budget_ms: u64,
    exempt_namespaces: Vec<String>,
    exempt_images: Vec<String>,
    registries: Vec<RegistryRule>,
    required_platforms: Vec<String>,
    pin_digests: bool,
    custom_resources: Vec<CustomResourceRule>,
    owned_objects: Option<OwnedObjects>,
    /// The former name of `ownedObjects`, from when only Pods were skipped: still accepted.
    owned_pods: Option<OwnedObjects>,
    lookup_registries: Vec<String>,
    /// `None` when not written: the defaults, which need no parsing.
    denied_lookup_networks: Option<Vec<String>>,
    /// `None` when not written: the defaults, compiled only if a 404 asks for them.
    not_found_may_mean_denied: Option<Vec<String>>,
    short_names: ShortNameRules,
    lookup_broker: Option<BrokerSettings>,
    audit: AuditSettings,
}

impl Default for RawSettings {
    fn default() -> Self {
        RawSettings {
            actions: Actions::default(),
            pull_secrets: PullSecretSettings::default(),
            time_budget_ms: DEFAULT_TIME_BUDGET_MS,
            exempt_namespaces: Vec::new(),
            exempt_images: Vec::new(),
            registries: Vec::new(),
            required_platforms: Vec::new(),
            pin_digests: false,
            custom_resources: Vec::new(),
            owned_objects: None,
            owned_pods: None,
            lookup_registries: Vec::new(),
            denied_lookup_networks: None,
            not_found_may_mean_denied: None,
            short_names: ShortNameRules::default(),
            lookup_broker: None,
            audit: AuditSettings::default(),
        }
    }
}

/// Validated settings, with exemption patterns compiled once per evaluation.
#[derive(Debug, Clone)]
pub struct Settings {
    /// What to do per failure class.
    pub actions: Actions,
    /// How pull secrets are used.
    pub pull_secrets: PullSecretSettings,
    /// How long an evaluation may spend on host calls before it stops making new ones.
    pub time_budget: std::time::Duration,
    /// Mirror chains, as nodes are configured.
    pub mirrors: Mirrors,
    /// Platforms every image must serve.
    pub required_platforms: Requirement,
    /// Rewrite checked images to the digest their lookup found.
    pub pin_digests: bool,
    /// Custom kinds and where their images are.
    pub custom_kinds: Vec<CustomKind>,
    /// Whether controller-owned objects are looked up again.
    pub owned_objects: OwnedObjects,
    /// Which registries lookups may go to.
    pub lookup_scope: LookupScope,
    /// Registries whose 404 proves nothing to a caller that may not see the repository.
    not_found_may_mean_denied: NotFoundGlobs,
    /// What the nodes' runtime pulls for an image written without a registry.
    pub short_names: ShortNames,
    /// The lookup broker, when lookups with pods' pull secrets go through one.
    pub lookup_broker: Option<BrokerSettings>,
    /// How requests of Kubewarden's audit scanner are answered.
    pub audit: AuditSettings,
    /// Sorted, for a binary search: no hasher to seed on every request.
    exempt_namespaces: Vec<String>,
    exempt_images: Vec<Glob>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            actions: Actions::default(),
            pull_secrets: PullSecretSettings::default(),
            time_budget: std::time::Duration::from_millis(DEFAULT_TIME_BUDGET_MS),
            mirrors: Mirrors::default(),
            required_platforms: Requirement::default(),
            pin_digests: false,
            custom_kinds: Vec::new(),
            owned_objects: OwnedObjects::default(),
            lookup_scope: LookupScope::default(),
            not_found_may_mean_denied: NotFoundGlobs::default(),
            short_names: ShortNames::default(),
            lookup_broker: None,
            audit: AuditSettings::default(),
            exempt_namespaces: Vec::new(),
            exempt_images: Vec::new(),
        }
    }
}

impl Settings {
    /// Parses and validates settings; `null` and `{}` mean all defaults. What the Kubewarden UI's
    /// form writes for "nothing" (its hidden `description`, `''`, `null`, empty rows) is
    /// removed first ([`ui_form::normalise`]).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, SettingsError> {
        // The usual settings, `{}`, need neither parsing nor compiling: policy-server 1.36 reads
        // the settings on a fresh instance for every request, and even with nothing to compile
        // the parser and every sub-compiler are code no other part of a decision runs.
        if value.is_null() || value.as_object().is_some_and(serde_json::Map::is_empty) {
            return Ok(Settings::default());
        }
        Self::compile(Self::parse_raw(&ui_form::normalise(value))?, Checks::All)
    }

    /// Parses and validates settings from their JSON text, as the host sends them. Text the
    /// Kubewarden UI's form may have written blanks into goes through [`Settings::from_value`];
    /// any other text is parsed straight into its typed form, without a `Value` tree, the
    /// normalising copy or the path-tracking parser: policy-server 1.36 reads the settings on
    /// a fresh instance for every request. Whatever fails on that path is read again by the
    /// slow one, so that an error still names its field.
    pub fn from_json(text: &str) -> Result<Self, SettingsError> {
        let trimmed = text.trim();
        if trimmed == "null"
            || trimmed
                .strip_prefix('{')
                .and_then(|t| t.strip_suffix('}'))
                .is_some_and(|t| t.trim().is_empty())
        {
            return Ok(Settings::default());
        }
        if !ui_form::may_hold_blanks(text) {
            if let Ok(raw) = serde_json::from_str::<RawSettings>(text) {
                return Self::compile(raw, Checks::WhatRequestsUse);
            }
        }
        let value = serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| SettingsError::new("", format!("not JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// Deserialises, naming the path of the first field that does not fit.
    fn parse_raw(value: &serde_json::Value) -> Result<RawSettings, SettingsError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            SettingsError {
                field: if path == "." { String::new() } else { path },
                problem: e.into_inner().to_string(),
            }
        })
    }

    /// Checks what serde cannot and compiles patterns, mirrors, platforms and JSONPaths.
    fn compile(raw: RawSettings, checks: Checks) -> Result<Self, SettingsError> {
        if !(1..=MAX_TIME_BUDGET_MS).contains(&raw.time_budget_ms) {
            return Err(SettingsError::new(
                "timeBudgetMs",
                format!("must be between 1 and {MAX_TIME_BUDGET_MS} milliseconds"),
            ));
        }
        let exempt_namespaces = compile_namespaces(raw.exempt_namespaces)?;
        let exempt_images = compile_patterns("exemptImages", raw.exempt_images)?;
        let mirrors = match checks {
            Checks::All => Mirrors::new(raw.registries).map_err(within("registries"))?,
            Checks::WhatRequestsUse => Mirrors::validated(raw.registries),
        };
        let required_platforms =
            Requirement::parse(&raw.required_platforms).map_err(within("requiredPlatforms"))?;
        let custom_kinds = raw
            .custom_resources
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                let kind = CustomKind::new(rule).and_then(|kind| {
                    if checks == Checks::All {
                        kind.compile_paths()?;
                    }
                    Ok(kind)
                });
                kind.map_err(within(&format!("customResources[{i}]")))
            })
            .collect::<Result<_, _>>()?;
        let lookup_scope = LookupScope::new(
            &raw.lookup_registries,
            raw.denied_lookup_networks.as_deref(),
        )
        .map_err(within(""))?;
        let not_found_may_mean_denied = match raw.not_found_may_mean_denied {
            None => NotFoundGlobs::default(),
            Some(patterns) => {
                NotFoundGlobs::compiled(compile_patterns("notFoundMayMeanDenied", patterns)?)
            }
        };
        let short_names = ShortNames::new(raw.short_names).map_err(within("shortNames"))?;
        let owned_objects = owned_objects(raw.owned_objects, raw.owned_pods);
        if let Some((field, problem)) = raw.lookup_broker.as_ref().and_then(BrokerSettings::problem)
        {
            return Err(SettingsError::new(field, problem));
        }
        Ok(Settings {
            lookup_broker: raw.lookup_broker,
            audit: raw.audit,
            actions: raw.actions,
            owned_objects,
            short_names,
            lookup_scope,
            not_found_may_mean_denied,
            pull_secrets: raw.pull_secrets,
            time_budget: std::time::Duration::from_millis(raw.time_budget_ms),
            mirrors,
            required_platforms,
            pin_digests: raw.pin_digests,
            custom_kinds,
            exempt_namespaces,
            exempt_images,
        })
    }

    /// True when the policy must not look at requests in this namespace.
    pub fn is_namespace_exempt(&self, namespace: &str) -> bool {
        self.exempt_namespaces
            .binary_search_by(|exempt| exempt.as_str().cmp(namespace))
            .is_ok()
    }

    /// True when `registry` (with or without its port) may answer 404 to hide a repository.
    pub fn not_found_may_mean_denied(&self, registry: &str) -> bool {
        let host = registry.split(':').next().unwrap_or(registry);
        self.not_found_may_mean_denied
            .patterns()
            .iter()
            .any(|pattern| pattern.matches(registry) || pattern.matches(host))
    }

    /// True when a normalised reference (`registry/repo:tag[@digest]`) matches an exemption.
    pub fn is_image_exempt(&self, normalised: &str) -> bool {
        self.exempt_images.iter().any(|p| p.matches(normalised))
    }

    /// True when `reference` is exempt in its fully normalised form or as it is looked up.
    /// Builds neither string when there is no exemption, the usual case: this runs for every
    /// image of every request.
    pub fn is_reference_exempt(&self, reference: &ImageReference) -> bool {
        !self.exempt_images.is_empty()
            && (self.is_image_exempt(&reference.to_string())
                || self.is_image_exempt(&reference.lookup_reference()))
    }
}

/// How much of the settings is checked. Validation (the host's `validate_settings`, once per
/// policy load) checks everything, so that a bad document is refused naming its field. A
/// request reads settings the host has validated, on a fresh instance every time on
/// policy-server 1.36: it compiles custom kinds' JSONPaths only for an object of the kind and
/// does not check mirror locations again (a location that does not form a reference once
/// rewritten is left out in any case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checks {
    All,
    WhatRequestsUse,
}

/// `notFoundMayMeanDenied`'s globs. When the operator wrote none, the defaults are compiled
/// when a 404 first asks for them: policy-server 1.36 compiles the settings for every request,
/// and most requests see no 404.
#[derive(Clone, Default)]
struct NotFoundGlobs(OnceCell<Vec<Glob>>);

impl NotFoundGlobs {
    /// The globs the operator wrote, already compiled (and so checked).
    fn compiled(patterns: Vec<Glob>) -> Self {
        NotFoundGlobs(OnceCell::from(patterns))
    }

    fn patterns(&self) -> &[Glob] {
        self.0.get_or_init(|| {
            DEFAULT_NOT_FOUND_MAY_MEAN_DENIED
                .iter()
                .filter_map(|pattern| Glob::new((*pattern).to_owned()).ok())
                .collect()
        })
    }
}

/// The globs as written, compiled yet or not.
impl fmt::Debug for NotFoundGlobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.patterns().iter().map(Glob::as_str))
            .finish()
    }
}
/// `exemptNamespaces`, each a namespace name.
fn compile_namespaces(mut namespaces: Vec<String>) -> Result<Vec<String>, SettingsError> {
    for (i, namespace) in namespaces.iter().enumerate() {
        if !is_dns_label(namespace) {
            return Err(SettingsError::new(
                format!("exemptNamespaces[{i}]"),
                "a namespace name must be a lowercase RFC 1123 label of at most 63 characters",
            ));
        }
    }
    namespaces.sort_unstable();
    namespaces.dedup();
    Ok(namespaces)
}

/// The image globs of the list `field`, an error naming the entry that does not compile.
fn compile_patterns(field: &str, patterns: Vec<String>) -> Result<Vec<Glob>, SettingsError> {
    patterns
        .into_iter()
        .enumerate()
        .map(|(i, pattern)| {
            compile_pattern(pattern).map_err(|p| SettingsError::new(format!("{field}[{i}]"), p))
        })
        .collect()
}

/// `ownedObjects`, or the older `ownedPods`. Both names at once: the Kubewarden UI writes
/// ownedObjects' default next to an older ownedPods when it edits a policy, so a default
/// cannot be told from a choice; checking more is the choice that never hides a failure.
fn owned_objects(new: Option<OwnedObjects>, old: Option<OwnedObjects>) -> OwnedObjects {
    match (new, old) {
        (Some(OwnedObjects::Check), _) | (_, Some(OwnedObjects::Check)) => OwnedObjects::Check,
        (new, old) => new.or(old).unwrap_or_default(),
    }
}

/// Exemption globs: `*` (also across `/`), `?` and `[...]`, matched on the normalised reference.
fn compile_pattern(pattern: String) -> Result<Glob, String> {
    if pattern.is_empty() {
        return Err("an image pattern must not be empty".into());
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("an image pattern must not contain whitespace or control characters".into());
    }
    Glob::new(pattern)
}

fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Turns a sub-parser's error into a settings error at `field`: the one place paths are joined.
fn within<E: FieldError>(field: &str) -> impl Fn(E) -> SettingsError + '_ {
    move |error| SettingsError::new(format!("{field}{}", error.field()), error.to_string())
}

/// A settings problem, naming the offending field by its path (`actions.absent`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid settings: {}{problem}", field_prefix(.field))]
pub struct SettingsError {
    field: String,
    problem: String,
}

impl SettingsError {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        SettingsError {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// `field: ` ahead of a settings problem, nothing for one of the settings as a whole.
fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    }
}

/// Answers the host's `validate_settings` call: `{"valid":true}` or `{"valid":false,"message":…}`.
pub fn validate_settings_payload(payload: &[u8]) -> Vec<u8> {
    let result = serde_json::from_slice::<serde_json::Value>(payload)
        .map_err(|e| format!("invalid settings: not JSON: {e}"))
        .and_then(|value| {
            Settings::from_value(&value)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    let response = match result {
        Ok(()) => serde_json::json!({ "valid": true }),
        Err(message) => serde_json::json!({ "valid": false, "message": message }),
    };
    serde_json::to_vec(&response).unwrap_or_else(|_| br#"{"valid":false}"#.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The error `value` gets, the same from its text as from its tree.
    fn error(value: serde_json::Value) -> String {
        let message = Settings::from_value(&value)
            .expect_err("settings should be refused")
            .to_string();
        assert_eq!(same_from_text(&value).err(), Some(message.clone()));
        message
    }

    /// `value` read from its text (the request path), checked to be what the tree gives.
    fn same_from_text(value: &serde_json::Value) -> Result<String, String> {
        let tree = Settings::from_value(value).map(|s| format!("{s:?}"));
        for text in [
            value.to_string(),
            serde_json::to_string_pretty(value).unwrap(),
        ] {
            let read = Settings::from_json(&text).map(|s| format!("{s:?}"));
            assert_eq!(
                read.clone().map_err(|e| e.to_string()),
                tree.clone().map_err(|e| e.to_string()),
                "{text}"
            );
        }
        tree.map_err(|e| e.to_string())
    }

    #[test]
    fn settings_read_from_text_are_those_read_from_the_tree() {
        let documents = [
            json!({"exemptNamespaces": ["kube-system"], "lookupRegistries": ["*.corp.example", "docker.io"]}),
            json!({"description": "shown by the UI", "timeBudgetMs": 900}),
            json!({"timeBudgetMs": null, "exemptImages": ["registry.internal/*", ""]}),
            json!({"registries": [{"prefix": "", "location": "", "mirrors": []},
                {"prefix": "docker.io", "mirrors": [{"location": "mirror.internal/hub"}]}]}),
            json!({"registries": [{"prefix": "docker.io"}, {"prefix": "docker.io"}]}),
            json!({"customResources": [{"apiVersion": "a.io/v1", "kind": "K", "images": ["$.spec.image"]}]}),
            json!({"lookupRegistries": []}),
            // empty rows: the normalised tree drops them, the strict parser refuses them
            json!({"registries": [{"mirrors": []}], "customResources": [{"images": []}]}),
            json!({"registries": [{"prefix": "docker.io", "mirrors": [{"pullFromMirror": "all"}]}]}),
            json!({"customResources": [{"podSpecs": [], "images": []}], "deniedLookupNetworks": []}),
            json!({"exemptNamespaces": ["Not A Label"]}),
            json!({"actions": {"absent": "warn"}, "unknown": 1}),
            json!({"shortNames": {"mode": "enforcing", "searchRegistries": ["quay.io"]}}),
        ];
        for document in &documents {
            let _ = same_from_text(document);
        }
        // text that is not JSON, and duplicate keys (the tree keeps the last)
        assert!(Settings::from_json("{\"timeBudgetMs\": ")
            .unwrap_err()
            .to_string()
            .contains("not JSON"));
        let twice = Settings::from_json(r#"{"timeBudgetMs": 5, "timeBudgetMs": 7}"#).unwrap();
        assert_eq!(twice.time_budget, std::time::Duration::from_millis(7));
        for empty in ["null", " {} ", "{\n}"] {
            assert_eq!(
                format!("{:?}", Settings::from_json(empty).unwrap()),
                format!("{:?}", Settings::default())
            );
        }
    }

    #[test]
    fn empty_settings_are_the_compiled_defaults() {
        // `{}` and `null` skip parsing and compiling: what they give must be what compiling
        // the defaults gives, field by field
        let compiled = format!(
            "{:?}",
            Settings::compile(RawSettings::default(), Checks::All).unwrap()
        );
        assert_eq!(format!("{:?}", Settings::default()), compiled);
        for empty in [json!({}), json!(null)] {
            assert_eq!(
                format!("{:?}", Settings::from_value(&empty).unwrap()),
                compiled
            );
        }
    }

    #[test]
    fn unwritten_lists_keep_their_defaults_and_empty_ones_clear_them() {
        let metadata = ImageReference::parse("169.254.169.254/latest/meta-data:1").unwrap();
        let unwritten = Settings::from_value(&json!({"pinDigests": true})).unwrap();
        assert!(unwritten.not_found_may_mean_denied("acme.jfrog.io"));
        assert!(unwritten.lookup_scope.refusal(&metadata).is_some());
        let cleared = Settings::from_value(&json!({
            "notFoundMayMeanDenied": [], "deniedLookupNetworks": []
        }))
        .unwrap();
        assert!(!cleared.not_found_may_mean_denied("acme.jfrog.io"));
        assert!(cleared.lookup_scope.refusal(&metadata).is_none());
    }

    #[test]
    fn defaults_reject_only_certain_failures() {
        let settings = Settings::from_value(&json!({})).unwrap();
        for kind in FailureKind::ALL {
            let expected = if kind.is_certain() {
                Action::Reject
            } else {
                Action::Warn
            };
            assert_eq!(settings.actions.for_kind(kind), expected, "{kind:?}");
        }
        assert_eq!(
            Settings::from_value(&serde_json::Value::Null)
                .unwrap()
                .actions,
            Actions::default()
        );
    }

    #[test]
    fn every_action_is_configurable() {
        let settings = Settings::from_value(&json!({"actions": {
            "absent": "warn", "invalidReference": "allow", "unauthorized": "reject",
            "unreachable": "reject", "hostRefused": "allow"}}))
        .unwrap();
        let actions = settings.actions;
        assert_eq!(actions.for_kind(FailureKind::Absent), Action::Warn);
        assert_eq!(
            actions.for_kind(FailureKind::InvalidReference),
            Action::Allow
        );
        assert_eq!(actions.for_kind(FailureKind::Unauthorized), Action::Reject);
        assert_eq!(actions.for_kind(FailureKind::Unreachable), Action::Reject);
        assert_eq!(actions.for_kind(FailureKind::HostRefused), Action::Allow);
    }

    #[test]
    fn unknown_fields_are_named() {
        assert!(
            error(json!({"exemptNamespace": ["a"]})).contains("unknown field `exemptNamespace`")
        );
        let nested = error(json!({"actions": {"absnet": "warn"}}));
        assert!(
            nested.contains("actions") && nested.contains("absnet"),
            "{nested}"
        );
    }

    #[test]
    fn bad_actions_are_named() {
        let message = error(json!({"actions": {"absent": "block"}}));
        assert!(message.contains("actions.absent"), "{message}");
        assert!(message.contains("`reject`, `warn`, `allow`"), "{message}");
    }

    #[test]
    fn bad_patterns_are_named() {
        let message = error(json!({"exemptImages": ["ok/*", "[unclosed"]}));
        assert!(message.contains("exemptImages[1]"), "{message}");
        // An empty row (the UI's "Add" with nothing typed) is no pattern: dropped, not refused.
        assert!(Settings::from_value(&json!({"exemptImages": [""]}))
            .unwrap()
            .exempt_images
            .is_empty());
        assert!(error(json!({"exemptImages": ["a b"]})).contains("whitespace"));
    }

    #[test]
    fn bad_namespaces_are_named() {
        for bad in ["Team-A", "-a", &"a".repeat(64), " "] {
            let message = error(json!({"exemptNamespaces": ["ok", bad]}));
            assert!(message.contains("exemptNamespaces[1]"), "{bad}: {message}");
        }
    }

    #[test]
    fn hostile_shapes_are_refused_with_a_message() {
        for value in [
            json!("reject"),
            json!([1, 2]),
            json!({"actions": "reject"}),
            json!({"actions": {"absent": 3}}),
            json!({"exemptImages": "registry.internal/*"}),
            json!({"exemptImages": [3]}),
            json!({"exemptNamespaces": [{"name": "a"}]}),
        ] {
            assert!(
                error(value.clone()).starts_with("invalid settings"),
                "{value}"
            );
        }
    }

    #[test]
    fn image_exemptions_match_normalised_references() {
        let settings = Settings::from_value(&json!({"exemptImages": [
            "registry.internal/*", "docker.io/library/busybox:*"]}))
        .unwrap();
        assert!(settings.is_image_exempt("registry.internal/team/app:1"));
        assert!(settings.is_image_exempt("docker.io/library/busybox:1.36"));
        assert!(!settings.is_image_exempt("docker.io/library/busybox2:1.36"));
        assert!(!settings.is_image_exempt("registry.internal.evil.com/a:1"));
    }

    #[test]
    fn namespace_exemptions_are_exact() {
        let settings = Settings::from_value(&json!({"exemptNamespaces": ["kube-system"]})).unwrap();
        assert!(settings.is_namespace_exempt("kube-system"));
        assert!(!settings.is_namespace_exempt("kube-system-2"));
    }

    #[test]
    fn validate_settings_payload_answers_the_host_protocol() {
        let ok: serde_json::Value =
            serde_json::from_slice(&validate_settings_payload(br#"{"exemptImages":["a/*"]}"#))
                .unwrap();
        assert_eq!(ok, json!({"valid": true}));
        let bad: serde_json::Value = serde_json::from_slice(&validate_settings_payload(
            br#"{"actions":{"absent":"no"}}"#,
        ))
        .unwrap();
        assert_eq!(bad["valid"], json!(false));
        assert!(bad["message"].as_str().unwrap().contains("actions.absent"));
        let garbage: serde_json::Value =
            serde_json::from_slice(&validate_settings_payload(b"\xff{")).unwrap();
        assert_eq!(garbage["valid"], json!(false));
        assert!(garbage["message"].as_str().unwrap().contains("not JSON"));
    }

    #[test]
    fn time_budget_is_bounded_and_named() {
        let default = Settings::from_value(&json!({})).unwrap();
        assert_eq!(
            default.time_budget.as_millis(),
            u128::from(DEFAULT_TIME_BUDGET_MS)
        );
        let set = Settings::from_value(&json!({"timeBudgetMs": 5000})).unwrap();
        assert_eq!(set.time_budget.as_millis(), 5000);
        for bad in [json!(0), json!(30_001), json!(-1), json!("1s")] {
            let message = error(json!({"timeBudgetMs": bad}));
            assert!(message.contains("timeBudgetMs"), "{message}");
        }
    }

    #[test]
    fn owned_pods_is_still_read_as_owned_objects() {
        let read = |value| Settings::from_value(&value).unwrap().owned_objects;
        assert_eq!(read(json!({})), OwnedObjects::Skip);
        assert_eq!(read(json!({"ownedObjects": "check"})), OwnedObjects::Check);
        assert_eq!(read(json!({"ownedPods": "check"})), OwnedObjects::Check);
        assert_eq!(read(json!({"ownedPods": "skip"})), OwnedObjects::Skip);
        // The UI writes ownedObjects' default next to an older ownedPods: check wins.
        for (new, old) in [("skip", "check"), ("check", "skip"), ("check", "check")] {
            let both = json!({"ownedObjects": new, "ownedPods": old});
            assert_eq!(read(both), OwnedObjects::Check, "{new} {old}");
        }
        let skip = json!({"ownedObjects": "skip", "ownedPods": "skip"});
        assert_eq!(read(skip), OwnedObjects::Skip);
        let bad = error(json!({"ownedObjects": "ignore"}));
        assert!(
            bad.contains("ownedObjects") && bad.contains("`skip` or `check`"),
            "{bad}"
        );
    }

    #[test]
    fn ten_thousand_patterns_compile() {
        let patterns: Vec<String> = (0..10_000)
            .map(|i| format!("registry{i}.internal/*"))
            .collect();
        let settings = Settings::from_value(&json!({"exemptImages": patterns})).unwrap();
        assert!(settings.is_image_exempt("registry9999.internal/a:1"));
        assert!(!settings.is_image_exempt("docker.io/library/nginx:1"));
    }
}
