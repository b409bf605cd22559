//! Failures: why an image will not pull, or could not be verified. [`FailureKind`] is the one
//! table of failure classes: each kind's setting key, certainty, default action and label are
//! defined here once, and everything else (settings, reports, tests) reads them from it.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer};

use crate::vocabulary::action::Action;

/// Why an image failed, or could not be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The class of failure, which selects the configured action.
    pub kind: FailureKind,
    /// A one-line explanation taken from the registry or the parser; never secret material.
    pub detail: String,
    /// What was observed, when it is narrower than the kind's label: messages say it instead.
    pub observed: Observed,
    /// How many leading bytes of `detail` are its cause, the sentence a warning keeps whole
    /// while it cuts what follows (lists of nodes, locations, registries); 0 when none is.
    pub cause_len: usize,
    /// The tags of the repository nearest the one asked, which the lookup broker read for an
    /// [`FailureKind::Absent`] (valid tags only, nearest first); messages name them.
    pub suggestions: Vec<String>,
}

impl Failure {
    /// A failure of `kind` explained by `detail`.
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Self {
        Failure {
            kind,
            detail: detail.into(),
            observed: Observed::AsKind,
            cause_len: 0,
            suggestions: Vec::new(),
        }
    }

    /// A failure whose detail leads with `cause`, the documented sentence a warning keeps
    /// whole, then `rest` after `; ` (what a warning may cut).
    pub fn caused(kind: FailureKind, observed: Observed, cause: &str, rest: &str) -> Self {
        let detail = if rest.is_empty() {
            cause.to_owned()
        } else {
            format!("{cause}; {rest}")
        };
        Failure {
            cause_len: cause.len(),
            ..Failure::observed(kind, observed, detail)
        }
    }

    /// The detail's cause (empty when none is marked) and what follows it.
    pub fn cause_and_rest(&self) -> (&str, &str) {
        let split = self.cause_len.min(self.detail.len());
        match (self.detail.get(..split), self.detail.get(split..)) {
            (Some(cause), Some(rest)) => (cause, rest.strip_prefix("; ").unwrap_or(rest)),
            _ => ("", &self.detail),
        }
    }

    /// A failure of `kind` whose messages name what was `observed` rather than the kind.
    pub fn observed(kind: FailureKind, observed: Observed, detail: impl Into<String>) -> Self {
        Failure {
            observed,
            ..Failure::new(kind, detail)
        }
    }

    /// How messages name the failure: what was observed, else the kind's label.
    pub fn label(&self) -> &'static str {
        self.observed.label().unwrap_or(self.kind.spec().label)
    }
}

/// Observations that a kind's action covers but whose words must be their own: the action
/// follows the kind (an operator's `actions.unreachable` still decides), the message says what
/// happened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Observed {
    /// Nothing narrower than the kind: its label says it.
    #[default]
    AsKind,
    /// The policy server's reference parser refused a reference the policy (and the kubelet)
    /// accepts, e.g. a bracketed IPv6 registry: no request was sent.
    HostCannotParse,
    /// The image is empty or blank: there is no reference to look up.
    EmptyImage,
    /// The nodes refuse every location of the image (`blockedRegistry`), but some hold it
    /// and pull only when they lack it (`cachedOnNodes`).
    RefusedButCached,
    /// The nodes fail the pull before trying any location: a mirror rule rewrites the image
    /// to a name that is not canonical (`blockedRegistry`'s action).
    Unrewritable,
}

impl Observed {
    /// The words that replace the kind's label, if any.
    pub const fn label(self) -> Option<&'static str> {
        match self {
            Observed::AsKind => None,
            Observed::HostCannotParse => Some("cannot be parsed by the policy server"),
            Observed::EmptyImage => Some("no image to look up"),
            Observed::RefusedButCached => Some("refused by the nodes (cached on nodes)"),
            Observed::Unrewritable => Some("not rewritable by the nodes' mirror rule"),
        }
    }
}

/// The classes of failure operators give actions to; see [`FailureKind::spec`] for each one's
/// setting key, certainty and label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// The registry said the tag, digest or repository does not exist: the pull will fail.
    Absent,
    /// The image string is not a reference the kubelet can parse (`InvalidImageName`).
    InvalidReference,
    /// The registry refused the lookup (401/403): the image may exist but is private.
    Unauthorized,
    /// The registry could not be asked or gave no usable answer (network, 5xx, 429, time-out).
    Unreachable,
    /// The policy host refused the lookup itself (capability not granted or not implemented).
    HostRefused,
    /// A pull secret (or the ServiceAccount that should supply them) does not exist; the
    /// kubelet skips it and pulls with whatever else matches.
    MissingPullSecret,
    /// A pull secret is not of a docker-config type; the kubelet ignores it.
    WrongPullSecretType,
    /// A pull secret does not decode; the kubelet then fails every pull of the pod.
    MalformedPullSecret,
    /// The registry refused the lookup and no pull secret of the pod covers that registry.
    UncoveredRegistry,
    /// The image exists but has no manifest for a platform its pods must run on.
    MissingPlatform,
    /// The registry has no such image, but nodes still have it cached and the pull policy is
    /// `IfNotPresent`: pods placed on those nodes start, others fail.
    CachedOnNodes,
    /// The policy did not ask the registry: it is outside `lookupRegistries`, or its address is
    /// one lookups are never sent to (`deniedLookupNetworks`).
    NotLookedUp,
    /// A short name (`nginx:1.25`) the nodes' CRI-O cannot resolve (`shortNames`): no alias,
    /// and no search registry or several under `enforcing`. The pull fails before any registry
    /// is asked.
    UnresolvedShortName,
    /// Every location of the image's chain is one the nodes refuse to contact: a `blocked`
    /// rule of `registries` is the longest match for each (registries.conf `blocked`). The
    /// pull fails before any registry is asked.
    BlockedRegistry,
}

