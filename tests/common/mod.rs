//! What the integration tests share: the fixtures' images, reading fixtures, a cluster, and
//! running `validate` the way the host does.

use resolvable_images_policy::evaluate::validate_payload;
use resolvable_images_policy::host::InMemoryHost;
use serde_json::{json, Value};

/// The images every fixture's pod spec has (see tests/fixtures/README.md), normalised.
pub const APP: &str = "registry.example.com/team/app:1.4.2";
pub const MIGRATE: &str = "registry.example.com/platform/migrate:2.1.0";
pub const BUSYBOX: &str = "docker.io/library/busybox:1.36";

/// The `request` of a fixture AdmissionReview in tests/fixtures/requests.
pub fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/requests/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let review: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    review["request"].clone()
}

/// A cluster with team-a's `default` ServiceAccount (no pull secrets) and no images.
pub fn cluster() -> InMemoryHost {
    InMemoryHost::new().with_object(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "team-a"}
    }))
}

/// Runs `validate` on `request` with `settings` and returns the response JSON.
pub fn run(request: &Value, settings: Value, host: &InMemoryHost) -> Value {
    let payload = serde_json::to_vec(&json!({"settings": settings, "request": request}))
        .expect("the payload encodes");
    serde_json::from_slice(&validate_payload(&payload, host)).expect("validate answers JSON")
}

/// The rejection message, or "".
pub fn message(response: &Value) -> String {
    response["message"].as_str().unwrap_or_default().to_owned()
}

/// The warnings, or none.
pub fn warnings(response: &Value) -> Vec<String> {
    serde_json::from_value(response["warnings"].clone()).unwrap_or_default()
}

/// Asserts that `validate_settings` refuses `settings` with a message naming `field`: what the
/// policy server asks when it loads the policy, and where every check runs.
pub fn assert_invalid_settings_named(settings: &Value, field: &str) {
    let answer: Value = serde_json::from_slice(
        &resolvable_images_policy::settings::validate_settings_payload(
            settings.to_string().as_bytes(),
        ),
    )
    .expect("validate_settings answers JSON");
    assert_eq!(answer["valid"], false, "{settings}");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.contains(field), "{settings}: {message}");
}

/// Asserts that `validate_settings` refuses `settings`, and that a Pod's request with them is
/// answered a 400 whose message names `field` too: a request reads every member the fixture
/// Pod's checks need (the checks a request also runs).
pub fn assert_settings_refused_naming(settings: Value, field: &str) {
    assert_invalid_settings_named(&settings, field);
    let response = run(&fixture("pod-create.json"), settings.clone(), &cluster());
    assert_eq!(response["code"], 400, "{settings}");
    assert!(
        message(&response).contains(field),
        "{settings}: {}",
        message(&response)
    );
}
