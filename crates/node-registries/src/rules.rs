//! The policy's `registries` rules as the translator writes them, and the refusal of what
//! they cannot say.

use std::fmt;

use serde::Serialize;

/// Which references a mirror serves (`pullFromMirror`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PullFromMirror {
    /// Tags and digests.
    #[default]
    All,
    /// References by digest only.
    DigestOnly,
    /// References by tag only.
    TagOnly,
}

/// One mirror of a rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mirror {
    /// `host[:port][/path]`.
    pub location: String,
    /// The node talks plain HTTP or skips TLS verification (informational for the policy).
    #[serde(skip_serializing_if = "is_false")]
    pub insecure: bool,
    /// Which references it serves; `all` is left out.
    #[serde(skip_serializing_if = "is_all")]
    pub pull_from_mirror: PullFromMirror,
}

/// One rule of the `registries` setting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// The names the rule covers: `host[:port][/path]` or `*.domain`.
    pub prefix: String,
    /// Where the primary location is, when it is not the prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The node never contacts the primary location: only the mirrors serve.
    #[serde(skip_serializing_if = "is_false")]
    pub blocked: bool,
    /// Tried in order before the primary location.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<Mirror>,
}

fn is_false(value: &bool) -> bool {
    !value
}

fn is_all(value: &PullFromMirror) -> bool {
    *value == PullFromMirror::All
}

/// The rules read from a node's files, and what the reader wants the operator to know about
/// what it left out (transport settings the policy does not use, ignored duplicates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Translation {
    /// The rules, sorted by prefix.
    pub rules: Vec<Rule>,
    /// One line each, naming the file and line.
    pub notes: Vec<String>,
}

/// The document an operator pastes into the policy's settings.
#[derive(Serialize)]
struct Settings<'a> {
    registries: &'a [Rule],
}

impl Translation {
    /// The `registries` setting as YAML.
    pub fn to_yaml(&self) -> Result<String, serde_yaml::Error> {
        serde_yaml::to_string(&Settings {
            registries: &self.rules,
        })
    }

    /// Sorts the rules by prefix: the policy chooses among rules by their prefixes, never by
    /// their order, so a stable order only makes outputs comparable.
    pub fn sorted(mut self) -> Self {
        self.rules.sort_by(|a, b| a.prefix.cmp(&b.prefix));
        self
    }
}

/// Where in a file a refusal points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Where {
    /// The whole file (or directory).
    File,
    /// A line, from 1.
    Line(usize),
    /// A field of a YAML document: `document 2: spec.imageDigestMirrors[0].mirrors`.
    Field(String),
}

/// What a translation cannot write exactly, and where it is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{at}: {problem}")]
pub struct Refusal {
    /// The file, as given.
    pub file: String,
    /// Where in it.
    pub at: Where,
    /// What the policy cannot say, and why.
    pub problem: String,
}

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Where::File => Ok(()),
            Where::Line(line) => write!(f, ":{line}"),
            Where::Field(field) => write!(f, " ({field})"),
        }
    }
}

impl Refusal {
    /// A refusal at byte `offset` of `text`.
    pub fn at_offset(file: &str, text: &str, offset: usize, problem: impl Into<String>) -> Self {
        Refusal {
            file: file.to_owned(),
            at: Where::Line(line_of(text, offset)),
            problem: problem.into(),
        }
    }
}

/// The line (from 1) of byte `offset` of `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
