//! Mirrors (`registries`) through the whole decision path, natively, on the real admission
//! request fixtures: the chain of locations, what is named, what is asked.

use crate::common;

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

/// registry.example.com's rule, blocked (the nodes never contact it), with `mirrors`.
fn blocked_source(mirrors: Value) -> Value {
    json!({"registries": [{"prefix": "registry.example.com", "blocked": true, "mirrors": mirrors}]})
}

const APP_ON_MIRROR: &str = "mirror.local:5000/example/team/app:1.4.2";
const MIGRATE_ON_MIRROR: &str = "mirror.local:5000/example/platform/migrate:2.1.0";

#[test]
fn a_blocked_source_is_never_asked_and_its_mirror_decides() {
    let settings = blocked_source(json!([{"location": "mirror.local:5000/example"}]));
    // on the mirror: accepted, and the audit annotation names the mirror
    let host = cluster()
        .with_digest(APP_ON_MIRROR, SINGLE)
        .with_digest(MIGRATE_ON_MIRROR, SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let response = run(&fixture("deployment-create.json"), settings.clone(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let annotation = response["audit_annotations"][MIRROR_ANNOTATION].to_string();
    assert!(annotation.contains(APP_ON_MIRROR), "{annotation}");
    // only at the source: absent, naming the location asked and the refused prefix
    let host = cluster()
        .with_digest(APP, SINGLE)
        .with_digest(MIGRATE_ON_MIRROR, SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let response = run(&fixture("deployment-create.json"), settings, &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(message.starts_with("Deployment team-a/web: "), "{message}");
    assert!(message.contains(&format!(
        "container \"app\" image \"{APP}\": not found on {APP_ON_MIRROR} (the nodes refuse pulls from registry.example.com): "
    )), "{message}");
    assert!(
        message.contains(&format!(
            "Hint: the nodes pull it only from {APP_ON_MIRROR}"
        )),
        "{message}"
    );
    assert!(
        host.digest_calls()
            .iter()
            .all(|call| !call.starts_with("registry.example.com")),
        "the source is never asked: {:?}",
        host.calls()
    );
}

#[test]
fn an_uncertain_mirror_of_a_blocked_source_is_a_warning() {
    let down = "error invoking host capability oci.manifest_digest: Host error: error sending request for url (https://mirror.local:5000/v2/)";
    let host = cluster()
        .with_error(APP_ON_MIRROR, down)
        .with_digest(APP, SINGLE)
        .with_digest(MIGRATE_ON_MIRROR, SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let settings = blocked_source(json!([{"location": "mirror.local:5000/example"}]));
    let response = run(&fixture("deployment-create.json"), settings, &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("registry unreachable on mirror.local:5000/example/team/app:1.4.2 (the nodes refuse pulls from registry.example.com); allowed (actions.unreachable: warn)"),
        "{warnings:?}"
    );
}

#[test]
fn a_blocked_source_without_a_mirror_for_the_reference_is_refused_unasked() {
    // no mirror; a digest-only mirror for tag references
    for mirrors in [
        json!([]),
        json!([{"location": "mirror.local:5000/example", "pullFromMirror": "digest-only"}]),
    ] {
        let host = cluster()
            .with_digest(APP, SINGLE)
            .with_digest(MIGRATE, SINGLE)
            .with_digest(BUSYBOX, SINGLE);
        let response = run(
            &fixture("deployment-create.json"),
            blocked_source(mirrors.clone()),
            &host,
        );
        assert_eq!(response["accepted"], false, "{mirrors}: {response}");
        let message = message(&response);
        assert!(
            message.starts_with("Deployment team-a/web: 2 images will not pull:"),
            "{message}"
        );
        assert!(message.contains(&format!(
            "container \"app\" image \"{APP}\": refused by the nodes on registry registry.example.com: nodes refuse pulls from registry.example.com (registries[0].blocked)"
        )), "{message}");
        assert!(
            message.contains("init container \"init-schema\" image"),
            "{message}"
        );
        assert_eq!(
            host.digest_calls(),
            [BUSYBOX],
            "{mirrors}: no lookup for a refused image"
        );
    }
}

#[test]
fn a_blocked_image_cached_on_nodes_is_a_warning_for_if_not_present() {
    let nodes = json!({"apiVersion": "v1", "kind": "NodeList", "items": [
        {"metadata": {"name": "node-1"},
         "status": {"images": [{"names": [APP, MIGRATE], "sizeBytes": 10}]}}]});
    let host = cluster().with_digest(BUSYBOX, SINGLE).with_nodes(nodes);
    let response = run(
        &fixture("deployment-create.json"),
        blocked_source(json!([])),
        &host,
    );
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[1].starts_with(&format!("container \"app\" image \"{APP}\": refused by the nodes (cached on nodes); allowed (actions.cachedOnNodes: warn): before 1.35 any pod starts from it; from 1.35, by default, only one preloaded or pulled without pod credentials")),
        "{warnings:?}"
    );
}

#[test]
fn a_blocked_setting_that_is_no_boolean_is_refused_naming_it() {
    for blocked in [json!("true"), json!(1), json!([])] {
        assert_settings_refused_naming(
            json!({"registries": [{"prefix": "registry.example.com", "blocked": blocked}]}),
            "registries[0].blocked",
        );
    }
}

#[test]
fn a_blocked_search_registry_is_skipped_and_refused_only_when_none_is_left() {
    let settings = |blocked: &[&str]| {
        let rules: Vec<Value> = blocked
            .iter()
            .map(|prefix| json!({"prefix": prefix, "blocked": true}))
            .collect();
        json!({"shortNames": {"mode": "permissive",
            "searchRegistries": ["quay.example.com", "docker.io"]}, "registries": rules})
    };
    let host = cluster()
        .with_digest(APP, SINGLE)
        .with_digest(MIGRATE, SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    // the sidecar's busybox:1.36: quay.example.com is refused, docker.io still asked
    let response = run(
        &fixture("pod-create.json"),
        settings(&["quay.example.com"]),
        &host,
    );
    assert_eq!(response["accepted"], true, "{response}");
    assert!(
        host.digest_calls()
            .iter()
            .all(|call| !call.starts_with("quay.example.com")),
        "{:?}",
        host.calls()
    );
    assert!(host.digest_calls().contains(&BUSYBOX.to_owned()));
    // absent where it is asked: the refused search registry is not named as asked
    let host = cluster()
        .with_digest(APP, SINGLE)
        .with_digest(MIGRATE, SINGLE);
    let response = run(
        &fixture("pod-create.json"),
        settings(&["quay.example.com"]),
        &host,
    );
    assert_eq!(response["accepted"], false, "{response}");
    let absent = message(&response);
    assert!(
        absent.contains(
            "(quay.example.com/busybox:1.36): not found on search registries docker.io: "
        ),
        "{absent}"
    );
    // both refused: no location is left
    let host = cluster()
        .with_digest(APP, SINGLE)
        .with_digest(MIGRATE, SINGLE);
    let response = run(
        &fixture("pod-create.json"),
        settings(&["quay.example.com", "docker.io"]),
        &host,
    );
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(message.contains("container \"sidecar\" image \"busybox:1.36\" (quay.example.com/busybox:1.36): refused by the nodes on search registries quay.example.com, docker.io: nodes refuse pulls from quay.example.com (registries[0].blocked), with no mirror: no location is left to pull from; nodes refuse pulls from docker.io (registries[1].blocked)"), "{message}");
    assert!(
        host.digest_calls()
            .iter()
            .all(|call| !call.contains("busybox")),
        "{:?}",
        host.calls()
    );
}
