//! `registries.conf` (v2) as containers/image's `sysregistriesv2` reads it for CRI-O and
//! Podman: `[[registry]]` with `prefix`, `location`, `blocked`, `mirror-by-digest-only` and
//! `[[registry.mirror]]`. Several files (the main file, then `registries.conf.d` drop-ins in
//! order) merge as the node merges them: a later file's entry replaces an earlier one of the
//! same prefix, and within a file the first entry of a prefix wins.
//!
//! The entries are the policy's rules as written: the policy applies `blocked` as
//! containers/image does (`newDockerClient` in docker/docker_client.go looks each location of
//! the chain up again, and refuses it when a blocked entry is its longest match), so the
//! primary of a blocked prefix is never contacted, and neither is a mirror a blocked entry
//! covers.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::rules::{line_of, Mirror, PullFromMirror, Refusal, Rule, Translation, Where};

/// One file.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct File {
    #[serde(default)]
    registry: Vec<Spanned<Entry>>,
    // Read by the node for other purposes than the mirror chains.
    #[serde(default)]
    unqualified_search_registries: Option<toml::Value>,
    #[serde(default)]
    short_name_mode: Option<toml::Value>,
    #[serde(default)]
    credential_helpers: Option<toml::Value>,
    #[serde(default)]
    aliases: Option<toml::Value>,
}

/// One `[[registry]]`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct Entry {
    #[serde(default)]
    prefix: String,
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    blocked: bool,
    #[serde(default)]
    mirror_by_digest_only: bool,
    #[serde(default)]
    pull_from_mirror: String,
    #[serde(default)]
    mirror: Vec<Spanned<Endpoint>>,
}

/// One `[[registry.mirror]]`.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct Endpoint {
    #[serde(default)]
    location: String,
    #[serde(default)]
    insecure: bool,
    #[serde(default)]
    pull_from_mirror: String,
}

/// The rules of `files`, each `(name, text)`, merged in order.
pub fn translate(files: &[(String, String)]) -> Result<Translation, Refusal> {
    let mut merged: BTreeMap<String, Rule> = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, text) in files {
        for rule in read_file(name, text, &mut notes)? {
            merged.insert(rule.prefix.clone(), rule);
        }
    }
    let rules = merged.into_values().collect();
    Ok(Translation { rules, notes }.sorted())
}

/// The rules of one file, the first of each prefix.
fn read_file(name: &str, text: &str, notes: &mut Vec<String>) -> Result<Vec<Rule>, Refusal> {
    let file: File = toml::from_str(text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        Refusal::at_offset(name, text, offset, e.message().to_owned())
    })?;
    let other_settings = [
        (
            "unqualified-search-registries",
            file.unqualified_search_registries.is_some(),
        ),
        ("short-name-mode", file.short_name_mode.is_some()),
        ("aliases", file.aliases.is_some()),
        ("credential-helpers", file.credential_helpers.is_some()),
    ];
    for (key, _) in other_settings.iter().filter(|(_, written)| *written) {
        notes.push(format!(
            "{name}: `{key}` is not part of `registries` (short names: docs/short-names.md)"
        ));
    }
    let mut rules: Vec<Rule> = Vec::new();
    for entry in &file.registry {
        let line = line_of(text, entry.span().start);
        let rule = entry_rule(name, text, entry.get_ref(), line)?;
        if entry.get_ref().insecure {
            notes.push(format!(
                "{name}:{line}: `insecure` is the node's transport; the policy's lookups use the policy server's"
            ));
        }
        if rules.iter().any(|r| r.prefix == rule.prefix) {
            notes.push(format!(
                "{name}:{line}: a second entry for {:?}, which the node ignores",
                rule.prefix
            ));
            continue;
        }
        rules.push(rule);
    }
    Ok(rules)
}

