//! Pull secrets as the kubelet reads them (`secrets/secrets.go`, `MakeDockerKeyring`): which
//! secrets count, where their document is, and why one cannot be used, in messages that never
//! show a byte of the credentials.

use serde_json::Value;

use super::credential::Credential;
use super::docker_config::{decode_config_json, decode_dockercfg, EntryProblem, Problem};
use super::go_base64::decode_base64;
use super::go_json::GoJson;

/// The type of a pull secret in the `~/.docker/config.json` format.
pub(super) const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// Where a [`DOCKER_CONFIG_JSON_TYPE`] secret keeps its document.
pub(super) const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The type of a pull secret in the legacy `~/.dockercfg` format.
pub(super) const DOCKERCFG_TYPE: &str = "kubernetes.io/dockercfg";
/// Where a [`DOCKERCFG_TYPE`] secret keeps its document.
pub(super) const DOCKERCFG_KEY: &str = ".dockercfg";

/// Why a pull secret cannot be used. The texts name the secret, its data key and the `auths`
/// entry, never a byte of the credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not a docker-config secret: the kubelet silently skips it.
    #[error(
        "secret {secret:?} has type {found:?}, not {DOCKER_CONFIG_JSON_TYPE} or {DOCKERCFG_TYPE}"
    )]
    WrongType {
        /// `namespace/name` of the secret.
        secret: String,
        /// The secret's `type` (empty when absent).
        found: String,
    },
    /// The type is right but the data key is absent: the kubelet silently skips it.
    #[error("secret {secret:?}: key {key:?} is missing")]
    MissingKey {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
    },
    /// The type is right but the data key is empty: the kubelet silently skips it.
    #[error("secret {secret:?}: key {key:?} is empty")]
    EmptyKey {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
    },
    /// The data value is not base64 (or not a string).
    #[error("secret {secret:?}: key {key:?} is not valid base64")]
    BadBase64 {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
    },
    /// The decoded data is not JSON.
    #[error("secret {secret:?}: key {key:?} is not valid JSON (line {line}, column {column})")]
    BadJson {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// Where the syntax error is (1-based).
        line: usize,
        /// Where the syntax error is (1-based).
        column: usize,
    },
    /// The JSON does not have the shape the kubelet decodes (e.g. `"auths"` is not an object).
    #[error("secret {secret:?}: key {key:?}: {problem}")]
    BadDocument {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// What is wrong, naming fields only.
        problem: &'static str,
    },
    /// One registry entry cannot be decoded.
    #[error("secret {secret:?}: key {key:?}: entry {entry:?}: {problem}")]
    BadEntry {
        /// `namespace/name` of the secret.
        secret: String,
        /// `.dockerconfigjson` or `.dockercfg`.
        key: &'static str,
        /// The entry's registry key, with any `user:password@` replaced by `<redacted>@`.
        entry: String,
        /// What is wrong with it.
        problem: EntryProblem,
    },
}

impl SecretError {
    /// True when the kubelet skips this secret without a word (it is not a docker-config
    /// secret, or has no data under its type's key); false when the secret is malformed, which
    /// makes the kubelet fail every pull of the pod.
    pub fn is_wrong_type(&self) -> bool {
        matches!(
            self,
            SecretError::WrongType { .. }
                | SecretError::MissingKey { .. }
                | SecretError::EmptyKey { .. }
        )
    }
}

