//! `oci/v1/resolve_images`: the project's proposed capability (see
//! `docs/credentialed-lookups.md` at the repository root), off unless
//! `--enable-resolve-images` is given, so that by default the host behaves
//! like a stock policy server (`unknown operation: v1/resolve_images`).
//!
//! Every lookup uses only the credentials the guest sent, in order, the way
//! the kubelet tries them: first success wins, a 404 from a credential that
//! could see the repository is final, 401/403 moves on to the next
//! credential, and there is no anonymous fallback once credentials are given.
//! The host's own Docker config is never used here. Credentials are never
//! logged, and sessions record them as `<redacted>`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use crate::oci::{parse_reference, RegistryClient, RegistryError};

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

/// How one credential attempt ended.
enum Attempt {
    Found { digest: String, media_type: String },
    NotFound(String),
    Unauthorized(String),
    Unreachable(String),
}

/// One line: the error and its causes joined by `: `.
fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(s) = source {
        let text = s.to_string();
        if parts.last() != Some(&text) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

fn classify(error: RegistryError) -> Attempt {
    let RegistryError::Oci(oci) = error else {
        return Attempt::Unreachable(one_line(&error));
    };
    match &oci {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Attempt::Unauthorized(oci.to_string()),
        OciDistributionError::RegistryError { envelope, .. } => {
            let messages: Vec<&str> = envelope.errors.iter().map(|e| e.message.as_str()).collect();
            let detail = if messages.iter().all(|m| m.is_empty()) {
                oci.to_string()
            } else {
                messages.join("; ")
            };
            let code = |c: &OciErrorCode| envelope.errors.iter().any(|e| e.code == *c);
            if code(&OciErrorCode::ManifestUnknown)
                || code(&OciErrorCode::NameUnknown)
                || code(&OciErrorCode::NotFound)
            {
                Attempt::NotFound(detail)
            } else if code(&OciErrorCode::Unauthorized) || code(&OciErrorCode::Denied) {
                Attempt::Unauthorized(detail)
            } else {
                Attempt::Unreachable(detail)
            }
        }
        OciDistributionError::ServerError { code, .. } => match code {
            401 | 403 => Attempt::Unauthorized(oci.to_string()),
            404 => Attempt::NotFound(oci.to_string()),
            _ => Attempt::Unreachable(oci.to_string()),
        },
        _ => Attempt::Unreachable(one_line(&oci)),
    }
}

fn media_type_of(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match value.get("mediaType").and_then(Value::as_str) {
        Some(mt) => mt.to_owned(),
        None if value.get("manifests").is_some() => OCI_IMAGE_INDEX_MEDIA_TYPE.to_owned(),
        None => OCI_IMAGE_MEDIA_TYPE.to_owned(),
    }
}

async fn attempt(registry: &RegistryClient, image: &str, auth: RegistryAuth) -> Attempt {
    const ACCEPT: &[&str] = &[
        OCI_IMAGE_MEDIA_TYPE,
        OCI_IMAGE_INDEX_MEDIA_TYPE,
        IMAGE_MANIFEST_MEDIA_TYPE,
        IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    ];
    match registry.manifest_raw_with_auth(image, auth, ACCEPT).await {
        Ok((body, digest)) => Attempt::Found {
            media_type: media_type_of(&body),
            digest,
        },
        Err(e) => classify(e),
    }
}

async fn resolve_one(registry: &RegistryClient, lookup: &ImageLookup) -> Value {
    let image = lookup.image.as_str();
    if let Err(e) = parse_reference(image) {
        return json!({"image": image, "outcome": "unreachable", "detail": e.to_string()});
    }
    let mut auths: Vec<RegistryAuth> = lookup
        .credentials
        .iter()
        .filter_map(RegistryCredential::auth)
        .collect();
    if lookup.credentials.is_empty() {
        auths.push(RegistryAuth::Anonymous);
    }
    let mut last_unauthorized =
        String::from("no usable credential (identity tokens are not supported by this host)");
    for auth in auths {
        match attempt(registry, image, auth).await {
            Attempt::Found { digest, media_type } => {
                return json!({"image": image, "outcome": "found", "digest": digest, "mediaType": media_type})
            }
            Attempt::NotFound(detail) => {
                return json!({"image": image, "outcome": "notFound", "detail": detail})
            }
            Attempt::Unreachable(detail) => {
                return json!({"image": image, "outcome": "unreachable", "detail": detail})
            }
            Attempt::Unauthorized(detail) => last_unauthorized = detail,
        }
    }
    json!({"image": image, "outcome": "unauthorized", "detail": last_unauthorized})
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
            let work = async {
                let _permit = limit.acquire_owned().await;
                resolve_one(&registry, &lookup).await
            };
            match tokio::time::timeout_at(deadline, work).await {
                Ok(result) => result,
                Err(_) => json!({
                    "image": lookup.image,
                    "outcome": "unreachable",
                    "detail": format!("timed out after {} ms", timeout.as_millis()),
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

    #[test]
    fn classification() {
        let not_found: OciDistributionError = OciDistributionError::RegistryError {
            envelope: serde_json::from_str(
                r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#,
            )
            .expect("envelope"),
            url: "http://r/v2/a/manifests/1".into(),
        };
        assert!(
            matches!(classify(RegistryError::Oci(not_found)), Attempt::NotFound(d) if d == "manifest unknown")
        );
        let unauthorized = OciDistributionError::UnauthorizedError {
            url: "http://r".into(),
        };
        assert!(matches!(
            classify(RegistryError::Oci(unauthorized)),
            Attempt::Unauthorized(_)
        ));
        let server = OciDistributionError::ServerError {
            code: 503,
            url: "u".into(),
            message: "m".into(),
        };
        assert!(matches!(
            classify(RegistryError::Oci(server)),
            Attempt::Unreachable(_)
        ));
    }
}
