use super::*;
use serde_json::json;

/// The error `value` gets, the same from its text as from its tree.
fn error(value: serde_json::Value) -> String {
    let message = Settings::from_value(&value)
        .expect_err("settings should be refused")
        .to_string();
    assert_eq!(same_from_text(&value).err(), Some(message.clone()));
    message
}

/// `value` read from its text (the request path), checked to be what the tree gives.
fn same_from_text(value: &serde_json::Value) -> Result<String, String> {
    let tree = Settings::from_value(value).map(|s| format!("{s:?}"));
    for text in [
        value.to_string(),
        serde_json::to_string_pretty(value).unwrap(),
    ] {
        // every member read, as a request that needs them all would
        let read = Settings::from_json(&text).and_then(|s| s.read_all().map(|()| format!("{s:?}")));
        match (&tree, &read) {
            (Err(refused), Ok(_)) if refused.is_checked_at_load_only() => {}
            _ => assert_eq!(
                read.clone().map_err(|e| e.to_string()),
                tree.clone().map_err(|e| e.to_string()),
                "{text}"
            ),
        }
    }
    tree.map_err(|e| e.to_string())
}

#[test]
fn blanks_are_seen_in_the_text_and_nothing_else_is() {
    // what the UI writes for nothing: the member is left out, or read the careful way
    for text in [
        r#"{"description": "x"}"#,
        r#"{"timeBudgetMs": null}"#,
        r#"{"ownedObjects": ""}"#,
        r#"{"exemptImages": ["", "a"]}"#,
        r#"{"registries": [{"prefix": "a", "location": ""}]}"#,
    ] {
        let members = Settings::index(&mut Scanner::new(text)).expect(text);
        let read: Vec<&Member<'_>> = members.iter().flatten().collect();
        assert!(read.is_empty() || read.iter().all(|m| m.blanks), "{text}");
    }
    for text in [
        r#"{"exemptNamespaces": ["kube-system"], "lookupRegistries": ["docker.io"]}"#,
        r#"{"exemptImages": ["say \"null\" and \"\" and [] {}", "x\\"]}"#,
        r#"{"timeBudgetMs": 900, "pinDigests": true, "ownedObjects": "check"}"#,
        r#"{"deniedLookupNetworks": [], "actions": {}, "registries": [{"prefix": "a", "mirrors": []}]}"#,
    ] {
        let members = Settings::index(&mut Scanner::new(text)).expect(text);
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let written = value.as_object().map_or(0, serde_json::Map::len);
        assert_eq!(members.iter().flatten().count(), written, "{text}");
        assert!(members.iter().flatten().all(|m| !m.blanks), "{text}");
        assert_eq!(ui_form::normalise(&value), value, "{text}");
    }
}

