//! Record and replay of host-capability exchanges in kwctl's session format.
//!
//! A session is a YAML list of `{type: Exchange, request, response}`; the
//! request is itself a YAML document (a string) whose tag names the request
//! kind, e.g. `!OciManifestDigest\nimage: busybox\n`. Errors are recorded as
//! their top-level message only (anyhow's `Display`), so a replayed error has
//! no "Caused by:" part, just like with kwctl.
//!
//! Registry credentials never reach a session file: `resolve_images` requests
//! record theirs as `<redacted>` (see `resolve_images.rs`), and pull secrets
//! answered by the Kubernetes capabilities are recorded with the credentials
//! of their Docker config redacted ([`redact_pull_secrets`]), as the patched
//! kwctl of `upstream/kubewarden` records them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

use crate::callback_requests::CallbackRequestType;
use crate::capabilities::Backend;
use crate::resolve_images::REDACTED;

/// The answer given to one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Response {
    /// The payload handed to the guest (UTF-8 JSON).
    Success {
        /// JSON text.
        payload: String,
    },
    /// The error handed to the guest (first line only).
    Error {
        /// Error message.
        message: String,
    },
}

/// One request/response pair of a session file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub struct Exchange {
    /// `serde_yaml` rendering of a [`CallbackRequestType`].
    pub request: String,
    /// What the host answered.
    pub response: Response,
}

/// Render a session the way kwctl writes it.
pub fn to_yaml(exchanges: &[Exchange]) -> Result<String> {
    Ok(serde_yaml::to_string(exchanges)?)
}

/// Parse a session file's text.
pub fn from_yaml(text: &str) -> Result<Vec<Exchange>> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    Ok(serde_yaml::from_str(text)?)
}

/// Wraps another backend and records every exchange, written on `finish`.
pub struct Recorder {
    inner: Box<dyn Backend>,
    destination: PathBuf,
    exchanges: Vec<Exchange>,
}

impl Recorder {
    /// Record what `inner` answers into `destination`.
    pub fn new(inner: Box<dyn Backend>, destination: PathBuf) -> Self {
        Self {
            inner,
            destination,
            exchanges: Vec::new(),
        }
    }
}

impl Backend for Recorder {
    fn evaluate(&mut self, request: &CallbackRequestType) -> Result<Vec<u8>> {
        let result = self.inner.evaluate(request);
        let response = match &result {
            Ok(payload) => Response::Success {
                payload: String::from_utf8(
                    redact_pull_secrets(payload).unwrap_or_else(|| payload.clone()),
                )
                .context("the answer to record is not UTF-8 text")?,
            },
            Err(e) => Response::Error {
                message: e.to_string(),
            },
        };
        self.exchanges.push(Exchange {
            request: serde_yaml::to_string(request)?,
            response,
        });
        result
    }

    fn finish(&mut self) -> Result<()> {
        std::fs::write(&self.destination, to_yaml(&self.exchanges)?).with_context(|| {
            format!(
                "cannot write the recorded session to {}",
                self.destination.display()
            )
        })
    }
}

/// The keys of a Secret's `data` that hold registry credentials
/// (`kubernetes.io/dockerconfigjson` and `kubernetes.io/dockercfg` Secrets).
const PULL_SECRET_KEYS: [&str; 2] = [".dockerconfigjson", ".dockercfg"];
/// The fields of a Docker config entry that are, or carry, secrets.
const DOCKER_CONFIG_SECRET_FIELDS: [&str; 5] = [
    "username",
    "password",
    "identitytoken",
    "registrytoken",
    "email",
];

/// `payload` (a Secret, or a list of them) with the credentials of its pull
/// secrets replaced by `<redacted>`, or `None` when it holds no pull secret.
/// A pull secret keeps its shape: its Docker config names the same
/// registries, so a policy replaying the session takes the same path as when
/// it was recorded. Other Secret types are left alone.
pub fn redact_pull_secrets(payload: &[u8]) -> Option<Vec<u8>> {
    let holds = |key: &str| payload.windows(key.len()).any(|w| w == key.as_bytes());
    if !PULL_SECRET_KEYS.iter().any(|key| holds(key)) {
        return None;
    }
    let mut value: serde_json::Value = serde_json::from_slice(payload).ok()?;
    if !redact_secrets_in(&mut value) {
        return None;
    }
    serde_json::to_vec(&value).ok()
}

/// Redacts the pull secrets of `value`, an object or a list of objects;
/// whether there was one.
fn redact_secrets_in(value: &mut serde_json::Value) -> bool {
    let mut redacted = false;
    if let Some(items) = value.get_mut("items").and_then(|i| i.as_array_mut()) {
        for item in items {
            redacted |= redact_secrets_in(item);
        }
    }
    if let Some(data) = value.get_mut("data").and_then(|d| d.as_object_mut()) {
        for key in PULL_SECRET_KEYS {
            if let Some(encoded) = data.get_mut(key) {
                *encoded = serde_json::Value::String(redact_docker_config(encoded));
                redacted = true;
            }
        }
    }
    redacted
}

