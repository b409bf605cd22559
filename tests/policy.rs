//! The whole decision path, natively, on real admission requests (`tests/fixtures/requests`)
//! with the registry behind an in-memory host.

use crate::common;

use common::*;
use resolvable_images_policy::evaluate::validate_payload;

use resolvable_images_policy::host::InMemoryHost;
use serde_json::{json, Value};

const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

const WORKLOAD_FIXTURES: [(&str, &str); 8] = [
    ("pod-create.json", "Pod"),
    ("deployment-create.json", "Deployment"),
    ("replicaset-create.json", "ReplicaSet"),
    ("statefulset-create.json", "StatefulSet"),
    ("daemonset-create.json", "DaemonSet"),
    ("job-create.json", "Job"),
    ("cronjob-create.json", "CronJob"),
    ("replicationcontroller-create.json", "ReplicationController"),
];

/// A host on which every image of the fixtures exists.
fn all_present() -> InMemoryHost {
    cluster()
        .with_digest(APP, DIGEST)
        .with_digest(MIGRATE, DIGEST)
        .with_digest(BUSYBOX, DIGEST)
}

/// Every pointer in `object` whose value is `from`, set to `to`.
fn replace_image(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) if s == from => *s = to.to_owned(),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_image(v, from, to)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_image(v, from, to)),
        _ => {}
    }
}

#[test]
fn every_kind_with_pullable_images_is_accepted_after_checking_each_image_once() {
    for (file, _) in WORKLOAD_FIXTURES {
        let host = all_present();
        let response = run(&fixture(file), json!({}), &host);
        assert_eq!(response["accepted"], true, "{file}: {response}");
        assert!(response["warnings"].is_null(), "{file}: {response}");
        let mut calls = host.digest_calls();
        calls.sort();
        assert_eq!(calls, [BUSYBOX, MIGRATE, APP], "{file}");
    }
}

#[test]
fn every_kind_with_a_missing_image_is_rejected_naming_it() {
    for (file, kind) in WORKLOAD_FIXTURES {
        let host = cluster()
            .with_digest(MIGRATE, DIGEST)
            .with_digest(BUSYBOX, DIGEST);
        let response = run(&fixture(file), json!({}), &host);
        assert_eq!(response["accepted"], false, "{file}");
        let message = message(&response);
        assert!(
            message.starts_with(&format!("{kind} team-a/web: 1 image will not pull:")),
            "{file}: {message}"
        );
        assert!(
            message.contains(&format!(
                "container \"app\" image \"{APP}\": not found on registry registry.example.com: "
            )),
            "{file}: {message}"
        );
        assert!(message.contains("manifest unknown"), "{message}");
        assert!(message.contains(
            "Hint: check that the tag or digest was pushed to registry.example.com/team/app"
        ));
    }
}

#[test]
fn init_containers_are_checked() {
    let host = cluster()
        .with_digest(APP, DIGEST)
        .with_digest(BUSYBOX, DIGEST);
    let response = run(&fixture("deployment-create.json"), json!({}), &host);
    assert_eq!(response["accepted"], false);
    assert!(message(&response).contains(&format!(
        "init container \"init-schema\" image \"{MIGRATE}\""
    )));
}

#[test]
fn ephemeral_containers_are_checked_and_only_they_on_the_subresource_update() {
    let host = cluster();
    let response = run(&fixture("pod-ephemeral-update.json"), json!({}), &host);
    assert_eq!(host.digest_calls(), ["docker.io/library/alpine:3.20"]);
    assert_eq!(response["accepted"], false);
    assert!(message(&response).contains(
        "ephemeral container \"debugger\" image \"docker.io/library/alpine:3.20\": not found on registry docker.io"
    ));
}

#[test]
fn short_names_are_looked_up_normalised_and_quoted_as_written() {
    let host = cluster()
        .with_digest(APP, DIGEST)
        .with_digest(MIGRATE, DIGEST);
    let response = run(&fixture("pod-create.json"), json!({}), &host);
    assert!(host.digest_calls().contains(&BUSYBOX.to_owned()));
    assert!(message(&response).contains(&format!(
        "container \"sidecar\" image \"busybox:1.36\" ({BUSYBOX}): not found on registry docker.io"
    )));
}

