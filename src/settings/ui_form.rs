//! Settings as the Kubewarden UI's form writes them. The UI (rancher/kubewarden-ui) builds a
//! policy's `spec.settings` from `questions-ui.yml`: every question's answer lands at its
//! `variable`, the hidden `description` question included; a cleared input is `''` or `null`;
//! "Add" on a list appends an empty row (`''`, or `null` where the UI's `removeEmptyAttrs`
//! deleted it from the array); "Add" on a sequence appends a row holding every sub-question's
//! default (`{prefix: '', location: '', blocked: false, mirrors: []}`). None of these is a setting, and none of
//! them may stop the policy from loading. [`normalise`] removes exactly them before the strict
//! parser runs, so a typo written by hand is still refused.

use serde_json::{Map, Value};

/// The hidden question Kubewarden policies carry to show their description in the UI.
const DESCRIPTION: &str = "description";

/// Sequences of the questions, with the members a row needs to mean anything: a row with none
/// of them set is an empty row ("Add" pressed, nothing typed) and is dropped. A row with some
/// other member set but none of these is kept, and the parser names what is missing.
const SEQUENCES: [(&str, &[&str]); 3] = [
    ("registries", &["prefix", "location", "mirrors", "blocked"]),
    ("mirrors", &["location"]),
    (
        "customResources",
        &["apiVersion", "kind", "images", "podSpecs"],
    ),
];

/// `settings` without what the form writes for "nothing": the top-level `description`, members
/// that are `null` or `''`, list entries that are `null` or `''`, and empty sequence rows.
pub fn normalise(settings: &Value) -> Value {
    let mut settings = settings.clone();
    if let Value::Object(members) = &mut settings {
        if matches!(
            members.get(DESCRIPTION),
            Some(Value::Null | Value::String(_))
        ) {
            members.remove(DESCRIPTION);
        }
        strip_members(members);
    }
    settings
}

/// True for what the form writes when nothing was entered.
fn is_blank(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// Removes blank members, then cleans what is left, each list by its own key.
fn strip_members(members: &mut Map<String, Value>) {
    members.retain(|_, value| !is_blank(value));
    for (key, value) in members.iter_mut() {
        match value {
            Value::Object(inner) => strip_members(inner),
            Value::Array(entries) => strip_entries(key, entries),
            _ => {}
        }
    }
}

/// Removes blank entries of the list `key`, cleans object entries, and drops the empty rows of
/// a sequence.
fn strip_entries(key: &str, entries: &mut Vec<Value>) {
    entries.retain(|entry| !is_blank(entry));
    for entry in entries.iter_mut() {
        if let Value::Object(members) = entry {
            strip_members(members);
        }
    }
    if let Some((_, needed)) = SEQUENCES.iter().find(|(sequence, _)| *sequence == key) {
        entries.retain(|entry| match entry {
            Value::Object(members) => needed.iter().any(|member| is_set(members.get(*member))),
            _ => true,
        });
    }
}

/// True when a row member holds something: a value that is not blank, an empty list, an
/// empty object or `false` (a checkbox's default).
fn is_set(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Array(entries)) => !entries.is_empty(),
        Some(Value::Object(members)) => !members.is_empty(),
        Some(value) => !is_blank(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_the_form_writes_for_nothing_is_removed() {
        let form = json!({
            "description": null,
            "timeBudgetMs": null,
            "ownedObjects": "",
            "exemptImages": ["registry.internal/*", "", null],
            "actions": {"absent": null, "unauthorized": "reject"},
            "registries": [
                {"prefix": "docker.io", "location": "", "mirrors": [
                    {"location": "", "pullFromMirror": "all", "insecure": false},
                    {"location": "mirror.local", "pullFromMirror": "all", "insecure": false}]},
                {"prefix": "", "location": "", "blocked": false, "mirrors": []},
                {"prefix": "quay.io", "location": null, "blocked": false}],
            "customResources": [{"apiVersion": "", "kind": "", "images": [], "podSpecs": []}],
        });
        assert_eq!(
            normalise(&form),
            json!({
                "exemptImages": ["registry.internal/*"],
                "actions": {"unauthorized": "reject"},
                "registries": [
                    {"prefix": "docker.io", "mirrors": [
                        {"location": "mirror.local", "pullFromMirror": "all", "insecure": false}]},
                    {"prefix": "quay.io", "blocked": false}],
                "customResources": [],
            })
        );
    }

    #[test]
    fn rows_with_something_set_are_kept_for_the_parser_to_judge() {
        // Mirrors without a prefix: not an empty row; the parser names the missing prefix.
        let form = json!({"registries": [{"prefix": "", "mirrors": [{"location": "m.local"}]}]});
        assert_eq!(
            normalise(&form),
            json!({"registries": [{"mirrors": [{"location": "m.local"}]}]})
        );
        // A blocked row without a prefix: kept, and refused for its missing prefix.
        let form = json!({"registries": [{"prefix": "", "blocked": true, "mirrors": []}]});
        assert_eq!(
            normalise(&form),
            json!({"registries": [{"blocked": true, "mirrors": []}]})
        );
        // A description of another type is not the UI's: left for the parser to refuse.
        let form = json!({"description": 3});
        assert_eq!(normalise(&form), form);
        // Only the top level has the hidden question.
        let form = json!({"actions": {"description": "x"}});
        assert_eq!(normalise(&form), form);
        assert_eq!(normalise(&json!("reject")), json!("reject"));
    }
}
