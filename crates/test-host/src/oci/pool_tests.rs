//! The pooled client's rules, against [`super::test_registry`]: no `/v2/`
//! ping, one protocol decision and one challenge per registry, kept-alive
//! connections, and bearer tokens that never cross credentials or repository
//! scopes.

use std::time::Duration;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;

use super::docker_config::DockerConfig;
use super::sources::Sources;
use super::test_registry::{Reply, Seen, TestRegistry};
use super::{RegistryClient, RegistryError};
use crate::resolve_images::{resolve_images, ImageLookup, ResolveImagesRequest};

const MANIFEST: &[u8] = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:00","size":2},"layers":[]}"#;

fn manifest_digest() -> String {
    use sha2::Digest as _;
    format!("sha256:{:x}", sha2::Sha256::digest(MANIFEST))
}

/// The token a credential gets: it names the user and password, so a test
/// can tell whose token a request carried.
fn token_for(authorization: Option<&str>) -> String {
    let basic = authorization
        .and_then(|a| a.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(|b| String::from_utf8_lossy(&b).replace(':', "-"));
    format!("tok-{}", basic.as_deref().unwrap_or("anonymous"))
}

/// A registry with token authentication: `/token` gives [`token_for`] the
/// credential, manifests need a token, and every 401 challenges (as
/// distribution's does).
fn bearer_registry(seen: &Seen, addr: &str) -> Reply {
    let challenge = Reply::new(401).header(
        "WWW-Authenticate",
        &format!("Bearer realm=\"http://{addr}/token\",service=\"test\""),
    );
    if seen.path == "/v2/" {
        return challenge;
    }
    if seen.path.starts_with("/token") {
        let body = format!(
            "{{\"token\":\"{}\"}}",
            token_for(seen.authorization.as_deref())
        );
        return Reply::new(200).body(body.as_bytes());
    }
    match &seen.authorization {
        Some(a) if a.starts_with("Bearer tok-") => Reply::new(200)
            .header("Docker-Content-Digest", &manifest_digest())
            .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
            .body(MANIFEST),
        _ => challenge,
    }
}

/// An anonymous registry: no challenge, every manifest exists.
fn open_registry(seen: &Seen, _addr: &str) -> Reply {
    if seen.path == "/v2/" {
        return Reply::new(200).body(b"{}");
    }
    Reply::new(200)
        .header("Docker-Content-Digest", &manifest_digest())
        .body(MANIFEST)
}

/// A client for which every test registry is an insecure source (plain HTTP
/// after HTTPS and HTTPS without verification fail).
fn client_for(registries: &[&TestRegistry], timeout: Duration) -> RegistryClient {
    let hosts: Vec<String> = registries
        .iter()
        .map(|r| format!("\"{}\"", r.addr))
        .collect();
    let sources =
        Sources::from_yaml(&format!("insecure_sources: [{}]", hosts.join(","))).expect("sources");
    RegistryClient::new(sources, DockerConfig::default(), timeout)
}

async fn lookup(
    client: &RegistryClient,
    image: &str,
    auth: RegistryAuth,
) -> Result<String, RegistryError> {
    client
        .manifest_raw_with_auth(image, auth, super::pool::MANIFEST_MEDIA_TYPES)
        .await
        .map(|(_, digest)| digest)
}

fn basic(user: &str, password: &str) -> RegistryAuth {
    RegistryAuth::Basic(user.into(), password.into())
}

/// The `Authorization` of each manifest request, in order.
fn manifest_authorizations(registry: &TestRegistry) -> Vec<Option<String>> {
    registry
        .seen()
        .into_iter()
        .filter(|s| s.path.contains("/manifests/"))
        .map(|s| s.authorization)
        .collect()
}

#[tokio::test]
async fn a_token_obtained_for_one_credential_is_never_sent_for_another() {
    let registry = TestRegistry::start(bearer_registry).await;
    let client = client_for(&[&registry], Duration::from_secs(5));
    let image = format!("{}/team/app:1", registry.addr);
    for auth in [
        basic("alice", "pw-a"),
        basic("bob", "pw-b"),
        basic("alice", "pw-a"),
        RegistryAuth::Anonymous,
        basic("alice", "other"),
    ] {
        assert_eq!(
            lookup(&client, &image, auth).await.expect("the manifest"),
            manifest_digest()
        );
    }
    let bearer = |t: &str| Some(format!("Bearer {t}"));
    assert_eq!(
        manifest_authorizations(&registry),
        vec![
            None,
            bearer("tok-alice-pw-a"),
            bearer("tok-bob-pw-b"),
            bearer("tok-alice-pw-a"),
            bearer("tok-anonymous"),
            bearer("tok-alice-other"),
        ]
    );
    // alice's token was reused once; every other credential asked for its own
    assert_eq!(registry.count("GET", "/token"), 4);
    // the first lookup learnt the challenge from its 401; the others authenticated at once
    assert_eq!(registry.pings(), 0);
    assert_eq!(registry.count("GET", "/v2/team/app/manifests/"), 6);
}

#[tokio::test]
async fn the_first_401_is_answered_once_and_a_refused_credential_reports_it() {
    // basic authentication: a 401 without credentials is answered with them
    let registry = TestRegistry::start(|seen: &Seen, _: &str| match &seen.authorization {
        Some(a) if a.starts_with("Basic ") => Reply::new(200)
            .header("Docker-Content-Digest", &manifest_digest())
            .body(MANIFEST),
        _ => Reply::new(401).header("WWW-Authenticate", "Basic realm=\"test\""),
    })
    .await;
    let client = client_for(&[&registry], Duration::from_secs(5));
    let image = format!("{}/team/app:1", registry.addr);
    assert_eq!(
        lookup(&client, &image, basic("alice", "pw"))
            .await
            .expect("the manifest"),
        manifest_digest()
    );
    assert_eq!(
        lookup(&client, &image, basic("alice", "pw"))
            .await
            .expect("the manifest"),
        manifest_digest()
    );
    let sent: Vec<bool> = manifest_authorizations(&registry)
        .iter()
        .map(Option::is_some)
        .collect();
    assert_eq!(sent, vec![false, true, true]);
    // anonymous: nothing to answer the challenge with, the 401 is the answer
    let error = lookup(&client, &image, RegistryAuth::Anonymous)
        .await
        .expect_err("anonymous is refused");
    // the registry's refusal, as oci-client reports it
    assert!(matches!(error, RegistryError::Oci(_)), "{error:?}");
    let error = error.to_string();
    assert!(error.contains("Not authorized"), "{error}");
    assert_eq!(registry.pings(), 0);
}

/// A token service that fails (503) or does not answer (nothing listens)
/// says nothing about the credential: the lookup is an error, never the
/// registry's refusal, which would read as a private image. With the challenge
/// unknown (the first lookup) and known (the next).
#[tokio::test]
async fn a_failing_token_service_is_no_refusal() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address");
    for realm in [None, Some(format!("http://{closed}/token"))] {
        let registry = TestRegistry::start(move |seen: &Seen, addr: &str| {
            if seen.path.starts_with("/token") {
                return Reply::new(503);
            }
            let realm = realm.clone().unwrap_or(format!("http://{addr}/token"));
            Reply::new(401).header(
                "WWW-Authenticate",
                &format!("Bearer realm=\"{realm}\",service=\"test\""),
            )
        })
        .await;
        let client = client_for(&[&registry], Duration::from_secs(5));
        let image = format!("{}/team/app:1", registry.addr);
        for auth in [
            RegistryAuth::Anonymous,
            basic("alice", "pw"),
            RegistryAuth::Anonymous,
        ] {
            let error = lookup(&client, &image, auth)
                .await
                .expect_err("no token, no manifest")
                .to_string();
            assert!(!error.contains("Not authorized"), "{error}");
            assert!(error.contains("gave no token"), "{error}");
            assert!(!error.contains("pw"), "{error}");
        }
    }
}

