//! The nodes' kubelet credential provider plugins and the kubelet's verification of cached
//! images (docs/credential-providers.md): the settings in the kubelet's own format, checked
//! as the kubelet checks them; images a provider covers are not `uncoveredRegistry`; a
//! provider the kubelet skips for the pod names what the pod lacks; and what `cachedOnNodes`
//! says under each `imagePullCredentialsVerificationPolicy`.

use crate::common;

use common::*;

use serde_json::{json, Value};

/// A config shaped like the one Amazon EKS documents for its nodes' ECR plugin.
fn eks_config() -> Value {
    json!({
        "apiVersion": "kubelet.config.k8s.io/v1",
        "kind": "CredentialProviderConfig",
        "providers": [{
            "name": "ecr-credential-provider",
            "matchImages": [
                "*.dkr.ecr.*.amazonaws.com",
                "*.dkr-ecr.*.on.aws",
                "*.dkr.ecr.*.amazonaws.com.cn",
                "*.dkr-ecr.*.on.amazonwebservices.com.cn",
                "*.dkr.ecr-fips.*.amazonaws.com",
                "*.dkr.ecr.*.c2s.ic.gov",
                "*.dkr.ecr.*.sc2s.sgov.gov"
            ],
            "defaultCacheDuration": "12h",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1"
        }]
    })
}

fn valid(settings: &Value) -> bool {
    let answer: Value = serde_json::from_slice(
        &resolvable_images_policy::settings::validate_settings_payload(
            settings.to_string().as_bytes(),
        ),
    )
    .expect("validate_settings answers JSON");
    answer["valid"] == true
}

#[test]
fn an_eks_shaped_config_loads() {
    assert!(valid(&json!({"credentialProviders": eks_config()})));
}

#[test]
fn a_typo_in_a_provider_is_refused_naming_the_field() {
    let mut config = eks_config();
    let provider = &mut config["providers"][0];
    provider["matchImage"] = provider["matchImages"].take();
    provider
        .as_object_mut()
        .expect("an object")
        .remove("matchImages");
    assert_invalid_settings_named(&json!({"credentialProviders": config}), "matchImage`");
}

#[test]
fn a_typo_in_token_attributes_is_refused_naming_the_field() {
    let mut config = eks_config();
    config["providers"][0]["tokenAttributes"] = json!({
        "serviceAccountTokenAudience": "sts.amazonaws.com",
        "requireServiceAccount": true,
        "requiredServiceAccountAnnotationKey": ["eks.amazonaws.com/role-arn"],
        "cacheType": "ServiceAccount"
    });
    assert_invalid_settings_named(
        &json!({"credentialProviders": config}),
        "requiredServiceAccountAnnotationKey`",
    );
}

/// The `matchImages` forms of issue 55, each beside the kubelet's answer: it checks an entry
/// only with `ParseSchemelessURL` (Go's `url.Parse` of `https://` + entry) in
/// `validateCredentialProviderConfig`
/// (<https://github.com/kubernetes/kubernetes/blob/master/pkg/credentialprovider/plugin/config.go>).
#[test]
fn match_images_are_accepted_and_refused_as_the_kubelet_does() {
    let forms = [
        ("https://registry.example.com", true),
        ("registry.example.com/*/team", true),
        ("registry.example.com:5000", true),
        ("*.registry.example.com", true),
        ("registry.example.com/team?x=1", true),
        ("bad host.example.com", false),
        ("registry.example.com:port", false),
    ];
    for (entry, kubelet_accepts) in forms {
        let mut config = eks_config();
        config["providers"][0]["matchImages"] = json!([entry]);
        let settings = json!({"credentialProviders": config});
        if kubelet_accepts {
            assert!(valid(&settings), "{entry}");
        } else {
            assert_invalid_settings_named(
                &settings,
                "credentialProviders: provider \"ecr-credential-provider\": matchImages entry",
            );
        }
    }
}

