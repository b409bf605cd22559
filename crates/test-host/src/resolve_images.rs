//! `oci/v1/resolve_images`: the project's proposed capability (see
//! `docs/design/credentialed-lookups.md` at the repository root), off unless
//! `--enable-resolve-images` is given, so that by default the host behaves
//! like a stock policy server (`unknown operation: v1/resolve_images`).
//!
//! Every lookup uses only the credentials the guest sent, in order, the way
//! the kubelet's `PullImage` tries them: the first success wins, *any* error
//! (a 404 included) moves on to the next credential, and there is no
//! anonymous try once credentials are given. How the attempts add up is
//! [`conclude`]: `notFound` only when every credential was tried and each got
//! a definitive answer (404 or a refusal), at least one a 404. The host's own
//! Docker config is never used here. Credentials are never logged, and
//! sessions record them as `<redacted>`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use registry_client::credential_loop::{self, Attempt, Found, Manifest, Outcome, Unanswered};

use crate::oci::{parse_reference, RegistryClient};

/// Most lookups one call may carry.
pub const MAX_LOOKUPS: usize = 100;
/// Most lookups of one call running at the same time against one registry
/// (`--resolve-images-concurrency`): enough for a Pod's images to be looked up
/// in one round trip, few enough not to look like an attack to a registry.
pub const DEFAULT_PER_REGISTRY: usize = 16;
/// What a recorded credential value looks like.
pub const REDACTED: &str = "<redacted>";

/// One credential the kubelet would try. Serializes with every value
/// replaced by `<redacted>`; equality only looks at which fields are set,
/// so a replayed session (which never holds secrets) still matches.
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryCredential {
    /// Basic auth user.
    #[serde(default)]
    pub username: Option<String>,
    /// Basic auth password.
    #[serde(default)]
    pub password: Option<String>,
    /// OAuth2 refresh token (not usable by this host).
    #[serde(default)]
    pub identity_token: Option<String>,
    /// Bearer token for the registry.
    #[serde(default)]
    pub registry_token: Option<String>,
}

impl RegistryCredential {
    fn shape(&self) -> [bool; 4] {
        [
            self.username.is_some(),
            self.password.is_some(),
            self.identity_token.is_some(),
            self.registry_token.is_some(),
        ]
    }

    /// The auth oci-client should use, `None` when the credential is unusable.
    fn auth(&self) -> Option<RegistryAuth> {
        match (&self.username, &self.password, &self.registry_token) {
            (Some(u), Some(p), _) => Some(RegistryAuth::Basic(u.clone(), p.clone())),
            (_, _, Some(t)) => Some(RegistryAuth::Bearer(t.clone())),
            _ => None,
        }
    }
}

impl PartialEq for RegistryCredential {
    fn eq(&self, other: &Self) -> bool {
        self.shape() == other.shape()
    }
}

impl Eq for RegistryCredential {}

impl std::fmt::Debug for RegistryCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let [u, p, i, r] = self.shape();
        write!(
            f,
            "RegistryCredential {{ username: {u}, password: {p}, identity_token: {i}, registry_token: {r} }}"
        )
    }
}

impl Serialize for RegistryCredential {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = [
            ("username", self.username.is_some()),
            ("password", self.password.is_some()),
            ("identityToken", self.identity_token.is_some()),
            ("registryToken", self.registry_token.is_some()),
        ];
        let mut map = serializer.serialize_map(None)?;
        for (name, present) in fields {
            if present {
                map.serialize_entry(name, REDACTED)?;
            }
        }
        map.end()
    }
}

/// One image and the credentials to try for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageLookup {
    /// Normalised reference.
    pub image: String,
    /// Credentials in the kubelet's order; empty means anonymous.
    #[serde(default)]
    pub credentials: Vec<RegistryCredential>,
}

/// The payload of `oci/v1/resolve_images`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolveImagesRequest {
    /// Lookups, answered in the same order.
    pub lookups: Vec<ImageLookup>,
    /// Longest time for one lookup, all credentials included.
    pub timeout_ms: u64,
}

/// The answer of one lookup, from its attempts in credential order (`credentialed`:
/// credentials were given, so the answer says which one served, and lists every attempt).
/// What the attempts establish is the shared contract's ([`credential_loop::conclude`]).
fn conclude(image: &str, attempts: &[Attempt], complete: bool, credentialed: bool) -> Value {
    let outcome = credential_loop::conclude(attempts, complete);
    if let Outcome::Found { index, found } = &outcome {
        let media_type = found.manifest.as_ref().map(|m| m.media_type.as_str());
        let mut answer = json!({"image": image, "outcome": "found", "digest": found.digest,
                                "mediaType": media_type.unwrap_or(OCI_IMAGE_MEDIA_TYPE)});
        if credentialed {
            answer["credential"] = json!(index);
        }
        return answer;
    }
    let detail = match attempts {
        [] => "no credential was tried".to_owned(),
        [only] if complete => only.detail(),
        _ => attempts
            .iter()
            .enumerate()
            .map(|(i, a)| format!("credential {}: {} ({})", i + 1, a.word(), a.detail()))
            .chain((!complete).then(|| "the others were not tried".to_owned()))
            .collect::<Vec<_>>()
            .join("; "),
    };
    let mut answer = json!({"image": image, "outcome": outcome.word(), "detail": detail});
    if credentialed {
        answer["attempts"] = attempts
            .iter()
            .map(|a| json!({"outcome": a.word(), "detail": a.detail()}))
            .collect();
    }
    answer
}

