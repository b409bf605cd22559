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
        }
    }

    /// When the nodes refuse every location: why, naming each blocked rule by its setting
    /// (`registries[0].blocked`) and saying what became of the rule's mirrors.
    pub fn refusal(&self) -> Option<String> {
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
    /// longest match for its own name. Locations that do not form a valid reference once
    /// rewritten are left out.
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
        };
        let rest = name.get(matched..).unwrap_or_default();
        let suffix = match reference.digest() {
            Some(digest) => format!("@{digest}"),
            None => format!(":{}", reference.tag().unwrap_or("latest")),
        };
        let rewrite =
            |location: &str| ImageReference::parse(&format!("{location}{rest}{suffix}")).ok();
        for mirror in &rule.mirrors {
            let serves = match mirror.pull_from_mirror {
                PullFromMirror::All => true,
                PullFromMirror::DigestOnly => by_digest,
                PullFromMirror::TagOnly => !by_digest,
            };
            if !serves {
                chain.unserved_mirrors += 1;
            } else if let Some(location) = rewrite(&mirror.location) {
                self.place(&mut chain, location, true);
            }
        }
        let primary = match &rule.location {
            Some(location) => rewrite(location),
            None => Some(reference.clone()),
        };
        if let Some(primary) = primary {
            self.place(&mut chain, primary, false);
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
mod tests {
    use super::*;

    const DIGEST: &str = "sha256:5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

    fn mirror(location: &str, pull_from_mirror: PullFromMirror) -> Mirror {
        Mirror {
            location: location.into(),
            insecure: false,
            pull_from_mirror,
        }
    }

    fn rule(prefix: &str, location: Option<&str>, mirrors: Vec<Mirror>) -> RegistryRule {
        RegistryRule {
            prefix: prefix.into(),
            location: location.map(str::to_owned),
            mirrors,
            blocked: false,
        }
    }

    /// A rule with one mirror that serves every reference.
    fn mirrored(prefix: &str, location: &str) -> RegistryRule {
        rule(prefix, None, vec![mirror(location, PullFromMirror::All)])
    }

    /// The locations of `image`, each as it is looked up and whether it is a mirror.
    fn chain(mirrors: &Mirrors, image: &str) -> Vec<(String, bool)> {
        let reference = ImageReference::parse(image).expect(image);
        mirrors
            .locations(&reference)
            .into_iter()
            .map(|l| (l.reference.lookup_reference(), l.is_mirror))
            .collect()
    }

    /// The locations of `image`, as they are looked up.
    fn lookups(mirrors: &Mirrors, image: &str) -> Vec<String> {
        chain(mirrors, image).into_iter().map(|(l, _)| l).collect()
    }

    /// A name, a literal prefix, and the part of the name the prefix matches.
    #[rustfmt::skip]
    const LITERAL: &[(&str, &str, Option<&str>)] = &[
        // the prefix is the whole name
        ("registry.example.test", "registry.example.test", Some("registry.example.test")),
        ("registry.example.test/team-a/app", "registry.example.test/team-a/app",
         Some("registry.example.test/team-a/app")),
        // followed by `/`: a host, or a namespace, of the name
        ("registry.example.test/team-a/app", "registry.example.test", Some("registry.example.test")),
        ("registry.example.test/team-a/app", "registry.example.test/team-a",
         Some("registry.example.test/team-a")),
        // followed by `:`: a host prefix without a port also covers the host on any port
        ("registry.example.test:5000/team-a/app", "registry.example.test", Some("registry.example.test")),
        ("registry.example.test:5000/team-a", "registry.example.test:5000",
         Some("registry.example.test:5000")),
        // followed by `@`
        ("registry.example.test/team-a/app@sha256:00", "registry.example.test/team-a/app",
         Some("registry.example.test/team-a/app")),
        // followed by anything else: not a whole component
        ("registry.example.test/team-ab/app", "registry.example.test/team-a", None),
        ("registry.example.testing/app", "registry.example.test", None),
        ("registry.example.test.internal/app", "registry.example.test", None),
        ("registry.example.test:50001/team-a", "registry.example.test:5000", None),
        // a port in the prefix must be in the name
        ("registry.example.test/team-a", "registry.example.test:5000", None),
        // the name is shorter than the prefix, or starts elsewhere
        ("registry.example.test", "registry.example.test/team-a", None),
        ("mirror.internal.test/team-a", "registry.example.test", None),
        ("registry.example.test/team-a/app", "team-a", None),
        ("", "registry.example.test", None),
    ];

    #[test]
    fn literal_prefixes_match_whole_components_from_the_start() {
        for (name, prefix, matched) in LITERAL {
            let got = prefix_match(name, prefix).map(|end| &name[..end]);
            assert_eq!(got, *matched, "{name} with prefix {prefix}");
        }
    }

    /// A name, a `*.domain` prefix, and the part of the name the prefix matches.
    #[rustfmt::skip]
    const WILDCARD: &[(&str, &str, Option<&str>)] = &[
        // a subdomain host, whatever follows it
        ("build.example.test", "*.example.test", Some("build.example.test")),
        ("build.example.test/team-a/app", "*.example.test", Some("build.example.test")),
        ("build.example.test@sha256:00", "*.example.test", Some("build.example.test")),
        // any depth of subdomain
        ("a.b.c.example.test/app", "*.example.test", Some("a.b.c.example.test")),
        ("build.eu.example.test/app", "*.eu.example.test", Some("build.eu.example.test")),
        // the port is not part of the match
        ("build.example.test:5000/app", "*.example.test", Some("build.example.test")),
        // the domain itself is not its own subdomain
        ("example.test/app", "*.example.test", None),
        ("eu.example.test/app", "*.eu.example.test", None),
        // the domain starts at a dot and ends the host
        ("buildexample.test/app", "*.example.test", None),
        ("build.example.testing/app", "*.example.test", None),
        ("build.us.example.test/app", "*.eu.example.test", None),
        // only the host is matched, never the path
        ("registry.other.test/build.example.test/app", "*.example.test", None),
        ("registry.other.test/team.example.test", "*.example.test", None),
        // the first `.domain` of the name decides
        ("a.example.test.example.test/app", "*.example.test", None),
        // a bare star names no domain
        ("build.example.test/app", "*", None),
    ];

    #[test]
    fn wildcard_prefixes_match_subdomain_hosts_only() {
        for (name, prefix, matched) in WILDCARD {
            let got = prefix_match(name, prefix).map(|end| &name[..end]);
            assert_eq!(got, *matched, "{name} with prefix {prefix}");
        }
    }

    /// Rules whose single mirror names the rule, to tell which one an image chose.
    fn overlapping_rules() -> Vec<RegistryRule> {
        vec![
            mirrored("registry.example.test", "host.mirror.test"),
            mirrored("registry.example.test/team-a", "team-a.mirror.test"),
            mirrored("registry.example.test/team-a/tools", "tools.mirror.test/t"),
            mirrored("*.example.test", "sub.mirror.test"),
            mirrored("*.eu.example.test", "eu.mirror.test"),
            // as long as `*.eu.example.test`
            mirrored("b.eu.example.test", "b.mirror.test"),
            mirrored("cache.eu.example.test:5000", "cache.mirror.test"),
        ]
    }

    /// An image and the first location of its chain under [`overlapping_rules`].
    #[rustfmt::skip]
    const CHOICES: &[(&str, &str)] = &[
        // the longest literal prefix: host, namespace, repository
        ("registry.example.test/team-b/app:1", "host.mirror.test/team-b/app:1"),
        ("registry.example.test/team-a/app:1", "team-a.mirror.test/app:1"),
        ("registry.example.test/team-a/tools/lint:1", "tools.mirror.test/t/lint:1"),
        ("registry.example.test/team-a/tools:1", "tools.mirror.test/t:1"),
        // a longer name that is not a whole component falls back to a shorter prefix
        ("registry.example.test/team-ab/app:1", "host.mirror.test/team-ab/app:1"),
        // the host prefix covers a port, which stays in the rest; the literal host is
        // longer than the wildcard that also matches it
        ("registry.example.test:5000/team-a/app:1", "host.mirror.test:5000/team-a/app:1"),
        // wildcards: any other subdomain, the longer domain first
        ("other.example.test/app:1", "sub.mirror.test/app:1"),
        ("a.b.example.test/app:1", "sub.mirror.test/app:1"),
        ("x.eu.example.test/app:1", "eu.mirror.test/app:1"),
        // a tie in length goes to the prefix that sorts first, and `*` sorts before letters
        ("b.eu.example.test/app:1", "eu.mirror.test/app:1"),
        // a literal host with a port beats the wildcard, on that port only
        ("cache.eu.example.test:5000/app:1", "cache.mirror.test/app:1"),
        ("cache.eu.example.test:6000/app:1", "eu.mirror.test:6000/app:1"),
        // no rule: the image as written
        ("example.test/app:1", "example.test/app:1"),
        ("registry.example.testing/app:1", "registry.example.testing/app:1"),
        ("registry.other.test/team-a/app:1", "registry.other.test/team-a/app:1"),
    ];

    #[test]
    fn the_longest_matching_prefix_chooses_the_rule_in_any_order() {
        let rules = overlapping_rules();
        let mut reversed = rules.clone();
        reversed.reverse();
        for rules in [rules, reversed] {
            let mirrors = Mirrors::new(rules).expect("valid rules");
            for (image, first) in CHOICES {
                assert_eq!(lookups(&mirrors, image)[0], *first, "{image}");
            }
        }
    }

    #[test]
    fn mirrors_are_tried_in_order_and_the_primary_last() {
        let mirrors = Mirrors::new(vec![rule(
            "registry.example.test/team-a",
            None,
            vec![
                mirror("mirror.internal.test/cache/team-a", PullFromMirror::All),
                mirror("backup.internal.test:5000", PullFromMirror::All),
            ],
        )])
        .expect("valid rules");
        assert_eq!(
            chain(&mirrors, "registry.example.test/team-a/api/server:3.1"),
            [
                (
                    "mirror.internal.test/cache/team-a/api/server:3.1".to_owned(),
                    true
                ),
                ("backup.internal.test:5000/api/server:3.1".to_owned(), true),
                (
                    "registry.example.test/team-a/api/server:3.1".to_owned(),
                    false
                ),
            ]
        );
    }

    #[test]
    fn a_location_moves_the_primary_and_mirrors_keep_the_prefix_rest() {
        let mirrors = Mirrors::new(vec![rule(
            "legacy.example.test/team-a",
            Some("registry.example.test:8443/team-a-moved"),
            vec![mirror("mirror.internal.test/team-a", PullFromMirror::All)],
        )])
        .expect("valid rules");
        assert_eq!(
            chain(&mirrors, "legacy.example.test/team-a/app:2"),
            [
                ("mirror.internal.test/team-a/app:2".to_owned(), true),
                (
                    "registry.example.test:8443/team-a-moved/app:2".to_owned(),
                    false
                ),
            ]
        );
        // the image at the prefix itself: the rest is empty
        assert_eq!(
            lookups(&mirrors, "legacy.example.test/team-a:2"),
            [
                "mirror.internal.test/team-a:2",
                "registry.example.test:8443/team-a-moved:2"
            ]
        );
    }

    #[test]
    fn every_location_is_asked_for_the_same_tag_or_digest() {
        let mirrors = Mirrors::new(vec![mirrored(
            "registry.example.test/team-a",
            "mirror.internal.test/team-a",
        )])
        .expect("valid rules");
        let image = "registry.example.test/team-a/app";
        let cases = [
            (format!("{image}:1.2"), ":1.2".to_owned()),
            // no tag is `latest`
            (image.to_owned(), ":latest".to_owned()),
            (format!("{image}@{DIGEST}"), format!("@{DIGEST}")),
            // a digest pins the image: the tag beside it is not asked
            (format!("{image}:1.2@{DIGEST}"), format!("@{DIGEST}")),
        ];
        for (image, version) in cases {
            assert_eq!(
                lookups(&mirrors, &image),
                [
                    format!("mirror.internal.test/team-a/app{version}"),
                    format!("registry.example.test/team-a/app{version}"),
                ],
                "{image}"
            );
        }
    }

    #[test]
    fn pull_from_mirror_chooses_the_mirrors_of_tags_or_of_digests() {
        use PullFromMirror::{All, DigestOnly, TagOnly};
        // which references a mirror of each kind serves: by tag, by digest
        for (kind, by_tag, by_digest) in [
            (All, true, true),
            (DigestOnly, false, true),
            (TagOnly, true, false),
        ] {
            let mirrors = Mirrors::new(vec![rule(
                "registry.example.test",
                None,
                vec![mirror("mirror.internal.test", kind)],
            )])
            .expect("valid rules");
            for (image, served) in [
                ("registry.example.test/app:1".to_owned(), by_tag),
                (format!("registry.example.test/app@{DIGEST}"), by_digest),
            ] {
                let chain = chain(&mirrors, &image);
                assert_eq!(chain.len(), 1 + usize::from(served), "{kind:?} {image}");
                assert_eq!(chain[0].1, served, "{kind:?} {image}");
                let primary = chain.last().expect("a primary");
                assert_eq!(primary, &(image.clone(), false), "{kind:?}");
            }
        }
    }

    #[test]
    fn mirrors_of_mixed_kinds_keep_their_order() {
        use PullFromMirror::{All, DigestOnly, TagOnly};
        let mirrors = Mirrors::new(vec![rule(
            "registry.example.test",
            None,
            vec![
                mirror("pinned.internal.test", DigestOnly),
                mirror("tags.internal.test", TagOnly),
                mirror("any.internal.test", All),
            ],
        )])
        .expect("valid rules");
        assert_eq!(
            lookups(&mirrors, "registry.example.test/app:1"),
            [
                "tags.internal.test/app:1",
                "any.internal.test/app:1",
                "registry.example.test/app:1"
            ]
        );
        assert_eq!(
            lookups(&mirrors, &format!("registry.example.test/app@{DIGEST}")),
            [
                format!("pinned.internal.test/app@{DIGEST}"),
                format!("any.internal.test/app@{DIGEST}"),
                format!("registry.example.test/app@{DIGEST}"),
            ]
        );
    }

    #[test]
    fn docker_hub_names_are_matched_once_normalised() {
        let mirrors = Mirrors::new(vec![
            mirrored("docker.io", "hub.mirror.test/proxy"),
            mirrored("docker.io/library", "official.mirror.test"),
        ])
        .expect("valid rules");
        assert_eq!(
            chain(&mirrors, "team-a/app:1"),
            [
                ("hub.mirror.test/proxy/team-a/app:1".to_owned(), true),
                ("docker.io/team-a/app:1".to_owned(), false),
            ]
        );
        assert_eq!(
            lookups(&mirrors, "toolbox"),
            [
                "official.mirror.test/toolbox:latest",
                "docker.io/library/toolbox:latest"
            ]
        );
    }

    #[test]
    fn a_wildcard_rule_drops_the_subdomain_and_keeps_the_port() {
        let mirrors = Mirrors::new(vec![rule(
            "*.example.test",
            Some("primary.internal.test"),
            vec![mirror("mirror.internal.test", PullFromMirror::All)],
        )])
        .expect("valid rules");
        assert_eq!(
            chain(&mirrors, "build.example.test/team-a/app:1"),
            [
                ("mirror.internal.test/team-a/app:1".to_owned(), true),
                ("primary.internal.test/team-a/app:1".to_owned(), false),
            ]
        );
        assert_eq!(
            lookups(&mirrors, "build.example.test:5000/app:1"),
            [
                "mirror.internal.test:5000/app:1",
                "primary.internal.test:5000/app:1"
            ]
        );
    }

    #[test]
    fn a_rewrite_that_is_no_reference_is_left_out() {
        // a port kept from the name after a location's own port, or after its path
        let mirrors = Mirrors::new(vec![
            rule(
                "*.example.test",
                None,
                vec![
                    mirror("ported.internal.test:6000", PullFromMirror::All),
                    mirror("mirror.internal.test", PullFromMirror::All),
                ],
            ),
            rule(
                "*.moved.test",
                Some("primary.internal.test/moved"),
                vec![mirror("mirror.internal.test", PullFromMirror::All)],
            ),
        ])
        .expect("valid rules");
        assert_eq!(
            lookups(&mirrors, "build.example.test:5000/app:1"),
            [
                "mirror.internal.test:5000/app:1",
                "build.example.test:5000/app:1"
            ]
        );
        assert_eq!(
            lookups(&mirrors, "build.example.test/app:1"),
            [
                "ported.internal.test:6000/app:1",
                "mirror.internal.test/app:1",
                "build.example.test/app:1"
            ]
        );
        assert_eq!(
            chain(&mirrors, "build.moved.test:5000/app:1"),
            [("mirror.internal.test:5000/app:1".to_owned(), true)],
            "no primary is left"
        );
    }

    #[test]
    fn without_rules_an_image_has_its_primary_only() {
        for mirrors in [Mirrors::default(), Mirrors::new(vec![]).expect("no rules")] {
            assert!(mirrors.is_empty());
            assert_eq!(
                chain(&mirrors, "registry.example.test/team-a/app:1"),
                [("registry.example.test/team-a/app:1".to_owned(), false)]
            );
        }
        let mirrors = Mirrors::new(vec![mirrored("registry.example.test", "m.internal.test")])
            .expect("valid rules");
        assert!(!mirrors.is_empty());
    }

    #[test]
    fn well_formed_locations_are_accepted() {
        for location in [
            "registry.example.test",
            "registry.example.test:5000",
            "registry.example.test/team-a/sub",
            "localhost",
            "localhost:5000/team-a",
            "10.20.30.40:5000",
        ] {
            let rules = vec![rule(
                location,
                Some(location),
                vec![mirror(location, PullFromMirror::All)],
            )];
            assert!(Mirrors::new(rules).is_ok(), "{location}");
        }
        assert!(Mirrors::new(vec![rule("*.example.test", None, vec![])]).is_ok());
    }

    /// Where a refused text is written in a rule.
    #[derive(Debug, Clone, Copy)]
    enum At {
        Prefix,
        Location,
        Mirror,
    }

    /// The refusal's variant, by name.
    fn kind(problem: &LocationError) -> &'static str {
        match problem {
            LocationError::Empty => "Empty",
            LocationError::Scheme => "Scheme",
            LocationError::NotHostPath(_) => "NotHostPath",
            LocationError::WildcardOutsidePrefix => "WildcardOutsidePrefix",
            LocationError::WildcardWithPath(_) => "WildcardWithPath",
            LocationError::MisplacedWildcard(_) => "MisplacedWildcard",
            LocationError::NotQualified(_) => "NotQualified",
            LocationError::Invalid { .. } => "Invalid",
        }
    }

    /// Where a text is written, the text, and why it is refused.
    #[rustfmt::skip]
    const REFUSED: &[(At, &str, &str)] = &[
        (At::Prefix, "", "Empty"),
        (At::Location, "", "Empty"),
        (At::Prefix, "https://registry.example.test", "Scheme"),
        (At::Mirror, "http://mirror.internal.test", "Scheme"),
        // a trailing slash, a blank, a digest
        (At::Prefix, "registry.example.test/", "NotHostPath"),
        (At::Prefix, "registry .example.test", "NotHostPath"),
        (At::Mirror, "mirror.internal.test/\tcache", "NotHostPath"),
        (At::Prefix, "registry.example.test/app@sha256:5e5e", "NotHostPath"),
        // a tag, capitals in the path
        (At::Prefix, "registry.example.test/app:1", "Invalid"),
        (At::Mirror, "Mirror.internal.test/Team-A", "Invalid"),
        // a wildcard is `*.domain`, in a prefix only
        (At::Prefix, "*.", "WildcardWithPath"),
        (At::Prefix, "*.example.test:5000", "WildcardWithPath"),
        (At::Prefix, "*.example.test/team-a", "WildcardWithPath"),
        (At::Prefix, "**.example.test", "MisplacedWildcard"),
        (At::Prefix, "build*.example.test", "MisplacedWildcard"),
        (At::Prefix, "registry.*.test", "MisplacedWildcard"),
        (At::Location, "*.example.test", "WildcardOutsidePrefix"),
        (At::Mirror, "*.internal.test", "WildcardOutsidePrefix"),
        // a first component that is no host would be a Docker Hub name
        (At::Prefix, "team-a", "NotQualified"),
        (At::Location, "team-a/app", "NotQualified"),
        (At::Mirror, "mirror/cache", "NotQualified"),
    ];

    #[test]
    fn a_refused_rule_names_its_field_and_why() {
        for (at, text, why) in REFUSED {
            let (rule, field) = match at {
                At::Prefix => (rule(text, None, vec![]), "[0].prefix"),
                At::Location => (
                    rule("registry.example.test", Some(text), vec![]),
                    "[0].location",
                ),
                At::Mirror => (
                    mirrored("registry.example.test", text),
                    "[0].mirrors[0].location",
                ),
            };
            let error = Mirrors::new(vec![rule]).expect_err(text);
            assert_eq!(error.field(), field, "{at:?} {text:?}: {error}");
            assert_eq!(kind(&error.problem), *why, "{at:?} {text:?}: {error}");
        }
        // the index of the rule, and of the mirror within it
        let second = rule(
            "other.example.test",
            None,
            vec![
                mirror("mirror.internal.test", PullFromMirror::All),
                mirror("cache", PullFromMirror::All),
            ],
        );
        let error = Mirrors::new(vec![mirrored("registry.example.test", "m.test"), second])
            .expect_err("the second rule's second mirror");
        assert_eq!(error.field(), "[1].mirrors[1].location");
    }

    /// A careful reading that refuses every rule, naming a field.
    fn refuse(_: &str) -> Result<RegistryRule, (String, String)> {
        Err(("mirrors".to_owned(), "not a list of mirrors".to_owned()))
    }

    #[test]
    fn rules_read_from_text_are_parsed_when_an_image_first_matches_them() {
        let text = r#"[
            {"prefix": "registry.example.test", "mirrors": [{"location": "mirror.internal.test"}]},
            {"prefix": "other.example.test", "mirrors": "mirror.internal.test"}
        ]"#;
        let mirrors = Mirrors::from_text(text, refuse).expect("a list of rules");
        assert_eq!(
            lookups(&mirrors, "registry.example.test/app:1"),
            ["mirror.internal.test/app:1", "registry.example.test/app:1"]
        );
        assert_eq!(mirrors.problem(), None, "the second rule is not read yet");
        // the rule that does not read leaves the image its primary
        assert_eq!(
            lookups(&mirrors, "other.example.test/app:1"),
            ["other.example.test/app:1"]
        );
        let problem = (1, "mirrors".to_owned(), "not a list of mirrors".to_owned());
        assert_eq!(mirrors.problem(), Some(&problem));
        for not_rules in [
            r#"{"prefix": "a.test"}"#,
            r#"[{"location": "a.test"}]"#,
            "[1]",
            "[] x",
        ] {
            assert!(
                Mirrors::from_text(not_rules, refuse).is_none(),
                "{not_rules}"
            );
        }
    }

    /// `rule` with `blocked: true`.
    fn blocked(prefix: &str, location: Option<&str>, mirrors: Vec<Mirror>) -> RegistryRule {
        RegistryRule {
            blocked: true,
            ..rule(prefix, location, mirrors)
        }
    }

    /// The chain of `image`: what is asked, and what is refused with the refusing rule.
    fn asked_and_refused(mirrors: &Mirrors, image: &str) -> (Vec<String>, Vec<(String, usize)>) {
        let chain = mirrors.chain(&ImageReference::parse(image).expect(image));
        (
            chain
                .locations
                .iter()
                .map(|l| l.reference.lookup_reference())
                .collect(),
            chain
                .refused
                .iter()
                .map(|r| (r.location.reference.lookup_reference(), r.rule))
                .collect(),
        )
    }

    /// The refusal of `image`'s chain, if the nodes refuse every location.
    fn refusal(mirrors: &Mirrors, image: &str) -> Option<String> {
        mirrors
            .chain(&ImageReference::parse(image).expect(image))
            .refusal()
    }

    #[test]
    fn a_blocked_rule_leaves_out_its_primary_and_keeps_its_mirrors() {
        let mirrors = Mirrors::new(vec![blocked(
            "registry.example.test/team-a",
            None,
            vec![
                mirror("mirror.internal.test/team-a", PullFromMirror::All),
                mirror("backup.internal.test:5000/team-a", PullFromMirror::All),
            ],
        )])
        .expect("valid rules");
        let image = "registry.example.test/team-a/app:2";
        assert_eq!(
            chain(&mirrors, image),
            [
                ("mirror.internal.test/team-a/app:2".to_owned(), true),
                ("backup.internal.test:5000/team-a/app:2".to_owned(), true),
            ]
        );
        let (_, refused) = asked_and_refused(&mirrors, image);
        assert_eq!(refused, [(image.to_owned(), 0)]);
        assert_eq!(refusal(&mirrors, image), None, "mirrors are left to ask");
        // outside the prefix nothing is refused
        assert_eq!(
            chain(&mirrors, "registry.example.test/team-b/app:2"),
            [("registry.example.test/team-b/app:2".to_owned(), false)]
        );
    }

    #[test]
    fn a_blocked_rule_without_mirrors_leaves_nothing_and_names_its_setting() {
        let mirrors = Mirrors::new(vec![
            mirrored("other.example.test", "mirror.internal.test"),
            blocked("registry.example.test", None, vec![]),
        ])
        .expect("valid rules");
        for image in [
            "registry.example.test/app:1".to_owned(),
            format!("registry.example.test/team-a/app@{DIGEST}"),
            "registry.example.test:5000/app".to_owned(),
        ] {
            assert_eq!(chain(&mirrors, &image), [], "{image}");
            assert_eq!(
                refusal(&mirrors, &image).as_deref(),
                Some("nodes refuse pulls from registry.example.test (registries[1].blocked), with no mirror: no location is left to pull from"),
                "{image}"
            );
        }
    }

    #[test]
    fn mirrors_serving_only_the_other_kind_of_reference_leave_nothing() {
        use PullFromMirror::{DigestOnly, TagOnly};
        let by_digest = format!("registry.example.test/app@{DIGEST}");
        // (the mirror's kind, the reference it does not serve, the words for it)
        for (kind, unserved, served, words) in [
            (
                DigestOnly,
                "registry.example.test/app:1",
                by_digest.as_str(),
                "digest",
            ),
            (
                TagOnly,
                by_digest.as_str(),
                "registry.example.test/app:1",
                "tag",
            ),
        ] {
            let mirrors = Mirrors::new(vec![blocked(
                "registry.example.test",
                None,
                vec![
                    mirror("mirror.internal.test", kind),
                    mirror("backup.internal.test", kind),
                ],
            )])
            .expect("valid rules");
            assert_eq!(chain(&mirrors, unserved), [], "{kind:?}");
            let why = refusal(&mirrors, unserved).expect("refused");
            assert!(
                why.contains(&format!(
                    "registries[0].blocked), and 2 mirror(s) of the rule serve only pulls by {words} (pullFromMirror)"
                )),
                "{kind:?}: {why}"
            );
            assert_eq!(chain(&mirrors, served).len(), 2, "{kind:?}");
            assert!(chain(&mirrors, served).iter().all(|(_, m)| *m), "{kind:?}");
        }
    }

    #[test]
    fn a_longer_rule_that_is_not_blocked_lets_its_names_through() {
        let mirrors = Mirrors::new(vec![
            blocked("registry.example.test", None, vec![]),
            mirrored(
                "registry.example.test/team-a",
                "mirror.internal.test/team-a",
            ),
            blocked("registry.example.test/team-a/secret", None, vec![]),
        ])
        .expect("valid rules");
        // the longer rule decides, blocked or not, in either direction
        assert_eq!(
            lookups(&mirrors, "registry.example.test/team-a/app:1"),
            [
                "mirror.internal.test/team-a/app:1",
                "registry.example.test/team-a/app:1"
            ]
        );
        assert_eq!(
            lookups(&mirrors, "registry.example.test/team-b/app:1"),
            [] as [&str; 0]
        );
        let (asked, refused) =
            asked_and_refused(&mirrors, "registry.example.test/team-a/secret/app:1");
        assert_eq!(asked, [] as [&str; 0]);
        assert_eq!(
            refused,
            [("registry.example.test/team-a/secret/app:1".to_owned(), 2)]
        );
    }

    #[test]
    fn each_location_is_refused_by_the_rule_that_matches_its_own_name() {
        let mirrors = Mirrors::new(vec![
            rule(
                "registry.example.test",
                None,
                vec![
                    mirror("quarantine.internal.test/cache", PullFromMirror::All),
                    mirror("mirror.internal.test", PullFromMirror::All),
                ],
            ),
            blocked("quarantine.internal.test", None, vec![]),
            // moved: the moved location is looked up, not the prefix
            blocked(
                "legacy.example.test",
                Some("registry.internal.test/legacy"),
                vec![],
            ),
            blocked(
                "old.example.test",
                Some("quarantine.internal.test/old"),
                vec![],
            ),
            blocked(
                "*.blocked.test",
                None,
                vec![mirror("mirror.internal.test", PullFromMirror::All)],
            ),
        ])
        .expect("valid rules");
        let (asked, refused) = asked_and_refused(&mirrors, "registry.example.test/app:1");
        assert_eq!(
            asked,
            ["mirror.internal.test/app:1", "registry.example.test/app:1"]
        );
        assert_eq!(
            refused,
            [("quarantine.internal.test/cache/app:1".to_owned(), 1)]
        );
        // a blocked rule whose location lies outside every blocked prefix: containers/image
        // looks the moved primary up under its own name, which no blocked rule matches
        assert_eq!(
            lookups(&mirrors, "legacy.example.test/app:1"),
            ["registry.internal.test/legacy/app:1"]
        );
        let (asked, refused) = asked_and_refused(&mirrors, "old.example.test/app:1");
        assert_eq!(asked, [] as [&str; 0]);
        assert_eq!(
            refused,
            [("quarantine.internal.test/old/app:1".to_owned(), 1)]
        );
        assert_eq!(
            refusal(&mirrors, "old.example.test/app:1").as_deref(),
            Some("nodes refuse pulls from quarantine.internal.test (registries[1].blocked), with no mirror: no location is left to pull from")
        );
        // a wildcard blocks every subdomain's primary
        assert_eq!(
            chain(&mirrors, "build.blocked.test/app:1"),
            [("mirror.internal.test/app:1".to_owned(), true)]
        );
    }

    #[test]
    fn blocked_reads_as_a_boolean_and_defaults_to_false() {
        let read = |text: &str| serde_json::from_str::<RegistryRule>(text);
        assert!(!read(r#"{"prefix": "a.test"}"#).expect("no blocked").blocked);
        assert!(
            read(r#"{"prefix": "a.test", "blocked": true}"#)
                .expect("bool")
                .blocked
        );
        for not_bool in [r#""true""#, "1", "null", "[]"] {
            let text = format!(r#"{{"prefix": "a.test", "blocked": {not_bool}}}"#);
            assert!(read(&text).is_err(), "{text}");
        }
    }
}
