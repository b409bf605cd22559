//! Registry mirrors: the chain of locations a node tries for an image, configured in the shape
//! of containers-registries.conf(5) so operators can copy what their nodes use.
//!
//! A rule matches the normalised name (`registry/repository`) by its `prefix`, literal or
//! `*.domain`, and the longest prefix that matches chooses the rule; its mirrors are tried in
//! order, then the primary location (the prefix, or its `location` rewrite). The image is
//! resolvable when any location has it, and absent only when every location says so.
//!
//! A `blocked` rule refuses every location whose own name it is the longest match for: the
//! node never contacts such a location, so a blocked rule's primary is left out of the chain
//! while its mirrors are still tried, as containers/image does (it looks the rule up again by
//! each location's name before contacting it).
//!
//! As containers/image (`pkg/sysregistriesv2/system_registries_v2.go`): of two rules with the
//! same `prefix` the first counts (`loadConfigFile` drops the later ones); rules sharing a
//! location must agree on `blocked` (`postProcessRegistries`); and a location whose rewrite of
//! the image is not a canonical name (`tools.mirror.test:1`, which reads as a Docker Hub
//! image) fails the pull before any location is tried (`rewriteReference` refuses it, and
//! `PullSourcesFromReference` returns the error).

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;

use serde::Deserialize;

use crate::vocabulary::field_error::FieldError;
use crate::vocabulary::reference::{ImageReference, ReferenceError};
use json_extent::{ExtentError, Scanner};

/// Which references a mirror serves (`pull-from-mirror` in registries.conf).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullFromMirror {
    /// Tags and digests.
    #[default]
    All,
    /// Only references pinned by digest (a mirror whose tags may lag behind).
    DigestOnly,
    /// Only references by tag.
    TagOnly,
}

/// One mirror of a registry rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mirror {
    /// Where the mirror serves the prefix: `host[:port][/path]`.
    pub location: String,
    /// Informational, as in registries.conf: whether the node talks plain HTTP or skips TLS
    /// verification. The policy's own transport comes from the policy server's sources.
    #[serde(default)]
    pub insecure: bool,
    /// Which references this mirror serves.
    #[serde(default)]
    pub pull_from_mirror: PullFromMirror,
}

/// One `[[registry]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegistryRule {
    /// `host[:port][/path]`, or `*.domain` for every host under a domain.
    pub prefix: String,
    /// Where the primary location really is, when it differs from the prefix.
    #[serde(default)]
    pub location: Option<String>,
    /// Mirrors, tried in order before the primary location.
    #[serde(default)]
    pub mirrors: Vec<Mirror>,
    /// The nodes refuse to contact any location this rule is the longest match for: its
    /// primary, a mirror under its prefix. Its own mirrors elsewhere are still tried.
    #[serde(default)]
    pub blocked: bool,
}

/// One place a node may pull an image from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The image as that location serves it.
    pub reference: ImageReference,
    /// True for a mirror, false for the primary location.
    pub is_mirror: bool,
}

/// A location of a chain that the nodes never contact: a `blocked` rule is the longest match
/// for its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The location as the chain has it.
    pub location: Location,
    /// The blocked rule's index in the rule list.
    pub rule: usize,
    /// The blocked rule's prefix.
    pub prefix: String,
}

/// The chain a node builds for a reference: the locations it asks, in order, and those its
/// configuration refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The locations asked, mirrors first; the primary last unless refused.
    pub locations: Vec<Location>,
    /// The locations left out because a blocked rule refuses them, in chain order.
    pub refused: Vec<Refusal>,
    /// How many of the rule's mirrors serve only the other kind of reference
    /// (`pullFromMirror`), and are not in the chain for this one.
    pub unserved_mirrors: usize,
    /// True when the reference is pinned by digest (the chain of a digest pull).
    pub by_digest: bool,
    /// Why the nodes try no location at all: a location's rewrite of the reference is not a
    /// canonical name, and containers/image fails the pull before trying any.
    pub unrewritable: Option<String>,
}

