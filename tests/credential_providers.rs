//! The nodes' kubelet credential provider plugins and the kubelet's verification of cached
//! images (docs/credential-providers.md): the settings in the kubelet's own format, checked
//! as the kubelet checks them; images a provider covers are not `uncoveredRegistry`; a
//! provider the kubelet skips for the pod names what the pod lacks; and what `cachedOnNodes`
//! says under each `imagePullCredentialsVerificationPolicy`.

mod common;

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
        "requiredServiceAccountAnnotationKey": ["eks.amazonaws.com/role-arn"]
    });
    assert_invalid_settings_named(
        &json!({"credentialProviders": config}),
        "requiredServiceAccountAnnotationKey`",
    );
}

#[test]
fn a_bad_glob_is_refused() {
    let mut config = eks_config();
    config["providers"][0]["matchImages"] = json!(["https://*.dkr.ecr.*.amazonaws.com"]);
    assert_invalid_settings_named(
        &json!({"credentialProviders": config}),
        "credentialProviders: provider \"ecr-credential-provider\": matchImages entry",
    );
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
