//! The lookup broker setting (`lookupBroker`, docs/broker.md) through the decision path: which
//! lookups are rewritten, what the answers mean, messages that name the real registry, and
//! that no image a Pod author writes reaches the broker's host.

use crate::common;

use common::*;

use broker_reference::{BrokeredName, Credentials, ManifestReference, SealingKey, Unsealing};
use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::dockerconfigjson;
use serde_json::{json, Value};

const DIGEST: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const BROKER: &str = "broker.kw.svc:8443";

/// The key the broker and the policy share in these tests (the Secret's `data.key`).
const KEY: &str = "e2e-sealing-key-0123456789abcdefghij";

pub(crate) fn settings(usage: &str) -> Value {
    json!({"lookupBroker": {"host": BROKER, "use": usage,
        "keySecret": {"namespace": "kubewarden", "name": "broker-key"}}})
}

/// The key Secret as the API server returns it.
fn key_secret(key: &str) -> Value {
    use base64::Engine as _;
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "broker-key", "namespace": "kubewarden"},
        "data": {"key": base64::engine::general_purpose::STANDARD.encode(key)}})
}

fn with_pod_secrets(mut request: Value, names: &[&str]) -> Value {
    let refs: Vec<Value> = names.iter().map(|s| json!({"name": s})).collect();
    request["object"]["spec"]["imagePullSecrets"] = json!(refs);
    request
}

/// The brokered lookup of `registry/repository` for team-a's `secrets`.
fn brokered_name(registry: &str, repository: &str, secrets: &[&str]) -> BrokeredName {
    BrokeredName {
        namespace: "team-a".into(),
        credentials: Credentials::PullSecrets(secrets.iter().map(|s| s.to_string()).collect()),
        registry: registry.into(),
        repository: repository.into(),
    }
}

/// The brokered reference of `registry/repository:tag` for team-a's `secrets`, sealed at the
/// test host's wall clock.
fn brokered(registry: &str, repository: &str, tag: &str, secrets: &[&str]) -> String {
    brokered_in("team-a", registry, repository, tag, secrets)
}

/// The brokered reference of `registry/repository:tag` for `namespace`'s `secrets`, sealed at
/// the test host's wall clock.
pub(crate) fn brokered_in(
    namespace: &str,
    registry: &str,
    repository: &str,
    tag: &str,
    secrets: &[&str],
) -> String {
    encodable_in(namespace, registry, repository, tag, secrets).expect("encodable")
}

/// [`brokered_in`], or `None` where the name is too long for the broker's encoding (the policy
/// then looks the image up directly).
pub(crate) fn encodable_in(
    namespace: &str,
    registry: &str,
    repository: &str,
    tag: &str,
    secrets: &[&str],
) -> Option<String> {
    let key = SealingKey::new(KEY).expect("a key");
    let expires = broker_reference::expiry(InMemoryHost::UNIX_TIME.as_secs());
    let name = BrokeredName {
        namespace: namespace.into(),
        ..brokered_name(registry, repository, secrets)
    };
    broker_reference::reference(BROKER, &name, &key, Some(tag), None, expires).ok()
}

/// What the broker at `now` (Unix seconds) makes of a brokered `reference` the policy wrote,
/// asked as the policy server asks: by its digest when it has one, else by its tag.
fn broker_decodes(reference: &str, now: u64) -> Result<BrokeredName, broker_reference::Refusal> {
    let name = reference
        .strip_prefix(&format!("{BROKER}/"))
        .expect("on the broker's host");
    let (name, asked) = match name.split_once('@') {
        Some((name, digest)) => (
            name.rsplit_once(':').map_or(name, |(n, _)| n),
            ManifestReference::Digest(digest.into()),
        ),
        None => {
            let (name, tag) = name.rsplit_once(':').expect("a tag");
            (name, ManifestReference::Tag(tag.into()))
        }
    };
    let keys = [SealingKey::new(KEY).expect("a key")];
    let hosts = [BROKER.to_owned()];
    let broker = Unsealing {
        keys: &keys,
        own_hosts: &hosts,
        now,
    };
    BrokeredName::decode(name, &asked, &broker)
}