/// One entry as a rule, checked as `postProcessRegistries` checks it.
fn entry_rule(name: &str, text: &str, entry: &Entry, line: usize) -> Result<Rule, Refusal> {
    let refuse = |line: usize, problem: String| Refusal {
        file: name.to_owned(),
        at: Where::Line(line),
        problem,
    };
    let location = trimmed(&entry.location).map_err(|p| refuse(line, p.to_string()))?;
    let prefix = match trimmed(&entry.prefix).map_err(|p| refuse(line, p.to_string()))? {
        prefix if prefix.is_empty() => location.clone(),
        prefix => prefix,
    };
    if prefix.is_empty() {
        return Err(refuse(
            line,
            "neither `prefix` nor `location` is set: the node refuses the file".into(),
        ));
    }
    if location.is_empty() && !prefix.starts_with("*.") {
        return Err(refuse(
            line,
            "`location` is unset and `prefix` is not *.domain: the node refuses the file".into(),
        ));
    }
    if !entry.pull_from_mirror.is_empty() {
        return Err(refuse(
            line,
            "`pull-from-mirror` belongs to a mirror: the node refuses the file".into(),
        ));
    }
    let mut mirrors = Vec::new();
    for mirror in &entry.mirror {
        let mirror_line = line_of(text, mirror.span().start);
        let endpoint = mirror.get_ref();
        let location =
            trimmed(&endpoint.location).map_err(|p| refuse(mirror_line, p.to_string()))?;
        if location.is_empty() {
            return Err(refuse(
                mirror_line,
                "a mirror without `location`: the node refuses the file".into(),
            ));
        }
        let pull_from_mirror = match (entry.mirror_by_digest_only, endpoint.pull_from_mirror.as_str()) {
            (true, "") => PullFromMirror::DigestOnly,
            (true, _) => return Err(refuse(mirror_line, "`pull-from-mirror` with the entry's `mirror-by-digest-only`: the node refuses the file".into())),
            (false, "" | "all") => PullFromMirror::All,
            (false, "digest-only") => PullFromMirror::DigestOnly,
            (false, "tag-only") => PullFromMirror::TagOnly,
            (false, other) => return Err(refuse(mirror_line, format!("unsupported `pull-from-mirror` {other:?}: the node refuses the file"))),
        };
        mirrors.push(Mirror {
            location,
            insecure: endpoint.insecure,
            pull_from_mirror,
        });
    }
    Ok(Rule {
        location: (!location.is_empty() && location != prefix).then_some(location),
        prefix,
        blocked: entry.blocked,
        mirrors,
    })
}

/// A location written with a scheme, which the node refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: a location has no scheme; the node refuses the file")]
struct SchemeInLocation(String);

/// A location without trailing slashes; a scheme is refused, as the node refuses it.
fn trimmed(location: &str) -> Result<String, SchemeInLocation> {
    let trimmed = location.trim_end_matches('/');
    if trimmed.starts_with("http://") || trimmed.starts_with("https://") {
        return Err(SchemeInLocation(location.to_owned()));
    }
    Ok(trimmed.to_owned())
}

/// The first location of `rules` that a blocked rule covers, for the chains of a runtime that
/// has no blocking (containerd): the policy, like containers/image, refuses every location
/// whose name a blocked rule is the longest match for, and a rule nested under a location
/// may be that match for some images.
pub(crate) fn blocked_location(rules: &[Rule]) -> Option<String> {
    let blocked_under = |location: &str| {
        covering_rule(rules, location).is_some_and(|r| r.blocked)
            || rules.iter().any(|r| {
                r.blocked
                    && r.prefix.starts_with(location)
                    && r.prefix[location.len()..].starts_with('/')
            })
    };
    rules
        .iter()
        .flat_map(|rule| {
            rule.mirrors
                .iter()
                .map(|m| &m.location)
                .chain(&rule.location)
        })
        .find(|location| blocked_under(location))
        .cloned()
}

/// The rule the node chooses for `name`: the longest matching prefix, ties to the first in
/// sorted order.
fn covering_rule<'a>(rules: &'a [Rule], name: &str) -> Option<&'a Rule> {
    rules
        .iter()
        .filter(|rule| prefix_matches(&rule.prefix, name))
        .min_by(|a, b| {
            b.prefix
                .len()
                .cmp(&a.prefix.len())
                .then_with(|| a.prefix.cmp(&b.prefix))
        })
}