/// One base64-encoded Docker config (`.dockerconfigjson`, or `.dockercfg`
/// without the `auths` wrapper) with its credentials redacted; anything that
/// does not decode is replaced as a whole.
fn redact_docker_config(encoded: &serde_json::Value) -> String {
    use base64::{engine::general_purpose::STANDARD, Engine as _};
    let whole = || STANDARD.encode(REDACTED);
    let Some(mut config) = encoded
        .as_str()
        .and_then(|e| STANDARD.decode(e.trim()).ok())
        .and_then(|raw| serde_json::from_slice::<serde_json::Value>(&raw).ok())
    else {
        return whole();
    };
    let entries = match config.get_mut("auths") {
        Some(auths) => auths.as_object_mut(),
        None => config.as_object_mut(),
    };
    let Some(entries) = entries else {
        return whole();
    };
    for entry in entries.values_mut() {
        let Some(entry) = entry.as_object_mut() else {
            *entry = serde_json::Value::String(REDACTED.to_owned());
            continue;
        };
        for (field, value) in entry.iter_mut() {
            let field = field.to_ascii_lowercase();
            if DOCKER_CONFIG_SECRET_FIELDS.contains(&field.as_str()) {
                *value = serde_json::Value::String(REDACTED.to_owned());
            } else if field == "auth" {
                *value =
                    serde_json::Value::String(STANDARD.encode(format!("{REDACTED}:{REDACTED}")));
            }
        }
    }
    serde_json::to_vec(&config).map_or_else(|_| whole(), |raw| STANDARD.encode(raw))
}

/// Answers requests from a recorded session, in order.
pub struct Replayer {
    exchanges: Vec<(CallbackRequestType, Response)>,
    cursor: usize,
}

impl Replayer {
    /// Load and parse a session file up front so a broken fixture fails fast.
    pub fn from_path(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the session to replay, {}", path.display()))?;
        Self::from_exchanges(
            from_yaml(&text)
                .with_context(|| format!("{} is not a session file", path.display()))?,
        )
    }

    /// Build from already parsed exchanges.
    pub fn from_exchanges(exchanges: Vec<Exchange>) -> Result<Self> {
        let exchanges = exchanges
            .into_iter()
            .map(|e| {
                let request: CallbackRequestType =
                    serde_yaml::from_str(&e.request).with_context(|| {
                        format!(
                            "a recorded request of no kind this host knows: {}",
                            e.request
                        )
                    })?;
                Ok((request, e.response))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            exchanges,
            cursor: 0,
        })
    }
}

/// The two replay errors a guest can see are kwctl's texts, word for word: a session replays
/// on kwctl and on this host alike, the README lists them, `tests/host.bats` pins the
/// mismatch and `e2e-tests/sessions/record.sh` looks for `Replay error` in a response.
impl Backend for Replayer {
    fn evaluate(&mut self, request: &CallbackRequestType) -> Result<Vec<u8>> {
        let index = self.cursor;
        self.cursor += 1;
        match self.exchanges.get(index) {
            None => Err(anyhow!(
                "the list of recorded responses is empty or has been exhausted"
            )),
            Some((expected, response)) => {
                if expected != request {
                    return Err(anyhow!(
                        "Replay error: unexpected request. Was expecting {:?}, got {:?} instead",
                        expected,
                        request
                    ));
                }
                match response {
                    Response::Success { payload } => Ok(payload.clone().into_bytes()),
                    Response::Error { message } => Err(anyhow!("{message}")),
                }
            }
        }
    }

