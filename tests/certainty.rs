//! "Certain means certain": Pods the node would run are never denied, and what the policy says
//! stays within what Kubernetes keeps and what a user may read. One test per point of the
//! issue that introduced these rules.

use crate::common;

use common::*;
use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::{dockerconfigjson, service_account};
use serde_json::{json, Value};

const DIGEST: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

/// The Pod fixture with one container `app` running `image` (no init containers).
fn pod_with(image: &str, pull_policy: Option<&str>) -> Value {
    let mut request = fixture("pod-create.json");
    let mut container = json!({"name": "app", "image": image});
    if let Some(policy) = pull_policy {
        container["imagePullPolicy"] = json!(policy);
    }
    request["object"]["spec"]["containers"] = json!([container]);
    request["object"]["spec"]["initContainers"] = json!([]);
    request
}

fn owned_by(mut request: Value, api_version: &str, kind: &str) -> Value {
    request["object"]["metadata"]["ownerReferences"] = json!([{
        "apiVersion": api_version, "kind": kind, "name": "web-7d4b9", "uid": "u1",
        "controller": true, "blockOwnerDeletion": true}]);
    request
}

#[test]
fn pods_of_checked_controllers_are_not_looked_up_again() {
    for (api_version, kind) in [
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
        ("v1", "ReplicationController"),
    ] {
        let request = owned_by(
            pod_with("registry.example.com/team/gone:1", None),
            api_version,
            kind,
        );
        let host = cluster();
        let response = run(&request, json!({}), &host);
        assert_eq!(response["accepted"], true, "{kind}: {response}");
        assert!(host.digest_calls().is_empty(), "{kind}: {:?}", host.calls());
    }
}

#[test]
fn owned_pods_are_checked_when_the_owner_is_not_checked_or_on_request() {
    let gone = pod_with("registry.example.com/team/gone:1", None);
    // A controller the policy does not know (no customResources entry) was never judged.
    let unknown_owner = owned_by(gone.clone(), "example.com/v1", "Thing");
    assert_eq!(
        run(&unknown_owner, json!({}), &cluster())["accepted"],
        false
    );
    // ownerReferences without controller: true do not make an owner.
    let mut not_controller = owned_by(gone.clone(), "apps/v1", "ReplicaSet");
    not_controller["object"]["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    assert_eq!(
        run(&not_controller, json!({}), &cluster())["accepted"],
        false
    );
    // ownedPods: check.
    let owned = owned_by(gone.clone(), "apps/v1", "ReplicaSet");
    let response = run(&owned, json!({"ownedPods": "check"}), &cluster());
    assert_eq!(response["accepted"], false, "{response}");
    // A custom kind the policy checks is an owner too.
    let custom = owned_by(gone, "argoproj.io/v1alpha1", "Workflow");
    let settings = json!({"customResources": [{"apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow", "images": ["$.spec.templates[*].container.image"]}]});
    let host = cluster();
    assert_eq!(run(&custom, settings, &host)["accepted"], true);
    assert!(host.digest_calls().is_empty());
}

/// A workload fixture (its images are not in [`cluster`]'s registry: 404 if looked up), with
/// a controller owner when `owner` is given.
fn workload(fixture_name: &str, owner: Option<(&str, &str)>) -> Value {
    let request = fixture(fixture_name);
    match owner {
        Some((api_version, kind)) => owned_by(request, api_version, kind),
        None => request,
    }
}

#[test]
fn objects_of_checked_controllers_are_not_looked_up_again_one_level_up() {
    for (fixture_name, owner) in [
        ("replicaset-create.json", ("apps/v1", "Deployment")),
        ("job-create.json", ("batch/v1", "CronJob")),
    ] {
        let host = cluster();
        let response = run(&workload(fixture_name, Some(owner)), json!({}), &host);
        assert_eq!(response["accepted"], true, "{fixture_name}: {response}");
        assert!(warnings(&response).is_empty(), "{response}");
        assert!(
            host.calls().is_empty(),
            "{fixture_name}: {:?}",
            host.calls()
        );
        // The same object without its owner is a user's own: checked, and its tags are gone.
        let host = cluster();
        let response = run(&workload(fixture_name, None), json!({}), &host);
        assert_eq!(response["accepted"], false, "{fixture_name}: {response}");
        assert!(message(&response).contains("not found on registry registry.example.com"));
        assert_eq!(host.digest_calls().len(), 3, "{:?}", host.calls());
    }
}

