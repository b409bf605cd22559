//! Required platforms (`requiredPlatforms`) through the whole decision path, natively, on the
//! real admission request fixtures: indexes, single manifests read from their config, Nodes.

use crate::common;

use common::*;

use resolvable_images_policy::host::InMemoryHost;
use serde_json::{json, Value};

const INDEX: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const SINGLE: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

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
fn invalid_platform_settings_name_their_field() {
    let cases = [(
        json!({"requiredPlatforms": ["linux/amd64", "arm64"]}),
        "requiredPlatforms[1]",
    )];
    for (settings, field) in cases {
        assert_settings_refused_naming(settings, field);
    }
}
