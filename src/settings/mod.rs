//! Policy settings: what operators may configure, parsed strictly so that a typo in a
//! `ClusterAdmissionPolicy` is refused when the policy loads instead of silently ignored.
//!
//! The folder holds what the settings are made of, each parsed by its own module so that it
//! can be read without the rest: the registry mirrors and short names of the nodes
//! ([`mirrors`], [`short_names`]), the platforms required of images ([`platforms`]), the
//! custom kinds ([`custom_kinds`]), the registries lookups may go to ([`lookup_scope`]), the
//! lookup broker ([`broker_settings`]), the nodes' credential provider plugins and the
//! kubelet's verification of cached images ([`credential_providers`]) and what the UI's form
//! writes for nothing ([`ui_form`]).

pub mod broker_settings;
pub mod credential_providers;
pub mod custom_kinds;
pub mod lookup_scope;
pub mod mirrors;
pub mod platforms;
pub mod short_names;
pub mod ui_form;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;
use std::time::Duration;

use serde::de::DeserializeOwned;
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
use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::globs::{self, Glob};
use crate::vocabulary::reference::ImageReference;
use json_extent::{each_plain_string_starting, has_string, string_list, ExtentError, Scanner};

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

/// Registries that answer 404 instead of 401/403 to callers that may not see a repository
/// (Artifactory's "hide existence of unauthorized resources"; JFrog's SaaS runs it).
pub const DEFAULT_NOT_FOUND_MAY_MEAN_DENIED: [&str; 1] = ["*.jfrog.io"];

/// Default time budget: comfortably under the policy server's default 2 s evaluation time-out.
pub const DEFAULT_TIME_BUDGET_MS: u64 = 1_500;
/// The policy server stops any evaluation after at most 30 s.
const MAX_TIME_BUDGET_MS: u64 = 30_000;

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

/// How much of the settings is checked. Validation (the host's `validate_settings`, once per
/// policy load) checks everything, so that a bad document is refused naming its field. A
/// request reads settings the host has validated, on a fresh instance every time on
/// policy-server 1.36: it compiles custom kinds' JSONPaths only for an object of the kind and
/// does not check mirror locations, namespace names or the lookup broker's names again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checks {
    All,
    WhatRequestsUse,
}

/// A member kept as it was parsed.
fn keep<T>(value: T, _: Checks) -> Result<T, SettingsError> {
    Ok(value)
}

/// A member's text read by serde alone (`None` when it does not fit: the careful reading then
/// explains it).
fn parsed<R: DeserializeOwned>(text: &str) -> Option<R> {
    serde_json::from_str(text).ok()
}

/// A list of strings borrowed from the payload (only a string with escapes is decoded).
fn borrowed_strings(text: &str) -> Option<Vec<Cow<'_, str>>> {
    string_list(text).or_else(|| {
        let mut strings = Vec::new();
        Scanner::new(text)
            .elements(|scanner| {
                strings.push(scanner.string()?);
                Ok(())
            })
            .ok()
            .map(|()| strings)
    })
}

/// A list of strings as parsed, in the form [`borrowed_strings`] reads.
fn owned_strings<'a>(strings: Vec<String>) -> Vec<Cow<'a, str>> {
    strings.into_iter().map(Cow::Owned).collect()
}

/// `true` or `false` as the host writes them, read without serde (`None` for any other text).
fn boolean(text: &str) -> Option<bool> {
    match text {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// A JSON number of digits alone that fits a `u64`, read without serde: `None` for any other
/// text (a sign, a fraction, an exponent, too large), which serde then reads or explains.
fn whole_number(text: &str) -> Option<u64> {
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse().ok())
        .flatten()
}

/// `timeBudgetMs`, within what the policy server allows an evaluation.
fn time_budget(ms: Option<u64>) -> Result<Duration, SettingsError> {
    let ms = ms.unwrap_or(DEFAULT_TIME_BUDGET_MS);
    if !(1..=MAX_TIME_BUDGET_MS).contains(&ms) {
        return Err(SettingsError::new(
            "timeBudgetMs",
            format!("must be between 1 and {MAX_TIME_BUDGET_MS} milliseconds"),
        ));
    }
    Ok(Duration::from_millis(ms))
}

/// `registries`: the mirror rules.
fn compile_mirrors(
    rules: Vec<RegistryRule>,
    checks: Checks,
) -> Result<Mirrors<'static>, SettingsError> {
    match checks {
        Checks::All => Mirrors::new(rules).map_err(within("registries")),
        Checks::WhatRequestsUse => Ok(Mirrors::validated(rules)),
    }
}