#[test]
fn a_bad_duration_is_refused() {
    let mut config = eks_config();
    config["providers"][0]["defaultCacheDuration"] = json!("12 hours");
    assert_invalid_settings_named(
        &json!({"credentialProviders": config}),
        "defaultCacheDuration \"12 hours\" is not a duration",
    );
}

#[test]
fn a_config_of_another_kind_is_refused() {
    let mut config = eks_config();
    config["kind"] = json!("KubeletConfiguration");
    assert_invalid_settings_named(
        &json!({"credentialProviders": config}),
        "is not CredentialProviderConfig",
    );
}

#[test]
fn the_verification_settings_take_the_kubelets_names_and_values() {
    for policy in [
        "NeverVerify",
        "NeverVerifyPreloadedImages",
        "NeverVerifyAllowlistedImages",
        "AlwaysVerify",
    ] {
        assert!(
            valid(&json!({"imagePullCredentialsVerificationPolicy": policy})),
            "{policy}"
        );
    }
    assert_invalid_settings_named(
        &json!({"imagePullCredentialsVerificationPolicy": "neverVerify"}),
        "imagePullCredentialsVerificationPolicy",
    );
    assert!(valid(&json!({
        "imagePullCredentialsVerificationPolicy": "NeverVerifyAllowlistedImages",
        "preloadedImagesVerificationAllowlist": ["registry.k8s.io/pause", "registry.example/base/*"]
    })));
    assert_invalid_settings_named(
        &json!({"preloadedImagesVerificationAllowlist": ["registry.k8s.io/pause:3.10"]}),
        "preloadedImagesVerificationAllowlist[0]",
    );
    assert_invalid_settings_named(
        &json!({"preloadedImagesVerificationAllowlist": ["registry.example/*", "registry.example/base*"]}),
        "preloadedImagesVerificationAllowlist[1]",
    );
}

const ECR_IMAGE: &str = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app:1.0";

/// The Pod fixture (namespace team-a, ServiceAccount `default`) with one container `app`
/// running `image`, no init containers and no pull secrets of its own.
fn pod_with(image: &str, pull_policy: Option<&str>) -> Value {
    let mut request = fixture("pod-create.json");
    let mut container = json!({"name": "app", "image": image});
    if let Some(policy) = pull_policy {
        container["imagePullPolicy"] = json!(policy);
    }
    let spec = &mut request["object"]["spec"];
    spec["containers"] = json!([container]);
    spec["initContainers"] = json!([]);
    spec["imagePullSecrets"] = json!([]);
    spec["serviceAccountName"] = json!("default");
    request
}

/// A stock policy server: the registry refuses the policy server's anonymous lookup.
fn refusing(image: &str) -> resolvable_images_policy::host::InMemoryHost {
    cluster().with_error(
        image,
        &format!("error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Not authorized: url https://{image}"),
    )
}

/// The warning of the one finding, which must be the only one.
fn only_warning(response: &Value) -> String {
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(response);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    warnings[0].clone()
}

#[test]
fn without_providers_a_refused_private_image_is_an_uncovered_registry() {
    let response = run(&pod_with(ECR_IMAGE, None), json!({}), &refusing(ECR_IMAGE));
    let warning = only_warning(&response);
    assert!(
        warning.contains("actions.uncoveredRegistry: warn"),
        "{warning}"
    );
}

#[test]
fn a_provider_covered_image_is_not_an_uncovered_registry() {
    let settings = json!({"credentialProviders": eks_config()});
    let response = run(&pod_with(ECR_IMAGE, None), settings, &refusing(ECR_IMAGE));
    let warning = only_warning(&response);
    assert!(warning.contains("actions.unauthorized: warn"), "{warning}");
    assert!(
        warning.contains("credential provider ecr-credential-provider may give the"),
        "{warning}"
    );
    // even where an operator rejects uncovered registries, a provider's image is not one
    let strict = json!({
        "credentialProviders": eks_config(),
        "actions": {"uncoveredRegistry": "reject"}
    });
    let response = run(&pod_with(ECR_IMAGE, None), strict, &refusing(ECR_IMAGE));
    assert_eq!(response["accepted"], true, "{response}");
}