impl Chain {
    /// The chain of a reference no rule matches: its primary location alone.
    pub fn direct(reference: &ImageReference) -> Self {
        Chain {
            locations: vec![Location {
                reference: reference.clone(),
                is_mirror: false,
            }],
            refused: Vec::new(),
            unserved_mirrors: 0,
            by_digest: reference.digest().is_some(),
            unrewritable: None,
        }
    }

    /// When the nodes refuse every location: why, naming each blocked rule by its setting
    /// (`registries[0].blocked`) and saying what became of the rule's mirrors.
    pub fn refusal(&self) -> Option<String> {
        if let Some(why) = &self.unrewritable {
            return Some(why.clone());
        }
        if !self.locations.is_empty() || self.refused.is_empty() {
            return None;
        }
        let mut rules: Vec<(usize, &str)> = Vec::new();
        for refusal in &self.refused {
            if !rules.iter().any(|(rule, _)| *rule == refusal.rule) {
                rules.push((refusal.rule, &refusal.prefix));
            }
        }
        let rules = rules
            .iter()
            .map(|(rule, prefix)| format!("{prefix} (registries[{rule}].blocked)"))
            .collect::<Vec<_>>()
            .join(" and from ");
        let mirrors = self.refused.iter().filter(|r| r.location.is_mirror).count();
        let note = match (self.unserved_mirrors, mirrors) {
            (0, 0) => ", with no mirror".to_owned(),
            (0, _) => String::new(),
            (unserved, _) => format!(
                ", and {unserved} mirror(s) of the rule serve only pulls by {} (pullFromMirror)",
                if self.by_digest { "tag" } else { "digest" }
            ),
        };
        Some(format!(
            "nodes refuse pulls from {rules}{note}: no location is left to pull from"
        ))
    }
}

/// Validated mirror rules. A request's are read from the settings' text: each rule's prefix
/// when the rules are first needed, the rest of a rule when an image first matches it.
#[derive(Clone, Default)]
pub struct Mirrors<'a> {
    rules: Vec<Rule<'a>>,
    /// The first rule of a request's settings that could not be read, and why: the host did
    /// not validate the settings.
    problem: OnceCell<RuleProblem>,
    /// How a rule that does not parse as written is read again (the settings' careful way,
    /// which removes what the Kubewarden UI writes for "nothing").
    careful: Option<CarefulReading>,
}

/// A rule of a request's settings that could not be read: its index, the field within it
/// (`mirrors[0].location`, or empty), and why.
pub type RuleProblem = (usize, String, String);

/// A rule's text read the careful way: the rule, or the field within it and the problem.
pub type CarefulReading = fn(&str) -> Result<RegistryRule, (String, String)>;

/// One rule.
#[derive(Clone)]
enum Rule<'a> {
    /// Parsed with the settings (validation, or a request's careful reading).
    Parsed(RegistryRule),
    /// A request's: its prefix read, the rest of its JSON text parsed when an image first
    /// matches it (`None`: the text is not a rule).
    Text {
        prefix: Cow<'a, str>,
        text: &'a str,
        parsed: OnceCell<Option<RegistryRule>>,
    },
}

impl Rule<'_> {
    fn prefix(&self) -> &str {
        match self {
            Rule::Parsed(rule) => &rule.prefix,
            Rule::Text { prefix, .. } => prefix,
        }
    }
}

impl Mirrors<'static> {
    /// Validates `rules`; the error names the offending field relative to the rule list.
    pub fn new(rules: Vec<RegistryRule>) -> Result<Self, RuleError> {
        for (i, rule) in rules.iter().enumerate() {
            // the field's path is written only for an error
            let at = |field: fmt::Arguments<'_>, problem| RuleError {
                field: format!("[{i}].{field}"),
                problem,
            };
            check_location(&rule.prefix, true).map_err(|p| at(format_args!("prefix"), p))?;
            if let Some(location) = &rule.location {
                check_location(location, false).map_err(|p| at(format_args!("location"), p))?;
            }
            for (j, mirror) in rule.mirrors.iter().enumerate() {
                check_location(&mirror.location, false)
                    .map_err(|p| at(format_args!("mirrors[{j}].location"), p))?;
            }
            let place = |rule: &RegistryRule| rule.location.clone().unwrap_or(rule.prefix.clone());
            let conflict = rules[..i]
                .iter()
                .position(|other| place(other) == place(rule) && other.blocked != rule.blocked);
            if let Some(other) = conflict {
                return Err(at(
                    format_args!("blocked"),
                    LocationError::ConflictingBlocked {
                        location: place(rule),
                        other,
                    },
                ));
            }
        }
        Ok(Self::validated(rules))
    }

    /// Rules [`Mirrors::new`] has accepted before: a request's settings, which the host
    /// validated when it loaded the policy.
    pub fn validated(rules: Vec<RegistryRule>) -> Self {
        Mirrors {
            rules: rules.into_iter().map(Rule::Parsed).collect(),
            problem: OnceCell::new(),
            careful: None,
        }
    }
}