#[test]
fn update_checks_only_new_images() {
    let host = cluster();
    let scale = run(&fixture("deployment-update-scale.json"), json!({}), &host);
    assert_eq!(scale["accepted"], true, "{scale}");
    assert!(host.calls().is_empty(), "scaling must not look anything up");

    let host = cluster();
    let change = run(&fixture("deployment-update-image.json"), json!({}), &host);
    assert_eq!(host.digest_calls(), ["registry.example.com/team/app:1.5.0"]);
    assert_eq!(change["accepted"], false);
    assert!(message(&change).contains("registry.example.com/team/app:1.5.0"));
}

#[test]
fn respelling_an_old_image_is_not_a_new_image() {
    let mut request = fixture("deployment-update-scale.json");
    replace_image(&mut request["object"], "busybox:1.36", BUSYBOX);
    let host = cluster();
    assert_eq!(run(&request, json!({}), &host)["accepted"], true);
    assert!(host.calls().is_empty());
}

#[test]
fn other_kinds_and_operations_are_accepted_untouched() {
    for file in ["configmap-create.json", "deployment-delete.json"] {
        let host = cluster();
        let response = run(&fixture(file), json!({}), &host);
        assert_eq!(response["accepted"], true, "{file}");
        assert!(host.calls().is_empty(), "{file}");
    }
}

#[test]
fn pull_policy_never_is_not_looked_up() {
    let mut request = fixture("pod-create.json");
    for container in request["object"]["spec"]["containers"]
        .as_array_mut()
        .unwrap()
    {
        container["imagePullPolicy"] = json!("Never");
    }
    let host = cluster().with_digest(MIGRATE, DIGEST);
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(host.digest_calls(), [MIGRATE]);
}

#[test]
fn invalid_references_are_rejected_with_the_reason_even_under_never() {
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["containers"][0]["image"] = json!("registry.example.com/Team/App:1");
    request["object"]["spec"]["containers"][0]["imagePullPolicy"] = json!("Never");
    request["object"]["spec"]["containers"][1]["image"] = json!("");
    let host = all_present();
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], false);
    let message = message(&response);
    assert!(message.contains("1 image will not pull"), "{message}");
    assert!(message.contains(
        "container \"app\" image \"registry.example.com/Team/App:1\": invalid image reference: repository path component \"Team\" has uppercase letters"
    ), "{message}");
    // An empty image is no reference: nothing to look up, nothing proven; it is not rejected as
    // an invalid reference but warned about as having nothing to look up.
    assert!(!message.contains("sidecar"), "{message}");
    assert_eq!(
        warnings(&response),
        ["container \"sidecar\" image \"\": no image to look up; allowed (actions.notLookedUp: warn): the image is empty: there is no reference to look up"]
    );
    assert_eq!(
        host.digest_calls(),
        [MIGRATE],
        "invalid references are never sent to the host"
    );
}

#[test]
fn fifty_containers_with_five_images_make_five_host_calls() {
    let mut request = fixture("pod-create.json");
    let containers: Vec<Value> = (0..50)
        .map(|i| {
            json!({"name": format!("c{i}"), "image": format!("registry.example.com/app{}:1", i % 5),
                   "imagePullPolicy": "IfNotPresent"})
        })
        .collect();
    request["object"]["spec"]["containers"] = json!(containers);
    request["object"]["spec"]["initContainers"] = json!([]);
    let host = cluster();
    let response = run(&request, json!({}), &host);
    assert_eq!(host.digest_calls().len(), 5);
    assert!(message(&response).contains("50 images will not pull"));
}

