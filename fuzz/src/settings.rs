//! Settings on any input: `Settings::from_value` never panics on JSON, its exemptions can be
//! queried with anything, and `validate_settings_payload` always answers JSON with a boolean
//! `valid` (and a `message` when false) that agrees with `from_value`, and `from_json` (the
//! request path, from the text) reads what `from_value` reads.

use resolvable_images_policy::settings::{validate_settings_payload, Settings, SettingsError};
use serde_json::Value;

/// One input of the target.
pub fn run(data: &[u8]) {
    let answer = validate_settings_payload(data);
    let answer: Value = serde_json::from_slice(&answer).expect("validate_settings answers JSON");
    let valid = answer["valid"]
        .as_bool()
        .unwrap_or_else(|| panic!("no boolean `valid` in {answer}"));
    if !valid {
        assert!(
            answer["message"].as_str().is_some_and(|m| !m.is_empty()),
            "refused without a message: {answer}"
        );
    }

    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        assert!(!valid, "non-JSON settings accepted");
        return;
    };
    let settings = Settings::from_value(&value);
    assert_eq!(
        settings.is_ok(),
        valid,
        "from_value and validate_settings disagree"
    );
    if let Ok(text) = std::str::from_utf8(data) {
        same_from_text(text, &value, &settings);
    }
    let Ok(settings) = settings else {
        return;
    };
    // Query the exemptions with every string of the input, patterns included.
    let mut strings = Vec::new();
    collect_strings(&value, &mut strings);
    for text in strings {
        let _ = settings.is_image_exempt(text);
        let _ = settings.is_namespace_exempt(text);
    }
}

/// `Settings::from_json`, the request path, reads what `from_value` reads. It skips the checks
/// `validate_settings` made when the host loaded the policy (`registries`' prefixes and
/// locations) and compiles custom kinds' JSONPaths only for a request of the kind, so a document
/// `from_value` refuses for one of those may be read, or refused for another field.
fn same_from_text(text: &str, value: &Value, tree: &Result<Settings, SettingsError>) {
    // every member read, as a request that needs them all would
    let read = Settings::from_json(text).and_then(|read| read.read_all().map(|()| read));
    match (tree, read) {
        (Ok(tree), Ok(read)) => assert_eq!(format!("{tree:?}"), format!("{read:?}"), "{text}"),
        (Err(tree), _) if tree.is_checked_at_load_only() => {}
        (Err(tree), Err(read)) if tree != &read => {
            // a request reads members one by one and met another problem first: the
            // document is refused without the member that one names too
            let member = read.field().split(['.', '[']).next().unwrap_or_default();
            let mut rest = value.clone();
            if let Value::Object(members) = &mut rest {
                members.remove(member);
            }
            assert!(
                member.is_empty() || Settings::from_value(&rest).is_err(),
                "from_value {tree}, from_json {read}: {text}"
            );
        }
        (Err(_), Err(_)) => {}
        (tree, read) => panic!("from_value {tree:?}, from_json {read:?}: {text}"),
    }
}

fn collect_strings<'a>(value: &'a Value, into: &mut Vec<&'a str>) {
    match value {
        Value::String(text) => into.push(text),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, into)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            into.push(k);
            collect_strings(v, into);
        }),
        _ => {}
    }
}
