//! Mirrors, required platforms, digest pinning and custom kinds through the whole decision
//! path, natively, on the real admission request fixtures.

mod common;

use common::*;

use resolvable_images_policy::evaluate::MIRROR_ANNOTATION;
use resolvable_images_policy::host::InMemoryHost;
use serde_json::{json, Value};

const INDEX: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
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

fn index(platforms: &[(&str, &str, Option<&str>)]) -> Value {
    let manifests: Vec<Value> = platforms
        .iter()
        .map(|(os, arch, variant)| {
            let mut platform = json!({"os": os, "architecture": arch});
            if let Some(v) = variant {
                platform["variant"] = json!(v);
            }
            json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": SINGLE, "size": 1, "platform": platform})
        })
        .collect();
    json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests})
}

/// APP is a multi-platform index without arm64 (and without arm, which arm64 nodes also run);
/// MIGRATE a single amd64 manifest; BUSYBOX has both.
fn platform_registry() -> InMemoryHost {
    cluster()
        .with_digest(APP, INDEX)
        .with_manifest(
            &format!("registry.example.com/team/app@{INDEX}"),
            index(&[("linux", "amd64", None), ("linux", "ppc64le", None)]),
        )
        .with_digest(MIGRATE, SINGLE)
        .with_manifest(
            &format!("registry.example.com/platform/migrate@{SINGLE}"),
            json!({"schemaVersion": 2, "config": {}, "layers": []}),
        )
        .with_config(
            &format!("registry.example.com/platform/migrate@{SINGLE}"),
            json!({"os": "linux", "architecture": "amd64"}),
        )
        .with_digest(BUSYBOX, INDEX)
        .with_manifest(
            &format!("docker.io/library/busybox@{INDEX}"),
            index(&[("linux", "amd64", None), ("linux", "arm64", Some("v8"))]),
        )
}

#[test]
fn an_index_missing_a_required_platform_is_rejected_naming_what_exists() {
    let host = platform_registry();
    let response = run(
        &fixture("deployment-create.json"),
        json!({"requiredPlatforms": ["linux/arm64"]}),
        &host,
    );
    assert_eq!(response["accepted"], false);
    let message = message(&response);
    assert!(message.contains(
        "container \"app\" image \"registry.example.com/team/app:1.4.2\": no manifest for a required platform on registry registry.example.com: no manifest for linux/arm64; the image has linux/amd64, linux/ppc64le"
    ), "{message}");
    assert!(
        message.contains("init container \"init-schema\""),
        "single manifests are read from their config: {message}"
    );
    assert!(
        message.contains("no manifest for linux/arm64; the image has linux/amd64."),
        "{message}"
    );
    assert!(
        !message.contains("sidecar"),
        "busybox serves arm64/v8: {message}"
    );
    let amd64 = run(
        &fixture("deployment-create.json"),
        json!({"requiredPlatforms": ["linux/amd64"]}),
        &platform_registry(),
    );
    assert_eq!(amd64["accepted"], true, "{amd64}");
}

#[test]
fn cluster_platforms_come_from_nodes_and_node_selectors_narrow_them() {
    let nodes = json!({"apiVersion": "v1", "kind": "NodeList", "items": [
        {"metadata": {"name": "a", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}}},
        {"metadata": {"name": "b", "labels": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}}}]});
    let host = platform_registry().with_nodes(nodes.clone());
    let response = run(
        &fixture("deployment-create.json"),
        json!({"requiredPlatforms": ["cluster"]}),
        &host,
    );
    assert_eq!(response["accepted"], false);
    assert!(message(&response).contains("no manifest for linux/arm64"));
    assert_eq!(
        host.calls().iter().filter(|c| *c == "list Node").count(),
        1,
        "Nodes are listed once"
    );

    let mut pinned_to_amd64 = fixture("deployment-create.json");
    pinned_to_amd64["object"]["spec"]["template"]["spec"]["nodeSelector"] =
        json!({"kubernetes.io/arch": "amd64"});
    let response = run(
        &pinned_to_amd64,
        json!({"requiredPlatforms": ["cluster"]}),
        &platform_registry().with_nodes(nodes),
    );
    assert_eq!(response["accepted"], true, "{response}");
}

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