#[test]
fn owned_objects_are_checked_when_the_owner_is_not_checked_or_on_request() {
    let rs = || workload("replicaset-create.json", Some(("apps/v1", "Deployment")));
    // ownedObjects: check, and its former name ownedPods: check.
    for settings in [
        json!({"ownedObjects": "check"}),
        json!({"ownedPods": "check"}),
    ] {
        let response = run(&rs(), settings.clone(), &cluster());
        assert_eq!(response["accepted"], false, "{settings}: {response}");
        assert!(message(&response).starts_with("ReplicaSet team-a/web: 3 images will not pull"));
    }
    // An owner reference that is not the controller, or a Pod, owns nothing here.
    let mut not_controller = rs();
    not_controller["object"]["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    assert_eq!(
        run(&not_controller, json!({}), &cluster())["accepted"],
        false
    );
    let pod_owned = workload("job-create.json", Some(("v1", "Pod")));
    assert_eq!(run(&pod_owned, json!({}), &cluster())["accepted"], false);
    // Argo Rollouts create ReplicaSets: skipped once the Rollout is a kind the policy checks.
    let rollout_rs = workload(
        "replicaset-create.json",
        Some(("argoproj.io/v1alpha1", "Rollout")),
    );
    assert_eq!(run(&rollout_rs, json!({}), &cluster())["accepted"], false);
    let settings = json!({"customResources": [{"apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout", "podSpecs": ["$.spec.template.spec"]}]});
    let host = cluster();
    assert_eq!(run(&rollout_rs, settings, &host)["accepted"], true);
    assert!(host.calls().is_empty(), "{:?}", host.calls());
}

#[test]
fn a_custom_kinds_child_of_a_custom_kind_is_not_looked_up_again() {
    // An Argo CronWorkflow creates Workflows: with both configured, the Workflow it created is
    // not asked about again, while one a user writes is.
    let settings = json!({"customResources": [
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "CronWorkflow",
         "images": ["$.spec.workflowSpec.templates[*].container.image"]},
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
         "images": ["$.spec.templates[*].container.image"]}]});
    let workflow = json!({
        "uid": "5e6f", "operation": "CREATE", "namespace": "team-a", "name": "nightly-1",
        "kind": {"group": "argoproj.io", "version": "v1alpha1", "kind": "Workflow"},
        "resource": {"group": "argoproj.io", "version": "v1alpha1", "resource": "workflows"},
        "userInfo": {"username": "system:serviceaccount:argo:argo-workflow-controller"},
        "object": {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
            "metadata": {"name": "nightly-1", "namespace": "team-a"},
            "spec": {"templates": [{"name": "main",
                "container": {"image": "registry.example.com/team/gone:1"}}]}}});
    let host = cluster();
    assert_eq!(run(&workflow, settings.clone(), &host)["accepted"], false);
    assert_eq!(host.digest_calls(), ["registry.example.com/team/gone:1"]);
    let owned = owned_by(workflow, "argoproj.io/v1alpha1", "CronWorkflow");
    let host = cluster();
    assert_eq!(run(&owned, settings, &host)["accepted"], true);
    assert!(host.calls().is_empty(), "{:?}", host.calls());
}

#[test]
fn ephemeral_containers_of_owned_pods_are_still_checked() {
    let mut request = owned_by(
        pod_with("registry.example.com/team/gone:1", None),
        "apps/v1",
        "ReplicaSet",
    );
    request["object"]["spec"]["ephemeralContainers"] =
        json!([{"name": "debugger", "image": "registry.example.com/tools/debug:typo"}]);
    let host = cluster();
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], false);
    assert!(
        message(&response).contains("ephemeral container \"debugger\""),
        "{response}"
    );
    assert_eq!(
        host.digest_calls(),
        ["registry.example.com/tools/debug:typo"]
    );
}