impl<'a> Mirrors<'a> {
    /// The rules of a request's settings from the text of their list (validated by the host):
    /// only each rule's `prefix` is read now, the rest of a rule when an image first matches
    /// it, through `careful` when it does not parse as written. `None` when the text is not a
    /// list of objects with a string `prefix`, which the careful reading then explains.
    pub fn from_text(text: &'a str, careful: CarefulReading) -> Option<Self> {
        let mut rules = Vec::new();
        let mut scanner = Scanner::new(text);
        scanner
            .elements(|scanner| {
                let start = scanner.offset();
                let mut prefix = None;
                scanner.members(|key, value, _| {
                    if key == "prefix" {
                        prefix = Some(Scanner::new(value).string()?);
                    }
                    Ok(())
                })?;
                let missing = ExtentError {
                    offset: start,
                    expected: "a rule with a prefix",
                };
                rules.push(Rule::Text {
                    prefix: prefix.ok_or(missing)?,
                    text: text[start..scanner.offset()].trim_start(),
                    parsed: OnceCell::new(),
                });
                Ok(())
            })
            .ok()?;
        scanner.at_end().then_some(Mirrors {
            rules,
            problem: OnceCell::new(),
            careful: Some(careful),
        })
    }

    /// True when no rule is configured: every image has only its primary location.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Reads every rule, as validation and tests do.
    pub fn read_all(&self) {
        for index in 0..self.rules.len() {
            let _ = self.rule(index);
        }
    }

    /// The first rule that could not be read, by its index, and why.
    pub fn problem(&self) -> Option<&RuleProblem> {
        self.problem.get()
    }

    /// The locations a node asks for `reference`, in order, as [`Mirrors::chain`] builds them.
    pub fn locations(&self, reference: &ImageReference) -> Vec<Location> {
        self.chain(reference).locations
    }

    /// The chain a node builds for `reference`: the matching rule's mirrors that serve it, in
    /// order, then the primary location; each left out, as refused, when a blocked rule is the
    /// longest match for its own name. A location whose rewrite is not a canonical reference
    /// leaves no location at all ([`Chain::unrewritable`]), as the pull fails on the node.
    pub fn chain(&self, reference: &ImageReference) -> Chain {
        if self.rules.is_empty() {
            // the usual case: no name to build and match
            return Chain::direct(reference);
        }
        let name = reference.name();
        let matched = self.find(&name).and_then(|(index, matched)| {
            let rule = self.rule(index)?;
            Some((rule, matched))
        });
        let Some((rule, matched)) = matched else {
            // no rule, blocked or not, is a match for the name
            return Chain::direct(reference);
        };
        let by_digest = reference.digest().is_some();
        let mut chain = Chain {
            locations: Vec::new(),
            refused: Vec::new(),
            unserved_mirrors: 0,
            by_digest,
            unrewritable: None,
        };
        let rest = name.get(matched..).unwrap_or_default();
        let suffix = match reference.digest() {
            Some(digest) => format!("@{digest}"),
            None => format!(":{}", reference.tag().unwrap_or("latest")),
        };
        let rewrite = |location: &str| canonical(&format!("{location}{rest}{suffix}"));
        let mut rewritten = Vec::new();
        for mirror in &rule.mirrors {
            let serves = match mirror.pull_from_mirror {
                PullFromMirror::All => true,
                PullFromMirror::DigestOnly => by_digest,
                PullFromMirror::TagOnly => !by_digest,
            };
            if !serves {
                chain.unserved_mirrors += 1;
            } else {
                rewritten.push((rewrite(&mirror.location), true));
            }
        }
        let primary = match &rule.location {
            Some(location) => rewrite(location),
            None => Ok(reference.clone()),
        };
        rewritten.push((primary, false));
        for (location, is_mirror) in rewritten {
            match location {
                Ok(location) => self.place(&mut chain, location, is_mirror),
                Err(text) => {
                    chain.locations.clear();
                    chain.refused.clear();
                    chain.unrewritable = Some(format!(
                        "the nodes fail the pull before trying any location: the rule for {} (registries) rewrites it to {text:?}, which is not a canonical image name",
                        rule.prefix
                    ));
                    break;
                }
            }
        }
        chain
    }

