use super::*;
use crate::vocabulary::object::Object;
use serde_json::json;

/// Reads the pod spec of `object` from its JSON, as a request's object is read.
fn read(kind: WorkloadKind, object: &Value) -> Result<PodSpecView, WorkloadError> {
    let raw = serde_json::value::to_raw_value(object).expect("raw");
    read_pod_spec(
        kind,
        Object::new(Some(raw.get())).at(kind.pod_spec_pointer()),
    )
}

#[test]
fn every_kind_maps_from_its_group() {
    let cases = [
        ("", "Pod", WorkloadKind::Pod),
        (
            "",
            "ReplicationController",
            WorkloadKind::ReplicationController,
        ),
        ("apps", "Deployment", WorkloadKind::Deployment),
        ("apps", "ReplicaSet", WorkloadKind::ReplicaSet),
        ("apps", "StatefulSet", WorkloadKind::StatefulSet),
        ("apps", "DaemonSet", WorkloadKind::DaemonSet),
        ("batch", "Job", WorkloadKind::Job),
        ("batch", "CronJob", WorkloadKind::CronJob),
    ];
    for (group, kind, expected) in cases {
        assert_eq!(WorkloadKind::from_group_kind(group, kind), Some(expected));
        assert_eq!(expected.as_str(), kind);
    }
    assert_eq!(
        WorkloadKind::from_group_kind("extensions", "Deployment"),
        None
    );
    assert_eq!(WorkloadKind::from_group_kind("", "ConfigMap"), None);
}

#[test]
fn lists_all_three_container_lists_in_start_order() {
    let pod = json!({"spec": {
        "containers": [{"name": "app", "image": "a:1", "imagePullPolicy": "Always"}],
        "initContainers": [{"name": "init", "image": "b:1"}],
        "ephemeralContainers": [{"name": "debug", "image": "c:1"}]}});
    let images = read(WorkloadKind::Pod, &pod).unwrap().containers;
    let summary: Vec<_> = images
        .iter()
        .map(|c| {
            (
                c.list,
                c.name.as_str(),
                c.image.as_str(),
                c.pull_policy.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (ContainerList::Init, "init", "b:1", None),
            (ContainerList::Regular, "app", "a:1", Some("Always")),
            (ContainerList::Ephemeral, "debug", "c:1", None),
        ]
    );
}

#[test]
fn image_volumes_are_read_after_the_containers_with_their_own_pull_policy() {
    let template = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "app", "image": "a:1"}],
        "volumes": [
            {"name": "config", "configMap": {"name": "c"}},
            {"name": "model", "image": {"reference": "r.io/model:v1", "pullPolicy": "Never"}},
            {"name": "data", "image": {"reference": "r.io/data"}},
            {"name": "later", "image": {}},
            {"name": "nothing", "image": null}]}}}});
    let images = read(WorkloadKind::Deployment, &template)
        .unwrap()
        .containers;
    let summary: Vec<_> = images
        .iter()
        .map(|c| {
            (
                c.to_string(),
                c.image.as_str(),
                c.pull_policy.as_deref(),
                c.pointer.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "container \"app\"".to_owned(),
                "a:1",
                None,
                "/spec/template/spec/containers/0/image"
            ),
            (
                "volume \"model\"".to_owned(),
                "r.io/model:v1",
                Some("Never"),
                "/spec/template/spec/volumes/1/image/reference"
            ),
            (
                "volume \"data\"".to_owned(),
                "r.io/data",
                None,
                "/spec/template/spec/volumes/2/image/reference"
            ),
            (
                "volume \"later\"".to_owned(),
                "",
                None,
                "/spec/template/spec/volumes/3/image/reference"
            ),
        ]
    );
    assert!(images[1].is_volume() && !images[0].is_volume());
    // the same from a Value, as a custom kind's pod spec is read
    let at = read_pod_spec_at("/spec/template/spec", &template).unwrap();
    assert_eq!(at.containers, images);
}