#[test]
fn mirror_pods_are_never_checked() {
    let mut request = pod_with("registry.example.com/team/gone:1", None);
    request["object"]["metadata"]["annotations"] =
        json!({"kubernetes.io/config.mirror": "0123abcd", "kubernetes.io/config.source": "file"});
    for settings in [json!({}), json!({"ownedPods": "check"})] {
        let host = cluster();
        assert_eq!(run(&request, settings, &host)["accepted"], true);
        assert!(host.calls().is_empty(), "{:?}", host.calls());
    }
}

fn nodes_holding(images: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "NodeList", "items": [
        {"metadata": {"name": "node-1"}, "status": {"images": [{"names": images, "sizeBytes": 10}]}},
        {"metadata": {"name": "node-2"}, "status": {"images": []}},
    ]})
}

#[test]
fn absent_if_not_present_images_cached_on_nodes_are_warned_about() {
    let request = pod_with("registry.example.com/team/app:1.4.2", Some("IfNotPresent"));
    let host = cluster().with_nodes(nodes_holding(&[APP]));
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    // the cause first; the nodes and the registry's answer are in the audit annotation
    assert!(warnings[0].contains("not found (cached on nodes); allowed (actions.cachedOnNodes: warn): before 1.35 any pod starts from it"), "{warnings:?}");
    let all = response["audit_annotations"]["resolvable-images/warnings"]
        .as_str()
        .unwrap_or_default();
    assert!(all.contains("cached on 1 node(s) (node-1)"), "{response}");
    assert_eq!(host.calls().iter().filter(|c| *c == "list Node").count(), 1);

    let strict = run(
        &request,
        json!({"actions": {"cachedOnNodes": "reject"}}),
        &host,
    );
    assert_eq!(strict["accepted"], false);
}

#[test]
fn cached_images_do_not_help_always_pulls_or_other_tags() {
    // Always (explicit, or implied by :latest) asks the registry on every start.
    let always = pod_with("registry.example.com/team/app:1.4.2", Some("Always"));
    let host = cluster().with_nodes(nodes_holding(&[APP]));
    assert_eq!(run(&always, json!({}), &host)["accepted"], false);
    assert!(
        !host.calls().contains(&"list Node".to_owned()),
        "Nodes are read only when they can help"
    );
    let other_tag = pod_with("registry.example.com/team/app:1.4.3", Some("IfNotPresent"));
    assert_eq!(
        run(
            &other_tag,
            json!({}),
            &cluster().with_nodes(nodes_holding(&[APP]))
        )["accepted"],
        false
    );
    // Nodes that cannot be read prove nothing either way: the registry's 404 stands.
    let unreadable = cluster()
        .with_resource_error("Policy has not been granted access to Kubernetes v1/Node resources.");
    let request = pod_with("registry.example.com/team/app:1.4.2", Some("IfNotPresent"));
    assert_eq!(
        run(
            &request,
            json!({"pullSecrets": {"consult": false}}),
            &unreadable
        )["accepted"],
        false
    );
}

#[test]
fn a_host_that_cannot_parse_an_ipv6_registry_is_not_a_reason_to_deny() {
    let image = "[fd00::10]:5000/app:1";
    let request = pod_with(image, None);
    let host = cluster().with_error(
        "[fd00::10]:5000/app:1",
        "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: invalid reference format",
    );
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    // What happened: the policy server's parser refused the form; no registry was reached
    // or failed to answer, and the warning says so, not "registry unreachable".
    assert_eq!(
        warnings,
        ["container \"app\" image \"[fd00::10]:5000/app:1\": cannot be parsed by the policy server on registry [fd00::10]:5000; allowed (actions.unreachable: warn): no request sent; the kubelet pulls it: invalid reference format"]
    );
    assert!(!warnings[0].contains("unreachable on"), "{warnings:?}");
    // With unreachable: reject the hint says what to do about a form, not about a registry.
    let strict = run(
        &request,
        json!({"actions": {"unreachable": "reject"}}),
        &host,
    );
    assert_eq!(strict["accepted"], false);
    assert!(
        message(&strict).contains("reach [fd00::10]:5000 by a DNS name or an IPv4 address"),
        "{strict}"
    );
    assert!(!message(&strict).contains("could not be asked"), "{strict}");
}