#[tokio::test]
async fn tokens_are_scoped_to_one_repository() {
    let registry = TestRegistry::start(bearer_registry).await;
    let client = client_for(&[&registry], Duration::from_secs(5));
    for repo in ["team/a", "team/b", "team/a"] {
        let image = format!("{}/{repo}:1", registry.addr);
        assert!(lookup(&client, &image, basic("alice", "pw")).await.is_ok());
    }
    let scopes: Vec<String> = registry
        .seen()
        .into_iter()
        .filter(|s| s.path.starts_with("/token"))
        .map(|s| s.path)
        .collect();
    assert_eq!(scopes.len(), 2, "{scopes:?}");
    assert!(scopes[0].contains("team%2Fa") && scopes[1].contains("team%2Fb"));
}

#[tokio::test]
async fn no_ping_one_protocol_decision_and_one_connection_per_registry() {
    let registry = TestRegistry::start(open_registry).await;
    let client = client_for(&[&registry], Duration::from_secs(5));
    for i in 0..5 {
        let digest = client
            .manifest_digest(&format!("{}/bench/img-{i}:1.0", registry.addr))
            .await
            .map_err(|e| e.to_string());
        assert_eq!(digest, Ok(manifest_digest()));
    }
    assert_eq!(registry.pings(), 0);
    assert_eq!(registry.count("HEAD", "/v2/bench/"), 5);
    assert_eq!(registry.count("GET", "/v2/bench/"), 0);
    assert_eq!(registry.http_connections(), 1);
}

