//! The credential loop: the kubelet tries every credential, whatever the error. Two pull secrets
//! against a registry that answers per user, through the whole decision path with credentialed
//! lookups: the image only the second secret sees is found; a refusal and a 404 is absent,
//! naming both secrets; a 500 and a 404 is uncertain; refusals alone are unauthorized. No
//! credential reaches any output.

use crate::common;

use common::*;

use resolvable_images_policy::host::{AttemptOutcome, InMemoryHost};
use resolvable_images_policy::testing::{b64, dockerconfigjson};
use serde_json::{json, Value};

const DIGEST: &str = "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
const APP: &str = "registry.example.com/team/app:1.4.2";
const MIGRATE: &str = "registry.example.com/platform/migrate:2.1.0";
const BUSYBOX: &str = "docker.io/library/busybox:1.36";
const PASSWORD: &str = "pw-loop-5d1b8e";
/// The users of the secrets `first` and `second`.
const FIRST_USER: &str = "robot-a-71c2";
const SECOND_USER: &str = "robot-b-0e9d";

fn credentialed() -> Value {
    json!({"pullSecrets": {"credentialedLookups": true}})
}

/// A Pod (app, init-schema on registry.example.com; busybox on Docker Hub) with the pull
/// secrets `first` ([`FIRST_USER`]) then `second` ([`SECOND_USER`]).
fn two_secrets(host: InMemoryHost) -> (Value, InMemoryHost) {
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["imagePullSecrets"] = json!([{"name": "first"}, {"name": "second"}]);
    let host = host
        .with_private_image(BUSYBOX, &[], DIGEST)
        .with_object(dockerconfigjson(
            "first",
            "registry.example.com",
            FIRST_USER,
            PASSWORD,
        ))
        .with_object(dockerconfigjson(
            "second",
            "registry.example.com",
            SECOND_USER,
            PASSWORD,
        ));
    (request, host)
}

/// Both private images answer `first` and `second` as given.
fn per_user(first: (AttemptOutcome, &str), second: (AttemptOutcome, &str)) -> InMemoryHost {
    let mut host = InMemoryHost::new();
    for image in [APP, MIGRATE] {
        host = host
            .with_user_answer(image, FIRST_USER, first.0, first.1)
            .with_user_answer(image, SECOND_USER, second.0, second.1);
    }
    host
}

#[test]
fn only_the_second_secret_sees_the_image_found() {
    let host = per_user(
        (
            AttemptOutcome::NotFound,
            "repository name not known to registry",
        ),
        (AttemptOutcome::Found, DIGEST),
    );
    let (request, host) = two_secrets(host);
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
    assert_eq!(
        host.calls(),
        [
            "get Secret team-a/first",
            "get Secret team-a/second",
            "resolve 3 within 1500ms"
        ]
    );
}

#[test]
fn a_refusal_and_a_404_is_absent_and_names_both_secrets() {
    let host = per_user(
        (AttemptOutcome::Unauthorized, "authentication required"),
        (AttemptOutcome::NotFound, "manifest unknown"),
    );
    let (request, host) = two_secrets(host);
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    for container in ["container \"app\"", "init container \"init-schema\""] {
        assert!(message.contains(container), "{message}");
    }
    assert!(
        message.contains(
            "not found on registry registry.example.com: every pull secret the kubelet would try failed: pull secret \"team-a/first\" was refused, pull secret \"team-a/second\" got 404 (authentication required; manifest unknown)"
        ),
        "{message}"
    );
}

#[test]
fn a_500_and_a_404_is_a_warning_never_absent() {
    let host = per_user(
        (AttemptOutcome::Unreachable, "500 Internal Server Error"),
        (AttemptOutcome::NotFound, "manifest unknown"),
    );
    let (request, host) = two_secrets(host);
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 2, "{response}");
    assert!(
        warnings.iter().all(|w| w.contains("registry unreachable")
            && w.contains("actions.unreachable")
            && w.contains("pull secret \"team-a/first\" got no definitive answer")),
        "{warnings:?}"
    );
    // a warning is cut to 256 bytes; a rejection says it all
    let settings =
        json!({"actions": {"unreachable": "reject"}, "pullSecrets": {"credentialedLookups": true}});
    let response = run(&request, settings, &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(
        message.contains("registry unreachable on registry registry.example.com: pull secret \"team-a/first\" got no definitive answer, pull secret \"team-a/second\" got 404: not certain, a later try might succeed (500 Internal Server Error; manifest unknown)"),
        "{message}"
    );
}

#[test]
fn refusals_alone_are_unauthorized() {
    let host = per_user(
        (AttemptOutcome::Unauthorized, "authentication required"),
        (
            AttemptOutcome::Unauthorized,
            "requested access to the resource is denied",
        ),
    );
    let (request, host) = two_secrets(host);
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 2, "{response}");
    assert!(
        warnings.iter().all(|w| w.contains("not authorized on registry registry.example.com")
            && w.contains("the pod's pull secrets for registry.example.com were refused: pull secrets \"team-a/f")),
        "{warnings:?}"
    );
    // a warning is cut to 256 bytes; a rejection says it all
    let settings = json!({"actions": {"unauthorized": "reject"}, "pullSecrets": {"credentialedLookups": true}});
    let response = run(&request, settings, &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(
        message.contains("the pod's pull secrets for registry.example.com were refused: pull secrets \"team-a/first\" and \"team-a/second\" (authentication required; requested access to the resource is denied)"),
        "{message}"
    );
}

#[test]
fn a_single_secret_with_a_404_is_absent_and_named() {
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["imagePullSecrets"] = json!([{"name": "only"}]);
    let host = per_user(
        (AttemptOutcome::NotFound, "manifest unknown"),
        (AttemptOutcome::NotFound, "manifest unknown"),
    )
    .with_private_image(BUSYBOX, &[], DIGEST)
    .with_object(dockerconfigjson(
        "only",
        "registry.example.com",
        FIRST_USER,
        PASSWORD,
    ));
    let response = run(&request, credentialed(), &host);
    assert_eq!(response["accepted"], false, "{response}");
    assert!(
        message(&response).contains("pull secret \"team-a/only\" got 404 (manifest unknown)"),
        "{response}"
    );
}

#[test]
fn no_credential_reaches_any_output() {
    let auth = b64(format!("{SECOND_USER}:{PASSWORD}"));
    for (first, second) in [
        (AttemptOutcome::Unauthorized, AttemptOutcome::NotFound),
        (AttemptOutcome::Unreachable, AttemptOutcome::NotFound),
        (AttemptOutcome::Unauthorized, AttemptOutcome::Unauthorized),
    ] {
        let host = per_user((first, "no"), (second, "no"));
        let (request, host) = two_secrets(host);
        let text = run(&request, credentialed(), &host).to_string();
        assert!(
            ![PASSWORD, FIRST_USER, SECOND_USER, &auth]
                .iter()
                .any(|secret| text.contains(secret)),
            "a credential leaked: {text}"
        );
    }
}
