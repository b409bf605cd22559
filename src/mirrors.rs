//! Registry mirrors: the chain of locations a node tries for an image, configured in the shape
//! of containers-registries.conf(5) so operators can copy what their nodes use.
//!
//! A rule matches the normalised name (`registry/repository`) by its `prefix` (longest literal
//! prefix wins, then the longest `*.domain` wildcard); its mirrors are tried in order, then the
//! primary location (the prefix, or its `location` rewrite). The image is resolvable when any
//! location has it, and absent only when every location says so.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::fmt;

use serde::Deserialize;

use crate::field_error::FieldError;
use crate::reference::{ImageReference, ReferenceError};
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
}

/// One place a node may pull an image from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The image as that location serves it.
    pub reference: ImageReference,
    /// True for a mirror, false for the primary location.
    pub is_mirror: bool,
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

    /// The locations a node tries for `reference`, in order; the primary location is last.
    /// Locations that do not form a valid reference once rewritten are left out.
    pub fn locations(&self, reference: &ImageReference) -> Vec<Location> {
        let primary_only = || {
            vec![Location {
                reference: reference.clone(),
                is_mirror: false,
            }]
        };
        if self.rules.is_empty() {
            // the usual case: no name to build and match
            return primary_only();
        }
        let name = reference.name();
        let Some((rule, matched)) = self.find(&name).and_then(|(index, matched)| {
            let rule = self.rule(index)?;
            Some((rule, matched))
        }) else {
            return primary_only();
        };
        let rest = name.get(matched..).unwrap_or_default();
        let suffix = match reference.digest() {
            Some(digest) => format!("@{digest}"),
            None => format!(":{}", reference.tag().unwrap_or("latest")),
        };
        let rewrite =
            |location: &str| ImageReference::parse(&format!("{location}{rest}{suffix}")).ok();
        let mut locations: Vec<Location> = rule
            .mirrors
            .iter()
            .filter(|mirror| match mirror.pull_from_mirror {
                PullFromMirror::All => true,
                PullFromMirror::DigestOnly => reference.digest().is_some(),
                PullFromMirror::TagOnly => reference.digest().is_none(),
            })
            .filter_map(|mirror| rewrite(&mirror.location))
            .map(|reference| Location {
                reference,
                is_mirror: true,
            })
            .collect();
        let primary = match &rule.location {
            Some(location) => rewrite(location),
            None => Some(reference.clone()),
        };
        locations.extend(primary.map(|reference| Location {
            reference,
            is_mirror: false,
        }));
        locations
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

/// Where `prefix` stops matching `name` (`registry/repository`), if it does, exactly as
/// sysregistriesv2's `refMatchingPrefix` and `refMatchingSubdomainPrefix`: a literal prefix is
/// followed by the end, `/`, `@` or `:` (so `example.com` also matches `example.com:5000`,
/// which containers/image calls unintended but does); `*.domain` matches the first `.domain`
/// before any `/` that is followed by the end, `/`, `@` or `:`.
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

    const SHA: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";

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
        }
    }

    fn chain(mirrors: &Mirrors, image: &str) -> Vec<(String, bool)> {
        mirrors
            .locations(&ImageReference::parse(image).unwrap())
            .into_iter()
            .map(|l| (l.reference.lookup_reference(), l.is_mirror))
            .collect()
    }

    #[test]
    fn mirrors_come_first_then_the_primary() {
        let mirrors = Mirrors::new(vec![rule(
            "docker.io",
            None,
            vec![
                mirror("mirror.local:5000/hub", PullFromMirror::All),
                mirror("cache.local", PullFromMirror::All),
            ],
        )])
        .unwrap();
        assert_eq!(
            chain(&mirrors, "nginx:1.25"),
            [
                ("mirror.local:5000/hub/library/nginx:1.25".to_owned(), true),
                ("cache.local/library/nginx:1.25".to_owned(), true),
                ("docker.io/library/nginx:1.25".to_owned(), false),
            ]
        );
        assert_eq!(
            chain(&mirrors, "quay.io/a/b:1"),
            [("quay.io/a/b:1".to_owned(), false)]
        );
    }

    #[test]
    fn the_longest_prefix_wins_and_prefixes_match_whole_components() {
        let mirrors = Mirrors::new(vec![
            rule(
                "registry.example.com",
                None,
                vec![mirror("m1.local", PullFromMirror::All)],
            ),
            rule(
                "registry.example.com/team",
                None,
                vec![mirror("m2.local/t", PullFromMirror::All)],
            ),
        ])
        .unwrap();
        assert_eq!(
            chain(&mirrors, "registry.example.com/team/app:1")[0].0,
            "m2.local/t/app:1"
        );
        assert_eq!(
            chain(&mirrors, "registry.example.com/teams/app:1")[0].0,
            "m1.local/teams/app:1"
        );
        assert_eq!(chain(&mirrors, "registry.example.com.evil/app:1").len(), 1);
    }

    #[test]
    fn location_rewrites_the_primary() {
        let mirrors = Mirrors::new(vec![rule(
            "example.com/foo",
            Some("internal.local:5000/bar"),
            vec![],
        )])
        .unwrap();
        assert_eq!(
            chain(&mirrors, "example.com/foo/app:2"),
            [("internal.local:5000/bar/app:2".to_owned(), false)]
        );
    }

    #[test]
    fn wildcards_match_subdomains_only_and_lose_to_literals() {
        let mirrors = Mirrors::new(vec![
            rule(
                "*.example.com",
                None,
                vec![mirror("wild.local", PullFromMirror::All)],
            ),
            rule(
                "exact.example.com",
                None,
                vec![mirror("exact.local", PullFromMirror::All)],
            ),
        ])
        .unwrap();
        assert_eq!(chain(&mirrors, "a.example.com/x:1")[0].0, "wild.local/x:1");
        // The port stays with the rest of the name, as containers/image rewrites it.
        assert_eq!(
            chain(&mirrors, "a.b.example.com:5000/x:1")[0].0,
            "wild.local:5000/x:1"
        );
        assert_eq!(
            chain(&mirrors, "exact.example.com/x:1")[0].0,
            "exact.local/x:1"
        );
        assert_eq!(chain(&mirrors, "example.com/x:1").len(), 1);
    }

    #[test]
    fn pull_from_mirror_selects_tags_or_digests() {
        let mirrors = Mirrors::new(vec![rule(
            "docker.io",
            None,
            vec![
                mirror("digests.local", PullFromMirror::DigestOnly),
                mirror("tags.local", PullFromMirror::TagOnly),
            ],
        )])
        .unwrap();
        let by_tag: Vec<_> = chain(&mirrors, "nginx:1")
            .into_iter()
            .map(|l| l.0)
            .collect();
        assert_eq!(
            by_tag,
            ["tags.local/library/nginx:1", "docker.io/library/nginx:1"]
        );
        let by_digest: Vec<_> = chain(&mirrors, &format!("nginx@{SHA}"))
            .into_iter()
            .map(|l| l.0)
            .collect();
        assert_eq!(
            by_digest,
            [
                format!("digests.local/library/nginx@{SHA}"),
                format!("docker.io/library/nginx@{SHA}")
            ]
        );
    }

    #[test]
    fn invalid_rules_name_their_field() {
        let cases = [
            (rule("", None, vec![]), "[0].prefix"),
            (rule("https://docker.io", None, vec![]), "[0].prefix"),
            (rule("docker.io", Some("registry"), vec![]), "[0].location"),
            (
                rule(
                    "docker.io",
                    None,
                    vec![mirror("mirror/hub", PullFromMirror::All)],
                ),
                "[0].mirrors[0].location",
            ),
            (rule("*.example.com:5000", None, vec![]), "[0].prefix"),
            (
                rule(
                    "docker.io",
                    None,
                    vec![mirror("*.local", PullFromMirror::All)],
                ),
                "[0].mirrors[0].location",
            ),
            (
                rule(
                    "docker.io",
                    None,
                    vec![mirror("Mirror.local/UPPER", PullFromMirror::All)],
                ),
                "[0].mirrors[0].location",
            ),
            (rule("a*.example.com", None, vec![]), "[0].prefix"),
        ];
        for (rule, field) in cases {
            let error = Mirrors::new(vec![rule.clone()]).expect_err(&rule.prefix);
            assert_eq!(error.field(), field, "{rule:?}: {error}");
        }
    }

    const WITH_DIGEST: &str = "yet.another.example.com/foo/bar@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const WITH_DIGEST_SUB: &str = "yet.another.sub.example.com/foo/bar@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

    /// containers/image `pkg/sysregistriesv2/system_registries_v2_test.go`:
    /// `TestRefMatchingSubdomainPrefix` and `TestRefMatchingPrefix` (`None` for -1): a name,
    /// a prefix, and where the match ends.
    #[rustfmt::skip]
    const PREFIX_CASES: &[(&str, &str, Option<usize>)] = &[
        ("docker.io", "*.io", Some(9)),
        ("docker.io/foo", "*.com", None),
        ("example.com/foo", "*.co", None),
        ("example.com/foo", "*.example.com", None),
        ("example.com/foo", "*.com", Some(11)),
        ("example.com/foo:bar", "*.com", Some(11)),
        ("example.com/foo/bar:baz", "*.com", Some(11)),
        ("yet.another.example.com/foo", "**.example.com", None),
        ("yet.another.example.com/foo/bar", "*.another.example.com", Some(23)),
        ("another.example.com/namespace.com/foo/bar/bbq:baz", "*.example.com", Some(19)),
        ("example.net/namespace-ends-in.com/foo/bar/bbq:baz", "*.com", None),
        ("another.example.com/namespace.com/foo/bar/bbq:baz", "*.namespace.com", None),
        ("sub.example.com/foo/bar", "*.com", Some(15)),
        ("another.sub.example.com/foo/bar/bbq:baz", "*.sub.example.com", Some(23)),
        (WITH_DIGEST, "*.example.com", Some(23)),
        (WITH_DIGEST_SUB, "*.sub.example.com", Some(27)),
        ("docker.io", "docker.io", Some(9)),
        ("docker.io", "example.com", None),
        ("example.com:5000", "example.com:5000", Some(16)),
        ("example.com:50000", "example.com:5000", None),
        ("example.com:5000", "example.com", Some(11)),
        ("example.com/foo/bar", "example.com", Some(11)),
        ("docker.io", "docker.io/library", None),
        ("docker.io/libraryy", "docker.io/library", None),
        ("docker.io/library/busybox", "docker.io/library", Some(17)),
        ("docker.io/library/busybox2", "docker.io/library/busybox", None),
        ("example.com/foo", "*", None),
    ];

    #[test]
    fn prefixes_match_as_sysregistriesv2_matches_them() {
        for (name, prefix, expected) in PREFIX_CASES {
            assert_eq!(prefix_match(name, prefix), *expected, "{name} vs. {prefix}");
        }
    }

    /// containers/image `TestFindRegistry`: the longest prefix wins, wildcard or not, and a
    /// longer literal prefix beats a shorter wildcard (`foo.bar.example.com:5000` over
    /// `*.example.com`), a longer wildcard a shorter one (`*.bar.docker.io` over `*.docker.io`).
    #[test]
    fn the_longest_prefix_wins_whether_literal_or_wildcard() {
        let mirrors = Mirrors::new(vec![
            rule(
                "*.docker.io",
                None,
                vec![mirror("m4.local", PullFromMirror::All)],
            ),
            rule(
                "*.bar.docker.io",
                None,
                vec![mirror("m4b.local", PullFromMirror::All)],
            ),
            rule(
                "*.example.com",
                None,
                vec![mirror("m5.local", PullFromMirror::All)],
            ),
            rule(
                "foo.bar.example.com:5000",
                None,
                vec![mirror("m5b.local", PullFromMirror::All)],
            ),
            rule(
                "a.example.org",
                None,
                vec![mirror("literal.local", PullFromMirror::All)],
            ),
            rule(
                "*.example.org",
                None,
                vec![mirror("wild.local", PullFromMirror::All)],
            ),
        ])
        .unwrap();
        assert_eq!(
            chain(&mirrors, "foo.bar.docker.io:5000/omg/wtf:foo")[0].0,
            "m4b.local:5000/omg/wtf:foo"
        );
        assert_eq!(
            chain(&mirrors, "foo.docker.io/omg:foo")[0].0,
            "m4.local/omg:foo"
        );
        assert_eq!(
            chain(&mirrors, "foo.bar.example.com:5000/omg:foo")[0].0,
            "m5b.local/omg:foo"
        );
        assert_eq!(
            chain(&mirrors, "foo.bar.example.com:6000/omg:foo")[0].0,
            "m5.local:6000/omg:foo"
        );
        // Same length: the first in sorted order, and `*` sorts before letters.
        assert_eq!(chain(&mirrors, "a.example.org/x:1")[0].0, "wild.local/x:1");
    }

    #[test]
    fn a_wildcard_prefix_may_be_rewritten_keeping_the_port() {
        let mirrors = Mirrors::new(vec![rule("*.example.com", Some("m.local"), vec![])]).unwrap();
        assert_eq!(
            chain(&mirrors, "a.example.com:5000/x:1"),
            [("m.local:5000/x:1".to_owned(), false)]
        );
    }
}
