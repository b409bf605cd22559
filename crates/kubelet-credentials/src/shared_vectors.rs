//! Checks the keyring against the shared keyring vectors, `keyring-match.json` in the
//! `shared/vectors` directory beside the workspace (kept outside this repository, and absent
//! from some checkouts: then the test says so and passes).
//!
//! [`Keyring::lookup`] takes a repository as the kubelet passes it, normalised, so `lookup`
//! cases run with `kubelet_lookup_string` against
//! `expected_matching_keys_after_kubelet_normalization`; a case whose image the kubelet refuses
//! to parse never reaches the keyring and is not run that way. Since the keyring follows the
//! kubelet's rules on any string, every case also runs with its raw `image` against
//! `expected_matching_keys`. No case needs an exception.

use serde_json::Value;

use super::keyring::{is_default_registry_match, urls_match_str};
use super::{Credential, Keyring};

/// The cases, or `None` (said on stderr) when the vectors are not beside the workspace.
fn cases() -> Option<Vec<Value>> {
    crate::testing::shared_vectors(VECTORS)
}

/// The file, in the shared vectors.
const VECTORS: &str = "keyring-match.json";

/// A string field of a case.
fn text<'a>(case: &'a Value, field: &str) -> &'a str {
    case[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {case}"))
}

/// A list of strings of a case.
fn texts(value: &Value) -> Vec<String> {
    let items = value
        .as_array()
        .unwrap_or_else(|| panic!("a list: {value}"));
    items
        .iter()
        .map(|item| item.as_str().expect("a string").to_owned())
        .collect()
}

/// The configured keys `lookup` gives for `image`, in order: each key holds one credential
/// whose username is the key as configured.
fn matching_keys(auths_keys: &[String], image: &str) -> Vec<String> {
    let mut keyring = Keyring::new();
    for key in auths_keys {
        keyring.add(key, Credential::new(key.as_str(), "pw"));
    }
    let found = keyring.lookup(image);
    found.iter().map(|c| c.username().to_owned()).collect()
}

/// Runs one `lookup` case both ways; returns how many runs it made.
fn run_lookup(case: &Value, failures: &mut Vec<String>) -> usize {
    let keys = texts(&case["auths_keys"]);
    let mut runs = vec![(text(case, "image"), &case["expected_matching_keys"])];
    if let Some(normalised) = case["kubelet_lookup_string"].as_str() {
        let expected = &case["expected_matching_keys_after_kubelet_normalization"];
        runs.push((normalised, expected));
    }
    for (image, expected) in &runs {
        let got = matching_keys(&keys, image);
        if got != texts(expected) {
            failures.push(format!(
                "lookup {image:?} with {keys:?}: got {got:?}, {case}"
            ));
        }
    }
    runs.len()
}

#[test]
fn shared_keyring_vectors() {
    let Some(cases) = cases() else {
        return;
    };
    assert!(!cases.is_empty(), "{VECTORS} holds no case");
    let mut failures = Vec::new();
    let mut runs = 0;
    for case in &cases {
        let got = match text(case, "kind") {
            "lookup" => {
                runs += run_lookup(case, &mut failures);
                continue;
            }
            "urls_match" => urls_match_str(
                text(case, "glob").as_bytes(),
                text(case, "target").as_bytes(),
            ),
            "default_registry" => is_default_registry_match(text(case, "image")),
            kind => panic!("unknown kind {kind:?}: {case}"),
        };
        runs += 1;
        if Some(got) != case["matches"].as_bool() {
            failures.push(format!("got {got}: {case}"));
        }
    }
    eprintln!("{VECTORS}: {} cases, {runs} runs", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
