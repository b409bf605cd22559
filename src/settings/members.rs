//! What each member of the settings is made of once read: the readers of a member's text
//! without serde, the compilers that check it (all of it at validation, what a request uses on
//! a request) and [`SettingsError`], which names the member's path.

use std::borrow::Cow;
use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::settings::broker_settings::BrokerSettings;
use crate::settings::custom_kinds::{CustomKind, CustomResourceRule};
use crate::settings::lookup_scope::LookupScope;
use crate::settings::mirrors::{Mirrors, RegistryRule};
use crate::settings::platforms::Requirement;
use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::globs::Glob;
use json_extent::{string_list, Scanner};

/// Registries that answer 404 instead of 401/403 to callers that may not see a repository
/// (Artifactory's "hide existence of unauthorized resources"; JFrog's SaaS runs it).
pub const DEFAULT_NOT_FOUND_MAY_MEAN_DENIED: [&str; 1] = ["*.jfrog.io"];

/// Default time budget: comfortably under the policy server's default 2 s evaluation time-out.
pub const DEFAULT_TIME_BUDGET_MS: u64 = 1_500;
/// The policy server stops any evaluation after at most 30 s.
pub(super) const MAX_TIME_BUDGET_MS: u64 = 30_000;

/// How much of the settings is checked. Validation (the host's `validate_settings`, once per
/// policy load) checks everything, so that a bad document is refused naming its field. A
/// request reads settings the host has validated, on a fresh instance every time on
/// policy-server 1.36: it compiles custom kinds' JSONPaths only for an object of the kind and
/// does not check mirror locations, namespace names or the lookup broker's names again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Checks {
    All,
    WhatRequestsUse,
}

/// A member kept as it was parsed.
pub(super) fn keep<T>(value: T, _: Checks) -> Result<T, SettingsError> {
    Ok(value)
}

/// A member's text read by serde alone (`None` when it does not fit: the careful reading then
/// explains it).
pub(super) fn parsed<R: DeserializeOwned>(text: &str) -> Option<R> {
    serde_json::from_str(text).ok()
}

/// A list of strings borrowed from the payload (only a string with escapes is decoded).
pub(super) fn borrowed_strings(text: &str) -> Option<Vec<Cow<'_, str>>> {
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
pub(super) fn owned_strings<'a>(strings: Vec<String>) -> Vec<Cow<'a, str>> {
    strings.into_iter().map(Cow::Owned).collect()
}

/// `true` or `false` as the host writes them, read without serde (`None` for any other text).
pub(super) fn boolean(text: &str) -> Option<bool> {
    match text {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// A JSON number of digits alone that fits a `u64`, read without serde: `None` for any other
/// text (a sign, a fraction, an exponent, too large), which serde then reads or explains.
pub(super) fn whole_number(text: &str) -> Option<u64> {
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse().ok())
        .flatten()
}

/// `timeBudgetMs`, within what the policy server allows an evaluation.
pub(super) fn time_budget(ms: Option<u64>) -> Result<Duration, SettingsError> {
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
pub(super) fn compile_mirrors(
    rules: Vec<RegistryRule>,
    checks: Checks,
) -> Result<Mirrors<'static>, SettingsError> {
    match checks {
        Checks::All => Mirrors::new(rules).map_err(within("registries")),
        Checks::WhatRequestsUse => Ok(Mirrors::validated(rules)),
    }
}

/// `requiredPlatforms`.
pub(super) fn compile_platforms(platforms: Vec<String>) -> Result<Requirement, SettingsError> {
    Requirement::parse(&platforms).map_err(within("requiredPlatforms"))
}

/// `customResources`; their JSONPaths compiled only when every member is checked.
pub(super) fn compile_custom_kinds(
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
pub(super) fn compile_scope<'a>(
    registries: Vec<Cow<'a, str>>,
    denied: &Option<Vec<String>>,
    _: Checks,
) -> Result<LookupScope<'a>, SettingsError> {
    LookupScope::new(registries, denied.as_deref()).map_err(within(""))
}

/// `notFoundMayMeanDenied`: the operator's globs, else the defaults.
pub(super) fn compile_not_found(
    patterns: Option<Vec<String>>,
) -> Result<Vec<Glob<'static>>, SettingsError> {
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
pub(super) fn compile_broker(
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
pub(super) fn compile_namespaces<'a>(
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
pub(super) fn compile_patterns<'a>(
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

/// Exemption globs: `*` (also across `/`), `?` and `[...]`, matched on the normalised reference;
/// their form checked when every member is, what the glob crate refuses always.
pub(super) fn compile_pattern(pattern: Cow<'_, str>, checks: Checks) -> Result<Glob<'_>, String> {
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

pub(super) fn is_dns_label(name: &str) -> bool {
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
pub(super) fn within<E: FieldError>(field: &str) -> impl Fn(E) -> SettingsError + '_ {
    move |error| SettingsError::new(format!("{field}{}", error.field()), error.to_string())
}

/// A settings problem, naming the offending field by its path (`actions.absent`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid settings: {}{problem}", field_prefix(.field))]
pub struct SettingsError {
    pub(super) field: String,
    pub(super) problem: String,
}

impl SettingsError {
    pub(super) fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
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
pub(super) fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("{field}: ")
    }
}
