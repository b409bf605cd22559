//! Which namespaces a provider serves (`--provider-namespaces NAME=SELECTOR`). A plugin without
//! `tokenAttributes` runs with the broker's own cloud identity, the same for every namespace,
//! so it would tell any opted-in team whether the images that identity can read exist: such a
//! provider serves only the namespaces whose labels its selector matches, and none when it is
//! not named. A provider with `tokenAttributes` runs with the pod's own ServiceAccount token,
//! so it serves every opted-in namespace unless named. The kubelet's file is not extended:
//! users paste the node's file as it is.
//!
//! A selector is Kubernetes' label selector syntax: `key=value`, `key!=value`, `key`, `!key`,
//! `key in (a,b)`, `key notin (a,b)`, joined by commas; a list of namespaces is
//! `kubernetes.io/metadata.name in (team-a,team-b)` (the API server sets that label); an empty
//! selector serves every opted-in namespace.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::core::{Expression, Selector, SelectorExt};

/// Why `--provider-namespaces` cannot be used; the broker does not start with it.
#[derive(Debug, thiserror::Error)]
pub enum ServedError {
    /// An entry is not `NAME=SELECTOR`, or its selector does not parse.
    #[error("--provider-namespaces {entry:?}: {problem}")]
    Syntax {
        /// The entry.
        entry: String,
        /// What is wrong with it.
        problem: SelectorProblem,
    },
    /// An entry names a provider the config does not have (a typo would serve no one).
    #[error("--provider-namespaces names {0:?}, which is not a provider of the config")]
    UnknownProvider(String),
    /// A provider is named twice.
    #[error("--provider-namespaces names {0:?} twice")]
    Twice(String),
}

/// What is wrong with one `--provider-namespaces` entry's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorProblem {
    /// No `=` between the provider and its selector.
    #[error("not NAME=SELECTOR")]
    NotNameEqualsSelector,
    /// A `)` before its `(`.
    #[error("a ')' without its '('")]
    UnopenedParenthesis,
    /// A `(` never closed.
    #[error("a '(' without its ')'")]
    UnclosedParenthesis,
    /// A key or value with characters a label cannot have.
    #[error("{0:?} is not a label key or value")]
    NotALabelWord(String),
    /// An `in`/`notin` term without its parentheses.
    #[error("{0:?}: the values go in parentheses")]
    NoParentheses(String),
}

/// What decides whether a provider serves a namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum Rule<'a> {
    /// Every namespace (a provider with `tokenAttributes`, not named).
    Every,
    /// None (a provider without `tokenAttributes`, not named).
    None,
    /// The namespaces whose labels this selector matches.
    Matching(&'a Selector),
}

impl Rule<'_> {
    /// Whether a namespace with `labels` is served.
    pub fn serves(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Rule::Every => true,
            Rule::None => false,
            Rule::Matching(selector) => selector.matches(labels),
        }
    }
}

/// The selectors of the providers named.
#[derive(Debug, Default)]
pub struct Served {
    selectors: HashMap<String, Selector>,
}

impl Served {
    /// The `NAME=SELECTOR` entries, each naming one of `providers`.
    pub fn parse<'a>(
        entries: &[String],
        providers: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, ServedError> {
        let known: BTreeSet<&str> = providers.into_iter().collect();
        let mut selectors = HashMap::new();
        for entry in entries {
            let syntax = |problem| ServedError::Syntax {
                entry: entry.clone(),
                problem,
            };
            let (name, selector) = entry
                .split_once('=')
                .ok_or_else(|| syntax(SelectorProblem::NotNameEqualsSelector))?;
            let name = name.trim();
            if !known.contains(name) {
                return Err(ServedError::UnknownProvider(name.to_owned()));
            }
            let selector = parse_selector(selector).map_err(syntax)?;
            if selectors.insert(name.to_owned(), selector).is_some() {
                return Err(ServedError::Twice(name.to_owned()));
            }
        }
        Ok(Served { selectors })
    }

    /// The rule of provider `name`, which has `tokenAttributes` when `token`.
    pub fn rule(&self, name: &str, token: bool) -> Rule<'_> {
        match self.selectors.get(name) {
            // no labels to read
            Some(selector) if selector.selects_all() => Rule::Every,
            Some(selector) => Rule::Matching(selector),
            None if token => Rule::Every,
            None => Rule::None,
        }
    }
}