#[test]
fn an_image_no_match_images_glob_covers_is_still_uncovered() {
    let image = "registry.example.com/team/app:1.4.2";
    let settings = json!({"credentialProviders": eks_config()});
    let warning = only_warning(&run(&pod_with(image, None), settings, &refusing(image)));
    assert!(
        warning.contains("actions.uncoveredRegistry: warn"),
        "{warning}"
    );
}

/// The EKS config with a provider that gets the pod's ServiceAccount token, as an ECR plugin
/// configured for KEP-4412 tokens does.
fn token_config() -> Value {
    let mut config = eks_config();
    config["providers"][0]["tokenAttributes"] = json!({
        "serviceAccountTokenAudience": "sts.amazonaws.com",
        "requireServiceAccount": true,
        "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/role-arn"],
        "cacheType": "ServiceAccount"
    });
    config
}

#[test]
fn a_provider_skipped_for_the_pod_names_the_missing_annotation() {
    // the default ServiceAccount of common::cluster() has no annotation
    let settings = json!({
        "credentialProviders": token_config(),
        "actions": {"uncoveredRegistry": "reject"}
    });
    let host = refusing(ECR_IMAGE);
    let response = run(&pod_with(ECR_IMAGE, None), settings, &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(
        message.contains("credential provider ecr-credential-provider is skipped by the kubelet: ServiceAccount default lacks the annotation eks.amazonaws.com/role-arn"),
        "{message}"
    );
    assert!(
        host.calls()
            .contains(&"get ServiceAccount team-a/default".to_owned()),
        "{:?}",
        host.calls()
    );
}

#[test]
fn a_provider_run_for_the_pod_makes_it_unauthorized_only() {
    let host = refusing(ECR_IMAGE).with_object(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "team-a", "annotations": {
            "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/pull"}}
    }));
    let settings = json!({"credentialProviders": token_config()});
    let warning = only_warning(&run(&pod_with(ECR_IMAGE, None), settings, &host));
    assert!(warning.contains("actions.unauthorized: warn"), "{warning}");
    assert!(
        !warning.contains("arn:aws"),
        "no annotation value: {warning}"
    );
}