    /// Adds `reference` to `chain`, as asked or, when a blocked rule is the longest match for
    /// its name, as refused.
    fn place(&self, chain: &mut Chain, reference: ImageReference, is_mirror: bool) {
        let location = Location {
            reference,
            is_mirror,
        };
        let blocking = self
            .find(&location.reference.name())
            .and_then(|(index, _)| Some((index, self.rule(index)?)))
            .filter(|(_, rule)| rule.blocked);
        match blocking {
            Some((rule, blocked)) => chain.refused.push(Refusal {
                location,
                rule,
                prefix: blocked.prefix.clone(),
            }),
            None => chain.locations.push(location),
        }
    }

    /// Rule `index`, parsed on first use; `None` (and the problem noted) when its text is not
    /// a rule.
    fn rule(&self, index: usize) -> Option<&RegistryRule> {
        let (text, parsed) = match self.rules.get(index)? {
            Rule::Parsed(rule) => return Some(rule),
            Rule::Text { text, parsed, .. } => (*text, parsed),
        };
        parsed
            .get_or_init(|| {
                serde_json::from_str(text)
                    .map_err(|e| (String::new(), e.to_string()))
                    .or_else(|e| self.careful.map_or(Err(e), |careful| careful(text)))
                    .map_err(|(field, problem)| {
                        let _ = self.problem.set((index, field, problem));
                    })
                    .ok()
            })
            .as_ref()
    }

    /// The matching rule's index and how many bytes of `name` it matched, as
    /// sysregistriesv2's `FindRegistry` chooses: the longest prefix, literal or `*.domain`
    /// alike, and among prefixes of the same length the first in sorted order. A wildcard
    /// matches the host (any depth of subdomain) and leaves its port in the rest, which the
    /// rewrite keeps.
    fn find(&self, name: &str) -> Option<(usize, usize)> {
        self.rules
            .iter()
            .enumerate()
            .filter_map(|(index, rule)| prefix_match(name, rule.prefix()).map(|end| (index, end)))
            .min_by(|&(a, _), &(b, _)| {
                let (a, b) = (self.rules[a].prefix(), self.rules[b].prefix());
                b.len().cmp(&a.len()).then_with(|| a.cmp(b))
            })
    }
}

/// `text` as a reference when it is one in canonical form, as containers/image's
/// `reference.ParseNamed` requires of a rewritten name; else `text`.
fn canonical(text: &str) -> Result<ImageReference, String> {
    match ImageReference::parse(text) {
        Ok(reference) if reference.to_string() == text => Ok(reference),
        _ => Err(text.to_owned()),
    }
}

/// The rules, each parsed.
impl fmt::Debug for Mirrors<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mirrors")
            .field(
                "rules",
                &(0..self.rules.len())
                    .map(|index| self.rule(index))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Where `prefix` stops matching `name` (`registry/repository`), if it does, with the outcomes
/// of sysregistriesv2's `refMatchingPrefix` and `refMatchingSubdomainPrefix`. A literal prefix
/// must end at the end of the name or before a `/`, `@` or `:`; a host prefix without a port
/// thus covers that host on every port, which containers/image does without promising it.
/// `*.domain` looks only at the first `.domain` of the name: it must come before any `/` and
/// end where a literal prefix may.
fn prefix_match(name: &str, prefix: &str) -> Option<usize> {
    if let Some(domain) = prefix.strip_prefix('*') {
        let start = name.find(domain)?;
        if name[..start].contains('/') {
            return None;
        }
        let end = start + domain.len();
        return match name.as_bytes().get(end) {
            None | Some(b':' | b'/' | b'@') => Some(end),
            Some(_) => None,
        };
    }
    let rest = name.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with(['/', ':', '@'])).then_some(prefix.len())
}

