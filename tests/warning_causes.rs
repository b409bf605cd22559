//! Every documented cause of a warning survives the 256 bytes Kubernetes keeps of it
//! (docs/credential-providers.md): rendered with the longest realistic names (a 63-character
//! namespace, workload and container, a 200-character image, ten nodes of 63 characters),
//! the documented sentence is whole within the warning's first 256 bytes, and the audit
//! annotation `resolvable-images/warnings` keeps the whole text.

use crate::common;

use common::*;

use resolvable_images_policy::answer::{WARNINGS_ANNOTATION, WARNING_MAX};
use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::dockerconfigjson;
use serde_json::{json, Value};

/// A name of 63 characters (a DNS label's most) starting with `start`.
fn long_name(start: &str) -> String {
    format!("{start}{}", "x".repeat(63 - start.len()))
}

/// A 200-character image under `registry` (tag `1.4.2`).
fn long_image(registry: &str) -> String {
    let fixed = registry.len() + "/team/".len() + ":1.4.2".len();
    format!("{registry}/team/{}:1.4.2", "a".repeat(200 - fixed))
}

fn namespace() -> String {
    long_name("team-")
}

/// A Pod of 63-character namespace and name, with one 63-character container running `image`
/// (`pull_policy`), the ServiceAccount `default` and no pull secrets.
fn long_pod(image: &str, pull_policy: &str) -> Value {
    let mut request = fixture("pod-create.json");
    let (namespace, name) = (namespace(), long_name("web-"));
    request["namespace"] = json!(namespace);
    request["name"] = json!(name);
    let object = &mut request["object"];
    object["metadata"]["namespace"] = json!(namespace);
    object["metadata"]["name"] = json!(name);
    let spec = &mut object["spec"];
    spec["containers"] = json!([{"name": long_name("app-"), "image": image,
        "imagePullPolicy": pull_policy}]);
    spec["initContainers"] = json!([]);
    spec["imagePullSecrets"] = json!([]);
    spec["serviceAccountName"] = json!("default");
    request
}

/// The `default` ServiceAccount of the long namespace, with `annotations`.
fn service_account(annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": namespace(), "annotations": annotations}})
}

/// Ten nodes of 63-character names holding `image`.
fn ten_nodes_holding(image: &str) -> Value {
    let items: Vec<Value> = (0..10)
        .map(|i| {
            json!({"metadata": {"name": long_name(&format!("node-{i}-"))},
                "status": {"images": [{"names": [image], "sizeBytes": 10}]}})
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "NodeList", "items": items})
}

/// Asserts the one warning of `response` holds `sentence` whole within its first
/// [`WARNING_MAX`] bytes, and that the audit annotation holds the whole text (`full`).
fn assert_cause_kept(response: &Value, sentence: &str, full: &str) {
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(response);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = &warnings[0];
    assert!(
        warning.len() <= WARNING_MAX,
        "{} bytes: {warning}",
        warning.len()
    );
    assert!(
        warning.contains(sentence),
        "{sentence:?} not whole in {warning:?}"
    );
    let annotation = response["audit_annotations"][WARNINGS_ANNOTATION]
        .as_str()
        .unwrap_or_default();
    assert!(
        annotation.contains(sentence) && annotation.contains(full),
        "{annotation}"
    );
}

const ECR_REGISTRY: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com";

/// A provider for ECR images whose plugin gets the pod's token, requiring an annotation.
fn token_providers() -> Value {
    json!({"credentialProviders": {
        "apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
        "providers": [{"name": "ecr-credential-provider",
            "matchImages": ["*.dkr.ecr.*.amazonaws.com"], "defaultCacheDuration": "12h",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "tokenAttributes": {"serviceAccountTokenAudience": "sts.amazonaws.com",
                "requireServiceAccount": true,
                "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/ecr-role-arn"],
                "cacheType": "ServiceAccount"}}]}})
}

/// The registry refuses the policy's lookup of `image`.
fn refusing(host: InMemoryHost, image: &str) -> InMemoryHost {
    host.with_error(
        image,
        &format!("error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Not authorized: url https://{image}"),
    )
}

#[test]
fn a_provider_skipped_for_a_missing_annotation_says_so_first() {
    let image = long_image(ECR_REGISTRY);
    let host = refusing(InMemoryHost::new(), &image).with_object(service_account(json!({})));
    let response = run(&long_pod(&image, "IfNotPresent"), token_providers(), &host);
    assert_cause_kept(
        &response,
        "credential provider ecr-credential-provider is skipped by the kubelet: ServiceAccount default lacks the annotation eks.amazonaws.com/ecr-role-arn it requires",
        &image,
    );
}

#[test]
fn a_provider_skipped_for_a_missing_service_account_says_so_first() {
    let image = long_image(ECR_REGISTRY);
    let host = refusing(InMemoryHost::new(), &image);
    let response = run(&long_pod(&image, "IfNotPresent"), token_providers(), &host);
    assert_cause_kept(
        &response,
        "credential provider ecr-credential-provider requires a ServiceAccount and default does not exist in the namespace",
        &image,
    );
}

#[test]
fn a_provider_that_runs_says_so_first() {
    let image = long_image(ECR_REGISTRY);
    let host = refusing(InMemoryHost::new(), &image).with_object(service_account(
        json!({"eks.amazonaws.com/ecr-role-arn": "arn:aws:iam::123456789012:role/pull"}),
    ));
    let response = run(&long_pod(&image, "IfNotPresent"), token_providers(), &host);
    assert_cause_kept(
        &response,
        &format!("credential provider ecr-credential-provider may give the node credentials the policy cannot use for {ECR_REGISTRY}"),
        &image,
    );
}