fn app() -> String {
    brokered("registry.example.com", "team/app", "1.4.2", &["regcred"])
}

fn migrate() -> String {
    brokered(
        "registry.example.com",
        "platform/migrate",
        "2.1.0",
        &["regcred"],
    )
}

pub(crate) fn host() -> InMemoryHost {
    cluster()
        .with_object(key_secret(&format!("{KEY}\n")))
        .with_object(dockerconfigjson(
            "regcred",
            "registry.example.com",
            "robot",
            "pa55",
        ))
        .with_digest(BUSYBOX, DIGEST)
}

#[test]
fn covered_images_are_looked_up_through_the_broker_the_others_directly() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = host()
        .with_digest(&app(), DIGEST)
        .with_digest(&migrate(), DIGEST);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
    let mut calls = host.digest_calls();
    calls.sort();
    let mut expected = vec![app(), migrate(), BUSYBOX.to_owned()];
    expected.sort();
    assert_eq!(calls, expected);
}

#[test]
fn use_all_brokers_every_image_of_a_pod() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let busybox = brokered("docker.io", "library/busybox", "1.36", &["regcred"]);
    let host = host()
        .with_digest(&app(), DIGEST)
        .with_digest(&migrate(), DIGEST)
        .with_digest(&busybox, DIGEST);
    let response = run(&request, settings("all"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(
        host.digest_calls().contains(&busybox),
        "{:?}",
        host.digest_calls()
    );
    assert!(!host.digest_calls().contains(&BUSYBOX.to_owned()));
}

#[test]
fn without_the_setting_nothing_changes() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = host().with_digest(APP, DIGEST).with_digest(MIGRATE, DIGEST);
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(host.digest_calls().iter().all(|c| !c.starts_with(BROKER)));
}

#[test]
fn an_absent_image_is_rejected_naming_the_real_registry_never_the_broker() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let not_found = format!(
        "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url https://{BROKER}/v2/{}/manifests/1.4.2, envelope: OCI API errors: [OCI API error: manifest unknown]",
        app().trim_start_matches(&format!("{BROKER}/")).trim_end_matches(":1.4.2")
    );
    let host = host()
        .with_error(&app(), &not_found)
        .with_digest(&migrate(), DIGEST);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(message.contains("registry.example.com"), "{message}");
    assert!(
        message.contains("https://registry.example.com/v2/team/app/manifests/1.4.2"),
        "{message}"
    );
    assert!(
        !message.contains(BROKER) && !message.contains("r4/"),
        "{message}"
    );
}

/// The warnings of a pod whose two brokered lookups both fail with `error(reference)`, the
/// host's text for that reference; the pod is accepted with one warning per image.
fn warnings_when_both_fail(error: impl Fn(&str) -> String) -> Vec<String> {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let host = host()
        .with_error(&app(), &error(&app()))
        .with_error(&migrate(), &error(&migrate()));
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    for warning in &warnings {
        assert!(!warning.contains("r4/"), "{warning}");
    }
    warnings
}

/// The policy server's text for a lookup of `reference` that failed with `what`.
fn host_text(what: &str) -> String {
    format!("error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: {what}")
}

/// The manifest URL the policy server asks for a brokered `reference`.
fn manifest_url(reference: &str) -> String {
    let (host, name) = reference.split_once('/').expect("host/name");
    let (name, tag) = name.rsplit_once(':').expect("tag");
    format!("https://{host}/v2/{name}/manifests/{tag}")
}

#[test]
fn a_broker_that_refuses_the_policy_server_is_a_warning_not_a_verdict() {
    let warnings = warnings_when_both_fail(|reference| {
        host_text(&format!("Not authorized: url https://{reference}"))
    });
    for warning in warnings {
        assert!(
            warning.contains("lookup broker refused the lookup"),
            "{warning}"
        );
    }
}

