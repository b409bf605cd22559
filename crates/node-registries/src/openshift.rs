//! OpenShift's `ImageDigestMirrorSet` and `ImageTagMirrorSet` (config.openshift.io/v1), as
//! the machine-config-operator writes them into the nodes' `registries.conf`
//! (`EditRegistriesConfig` in openshift/runtime-utils pkg/registries/registries.go): one entry
//! per source, its digest sets' mirrors as `digest-only` mirrors, then its tag sets' as
//! `tag-only`, and `blocked` when any set of the source says `NeverContactSource`. A set whose
//! mirrors only repeat the source is no mirror set and is ignored, its policy included.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::rules::{Mirror, PullFromMirror, Refusal, Rule, Translation, Where};

/// The API group and version of both kinds.
const API_VERSION: &str = "config.openshift.io/v1";

/// An object, or a `List` of them as `oc get -o yaml` prints.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Object {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    spec: Option<serde_yaml::Value>,
    #[serde(default)]
    items: Vec<serde_yaml::Value>,
}

/// The spec of either kind.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    #[serde(default)]
    image_digest_mirrors: Vec<MirrorSet>,
    #[serde(default)]
    image_tag_mirrors: Vec<MirrorSet>,
}

/// One entry of `imageDigestMirrors` / `imageTagMirrors`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MirrorSet {
    source: String,
    #[serde(default)]
    mirrors: Vec<String>,
    #[serde(default)]
    mirror_source_policy: Option<String>,
}

/// Digest or tag sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Digest,
    Tag,
}

/// The sets of one source and kind: the mirrors, where they were written, and whether the
/// source may be contacted.
struct Collected {
    mirrors: Vec<String>,
    at: String,
    never_contact_source: bool,
}

/// The rules of the objects in `files`, each `(name, text)` holding YAML documents.
pub fn translate(files: &[(String, String)]) -> Result<Translation, Refusal> {
    let mut sets: BTreeMap<(String, Kind), Collected> = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, text) in files {
        for (index, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let at = format!("document {}", index + 1);
            let value = serde_yaml::Value::deserialize(document)
                .map_err(|e| refusal(name, &at, e.to_string()))?;
            if value.is_null() {
                continue;
            }
            read_object(name, &at, value, &mut sets, &mut notes)?;
        }
    }
    let mut rules: BTreeMap<String, Rule> = BTreeMap::new();
    for ((source, kind), collected) in sets {
        let rule = rules.entry(source.clone()).or_insert_with(|| Rule {
            prefix: source,
            location: None,
            blocked: false,
            mirrors: Vec::new(),
        });
        rule.blocked |= collected.never_contact_source;
        let pull_from_mirror = match kind {
            Kind::Digest => PullFromMirror::DigestOnly,
            Kind::Tag => PullFromMirror::TagOnly,
        };
        rule.mirrors
            .extend(collected.mirrors.into_iter().map(|location| Mirror {
                location,
                insecure: false,
                pull_from_mirror,
            }));
    }
    let rules = rules.into_values().collect();
    Ok(Translation { rules, notes }.sorted())
}

fn refusal(file: &str, at: &str, problem: String) -> Refusal {
    Refusal {
        file: file.to_owned(),
        at: Where::Field(at.to_owned()),
        problem,
    }
}

/// One object (or list) into `sets`.
fn read_object(
    name: &str,
    at: &str,
    value: serde_yaml::Value,
    sets: &mut BTreeMap<(String, Kind), Collected>,
    notes: &mut Vec<String>,
) -> Result<(), Refusal> {
    let object: Object =
        serde_yaml::from_value(value).map_err(|e| refusal(name, at, e.to_string()))?;
    if object.kind.ends_with("List") {
        for (index, item) in object.items.into_iter().enumerate() {
            read_object(name, &format!("{at}: items[{index}]"), item, sets, notes)?;
        }
        return Ok(());
    }
    let expected = match object.kind.as_str() {
        "ImageDigestMirrorSet" => Kind::Digest,
        "ImageTagMirrorSet" => Kind::Tag,
        other => {
            return Err(refusal(name, at, format!(
                "kind {other:?}: only ImageDigestMirrorSet and ImageTagMirrorSet are read (an ImageContentSourcePolicy converts to the former with `oc adm migrate icsp`)"
            )))
        }
    };
    if object.api_version != API_VERSION {
        return Err(refusal(
            name,
            at,
            format!(
                "apiVersion {:?}: expected {API_VERSION}",
                object.api_version
            ),
        ));
    }
    let spec: Spec = match object.spec {
        Some(spec) => serde_yaml::from_value(spec)
            .map_err(|e| refusal(name, &format!("{at}: spec"), e.to_string()))?,
        None => Spec::default(),
    };
    let (field, entries) = match expected {
        Kind::Digest => ("imageDigestMirrors", spec.image_digest_mirrors),
        Kind::Tag => ("imageTagMirrors", spec.image_tag_mirrors),
    };
    for (index, set) in entries.into_iter().enumerate() {
        let at = format!("{at}: spec.{field}[{index}]");
        collect(name, &at, expected, set, sets, notes)?;
    }
    Ok(())
}

/// One mirror set into `sets`; several sets of one source and kind are accepted only when
/// they list the same mirrors (OpenShift merges differing orders into one, which is left to
/// the operator to write).
fn collect(
    name: &str,
    at: &str,
    kind: Kind,
    set: MirrorSet,
    sets: &mut BTreeMap<(String, Kind), Collected>,
    notes: &mut Vec<String>,
) -> Result<(), Refusal> {
    let never_contact_source = match set.mirror_source_policy.as_deref() {
        None | Some("") | Some("AllowContactingSource") => false,
        Some("NeverContactSource") => true,
        Some(other) => return Err(refusal(name, at, format!("mirrorSourcePolicy {other:?}: expected NeverContactSource or AllowContactingSource"))),
    };
    if set.mirrors.iter().all(|mirror| *mirror == set.source) {
        notes.push(format!(
            "{name} ({at}): no mirror other than the source; OpenShift ignores the set"
        ));
        return Ok(());
    }
    match sets.get_mut(&(set.source.clone(), kind)) {
        Some(existing) if existing.mirrors != set.mirrors => Err(refusal(name, at, format!(
            "a second set for {:?} with other mirrors than {}: OpenShift merges their orders; write one set with the order the nodes use",
            set.source, existing.at
        ))),
        Some(existing) => {
            existing.never_contact_source |= never_contact_source;
            Ok(())
        }
        None => {
            sets.insert((set.source, kind), Collected {
                mirrors: set.mirrors,
                at: format!("{name} ({at})"),
                never_contact_source,
            });
            Ok(())
        }
    }
}