/// `requiredPlatforms`.
fn compile_platforms(platforms: Vec<String>) -> Result<Requirement, SettingsError> {
    Requirement::parse(&platforms).map_err(within("requiredPlatforms"))
}

/// `customResources`; their JSONPaths compiled only when every member is checked.
fn compile_custom_kinds(
    rules: Vec<CustomResourceRule>,
    checks: Checks,
) -> Result<Vec<CustomKind>, SettingsError> {
    rules
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
        .collect()
}

/// `lookupRegistries` and `deniedLookupNetworks`.
fn compile_scope<'a>(
    registries: Vec<Cow<'a, str>>,
    denied: &Option<Vec<String>>,
    _: Checks,
) -> Result<LookupScope<'a>, SettingsError> {
    LookupScope::new(registries, denied.as_deref()).map_err(within(""))
}

/// `notFoundMayMeanDenied`: the operator's globs, else the defaults.
fn compile_not_found(patterns: Option<Vec<String>>) -> Result<Vec<Glob<'static>>, SettingsError> {
    match patterns {
        Some(patterns) => compile_patterns("notFoundMayMeanDenied", patterns, Checks::All),
        None => Ok(DEFAULT_NOT_FOUND_MAY_MEAN_DENIED
            .iter()
            .filter_map(|pattern| Glob::new(*pattern).ok())
            .collect()),
    }
}

/// `lookupBroker`, checked as a whole when every member is (a request reads names checked when
/// the host loaded the policy).
fn compile_broker(
    broker: Option<BrokerSettings>,
    checks: Checks,
) -> Result<Option<BrokerSettings>, SettingsError> {
    if checks == Checks::All {
        if let Some((field, problem)) = broker.as_ref().and_then(BrokerSettings::problem) {
            return Err(SettingsError::new(field, problem));
        }
    }
    Ok(broker)
}

/// `exemptNamespaces`, each a namespace name (checked when every member is).
fn compile_namespaces<'a>(
    namespaces: Vec<impl Into<Cow<'a, str>>>,
    checks: Checks,
) -> Result<Vec<Cow<'a, str>>, SettingsError> {
    let namespaces: Vec<Cow<'a, str>> = namespaces.into_iter().map(Into::into).collect();
    if checks == Checks::All {
        for (i, namespace) in namespaces.iter().enumerate() {
            if !is_dns_label(namespace) {
                return Err(SettingsError::new(
                    format!("exemptNamespaces[{i}]"),
                    "a namespace name must be a lowercase RFC 1123 label of at most 63 characters",
                ));
            }
        }
    }
    Ok(namespaces)
}