#[test]
fn a_broker_that_does_not_answer_is_named_never_the_registry() {
    let warnings = warnings_when_both_fail(|reference| {
        host_text(&format!(
            "error sending request for url ({})",
            manifest_url(reference)
        ))
    });
    for warning in warnings {
        assert!(
            warning.contains(&format!(
                "not checked: lookup broker {BROKER} did not answer"
            )),
            "{warning}"
        );
        assert!(
            !warning.contains("https://registry.example.com"),
            "{warning}"
        );
    }
}

#[test]
fn a_broker_that_does_not_answer_never_shows_the_bare_encoded_name() {
    // a host error that quotes the reference as given, not only its /v2/ URL
    let warnings = warnings_when_both_fail(|reference| {
        let (_, name) = reference.split_once('/').expect("host/name");
        let bare = name.rsplit_once(':').expect("tag").0;
        host_text(&format!("cannot look up {bare}: connection refused"))
    });
    for warning in warnings {
        assert!(warning.contains("did not answer"), "{warning}");
        assert!(warning.contains("look up …"), "{warning}");
        assert!(!warning.contains("team-a/s."), "{warning}");
    }
}

#[test]
fn a_namespace_the_broker_does_not_serve_is_a_warning_saying_so() {
    let warnings = warnings_when_both_fail(|_| {
        host_text("Registry error: url x, envelope: OCI API errors: [OCI API error: denied: namespace not enabled for the lookup broker: namespace team-a has not opted in to the lookup broker (label resolvable-images.kubewarden.io/broker=enabled)]")
    });
    for warning in warnings {
        assert!(
            warning
                .ends_with("not checked: namespace team-a has not opted in to the lookup broker"),
            "{warning}"
        );
        assert!(!warning.contains("refused"), "{warning}");
    }
}

/// docs/broker.md's table gives the warning of each refused namespace: the policy reads the
/// broker's two refusals (whose words `broker/src/cluster/tenancy.rs` checks against the same table)
/// into exactly those.
#[test]
fn a_refused_namespace_gets_the_warning_docs_broker_md_gives() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/broker.md"))
        .expect("docs/broker.md");
    for words in [
        "has not opted in to the lookup broker (label resolvable-images.kubewarden.io/broker=enabled)",
        "is never served by the lookup broker",
    ] {
        let warnings = warnings_when_both_fail(|_| {
            host_text(&format!("Registry error: url x, envelope: OCI API errors: [OCI API error: denied: namespace not enabled for the lookup broker: namespace team-a {words}]"))
        });
        let said = warnings[0]
            .split_once("not checked: ")
            .map(|(_, said)| said.replace("team-a", "NAMESPACE"))
            .expect("a not-checked warning");
        let documented = format!("`not checked: {said}`");
        assert!(docs.contains(&documented), "{documented} is not in docs/broker.md");
    }
}

#[test]
fn the_brokers_reason_for_no_answer_is_kept_and_survives_the_cut() {
    let warnings = warnings_when_both_fail(|reference| {
        host_text(&format!(
            r#"Server error: url {}, code: 503, message: {{"errors":[{{"code":"UNAVAILABLE","detail":null,"message":"timed out after 1000 ms"}}]}}"#,
            manifest_url(reference)
        ))
    });
    for warning in warnings {
        assert!(
            warning.contains("through the lookup broker: UNAVAILABLE: timed out after 1000 ms"),
            "{warning}"
        );
        assert!(!warning.contains("non-registry body"), "{warning}");
    }
}

#[test]
fn a_pull_secret_the_broker_cannot_decode_is_the_kubelets_certain_failure() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let malformed = r#"error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url x, envelope: OCI API errors: [OCI API error: denied: malformed pull secret secret "team-a/regcred": key ".dockerconfigjson" is not valid JSON (line 1, column 2); the kubelet fails every pull of the pod]"#;
    let host = host()
        .with_error(&app(), malformed)
        .with_digest(&migrate(), DIGEST);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = response["message"].as_str().unwrap_or_default();
    assert!(message.contains("malformed pull secret"), "{message}");
    assert!(message.contains("team-a/regcred"), "{message}");
    assert!(message.contains("read by the lookup broker"), "{message}");
    assert!(!message.contains("r2/"), "{message}");
}