#[test]
fn volumes_that_do_not_decode_are_left_out_keeping_the_others_indexes() {
    let pod = json!({"spec": {"containers": [], "volumes": [
        "{{ .Values.extraVolume }}",
        {"name": 7, "image": {"reference": "r.io/x:1"}},
        {"name": "model", "image": {"reference": "r.io/model:1"}}]}});
    let images = read(WorkloadKind::Pod, &pod).unwrap().containers;
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].pointer, "/spec/volumes/2/image/reference");
    let placeholder = json!({"spec": {"containers": [], "volumes": "{{ .Values.volumes }}"}});
    assert!(read(WorkloadKind::Pod, &placeholder)
        .unwrap()
        .containers
        .is_empty());
    let null = json!({"spec": {"containers": [], "volumes": null}});
    assert!(read(WorkloadKind::Pod, &null)
        .unwrap()
        .containers
        .is_empty());
}

#[test]
fn image_pointers_name_the_field() {
    for (index, expected) in [
        (0, "/spec/containers/0/image"),
        (7, "/spec/containers/7/image"),
        (10, "/spec/containers/10/image"),
        (1234, "/spec/containers/1234/image"),
    ] {
        assert_eq!(
            image_pointer("/spec", "containers", index, "/image"),
            expected
        );
    }
}

#[test]
fn missing_image_is_empty_not_an_error() {
    let pod = json!({"spec": {"containers": [{"name": "app"}]}});
    assert_eq!(
        read(WorkloadKind::Pod, &pod).unwrap().containers[0].image,
        ""
    );
}

#[test]
fn missing_or_malformed_specs_are_explained() {
    let deployment = json!({"spec": {"replicas": 1}});
    assert_eq!(
        read(WorkloadKind::Deployment, &deployment),
        Err(WorkloadError::MissingPodSpec {
            pointer: "/spec/template/spec".to_owned()
        })
    );
    let malformed = json!({"spec": {"containers": [{"name": "app", "image": 7}]}});
    let error = read(WorkloadKind::Pod, &malformed).unwrap_err();
    assert!(error.to_string().contains("/spec is malformed"), "{error}");
    // read from the text, told as from a Value: the same reason, without a position
    assert_eq!(Err(error), read_pod_spec_at("/spec", &malformed));
    let not_a_list = json!({"spec": {"containers": "nginx"}});
    assert!(read(WorkloadKind::Pod, &not_a_list).is_err());
    let null_spec = json!({"spec": null});
    assert_eq!(
        read(WorkloadKind::Pod, &null_spec),
        Err(WorkloadError::MissingPodSpec {
            pointer: "/spec".to_owned()
        })
    );
}

#[test]
fn pull_policy_defaults_like_the_api_server() {
    let parse = |s: &str| ImageReference::parse(s).unwrap();
    let digest = "sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    assert_eq!(
        PullPolicy::effective(None, &parse("nginx")),
        PullPolicy::Always
    );
    assert_eq!(
        PullPolicy::effective(None, &parse("nginx:latest")),
        PullPolicy::Always
    );
    assert_eq!(
        PullPolicy::effective(None, &parse("nginx:1.25")),
        PullPolicy::IfNotPresent
    );
    assert_eq!(
        PullPolicy::effective(None, &parse(&format!("nginx@{digest}"))),
        PullPolicy::IfNotPresent
    );
    assert_eq!(
        PullPolicy::effective(Some("Never"), &parse("nginx")),
        PullPolicy::Never
    );
    assert_eq!(
        PullPolicy::effective(Some("Always"), &parse("nginx:1")),
        PullPolicy::Always
    );
    assert_eq!(
        PullPolicy::effective(Some("Sometimes"), &parse("nginx:1")),
        PullPolicy::IfNotPresent
    );
}

/// Every value under `value` that is a pod spec (it has `containers`).
fn pod_specs(value: &Value, found: &mut Vec<Value>) {
    match value {
        Value::Object(map) => {
            if map.contains_key("containers") {
                found.push(value.clone());
            }
            map.values().for_each(|v| pod_specs(v, found));
        }
        Value::Array(list) => list.iter().for_each(|v| pod_specs(v, found)),
        _ => {}
    }
}