/// One attempt: the manifest read with `auth` (`None`: a credential this host cannot send).
async fn attempt(registry: &RegistryClient, image: &str, auth: Option<RegistryAuth>) -> Attempt {
    const ACCEPT: &[&str] = &[
        OCI_IMAGE_MEDIA_TYPE,
        OCI_IMAGE_INDEX_MEDIA_TYPE,
        IMAGE_MANIFEST_MEDIA_TYPE,
        IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    ];
    let Some(auth) = auth else {
        return Attempt::Failed(Unanswered::UnusableCredential);
    };
    match registry.manifest_raw_with_auth(image, auth, ACCEPT).await {
        Ok((body, digest)) => Attempt::Found(Found {
            digest,
            manifest: Some(Manifest::new(body)),
        }),
        Err(error) => credential_loop::classify(&error),
    }
}

/// One lookup: the shared credential loop over the guest's credentials (anonymously when
/// none is given), bounded by `deadline`.
async fn resolve_one(
    registry: &RegistryClient,
    lookup: &ImageLookup,
    deadline: tokio::time::Instant,
    timeout: Duration,
) -> Value {
    let image = lookup.image.as_str();
    if let Err(e) = parse_reference(image) {
        return json!({"image": image, "outcome": "unreachable", "detail": e.to_string()});
    }
    let credentialed = !lookup.credentials.is_empty();
    let auths: Vec<Option<RegistryAuth>> = lookup
        .credentials
        .iter()
        .map(RegistryCredential::auth)
        .collect();
    let result = credential_loop::run(auths, deadline, timeout, |auth| {
        // the anonymous try (no credential given) is the loop's `None`
        attempt(
            registry,
            image,
            auth.unwrap_or(Some(RegistryAuth::Anonymous)),
        )
    })
    .await;
    conclude(image, &result.attempts, result.complete, credentialed)
}

fn timed_out(timeout: Duration) -> String {
    Unanswered::NoAnswer {
        within: timeout,
        lookup_deadline: true,
    }
    .to_string()
}