#[test]
fn uncertain_verdicts_warn_by_default_and_follow_their_actions() {
    let cases = [
        ("Not authorized: url https://registry.example.com/v2/team/app/manifests/1.4.2", "unauthorized", "not authorized"),
        ("error sending request for url (https://registry.example.com/v2/)", "unreachable", "registry unreachable"),
        ("Policy has not been granted access to the 'oci/v1/manifest_digest' host capability. The violation has been reported.", "hostRefused", "lookup refused by the policy host"),
    ];
    for (error, key, phrase) in cases {
        let host = || {
            cluster()
                .with_error(
                    APP,
                    &format!(
                        "error invoking host capability oci.manifest_digest: Host error: {error}"
                    ),
                )
                .with_digest(MIGRATE, DIGEST)
                .with_digest(BUSYBOX, DIGEST)
        };
        // Pull secrets are off here: with them, a 401 no secret covers is `uncoveredRegistry`.
        let stock = json!({"pullSecrets": {"consult": false}});
        let warned = run(&fixture("deployment-create.json"), stock, &host());
        assert_eq!(warned["accepted"], true, "{key}");
        let warnings = warnings(&warned);
        assert_eq!(warnings.len(), 1, "{key}");
        assert!(warnings[0].contains(phrase), "{key}: {}", warnings[0]);
        assert!(
            warnings[0].contains(&format!("allowed (actions.{key}: warn)")),
            "{}",
            warnings[0]
        );

        let rejected = run(
            &fixture("deployment-create.json"),
            json!({"actions": {key: "reject"}, "pullSecrets": {"consult": false}}),
            &host(),
        );
        assert_eq!(rejected["accepted"], false, "{key}");
        assert!(message(&rejected).contains(phrase), "{key}");

        let allowed = run(
            &fixture("deployment-create.json"),
            json!({"actions": {key: "allow"}, "pullSecrets": {"consult": false}}),
            &host(),
        );
        assert_eq!(allowed["accepted"], true);
        assert!(allowed["warnings"].is_null());
        assert!(
            allowed["audit_annotations"]["resolvable-images/allowed-unverified"]
                .as_str()
                .unwrap()
                .contains(phrase)
        );
    }
}

#[test]
fn certain_verdicts_can_be_softened() {
    let response = run(
        &fixture("deployment-create.json"),
        json!({"actions": {"absent": "warn"}}),
        &cluster(),
    );
    assert_eq!(response["accepted"], true);
    assert_eq!(warnings(&response).len(), 3);
}

#[test]
fn exempt_namespaces_are_not_looked_at() {
    let host = cluster();
    let response = run(
        &fixture("deployment-create.json"),
        json!({"exemptNamespaces": ["team-a"]}),
        &host,
    );
    assert_eq!(response["accepted"], true);
    assert!(host.calls().is_empty());
}

#[test]
fn exempt_images_match_globs_on_the_normalised_reference() {
    let host = cluster().with_digest(MIGRATE, DIGEST);
    let settings =
        json!({"exemptImages": ["registry.example.com/team/*", "docker.io/library/busybox:*"]});
    let response = run(&fixture("deployment-create.json"), settings, &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(host.digest_calls(), [MIGRATE]);
}

#[test]
fn digests_are_looked_up_by_digest() {
    let mut request = fixture("pod-create.json");
    let pinned = format!("registry.example.com/team/app:1.4.2@{DIGEST}");
    request["object"]["spec"]["containers"][0]["image"] = json!(pinned);
    let host = cluster()
        .with_digest(MIGRATE, DIGEST)
        .with_digest(BUSYBOX, DIGEST);
    let response = run(&request, json!({}), &host);
    assert!(host
        .digest_calls()
        .contains(&format!("registry.example.com/team/app@{DIGEST}")));
    assert!(message(&response).contains(&format!("image \"{pinned}\": not found")));
}

#[test]
fn malformed_requests_get_a_specific_400_never_a_panic() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"not json".to_vec(), "cannot read the admission request"),
        (br#"{"settings":{}}"#.to_vec(), "missing field `request`"),
        (br#"{"request":{"kind":"Pod"}}"#.to_vec(), "cannot read the admission request"),
        (
            serde_json::to_vec(&json!({"request": {"kind": {"kind": "Pod"}, "operation": "CREATE", "namespace": "a", "name": "p", "object": {"spec": {"containers": [{"name": 1}]}}}})).unwrap(),
            "Pod a/p: the pod spec at /spec is malformed",
        ),
        (
            serde_json::to_vec(&json!({"request": {"kind": {"group": "apps", "kind": "Deployment"}, "operation": "CREATE", "namespace": "a", "name": "d", "object": {"spec": {}}}})).unwrap(),
            "Deployment a/d: the object has no pod spec at /spec/template/spec",
        ),
        // a request reads the settings it needs: a bad member it reads answers it, named
        (
            serde_json::to_vec(&json!({"settings": {"actions": {"absent": "maybe"}}, "request": fixture("pod-create.json")})).unwrap(),
            "actions.absent",
        ),
        (
            serde_json::to_vec(&json!({"settings": {"timeBudgetMs": 0}, "request": {}})).unwrap(),
            "timeBudgetMs: must be between 1 and 30000",
        ),
        (
            serde_json::to_vec(&json!({"settings": {"actions": {}, "unknown": 1}, "request": {}})).unwrap(),
            "unknown field `unknown`",
        ),
        (br#"{"request":{},"settings":{"actions":{]}"#.to_vec(), "cannot read the admission request"),
    ];
    for (payload, expected) in cases {
        let response: Value =
            serde_json::from_slice(&validate_payload(&payload, &cluster())).unwrap();
        assert_eq!(response["accepted"], false, "{expected}");
        assert_eq!(response["code"], 400, "{expected}");
        assert!(
            message(&response).contains(expected),
            "{expected}: {response}"
        );
    }
}

#[test]
fn pods_with_a_thousand_containers_and_huge_images_decide() {
    let mut request = fixture("pod-create.json");
    let mut containers: Vec<Value> = (0..1000)
        .map(|i| json!({"name": format!("c{i}"), "image": format!("r.example/a{i}:1")}))
        .collect();
    containers
        .push(json!({"name": "huge", "image": format!("r.example/{}:1", "a".repeat(100_000))}));
    containers.push(json!({"name": "nul", "image": "r.example/a\u{0}b:1"}));
    containers.push(json!({"name": "nulls", "image": null, "imagePullPolicy": null}));
    request["object"]["spec"]["containers"] = json!(containers);
    let host = cluster();
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], false);
    assert_eq!(host.digest_calls().len(), 1001);
    assert!(message(&response)
        .contains("the repository path is 100000 characters long; at most 255 are allowed"));
}

