//! Digest pinning (`pinDigests`) through the whole decision path, natively, on the real
//! admission request fixtures: what is pinned, with which digest, and what is left alone.

use crate::common;

use common::*;

use serde_json::json;

const INDEX: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const SINGLE: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

#[test]
fn pinning_patches_pods_and_templates_with_the_resolved_digests() {
    let host = || {
        cluster()
            .with_digest(APP, INDEX)
            .with_digest(MIGRATE, SINGLE)
            .with_digest(BUSYBOX, SINGLE)
    };
    let pod = run(
        &fixture("pod-create.json"),
        json!({"pinDigests": true}),
        &host(),
    );
    assert_eq!(pod["accepted"], true);
    let spec = &pod["mutated_object"]["spec"];
    assert_eq!(spec["containers"][0]["image"], format!("{APP}@{INDEX}"));
    assert_eq!(
        spec["containers"][1]["image"],
        format!("busybox:1.36@{SINGLE}"),
        "the image keeps its spelling"
    );
    assert_eq!(
        spec["initContainers"][0]["image"],
        format!("{MIGRATE}@{SINGLE}")
    );

    let deployment = run(
        &fixture("deployment-create.json"),
        json!({"pinDigests": true}),
        &host(),
    );
    let spec = &deployment["mutated_object"]["spec"]["template"]["spec"];
    assert_eq!(spec["containers"][0]["image"], format!("{APP}@{INDEX}"));
    let mut expected = fixture("deployment-create.json")["object"].clone();
    expected["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!(format!("{APP}@{INDEX}"));
    expected["spec"]["template"]["spec"]["containers"][1]["image"] =
        json!(format!("busybox:1.36@{SINGLE}"));
    expected["spec"]["template"]["spec"]["initContainers"][0]["image"] =
        json!(format!("{MIGRATE}@{SINGLE}"));
    assert_eq!(
        deployment["mutated_object"], expected,
        "nothing else changes"
    );
}

#[test]
fn pinning_leaves_digests_and_unchecked_images_alone_and_never_mutates_a_rejection() {
    let mut request = fixture("pod-create.json");
    let pinned = format!("registry.example.com/team/app:1.4.2@{INDEX}");
    request["object"]["spec"]["containers"][0]["image"] = json!(pinned);
    request["object"]["spec"]["containers"][1]["imagePullPolicy"] = json!("Never");
    let host = cluster()
        .with_digest(&format!("registry.example.com/team/app@{INDEX}"), INDEX)
        .with_digest(MIGRATE, SINGLE);
    let response = run(&request, json!({"pinDigests": true}), &host);
    let spec = &response["mutated_object"]["spec"];
    assert_eq!(spec["containers"][0]["image"], pinned);
    assert_eq!(spec["containers"][1]["image"], "busybox:1.36");
    assert_eq!(
        spec["initContainers"][0]["image"],
        format!("{MIGRATE}@{SINGLE}")
    );

    let rejected = run(
        &fixture("pod-create.json"),
        json!({"pinDigests": true}),
        &cluster(),
    );
    assert_eq!(rejected["accepted"], false);
    assert!(rejected["mutated_object"].is_null());
    let off = run(
        &fixture("pod-create.json"),
        json!({}),
        &cluster()
            .with_digest(APP, INDEX)
            .with_digest(MIGRATE, SINGLE)
            .with_digest(BUSYBOX, SINGLE),
    );
    assert!(off["mutated_object"].is_null(), "pinning is off by default");
}

#[test]
fn invalid_pinning_settings_name_their_field() {
    let settings = json!({"pinDigests": "yes"});
    assert_invalid_settings_named(&settings, "pinDigests");
    // a request reads pinDigests when an image it checked has a digest to pin
    let host = cluster()
        .with_digest(APP, INDEX)
        .with_digest(MIGRATE, SINGLE)
        .with_digest(BUSYBOX, SINGLE);
    let response = run(&fixture("pod-create.json"), settings.clone(), &host);
    assert_eq!(response["code"], 400, "{response}");
    assert!(message(&response).contains("pinDigests"), "{response}");
}

#[test]
fn an_image_of_a_blocked_source_is_pinned_only_where_a_digest_pull_goes() {
    let mirror_app = "mirror.local:5000/example/team/app:1.4.2";
    let mirror_migrate = "mirror.local:5000/example/platform/migrate:2.1.0";
    let host = || {
        cluster()
            .with_digest(mirror_app, INDEX)
            .with_digest(mirror_migrate, SINGLE)
            .with_digest(BUSYBOX, SINGLE)
    };
    // a mirror for every reference: the digest pull asks it too
    let settings = |pull_from_mirror: &str| {
        json!({"pinDigests": true, "registries": [{"prefix": "registry.example.com",
            "blocked": true, "mirrors": [
                {"location": "mirror.local:5000/example", "pullFromMirror": pull_from_mirror}]}]})
    };
    let response = run(&fixture("pod-create.json"), settings("all"), &host());
    assert_eq!(response["accepted"], true, "{response}");
    let spec = &response["mutated_object"]["spec"];
    assert_eq!(spec["containers"][0]["image"], format!("{APP}@{INDEX}"));
    // a tag-only mirror: a digest pull asks no location at all, so nothing is pinned there
    let response = run(&fixture("pod-create.json"), settings("tag-only"), &host());
    assert_eq!(response["accepted"], true, "{response}");
    let spec = &response["mutated_object"]["spec"];
    assert_eq!(spec["containers"][0]["image"], APP, "{response}");
    assert_eq!(
        spec["containers"][1]["image"],
        format!("busybox:1.36@{SINGLE}")
    );
    let not_pinned = response["audit_annotations"]["resolvable-images/not-pinned"].to_string();
    assert!(
        not_pinned.contains("a pull by digest asks no location: nodes refuse pulls from registry.example.com (registries[0].blocked), and 1 mirror(s) of the rule serve only pulls by tag (pullFromMirror)"),
        "{not_pinned}"
    );
}