/// Whether `prefix` (literal, or `*.domain`) covers `name`, by whole components.
fn prefix_matches(prefix: &str, name: &str) -> bool {
    let ends_component = |rest: &str| rest.is_empty() || rest.starts_with(['/', ':', '@']);
    if let Some(domain) = prefix.strip_prefix('*') {
        let Some(start) = name.find(domain) else {
            return false;
        };
        return !name[..start].contains('/') && ends_component(&name[start + domain.len()..]);
    }
    name.strip_prefix(prefix).is_some_and(ends_component)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translate_one(text: &str) -> Result<Translation, Refusal> {
        translate(&[("registries.conf".to_owned(), text.to_owned())])
    }

    #[test]
    fn what_the_node_refuses_is_refused_by_line() {
        #[rustfmt::skip]
        let cases: &[(&str, usize)] = &[
            ("[[registry]]\nprefix = \"registry.example.test\"\n", 1),
            ("\n[[registry]]\nlocation = \"https://registry.example.test\"\n", 2),
            ("[[registry]]\nlocation = \"a.test\"\npull-from-mirror = \"all\"\n", 1),
            ("[[registry]]\nlocation = \"a.test\"\nmirror-by-digest-only = true\n[[registry.mirror]]\nlocation = \"m.test\"\npull-from-mirror = \"all\"\n", 4),
            ("[[registry]]\nlocation = \"a.test\"\n[[registry.mirror]]\nlocation = \"m.test\"\npull-from-mirror = \"sometimes\"\n", 3),
            ("[[registry]]\nlocation = \"a.test\"\nunknown-field = 1\n", 3),
            ("[registries.search]\nregistries = [\"a.test\"]\n", 1),
        ];
        for (text, line) in cases {
            let refusal = translate_one(text).expect_err(text);
            assert_eq!(refusal.at, Where::Line(*line), "{text}: {refusal}");
        }
    }

    #[test]
    fn a_later_file_replaces_an_entry_and_a_repeated_prefix_is_ignored() {
        let main = "[[registry]]\nlocation = \"a.test\"\n[[registry.mirror]]\nlocation = \"first.test\"\n\
                    [[registry]]\nlocation = \"a.test\"\n[[registry.mirror]]\nlocation = \"ignored.test\"\n";
        let drop_in = "[[registry]]\nprefix = \"b.test\"\nlocation = \"b.test\"\n[[registry.mirror]]\nlocation = \"b-mirror.test\"\n";
        let replaced = "[[registry]]\nlocation = \"b.test\"\n";
        let translation = translate(&[
            ("main".into(), main.into()),
            ("drop-in-1".into(), drop_in.into()),
            ("drop-in-2".into(), replaced.into()),
        ])
        .expect("valid files");
        let mirrors: Vec<(&str, Vec<&str>)> = translation
            .rules
            .iter()
            .map(|r| {
                (
                    r.prefix.as_str(),
                    r.mirrors.iter().map(|m| m.location.as_str()).collect(),
                )
            })
            .collect();
        assert_eq!(
            mirrors,
            [("a.test", vec!["first.test"]), ("b.test", vec![])]
        );
    }

    #[test]
    fn blocked_entries_and_their_mirrors_are_kept_as_written() {
        let text = "[[registry]]\nlocation = \"a.test\"\nblocked = true\n\
                    [[registry.mirror]]\nlocation = \"m.test/a\"\n\
                    [[registry]]\nlocation = \"b.test\"\n[[registry.mirror]]\nlocation = \"a.test/cache\"\n";
        let translation = translate_one(text).expect("valid file");
        assert_eq!(translation.rules.len(), 2);
        let a = &translation.rules[0];
        assert!(a.blocked);
        assert_eq!(a.mirrors[0].location, "m.test/a");
        // the mirror under the blocked prefix stays: the policy refuses it, as the node does
        assert_eq!(translation.rules[1].mirrors[0].location, "a.test/cache");
        assert_eq!(
            blocked_location(&translation.rules).as_deref(),
            Some("a.test/cache")
        );
    }
}