/// Six images on `registry.example.com`, each lookup taking `latency` on the simulated clock.
fn six_slow_images(latency_ms: u64) -> (Value, InMemoryHost) {
    let mut request = fixture("pod-create.json");
    let containers: Vec<Value> = (0..6)
        .map(|i| json!({"name": format!("c{i}"), "image": format!("registry.example.com/slow{i}:1")}))
        .collect();
    request["object"]["spec"]["containers"] = json!(containers);
    request["object"]["spec"]["initContainers"] = json!([]);
    let mut host = cluster().with_latency(std::time::Duration::from_millis(latency_ms));
    for i in 0..6 {
        host = host.with_digest(&format!("registry.example.com/slow{i}:1"), DIGEST);
    }
    (request, host)
}

#[test]
fn the_clock_is_read_at_the_start_before_each_later_lookup_and_after_pull_secrets() {
    // Under a real host every reading is a WASI call: one per lookup, not one around each.
    let (mut request, host) = six_slow_images(10);
    request["object"]["spec"]["imagePullSecrets"] = json!([]);
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(host.digest_calls().len(), 6);
    assert!(
        host.calls().iter().all(|c| c.starts_with("digest ")),
        "{:?}",
        host.calls()
    );
    assert_eq!(
        host.clock_readings(),
        6,
        "the start, then before lookups 2 to 6"
    );

    // A template's ServiceAccount and pull secrets are read before the lookups: one reading
    // after them, so that the first lookup is not charged for them.
    let host = all_present();
    let response = run(&fixture("deployment-create.json"), json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(
        host.calls().iter().any(|c| c.starts_with("get ")),
        "{:?}",
        host.calls()
    );
    assert_eq!(
        host.clock_readings(),
        1 + 1 + (host.digest_calls().len() - 1)
    );
}

#[test]
fn the_time_budget_stops_new_lookups_and_says_so() {
    // Each call takes 400 ms; of 1000 ms, 200 ms are left after two lookups (0, 400): less than
    // the slowest lookup took, so a third would most likely overrun and is not started.
    let (request, host) = six_slow_images(400);
    let response = run(&request, json!({"timeBudgetMs": 1000}), &host);
    assert_eq!(host.digest_calls().len(), 2, "{:?}", host.calls());
    assert_eq!(response["accepted"], true, "unreachable warns by default");
    let unchecked = warnings(&response);
    assert_eq!(unchecked.len(), 4, "{unchecked:?}");
    assert!(unchecked.iter().all(|w| w.contains(
        "registry unreachable on registry registry.example.com; allowed (actions.unreachable: warn): not checked in time: less than the slowest lookup (400 ms) was left of timeBudgetMs (1000 ms)"
    )), "{unchecked:?}");

    // 500 ms each: two lookups spend the whole budget.
    let (request, host) = six_slow_images(500);
    let spent = run(&request, json!({"timeBudgetMs": 1000}), &host);
    assert_eq!(host.digest_calls().len(), 2, "{:?}", host.calls());
    assert!(
        warnings(&spent).iter().all(|w| w.contains(
            "not checked in time: the policy's time budget of 1000 ms (timeBudgetMs) was spent"
        )),
        "{spent}"
    );

    let (request, host) = six_slow_images(400);
    let strict = run(
        &request,
        json!({"timeBudgetMs": 1000, "actions": {"unreachable": "reject"}}),
        &host,
    );
    assert_eq!(strict["accepted"], false);
    assert!(message(&strict).contains("not checked in time"));
}

#[test]
fn credentialed_batches_get_the_remaining_budget_as_their_time_out() {
    // Reading the ServiceAccount takes 400 ms of the 1500 ms budget: 1100 ms remain.
    let host = cluster()
        .with_latency(std::time::Duration::from_millis(400))
        .with_private_image(APP, &[], DIGEST)
        .with_private_image(MIGRATE, &[], DIGEST)
        .with_private_image(BUSYBOX, &[], DIGEST);
    let settings = json!({"pullSecrets": {"credentialedLookups": true}});
    let response = run(&fixture("deployment-create.json"), settings, &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert_eq!(
        host.calls(),
        [
            "get ServiceAccount team-a/default",
            "resolve 3 within 1100ms"
        ]
    );
}

#[test]
fn escapes_and_odd_encodings_are_answered_never_panicked_on() {
    let pod = |image: &str| {
        format!(
            r#"{{"request":{{"kind":{{"kind":"Pod"}},"operation":"CREATE","namespace":"a","name":"p","object":{{"spec":{{"containers":[{{"name":"c","image":"{image}"}}]}}}}}}}}"#
        )
    };
    // A lone surrogate is not valid JSON text: the request is refused as unreadable.
    let response: Value =
        serde_json::from_slice(&validate_payload(pod(r"\ud800").as_bytes(), &cluster())).unwrap();
    assert_eq!(response["code"], 400, "{response}");
    // Escapes that decode to odd but valid strings are invalid references.
    for image in [r"ngi\u0000nx", r"\u00ffnginx", r"nginx\n", r"\\xff\\xfe"] {
        let response: Value =
            serde_json::from_slice(&validate_payload(pod(image).as_bytes(), &cluster())).unwrap();
        assert_eq!(response["accepted"], false, "{image}: {response}");
        assert!(
            message(&response).contains("invalid image reference"),
            "{image}: {response}"
        );
    }
    // A blank image (whitespace only, decoded from an escape) is no reference at all: nothing
    // to look up, said as such rather than as an invalid reference.
    let response: Value =
        serde_json::from_slice(&validate_payload(pod(r"\t").as_bytes(), &cluster())).unwrap();
    assert_eq!(response["accepted"], true, "{response}");
    assert!(
        warnings(&response)[0].contains("no image to look up"),
        "{response}"
    );
    // Invalid UTF-8 bytes anywhere in the payload: unreadable, 400.
    let mut bytes = pod("nginx").into_bytes();
    bytes.insert(bytes.len() - 10, 0xff);
    let response: Value = serde_json::from_slice(&validate_payload(&bytes, &cluster())).unwrap();
    assert_eq!(response["code"], 400);
}

#[test]
fn ten_thousand_patterns_and_a_thousand_containers_decide() {
    let mut request = fixture("pod-create.json");
    let containers: Vec<Value> = (0..1000)
        .map(|i| json!({"name": format!("c{i}"), "image": format!("r{i}.example/app:1")}))
        .collect();
    request["object"]["spec"]["containers"] = json!(containers);
    let patterns: Vec<String> = (0..10_000).map(|i| format!("r{i}.example/*")).collect();
    let host = cluster().with_digest(MIGRATE, "sha256:0");
    let response = run(&request, json!({"exemptImages": patterns}), &host);
    assert_eq!(
        response["accepted"], true,
        "every container image is exempt"
    );
    assert_eq!(host.digest_calls(), [MIGRATE]);
}
