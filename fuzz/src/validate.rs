//! The whole request-to-decision path (`validate_payload`) on any payload, against an
//! in-memory cluster and registry, with stock and credentialed lookups: the answer is always
//! JSON with a boolean `accepted`, a rejection has a message, warnings fit Kubernetes' limit,
//! and the cluster's pull-secret credentials never appear in the answer.
//!
//! An input starting with `{` is the payload itself (the seeds are real requests). Any other
//! input is a list of images, one a line, put into a fixture Pod and Deployment that name the
//! cluster's pull secrets, so that arbitrary images travel the whole path too.

use std::sync::OnceLock;

use resolvable_images_policy::answer::{WARNINGS_TOTAL_MAX, WARNING_MAX};
use resolvable_images_policy::evaluate::validate_payload;
use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::{b64, secret, service_account};
use serde_json::{json, Value};

/// The cluster's secrets use it as username and password; no answer may show it.
const MARKER: &str = "Zq7pAsSw0rDMaRkEr";
const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
/// The images of tests/fixtures/requests, as the registry knows them.
const IMAGES: [&str; 3] = [
    "registry.example.com/team/app:1.4.2",
    "registry.example.com/platform/migrate:2.1.0",
    "docker.io/library/busybox:1.36",
];
/// The secrets of namespace team-a (seed.sh names them in pods' imagePullSecrets).
const SECRETS: [&str; 4] = ["regcred", "legacy", "broken", "opaque"];

/// Team-a's ServiceAccounts and secrets: a good dockerconfigjson and dockercfg, a malformed
/// one and an Opaque one, all holding [`MARKER`].
fn cluster(host: InMemoryHost) -> InMemoryHost {
    let auth = b64(format!("{MARKER}:{MARKER}"));
    let sa = |name: &str| service_account(name, &SECRETS);
    let mut host = host
        .with_object(sa("default"))
        .with_object(sa("builder"))
        .with_object(secret(
            "regcred",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &json!({"auths": {"registry.example.com": {"auth": auth}}}).to_string(),
        ))
        .with_object(secret(
            "legacy",
            "kubernetes.io/dockercfg",
            ".dockercfg",
            &json!({"https://index.docker.io/v1/": {"username": MARKER, "password": MARKER}})
                .to_string(),
        ))
        .with_object(secret(
            "broken",
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            &format!(r#"{{"auths": {{"ghcr.io": {{"auth": "{MARKER}!"}}}}, "x": "{MARKER}"#),
        ))
        .with_object(secret("opaque", "Opaque", "token", MARKER));
    for image in IMAGES {
        host = host.with_digest(image, DIGEST);
    }
    host
}

/// A stock host and one with credentialed lookups (the busybox image public, the others
/// visible to the secrets' credential). Fresh for every input: hosts record their calls.
fn hosts() -> [InMemoryHost; 2] {
    let mut credentialed = InMemoryHost::new();
    for (i, image) in IMAGES.iter().enumerate() {
        let users: &[&str] = if i == 2 { &[] } else { &[MARKER] };
        credentialed = credentialed.with_private_image(image, users, DIGEST);
    }
    [cluster(InMemoryHost::new()), cluster(credentialed)]
}

/// The `request` of a fixture AdmissionReview and the pointer to its pod spec.
fn fixtures() -> &'static [(Value, &'static str); 2] {
    static FIXTURES: OnceLock<[(Value, &'static str); 2]> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let request = |text: &str| {
            let review: Value = serde_json::from_str(text).expect("fixture is JSON");
            review["request"].clone()
        };
        [
            (
                request(include_str!(
                    "../../tests/fixtures/requests/pod-create.json"
                )),
                "/object/spec",
            ),
            (
                request(include_str!(
                    "../../tests/fixtures/requests/deployment-create.json"
                )),
                "/object/spec/template/spec",
            ),
        ]
    })
}

/// Payloads running `images` in each fixture, with pull secrets and credentialed lookups.
fn image_payloads(images: &[u8]) -> Vec<Vec<u8>> {
    const POLICIES: [&str; 4] = ["Always", "IfNotPresent", "Never", ""];
    let containers: Vec<Value> = String::from_utf8_lossy(images)
        .split('\n')
        .enumerate()
        .map(|(i, image)| {
            let policy = POLICIES[image.len() % POLICIES.len()];
            json!({"name": format!("c{i}"), "image": image, "imagePullPolicy": policy})
        })
        .collect();
    let secrets: Vec<Value> = SECRETS.iter().map(|s| json!({"name": s})).collect();
    fixtures()
        .iter()
        .map(|(request, spec)| {
            let mut request = request.clone();
            if let Some(spec) = request.pointer_mut(spec) {
                spec["containers"] = json!(containers);
                spec["imagePullSecrets"] = json!(secrets);
            }
            let settings = json!({"pullSecrets": {"credentialedLookups": true}});
            serde_json::to_vec(&json!({"settings": settings, "request": request}))
                .expect("a Value serialises")
        })
        .collect()
}

/// One input of the target.
pub fn run(data: &[u8]) {
    if data.first() == Some(&b'{') {
        check(data, data);
    } else {
        for payload in image_payloads(data) {
            check(data, &payload);
        }
    }
}

/// Runs `payload` (built from the fuzz input `data`) on both hosts and checks the answers.
fn check(data: &[u8], payload: &[u8]) {
    let input_has_marker = data.windows(MARKER.len()).any(|w| w == MARKER.as_bytes());
    for host in hosts() {
        let answer = validate_payload(payload, &host);
        let text = String::from_utf8_lossy(&answer);
        let response: Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|e| panic!("validate answered non-JSON ({e}): {text}"));
        let accepted = response["accepted"]
            .as_bool()
            .unwrap_or_else(|| panic!("no boolean `accepted` in {text}"));
        if !accepted {
            assert!(
                response["message"].as_str().is_some_and(|m| !m.is_empty()),
                "rejected without a message: {text}"
            );
        }
        let warnings = &response["warnings"];
        assert!(
            warnings.is_null() || warnings.is_array(),
            "warnings neither null nor an array: {text}"
        );
        if let Some(warnings) = warnings.as_array() {
            let mut total = 0;
            for warning in warnings {
                let warning = warning.as_str().expect("a warning is a string");
                assert!(
                    warning.len() <= WARNING_MAX,
                    "warning too long: {warning:?}"
                );
                total += warning.len();
            }
            assert!(
                total <= WARNINGS_TOTAL_MAX,
                "warnings past the API server's limit ({total} bytes): {text}"
            );
        }
        if !input_has_marker {
            assert!(
                !text.contains(MARKER),
                "a credential reached the answer: {text}"
            );
        }
    }
}
