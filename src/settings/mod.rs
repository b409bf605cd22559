//! Policy settings: what operators may configure, parsed strictly so that a typo in a
//! `ClusterAdmissionPolicy` is refused when the policy loads instead of silently ignored.
//!
//! The folder holds what the settings are made of, each parsed by its own module so that it
//! can be read without the rest: the registry mirrors and short names of the nodes
//! ([`mirrors`], [`short_names`]), the platforms required of images ([`platforms`]), the
//! custom kinds ([`custom_kinds`]), the registries lookups may go to ([`lookup_scope`]), the
//! lookup broker ([`broker_settings`]), the nodes' credential provider plugins and the
//! kubelet's verification of cached images ([`credential_providers`]) and what the UI's form
//! writes for nothing ([`ui_form`]); what a member is made of once read is in [`members`].

pub mod broker_settings;
pub mod credential_providers;
pub mod custom_kinds;
pub mod lookup_scope;
mod members;
pub mod mirrors;
pub mod platforms;
pub mod short_names;
pub mod ui_form;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;

use crate::settings::broker_settings::BrokerSettings;
use crate::settings::credential_providers::{
    AllowlistEntry, CredentialProviderConfig, Provider, VerificationPolicy,
};
use crate::settings::custom_kinds::{CustomKind, CustomResourceRule};
use crate::settings::lookup_scope::{LookupScope, Scope};
use crate::settings::mirrors::{Chain, Location, Mirrors, RegistryRule};
use crate::settings::platforms::Requirement;
use crate::settings::short_names::{ShortNameRules, ShortNames};
pub use crate::vocabulary::action::Action;
use crate::vocabulary::failure::{Failure, FailureKind};
use crate::vocabulary::globs::{self, Glob};
use crate::vocabulary::reference::ImageReference;
use json_extent::{each_plain_string_starting, has_string, ExtentError, Scanner};
use members::{
    boolean, borrowed_strings, compile_broker, compile_custom_kinds, compile_mirrors,
    compile_namespaces, compile_not_found, compile_patterns, compile_platforms, compile_scope,
    keep, owned_strings, parsed, time_budget, whole_number, within, Checks,
};
pub use members::{SettingsError, DEFAULT_NOT_FOUND_MAY_MEAN_DENIED, DEFAULT_TIME_BUDGET_MS};

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

/// The action configured for a kind of failure, asked only of a finding: settings read as a
/// request needs them ([`Settings`]) read `actions` only when an answer has a finding.
pub trait ActionFor {
    /// The action for `kind`.
    fn action_for(&self, kind: FailureKind) -> Action;
}

impl ActionFor for Actions {
    fn action_for(&self, kind: FailureKind) -> Action {
        self.for_kind(kind)
    }
}