/// Parses a Secret object as the Kubernetes API returns it (`type`, and `data` with base64
/// values) into its registry entries, as the kubelet's `MakeDockerKeyring` reads them:
/// `kubernetes.io/dockerconfigjson` holds `{"auths": {KEY: ENTRY}}` under `.dockerconfigjson`,
/// `kubernetes.io/dockercfg` holds `{KEY: ENTRY}` under `.dockercfg`. An entry's `auth`
/// (base64 `user:password`, padded or not) overrides its `username`/`password`; other fields,
/// `identitytoken` and `registrytoken` included, are ignored as the kubelet ignores them.
///
/// `secret_name` is `namespace/name`, for messages. Entries come sorted by key, which is as good
/// as the kubelet's (random) map order since [`Keyring`](super::Keyring) sorts its keys anyway.
pub fn parse_pull_secret(
    secret_name: &str,
    secret: &Value,
) -> Result<Vec<(String, Credential)>, SecretError> {
    let secret_type = secret.get("type").and_then(Value::as_str).unwrap_or("");
    let (key, is_config_json) = match secret_type {
        DOCKER_CONFIG_JSON_TYPE => (DOCKER_CONFIG_JSON_KEY, true),
        DOCKERCFG_TYPE => (DOCKERCFG_KEY, false),
        _ => {
            return Err(SecretError::WrongType {
                secret: secret_name.to_owned(),
                found: secret_type.to_owned(),
            })
        }
    };
    let name = || secret_name.to_owned();
    let bad_base64 = || SecretError::BadBase64 {
        secret: name(),
        key,
    };
    let encoded = match secret.get("data").and_then(|data| data.get(key)) {
        None | Some(Value::Null) => {
            return Err(SecretError::MissingKey {
                secret: name(),
                key,
            })
        }
        Some(Value::String(encoded)) => encoded,
        Some(_) => return Err(bad_base64()),
    };
    // Go's encoding/json decodes `[]byte` with base64.StdEncoding.
    let bytes = decode_base64(encoded.as_bytes(), true).ok_or_else(bad_base64)?;
    if bytes.is_empty() {
        return Err(SecretError::EmptyKey {
            secret: name(),
            key,
        });
    }
    // Go replaces invalid UTF-8 in JSON strings instead of failing.
    let document: GoJson =
        serde_json::from_str(&String::from_utf8_lossy(&bytes)).map_err(|error| {
            SecretError::BadJson {
                secret: name(),
                key,
                line: error.line(),
                column: error.column(),
            }
        })?;
    let decoded = if is_config_json {
        decode_config_json(&document)
    } else {
        decode_dockercfg(&document)
    };
    decoded
        .map(|entries| entries.into_iter().collect())
        .map_err(|problem| match problem {
            Problem::Document(problem) => SecretError::BadDocument {
                secret: name(),
                key,
                problem,
            },
            Problem::Entry(entry, problem) => SecretError::BadEntry {
                secret: name(),
                key,
                entry: redact_userinfo(&entry),
                problem,
            },
        })
}