#[test]
fn a_registrys_own_denial_is_never_read_as_a_malformed_secret() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    // a registry's words reach the policy only through a 404 (whose envelope the broker
    // filters) or a 503: neither is a DENIED
    let registry_words = r#"error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Server error: url https://x/v2/a/manifests/1, code: 503, message: {"errors":[{"code":"UNAVAILABLE","message":"denied: malformed pull secret"}]}"#;
    let host = host()
        .with_error(&app(), registry_words)
        .with_digest(&migrate(), DIGEST);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], true, "{response}");
}

#[test]
fn refused_pull_secrets_are_the_unauthorized_verdict() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let denied = "error invoking host capability oci.manifest_digest: Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url x, envelope: OCI API errors: [OCI API error: denied: registry.example.com refused every credential]";
    let host = host()
        .with_error(&app(), denied)
        .with_error(&migrate(), denied);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let warnings = warnings(&response);
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("the pod's pull secrets for registry.example.com were refused")),
        "{warnings:?}"
    );
}

#[test]
fn images_naming_the_broker_are_never_looked_up() {
    // an image that imitates a lookup of kube-system's secrets
    let hostile = format!(
        "{BROKER}/r4/{}/1767225900/kube-system/s.admin/d.registry.example.com/team/app:1.4.2",
        "0".repeat(32)
    );
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["containers"][0]["image"] = json!(hostile);
    for usage in ["credentialed", "all"] {
        let host = host()
            .with_digest(&hostile, DIGEST)
            .with_digest(APP, DIGEST)
            .with_digest(MIGRATE, DIGEST);
        let response = run(&request, settings(usage), &host);
        assert!(
            host.digest_calls()
                .iter()
                .all(|c| !c.contains("kube-system")),
            "{usage}: {:?}",
            host.digest_calls()
        );
        let warnings = warnings(&response);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("names the lookup broker's host") || w.contains("broker")),
            "{usage}: {response}"
        );
    }
}

#[test]
fn the_broker_host_must_be_a_plain_host() {
    // An empty host is what the Kubewarden UI writes for an unset field: it is dropped
    // (`ui_form`), so the settings lack the host.
    assert_settings_refused_naming(
        json!({"lookupBroker": {"host": ""}}),
        "lookupBroker: missing field `host`",
    );
    // the names are checked when the host loads the policy (a request does not check them
    // again, as it does not check mirror locations or namespace names)
    for host in [
        "Broker.example",
        "broker.example/path",
        "[::1]:8443",
        "broker:port",
    ] {
        assert_invalid_settings_named(
            &json!({"lookupBroker": {"host": host,
                "keySecret": {"namespace": "kubewarden", "name": "broker-key"}}}),
            "lookupBroker.host",
        );
    }
    assert_settings_refused_naming(
        json!({"lookupBroker": {"host": BROKER, "use": "sometimes"}}),
        "lookupBroker",
    );
}

#[test]
fn the_key_secret_is_required_and_named_by_kubernetes_names() {
    assert_settings_refused_naming(
        json!({"lookupBroker": {"host": BROKER}}),
        "lookupBroker: missing field `keySecret`",
    );
    assert_settings_refused_naming(
        json!({"lookupBroker": {"host": BROKER, "keySecret": {"namespace": "kubewarden"}}}),
        "missing field `name`",
    );
    for (secret, field) in [
        (
            json!({"namespace": "Kube", "name": "k"}),
            "lookupBroker.keySecret.namespace",
        ),
        (
            json!({"namespace": "kubewarden", "name": "a_b"}),
            "lookupBroker.keySecret.name",
        ),
    ] {
        assert_invalid_settings_named(
            &json!({"lookupBroker": {"host": BROKER, "keySecret": secret}}),
            field,
        );
    }
}