/// A refused registry rule: which field, relative to the rule list, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}")]
pub struct RuleError {
    /// `[0].prefix`, `[1].mirrors[0].location`.
    pub field: String,
    /// What is wrong with it.
    #[source]
    pub problem: LocationError,
}

impl FieldError for RuleError {
    fn field(&self) -> String {
        self.field.clone()
    }
}

/// Why a `prefix` or `location` is not `host[:port][/path]` (or, for a prefix, `*.domain`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// Nothing was written.
    #[error("must not be empty")]
    Empty,
    /// `https://…`: locations are written without a scheme.
    #[error("must not have a scheme: write host[:port][/path]")]
    Scheme,
    /// A tag, digest, blank or trailing slash.
    #[error("{0:?} is not host[:port][/path]")]
    NotHostPath(String),
    /// `*.domain` outside a prefix.
    #[error("wildcards are only allowed in prefixes")]
    WildcardOutsidePrefix,
    /// `*.domain/path`, `*.domain:port`, or `*.` alone.
    #[error("{0:?}: a wildcard prefix is *.domain, without a port or a path")]
    WildcardWithPath(String),
    /// A `*` anywhere but leading a prefix.
    #[error("{0:?}: a wildcard may only lead a prefix, as *.domain")]
    MisplacedWildcard(String),
    /// The first component is not a registry host (`registry/x` is a Docker Hub name).
    #[error(
        "{0:?} does not start with a registry host (a name with a dot or a port, or localhost); it would be read as a Docker Hub repository"
    )]
    NotQualified(String),
    /// Another rule with the same location says otherwise of `blocked`, which
    /// containers/image refuses (`postProcessRegistries`).
    #[error("{location:?} is also the location of registries[{other}], whose blocked differs")]
    ConflictingBlocked {
        /// The shared location (a rule's prefix when it has none).
        location: String,
        /// The index of the earlier rule.
        other: usize,
    },
    /// Not a valid registry and repository path.
    #[error("{location:?} is not host[:port][/path]: {reason}")]
    Invalid {
        /// The location as written.
        location: String,
        /// Why the reference parser refused it.
        #[source]
        reason: ReferenceError,
    },
}

/// `host[:port][/path]` without scheme, tag or digest; `*.domain` only where allowed.
fn check_location(location: &str, wildcard_allowed: bool) -> Result<(), LocationError> {
    if location.is_empty() {
        return Err(LocationError::Empty);
    }
    if location.contains("://") {
        return Err(LocationError::Scheme);
    }
    if location.contains(['@', ' ', '\t']) || location.ends_with('/') {
        return Err(LocationError::NotHostPath(location.to_owned()));
    }
    if let Some(domain) = location.strip_prefix("*.") {
        if !wildcard_allowed {
            return Err(LocationError::WildcardOutsidePrefix);
        }
        if domain.is_empty() || domain.contains(['/', '*', ':']) {
            return Err(LocationError::WildcardWithPath(location.to_owned()));
        }
        return Ok(());
    }
    if location.contains('*') {
        return Err(LocationError::MisplacedWildcard(location.to_owned()));
    }
    let parsed = ImageReference::parse(&format!("{location}/x")).map_err(|reason| {
        LocationError::Invalid {
            location: location.to_owned(),
            reason,
        }
    })?;
    // `registry/x` would silently become `docker.io/registry/x`: containers/image refuses a
    // location that is not fully qualified, and so does the policy.
    let host = location.split('/').next().unwrap_or(location);
    if parsed.registry() != host {
        return Err(LocationError::NotQualified(location.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