/// An `auths` key fit for messages: any `user:password@` replaced by `<redacted>@`.
fn redact_userinfo(key: &str) -> String {
    let start = ["https://", "http://"]
        .iter()
        .find(|scheme| key.starts_with(*scheme))
        .map_or(0, |scheme| scheme.len());
    let end = key[start..]
        .find(['/', '?', '#'])
        .map_or(key.len(), |i| start + i);
    match key[start..end].rfind('@') {
        Some(at) => format!("{}<redacted>{}", &key[..start], &key[start + at..]),
        None => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{
        assert_shows_no_secret, config_json, dockercfg, keyring_of, owned, parse,
    };
    use crate::fixtures::{SECRET_PASSWORD, SECRET_USER};
    use crate::testing::{b64, secret};
    use serde_json::json;

    /// `(key, username, password)` of parsed entries, to compare with expected ones.
    fn triples(entries: &[(String, Credential)]) -> Vec<(&str, &str, &str)> {
        entries
            .iter()
            .map(|(key, c)| (key.as_str(), c.username(), c.password()))
            .collect()
    }

    #[test]
    fn both_types_yield_their_entries() {
        let registry = "registry.example.test";
        let auth = json!({registry: {"auth": b64("team-a-bot:pull-token")}});
        let plain = json!({registry: {"username": "team-a-bot", "password": "pull-token"}});
        // `auth` wins over the fields beside it.
        let both = json!({registry: {
            "auth": b64("team-a-bot:pull-token"), "username": "other", "password": "other",
        }});
        let bot = vec![(registry, "team-a-bot", "pull-token")];
        let cases = [
            // `.dockerconfigjson` wraps the entries in `auths`...
            (
                config_json(&json!({"auths": auth}).to_string()),
                bot.clone(),
            ),
            (
                config_json(&json!({"auths": plain}).to_string()),
                bot.clone(),
            ),
            (
                config_json(&json!({"auths": both}).to_string()),
                bot.clone(),
            ),
            // ...`.dockercfg` is the bare map of entries.
            (dockercfg(&auth.to_string()), bot.clone()),
            (dockercfg(&plain.to_string()), bot.clone()),
            (dockercfg(&both.to_string()), bot.clone()),
            // Keys come back as written, sorted; normalising them is the keyring's job.
            (
                dockercfg(
                    &json!({
                        "https://mirror.example.test/v2/": {"auth": b64("mirror:m")},
                        "registry.example.test:5000/team-a": {"username": "a", "password": "b"},
                    })
                    .to_string(),
                ),
                vec![
                    ("https://mirror.example.test/v2/", "mirror", "m"),
                    ("registry.example.test:5000/team-a", "a", "b"),
                ],
            ),
            // No entries at all is a valid, empty pull secret.
            (config_json(r#"{"auths": {}}"#), vec![]),
            (dockercfg("{}"), vec![]),
        ];
        for (secret, expected) in cases {
            let entries = parse(&secret).expect("a well-formed pull secret");
            assert_eq!(triples(&entries), expected, "{secret}");
        }
    }

    #[test]
    fn each_type_reads_only_its_own_data_key() {
        let entries = r#"{"registry.example.test": {"username": "u", "password": "p"}}"#;
        let wrapped = format!(r#"{{"auths": {entries}}}"#);
        let misplaced = [
            secret("regcred", DOCKER_CONFIG_JSON_TYPE, DOCKERCFG_KEY, entries),
            secret("regcred", DOCKERCFG_TYPE, DOCKER_CONFIG_JSON_KEY, &wrapped),
        ];
        for secret in misplaced {
            let error = parse(&secret).expect_err("the type's own key is absent");
            assert!(matches!(error, SecretError::MissingKey { .. }), "{error:?}");
            assert!(error.is_wrong_type());
        }
    }

    #[test]
    fn a_document_in_the_other_types_shape_yields_no_credential() {
        // A bare map under `.dockerconfigjson`: no `auths`, so its members are unknown fields.
        let bare = r#"{"registry.example.test": {"username": "u", "password": "p"}}"#;
        assert_eq!(parse(&config_json(bare)).expect("ignored members"), vec![]);
        // An `auths` wrapper under `.dockercfg`: `auths` is read as a registry key whose entry
        // has only unknown fields, so its credential is empty.
        let wrapped = format!(r#"{{"auths": {bare}}}"#);
        let entries = parse(&dockercfg(&wrapped)).expect("one odd entry");
        assert_eq!(triples(&entries), [("auths", "", "")]);
    }

    #[test]
    fn parsed_entries_feed_the_keyring() {
        let secret = config_json(
            &json!({"auths": {
                "registry.example.test/team-a": {"auth": b64("team-a-bot:pull-token")},
            }})
            .to_string(),
        );
        let keyring = keyring_of(&[secret]);
        assert_eq!(
            owned(keyring.lookup("registry.example.test/team-a/app")),
            [Credential::new("team-a-bot", "pull-token")]
        );
        assert!(keyring
            .lookup("registry.example.test/team-b/app")
            .is_empty());
        assert!(keyring.lookup("mirror.example.test/team-a/app").is_empty());
    }

    #[test]
    fn secrets_of_other_types_are_skipped() {
        let wrong = parse(&json!({"type": "Opaque", "data": {}})).unwrap_err();
        assert_eq!(
            wrong,
            SecretError::WrongType {
                secret: "team-a/regcred".into(),
                found: "Opaque".into()
            }
        );
        assert!(wrong.is_wrong_type());
        assert!(parse(&json!({"data": {}})).unwrap_err().is_wrong_type());
        assert!(parse(&json!(null)).unwrap_err().is_wrong_type());
    }

    #[test]
    fn secrets_without_data_are_skipped() {
        let missing = parse(&json!({"type": DOCKER_CONFIG_JSON_TYPE})).unwrap_err();
        assert_eq!(
            missing.to_string(),
            r#"secret "team-a/regcred": key ".dockerconfigjson" is missing"#
        );
        assert!(missing.is_wrong_type());
        let empty =
            parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": ""}})).unwrap_err();
        assert!(matches!(empty, SecretError::EmptyKey { .. }) && empty.is_wrong_type());
    }

    #[test]
    fn data_that_is_not_base64_is_malformed() {
        for data in [json!("not base64!"), json!("QQ="), json!(5)] {
            let error =
                parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": data}})).unwrap_err();
            assert_eq!(
                error.to_string(),
                r#"secret "team-a/regcred": key ".dockercfg" is not valid base64"#
            );
            assert!(!error.is_wrong_type());
        }
    }

    #[test]
    fn data_that_is_not_json_is_malformed() {
        // The value of "a" is missing: the error is at the `}` in column 17.
        let bad_json = parse(&config_json(r#"{"auths": {"a": }}"#)).unwrap_err();
        assert_eq!(
            bad_json.to_string(),
            r#"secret "team-a/regcred": key ".dockerconfigjson" is not valid JSON (line 1, column 17)"#
        );
        assert!(!bad_json.is_wrong_type());
    }

    /// Secrets holding the secret credential that cannot be used, for each way a secret can be
    /// malformed around it.
    fn malformed_secrets_holding_the_credential() -> Vec<Value> {
        let (user, password) = (SECRET_USER, SECRET_PASSWORD);
        let auth = b64(format!("{user}:{password}"));
        // JSON cut off right after the password (the last two braces dropped).
        let document = format!(
            r#"{{"auths": {{"r.io": {{"username": "{user}", "password": "{password}" }}}}}}"#
        );
        let truncated = &document[..document.len() - 2];
        vec![
            config_json(&format!(
                r#"{{"auths": {{"r.io": {{"auth": "{password}"}}}}}}"#
            )),
            config_json(&format!(
                r#"{{"auths": {{"r.io": {{"auth": "{}"}}}}}}"#,
                b64(password)
            )),
            config_json(&format!(
                r#"{{"auths": {{"r.io": {{"auth": "{auth}", "password": 1}}}}}}"#
            )),
            config_json(truncated),
            config_json(&format!(
                r#"{{"auths": {{"https://{user}:{password}@r.io": 5}}}}"#
            )),
            config_json(&format!(r#"{{"auths": "{auth}"}}"#)),
            json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": format!("{password}!")}}),
            json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": auth}}),
        ]
    }

    #[test]
    fn errors_show_no_secret() {
        for secret in malformed_secrets_holding_the_credential() {
            let error = parse(&secret).unwrap_err();
            assert_shows_no_secret(&error.to_string());
            assert_shows_no_secret(&format!("{error:?}"));
        }
    }

    #[test]
    fn userinfo_in_keys_is_redacted() {
        assert_eq!(
            redact_userinfo("https://u:p@r.io/v1/"),
            "https://<redacted>@r.io/v1/"
        );
        assert_eq!(
            redact_userinfo("bot@registry.example.test"),
            "<redacted>@registry.example.test"
        );
        assert_eq!(
            redact_userinfo("http://a@b:c@registry.example.test/team@a"),
            "http://<redacted>@registry.example.test/team@a"
        );
        assert_eq!(redact_userinfo("r.io/a@b"), "r.io/a@b");
        assert_eq!(redact_userinfo("r.io?x=a@b"), "r.io?x=a@b");
    }
}