#[test]
fn many_unparsable_references_are_grouped_in_their_own_words() {
    let images: Vec<String> = (0..40)
        .map(|i| format!("[fd00::10]:5000/team/app-{i}-with-a-long-repository-name:1"))
        .collect();
    let mut request = pod_with(&images[0], None);
    request["object"]["spec"]["containers"] = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    let mut host = cluster();
    for image in &images {
        host = host.with_error(
            image,
            "Callback evaluation failure: invalid reference format",
        );
    }
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert!(
        warnings[0].starts_with("40 images on registry [fd00::10]:5000: cannot be parsed by the policy server; allowed (actions.unreachable: warn)"),
        "{warnings:?}"
    );
}

#[test]
fn an_empty_template_image_is_nothing_to_look_up_not_an_invalid_reference() {
    // The API server refuses a Pod without an image (and, validateContainerCommon, a built-in
    // template too, before any validating webhook; a mutating one sees it); a blank template
    // image is accepted as a placeholder some tools fill in. No pull is proven to fail.
    for (fixture_name, image, what) in [
        ("deployment-create.json", "", "empty"),
        ("cronjob-create.json", "", "empty"),
        ("deployment-create.json", " ", "blank (whitespace only)"),
        ("pod-create.json", "", "empty"),
    ] {
        let mut request = fixture(fixture_name);
        let spec = if fixture_name.starts_with("cronjob") {
            &mut request["object"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        } else if fixture_name.starts_with("pod") {
            &mut request["object"]["spec"]
        } else {
            &mut request["object"]["spec"]["template"]["spec"]
        };
        spec["containers"][0]["image"] = json!(image);
        let host = cluster()
            .with_digest(MIGRATE, DIGEST)
            .with_digest(BUSYBOX, DIGEST);
        let response = run(&request, json!({}), &host);
        assert_eq!(response["accepted"], true, "{fixture_name}: {response}");
        assert_eq!(
            warnings(&response),
            [format!("container \"app\" image {image:?}: no image to look up; allowed (actions.notLookedUp: warn): the image is {what}: there is no reference to look up")],
            "{fixture_name}"
        );
        assert!(!response.to_string().contains("the reference is empty"));
        assert_eq!(host.digest_calls().len(), 2, "{:?}", host.calls());
        // notLookedUp: reject refuses it, with the hint for an empty image.
        let strict = run(
            &request,
            json!({"actions": {"notLookedUp": "reject"}}),
            &host,
        );
        assert_eq!(strict["accepted"], false);
        assert!(message(&strict).contains("Hint: set the image"), "{strict}");
    }
}

#[test]
fn custom_kinds_with_placeholders_in_unread_fields_are_checked() {
    let request = json!({
        "uid": "u", "operation": "CREATE", "namespace": "team-a", "name": "build",
        "kind": {"group": "tekton.dev", "version": "v1", "kind": "TaskRun"},
        "object": {"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
            "metadata": {"name": "build", "namespace": "team-a"},
            "spec": {"podTemplate": {
                "terminationGracePeriodSeconds": "{{workflow.parameters.grace}}",
                "securityContext": {"runAsUser": "$(params.uid)"},
                "containers": [{"name": "step", "image": "registry.example.com/team/app:typo",
                                "resources": {"limits": {"cpu": "{{cpu}}"}}, "ports": "{{ports}}"}]}}}
    });
    let settings = json!({"customResources": [{"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
        "podSpecs": ["$.spec.podTemplate"]}]});
    let response = run(&request, settings, &cluster());
    assert_eq!(response["accepted"], false, "{response}");
    assert!(
        message(&response).contains("TaskRun team-a/build: 1 image will not pull"),
        "{response}"
    );
    assert!(message(&response).contains("registry.example.com/team/app:typo"));
}

#[test]
fn twenty_unverifiable_images_fit_the_api_servers_warning_limits() {
    let mut request = fixture("pod-create.json");
    let containers: Vec<Value> = (0..20)
        .map(|i| json!({"name": format!("c{i}"), "image": format!("ghcr.io/org/private-{i}:1")}))
        .collect();
    request["object"]["spec"]["containers"] = json!(containers);
    request["object"]["spec"]["initContainers"] = json!([]);
    let mut host = cluster();
    for i in 0..20 {
        host = host.with_error(
            &format!("ghcr.io/org/private-{i}:1"),
            &format!("error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Not authorized: url https://ghcr.io/v2/org/private-{i}/manifests/1"),
        );
    }
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true);
    let warnings = warnings(&response);
    let total: usize = warnings.iter().map(String::len).sum();
    assert!(
        total <= 4096 && warnings.iter().all(|w| w.len() <= 256),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("20 images on registry ghcr.io: not authorized")),
        "{warnings:?}"
    );
    let all = response["audit_annotations"]["resolvable-images/warnings"]
        .as_str()
        .unwrap();
    assert_eq!(all.lines().count(), 20);
}