/// What the policy knows about one failure class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindSpec {
    /// The key under `actions` in the settings, as operators write it.
    pub key: &'static str,
    /// True when the failure proves the pull will fail, as opposed to "could not verify".
    pub certain: bool,
    /// How messages name the failure: `not found on registry docker.io`.
    pub label: &'static str,
}

impl FailureKind {
    /// How many kinds there are.
    pub const COUNT: usize = 14;

    /// Every kind, in the order reports list them.
    pub const ALL: [FailureKind; Self::COUNT] = [
        FailureKind::Absent,
        FailureKind::InvalidReference,
        FailureKind::Unauthorized,
        FailureKind::Unreachable,
        FailureKind::HostRefused,
        FailureKind::MissingPullSecret,
        FailureKind::WrongPullSecretType,
        FailureKind::MalformedPullSecret,
        FailureKind::UncoveredRegistry,
        FailureKind::MissingPlatform,
        FailureKind::CachedOnNodes,
        FailureKind::NotLookedUp,
        FailureKind::UnresolvedShortName,
        FailureKind::BlockedRegistry,
    ];

    /// Every setting key, in the order of [`FailureKind::ALL`], for error messages.
    pub const KEYS: [&'static str; Self::COUNT] = {
        let mut keys = [""; Self::COUNT];
        let mut i = 0;
        while i < Self::COUNT {
            keys[i] = Self::ALL[i].spec().key;
            i += 1;
        }
        keys
    };

    /// The table of failure classes: the one place each kind's properties are written down.
    #[rustfmt::skip]
    pub const fn spec(self) -> KindSpec {
        use FailureKind::*;
        let (key, certain, label) = match self {
            //                    setting key            certain  label in messages
            Absent =>              ("absent",              true,  "not found"),
            InvalidReference =>    ("invalidReference",    true,  "invalid image reference"),
            Unauthorized =>        ("unauthorized",        false, "not authorized"),
            Unreachable =>         ("unreachable",         false, "registry unreachable"),
            HostRefused =>         ("hostRefused",         false, "lookup refused by the policy host"),
            MissingPullSecret =>   ("missingPullSecret",   false, "missing pull secret"),
            WrongPullSecretType => ("wrongPullSecretType", false, "pull secret of the wrong type"),
            MalformedPullSecret => ("malformedPullSecret", true,  "malformed pull secret"),
            UncoveredRegistry =>   ("uncoveredRegistry",   false, "not authorized"),
            MissingPlatform =>     ("missingPlatform",     true,  "no manifest for a required platform"),
            CachedOnNodes =>       ("cachedOnNodes",       false, "not found (cached on nodes)"),
            NotLookedUp =>         ("notLookedUp",         false, "not looked up"),
            UnresolvedShortName => ("unresolvedShortName", true,  "short name the nodes cannot resolve"),
            BlockedRegistry =>     ("blockedRegistry",     true,  "refused by the nodes"),
        };
        KindSpec { key, certain, label }
    }

    /// True when the failure proves the pull will fail, as opposed to "could not verify".
    pub const fn is_certain(self) -> bool {
        self.spec().certain
    }

    /// The setting key, as operators write it.
    pub const fn setting_key(self) -> &'static str {
        self.spec().key
    }

    /// The action when the operator configured none: reject only what is certain to fail.
    pub const fn default_action(self) -> Action {
        if self.is_certain() {
            Action::Reject
        } else {
            Action::Warn
        }
    }

    /// The kind whose setting key is `key`.
    pub fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.setting_key() == key)
    }

    /// The kind's position in [`FailureKind::ALL`], for tables indexed by kind.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl<'de> Deserialize<'de> for FailureKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let key = String::deserialize(deserializer)?;
        FailureKind::from_key(&key).ok_or_else(|| de::Error::unknown_field(&key, &Self::KEYS))
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec().label)
    }
}

/// What one lookup established: the manifest digest, or why there is none.
pub type LookupResult = Result<String, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certainty_matches_the_mission() {
        let certain: Vec<_> = FailureKind::ALL
            .into_iter()
            .filter(|k| k.is_certain())
            .collect();
        assert_eq!(
            certain,
            [
                FailureKind::Absent,
                FailureKind::InvalidReference,
                FailureKind::MalformedPullSecret,
                FailureKind::MissingPlatform,
                FailureKind::UnresolvedShortName,
                FailureKind::BlockedRegistry
            ]
        );
    }

    #[test]
    fn the_table_is_indexed_in_order_and_keys_are_unique() {
        for (i, kind) in FailureKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind:?}");
            assert_eq!(FailureKind::from_key(kind.setting_key()), Some(kind));
            assert_eq!(FailureKind::KEYS[i], kind.setting_key());
        }
        let mut keys = FailureKind::KEYS.to_vec();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), FailureKind::COUNT);
    }

    #[test]
    fn unknown_keys_are_refused_with_the_known_ones() {
        let error = serde_json::from_value::<FailureKind>(serde_json::json!("absnet"))
            .expect_err("unknown key");
        let message = error.to_string();
        assert!(
            message.contains("absnet") && message.contains("`missingPlatform`"),
            "{message}"
        );
    }
}