/// A label selector's text: terms joined by commas outside parentheses.
fn parse_selector(text: &str) -> Result<Selector, SelectorProblem> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or(SelectorProblem::UnopenedParenthesis)?;
            }
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorProblem::UnclosedParenthesis);
    }
    terms.push(&text[start..]);
    if terms.len() == 1 && terms[0].trim().is_empty() {
        return Ok(Selector::default());
    }
    let expressions = terms
        .into_iter()
        .map(parse_term)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(expressions.into_iter().collect())
}

fn parse_term(term: &str) -> Result<Expression, SelectorProblem> {
    let term = term.trim();
    let word = |text: &str| -> Result<String, SelectorProblem> {
        let text = text.trim();
        let valid = !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        valid
            .then(|| text.to_owned())
            .ok_or_else(|| SelectorProblem::NotALabelWord(text.to_owned()))
    };
    let set = |rest: &str| -> Result<BTreeSet<String>, SelectorProblem> {
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| SelectorProblem::NoParentheses(term.to_owned()))?;
        inner.split(',').map(word).collect()
    };
    if let Some(key) = term.strip_prefix('!') {
        return Ok(Expression::DoesNotExist(word(key)?));
    }
    if let Some((key, value)) = term.split_once("!=") {
        return Ok(Expression::NotEqual(word(key)?, word(value)?));
    }
    if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Expression::Equal(word(key)?, word(value)?));
    }
    if let Some((key, rest)) = term.split_once(" notin ") {
        return Ok(Expression::NotIn(word(key)?, set(rest)?));
    }
    if let Some((key, rest)) = term.split_once(" in ") {
        return Ok(Expression::In(word(key)?, set(rest)?));
    }
    Ok(Expression::Exists(word(term)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn served(entries: &[&str]) -> Result<Served, ServedError> {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        Served::parse(&entries, ["ecr", "gcr", "tokens"])
    }

    #[test]
    fn a_provider_serves_the_namespaces_its_selector_matches() {
        let s = served(&[
            "ecr=kubernetes.io/metadata.name in (team-a, team-b)",
            "gcr=team=blue,tier!=test,!legacy",
        ])
        .expect("valid");
        let ecr = s.rule("ecr", false);
        assert!(ecr.serves(&labels(&[("kubernetes.io/metadata.name", "team-a")])));
        assert!(!ecr.serves(&labels(&[("kubernetes.io/metadata.name", "team-c")])));
        assert!(!ecr.serves(&labels(&[])));
        let gcr = s.rule("gcr", false);
        assert!(gcr.serves(&labels(&[("team", "blue")])));
        assert!(!gcr.serves(&labels(&[("team", "blue"), ("tier", "test")])));
        assert!(!gcr.serves(&labels(&[("team", "blue"), ("legacy", "")])));
        assert!(!gcr.serves(&labels(&[("team", "red")])));
    }

    #[test]
    fn unnamed_providers_serve_none_unless_they_use_the_pods_token() {
        let s = served(&["tokens=team=blue"]).expect("valid");
        assert_eq!(s.rule("ecr", false), Rule::None);
        assert!(!s.rule("ecr", false).serves(&labels(&[("team", "blue")])));
        assert_eq!(s.rule("gcr", true), Rule::Every);
        // a token provider named is limited like any other
        assert!(!s.rule("tokens", true).serves(&labels(&[("team", "red")])));
        let every = served(&["ecr="]).expect("valid");
        assert!(every.rule("ecr", false).serves(&labels(&[])));
    }

    #[test]
    fn a_bad_entry_is_refused_naming_it() {
        for (entry, problem) in [
            ("ecr", "not NAME=SELECTOR"),
            ("ecr=team in blue", "parentheses"),
            ("ecr=team in (blue", "without its ')'"),
            ("ecr=team=blue)", "without its '('"),
            ("ecr=team=bl ue", "not a label key or value"),
            ("ecr=,", "not a label key or value"),
        ] {
            let error = served(&[entry]).expect_err(entry).to_string();
            assert!(error.contains(problem), "{entry}: {error}");
        }
        assert!(matches!(
            served(&["ecr=team in (blue"]),
            Err(ServedError::Syntax {
                problem: SelectorProblem::UnclosedParenthesis,
                ..
            })
        ));
        assert!(matches!(
            served(&["ecrr=team=blue"]),
            Err(ServedError::UnknownProvider(name)) if name == "ecrr"
        ));
        assert!(matches!(
            served(&["ecr=a", "ecr=b"]),
            Err(ServedError::Twice(_))
        ));
    }
}
