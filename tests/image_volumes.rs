//! Image volumes (`volumes[].image`, KEP-4639) through the whole decision path, natively, on
//! the real admission request fixtures: every kind's pod spec, their own pull policy, invalid
//! references, UPDATE, one lookup per reference shared with a container, pull secrets,
//! exemptions, mirrors, custom kinds, pinning and platforms.

use crate::common;

use common::*;

use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::dockerconfigjson;
use serde_json::{json, Value};

const DIGEST: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
const MODEL: &str = "registry.example.com/ml/model:v1";
const MISSING: &str = "registry.example.com/ml/model:v9";

/// Where `request`'s object keeps its pod spec.
fn pod_spec_pointer(request: &Value) -> &'static str {
    match request["kind"]["kind"].as_str() {
        Some("Pod") => "/object/spec",
        Some("CronJob") => "/object/spec/jobTemplate/spec/template/spec",
        _ => "/object/spec/template/spec",
    }
}

/// `fixture` with `volumes` appended to the pod spec of its object (and of its oldObject
/// when `old` is set).
fn with_volumes(mut request: Value, volumes: Value, old: bool) -> Value {
    let spec = pod_spec_pointer(&request);
    let mut targets = vec![spec.to_owned()];
    if old {
        targets.push(spec.replacen("/object", "/oldObject", 1));
    }
    for target in targets {
        let spec = request
            .pointer_mut(&target)
            .expect("the fixture has a pod spec");
        let list = spec["volumes"].as_array().cloned().unwrap_or_default();
        let mut list = list;
        list.extend(volumes.as_array().cloned().unwrap_or_default());
        spec["volumes"] = json!(list);
    }
    request
}

/// An image volume named `name` mounting `reference`.
fn image_volume(name: &str, reference: &str) -> Value {
    json!({"name": name, "image": {"reference": reference, "pullPolicy": "IfNotPresent"}})
}

/// A cluster where the fixtures' images and MODEL exist.
fn registry() -> InMemoryHost {
    cluster()
        .with_digest(APP, DIGEST)
        .with_digest(MIGRATE, DIGEST)
        .with_digest(BUSYBOX, DIGEST)
        .with_digest(MODEL, DIGEST)
}

#[test]
fn a_missing_image_volume_is_rejected_naming_the_volume_in_every_kind() {
    for (file, kind) in [
        ("pod-create.json", "Pod"),
        ("deployment-create.json", "Deployment"),
        ("replicaset-create.json", "ReplicaSet"),
        ("statefulset-create.json", "StatefulSet"),
        ("daemonset-create.json", "DaemonSet"),
        ("job-create.json", "Job"),
        ("cronjob-create.json", "CronJob"),
        ("replicationcontroller-create.json", "ReplicationController"),
    ] {
        let request = with_volumes(
            fixture(file),
            json!([image_volume("model", MISSING)]),
            false,
        );
        let host = registry();
        let response = run(&request, json!({}), &host);
        assert_eq!(response["accepted"], false, "{file}: {response}");
        let message = message(&response);
        assert!(
            message.starts_with(&format!("{kind} team-a/web: 1 image will not pull:")),
            "{file}: {message}"
        );
        assert!(
            message.contains(&format!(
                "- volume \"model\" image \"{MISSING}\": not found on registry registry.example.com"
            )),
            "{file}: {message}"
        );
        assert!(host.digest_calls().contains(&MISSING.to_owned()), "{file}");

        let present = with_volumes(fixture(file), json!([image_volume("model", MODEL)]), false);
        let response = run(&present, json!({}), &registry());
        assert_eq!(response["accepted"], true, "{file}: {response}");
        assert!(response["warnings"].is_null(), "{file}: {response}");
    }
}

#[test]
fn the_image_volume_fixture_is_checked_and_pinned_where_the_api_server_keeps_it() {
    let request = fixture("pod-image-volume-create.json");
    let response = run(&request, json!({"pinDigests": true}), &registry());
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(
        response["mutated_object"]["spec"]["volumes"][0]["image"],
        json!({"reference": format!("{MODEL}@{DIGEST}"), "pullPolicy": "IfNotPresent"})
    );
    assert_eq!(
        response["mutated_object"]["spec"]["volumes"][1], request["object"]["spec"]["volumes"][1],
        "other volumes are left alone"
    );

    let host = registry().with_error(MODEL, "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://registry.example.com/v2/ml/model/manifests/v1, envelope: OCI API errors: [OCI API error: manifest unknown]");
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], false, "{response}");
    assert!(
        message(&response).contains(&format!(
            "- volume \"model\" image \"{MODEL}\": not found on registry registry.example.com"
        )),
        "{}",
        message(&response)
    );
}