    fn finish(&mut self) -> Result<()> {
        if self.cursor < self.exchanges.len() {
            eprintln!(
                "test-host: the request asked for {} of the session's {} recorded answers",
                self.cursor,
                self.exchanges.len()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_req(image: &str) -> CallbackRequestType {
        CallbackRequestType::OciManifestDigest {
            image: image.to_owned(),
        }
    }

    const KWCTL_SESSION: &str = r#"- type: Exchange
  request: |
    !OciManifestDigest
    image: ghcr.io/kubewarden/policy-server:v1.36.0
  response:
    type: Success
    payload: '{"digest":"sha256:0b7d"}'
- type: Exchange
  request: |
    !KubernetesGetResource
    api_version: v1
    kind: Secret
    name: regcred
    namespace: team-a
    disable_cache: false
  response:
    type: Error
    message: Cannot find v1/Secret named 'regcred' inside of namespace 'Some("team-a")'
"#;

    #[test]
    fn reads_kwctl_session_and_round_trips() {
        let exchanges = from_yaml(KWCTL_SESSION).expect("parse");
        assert_eq!(exchanges.len(), 2);
        let text = to_yaml(&exchanges).expect("render");
        assert_eq!(from_yaml(&text).expect("reparse"), exchanges);
        assert!(text.contains("type: Exchange"));
        assert!(text.contains("!OciManifestDigest"));

        let mut r = Replayer::from_exchanges(exchanges).expect("replayer");
        let ok = r
            .evaluate(&digest_req("ghcr.io/kubewarden/policy-server:v1.36.0"))
            .expect("success");
        assert_eq!(ok, br#"{"digest":"sha256:0b7d"}"#);
        let get = CallbackRequestType::KubernetesGetResource {
            api_version: "v1".into(),
            kind: "Secret".into(),
            name: "regcred".into(),
            namespace: Some("team-a".into()),
            disable_cache: false,
            field_masks: None,
        };
        let e = r.evaluate(&get).expect_err("recorded error");
        assert_eq!(
            e.to_string(),
            "Cannot find v1/Secret named 'regcred' inside of namespace 'Some(\"team-a\")'"
        );
        let e = r.evaluate(&get).expect_err("exhausted");
        assert_eq!(
            e.to_string(),
            "the list of recorded responses is empty or has been exhausted"
        );
    }

    #[test]
    fn request_rendering_matches_kwctl() {
        let text = serde_yaml::to_string(&digest_req("busybox")).expect("yaml");
        assert_eq!(text, "!OciManifestDigest\nimage: busybox\n");
    }

    #[test]
    fn replay_mismatch_names_expected_and_got() {
        let exchanges = from_yaml(KWCTL_SESSION).expect("parse");
        let mut r = Replayer::from_exchanges(exchanges).expect("replayer");
        let e = r.evaluate(&digest_req("busybox")).expect_err("mismatch");
        assert_eq!(
            e.to_string(),
            "Replay error: unexpected request. Was expecting OciManifestDigest { image: \"ghcr.io/kubewarden/policy-server:v1.36.0\" }, got OciManifestDigest { image: \"busybox\" } instead"
        );
    }

    struct Canned;
    impl Backend for Canned {
        fn evaluate(&mut self, request: &CallbackRequestType) -> Result<Vec<u8>> {
            match request {
                CallbackRequestType::OciManifestDigest { image } if image == "ok" => {
                    Ok(br#"{"digest":"sha256:aa"}"#.to_vec())
                }
                _ => Err(anyhow!("inner cause").context("Fail to interact with OCI registry: x")),
            }
        }
    }

    #[test]
    fn recorded_pull_secrets_never_hold_credentials() {
        use base64::{engine::general_purpose::STANDARD, Engine as _};
        let secret = |name: &str, config: serde_json::Value| {
            serde_json::json!({
                "kind": "Secret", "metadata": {"name": name},
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": STANDARD.encode(config.to_string())}
            })
        };
        let list = serde_json::json!({"kind": "SecretList", "items": [
            secret("regcred", serde_json::json!({"auths": {"registry.example.com": {
                "username": "robot", "password": "s3cr3t-p4ss",
                "auth": STANDARD.encode("robot:s3cr3t-p4ss")}}})),
            {"kind": "Secret", "type": "Opaque", "data": {"token": "dG9rZW4="}},
            {"kind": "Secret", "data": {".dockercfg": "not base64"}},
        ]});
        let recorded =
            redact_pull_secrets(&serde_json::to_vec(&list).expect("json")).expect("redacted");
        let recorded: serde_json::Value = serde_json::from_slice(&recorded).expect("json");
        let config: serde_json::Value = serde_json::from_slice(
            &STANDARD
                .decode(
                    recorded["items"][0]["data"][".dockerconfigjson"]
                        .as_str()
                        .expect("str"),
                )
                .expect("base64"),
        )
        .expect("config");
        let entry = &config["auths"]["registry.example.com"];
        assert_eq!(entry["username"], REDACTED);
        assert_eq!(entry["password"], REDACTED);
        assert_eq!(entry["auth"], STANDARD.encode("<redacted>:<redacted>"));
        // other Secret types stay; what does not decode goes as a whole
        assert_eq!(recorded["items"][1]["data"]["token"], "dG9rZW4=");
        assert_eq!(
            recorded["items"][2]["data"][".dockercfg"],
            STANDARD.encode(REDACTED)
        );
        let text = recorded.to_string();
        for secret in [
            "robot",
            "s3cr3t-p4ss",
            &STANDARD.encode("robot:s3cr3t-p4ss"),
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        // payloads without pull secrets are recorded as they are
        assert_eq!(redact_pull_secrets(br#"{"kind":"Pod"}"#), None);
    }

    #[test]
    fn recorder_writes_first_line_of_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("session.yml");
        let mut rec = Recorder::new(Box::new(Canned), path.clone());
        assert!(rec.evaluate(&digest_req("ok")).is_ok());
        assert!(rec.evaluate(&digest_req("ko")).is_err());
        rec.finish().expect("write");
        let exchanges = from_yaml(&std::fs::read_to_string(&path).expect("read")).expect("parse");
        assert_eq!(
            exchanges[1].response,
            Response::Error {
                message: "Fail to interact with OCI registry: x".into()
            }
        );
        let mut replay = Replayer::from_exchanges(exchanges).expect("replayer");
        assert_eq!(
            replay.evaluate(&digest_req("ok")).expect("ok"),
            br#"{"digest":"sha256:aa"}"#
        );
    }
}
