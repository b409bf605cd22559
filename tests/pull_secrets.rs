//! Pull secrets end to end through the decision path, natively: which secrets apply (Pod vs
//! template, ServiceAccount fallback), both secret formats, the findings, credentialed lookups
//! and their fallback, and that no secret byte reaches any output.

use crate::common;

use common::*;

use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::{
    b64, dockercfg, dockerconfigjson, secret, service_account,
};
use serde_json::{json, Value};

const DIGEST: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const USER: &str = "robot-7f3a";
const PASSWORD: &str = "s3cr3t-pa55-9c1e";

/// The registry.example.com images are private to `USER`; busybox is public.
fn credentialed_registry() -> InMemoryHost {
    InMemoryHost::new()
        .with_private_image(APP, &[USER], DIGEST)
        .with_private_image(MIGRATE, &[USER], DIGEST)
        .with_private_image(BUSYBOX, &[], DIGEST)
}

/// A stock host: the policy server has no credentials for registry.example.com.
fn stock_registry() -> InMemoryHost {
    let unauthorized = |image: &str| {
        format!("error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Not authorized: url https://{image}")
    };
    InMemoryHost::new()
        .with_error(APP, &unauthorized(APP))
        .with_error(MIGRATE, &unauthorized(MIGRATE))
        .with_digest(BUSYBOX, DIGEST)
}

fn with_pod_secrets(mut request: Value, names: &[&str]) -> Value {
    let refs: Vec<Value> = names.iter().map(|s| json!({"name": s})).collect();
    request["object"]["spec"]["imagePullSecrets"] = json!(refs);
    request
}

/// The pod's `regcred` secret for registry.example.com, for `user`.
fn regcred(user: &str) -> Value {
    dockerconfigjson("regcred", "registry.example.com", user, PASSWORD)
}

fn credentialed() -> Value {
    json!({"pullSecrets": {"credentialedLookups": true}})
}

#[test]
fn pod_secrets_are_used_for_credentialed_lookups_in_one_batch() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = credentialed_registry().with_object(regcred(USER));
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
    assert_eq!(
        host.calls(),
        ["get Secret team-a/regcred", "resolve 3 within 1500ms"]
    );
}

#[test]
fn a_refused_pod_credential_is_reported_as_such() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = credentialed_registry().with_object(regcred("intruder"));
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true);
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings.iter().all(
            |w| w.contains("not authorized on registry registry.example.com")
                && w.contains("the pod's pull secrets for registry.example.com were refused")
        ),
        "{warnings:?}"
    );
}

#[test]
fn templates_use_their_service_accounts_secrets() {
    let mut request = fixture("deployment-create.json");
    request["object"]["spec"]["template"]["spec"]["serviceAccountName"] = json!("builder");
    let host = credentialed_registry()
        .with_object(service_account("builder", &["from-sa"]))
        .with_object(dockercfg(
            "from-sa",
            "https://registry.example.com",
            USER,
            PASSWORD,
        ));
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
    assert_eq!(
        host.calls(),
        [
            "get ServiceAccount team-a/builder",
            "get Secret team-a/from-sa",
            "resolve 3 within 1500ms"
        ]
    );
}

#[test]
fn templates_default_to_the_default_service_account() {
    let host = credentialed_registry()
        .with_object(service_account("default", &["regcred"]))
        .with_object(regcred(USER));
    let response = run(&fixture("statefulset-create.json"), credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(host.calls()[0], "get ServiceAccount team-a/default");
}

#[test]
fn a_templates_own_secrets_replace_the_service_accounts() {
    let mut request = fixture("job-create.json");
    request["object"]["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": "own"}]);
    let host = credentialed_registry()
        .with_object(service_account("default", &["regcred"]))
        .with_object(dockerconfigjson(
            "own",
            "registry.example.com",
            USER,
            PASSWORD,
        ));
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(
        host.calls(),
        ["get Secret team-a/own", "resolve 3 within 1500ms"]
    );
}

#[test]
fn pods_never_read_their_service_account() {
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["serviceAccountName"] = json!("builder");
    let host = credentialed_registry().with_object(service_account("builder", &["regcred"]));
    run(&request, credentialed(), &host);
    assert_eq!(
        host.calls(),
        ["resolve 3 within 1500ms"],
        "the SA plugin already ran for Pods"
    );
}

#[test]
fn a_missing_service_account_is_reported() {
    let mut request = fixture("daemonset-create.json");
    request["object"]["spec"]["template"]["spec"]["serviceAccountName"] = json!("ghost");
    let response = run(&request, json!({}), &stock_registry());
    assert_eq!(response["accepted"], true);
    let warnings = warnings(&response);
    assert!(warnings.iter().any(|w| w.starts_with("ServiceAccount \"team-a/ghost\": missing pull secret; allowed (actions.missingPullSecret: warn): ServiceAccount team-a/ghost does not exist")), "{warnings:?}");
}

#[test]
fn missing_and_mistyped_secrets_warn_and_malformed_ones_reject() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["nope", "opaque"]);
    let host = stock_registry().with_object(secret("opaque", "Opaque", "token", "x"));
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true);
    let warnings = warnings(&response);
    assert!(
        warnings.iter().any(|w| w
            .contains("pull secret \"team-a/nope\" (from the pod spec): missing pull secret")
            && w.contains("the kubelet skips it")),
        "{warnings:?}"
    );
    assert!(
        warnings.iter().any(|w| w.contains(
            "pull secret \"team-a/opaque\" (from the pod spec): pull secret of the wrong type"
        )),
        "{warnings:?}"
    );

    let request = with_pod_secrets(fixture("pod-create.json"), &["broken"]);
    let host = stock_registry().with_object(secret(
        "broken",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        &format!("{{\"auths\": {PASSWORD}"),
    ));
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(
        message
            .contains("pull secret \"team-a/broken\" (from the pod spec): malformed pull secret"),
        "{message}"
    );
    assert!(message.contains(".dockerconfigjson"), "{message}");
    assert!(!message.contains(PASSWORD), "{message}");
}

