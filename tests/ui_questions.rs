//! Settings written by the Kubewarden UI must load: a policy whose form writes settings its own
//! parser refuses cannot be configured from the UI at all. The UI builds a policy's settings
//! from `questions-ui.yml`: each answer at its question's `variable`, defaults included (the
//! hidden `description` question too), `''` or `null` for a cleared input, an empty row for
//! "Add" on a list, and a row of sub-question defaults for "Add" on a sequence. Every such
//! value must be accepted by the parser, read from the very file the UI reads.

use resolvable_images_policy::settings::Settings;
use serde_json::{json, Map, Value};

/// The questions of `questions-ui.yml`, as JSON.
fn questions() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/questions-ui.yml");
    let text = std::fs::read_to_string(path).expect("questions-ui.yml is readable");
    let yaml: serde_yaml::Value = serde_yaml::from_str(&text).expect("questions-ui.yml is YAML");
    let json = serde_json::to_value(yaml).expect("questions-ui.yml is JSON-shaped");
    json["questions"]
        .as_array()
        .expect("a questions list")
        .clone()
}

/// `settings` with `value` at the dotted `variable`, as the UI's `set(value, variable, …)`.
fn set(settings: &mut Map<String, Value>, variable: &str, value: Value) {
    match variable.split_once('.') {
        None => {
            settings.insert(variable.to_owned(), value);
        }
        Some((head, rest)) => {
            let inner = settings.entry(head.to_owned()).or_insert_with(|| json!({}));
            set(inner.as_object_mut().expect("an object"), rest, value);
        }
    }
}

/// The row "Add" appends to a sequence: every sub-question's default (the UI's `addSequence`).
fn added_row(question: &Value) -> Value {
    let mut row = Map::new();
    for sub in question["sequence_questions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let variable = sub["variable"].as_str().expect("a variable");
        row.insert(variable.to_owned(), sub["default"].clone());
    }
    Value::Object(row)
}

/// Every value the form can write for `question` without the user typing a word.
fn untyped_values(question: &Value) -> Vec<Value> {
    let kind = question["type"].as_str().unwrap_or("string");
    let mut values = vec![question["default"].clone(), Value::Null];
    if kind.starts_with("array[") {
        values.extend([json!([]), json!([""]), json!([null])]);
    } else if kind.starts_with("sequence[") {
        let mut row = added_row(question);
        values.extend([json!([]), json!([row.clone()])]);
        // "Add" on a sequence inside the added row.
        for sub in question["sequence_questions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if sub["type"].as_str().unwrap_or("").starts_with("sequence[") {
                let variable = sub["variable"].as_str().expect("a variable");
                row[variable] = json!([added_row(sub)]);
                values.push(json!([row.clone()]));
            }
        }
    } else if kind == "int" {
        values.extend([question["min"].clone(), question["max"].clone()]);
    } else {
        values.push(json!(""));
    }
    if let Some(options) = question["options"].as_array() {
        values.extend(options.iter().cloned());
    }
    if kind == "boolean" {
        values.extend([json!(true), json!(false)]);
    }
    values
}

fn assert_loads(settings: &Value) {
    if let Err(e) = Settings::from_value(settings) {
        panic!("the UI can write {settings}, which the policy refuses: {e}");
    }
}

#[test]
fn the_questions_defaults_load() {
    let mut settings = Map::new();
    for question in questions() {
        let variable = question["variable"].as_str().expect("a variable");
        set(&mut settings, variable, question["default"].clone());
    }
    assert!(
        settings.contains_key("description"),
        "the hidden question is fed too"
    );
    assert_loads(&Value::Object(settings));
}

#[test]
fn every_untyped_value_of_every_question_loads() {
    let questions = questions();
    assert!(questions.len() > 20, "{} questions", questions.len());
    for question in &questions {
        let variable = question["variable"].as_str().expect("a variable");
        for value in untyped_values(question) {
            let mut settings = Map::new();
            set(&mut settings, variable, value);
            assert_loads(&Value::Object(settings));
        }
    }
}

#[test]
fn every_question_is_a_setting() {
    // A question the parser does not know would be refused once answered: answer each one
    // with a non-empty value of its type and expect no "unknown field".
    for question in questions() {
        let variable = question["variable"].as_str().expect("a variable");
        let mut settings = Map::new();
        set(&mut settings, variable, json!({"unlikely": "value"}));
        let message = Settings::from_value(&Value::Object(settings))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        if variable != "description" {
            assert!(!message.contains("unknown field"), "{variable}: {message}");
        }
    }
}

#[test]
fn typed_mistakes_are_still_refused() {
    for settings in [
        json!({"exemptNamespace": ["a"]}),
        json!({"registries": [{"prefix": "", "mirrors": [{"location": "mirror.local"}]}]}),
        json!({"registries": [{"prefix": "docker.io", "location": "registry"}]}),
        json!({"actions": {"absnet": "warn"}}),
        json!({"actions": {"absent": "block"}}),
        json!({"description": 3}),
    ] {
        assert!(Settings::from_value(&settings).is_err(), "{settings}");
    }
}
