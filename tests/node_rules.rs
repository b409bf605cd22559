//! The node's exact rules: credentials sent to every location of a mirror chain as the
//! kubelet looks them up, pins only where a digest pull reaches the digest, and pods that fit
//! no node. Platform matching and scheduling have their unit tables in
//! `src/settings/platforms.rs` and `src/vocabulary/scheduling.rs`.

use crate::common;

use common::*;
use resolvable_images_policy::evaluate::NOT_PINNED_ANNOTATION;
use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::dockerconfigjson;
use serde_json::{json, Value};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
const MIRROR_DIGEST: &str =
    "sha256:2222222222222222222222222222222222222222222222222222222222222222";

/// A Pod with one container running `image`, whose pull secret is `regcred`.
fn pod_with_secret(image: &str) -> Value {
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["containers"] = json!([{"name": "app", "image": image}]);
    request["object"]["spec"]["initContainers"] = json!([]);
    request["object"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    request
}

fn mirrored(location: &str, pull_from_mirror: &str) -> Value {
    json!({"pullSecrets": {"credentialedLookups": true},
           "registries": [{"prefix": "registry.example.com", "mirrors": [
               {"location": location, "pullFromMirror": pull_from_mirror}]}]})
}

#[test]
fn credentials_follow_the_images_own_name_to_every_mirror() {
    // The mirror serves the image only to `alice`, whose secret is for the primary's name: the
    // kubelet finds it by the image's name and the runtime sends it to the mirror too.
    let image = "registry.example.com/team/app:1.4.2";
    let host = cluster()
        .with_object(dockerconfigjson(
            "regcred",
            "registry.example.com",
            "alice",
            "pw",
        ))
        .with_private_image("mirror.local/team/app:1.4.2", &["alice"], DIGEST);
    let response = run(
        &pod_with_secret(image),
        mirrored("mirror.local", "all"),
        &host,
    );
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
}

#[test]
fn a_secret_for_the_mirror_alone_is_not_sent_there() {
    // A secret for the mirror's own host does not match the image's name: the node pulls from
    // the mirror anonymously, and the mirror refuses.
    let image = "registry.example.com/team/app:1.4.2";
    let host = cluster()
        .with_object(dockerconfigjson("regcred", "mirror.local", "alice", "pw"))
        .with_private_image("mirror.local/team/app:1.4.2", &["alice"], DIGEST)
        .with_private_image(image, &["bob"], DIGEST);
    let response = run(
        &pod_with_secret(image),
        mirrored("mirror.local", "all"),
        &host,
    );
    assert_eq!(response["accepted"], true, "refusals are not certain");
    let warnings = warnings(&response);
    assert!(
        warnings[0].contains("not authorized on registry registry.example.com and its mirrors"),
        "{warnings:?}"
    );
    assert!(!response.to_string().contains("pw"));
}

#[test]
fn a_digest_found_on_a_tag_only_mirror_is_pinned_only_if_a_digest_pull_finds_it() {
    let image = "registry.example.com/team/app:1.4.2";
    let settings = json!({"pinDigests": true, "registries": [{"prefix": "registry.example.com",
        "mirrors": [{"location": "mirror.local", "pullFromMirror": "tag-only"}]}]});
    let mut request = pod_with_secret(image);
    request["object"]["spec"]["imagePullSecrets"] = json!([]);
    // The mirror's copy has another digest, which the primary does not have.
    let host = cluster().with_digest("mirror.local/team/app:1.4.2", MIRROR_DIGEST);
    let response = run(&request, settings.clone(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["mutated_object"].is_null(), "{response}");
    let why = response["audit_annotations"][NOT_PINNED_ANNOTATION]
        .as_str()
        .unwrap();
    assert!(why.contains("a pull by digest skips the tag-only mirror mirror.local and asks registry.example.com/team/app@sha256:2222"), "{why}");
    assert!(host
        .digest_calls()
        .contains(&format!("registry.example.com/team/app@{MIRROR_DIGEST}")));

    // The primary has the mirror's digest too: the pin is safe.
    let host = cluster()
        .with_digest("mirror.local/team/app:1.4.2", MIRROR_DIGEST)
        .with_digest(
            &format!("registry.example.com/team/app@{MIRROR_DIGEST}"),
            MIRROR_DIGEST,
        );
    let response = run(&request, settings, &host);
    assert_eq!(
        response["mutated_object"]["spec"]["containers"][0]["image"],
        json!(format!("{image}@{MIRROR_DIGEST}"))
    );
}

#[test]
fn a_pod_that_fits_no_node_is_not_this_policys_business() {
    let mut request = pod_with_secret("registry.example.com/team/app:1.4.2");
    request["object"]["spec"]["imagePullSecrets"] = json!([]);
    request["object"]["spec"]["nodeSelector"] = json!({"pool": "gpu"});
    let nodes = json!({"items": [{"metadata": {"name": "a", "labels": {
        "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "pool": "general"}}}]});
    let host: InMemoryHost = cluster()
        .with_nodes(nodes)
        .with_digest("registry.example.com/team/app:1.4.2", DIGEST)
        .with_manifest(
            &format!("registry.example.com/team/app@{DIGEST}"),
            json!({"manifests": [
            {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "s390x"}}]}),
        );
    let response = run(&request, json!({"requiredPlatforms": ["cluster"]}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("the pod fits no Node of the cluster")),
        "{warnings:?}"
    );
}