#[test]
fn unauthorized_images_no_secret_covers_are_named() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["other"]);
    let host = stock_registry().with_object(dockerconfigjson("other", "ghcr.io", USER, PASSWORD));
    let response = run(&request, json!({}), &host);
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings.iter().all(|w| w.contains("not authorized on registry registry.example.com; allowed (actions.uncoveredRegistry: warn): no pull secret in namespace team-a covers registry.example.com; Not authorized")), "{warnings:?}");
    let rejected = run(
        &request,
        json!({"actions": {"uncoveredRegistry": "reject"}}),
        &host,
    );
    assert_eq!(rejected["accepted"], false);
}

#[test]
fn covering_secrets_the_stock_host_cannot_use_are_explained() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = stock_registry().with_object(regcred(USER));
    let response = run(&request, json!({}), &host);
    let warnings = warnings(&response);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("not authorized on registry registry.example.com")),
        "{warnings:?}"
    );
    let full = run(
        &request,
        json!({"actions": {"unauthorized": "reject"}}),
        &host,
    );
    assert!(message(&full).contains("the pod's pull secrets cover registry.example.com but this check used the policy server's credentials"), "{full}");
}

#[test]
fn credentialed_lookups_fall_back_on_a_stock_host_and_say_so() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = stock_registry().with_object(regcred(USER));
    let response = run(&request, credentialed(), &host);
    let calls = host.calls();
    assert_eq!(calls[1], "resolve 3 within 1500ms");
    assert_eq!(host.digest_calls().len(), 3);
    let warnings = warnings(&response);
    assert!(warnings[0].starts_with("credentialed lookups (oci/v1/resolve_images) are not available here (unknown operation: v1/resolve_images)"), "{warnings:?}");
}

#[test]
fn with_the_setting_off_no_call_is_wasted() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = stock_registry().with_object(regcred(USER));
    run(&request, json!({}), &host);
    assert!(
        !host.calls().iter().any(|c| c.starts_with("resolve")),
        "{:?}",
        host.calls()
    );

    let host = stock_registry();
    run(
        &fixture("deployment-create.json"),
        json!({"pullSecrets": {"consult": false}}),
        &host,
    );
    assert!(
        !host.calls().iter().any(|c| c.starts_with("get")),
        "{:?}",
        host.calls()
    );
}

#[test]
fn denied_reads_are_said_once_and_lookups_go_on() {
    let denied = "error invoking host capability kubernetes.get_resource: Host error: Policy has not been granted access to Kubernetes v1/ServiceAccount resources. The violation has been reported.";
    let host = stock_registry().with_resource_error(denied);
    let response = run(&fixture("deployment-create.json"), credentialed(), &host);
    assert_eq!(response["accepted"], true);
    let warnings = warnings(&response);
    let notes: Vec<_> = warnings
        .iter()
        .filter(|w| w.starts_with("pull secrets were not consulted"))
        .collect();
    assert_eq!(notes.len(), 1, "{warnings:?}");
    assert!(notes[0]
        .contains("Policy has not been granted access to Kubernetes v1/ServiceAccount resources"));
    assert_eq!(host.digest_calls().len(), 3, "stock lookups still happen");
    assert!(
        !host.calls().iter().any(|c| c.starts_with("resolve")),
        "no credentialed lookup without secrets"
    );
    // Unconsulted secrets prove nothing about coverage: plain unauthorized, not uncovered.
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("allowed (actions.unauthorized: warn)")),
        "{warnings:?}"
    );
}

#[test]
fn no_secret_byte_reaches_any_output() {
    let auth = b64(format!("{USER}:{PASSWORD}"));
    let scenarios: Vec<(Value, InMemoryHost, Value)> = vec![
        (
            with_pod_secrets(fixture("pod-create.json"), &["regcred"]),
            credentialed_registry().with_object(regcred(USER)),
            credentialed(),
        ),
        (
            with_pod_secrets(fixture("pod-create.json"), &["regcred"]),
            credentialed_registry().with_object(regcred("intruder")),
            json!({"actions": {"unauthorized": "reject"}, "pullSecrets": {"credentialedLookups": true}}),
        ),
        (
            with_pod_secrets(fixture("pod-create.json"), &["regcred"]),
            stock_registry().with_object(regcred(USER)),
            json!({"actions": {"unauthorized": "allow"}}),
        ),
        (
            with_pod_secrets(fixture("pod-create.json"), &["broken"]),
            stock_registry().with_object(secret(
                "broken",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                &format!("{{\"auths\":{{\"r\":{{\"auth\":\"{PASSWORD}\"}}}}}}"),
            )),
            json!({}),
        ),
        (
            with_pod_secrets(fixture("pod-create.json"), &["broken"]),
            stock_registry().with_object(secret(
                "broken",
                "kubernetes.io/dockercfg",
                ".dockercfg",
                &format!("{USER}{PASSWORD}{auth}"),
            )),
            json!({}),
        ),
    ];
    for (request, host, settings) in scenarios {
        let response = run(&request, settings, &host).to_string();
        for secret in [USER, PASSWORD, auth.as_str()] {
            assert!(!response.contains(secret), "{secret} leaked: {response}");
        }
    }
}
