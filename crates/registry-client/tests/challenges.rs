//! The pool against a scripted registry on 127.0.0.1 (plain HTTP, an insecure source): a
//! registry that moves from Basic to token authentication is followed at its next 401, not
//! held to the first challenge it gave for the life of the process.

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use registry_client::pool::{Pool, UrlSlot};
use registry_client::sources::Sources;

use crate::common;
use common::{reply, serve};

const DIGEST: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

#[test]
fn a_registry_that_moves_to_tokens_is_followed_at_its_next_401() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tokens = Arc::new(AtomicBool::new(false));
    let (realm, switched) = (format!("http://{address}/token"), tokens.clone());
    serve(listener, seen.clone(), move |head| {
        let found = || {
            reply(
                "200 OK",
                &[
                    format!("Docker-Content-Digest: {DIGEST}"),
                    "Content-Type: application/vnd.oci.image.manifest.v1+json".into(),
                ],
                "",
            )
        };
        let challenge = |value: String| {
            reply(
                "401 Unauthorized",
                &[format!("WWW-Authenticate: {value}")],
                "",
            )
        };
        if head.starts_with("GET /token") {
            return reply(
                "200 OK",
                &["Content-Type: application/json".into()],
                r#"{"token":"tok-1","expires_in":300}"#,
            );
        }
        let authorization = head
            .lines()
            .find_map(|l| {
                l.strip_prefix("authorization: ")
                    .or_else(|| l.strip_prefix("Authorization: "))
            })
            .unwrap_or("");
        match (switched.load(Ordering::SeqCst), authorization) {
            (false, a) if a.starts_with("Basic ") => found(),
            (false, _) => challenge(r#"Basic realm="registry""#.into()),
            (true, "Bearer tok-1") => found(),
            (true, _) => challenge(format!(r#"Bearer realm="{realm}",service="registry""#)),
        }
    });

    registry_client::install_tls_provider();
    let sources =
        Sources::from_yaml(&format!("insecure_sources: [\"{address}\"]\n")).expect("sources");
    let pool = Pool::new(sources);
    let reference: Reference = format!("{address}/team/app:v1").parse().expect("reference");
    let auth = RegistryAuth::Basic("robot".into(), "robot-pass".into());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let slot = UrlSlot::default();

    let first = runtime.block_on(pool.manifest_digest(&reference, &auth, &slot));
    assert_eq!(first.expect("found with Basic"), DIGEST);

    tokens.store(true, Ordering::SeqCst);
    let second = runtime.block_on(pool.manifest_digest(&reference, &auth, &slot));
    assert_eq!(second.expect("found with the new token service"), DIGEST);
    let heads = seen.lock().expect("seen").clone();
    assert!(
        heads.iter().any(|h| h.starts_with("GET /token")),
        "the token service was never asked: {heads:?}"
    );
}

/// A token service answering `expires_in` near `u64::MAX` (which overflowed the token cache's
/// clock arithmetic and panicked): the lookup is answered, and the token kept and reused.
#[test]
fn a_token_with_a_huge_expires_in_is_used_and_kept_without_a_panic() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = listener.local_addr().expect("address").to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let realm = format!("http://{address}/token");
    serve(listener, seen.clone(), move |head| {
        if head.starts_with("GET /token") {
            let body = format!(r#"{{"token":"tok-huge","expires_in":{}}}"#, u64::MAX);
            return reply("200 OK", &["Content-Type: application/json".into()], &body);
        }
        if head.contains("Bearer tok-huge") {
            let headers = [
                format!("Docker-Content-Digest: {DIGEST}"),
                "Content-Type: application/vnd.oci.image.manifest.v1+json".into(),
            ];
            return reply("200 OK", &headers, "");
        }
        let challenge = format!(r#"WWW-Authenticate: Bearer realm="{realm}",service="registry""#);
        reply("401 Unauthorized", &[challenge], "")
    });

    registry_client::install_tls_provider();
    let sources =
        Sources::from_yaml(&format!("insecure_sources: [\"{address}\"]\n")).expect("sources");
    let pool = Pool::new(sources);
    let reference: Reference = format!("{address}/team/app:v1").parse().expect("reference");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let slot = UrlSlot::default();
    for _ in 0..2 {
        let found =
            runtime.block_on(pool.manifest_digest(&reference, &RegistryAuth::Anonymous, &slot));
        assert_eq!(found.expect("found with the token"), DIGEST);
    }
    let heads = seen.lock().expect("seen").clone();
    let asked = heads.iter().filter(|h| h.starts_with("GET /token")).count();
    assert_eq!(asked, 1, "the token was not kept: {heads:?}");
}