#[test]
fn an_unreadable_key_is_a_warning_naming_the_secret_and_nothing_reaches_the_broker() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let without_key = || {
        cluster()
            .with_object(dockerconfigjson(
                "regcred",
                "registry.example.com",
                "robot",
                "pa55",
            ))
            .with_digest(BUSYBOX, DIGEST)
    };
    let short = "too-short-a-key";
    let cases = [
        (without_key(), "does not exist"),
        (
            without_key().with_object(key_secret(short)),
            "is shorter than 32 bytes",
        ),
        (
            without_key().with_object(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "broker-key", "namespace": "kubewarden"},
                "data": {"other": "eA=="}})),
            "has no data.key",
        ),
    ];
    for (host, why) in cases {
        let response = run(&request, settings("credentialed"), &host);
        assert_eq!(response["accepted"], true, "{why}: {response}");
        let warnings = warnings(&response);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        for warning in &warnings {
            assert!(
                warning.contains("broker key Secret kubewarden/broker-key")
                    && warning.contains(why),
                "{warning}"
            );
            assert!(!warning.contains(short), "{warning}");
        }
        assert!(
            host.digest_calls().iter().all(|c| !c.starts_with(BROKER)),
            "{:?}",
            host.digest_calls()
        );
    }
}

#[test]
fn the_policys_references_are_sealed_for_the_broker_host_the_tag_and_minutes() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let now = InMemoryHost::UNIX_TIME.as_secs();
    let host = host()
        .with_digest(&app(), DIGEST)
        .with_digest(&migrate(), DIGEST);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], true, "{response}");
    let expected = brokered_name("registry.example.com", "team/app", &["regcred"]);
    // the broker, with the same key and name, accepts it while the seal lasts
    assert_eq!(broker_decodes(&app(), now), Ok(expected.clone()));
    assert_eq!(
        broker_decodes(&app(), now + broker_reference::EXPIRY_WINDOW_SECONDS - 1),
        Ok(expected)
    );
    assert_eq!(
        broker_decodes(&app(), now + broker_reference::EXPIRY_WINDOW_SECONDS),
        Err(broker_reference::Refusal::Expired)
    );
    // the same name for another tag is not sealed for it
    let other_tag = app().replace(":1.4.2", ":1.4.3");
    assert_eq!(
        broker_decodes(&other_tag, now),
        Err(broker_reference::Refusal::Unsealed)
    );
}

#[test]
fn references_stay_the_same_within_a_window_and_change_with_it() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let now = InMemoryHost::UNIX_TIME;
    let lookups_at = |since_epoch: std::time::Duration| {
        let host = host().with_unix_time(since_epoch);
        run(&request, settings("credentialed"), &host);
        let mut calls = host.digest_calls();
        calls.retain(|c| c.starts_with(BROKER));
        calls.sort();
        calls
    };
    let first = lookups_at(now + std::time::Duration::from_secs(1));
    assert_eq!(first.len(), 2, "{first:?}");
    // the policy server's cache is keyed by reference: the same lookups, the same references
    assert_eq!(lookups_at(now + std::time::Duration::from_secs(299)), first);
    let next = lookups_at(now + std::time::Duration::from_secs(301));
    assert_eq!(next.len(), 2);
    assert!(next.iter().all(|r| !first.contains(r)), "{next:?}");
}

#[test]
fn an_image_with_a_tag_and_a_digest_is_sealed_for_its_digest() {
    let pinned = format!("{APP}@{DIGEST}");
    let mut request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    request["object"]["spec"]["containers"][0]["image"] = json!(pinned);
    let host = host().with_digest(&migrate(), DIGEST);
    run(&request, settings("credentialed"), &host);
    let calls = host.digest_calls();
    let rewritten = calls
        .iter()
        .find(|c| c.contains("/team/app:1.4.2@"))
        .expect("the pinned image brokered");
    assert!(
        rewritten.ends_with(&format!(":1.4.2@{DIGEST}")),
        "{rewritten}"
    );
    let now = InMemoryHost::UNIX_TIME.as_secs();
    // asked by that digest (as the policy server asks), it is sealed; by another, it is not
    assert!(broker_decodes(rewritten, now).is_ok());
    let other = rewritten.replace(DIGEST, &format!("sha256:{}", "c".repeat(64)));
    assert_eq!(
        broker_decodes(&other, now),
        Err(broker_reference::Refusal::Unsealed)
    );
}