fn workflow(images: &[&str]) -> Value {
    let templates: Vec<Value> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("step{i}"), "container": {"image": image, "command": ["true"]}}))
        .collect();
    json!({
        "uid": "3b6f0a3e-0000-4000-8000-000000000001",
        "kind": {"group": "argoproj.io", "version": "v1alpha1", "kind": "Workflow"},
        "resource": {"group": "argoproj.io", "version": "v1alpha1", "resource": "workflows"},
        "name": "build", "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                   "metadata": {"name": "build", "namespace": "team-a"},
                   "spec": {"entrypoint": "step0", "templates": templates}},
        "oldObject": null
    })
}

fn argo() -> Value {
    json!({"customResources": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
                                "images": ["$.spec.templates[*].container.image"]}]})
}

#[test]
fn custom_kinds_are_checked_through_their_jsonpath() {
    let host = cluster().with_digest("docker.io/library/alpine:3.20", SINGLE);
    let response = run(&workflow(&["alpine:3.20", "alpine:3.99"]), argo(), &host);
    assert_eq!(response["accepted"], false);
    let message = message(&response);
    assert!(
        message.starts_with("Workflow team-a/build: 1 image will not pull:"),
        "{message}"
    );
    assert!(message.contains(
        "image field \"$['spec']['templates'][1]['container']['image']\" image \"alpine:3.99\" (docker.io/library/alpine:3.99): not found on registry docker.io"
    ), "{message}");
    assert!(
        !host.calls().iter().any(|c| c.starts_with("get")),
        "bare image fields have no pull secrets"
    );

    let unconfigured = run(&workflow(&["alpine:3.99"]), json!({}), &cluster());
    assert_eq!(
        unconfigured["accepted"], true,
        "kinds not configured are not looked at"
    );
}

#[test]
fn custom_kinds_with_pod_specs_use_pull_secrets_and_pin_through_pointers() {
    let request = json!({
        "kind": {"group": "serving.knative.dev", "version": "v1", "kind": "Service"},
        "name": "hello", "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "serving.knative.dev/v1", "kind": "Service", "metadata": {"name": "hello"},
                   "spec": {"template": {"spec": {"serviceAccountName": "builder",
                       "containers": [{"image": "ghcr.io/org/hello:1"}]}}}}
    });
    let settings = json!({"pinDigests": true, "customResources": [{"apiVersion": "serving.knative.dev/v1",
        "kind": "Service", "podSpecs": ["$.spec.template.spec"]}]});
    let host = cluster()
        .with_object(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": "team-a"}}))
        .with_digest("ghcr.io/org/hello:1", SINGLE);
    let response = run(&request, settings, &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(host.calls()[0], "get ServiceAccount team-a/builder");
    assert_eq!(
        response["mutated_object"]["spec"]["template"]["spec"]["containers"][0]["image"],
        format!("ghcr.io/org/hello:1@{SINGLE}")
    );
}

#[test]
fn invalid_feature_settings_name_their_field() {
    let cases = [
        (
            json!({"registries": [{"prefix": "docker.io", "mirrors": [{"location": "https://m"}]}]}),
            "registries[0].mirrors[0].location",
        ),
        (
            json!({"registries": [{"prefix": "docker.io", "mirrors": [{"location": "m.local", "pullFromMirror": "sometimes"}]}]}),
            "registries[0].mirrors[0].pullFromMirror",
        ),
        (
            json!({"requiredPlatforms": ["linux/amd64", "arm64"]}),
            "requiredPlatforms[1]",
        ),
        (
            json!({"customResources": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "images": ["$[?"]}]}),
            "customResources[0].images[0]",
        ),
        (json!({"pinDigests": "yes"}), "pinDigests"),
    ];
    for (settings, field) in cases {
        let response = run(&fixture("pod-create.json"), settings.clone(), &cluster());
        assert_eq!(response["code"], 400, "{settings}");
        assert!(
            message(&response).contains(field),
            "{settings}: {}",
            message(&response)
        );
    }
}
