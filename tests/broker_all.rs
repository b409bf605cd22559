//! `lookupBroker.use: all`, the shipped install (deploy/policy-server.yaml): every location of a
//! chain goes through the broker, sealed with the image's credentials for its own name, and an
//! `absent` the broker may have seen with other credentials than a node would send is never a
//! verdict; a template whose ServiceAccount names no pull secret is sealed anonymous, which the
//! broker serves without the namespace's opt-in.

use crate::common;

use common::*;

use broker_reference::{BrokeredName, Credentials};
use resolvable_images_policy::host::InMemoryHost;
use resolvable_images_policy::testing::dockerconfigjson;
use serde_json::{json, Value};

const DIGEST: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const BROKER: &str = "broker.kw.svc:8443";
const KEY: &str = "e2e-sealing-key-0123456789abcdefghij";
const MIRROR: &str = "mirror.local:5000";

/// `use: all` and a mirror for registry.example.com.
fn settings() -> Value {
    json!({"lookupBroker": {"host": BROKER, "use": "all",
            "keySecret": {"namespace": "kubewarden", "name": "broker-key"}},
        "registries": [{"prefix": "registry.example.com",
            "mirrors": [{"location": format!("{MIRROR}/example")}]}]})
}

fn host() -> InMemoryHost {
    use base64::Engine as _;
    cluster().with_object(
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "broker-key", "namespace": "kubewarden"},
        "data": {"key": base64::engine::general_purpose::STANDARD.encode(KEY)}}),
    )
}

/// The brokered reference of `registry/repository:tag` in team-a with `credentials`.
fn brokered(registry: &str, repository: &str, tag: &str, credentials: &Credentials) -> String {
    let key = broker_reference::SealingKey::new(KEY).expect("a key");
    let expires = broker_reference::expiry(InMemoryHost::UNIX_TIME.as_secs());
    let name = BrokeredName {
        namespace: "team-a".into(),
        credentials: credentials.clone(),
        registry: registry.into(),
        repository: repository.into(),
    };
    broker_reference::reference(BROKER, &name, &key, Some(tag), None, expires).expect("encodable")
}

fn anonymous() -> Credentials {
    Credentials::PullSecrets(Vec::new())
}

/// Every lookup the policy made: none of them but through the broker.
fn only_brokered(host: &InMemoryHost) {
    let calls = host.digest_calls();
    assert!(
        calls.iter().all(|c| c.starts_with(&format!("{BROKER}/"))),
        "{calls:?}"
    );
}

#[test]
fn a_mirror_location_is_brokered_for_its_own_name_and_a_template_without_secrets_is_anonymous() {
    let mirror_app = brokered(MIRROR, "example/team/app", "1.4.2", &anonymous());
    let mirror_migrate = brokered(MIRROR, "example/platform/migrate", "2.1.0", &anonymous());
    let busybox = brokered("docker.io", "library/busybox", "1.36", &anonymous());
    let host = host()
        .with_digest(&mirror_app, DIGEST)
        .with_digest(&mirror_migrate, DIGEST)
        .with_digest(&busybox, DIGEST);
    let response = run(&fixture("deployment-create.json"), settings(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    assert!(response["warnings"].is_null(), "{response}");
    only_brokered(&host);
    assert!(host.digest_calls().contains(&mirror_app));
}

#[test]
fn absent_everywhere_through_the_broker_is_rejected_when_the_credentials_are_the_nodes() {
    // no pull secret anywhere: the broker's anonymous lookups are the node's
    let busybox = brokered("docker.io", "library/busybox", "1.36", &anonymous());
    let host = host().with_digest(&busybox, DIGEST);
    let response = run(&fixture("deployment-create.json"), settings(), &host);
    assert_eq!(response["accepted"], false, "{response}");
    let message = message(&response);
    assert!(
        message.contains("mirror mirror.local:5000/example/team/app:1.4.2: not found"),
        "{message}"
    );
    assert!(
        !message.contains(BROKER) && !message.contains("r4/"),
        "{message}"
    );
    only_brokered(&host);
}

#[test]
fn a_mirror_absent_with_other_credentials_than_the_nodes_is_not_checked_never_absent() {
    // regcred covers the image's name, not the mirror's: a node sends it to the mirror, the
    // broker (which picks credentials by the name it is given) does not
    let mut request = fixture("pod-create.json");
    request["object"]["spec"]["imagePullSecrets"] = json!([{"name": "regcred"}]);
    let secrets = Credentials::PullSecrets(vec!["regcred".into()]);
    let busybox = brokered("docker.io", "library/busybox", "1.36", &secrets);
    let host = host()
        .with_object(dockerconfigjson(
            "regcred",
            "registry.example.com",
            "robot",
            "pa55",
        ))
        .with_digest(&busybox, DIGEST);
    let response = run(&request, settings(), &host);
    assert_eq!(response["accepted"], true, "{response}");
    // the mirror's `absent` is "not checked" (a warning keeps its first 256 bytes: the rest
    // of the words are cut), and the primary's absent does not make the chain absent
    let warnings = warnings(&response).join("\n");
    assert!(
        warnings.contains(
            "mirror mirror.local:5000/example/team/app:1.4.2: registry unreachable (not checked"
        ),
        "{warnings}"
    );
    // the mirror was asked through the broker, sealed with the pod's secrets
    let mirror_app = brokered(MIRROR, "example/team/app", "1.4.2", &secrets);
    assert!(
        host.digest_calls().contains(&mirror_app),
        "{:?}",
        host.digest_calls()
    );
    only_brokered(&host);
}