impl ActionFor for Settings<'_> {
    fn action_for(&self, kind: FailureKind) -> Action {
        self.actions().for_kind(kind)
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

impl OwnedObjects {
    /// The value as the host writes it (a plain string), read without serde: `None` for any
    /// other text, which serde then reads or explains.
    fn from_text(text: &str) -> Option<Option<Self>> {
        match text {
            "\"skip\"" => Some(Some(OwnedObjects::Skip)),
            "\"check\"" => Some(Some(OwnedObjects::Check)),
            _ => None,
        }
    }
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

/// Declares the settings, one row per member, and makes from the rows all that must agree on
/// the members and their order: the form serde parses ([`RawSettings`]), the names ([`KEYS`],
/// [`Key`]), the compiled values ([`Cells`]) and validation's compiling ([`Cells::compile`]),
/// one accessor per member that reads and compiles it when first asked, `read_members`, the
/// [`Debug`](fmt::Debug) output, and the members the UI form leaves out. A row:
///
/// ```text
/// /// the accessor's doc
/// field "jsonKey": Raw [= default], reader => Compiled = compile [, with sibling];
///     [pub] get|copy accessor [-> Returned] [, not in the UI: "why"];
/// ```
///
/// - `Raw` is what serde parses; a member not written is `default` (else `Default::default()`),
///   without parsing or building the other members.
/// - `reader` parses the member's text on the request path when the UI's blanks are not in it:
///   `serde`; `strings`, a list of strings borrowed from the payload (compiled from
///   `Vec<Cow<'a, str>>`); `text(parse)`, a reader of the plain spellings without serde;
///   `compiled(make)`, which makes the compiled value from the text itself. A reader's `None`
///   sends the member to the careful reading (serde on the normalised tree, naming the path of
///   what does not fit).
/// - `compile(value, [&sibling,] checks)` checks and compiles, with every check for validation
///   and with [`Checks::WhatRequestsUse`] on a request. `with sibling` also passes a later
///   member, which a request reads first through its accessor (named as its field) and
///   validation takes as parsed: its `compile` must keep it as it is.
/// - The accessor borrows the compiled value (`get`, as `Returned` when given) or copies it
///   (`copy`). One with more to do is written by hand over it.
/// - `not in the UI` says why `questions-ui.yml` asks nothing of the member.
macro_rules! settings {
    (
        $(
            $(#[doc = $doc:literal])*
            $field:ident $key:literal: $raw:ty $(= $default:expr)?,
            $reader:ident $(($parse:expr))? => $compiled:ty = $compile:expr
            $(, with $sibling:ident)?;
            $vis:vis $how:ident $get:ident $(-> $returned:ty)?
            $(, not in the UI: $why:literal)?;
        )*
    ) => {
        /// The settings as operators write them (camelCase JSON/YAML).
        #[derive(Debug, Clone, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        struct RawSettings {
            $(#[serde(rename = $key)] $field: $raw,)*
        }

        impl Default for RawSettings {
            fn default() -> Self {
                RawSettings { $($field: settings!(@default $($default)?),)* }
            }
        }

        /// The members of the settings, in [`RawSettings`]' order, by their JSON names.
        const KEYS: [&str; [$($key),*].len()] = [$($key),*];

        /// A member's index in [`KEYS`], named as its field.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        enum Key {
            $($field,)*
        }

        /// Each member, compiled when first read.
        #[derive(Clone, Default)]
        struct Cells<'a> {
            $($field: OnceCell<$compiled>,)*
        }

        impl Cells<'_> {
            /// Checks and compiles every member, in the order errors are reported.
            fn compile(raw: RawSettings, checks: Checks) -> Result<Self, SettingsError> {
                Ok(Cells {
                    $($field: OnceCell::from(($compile)(
                        settings!(@take $reader, raw.$field),
                        $(&raw.$sibling,)?
                        checks,
                    )?),)*
                })
            }
        }

        impl<'a> Settings<'a> {
            $(
                $(#[doc = $doc])*
                $vis fn $get(&self) -> settings!(@returned $how, $compiled $(, $returned)?) {
                    settings!(@view $how, self.cells.$field.get_or_init(|| {
                        $(let $sibling = self.$sibling();)?
                        settings!(@read $reader $(($parse))?, self, Key::$field,
                            [$($default)?],
                            |raw: RawSettings| raw.$field,
                            |value| ($compile)(value, $($sibling,)? Checks::WhatRequestsUse))
                    }))
                }
            )*

            /// Reads every member: a member that cannot be read leaves its problem.
            fn read_members(&self) {
                $(let _ = self.$get();)*
            }
        }

        /// Every member, read: the settings as a request would see them.
        impl fmt::Debug for Settings<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let _ = self.read_all();
                f.debug_struct("Settings")
                    $(.field(stringify!($field), &self.$get()))*
                    .finish()
            }
        }

        /// The members `questions-ui.yml` asks nothing of, with the reason.
        #[cfg(test)]
        const NOT_IN_THE_UI: &[(&str, &str)] = &[$($(($key, $why),)?)*];
    };
    (@default) => { Default::default() };
    (@default $default:expr) => { $default };
    (@take strings, $value:expr) => { owned_strings($value) };
    (@take $reader:ident, $value:expr) => { $value };
    (@returned copy, $compiled:ty) => { $compiled };
    (@returned get, $compiled:ty) => { &$compiled };
    (@returned get, $compiled:ty, $returned:ty) => { $returned };
    (@view copy, $cell:expr) => { *$cell };
    (@view get, $cell:expr) => { $cell };
    (@read serde, $settings:expr, $key:expr, [$($default:expr)?], $take:expr, $compile:expr) => {
        $settings.read_with($key, parsed, || settings!(@default $($default)?), $take, $compile)
    };
    (@read strings, $settings:expr, $key:expr, [], $take:expr, $compile:expr) => {
        $settings.read_with($key, borrowed_strings, Vec::new, |raw| owned_strings(($take)(raw)),
            $compile)
    };
    (@read strings, $settings:expr, $key:expr, [$default:expr], $take:expr, $compile:expr) => {
        $settings.read_with($key, borrowed_strings, || owned_strings($default),
            |raw| owned_strings(($take)(raw)), $compile)
    };
    (@read text($parse:expr), $settings:expr, $key:expr, [$($default:expr)?], $take:expr,
        $compile:expr) => {
        $settings.read_with($key, $parse, || settings!(@default $($default)?), $take, $compile)
    };
    (@read compiled($make:expr), $settings:expr, $key:expr, [$($default:expr)?], $take:expr,
        $compile:expr) => {
        match $settings.plain_list($key).and_then($make) {
            Some(compiled) => compiled,
            None => settings!(@read serde, $settings, $key, [$($default)?], $take, $compile),
        }
    };
}