#[test]
fn an_unreadable_service_account_leaves_the_provider_possible() {
    let host = refusing(ECR_IMAGE).with_resource_error(
        "Policy has not been granted access to Kubernetes v1/ServiceAccount resources.",
    );
    let settings = json!({"credentialProviders": token_config()});
    let response = run(&pod_with(ECR_IMAGE, None), settings, &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(
        !message(&response).contains("uncoveredRegistry")
            && warnings(&response)
                .iter()
                .all(|w| !w.contains("actions.uncoveredRegistry")),
        "{response}"
    );
}

// What `cachedOnNodes` says under each `imagePullCredentialsVerificationPolicy`: the table of
// docs/credential-providers.md ("Cached images and the verification policy"), a test a row.
// A node holds the image, the registry answers 404. Under every policy some copy serves the
// pod without a pull (the policy cannot see how a copy got there), so the verdict stays
// `cachedOnNodes`, a warning; only `Always` makes the 404 certain.

const APP_IMAGE: &str = "registry.example.com/team/app:1.4.2";

fn nodes_holding_app() -> Value {
    json!({"apiVersion": "v1", "kind": "NodeList", "items": [
        {"metadata": {"name": "node-1"},
         "status": {"images": [{"names": [APP_IMAGE], "sizeBytes": 10}]}},
    ]})
}

/// The verdict's action key as the default answer names it, and the whole message as a
/// rejecting `actions.cachedOnNodes` writes it, for `image` pulled with `pull_policy` on nodes
/// verifying with `policy` (`None`: not said) and `allowlist`.
fn cached(
    image: &str,
    pull_policy: &str,
    policy: Option<&str>,
    allowlist: &[&str],
) -> (Value, String) {
    let mut settings = json!({"preloadedImagesVerificationAllowlist": allowlist});
    if let Some(policy) = policy {
        settings["imagePullCredentialsVerificationPolicy"] = json!(policy);
    }
    let request = pod_with(image, Some(pull_policy));
    let host = cluster().with_nodes(nodes_holding_app());
    let response = run(&request, settings.clone(), &host);
    settings["actions"] = json!({"cachedOnNodes": "reject"});
    let strict = run(&request, settings, &host);
    (response, message(&strict))
}

fn assert_cached_on_nodes(response: &Value, message: &str, says: &str) {
    let warning = only_warning(response);
    assert!(
        warning.contains("(cached on nodes)") && warning.contains("actions.cachedOnNodes: warn"),
        "{warning}"
    );
    assert!(message.contains(says), "{message}");
}

#[test]
fn cached_without_a_verification_policy_says_what_it_always_said() {
    let (response, message) = cached(APP_IMAGE, "IfNotPresent", None, &[]);
    assert_cached_on_nodes(
        &response,
        &message,
        "before 1.35 any pod starts from it; from 1.35, by default, only one preloaded or pulled without pod credentials; cached on 1 node(s) (node-1)",
    );
}

#[test]
fn cached_under_never_verify_serves_every_pod() {
    let (response, message) = cached(APP_IMAGE, "IfNotPresent", Some("NeverVerify"), &[]);
    assert_cached_on_nodes(
        &response,
        &message,
        "NeverVerify nodes start any pod from their copy",
    );
}

#[test]
fn cached_under_never_verify_preloaded_images_may_be_a_preloaded_copy() {
    let (response, message) = cached(
        APP_IMAGE,
        "IfNotPresent",
        Some("NeverVerifyPreloadedImages"),
        &[],
    );
    assert_cached_on_nodes(
        &response,
        &message,
        "NeverVerifyPreloadedImages nodes start any pod from a copy preloaded or pulled without pod credentials",
    );
}

#[test]
fn cached_and_allowlisted_under_never_verify_allowlisted_images_serves_every_pod() {
    let (response, message) = cached(
        APP_IMAGE,
        "IfNotPresent",
        Some("NeverVerifyAllowlistedImages"),
        &["registry.example.com/team/*"],
    );
    assert_cached_on_nodes(
        &response,
        &message,
        "allowlisted by registry.example.com/team/*: NeverVerifyAllowlistedImages nodes start any pod from their copy",
    );
}

#[test]
fn cached_but_not_allowlisted_under_never_verify_allowlisted_images_may_still_serve() {
    let (response, message) = cached(
        APP_IMAGE,
        "IfNotPresent",
        Some("NeverVerifyAllowlistedImages"),
        &[
            "registry.example.com/platform/*",
            "registry.example.com/team/app-base",
        ],
    );
    assert_cached_on_nodes(
        &response,
        &message,
        "not allowlisted: NeverVerifyAllowlistedImages nodes pull again unless the kubelet pulled their copy anonymously, with node or this pod's credentials",
    );
}

#[test]
fn cached_under_always_verify_may_still_serve_a_copy_pulled_without_pod_credentials() {
    let (response, message) = cached(APP_IMAGE, "IfNotPresent", Some("AlwaysVerify"), &[]);
    assert_cached_on_nodes(
        &response,
        &message,
        "AlwaysVerify nodes pull again unless the kubelet pulled their copy anonymously, with node or this pod's credentials",
    );
}

#[test]
fn cached_images_pulled_always_are_absent_under_every_verification_policy() {
    for policy in [
        None,
        Some("NeverVerify"),
        Some("NeverVerifyPreloadedImages"),
        Some("NeverVerifyAllowlistedImages"),
        Some("AlwaysVerify"),
    ] {
        let (response, _) = cached(APP_IMAGE, "Always", policy, &["registry.example.com/*"]);
        assert_eq!(response["accepted"], false, "{policy:?}: {response}");
        assert!(
            message(&response).contains("not found on registry registry.example.com"),
            "{policy:?}: {response}"
        );
    }
}