#[test]
fn a_non_registry_page_is_never_read_back_to_the_user() {
    let request = pod_with("10.0.0.7:8080/admin/console:1", None);
    let page = "<html><title>Admin</title><body>users: alice, bob; api key: 0xfeed</body></html>";
    let host = cluster().with_error(
        "10.0.0.7:8080/admin/console:1",
        &format!("error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Server error: url http://10.0.0.7:8080/v2/admin/console/manifests/1, code: 404, message: {page}"),
    );
    let response = run(&request, json!({}), &host);
    let text = response.to_string();
    assert!(
        !text.contains("alice") && !text.contains("0xfeed") && !text.contains("<html>"),
        "{text}"
    );
    assert!(
        message(&response).contains(&format!(
            "code: 404, a non-registry body of {} bytes",
            page.len()
        )),
        "{response}"
    );
}

#[test]
fn link_local_registries_are_never_asked() {
    let request = pod_with("169.254.169.254/latest/meta-data:1", None);
    let host = cluster();
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true);
    assert!(host.digest_calls().is_empty());
    assert!(
        warnings(&response)[0].contains("not looked up"),
        "{response}"
    );
    assert!(
        warnings(&response)[0].contains("(actions.notLookedUp: warn)"),
        "{response}"
    );
}

#[test]
fn only_listed_registries_are_asked() {
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["containers"] = json!([
        {"name": "a", "image": "blackhole.example.net/app:1"},
        {"name": "b", "image": "registry.example.com/team/app:1.4.2"}]);
    request["object"]["spec"]["initContainers"] = json!([]);
    let host = cluster().with_digest(APP, DIGEST);
    let response = run(
        &request,
        json!({"lookupRegistries": ["*.example.com"]}),
        &host,
    );
    assert_eq!(response["accepted"], true);
    assert_eq!(
        host.digest_calls(),
        [APP],
        "no host call for an unlisted registry"
    );
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]
            .contains("not looked up: registry blackhole.example.net is not in lookupRegistries"),
        "{warnings:?}"
    );
    // a request reads the entries that can concern its registries: one that starts like
    // blackhole.example.net is read, and the request is refused with its problem
    let refused = run(
        &request,
        json!({"lookupRegistries": ["*.example.com", "blackhole.example.net/app"]}),
        &host,
    );
    assert_eq!(refused["accepted"], false);
    assert!(
        message(&refused).contains("lookupRegistries[1]"),
        "{refused}"
    );
    // one that cannot match them is not read (validate_settings refused it when the policy
    // was loaded): the registries it could not name are judged by the others
    let unread = json!({"lookupRegistries": ["*.example.com", "a/b"]});
    assert_invalid_settings_named(&unread, "lookupRegistries[1]");
    let unread = run(&request, unread, &host);
    assert_eq!(unread["accepted"], true, "{unread}");
    assert_eq!(message(&unread), message(&response), "{unread}");
}