/// The credentials of the one brokered lookup of `request`, with `providers` as the nodes'
/// `credentialProviders`; panics when the lookup was not brokered.
fn brokered_credentials_with_providers(request: &Value, providers: Value) -> Credentials {
    let mut settings = settings("credentialed");
    settings["credentialProviders"] = providers;
    let host = host();
    let _ = run(request, settings, &host);
    let calls = host.digest_calls();
    let brokered: Vec<&String> = calls
        .iter()
        .filter(|c| c.starts_with(&format!("{BROKER}/")))
        .collect();
    assert_eq!(brokered.len(), 1, "{calls:?}");
    broker_decodes(brokered[0], InMemoryHost::UNIX_TIME.as_secs())
        .expect("a name the broker reads")
        .credentials
}

/// A Pod of team-a's `default` ServiceAccount naming no pull secret, running an image of
/// Amazon ECR.
fn ecr_pod() -> Value {
    let mut request = fixture("pod-create.json");
    let spec = &mut request["object"]["spec"];
    spec["containers"] = json!([{"name": "app",
        "image": "123456789012.dkr.ecr.eu-west-1.amazonaws.com/team/app:1.0"}]);
    spec["initContainers"] = json!([]);
    spec["imagePullSecrets"] = json!([]);
    spec["serviceAccountName"] = json!("default");
    request
}

fn ecr_providers(token_attributes: Option<Value>) -> Value {
    let mut provider = json!({
        "name": "ecr-credential-provider",
        "matchImages": ["*.dkr.ecr.*.amazonaws.com"],
        "defaultCacheDuration": "12h",
        "apiVersion": "credentialprovider.kubelet.k8s.io/v1"
    });
    if let Some(attributes) = token_attributes {
        provider["tokenAttributes"] = attributes;
    }
    json!({"apiVersion": "kubelet.config.k8s.io/v1", "kind": "CredentialProviderConfig",
        "providers": [provider]})
}

#[test]
fn credentialed_brokers_images_a_nodes_credential_provider_covers() {
    // no pull secret covers the image: only the provider makes it credentialed
    let credentials = brokered_credentials_with_providers(&ecr_pod(), ecr_providers(None));
    assert_eq!(credentials, Credentials::PullSecrets(vec![]));
    // without the provider, the same lookup is the policy server's own
    let host = host();
    let _ = run(&ecr_pod(), settings("credentialed"), &host);
    assert!(
        host.digest_calls().iter().all(|c| !c.starts_with(BROKER)),
        "{:?}",
        host.digest_calls()
    );
}

#[test]
fn a_provider_needing_the_pods_service_account_gets_it_in_the_sealed_name() {
    let attributes = json!({"serviceAccountTokenAudience": "sts.amazonaws.com",
        "requireServiceAccount": true,
        "requiredServiceAccountAnnotationKeys": ["eks.amazonaws.com/role-arn"],
        "cacheType": "ServiceAccount"});
    let credentials =
        brokered_credentials_with_providers(&ecr_pod(), ecr_providers(Some(attributes.clone())));
    assert_eq!(credentials, Credentials::ServiceAccount("default".into()));
    // a pod naming pull secrets of its own keeps them: the broker says what it cannot run
    let with_secrets = with_pod_secrets(ecr_pod(), &["regcred"]);
    let credentials =
        brokered_credentials_with_providers(&with_secrets, ecr_providers(Some(attributes)));
    assert_eq!(
        credentials,
        Credentials::PullSecrets(vec!["regcred".into()])
    );
}

/// The policy server's text for a brokered lookup of `reference` the broker answered 404,
/// with `message` as its error's message.
pub(crate) fn not_found_saying(reference: &str, message: &str) -> String {
    host_text(&format!(
        "Registry error: url {}, envelope: OCI API errors: [OCI API error: {message}]",
        manifest_url(reference)
    ))
}