/// The image globs of the list `field`, an error naming the entry that does not compile.
fn compile_patterns<'a>(
    field: &str,
    patterns: Vec<impl Into<Cow<'a, str>>>,
    checks: Checks,
) -> Result<Vec<Glob<'a>>, SettingsError> {
    patterns
        .into_iter()
        .enumerate()
        .map(|(i, pattern)| {
            compile_pattern(pattern.into(), checks)
                .map_err(|p| SettingsError::new(format!("{field}[{i}]"), p))
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

/// Exemption globs: `*` (also across `/`), `?` and `[...]`, matched on the normalised reference;
/// their form checked when every member is, what the glob crate refuses always.
fn compile_pattern(pattern: Cow<'_, str>, checks: Checks) -> Result<Glob<'_>, String> {
    if checks == Checks::WhatRequestsUse {
        return Ok(Glob::unchecked(pattern));
    }
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

    /// The path of the offending field (`actions.absent`, `registries[0].prefix`); empty for
    /// the settings as a whole.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// True for a problem `validate_settings` refuses when the host loads the policy and a
    /// request's reading does not look for again (mirror locations, namespace names, image
    /// patterns, which a request compiles only for an image they may match, JSONPaths, the
    /// lookup broker's names): a request still refuses what it cannot parse.
    pub fn is_checked_at_load_only(&self) -> bool {
        let field = self.field.as_str();
        field.starts_with("registries")
            || field.starts_with("exemptNamespaces[")
            || field.starts_with("exemptImages[")
            || matches!(
                field,
                "lookupBroker.host"
                    | "lookupBroker.keySecret.namespace"
                    | "lookupBroker.keySecret.name"
            )
            || self.problem.contains("invalid JSONPath")
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
            // every member read, as a request that needs them all would
            let read =
                Settings::from_json(&text).and_then(|s| s.read_all().map(|()| format!("{s:?}")));
            match (&tree, &read) {
                (Err(refused), Ok(_)) if refused.is_checked_at_load_only() => {}
                _ => assert_eq!(
                    read.clone().map_err(|e| e.to_string()),
                    tree.clone().map_err(|e| e.to_string()),
                    "{text}"
                ),
            }
        }
        tree.map_err(|e| e.to_string())
    }

    #[test]
    fn blanks_are_seen_in_the_text_and_nothing_else_is() {
        // what the UI writes for nothing: the member is left out, or read the careful way
        for text in [
            r#"{"description": "x"}"#,
            r#"{"timeBudgetMs": null}"#,
            r#"{"ownedObjects": ""}"#,
            r#"{"exemptImages": ["", "a"]}"#,
            r#"{"registries": [{"prefix": "a", "location": ""}]}"#,
        ] {
            let members = Settings::index(&mut Scanner::new(text)).expect(text);
            let read: Vec<&Member<'_>> = members.iter().flatten().collect();
            assert!(read.is_empty() || read.iter().all(|m| m.blanks), "{text}");
        }
        for text in [
            r#"{"exemptNamespaces": ["kube-system"], "lookupRegistries": ["docker.io"]}"#,
            r#"{"exemptImages": ["say \"null\" and \"\" and [] {}", "x\\"]}"#,
            r#"{"timeBudgetMs": 900, "pinDigests": true, "ownedObjects": "check"}"#,
            r#"{"deniedLookupNetworks": [], "actions": {}, "registries": [{"prefix": "a", "mirrors": []}]}"#,
        ] {
            let members = Settings::index(&mut Scanner::new(text)).expect(text);
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            let written = value.as_object().map_or(0, serde_json::Map::len);
            assert_eq!(members.iter().flatten().count(), written, "{text}");
            assert!(members.iter().flatten().all(|m| !m.blanks), "{text}");
            assert_eq!(ui_form::normalise(&value), value, "{text}");
        }
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
            // a `null` inside a member is no blank to the index: serde refuses it, or reads the
            // absent value the careful reading's removal gives
            json!({"registries": [{"prefix": "docker.io", "location": null,
                "mirrors": [{"location": null, "pullFromMirror": "all"}, {"location": "m.io"}]}]}),
            json!({"exemptImages": ["a/*", null], "exemptNamespaces": [null, "ns"]}),
            json!({"actions": {"absent": null, "unreachable": "reject"}, "pullSecrets": {"consult": null}}),
            json!({"lookupBroker": {"host": "b.example:8443", "keySecret": null}}),
            json!({"shortNames": {"mode": "permissive", "searchRegistries": null, "aliases": {"a": null}}}),
            json!({"customResources": [{"apiVersion": "a.io/v1", "kind": "K", "images": ["$.x", null]}]}),
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
        assert_eq!(twice.time_budget(), std::time::Duration::from_millis(7));
        for empty in ["null", " {} ", "{\n}"] {
            assert_eq!(
                format!("{:?}", Settings::from_json(empty).unwrap()),
                format!("{:?}", Settings::default())
            );
        }
    }

    #[test]
    fn literals_read_without_serde_are_what_serde_reads() {
        // the plain spellings are read by the text's readers; every other falls to serde,
        // which reads or refuses it as before
        let literals = [
            "0",
            "1",
            "900",
            "30000",
            "30001",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "1.5",
            "1e3",
            "1E3",
            "0.0",
            "true",
            "false",
            "null",
            "\"skip\"",
            "\"check\"",
            "\"Skip\"",
            "\"sk\\u0069p\"",
            "\"\"",
            "[]",
            "{}",
        ];
        for literal in literals {
            for key in ["timeBudgetMs", "pinDigests", "ownedObjects", "ownedPods"] {
                let text = format!("{{\"{key}\": {literal}}}");
                let value: serde_json::Value = serde_json::from_str(&text).unwrap();
                let _ = same_from_text(&value);
            }
        }
        assert_eq!(whole_number("1500"), Some(1500));
        assert_eq!(whole_number("+1"), None, "no sign: JSON has none");
        assert_eq!(whole_number("18446744073709551616"), None);
        assert_eq!(boolean("true"), Some(true));
        assert_eq!(boolean("True"), None);
    }

    /// A file of the repository, by its path from the root.
    fn repository_file(path: &str) -> String {
        let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
    }

    #[test]
    fn every_member_is_asked_in_the_ui_form_unless_its_row_says_why_not() {
        // as tests/ui_questions.rs reads the form: the answer to a question lands at its
        // `variable`, the member itself (`timeBudgetMs`) or a field of it (`pullSecrets.consult`)
        let form: serde_yaml::Value =
            serde_yaml::from_str(&repository_file("questions-ui.yml")).expect("YAML");
        let asked: Vec<&str> = form["questions"]
            .as_sequence()
            .expect("a questions list")
            .iter()
            .map(|question| question["variable"].as_str().expect("a variable"))
            .map(|variable| variable.split('.').next().unwrap_or(variable))
            .collect();
        for key in KEYS {
            let why_not = NOT_IN_THE_UI.iter().find(|(k, _)| *k == key);
            match (asked.contains(&key), why_not) {
                (false, None) => panic!(
                    "questions-ui.yml asks nothing of `{key}`: add its question, or say in its \
                     row why the form leaves it out"
                ),
                (true, Some((_, why))) => {
                    panic!("questions-ui.yml asks `{key}`, whose row says it should not: {why}")
                }
                _ => {}
            }
        }
        for variable in asked {
            assert!(
                variable == "description" || KEYS.contains(&variable),
                "{variable}: a question of no member"
            );
        }
        for (key, _) in NOT_IN_THE_UI {
            assert!(KEYS.contains(key), "{key}");
        }
    }

    #[test]
    fn every_member_is_in_the_settings_reference() {
        // docs/settings.md's table: a row of the member's own (`shortNames`, or a field of it,
        // `actions.<verdict>`), or, for a former name, a mention in the row of the new one
        let doc = repository_file("docs/settings.md");
        let rows: Vec<&str> = doc.lines().filter(|line| line.starts_with("| `")).collect();
        assert!(rows.len() > 10, "the settings table of docs/settings.md");
        for key in KEYS {
            let (own, field) = (format!("`{key}`"), format!("`{key}."));
            let named = rows.iter().any(|row| {
                let first = row.split('|').nth(1).unwrap_or_default().trim();
                first == own || first.starts_with(&field)
            });
            let mentioned = rows.iter().any(|row| row.contains(&own));
            assert!(
                named || mentioned,
                "docs/settings.md's table does not name `{key}`"
            );
        }
    }

    #[test]
    fn every_member_is_found_by_its_name_alone() {
        for (slot, key) in KEYS.iter().enumerate() {
            assert_eq!(key_slot(key), Some(slot), "{key}");
            // a name differing in one byte, or one byte shorter, is none
            let last = key.len() - 1;
            assert_eq!(key_slot(&format!("{}X", &key[..last])), None, "{key}");
            assert_eq!(key_slot(&key[..last]), None, "{key}");
        }
        assert_eq!(key_slot(""), None);
        assert_eq!(key_slot("description"), None, "the UI's, left out before");
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
        assert!(unwritten.lookup_scope().refusal(&metadata).is_some());
        let cleared = Settings::from_value(&json!({
            "notFoundMayMeanDenied": [], "deniedLookupNetworks": []
        }))
        .unwrap();
        assert!(!cleared.not_found_may_mean_denied("acme.jfrog.io"));
        assert!(cleared.lookup_scope().refusal(&metadata).is_none());
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
            assert_eq!(settings.actions().for_kind(kind), expected, "{kind:?}");
        }
        assert_eq!(
            Settings::from_value(&serde_json::Value::Null)
                .unwrap()
                .actions(),
            &Actions::default()
        );
    }

    #[test]
    fn every_action_is_configurable() {
        let settings = Settings::from_value(&json!({"actions": {
            "absent": "warn", "invalidReference": "allow", "unauthorized": "reject",
            "unreachable": "reject", "hostRefused": "allow"}}))
        .unwrap();
        let actions = *settings.actions();
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
            .exempt_images()
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

    /// A document as a host may send it: compact, and pretty-printed.
    fn spellings(document: &serde_json::Value) -> [String; 2] {
        [
            document.to_string(),
            serde_json::to_string_pretty(document).unwrap(),
        ]
    }

    #[test]
    fn mirror_locations_found_from_the_text_are_those_of_the_rules() {
        use crate::vocabulary::reference::ImageReference;
        let documents = [
            json!({"registries": [
                {"prefix": "docker.io/library", "mirrors": [{"location": "mirror.internal/hub"}]},
                {"prefix": "127.0.0.1", "mirrors": [{"location": "m.internal:5000/local"}]},
                {"prefix": "*.corp.example", "mirrors": [{"location": "m.internal/corp"}]},
                {"prefix": "quay.io/org/app", "location": "quay.internal/app"}]}),
            json!({"registries": [{"prefix": "registry.example.com/team",
                "mirrors": [{"location": "ghcr.io/x", "pullFromMirror": "digest-only"}]}]}),
            serde_json::from_str(r#"{"registries": [{"prefix": "docker\u002eio", "mirrors": [{"location": "m.io/hub"}]}]}"#).unwrap(),
            json!({"registries": []}),
        ];
        let images = [
            "nginx:1.27",
            "docker.io/other/app:1",
            "127.0.0.1:5000/bench/img-0:1.0",
            "a.corp.example/x/y:2",
            "quay.io/org/app:3",
            "quay.io/org/application:3",
            "registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "ghcr.io/x/y:1",
        ];
        for document in &documents {
            let tree = Settings::from_value(document).unwrap();
            for text in spellings(document) {
                let read = Settings::from_json(&text).unwrap();
                // twice each: the second answered from what the first remembered
                for image in images.iter().chain(&images) {
                    let reference = ImageReference::parse(image).unwrap();
                    assert_eq!(
                        read.locations(&reference),
                        tree.mirrors().locations(&reference),
                        "{text} {image}"
                    );
                }
            }
        }
        // a registry no rule names is answered from the text, without reading a rule
        let second = documents[1].to_string();
        let read = Settings::from_json(&second).unwrap();
        let image = ImageReference::parse("quay.io/x/y:1").unwrap();
        assert_eq!(read.locations(&image).len(), 1);
        assert!(read.cells.registries.get().is_none());
        let matched = ImageReference::parse("registry.example.com/team/a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(read.locations(&matched).len(), 2);
    }

    #[test]
    fn exemptions_searched_in_the_text_answer_as_the_compiled_lists() {
        use crate::vocabulary::reference::ImageReference;
        let documents = [
            json!({"exemptNamespaces": ["kube-system", "team-a"], "exemptImages": [
                "registry.internal/*", "docker.io/library/busybox:*", "ghcr.io/org/app:1.0"]}),
            // escapes (a valid name written with one): the text is not searched, the list is read
            serde_json::from_str(
                r#"{"exemptNamespaces": ["team\u002da"], "exemptImages": ["ghcr\u002eio/*"]}"#,
            )
            .unwrap(),
            // blanks of the UI: read the careful way
            json!({"exemptNamespaces": ["", "team-a"], "exemptImages": ["", "ghcr.io/*"]}),
            json!({"exemptNamespaces": [], "exemptImages": []}),
        ];
        let images = [
            "registry.internal/team/app:1",
            "busybox:1.36",
            "docker.io/library/busybox2:1.36",
            "ghcr.io/org/app:1.0",
            "ghcr.io/org/app:1.1",
            "quay.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ];
        for document in &documents {
            let tree = Settings::from_value(document).unwrap();
            for text in spellings(document) {
                for namespace in ["kube-system", "team-a", "team-b", ""] {
                    // each query on fresh settings: the text is searched before any list is read
                    let read = Settings::from_json(&text).unwrap();
                    assert_eq!(
                        read.is_namespace_exempt(namespace),
                        tree.is_namespace_exempt(namespace),
                        "{text} {namespace}"
                    );
                }
                for image in images {
                    let reference = ImageReference::parse(image).unwrap();
                    let read = Settings::from_json(&text).unwrap();
                    assert_eq!(
                        read.is_reference_exempt(&reference),
                        tree.is_reference_exempt(&reference),
                        "{text} {image}"
                    );
                }
            }
        }
        // written with escapes, the names are decoded before they are compared
        let escaped =
            r#"{"exemptNamespaces": ["team\u002da"], "exemptImages": ["ghcr\u002eio/*"]}"#;
        assert!(Settings::from_json(escaped)
            .unwrap()
            .is_namespace_exempt("team-a"));
        let ghcr = ImageReference::parse("ghcr.io/org/app:1.0").unwrap();
        assert!(Settings::from_json(escaped)
            .unwrap()
            .is_reference_exempt(&ghcr));
        // the cases the text answers alone are there: an exempt namespace and image, and not
        let first = documents[0].to_string();
        let read = Settings::from_json(&first).unwrap();
        assert!(read.is_namespace_exempt("team-a") && !read.is_namespace_exempt("team-b"));
        let exempt = ImageReference::parse("registry.internal/team/app:1").unwrap();
        assert!(read.is_reference_exempt(&exempt));
        let other = ImageReference::parse("quay.io/a/b:1").unwrap();
        assert!(!read.is_reference_exempt(&other));
        // a registry found without exemption is remembered; another is searched again
        let read = Settings::from_json(&first).unwrap();
        assert!(!read.is_reference_exempt(&other));
        assert_eq!(
            read.no_exemption_from.get().map(String::as_str),
            Some("quay.io")
        );
        assert!(!read.is_reference_exempt(&ImageReference::parse("quay.io/c/d:2").unwrap()));
        assert!(read.is_reference_exempt(&exempt));
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
            default.time_budget().as_millis(),
            u128::from(DEFAULT_TIME_BUDGET_MS)
        );
        let set = Settings::from_value(&json!({"timeBudgetMs": 5000})).unwrap();
        assert_eq!(set.time_budget().as_millis(), 5000);
        for bad in [json!(0), json!(30_001), json!(-1), json!("1s")] {
            let message = error(json!({"timeBudgetMs": bad}));
            assert!(message.contains("timeBudgetMs"), "{message}");
        }
    }

    #[test]
    fn owned_pods_is_still_read_as_owned_objects() {
        let read = |value| Settings::from_value(&value).unwrap().owned_objects();
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