#[tokio::test]
async fn a_registry_that_answers_nothing_gives_the_manifest_url_in_the_error() {
    let client = client_for(&[], Duration::from_secs(5));
    let error = client
        .manifest_digest("127.0.0.1:1/team/app:v1")
        .await
        .map(|_| ())
        .map_err(|e| format!("{:?}", anyhow::Error::from(e)));
    let error = error.expect_err("nothing listens on port 1");
    assert!(
        error.contains(
            "error sending request for url (https://127.0.0.1:1/v2/team/app/manifests/v1)"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn a_hanging_registry_costs_its_time_out_and_nothing_more() {
    let hanging =
        TestRegistry::start(|_, _| Reply::new(200).after(Duration::from_secs(3600))).await;
    let client = client_for(&[&hanging], Duration::from_millis(300));
    let started = std::time::Instant::now();
    let error = client
        .manifest_digest(&format!("{}/team/app:v1", hanging.addr))
        .await
        .map_err(|e| format!("{:?}", anyhow::Error::from(e)))
        .expect_err("hangs");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(error.contains("operation timed out"), "{error}");
}

/// A registry whose manifests take `delay` to answer.
fn slow_registry(delay: Duration) -> impl Fn(&Seen, &str) -> Reply + Send + Sync + 'static {
    move |seen, addr| {
        open_registry(seen, addr).after(if seen.path == "/v2/" {
            Duration::ZERO
        } else {
            delay
        })
    }
}

fn batch(images: &[String], timeout_ms: u64) -> ResolveImagesRequest {
    let lookups = images
        .iter()
        .map(|image| ImageLookup {
            image: image.clone(),
            credentials: Vec::new(),
        })
        .collect();
    ResolveImagesRequest {
        lookups,
        timeout_ms,
    }
}

fn outcomes(answer: &serde_json::Value) -> Vec<(String, String)> {
    answer["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["image"].as_str().unwrap_or("").to_owned(),
                r["outcome"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_batch_runs_at_once_bounded_per_registry_in_request_order() {
    let registry = TestRegistry::start(slow_registry(Duration::from_millis(200))).await;
    let client = client_for(&[&registry], Duration::from_secs(10));
    let images: Vec<String> = (0..6)
        .map(|i| format!("{}/bench/img-{i}:1", registry.addr))
        .collect();
    let started = std::time::Instant::now();
    let answer = resolve_images(&client, &batch(&images, 10_000), Duration::from_secs(10), 2)
        .await
        .expect("answer");
    let bounded = started.elapsed();
    let expected: Vec<(String, String)> = images
        .iter()
        .map(|i| (i.clone(), "found".to_owned()))
        .collect();
    assert_eq!(outcomes(&answer), expected);
    assert_eq!(registry.max_in_flight(), 2);
    assert!(bounded >= Duration::from_millis(600), "{bounded:?}");

    let wide = TestRegistry::start(slow_registry(Duration::from_millis(200))).await;
    let client = client_for(&[&wide], Duration::from_secs(10));
    let images: Vec<String> = (0..6)
        .map(|i| format!("{}/bench/img-{i}:1", wide.addr))
        .collect();
    let started = std::time::Instant::now();
    let answer = resolve_images(
        &client,
        &batch(&images, 10_000),
        Duration::from_secs(10),
        16,
    )
    .await
    .expect("answer");
    assert_eq!(outcomes(&answer).len(), 6);
    assert_eq!(wide.max_in_flight(), 6);
    assert!(
        started.elapsed() < Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_hanging_registry_holds_neither_the_batch_nor_another_registry() {
    let hanging =
        TestRegistry::start(|_, _| Reply::new(200).after(Duration::from_secs(3600))).await;
    let healthy = TestRegistry::start(open_registry).await;
    let client = client_for(&[&hanging, &healthy], Duration::from_secs(10));
    let mut images: Vec<String> = (0..20)
        .map(|i| format!("{}/team/app-{i}:1", hanging.addr))
        .collect();
    images.push(format!("{}/team/ok:1", healthy.addr));
    let started = std::time::Instant::now();
    let answer = resolve_images(&client, &batch(&images, 400), Duration::from_secs(10), 16)
        .await
        .expect("answer");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    let outcomes = outcomes(&answer);
    assert_eq!(outcomes.last().map(|o| o.1.as_str()), Some("found"));
    assert!(outcomes[..20].iter().all(|o| o.1 == "unreachable"));
    assert!(answer["results"][0]["detail"]
        .as_str()
        .unwrap_or("")
        .contains("timed out after 400 ms"));
}
