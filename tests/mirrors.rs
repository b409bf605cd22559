//! Mirrors (`registries`) through the whole decision path, natively, on the real admission
//! request fixtures: the chain of locations, what is named, what is asked.

mod common;

use common::*;

use resolvable_images_policy::evaluate::MIRROR_ANNOTATION;
use serde_json::{json, Value};

const SINGLE: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

fn hub_mirror(pull_from_mirror: &str) -> Value {
    json!({"registries": [{"prefix": "registry.example.com", "mirrors": [
        {"location": "mirror.local:5000/example", "pullFromMirror": pull_from_mirror}]}]})
}

#[test]
fn a_mirror_that_has_the_image_is_enough_and_is_named() {
    let host = cluster()
        .with_digest("mirror.local:5000/example/team/app:1.4.2", SINGLE)
        .with_digest("mirror.local:5000/example/platform/migrate:2.1.0", SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let response = run(&fixture("deployment-create.json"), hub_mirror("all"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let annotation = response["audit_annotations"][MIRROR_ANNOTATION]
        .as_str()
        .unwrap();
    assert!(annotation.contains("container \"app\" registry.example.com/team/app:1.4.2: mirror.local:5000/example/team/app:1.4.2"), "{annotation}");
    assert!(
        !host.digest_calls().contains(&APP.to_owned()),
        "the primary is not asked once a mirror has it"
    );
}

#[test]
fn absent_everywhere_is_rejected_naming_every_location() {
    let host = cluster().with_digest(BUSYBOX, SINGLE);
    let response = run(&fixture("deployment-create.json"), hub_mirror("all"), &host);
    assert_eq!(response["accepted"], false);
    let message = message(&response);
    assert!(message.contains(
        "not found on registry registry.example.com and its mirrors: mirror mirror.local:5000/example/team/app:1.4.2: not found (Registry error"
    ), "{message}");
    assert!(
        message.contains("; primary registry.example.com/team/app:1.4.2: not found ("),
        "{message}"
    );
}

#[test]
fn a_digest_only_mirror_is_skipped_for_tags() {
    let host = cluster()
        .with_digest(APP, SINGLE)
        .with_digest(MIGRATE, SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let response = run(
        &fixture("deployment-create.json"),
        hub_mirror("digest-only"),
        &host,
    );
    assert_eq!(response["accepted"], true);
    assert!(
        host.digest_calls()
            .iter()
            .all(|c| !c.starts_with("mirror.local")),
        "{:?}",
        host.calls()
    );
}

#[test]
fn an_unreachable_mirror_with_an_absent_primary_is_uncertain() {
    let down = "error invoking host capability oci.manifest_digest: Host error: error sending request for url (https://mirror.local:5000/v2/)";
    let host = cluster()
        .with_error("mirror.local:5000/example/team/app:1.4.2", down)
        .with_digest("mirror.local:5000/example/platform/migrate:2.1.0", SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let response = run(&fixture("deployment-create.json"), hub_mirror("all"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = response["warnings"].to_string();
    assert!(warnings.contains("registry unreachable"), "{warnings}");
}

#[test]
fn invalid_mirror_settings_name_their_field() {
    let cases = [(
        json!({"registries": [{"prefix": "docker.io", "mirrors": [{"location": "m.local", "pullFromMirror": "sometimes"}]}]}),
        "registries[0].mirrors[0].pullFromMirror",
    )];
    for (settings, field) in cases {
        assert_settings_refused_naming(settings, field);
    }
    // prefixes and locations are checked when the settings are validated; a request, on
    // settings the host has validated, does not check them again
    for (settings, field) in [
        (
            json!({"registries": [{"prefix": "docker.io", "mirrors": [{"location": "https://m"}]}]}),
            "registries[0].mirrors[0].location",
        ),
        (
            json!({"registries": [{"prefix": "r "}]}),
            "registries[0].prefix",
        ),
    ] {
        assert_invalid_settings_named(&settings, field);
        let response = run(&fixture("pod-create.json"), settings.clone(), &cluster());
        // judged on its images (the empty fake registry has none), not refused for settings
        assert_eq!(response["code"], Value::Null, "{settings}: {response}");
        assert!(message(&response).contains("will not pull"), "{response}");
    }
}