settings! {
    /// What to do per failure class.
    actions "actions": Actions, serde => Actions = keep;
        pub get actions;
    /// How pull secrets are used.
    pull_secrets "pullSecrets": PullSecretSettings, serde => PullSecretSettings = keep;
        pub copy pull_secrets;
    // `None` when not written: `DEFAULT_TIME_BUDGET_MS`
    /// How long an evaluation may spend on host calls before it stops making new ones.
    time_budget_ms "timeBudgetMs": Option<u64>, text(|text| whole_number(text).map(Some))
        => Duration = |ms, _| time_budget(ms);
        pub copy time_budget;
    /// The exempt namespaces as written: a request asks about one namespace, which a scan
    /// answers sooner than a sort.
    exempt_namespaces "exemptNamespaces": Vec<String>, strings
        => Vec<Cow<'a, str>> = compile_namespaces;
        get exempt_namespaces -> &[Cow<'a, str>];
    /// The exemption globs, compiled unchecked on a request.
    exempt_images "exemptImages": Vec<String>, strings
        => Vec<Glob<'a>> = |patterns, checks| compile_patterns("exemptImages", patterns, checks);
        get exempt_images -> &[Glob<'a>];
    /// Mirror chains, as nodes are configured.
    registries "registries": Vec<RegistryRule>,
        compiled(|text| Mirrors::from_text(text, careful_rule))
        => Mirrors<'a> = compile_mirrors;
        pub get mirrors;
    /// Platforms every image must serve.
    required_platforms "requiredPlatforms": Vec<String>, serde
        => Requirement = |platforms, _| compile_platforms(platforms);
        pub get required_platforms;
    /// Rewrite checked images to the digest their lookup found.
    pin_digests "pinDigests": bool, text(boolean) => bool = keep;
        pub copy pin_digests;
    /// Custom kinds and where their images are.
    custom_resources "customResources": Vec<CustomResourceRule>, serde
        => Vec<CustomKind> = compile_custom_kinds;
        pub get custom_kinds -> &[CustomKind];
    /// As written: [`Settings::owned_objects`] weighs it with `ownedPods`.
    owned_objects "ownedObjects": Option<OwnedObjects>, text(OwnedObjects::from_text)
        => Option<OwnedObjects> = keep;
        copy owned_objects_written;
    owned_pods "ownedPods": Option<OwnedObjects>, text(OwnedObjects::from_text)
        => Option<OwnedObjects> = keep;
        copy owned_pods_written,
        not in the UI: "the former name of ownedObjects, from when only Pods were skipped: \
            still read, and the form asks ownedObjects";
    /// Which registries lookups may go to.
    lookup_registries "lookupRegistries": Vec<String>, strings
        => LookupScope<'a> = compile_scope, with denied_lookup_networks;
        pub get lookup_scope;
    /// `None` when not written: the defaults, which need no parsing.
    denied_lookup_networks "deniedLookupNetworks": Option<Vec<String>>, serde
        => Option<Vec<String>> = keep;
        get denied_lookup_networks;
    /// The operator's globs, or the defaults when not written, compiled only if a 404 asks.
    not_found_may_mean_denied "notFoundMayMeanDenied": Option<Vec<String>>, serde
        => Vec<Glob<'a>> = |patterns, _| compile_not_found(patterns);
        get not_found_patterns -> &[Glob<'a>];
    /// What the nodes' runtime pulls for an image written without a registry.
    short_names "shortNames": ShortNameRules, serde
        => ShortNames = |rules, _| ShortNames::new(rules).map_err(within("shortNames"));
        pub get short_names;
    /// As written: [`Settings::lookup_broker`] lends it.
    lookup_broker "lookupBroker": Option<BrokerSettings>,
        text(|text| BrokerSettings::from_text(text).map(Some))
        => Option<BrokerSettings> = compile_broker;
        get lookup_broker_setting,
        not in the UI: "its host and key Secret are required once it is written, and the form \
            writes every question's answer, so a form could not leave the broker off: it is \
            set by hand (docs/broker.md)";
    /// The nodes' kubelet credential provider plugins, from their `CredentialProviderConfig`.
    credential_providers "credentialProviders": Option<CredentialProviderConfig>, serde
        => Vec<Provider> = |config, _| credential_providers::providers(config)
            .map_err(within("credentialProviders"));
        pub get credential_providers -> &[Provider],
        not in the UI: "the kubelet's CredentialProviderConfig is pasted whole, as the nodes \
            read it (docs/credential-providers.md): a form of its providers would rewrite the \
            kubelet's format instead of taking it as it is";
    /// The nodes' `imagePullCredentialsVerificationPolicy`; `None` when not written.
    verification_policy "imagePullCredentialsVerificationPolicy": Option<VerificationPolicy>,
        serde => Option<VerificationPolicy> = keep;
        pub copy verification_policy;
    /// The nodes' `preloadedImagesVerificationAllowlist`.
    preloaded_allowlist "preloadedImagesVerificationAllowlist": Vec<String>, serde
        => Vec<AllowlistEntry> = |entries, _| credential_providers::allowlist(entries)
            .map_err(within("preloadedImagesVerificationAllowlist"));
        pub get preloaded_allowlist -> &[AllowlistEntry];
    /// How requests of Kubewarden's audit scanner are answered.
    audit "audit": AuditSettings, serde => AuditSettings = keep;
        pub copy audit;
}

/// The index in [`KEYS`] of the member named `key`, asked for every member of every request's
/// settings: no two names share their length and first byte, so at most one is compared in
/// full.
fn key_slot(key: &str) -> Option<usize> {
    let first = key.as_bytes().first()?;
    KEYS.iter()
        .position(|k| k.len() == key.len() && k.as_bytes().first() == Some(first))
        .filter(|&slot| KEYS[slot] == key)
}

/// One member as the host sent it: its value's text, and whether the Kubewarden UI's blanks
/// (`null`, `""`) may be in it, which only the careful reading removes.
#[derive(Debug, Clone, Copy)]
struct Member<'a> {
    text: &'a str,
    blanks: bool,
}

/// The settings. A request reads them from the text the host sent ([`Settings::from_json`]),
/// each member when it is first needed: policy-server 1.36 hands them to a fresh instance with
/// every request, and a request needs few of them. Validation ([`Settings::from_value`]) reads
/// and checks every member at once.
#[derive(Clone, Default)]
pub struct Settings<'a> {
    members: [Option<Member<'a>>; KEYS.len()],
    /// Each member, compiled when first read.
    cells: Cells<'a>,
    /// A registry no exemption can match, found in the list's text: the images of a request
    /// mostly share their registry, and the next is answered without a search.
    no_exemption_from: OnceCell<String>,
    /// A registry no mirror rule can match, found in the rules' text.
    no_mirror_for: OnceCell<String>,
    /// The first member that could not be read, which makes the request's answer an error.
    problem: OnceCell<SettingsError>,
}

impl<'a> Settings<'a> {
    /// Parses and validates every member; `null` and `{}` mean all defaults. What the
    /// Kubewarden UI's form writes for "nothing" (its hidden `description`, `''`, `null`, empty
    /// rows) is removed first ([`ui_form::normalise`]).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, SettingsError> {
        if value.is_null() || value.as_object().is_some_and(serde_json::Map::is_empty) {
            return Ok(Settings::default());
        }
        Settings::compile(Self::parse_raw(&ui_form::normalise(value))?, Checks::All)
    }

    /// The settings a request reads, from their JSON text as the host sends them: the members
    /// are found (one pass over the text, sixty-four bytes at a time) and each is
    /// parsed when the request first needs it, without the checks `validate_settings` made when
    /// the host loaded the policy. A document whose members cannot be found (not an object, an
    /// unknown member) is read the careful way at once, so that its error names its field; a
    /// member that cannot be read is reported by [`Settings::problem`].
    pub fn from_json(text: &'a str) -> Result<Settings<'a>, SettingsError> {
        let mut scanner = Scanner::new(text);
        let settings = Self::read_from(&mut scanner)?;
        if scanner.at_end() {
            return Ok(settings);
        }
        // text after the settings: serde names it
        Self::read_document(text)
    }

    /// [`Settings::from_json`] of the value at `scanner`, which it moves past the value: the
    /// host's payload is walked once, the settings' members found on the way.
    pub fn read_from(scanner: &mut Scanner<'a>) -> Result<Settings<'a>, SettingsError> {
        let mut probe = scanner.clone();
        if let Some(members) = Self::index(&mut probe) {
            *scanner = probe;
            return Ok(Settings {
                members,
                ..Settings::default()
            });
        }
        let text = scanner
            .value()
            .map_err(|e| SettingsError::new("", format!("not JSON: {e}")))?;
        Self::read_document(text)
    }

    /// A document whose members cannot be found (`null`, not an object, an unknown member, not
    /// JSON), read the careful way at once: the defaults, or the error naming its field.
    fn read_document(text: &str) -> Result<Settings<'a>, SettingsError> {
        let value = serde_json::from_str::<serde_json::Value>(text)
            .map_err(|e| SettingsError::new("", format!("not JSON: {e}")))?;
        Self::from_value(&value)
    }

    /// Where each member's value is in the object at `scanner`; `None` when it is not an
    /// object of known members. A member written as a blank (`null`, `""`) or the UI's string
    /// `description` is left out, as [`ui_form::normalise`] leaves it out; the last of
    /// duplicates wins, as in a tree.
    fn index(scanner: &mut Scanner<'a>) -> Option<[Option<Member<'a>>; KEYS.len()]> {
        let mut members = [None; KEYS.len()];
        scanner
            .members(|key, value, scanner| {
                let blanks = scanner.take_blanks();
                let blank = value == "null" || value == "\"\"";
                if key == "description" && (blank || value.starts_with('"')) {
                    return Ok(());
                }
                let unknown = ExtentError {
                    offset: scanner.offset(),
                    expected: "a member of the settings",
                };
                let slot = key_slot(key).ok_or(unknown)?;
                members[slot] = (!blank).then_some(Member {
                    text: value,
                    blanks,
                });
                Ok(())
            })
            .ok()?;
        Some(members)
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

    /// Checks what serde cannot and compiles patterns, mirrors, platforms and JSONPaths, in
    /// the order errors are reported.
    fn compile(raw: RawSettings, checks: Checks) -> Result<Self, SettingsError> {
        Ok(Settings {
            cells: Cells::compile(raw, checks)?,
            ..Settings::default()
        })
    }

    /// One member read on the request path: parsed by `fast` into its raw form, or, when the
    /// UI's blanks may be in it or `fast` cannot read it (`None`), the careful way (normalised,
    /// parsed naming the path of what does not fit, `take`n from the settings); then compiled.
    /// A member not written is `default()`. A member that cannot be read becomes this
    /// request's [`Settings::problem`], and its default stands in until the answer is made.
    fn read_with<R, T: Default>(
        &self,
        key: Key,
        fast: impl FnOnce(&'a str) -> Option<R>,
        default: impl FnOnce() -> R,
        take: impl FnOnce(RawSettings) -> R,
        compile: impl FnOnce(R) -> Result<T, SettingsError>,
    ) -> T {
        let raw = match self.members[key as usize] {
            None => Ok(default()),
            Some(member) => match (!member.blanks).then(|| fast(member.text)).flatten() {
                Some(raw) => Ok(raw),
                None => careful(key, member.text).map(take),
            },
        };
        raw.and_then(compile).unwrap_or_else(|error| {
            let _ = self.problem.set(error);
            T::default()
        })
    }

    /// Reads every member, as [`Debug`](fmt::Debug) and tests do: the first problem, if any.
    pub fn read_all(&self) -> Result<(), SettingsError> {
        self.read_members();
        // the mirror rules, which a request reads one by one as images match them
        self.mirrors().read_all();
        self.problem().map_or(Ok(()), Err)
    }

    /// The first member this request could not read: the request is answered with it.
    pub fn problem(&self) -> Option<SettingsError> {
        if let Some(problem) = self.problem.get() {
            return Some(problem.clone());
        }
        let (index, within, problem) = self.cells.registries.get()?.problem()?;
        Some(SettingsError::new(
            format!("registries[{index}]{within}"),
            problem.clone(),
        ))
    }

    /// The locations a node asks for `reference`, in order, as [`Settings::chain`] says.
    pub fn locations(&self, reference: &ImageReference) -> Vec<Location> {
        self.chain(reference).locations
    }

    /// The chain a node builds for `reference`, as [`Mirrors::chain`] says; without reading a
    /// rule when no string of the rules' text can be the prefix of a rule matching the image's
    /// registry (remembered for the request's other images).
    pub fn chain(&self, reference: &ImageReference) -> Chain {
        let registry = reference.registry();
        let first = registry.as_bytes().first().copied().unwrap_or(b'*');
        // a literal prefix matching a name in `registry` starts the registry or starts with
        // it, and a wildcard starts with `*`; most strings differ in their first byte
        let may_match = |s: &str| match s.as_bytes().first() {
            Some(b'*') => true,
            Some(&byte) if byte != first => false,
            _ => registry.starts_with(s) || s.starts_with(registry),
        };
        // once the rules are read, they answer
        let unread = self.cells.registries.get().is_none();
        let firsts = [first, b'*', first, first];
        if unread
            && self.ruled_out(
                Key::registries,
                &self.no_mirror_for,
                registry,
                firsts,
                may_match,
            )
        {
            return Chain::direct(reference);
        }
        self.mirrors().chain(reference)
    }

    /// Whether controller-owned objects are looked up again.
    pub fn owned_objects(&self) -> OwnedObjects {
        owned_objects(self.owned_objects_written(), self.owned_pods_written())
    }

    /// The lookup broker, when lookups with pods' pull secrets go through one.
    pub fn lookup_broker(&self) -> Option<&BrokerSettings> {
        self.lookup_broker_setting().as_ref()
    }

    /// The text of the list `key` as the host wrote it, when no blank of the UI is in it (then
    /// its strings are what a request reads); `None` for a member not written, or read the
    /// careful way.
    fn plain_list(&self, key: Key) -> Option<&'a str> {
        self.written_plainly(key).flatten()
    }

    /// [`Settings::plain_list`], telling a member not written (`Some(None)`) from one with the
    /// UI's blanks (`None`).
    fn written_plainly(&self, key: Key) -> Option<Option<&'a str>> {
        match self.members[key as usize] {
            None => Some(None),
            Some(member) => (!member.blanks).then_some(Some(member.text)),
        }
    }

    /// Whether some string of the list `key` satisfies `test`, answered from the text the host
    /// wrote without building the list; `None` when that text cannot answer (not written, the
    /// UI's blanks, escapes). `test` is asked only of the strings starting with one of
    /// `firsts`: it must be false of every other.
    fn text_has(
        &self,
        key: Key,
        firsts: [u8; 4],
        mut test: impl FnMut(&str) -> bool,
    ) -> Option<bool> {
        let text = self.plain_list(key)?;
        let mut found = false;
        each_plain_string_starting(text, firsts, |s| found = found || test(s)).then_some(found)
    }

    /// True when no string of the member `key` can match a name in `registry` (`may_match`
    /// says which could; it is asked only of strings starting with one of `firsts`), so that
    /// the member need not be read for it: remembered in `none_for`, since a request's images
    /// mostly share their registry.
    fn ruled_out(
        &self,
        key: Key,
        none_for: &OnceCell<String>,
        registry: &str,
        firsts: [u8; 4],
        may_match: impl FnMut(&str) -> bool,
    ) -> bool {
        if none_for.get().is_some_and(|r| r == registry) {
            return true;
        }
        let ruled_out = self.text_has(key, firsts, may_match) == Some(false);
        if ruled_out {
            let _ = none_for.set(registry.to_owned());
        }
        ruled_out
    }

    /// True when the policy must not look at requests in this namespace. The list's text is
    /// searched first: a request asks about one namespace once.
    pub fn is_namespace_exempt(&self, namespace: &str) -> bool {
        if self.cells.exempt_namespaces.get().is_none() {
            let text = self.plain_list(Key::exempt_namespaces);
            if let Some(found) = text.and_then(|text| has_string(text, namespace)) {
                return found;
            }
        }
        self.exempt_namespaces()
            .iter()
            .any(|exempt| exempt == namespace)
    }

    /// True when `registry` (with or without its port) may answer 404 to hide a repository.
    pub fn not_found_may_mean_denied(&self, registry: &str) -> bool {
        let host = registry.split(':').next().unwrap_or(registry);
        self.not_found_patterns()
            .iter()
            .any(|pattern| pattern.matches(registry) || pattern.matches(host))
    }

    /// True when a normalised reference (`registry/repo:tag[@digest]`) matches an exemption.
    pub fn is_image_exempt(&self, normalised: &str) -> bool {
        self.exempt_images().iter().any(|p| p.matches(normalised))
    }

    /// True when `reference` is exempt in its fully normalised form or as it is looked up.
    /// Builds neither string when there is no exemption, the usual case: this runs for every
    /// image of every request.
    pub fn is_reference_exempt(&self, reference: &ImageReference) -> bool {
        // both spellings start with the registry: most exemptions differ from it at once, and
        // then neither spelling is written out
        let registry = reference.registry();
        // the list's text first, while it is unread: no glob is made unless one may match
        let unread = self.cells.exempt_images.get().is_none();
        let may_match = |glob: &str| globs::may_match_from(glob, registry);
        // a glob starting with a literal other than the registry's first byte cannot match
        let first = registry.as_bytes().first().copied().unwrap_or(b'*');
        let firsts = [first, b'*', b'?', b'['];
        let (key, no_exemption) = (Key::exempt_images, &self.no_exemption_from);
        if unread && self.ruled_out(key, no_exemption, registry, firsts, may_match) {
            return false;
        }
        self.exempt_images()
            .iter()
            .any(|glob| glob.may_match_from(registry))
            && (self.is_image_exempt(&reference.to_string())
                || self.is_image_exempt(&reference.lookup_reference()))
    }
}

/// The lookup scope answered from the settings' text while no request step has compiled it
/// ([`LookupScope::refusal_from_text`]): a request asks about a registry or two, and compiling
/// every pattern and network cost it more than the question.
impl Scope for Settings<'_> {
    fn refusal(&self, reference: &ImageReference) -> Option<Failure> {
        if self.cells.lookup_registries.get().is_none() {
            let registries = self.written_plainly(Key::lookup_registries);
            let denied = self.written_plainly(Key::denied_lookup_networks);
            if let (Some(registries), Some(denied)) = (registries, denied) {
                if let Some(answer) = LookupScope::refusal_from_text(reference, registries, denied)
                {
                    return answer;
                }
            }
        }
        self.lookup_scope().refusal(reference)
    }
}

/// `key`'s value read the careful way: parsed as a tree, the UI's blanks removed, then parsed
/// into [`RawSettings`] as the only member, so that an error names its path.
fn careful(key: Key, text: &str) -> Result<RawSettings, SettingsError> {
    let name = KEYS[key as usize];
    let value = serde_json::from_str::<serde_json::Value>(text)
        .map_err(|e| SettingsError::new(name, format!("not JSON: {e}")))?;
    let document = serde_json::Value::Object([(name.to_owned(), value)].into_iter().collect());
    Settings::parse_raw(&ui_form::normalise(&document))
}

/// One `registries` rule read the careful way: the UI's blanks removed (an empty mirror row),
/// then parsed, an error naming the field within the rule.
fn careful_rule(text: &str) -> Result<RegistryRule, (String, String)> {
    let rule = serde_json::from_str::<serde_json::Value>(text)
        .map_err(|e| (String::new(), format!("not JSON: {e}")))?;
    let document = serde_json::json!({ "registries": [rule] });
    let raw = Settings::parse_raw(&ui_form::normalise(&document)).map_err(|e| {
        let within = e.field.strip_prefix("registries[0]").unwrap_or(&e.field);
        (within.to_owned(), e.problem)
    })?;
    raw.registries
        .into_iter()
        .next()
        .ok_or_else(|| (String::new(), "an empty rule".to_owned()))
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
mod tests;
