//! Custom kinds (`customResources`) through the whole decision path, natively: image fields
//! and pod specs found by JSONPath, their pull secrets, and pinning through their pointers.

use crate::common;

use common::*;

use serde_json::{json, Value};

const SINGLE: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

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
fn invalid_custom_kind_settings_name_their_field() {
    let cases = [(
        json!({"customResources": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "images": ["$[?"]}]}),
        "customResources[0].images[0]",
    )];
    for (settings, field) in cases {
        // validate_settings refuses the document, naming the path; a request of the kind is
        // refused with the same words (paths are compiled per request only for their kind)
        assert_invalid_settings_named(&settings, field);
        let response = run(&workflow(&["ghcr.io/a/b:1"]), settings.clone(), &cluster());
        assert_eq!(response["code"], 400, "{settings}");
        assert!(
            message(&response).contains("customResources.images[0]"),
            "{}",
            message(&response)
        );
    }
}