#[test]
fn the_scanner_reads_pod_specs_as_serde_does() {
    let mut specs = Vec::new();
    for review in crate::vocabulary::fixtures::reviews() {
        pod_specs(&review, &mut specs);
    }
    assert!(specs.len() >= 12, "{}", specs.len());
    let mut texts: Vec<String> = specs.iter().map(Value::to_string).collect();
    let fixtures = texts.len();
    let c = |container: Value| json!({"containers": [container]});
    for variant in [
        json!({"containers": null}),
        json!({"initContainers": null, "containers": [], "ephemeralContainers": null}),
        json!({"image": "a"}),
        c(json!(null)),
        c(json!(["name", "image"])),
        c(json!({"name": null, "image": null, "imagePullPolicy": null, "env": [{"a": 1}]})),
        c(json!({"name": "a", "image": 7})),
        c(json!({"name": "a\"b", "image": "r\u{e9}g/x:1"})),
        json!({"containers": [], "volumes": null}),
        json!({"containers": [], "volumes": "x"}),
        json!({"containers": [], "volumes": [null, 7, {"name": "a",
            "image": {"reference": "r", "pullPolicy": null}}, {"name": "b", "image": null},
            {"name": "c", "image": {"reference": 7}}, {"name": null, "projected": {"x": [1]}},
            {"name": "d", "image": "e"}, {"image": {"reference": "f", "extra": null}}]}),
        json!({"containers": [], "imagePullSecrets": null}),
        json!({"containers": [], "imagePullSecrets": [{"name": null}, {}, {"name": "s"}]}),
        json!({"containers": [], "imagePullSecrets": [null]}),
        json!({"containers": [], "imagePullSecrets": "s"}),
        json!({"containers": [], "serviceAccountName": null}),
        json!({"containers": [], "serviceAccountName": ""}),
        json!({"containers": [], "serviceAccountName": 7}),
        json!({"containers": [], "nodeSelector": null, "affinity": null, "tolerations": null}),
        json!({"containers": [], "nodeSelector": {"a": "b"}, "tolerations": [{"key": "k"}]}),
        json!({"containers": [], "nodeSelector": {"a": null}}),
        json!({"containers": [], "nodeSelector": []}),
    ] {
        texts.push(variant.to_string());
    }
    // what a tree cannot hold: duplicates, escaped keys, whitespace
    for raw in [
        r#"{"containers": [], "containers": [{"image": "a"}]}"#,
        r#"{"containers": [{"image": "a", "image": "b"}]}"#,
        r#"{"con\u0074ainers": [{"image": "a"}]}"#,
        r#"{"containers": [{"im\u0061ge": "a"}]}"#,
        r#"{"containers": [{"image": "a\u0062c\/d"}]}"#,
        r#"{ "containers" : [ { "name" : "x" , "image" : "a" } ] , "volumes" : [ ] }"#,
        r#"{"containers": [], "volumes": [{"name": "a", "name": "b"}]}"#,
        r#"{"containers": [], "imagePullSecrets": [{"name": "a", "name": "b"}]}"#,
    ] {
        texts.push(raw.to_owned());
    }
    let mut scanned = 0;
    for (index, text) in texts.iter().enumerate() {
        let by_serde = serde_json::from_str::<PodSpecFields>(text).map(|f| view(f, "/spec"));
        match PodSpecFields::scan(text) {
            Some(fields) => {
                scanned += 1;
                assert_eq!(
                    Ok(view(fields, "/spec")),
                    by_serde.map_err(|e| e.to_string()),
                    "{text}"
                );
            }
            // serde reads what the scanner leaves, so only the fixtures must be scanned
            None => assert!(
                index >= fixtures,
                "a fixture's spec was left to serde: {text}"
            ),
        }
    }
    assert!(scanned > fixtures + 10, "{scanned}");
}