/// The Deployment fixture's UPDATE that only scales, with `change` applied to the new template.
fn update_changing(change: impl Fn(&mut Value)) -> Value {
    let mut request = fixture("deployment-update-scale.json");
    change(&mut request["object"]["spec"]["template"]["spec"]);
    request
}

#[test]
fn updates_that_change_credentials_or_scheduling_recheck_the_images() {
    let scale_only = update_changing(|_| {});
    let host = cluster();
    assert_eq!(run(&scale_only, json!({}), &host)["accepted"], true);
    assert!(host.digest_calls().is_empty());

    let new_secrets =
        update_changing(|spec| spec["imagePullSecrets"] = json!([{"name": "regcred"}]));
    let host = cluster();
    let response = run(&new_secrets, json!({}), &host);
    assert_eq!(
        response["accepted"], false,
        "the images vanished and the new pods pull them"
    );
    assert_eq!(host.digest_calls().len(), 3, "{:?}", host.calls());

    let new_account = update_changing(|spec| spec["serviceAccountName"] = json!("builder"));
    let host = cluster();
    run(&new_account, json!({}), &host);
    assert_eq!(host.digest_calls().len(), 3);

    let new_selector =
        update_changing(|spec| spec["nodeSelector"] = json!({"kubernetes.io/arch": "arm64"}));
    let host = cluster();
    run(&new_selector, json!({}), &host);
    assert!(
        host.digest_calls().is_empty(),
        "scheduling matters only with requiredPlatforms"
    );
    let host = cluster();
    run(
        &new_selector,
        json!({"requiredPlatforms": ["linux/arm64"]}),
        &host,
    );
    assert_eq!(host.digest_calls().len(), 3);
}

#[test]
fn an_empty_pull_secret_name_keeps_the_service_accounts_secrets_out() {
    let mut request = fixture("deployment-create.json");
    request["object"]["spec"]["template"]["spec"]["imagePullSecrets"] = json!([{"name": ""}]);
    let host = cluster()
        .with_object(service_account("default", &["sa-cred"]))
        .with_object(dockerconfigjson(
            "sa-cred",
            "registry.example.com",
            "u",
            "p",
        ))
        .with_digest(APP, DIGEST)
        .with_digest(MIGRATE, DIGEST)
        .with_digest(BUSYBOX, DIGEST);
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let gets: Vec<String> = host
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("get "))
        .collect();
    assert!(
        gets.is_empty(),
        "neither the ServiceAccount nor a secret \"\" is read: {gets:?}"
    );
}

#[test]
fn a_404_from_a_registry_that_hides_denials_is_not_proof() {
    let image = "acme.jfrog.io/docker/app:1";
    let request = pod_with(image, None);
    let not_found = "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://acme.jfrog.io/v2/docker/app/manifests/1, envelope: OCI API errors: [OCI API error: manifest unknown]";
    let secret_host = |host: InMemoryHost| {
        host.with_object(dockerconfigjson("regcred", "acme.jfrog.io", "u", "p"))
            .with_error(image, not_found)
    };
    let mut with_secret = request.clone();
    with_secret["object"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    let response = run(&with_secret, json!({}), &secret_host(cluster()));
    assert_eq!(response["accepted"], true, "{response}");
    assert!(
        warnings(&response)[0].contains("notFoundMayMeanDenied"),
        "{response}"
    );
    // Without a secret for it, the node pulls anonymously and sees the same 404.
    let anonymous = run(&request, json!({}), &cluster().with_error(image, not_found));
    assert_eq!(anonymous["accepted"], false);
    // Operators who trust the 404 say so.
    let trusted = run(
        &with_secret,
        json!({"notFoundMayMeanDenied": []}),
        &secret_host(cluster()),
    );
    assert_eq!(trusted["accepted"], false);
}