#[test]
fn a_volume_is_pulled_by_its_own_pull_policy_defaulted_as_a_containers() {
    let never = with_volumes(
        fixture("deployment-create.json"),
        json!([{"name": "model", "image": {"reference": MISSING, "pullPolicy": "Never"}}]),
        false,
    );
    let host = registry();
    let response = run(&never, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
    assert!(
        !host.calls().iter().any(|c| c.contains("ml/model")),
        "Never is not looked up: {:?}",
        host.calls()
    );

    // no pullPolicy (a template, not yet defaulted): IfNotPresent for a tag, Always for latest;
    // the container's imagePullPolicy has no say
    for reference in [MISSING, "registry.example.com/ml/model"] {
        let request = with_volumes(
            fixture("deployment-create.json"),
            json!([{"name": "model", "image": {"reference": reference}}]),
            false,
        );
        let host = registry().with_nodes(json!({"items": [{"metadata": {"name": "n1"},
            "status": {"images": [{"names": [
                format!("{MISSING}"), "registry.example.com/ml/model:latest"]}]}}]}));
        let response = run(&request, json!({}), &host);
        if reference == MISSING {
            assert_eq!(response["accepted"], true, "{response}");
            let warnings = warnings(&response);
            assert!(
                warnings.iter().any(|w| w.starts_with(&format!(
                    "volume \"model\" image \"{MISSING}\": not found (cached on nodes)"
                )) && w.contains("before 1.35 any pod starts from it")),
                "IfNotPresent: a node holding it starts the pod: {warnings:?}"
            );
        } else {
            assert_eq!(
                response["accepted"], false,
                "Always pulls whatever the nodes hold: {response}"
            );
        }
    }
}

#[test]
fn an_invalid_volume_reference_is_refused_without_a_lookup_whatever_its_pull_policy() {
    for policy in ["IfNotPresent", "Never"] {
        let request = with_volumes(
            fixture("pod-create.json"),
            json!([{"name": "model", "image": {"reference": "registry.example.com/ML/Model:v1", "pullPolicy": policy}}]),
            false,
        );
        let host = registry();
        let response = run(&request, json!({}), &host);
        assert_eq!(response["accepted"], false, "{policy}: {response}");
        let message = message(&response);
        assert!(
            message.contains("- volume \"model\" image \"registry.example.com/ML/Model:v1\": invalid image reference: repository path component \"ML\" has uppercase letters"),
            "{policy}: {message}"
        );
        assert!(
            !host.calls().iter().any(|c| c.contains("ML")),
            "{:?}",
            host.calls()
        );
    }
}

#[test]
fn a_reference_shared_by_a_container_and_a_volume_is_looked_up_once() {
    // the same image, spelled as the fixture's container spells it and otherwise
    let request = with_volumes(
        fixture("pod-create.json"),
        json!([
            image_volume("same", "registry.example.com/team/app:1.4.2"),
            image_volume("busybox", "docker.io/library/busybox:1.36"),
            image_volume("also-busybox", "index.docker.io/library/busybox:1.36")
        ]),
        false,
    );
    let host = registry();
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let calls = host.digest_calls();
    assert_eq!(calls.iter().filter(|c| *c == APP).count(), 1, "{calls:?}");
    assert_eq!(
        calls.iter().filter(|c| *c == BUSYBOX).count(),
        1,
        "{calls:?}"
    );
    assert_eq!(calls.len(), 3, "{calls:?}");
}

#[test]
fn updates_check_only_new_volumes_unless_the_credentials_changed() {
    // the running volume's tag has since been deleted: scaling is not blocked
    let scale = with_volumes(
        fixture("deployment-update-scale.json"),
        json!([image_volume("model", MISSING)]),
        true,
    );
    let host = registry();
    let response = run(&scale, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(host.digest_calls().is_empty(), "{:?}", host.calls());

    // a volume added by the update is checked
    let added = with_volumes(
        fixture("deployment-update-scale.json"),
        json!([image_volume("model", MISSING)]),
        false,
    );
    let response = run(&added, json!({}), &registry());
    assert_eq!(response["accepted"], false, "{response}");
    assert!(message(&response).contains("volume \"model\""));

    // new pull secrets: the new pods pull everything afresh, the volume too
    let mut recredentialed = scale.clone();
    recredentialed["object"]["spec"]["template"]["spec"]["imagePullSecrets"] =
        json!([{"name": "regcred"}]);
    let host = registry().with_object(dockerconfigjson(
        "regcred",
        "registry.example.com",
        "robot",
        "pa55",
    ));
    let response = run(&recredentialed, json!({}), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(message.contains("volume \"model\""), "{message}");
    assert!(!message.contains("pa55"), "{message}");
}

#[test]
fn volumes_are_looked_up_with_the_pods_own_credentials() {
    let mut request = with_volumes(
        fixture("pod-create.json"),
        json!([image_volume("model", MODEL)]),
        false,
    );
    request["object"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    let private = |user: &str| {
        InMemoryHost::new()
            .with_private_image(APP, &[], DIGEST)
            .with_private_image(MIGRATE, &[], DIGEST)
            .with_private_image(BUSYBOX, &[], DIGEST)
            .with_private_image(MODEL, &["robot"], DIGEST)
            .with_object(dockerconfigjson(
                "regcred",
                "registry.example.com",
                user,
                "pa55",
            ))
    };
    let settings = json!({"pullSecrets": {"credentialedLookups": true},
                          "actions": {"unauthorized": "reject"}});
    let response = run(&request, settings.clone(), &private("robot"));
    assert_eq!(response["accepted"], true, "{response}");
    let response = run(&request, settings, &private("intruder"));
    assert_eq!(response["accepted"], false, "{response}");
    assert!(
        message(&response).contains(&format!("volume \"model\" image \"{MODEL}\"")),
        "{response}"
    );
}

#[test]
fn exemptions_and_mirrors_apply_to_volumes() {
    let request = with_volumes(
        fixture("pod-create.json"),
        json!([image_volume("model", MISSING)]),
        false,
    );
    let host = registry();
    let response = run(
        &request,
        json!({"exemptImages": ["registry.example.com/ml/*"]}),
        &host,
    );
    assert_eq!(response["accepted"], true, "{response}");
    assert!(!host.digest_calls().contains(&MISSING.to_owned()));

    let mirrored = "mirror.internal/ml/model:v9";
    let host = registry().with_digest(mirrored, DIGEST);
    let settings = json!({"registries": [{"prefix": "registry.example.com/ml",
        "mirrors": [{"location": "mirror.internal/ml"}]}]});
    let response = run(&request, settings, &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(
        response["audit_annotations"]["resolvable-images/resolved-from-mirror"],
        json!(format!("volume \"model\" {MISSING}: {mirrored}")),
        "{response}"
    );
}

#[test]
fn custom_kinds_pod_specs_have_their_volumes_read() {
    let request = json!({
        "uid": "3b6f0a3e-0000-4000-8000-000000000002",
        "kind": {"group": "serving.knative.dev", "version": "v1", "kind": "Service"},
        "resource": {"group": "serving.knative.dev", "version": "v1", "resource": "services"},
        "name": "hello", "namespace": "team-a", "operation": "CREATE",
        "object": {"apiVersion": "serving.knative.dev/v1", "kind": "Service",
            "metadata": {"name": "hello", "namespace": "team-a"},
            "spec": {"template": {"spec": {
                "containers": [{"image": "docker.io/library/busybox:1.36"}],
                "volumes": [image_volume("model", MISSING)]}}}},
        "oldObject": null
    });
    let settings = json!({"customResources": [{"apiVersion": "serving.knative.dev/v1",
        "kind": "Service", "podSpecs": ["$.spec.template.spec"]}],
        "pinDigests": true});
    let response = run(&request, settings.clone(), &registry());
    assert_eq!(response["accepted"], false, "{response}");
    assert!(
        message(&response).contains(&format!("volume \"model\" image \"{MISSING}\"")),
        "{response}"
    );
    let mut present = request.clone();
    present["object"]["spec"]["template"]["spec"]["volumes"][0]["image"]["reference"] =
        json!(MODEL);
    let response = run(&present, settings, &registry());
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(
        response["mutated_object"]["spec"]["template"]["spec"]["volumes"][0]["image"]["reference"],
        json!(format!("{MODEL}@{DIGEST}")),
        "{response}"
    );
}

#[test]
fn pinning_rewrites_the_volume_reference_and_nothing_else_of_it() {
    for file in [
        "pod-create.json",
        "deployment-create.json",
        "cronjob-create.json",
    ] {
        let request = with_volumes(fixture(file), json!([image_volume("model", MODEL)]), false);
        let response = run(&request, json!({"pinDigests": true}), &registry());
        assert_eq!(response["accepted"], true, "{file}: {response}");
        let mut expected = request["object"].clone();
        let spec = pod_spec_pointer(&request).trim_start_matches("/object");
        let pod_spec = expected.pointer_mut(spec).expect("pod spec");
        for (list, index) in [("initContainers", 0), ("containers", 0), ("containers", 1)] {
            let image = pod_spec[list][index]["image"].as_str().unwrap().to_owned();
            pod_spec[list][index]["image"] = json!(format!("{image}@{DIGEST}"));
        }
        let volumes = pod_spec["volumes"].as_array_mut().unwrap();
        let last = volumes.len() - 1;
        volumes[last]["image"]["reference"] = json!(format!("{MODEL}@{DIGEST}"));
        assert_eq!(response["mutated_object"], expected, "{file}");
    }
}

#[test]
fn a_mounted_image_needs_no_platform_unless_an_index_offers_a_choice() {
    let single = format!("registry.example.com/ml/model@{DIGEST}");
    let artifact = json!({"schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": "application/vnd.example.model.v1",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json",
                   "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "size": 2},
        "layers": [{"mediaType": "application/vnd.example.weights", "digest": DIGEST, "size": 9}]});
    let settings = json!({"requiredPlatforms": ["linux/amd64", "linux/arm64"]});
    let platforms = |host: InMemoryHost| {
        let index = json!({"manifests": [
            {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}},
            {"digest": "sha256:bb", "platform": {"os": "linux", "architecture": "arm64"}}]});
        host.with_manifest(
            &format!("{}@{DIGEST}", APP.split(':').next().unwrap()),
            index.clone(),
        )
        .with_manifest(
            &format!("{}@{DIGEST}", MIGRATE.split(':').next().unwrap()),
            index.clone(),
        )
        .with_manifest(&format!("docker.io/library/busybox@{DIGEST}"), index)
    };
    let request = with_volumes(
        fixture("pod-create.json"),
        json!([image_volume("model", MODEL)]),
        false,
    );
    let host = platforms(registry()).with_manifest(&single, artifact.clone());
    let response = run(&request, settings.clone(), &host);
    assert_eq!(
        response["accepted"], true,
        "an artifact mounts anywhere: {response}"
    );
    assert!(response["warnings"].is_null(), "{response}");
    assert!(
        !host
            .calls()
            .iter()
            .any(|c| c == &format!("config {single}")),
        "an artifact's config is not an image config: {:?}",
        host.calls()
    );

    // the same artifact as a container's image cannot run anywhere
    let mut run_it = fixture("pod-create.json");
    run_it["object"]["spec"]["containers"][1]["image"] = json!(MODEL);
    let host = platforms(registry())
        .with_manifest(&single, artifact)
        .with_config(&single, json!({}));
    let response = run(&run_it, settings.clone(), &host);
    assert_eq!(response["accepted"], false, "{response}");
    assert!(message(&response).contains("container \"sidecar\""));

    // an index of one platform: arm64 nodes find no entry to mount
    let amd64_only = json!({"manifests": [
        {"digest": "sha256:aa", "platform": {"os": "linux", "architecture": "amd64"}}]});
    let host = platforms(registry()).with_manifest(&single, amd64_only);
    let response = run(&request, settings, &host);
    assert_eq!(response["accepted"], false, "{response}");
    assert!(
        message(&response).contains(&format!(
            "- volume \"model\" image \"{MODEL}\": no manifest for a required platform on registry registry.example.com: no manifest for linux/arm64; the image has linux/amd64"
        )),
        "{}",
        message(&response)
    );
}