#[test]
fn settings_read_from_text_are_those_read_from_the_tree() {
    let documents = [
        json!({"exemptNamespaces": ["kube-system"], "lookupRegistries": ["*.corp.example", "docker.io"]}),
        json!({"description": "shown by the UI", "timeBudgetMs": 900}),
        json!({"timeBudgetMs": null, "exemptImages": ["registry.internal/*", ""]}),
        json!({"registries": [{"prefix": "", "location": "", "mirrors": []},
                {"prefix": "docker.io", "mirrors": [{"location": "mirror.internal/hub"}]}]}),
        json!({"registries": [{"prefix": "docker.io"}, {"prefix": "docker.io"}]}),
        json!({"customResources": [{"apiVersion": "a.io/v1", "kind": "K", "images": ["$.spec.image"]}]}),
        json!({"lookupRegistries": []}),
        // empty rows: the normalised tree drops them, the strict parser refuses them
        json!({"registries": [{"mirrors": []}], "customResources": [{"images": []}]}),
        json!({"registries": [{"prefix": "docker.io", "mirrors": [{"pullFromMirror": "all"}]}]}),
        json!({"customResources": [{"podSpecs": [], "images": []}], "deniedLookupNetworks": []}),
        json!({"exemptNamespaces": ["Not A Label"]}),
        json!({"actions": {"absent": "warn"}, "unknown": 1}),
        json!({"shortNames": {"mode": "enforcing", "searchRegistries": ["quay.io"]}}),
        // a `null` inside a member is no blank to the index: serde refuses it, or reads the
        // absent value the careful reading's removal gives
        json!({"registries": [{"prefix": "docker.io", "location": null,
                "mirrors": [{"location": null, "pullFromMirror": "all"}, {"location": "m.io"}]}]}),
        json!({"exemptImages": ["a/*", null], "exemptNamespaces": [null, "ns"]}),
        json!({"actions": {"absent": null, "unreachable": "reject"}, "pullSecrets": {"consult": null}}),
        json!({"lookupBroker": {"host": "b.example:8443", "keySecret": null}}),
        json!({"shortNames": {"mode": "permissive", "searchRegistries": null, "aliases": {"a": null}}}),
        json!({"customResources": [{"apiVersion": "a.io/v1", "kind": "K", "images": ["$.x", null]}]}),
    ];
    for document in &documents {
        let _ = same_from_text(document);
    }
    // text that is not JSON, and duplicate keys (the tree keeps the last)
    assert!(Settings::from_json("{\"timeBudgetMs\": ")
        .unwrap_err()
        .to_string()
        .contains("not JSON"));
    let twice = Settings::from_json(r#"{"timeBudgetMs": 5, "timeBudgetMs": 7}"#).unwrap();
    assert_eq!(twice.time_budget(), std::time::Duration::from_millis(7));
    for empty in ["null", " {} ", "{\n}"] {
        assert_eq!(
            format!("{:?}", Settings::from_json(empty).unwrap()),
            format!("{:?}", Settings::default())
        );
    }
}

#[test]
fn literals_read_without_serde_are_what_serde_reads() {
    // the plain spellings are read by the text's readers; every other falls to serde,
    // which reads or refuses it as before
    let literals = [
        "0",
        "1",
        "900",
        "30000",
        "30001",
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "1.5",
        "1e3",
        "1E3",
        "0.0",
        "true",
        "false",
        "null",
        "\"skip\"",
        "\"check\"",
        "\"Skip\"",
        "\"sk\\u0069p\"",
        "\"\"",
        "[]",
        "{}",
    ];
    for literal in literals {
        for key in ["timeBudgetMs", "pinDigests", "ownedObjects", "ownedPods"] {
            let text = format!("{{\"{key}\": {literal}}}");
            let value: serde_json::Value = serde_json::from_str(&text).unwrap();
            let _ = same_from_text(&value);
        }
    }
    assert_eq!(whole_number("1500"), Some(1500));
    assert_eq!(whole_number("+1"), None, "no sign: JSON has none");
    assert_eq!(whole_number("18446744073709551616"), None);
    assert_eq!(boolean("true"), Some(true));
    assert_eq!(boolean("True"), None);
}

/// A file of the repository, by its path from the root.
fn repository_file(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

#[test]
fn every_member_is_asked_in_the_ui_form_unless_its_row_says_why_not() {
    // as tests/ui_questions.rs reads the form: the answer to a question lands at its
    // `variable`, the member itself (`timeBudgetMs`) or a field of it (`pullSecrets.consult`)
    let form: serde_yaml::Value =
        serde_yaml::from_str(&repository_file("questions-ui.yml")).expect("YAML");
    let asked: Vec<&str> = form["questions"]
        .as_sequence()
        .expect("a questions list")
        .iter()
        .map(|question| question["variable"].as_str().expect("a variable"))
        .map(|variable| variable.split('.').next().unwrap_or(variable))
        .collect();
    for key in KEYS {
        let why_not = NOT_IN_THE_UI.iter().find(|(k, _)| *k == key);
        match (asked.contains(&key), why_not) {
            (false, None) => panic!(
                "questions-ui.yml asks nothing of `{key}`: add its question, or say in its \
                     row why the form leaves it out"
            ),
            (true, Some((_, why))) => {
                panic!("questions-ui.yml asks `{key}`, whose row says it should not: {why}")
            }
            _ => {}
        }
    }
    for variable in asked {
        assert!(
            variable == "description" || KEYS.contains(&variable),
            "{variable}: a question of no member"
        );
    }
    for (key, _) in NOT_IN_THE_UI {
        assert!(KEYS.contains(key), "{key}");
    }
}

#[test]
fn every_member_is_in_the_settings_reference() {
    // docs/settings.md's table: a row of the member's own (`shortNames`, or a field of it,
    // `actions.<verdict>`), or, for a former name, a mention in the row of the new one
    let doc = repository_file("docs/settings.md");
    let rows: Vec<&str> = doc.lines().filter(|line| line.starts_with("| `")).collect();
    assert!(rows.len() > 10, "the settings table of docs/settings.md");
    for key in KEYS {
        let (own, field) = (format!("`{key}`"), format!("`{key}."));
        let named = rows.iter().any(|row| {
            let first = row.split('|').nth(1).unwrap_or_default().trim();
            first == own || first.starts_with(&field)
        });
        let mentioned = rows.iter().any(|row| row.contains(&own));
        assert!(
            named || mentioned,
            "docs/settings.md's table does not name `{key}`"
        );
    }
}

#[test]
fn every_member_is_found_by_its_name_alone() {
    for (slot, key) in KEYS.iter().enumerate() {
        assert_eq!(key_slot(key), Some(slot), "{key}");
        // a name differing in one byte, or one byte shorter, is none
        let last = key.len() - 1;
        assert_eq!(key_slot(&format!("{}X", &key[..last])), None, "{key}");
        assert_eq!(key_slot(&key[..last]), None, "{key}");
    }
    assert_eq!(key_slot(""), None);
    assert_eq!(key_slot("description"), None, "the UI's, left out before");
}

#[test]
fn empty_settings_are_the_compiled_defaults() {
    // `{}` and `null` skip parsing and compiling: what they give must be what compiling
    // the defaults gives, field by field
    let compiled = format!(
        "{:?}",
        Settings::compile(RawSettings::default(), Checks::All).unwrap()
    );
    assert_eq!(format!("{:?}", Settings::default()), compiled);
    for empty in [json!({}), json!(null)] {
        assert_eq!(
            format!("{:?}", Settings::from_value(&empty).unwrap()),
            compiled
        );
    }
}

#[test]
fn unwritten_lists_keep_their_defaults_and_empty_ones_clear_them() {
    let metadata = ImageReference::parse("169.254.169.254/latest/meta-data:1").unwrap();
    let unwritten = Settings::from_value(&json!({"pinDigests": true})).unwrap();
    assert!(unwritten.not_found_may_mean_denied("acme.jfrog.io"));
    assert!(unwritten.lookup_scope().refusal(&metadata).is_some());
    let cleared = Settings::from_value(&json!({
        "notFoundMayMeanDenied": [], "deniedLookupNetworks": []
    }))
    .unwrap();
    assert!(!cleared.not_found_may_mean_denied("acme.jfrog.io"));
    assert!(cleared.lookup_scope().refusal(&metadata).is_none());
}

#[test]
fn defaults_reject_only_certain_failures() {
    let settings = Settings::from_value(&json!({})).unwrap();
    for kind in FailureKind::ALL {
        let expected = if kind.is_certain() {
            Action::Reject
        } else {
            Action::Warn
        };
        assert_eq!(settings.actions().for_kind(kind), expected, "{kind:?}");
    }
    assert_eq!(
        Settings::from_value(&serde_json::Value::Null)
            .unwrap()
            .actions(),
        &Actions::default()
    );
}

#[test]
fn every_action_is_configurable() {
    let settings = Settings::from_value(&json!({"actions": {
            "absent": "warn", "invalidReference": "allow", "unauthorized": "reject",
            "unreachable": "reject", "hostRefused": "allow"}}))
    .unwrap();
    let actions = *settings.actions();
    assert_eq!(actions.for_kind(FailureKind::Absent), Action::Warn);
    assert_eq!(
        actions.for_kind(FailureKind::InvalidReference),
        Action::Allow
    );
    assert_eq!(actions.for_kind(FailureKind::Unauthorized), Action::Reject);
    assert_eq!(actions.for_kind(FailureKind::Unreachable), Action::Reject);
    assert_eq!(actions.for_kind(FailureKind::HostRefused), Action::Allow);
}

#[test]
fn unknown_fields_are_named() {
    assert!(error(json!({"exemptNamespace": ["a"]})).contains("unknown field `exemptNamespace`"));
    let nested = error(json!({"actions": {"absnet": "warn"}}));
    assert!(
        nested.contains("actions") && nested.contains("absnet"),
        "{nested}"
    );
}

#[test]
fn bad_actions_are_named() {
    let message = error(json!({"actions": {"absent": "block"}}));
    assert!(message.contains("actions.absent"), "{message}");
    assert!(message.contains("`reject`, `warn`, `allow`"), "{message}");
}

#[test]
fn bad_patterns_are_named() {
    let message = error(json!({"exemptImages": ["ok/*", "[unclosed"]}));
    assert!(message.contains("exemptImages[1]"), "{message}");
    // An empty row (the UI's "Add" with nothing typed) is no pattern: dropped, not refused.
    assert!(Settings::from_value(&json!({"exemptImages": [""]}))
        .unwrap()
        .exempt_images()
        .is_empty());
    assert!(error(json!({"exemptImages": ["a b"]})).contains("whitespace"));
}

#[test]
fn bad_namespaces_are_named() {
    for bad in ["Team-A", "-a", &"a".repeat(64), " "] {
        let message = error(json!({"exemptNamespaces": ["ok", bad]}));
        assert!(message.contains("exemptNamespaces[1]"), "{bad}: {message}");
    }
}

#[test]
fn hostile_shapes_are_refused_with_a_message() {
    for value in [
        json!("reject"),
        json!([1, 2]),
        json!({"actions": "reject"}),
        json!({"actions": {"absent": 3}}),
        json!({"exemptImages": "registry.internal/*"}),
        json!({"exemptImages": [3]}),
        json!({"exemptNamespaces": [{"name": "a"}]}),
    ] {
        assert!(
            error(value.clone()).starts_with("invalid settings"),
            "{value}"
        );
    }
}

#[test]
fn image_exemptions_match_normalised_references() {
    let settings = Settings::from_value(&json!({"exemptImages": [
            "registry.internal/*", "docker.io/library/busybox:*"]}))
    .unwrap();
    assert!(settings.is_image_exempt("registry.internal/team/app:1"));
    assert!(settings.is_image_exempt("docker.io/library/busybox:1.36"));
    assert!(!settings.is_image_exempt("docker.io/library/busybox2:1.36"));
    assert!(!settings.is_image_exempt("registry.internal.evil.com/a:1"));
}

#[test]
fn namespace_exemptions_are_exact() {
    let settings = Settings::from_value(&json!({"exemptNamespaces": ["kube-system"]})).unwrap();
    assert!(settings.is_namespace_exempt("kube-system"));
    assert!(!settings.is_namespace_exempt("kube-system-2"));
}

/// A document as a host may send it: compact, and pretty-printed.
fn spellings(document: &serde_json::Value) -> [String; 2] {
    [
        document.to_string(),
        serde_json::to_string_pretty(document).unwrap(),
    ]
}

#[test]
fn mirror_locations_found_from_the_text_are_those_of_the_rules() {
    use crate::vocabulary::reference::ImageReference;
    let documents = [
            json!({"registries": [
                {"prefix": "docker.io/library", "mirrors": [{"location": "mirror.internal/hub"}]},
                {"prefix": "127.0.0.1", "mirrors": [{"location": "m.internal:5000/local"}]},
                {"prefix": "*.corp.example", "mirrors": [{"location": "m.internal/corp"}]},
                {"prefix": "quay.io/org/app", "location": "quay.internal/app"}]}),
            json!({"registries": [{"prefix": "registry.example.com/team",
                "mirrors": [{"location": "ghcr.io/x", "pullFromMirror": "digest-only"}]}]}),
            serde_json::from_str(r#"{"registries": [{"prefix": "docker\u002eio", "mirrors": [{"location": "m.io/hub"}]}]}"#).unwrap(),
            json!({"registries": []}),
        ];
    let images = [
            "nginx:1.27",
            "docker.io/other/app:1",
            "127.0.0.1:5000/bench/img-0:1.0",
            "a.corp.example/x/y:2",
            "quay.io/org/app:3",
            "quay.io/org/application:3",
            "registry.example.com/team/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
            "ghcr.io/x/y:1",
        ];
    for document in &documents {
        let tree = Settings::from_value(document).unwrap();
        for text in spellings(document) {
            let read = Settings::from_json(&text).unwrap();
            // twice each: the second answered from what the first remembered
            for image in images.iter().chain(&images) {
                let reference = ImageReference::parse(image).unwrap();
                assert_eq!(
                    read.locations(&reference),
                    tree.mirrors().locations(&reference),
                    "{text} {image}"
                );
            }
        }
    }
    // a registry no rule names is answered from the text, without reading a rule
    let second = documents[1].to_string();
    let read = Settings::from_json(&second).unwrap();
    let image = ImageReference::parse("quay.io/x/y:1").unwrap();
    assert_eq!(read.locations(&image).len(), 1);
    assert!(read.cells.registries.get().is_none());
    let matched = ImageReference::parse("registry.example.com/team/a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef").unwrap();
    assert_eq!(read.locations(&matched).len(), 2);
}

#[test]
fn exemptions_searched_in_the_text_answer_as_the_compiled_lists() {
    use crate::vocabulary::reference::ImageReference;
    let documents = [
        json!({"exemptNamespaces": ["kube-system", "team-a"], "exemptImages": [
                "registry.internal/*", "docker.io/library/busybox:*", "ghcr.io/org/app:1.0"]}),
        // escapes (a valid name written with one): the text is not searched, the list is read
        serde_json::from_str(
            r#"{"exemptNamespaces": ["team\u002da"], "exemptImages": ["ghcr\u002eio/*"]}"#,
        )
        .unwrap(),
        // blanks of the UI: read the careful way
        json!({"exemptNamespaces": ["", "team-a"], "exemptImages": ["", "ghcr.io/*"]}),
        json!({"exemptNamespaces": [], "exemptImages": []}),
    ];
    let images = [
        "registry.internal/team/app:1",
        "busybox:1.36",
        "docker.io/library/busybox2:1.36",
        "ghcr.io/org/app:1.0",
        "ghcr.io/org/app:1.1",
        "quay.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ];
    for document in &documents {
        let tree = Settings::from_value(document).unwrap();
        for text in spellings(document) {
            for namespace in ["kube-system", "team-a", "team-b", ""] {
                // each query on fresh settings: the text is searched before any list is read
                let read = Settings::from_json(&text).unwrap();
                assert_eq!(
                    read.is_namespace_exempt(namespace),
                    tree.is_namespace_exempt(namespace),
                    "{text} {namespace}"
                );
            }
            for image in images {
                let reference = ImageReference::parse(image).unwrap();
                let read = Settings::from_json(&text).unwrap();
                assert_eq!(
                    read.is_reference_exempt(&reference),
                    tree.is_reference_exempt(&reference),
                    "{text} {image}"
                );
            }
        }
    }
    // written with escapes, the names are decoded before they are compared
    let escaped = r#"{"exemptNamespaces": ["team\u002da"], "exemptImages": ["ghcr\u002eio/*"]}"#;
    assert!(Settings::from_json(escaped)
        .unwrap()
        .is_namespace_exempt("team-a"));
    let ghcr = ImageReference::parse("ghcr.io/org/app:1.0").unwrap();
    assert!(Settings::from_json(escaped)
        .unwrap()
        .is_reference_exempt(&ghcr));
    // the cases the text answers alone are there: an exempt namespace and image, and not
    let first = documents[0].to_string();
    let read = Settings::from_json(&first).unwrap();
    assert!(read.is_namespace_exempt("team-a") && !read.is_namespace_exempt("team-b"));
    let exempt = ImageReference::parse("registry.internal/team/app:1").unwrap();
    assert!(read.is_reference_exempt(&exempt));
    let other = ImageReference::parse("quay.io/a/b:1").unwrap();
    assert!(!read.is_reference_exempt(&other));
    // a registry found without exemption is remembered; another is searched again
    let read = Settings::from_json(&first).unwrap();
    assert!(!read.is_reference_exempt(&other));
    assert_eq!(
        read.no_exemption_from.get().map(String::as_str),
        Some("quay.io")
    );
    assert!(!read.is_reference_exempt(&ImageReference::parse("quay.io/c/d:2").unwrap()));
    assert!(read.is_reference_exempt(&exempt));
}

#[test]
fn validate_settings_payload_answers_the_host_protocol() {
    let ok: serde_json::Value =
        serde_json::from_slice(&validate_settings_payload(br#"{"exemptImages":["a/*"]}"#)).unwrap();
    assert_eq!(ok, json!({"valid": true}));
    let bad: serde_json::Value = serde_json::from_slice(&validate_settings_payload(
        br#"{"actions":{"absent":"no"}}"#,
    ))
    .unwrap();
    assert_eq!(bad["valid"], json!(false));
    assert!(bad["message"].as_str().unwrap().contains("actions.absent"));
    let garbage: serde_json::Value =
        serde_json::from_slice(&validate_settings_payload(b"\xff{")).unwrap();
    assert_eq!(garbage["valid"], json!(false));
    assert!(garbage["message"].as_str().unwrap().contains("not JSON"));
}

#[test]
fn time_budget_is_bounded_and_named() {
    let default = Settings::from_value(&json!({})).unwrap();
    assert_eq!(
        default.time_budget().as_millis(),
        u128::from(DEFAULT_TIME_BUDGET_MS)
    );
    let set = Settings::from_value(&json!({"timeBudgetMs": 5000})).unwrap();
    assert_eq!(set.time_budget().as_millis(), 5000);
    for bad in [json!(0), json!(30_001), json!(-1), json!("1s")] {
        let message = error(json!({"timeBudgetMs": bad}));
        assert!(message.contains("timeBudgetMs"), "{message}");
    }
}

#[test]
fn owned_pods_is_still_read_as_owned_objects() {
    let read = |value| Settings::from_value(&value).unwrap().owned_objects();
    assert_eq!(read(json!({})), OwnedObjects::Skip);
    assert_eq!(read(json!({"ownedObjects": "check"})), OwnedObjects::Check);
    assert_eq!(read(json!({"ownedPods": "check"})), OwnedObjects::Check);
    assert_eq!(read(json!({"ownedPods": "skip"})), OwnedObjects::Skip);
    // The UI writes ownedObjects' default next to an older ownedPods: check wins.
    for (new, old) in [("skip", "check"), ("check", "skip"), ("check", "check")] {
        let both = json!({"ownedObjects": new, "ownedPods": old});
        assert_eq!(read(both), OwnedObjects::Check, "{new} {old}");
    }
    let skip = json!({"ownedObjects": "skip", "ownedPods": "skip"});
    assert_eq!(read(skip), OwnedObjects::Skip);
    let bad = error(json!({"ownedObjects": "ignore"}));
    assert!(
        bad.contains("ownedObjects") && bad.contains("`skip` or `check`"),
        "{bad}"
    );
}

#[test]
fn ten_thousand_patterns_compile() {
    let patterns: Vec<String> = (0..10_000)
        .map(|i| format!("registry{i}.internal/*"))
        .collect();
    let settings = Settings::from_value(&json!({"exemptImages": patterns})).unwrap();
    assert!(settings.is_image_exempt("registry9999.internal/a:1"));
    assert!(!settings.is_image_exempt("docker.io/library/nginx:1"));
}