#[test]
fn an_absent_image_names_the_tags_the_broker_suggests_and_quotes_the_error_without_them() {
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let said = "manifest unknown (nearest tags: 1.4.1 1.4.2-alpine)";
    let host = host()
        .with_error(&app(), &not_found_saying(&app(), said))
        .with_digest(&migrate(), DIGEST);
    let response = run(&request, settings("credentialed"), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(
        message.contains(
            "not found on registry registry.example.com (did you mean 1.4.1 or 1.4.2-alpine?): "
        ),
        "{message}"
    );
    assert!(
        message.contains("[OCI API error: manifest unknown]"),
        "{message}"
    );
    assert!(!message.contains("nearest tags"), "{message}");
}

#[test]
fn suggestions_only_for_an_absent_verdict_and_only_valid_tags() {
    // a 404 whose list holds names that are not tags: only the tags are named
    let request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    let said = "manifest unknown (nearest tags: ../../etc -x 1.4.1 <b>)";
    let host = host()
        .with_error(&app(), &not_found_saying(&app(), said))
        .with_digest(&migrate(), DIGEST);
    let message = message(&run(&request, settings("credentialed"), &host));
    assert!(message.contains("(did you mean 1.4.1?)"), "{message}");
    for name in ["../../etc", "-x", "<b>"] {
        assert!(!message.contains(name), "{name}: {message}");
    }
    // an unauthorized or unreachable answer suggests nothing, whatever its text holds
    let warnings = warnings_when_both_fail(|reference| {
        host_text(&format!(
            "Registry error: url {}, envelope: OCI API errors: [OCI API error: denied: no (nearest tags: 1.4.1)]",
            manifest_url(reference)
        ))
    });
    for warning in warnings {
        assert!(!warning.contains("did you mean"), "{warning}");
    }
}

#[test]
fn without_the_broker_a_registrys_text_never_suggests() {
    let request = fixture("pod-create.json");
    let said = "manifest unknown (nearest tags: 1.4.1)";
    let host = cluster()
        .with_error(APP, &not_found_saying(APP, said))
        .with_digest(MIGRATE, DIGEST)
        .with_digest(BUSYBOX, DIGEST);
    let response = run(&request, json!({}), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(!message.contains("did you mean"), "{message}");
}

#[test]
fn the_suggestions_are_inside_a_warnings_256_characters_and_a_denials_first_line() {
    // a 63-character container name and a long repository
    let container = "c".repeat(63);
    let repository = "platform-team/payments/settlement-reconciliation-worker";
    let image = format!("registry.example.com/{repository}:v1.2.30");
    let mut request = with_pod_secrets(fixture("pod-create.json"), &["regcred"]);
    request["object"]["spec"]["containers"][0]["name"] = json!(container);
    request["object"]["spec"]["containers"][0]["image"] = json!(image);
    let reference = brokered("registry.example.com", repository, "v1.2.30", &["regcred"]);
    let said = "manifest unknown (nearest tags: v1.2.31 v1.2.3)";
    let host = host()
        .with_error(&reference, &not_found_saying(&reference, said))
        .with_digest(&migrate(), DIGEST);
    let phrase = "did you mean v1.2.31 or v1.2.3?";
    let denial = message(&run(&request, settings("credentialed"), &host));
    let line = denial
        .lines()
        .find(|l| l.contains(&container))
        .unwrap_or_default();
    let end = line.find(phrase).map(|at| at + phrase.len());
    assert!(end.is_some_and(|end| end <= 256), "{end:?}: {line}");
    let mut warn = settings("credentialed");
    warn["actions"] = json!({"absent": "warn"});
    let response = run(&request, warn, &host);
    let warnings = warnings(&response);
    let warning = warnings
        .iter()
        .find(|w| w.contains(&container))
        .cloned()
        .unwrap_or_default();
    assert!(warning.len() <= 256, "{warning}");
    assert!(warning.contains(phrase), "{warning}");
}