/// The response for a long pod whose image is gone from its registry and held by ten nodes
/// verifying with `policy` (`None`: not said) and `allowlist`.
fn cached(image: &str, policy: Option<&str>, allowlist: &[&str]) -> Value {
    let mut settings = json!({"preloadedImagesVerificationAllowlist": allowlist});
    if let Some(policy) = policy {
        settings["imagePullCredentialsVerificationPolicy"] = json!(policy);
    }
    let host = InMemoryHost::new()
        .with_object(service_account(json!({})))
        .with_nodes(ten_nodes_holding(image));
    run(&long_pod(image, "IfNotPresent"), settings, &host)
}

/// Each `cachedOnNodes` cause: (policy, allowlist, documented sentence), the rows of
/// docs/credential-providers.md's table.
#[test]
fn every_cached_on_nodes_cause_is_kept_whole() {
    let image = long_image("registry.example.com");
    let name = image.trim_end_matches(":1.4.2");
    let exact = name.to_owned();
    let tail_cut = &name[..name.len() - 1];
    let cases: Vec<(Option<&str>, Vec<&str>, String)> = vec![
        (None, vec![], "before 1.35 any pod starts from it; from 1.35, by default, only one preloaded or pulled without pod credentials".into()),
        (Some("NeverVerify"), vec![], "NeverVerify nodes start any pod from their copy".into()),
        (Some("NeverVerifyPreloadedImages"), vec![], "NeverVerifyPreloadedImages nodes start any pod from a copy preloaded or pulled without pod credentials".into()),
        // a `/*` prefix entry covers the image as the Pod writes it
        (Some("NeverVerifyAllowlistedImages"), vec!["registry.example.com/team/*"], "allowlisted by registry.example.com/team/*: NeverVerifyAllowlistedImages nodes start any pod from their copy".into()),
        // an exact entry never covers a tagged image before 1.36
        (Some("NeverVerifyAllowlistedImages"), vec![exact.as_str()], "on kubelets from 1.36 only: earlier ones compare the image as the Pod writes it, tag included".into()),
        // another repository, and an entry that is only a text prefix of the name
        (Some("NeverVerifyAllowlistedImages"), vec!["registry.example.com/platform/*", tail_cut], "not allowlisted: NeverVerifyAllowlistedImages nodes pull again unless the kubelet pulled their copy anonymously, with node or this pod's credentials".into()),
        (Some("AlwaysVerify"), vec![], "AlwaysVerify nodes pull again unless the kubelet pulled their copy anonymously, with node or this pod's credentials".into()),
    ];
    for (policy, allowlist, sentence) in cases {
        let response = cached(&image, policy, &allowlist);
        assert_cause_kept(&response, &sentence, "cached on 10 node(s)");
        let annotation = &response["audit_annotations"][WARNINGS_ANNOTATION];
        assert!(
            annotation.as_str().is_some_and(|a| a.contains(&image)),
            "{annotation}"
        );
    }
}

/// A 404 from a `notFoundMayMeanDenied` registry: docs/credential-providers.md's "the registry
/// may hide repositories".
#[test]
fn a_registry_that_may_hide_repositories_says_so_first() {
    let registry = "registry.example.com";
    let image = long_image(registry);
    let settings = json!({"notFoundMayMeanDenied": [registry]});
    // the pod holds a pull secret for the registry, which the lookup did not use
    let mut secret = dockerconfigjson("regcred", registry, "u", "p");
    secret["metadata"]["namespace"] = json!(namespace());
    let host = InMemoryHost::new()
        .with_object(service_account(json!({})))
        .with_object(secret);
    let mut pod = long_pod(&image, "IfNotPresent");
    pod["object"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    let response = run(&pod, settings, &host);
    assert_cause_kept(
        &response,
        &format!("{registry} may answer 404 to hide repositories from callers without access (notFoundMayMeanDenied)"),
        &image,
    );
}

/// An absent image's tag suggestions (the lookup broker's, issue 56) stay whole beside the
/// reason, whatever the names around them: with the longest image the broker's encoding carries
/// for a 63-character namespace (a longer one is looked up directly, without suggestions).
#[test]
fn an_absent_images_tag_suggestions_are_kept_whole() {
    let registry = "registry.example.com";
    let team = "/team/";
    let (repository, reference) = (1..=200 - registry.len() - team.len() - ":1.4.2".len())
        .rev()
        .map(|n| format!("team/{}", "a".repeat(n)))
        .find_map(|repository| {
            crate::broker::encodable_in(&namespace(), registry, &repository, "1.4.2", &[])
                .map(|reference| (repository, reference))
        })
        .expect("some image encodes");
    let image = format!("{registry}/{repository}:1.4.2");
    assert!(image.len() > 100, "{}: {image}", image.len());
    let said = "manifest unknown (nearest tags: 1.4.1 1.4.2-alpine)";
    let host = crate::broker::host()
        .with_object(service_account(json!({})))
        .with_error(
            &reference,
            &crate::broker::not_found_saying(&reference, said),
        );
    let mut settings = crate::broker::settings("all");
    settings["actions"] = json!({"absent": "warn"});
    let response = run(&long_pod(&image, "IfNotPresent"), settings, &host);
    assert_cause_kept(
        &response,
        "(did you mean 1.4.1 or 1.4.2-alpine?)",
        "not found on registry registry.example.com",
    );
}