/// Answer a whole call: every lookup starts at once, at most `per_registry`
/// at a time against any one registry (so one slow registry never holds back
/// another's lookups), all within `min(timeoutMs, max_timeout)` of the call's
/// start, waiting for a turn included; results in request order.
pub async fn resolve_images(
    registry: &RegistryClient,
    request: &ResolveImagesRequest,
    max_timeout: Duration,
    per_registry: usize,
) -> anyhow::Result<Value> {
    if request.lookups.len() > MAX_LOOKUPS {
        anyhow::bail!(
            "invalid request: too many lookups ({} > {MAX_LOOKUPS})",
            request.lookups.len()
        );
    }
    let timeout = Duration::from_millis(request.timeout_ms).min(max_timeout);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut limits: HashMap<String, Arc<Semaphore>> = HashMap::new();
    let mut handles = Vec::with_capacity(request.lookups.len());
    for lookup in request.lookups.iter().cloned() {
        let host = parse_reference(&lookup.image)
            .map(|r| r.resolve_registry().to_owned())
            .unwrap_or_default();
        let limit = limits
            .entry(host)
            .or_insert_with(|| Arc::new(Semaphore::new(per_registry.max(1))))
            .clone();
        let registry = registry.clone();
        handles.push(tokio::spawn(async move {
            match tokio::time::timeout_at(deadline, limit.acquire_owned()).await {
                Ok(_permit) => resolve_one(&registry, &lookup, deadline, timeout).await,
                Err(_) => json!({
                    "image": lookup.image,
                    "outcome": "unreachable",
                    "detail": timed_out(timeout),
                }),
            }
        }));
    }
    let mut results = Vec::with_capacity(handles.len());
    for handle in handles {
        results.push(handle.await?);
    }
    Ok(json!({ "results": results }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::docker_config::DockerConfig;
    use crate::oci::sources::Sources;
    use crate::oci::test_registry::{Reply, Seen, TestRegistry};

    #[test]
    fn credentials_are_redacted_and_compared_by_shape() {
        let request: ResolveImagesRequest = serde_json::from_str(
            r#"{"lookups":[{"image":"r/a:1","credentials":[{"username":"u","password":"secret"}]}],"timeoutMs":1500}"#,
        )
        .expect("parse");
        let yaml = serde_yaml::to_string(&request).expect("yaml");
        assert!(!yaml.contains("secret"));
        assert!(yaml.contains("password: <redacted>"));
        let replayed: ResolveImagesRequest = serde_yaml::from_str(&yaml).expect("reparse");
        assert_eq!(replayed, request);
        assert!(!format!("{request:?}").contains("secret"));
    }

    fn not_found(detail: &str) -> Attempt {
        Attempt::NotFound {
            detail: detail.into(),
            envelope: None,
        }
    }

    fn refused(detail: &str) -> Attempt {
        Attempt::Refused {
            detail: detail.into(),
        }
    }

    fn unreachable(detail: &str) -> Attempt {
        Attempt::Failed(Unanswered::Indefinite(detail.into()))
    }

    fn found(digest: &str) -> Attempt {
        Attempt::Found(Found {
            digest: digest.into(),
            manifest: None,
        })
    }

    fn outcome_of(attempts: &[Attempt], complete: bool) -> Value {
        conclude("r/a:1", attempts, complete, true)
    }

    #[test]
    fn the_first_success_wins_whatever_came_before() {
        for before in [
            not_found("manifest unknown"),
            refused("401"),
            unreachable("503"),
        ] {
            let answer = outcome_of(&[before, found("sha256:2"), found("sha256:3")], true);
            assert_eq!(answer["outcome"], "found");
            assert_eq!(answer["digest"], "sha256:2");
            assert_eq!(
                answer["credential"], 1,
                "the index of the credential that served"
            );
        }
    }

    #[test]
    fn not_found_needs_every_credential_definitive_and_one_404() {
        let mixed = outcome_of(
            &[refused("401 Unauthorized"), not_found("manifest unknown")],
            true,
        );
        assert_eq!(
            mixed["outcome"], "notFound",
            "a 401 and a 404 are still certain"
        );
        assert_eq!(
            mixed["detail"],
            "credential 1: unauthorized (401 Unauthorized); credential 2: notFound (manifest unknown)"
        );
        assert_eq!(
            mixed["attempts"],
            json!([
                {"outcome": "unauthorized", "detail": "401 Unauthorized"},
                {"outcome": "notFound", "detail": "manifest unknown"}
            ])
        );
        let both = outcome_of(&[not_found("a"), not_found("b")], true);
        assert_eq!(both["outcome"], "notFound");
        let single = outcome_of(&[not_found("manifest unknown")], true);
        assert_eq!(single["outcome"], "notFound");
        assert_eq!(
            single["detail"], "manifest unknown",
            "one credential: its own detail"
        );
    }

    #[test]
    fn any_attempt_without_a_definitive_answer_makes_it_unreachable() {
        for attempts in [
            vec![unreachable("500"), not_found("manifest unknown")],
            vec![not_found("manifest unknown"), unreachable("timed out")],
            vec![refused("401"), unreachable("429")],
            vec![unreachable("credential not usable by this host")],
        ] {
            assert_eq!(
                outcome_of(&attempts, true)["outcome"],
                "unreachable",
                "{attempts:?}"
            );
        }
    }

    #[test]
    fn credentials_left_untried_are_never_certain() {
        let cut = outcome_of(&[not_found("manifest unknown")], false);
        assert_eq!(cut["outcome"], "unreachable");
        assert_eq!(
            cut["detail"],
            "credential 1: notFound (manifest unknown); the others were not tried"
        );
        assert_eq!(outcome_of(&[], false)["outcome"], "unreachable");
    }

    #[test]
    fn every_refusal_is_unauthorized() {
        let answer = outcome_of(&[refused("401"), refused("denied")], true);
        assert_eq!(answer["outcome"], "unauthorized");
    }

    #[test]
    fn anonymous_lookups_name_no_credential() {
        let answer = conclude("r/a:1", &[not_found("manifest unknown")], true, false);
        assert_eq!(
            answer,
            json!({"image": "r/a:1", "outcome": "notFound", "detail": "manifest unknown"})
        );
        let answer = conclude("r/a:1", &[found("sha256:1")], true, false);
        assert!(answer.get("credential").is_none(), "{answer}");
    }

    /// A registry answering per Basic user, as registries that hide what a
    /// caller may not read do: `seer` reads `team/app:1`, `hidden` gets 404
    /// NAME_UNKNOWN, `refused` a 401, `broken` a 500; anonymous requests get
    /// the Basic challenge.
    fn per_user_registry(seen: &Seen, _addr: &str) -> Reply {
        let user = basic_user(seen);
        let error = |status: u16, code: &str| {
            Reply::new(status)
                .header("Content-Type", "application/json")
                .body(
                    format!(
                        r#"{{"errors":[{{"code":"{code}","message":"{code} for this user"}}]}}"#
                    )
                    .as_bytes(),
                )
        };
        match user.as_deref() {
            None => error(401, "UNAUTHORIZED").header("WWW-Authenticate", r#"Basic realm="test""#),
            Some("seer") if seen.path.ends_with("/team/app/manifests/1") => Reply::new(200)
                .header("Docker-Content-Digest", &manifest_digest())
                .header("Content-Type", OCI_IMAGE_MEDIA_TYPE)
                .body(MANIFEST),
            Some("seer") => error(404, "MANIFEST_UNKNOWN"),
            Some("refused") => error(401, "UNAUTHORIZED"),
            Some("broken") => error(500, "UNAVAILABLE"),
            Some(_) => error(404, "NAME_UNKNOWN"),
        }
    }

    const MANIFEST: &[u8] = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:00","size":2},"layers":[]}"#;

    fn manifest_digest() -> String {
        use sha2::Digest as _;
        format!("sha256:{:x}", sha2::Sha256::digest(MANIFEST))
    }

    fn credential(user: &str) -> RegistryCredential {
        RegistryCredential {
            username: Some(user.into()),
            password: Some(format!("{user}-password")),
            ..RegistryCredential::default()
        }
    }

    /// The Basic user of a request, `None` when it sent no Basic credential.
    fn basic_user(seen: &Seen) -> Option<String> {
        use base64::Engine as _;
        let encoded = seen.authorization.as_deref()?.strip_prefix("Basic ")?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&decoded);
        Some(text.split(':').next().unwrap_or_default().to_owned())
    }

    /// The users of each authenticated manifest request, in order.
    fn users_asked(registry: &TestRegistry) -> Vec<String> {
        registry
            .seen()
            .iter()
            .filter(|s| s.path.contains("/manifests/"))
            .map(|s| basic_user(s).unwrap_or_else(|| "anonymous".to_owned()))
            .collect()
    }

    async fn look_up(registry: &TestRegistry, users: &[&str]) -> Value {
        let sources = Sources::from_yaml(&format!("insecure_sources: [\"{}\"]", registry.addr))
            .expect("sources");
        let client = RegistryClient::new(sources, DockerConfig::default(), Duration::from_secs(5));
        let request = ResolveImagesRequest {
            lookups: vec![ImageLookup {
                image: format!("{}/team/app:1", registry.addr),
                credentials: users.iter().map(|u| credential(u)).collect(),
            }],
            timeout_ms: 5_000,
        };
        let answer = resolve_images(&client, &request, Duration::from_secs(5), 4)
            .await
            .expect("answer");
        answer["results"][0].clone()
    }

    #[tokio::test]
    async fn only_the_second_credential_sees_the_image_found() {
        let registry = TestRegistry::start(per_user_registry).await;
        let answer = look_up(&registry, &["hidden", "seer"]).await;
        assert_eq!(answer["outcome"], "found", "{answer}");
        assert_eq!(answer["digest"], manifest_digest().as_str());
        assert_eq!(answer["credential"], 1);
        // the unauthenticated request only learns the challenge; each credential once, in order
        assert_eq!(users_asked(&registry), ["anonymous", "hidden", "seer"]);
    }

    #[tokio::test]
    async fn a_refusal_then_a_404_is_not_found_and_no_anonymous_try_follows() {
        let registry = TestRegistry::start(per_user_registry).await;
        let answer = look_up(&registry, &["refused", "hidden"]).await;
        assert_eq!(answer["outcome"], "notFound", "{answer}");
        assert_eq!(
            answer["attempts"]
                .as_array()
                .map(|a| a.iter().map(|x| x["outcome"].clone()).collect::<Vec<_>>()),
            Some(vec![json!("unauthorized"), json!("notFound")])
        );
        assert_eq!(users_asked(&registry), ["anonymous", "refused", "hidden"]);
        let text = answer.to_string();
        assert!(
            !text.contains("-password"),
            "no credential in the answer: {text}"
        );
    }

    #[tokio::test]
    async fn a_500_then_a_404_is_unreachable_and_all_refused_is_unauthorized() {
        let registry = TestRegistry::start(per_user_registry).await;
        let answer = look_up(&registry, &["broken", "hidden"]).await;
        assert_eq!(answer["outcome"], "unreachable", "{answer}");
        assert_eq!(answer["attempts"][1]["outcome"], "notFound");
        let answer = look_up(&registry, &["refused", "refused"]).await;
        assert_eq!(answer["outcome"], "unauthorized", "{answer}");
    }
    // The classification of registry errors is tested with the shared loop
    // (crates/registry-client/src/credential_loop/tests.rs).
}
