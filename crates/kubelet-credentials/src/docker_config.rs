//! The kubelet's docker config types (`config.go`: `DockerConfigJSON`, `DockerConfig`,
//! `DockerConfigEntry`), decoded from a secret's document as Go's `encoding/json` decodes them:
//! the registry entries, each entry's credential, and what does not fit.

use std::collections::BTreeMap;

use super::credential::Credential;
use super::go_base64::decode_base64;
use super::go_json::{go_field_is, GoJson};

/// What is wrong with one registry entry of a pull secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EntryProblem {
    /// The entry is neither an object nor `null`.
    #[error("is not an object")]
    NotAnObject,
    /// The named field is neither a string nor `null`.
    #[error("{0:?} is not a string")]
    NotAString(&'static str),
    /// `auth` is not base64.
    #[error("\"auth\" is not valid base64")]
    AuthNotBase64,
    /// `auth` decodes to text without the `:` between username and password.
    #[error("\"auth\" has no ':' separator")]
    AuthNoSeparator,
}

/// Why a decoded secret payload does not fit the kubelet's types.
pub(super) enum Problem {
    Document(&'static str),
    Entry(String, EntryProblem),
}

/// `DockerConfigJSON` (`.dockerconfigjson`): the `auths` map; `HttpHeaders` is checked only.
pub(super) fn decode_config_json(
    document: &GoJson,
) -> Result<BTreeMap<String, Credential>, Problem> {
    let members = match document {
        GoJson::Null => return Ok(BTreeMap::new()),
        GoJson::Object(members) => members,
        _ => return Err(Problem::Document("the document is not an object")),
    };
    let mut auths = BTreeMap::new();
    for (name, value) in members {
        if go_field_is(name, "auths") {
            match value {
                // Go resets the map on null and adds to it on every further object.
                GoJson::Null => auths.clear(),
                GoJson::Object(entries) => decode_entries(entries, &mut auths)?,
                _ => return Err(Problem::Document("\"auths\" is not an object")),
            }
        } else if go_field_is(name, "httpheaders") {
            let strings = match value {
                GoJson::Null => true,
                GoJson::Object(headers) => headers
                    .iter()
                    .all(|(_, v)| matches!(v, GoJson::String(_) | GoJson::Null)),
                _ => false,
            };
            if !strings {
                return Err(Problem::Document(
                    "\"HttpHeaders\" is not an object of strings",
                ));
            }
        }
    }
    Ok(auths)
}

/// `DockerConfig` (`.dockercfg`): the bare map of entries.
pub(super) fn decode_dockercfg(document: &GoJson) -> Result<BTreeMap<String, Credential>, Problem> {
    let mut entries = BTreeMap::new();
    match document {
        GoJson::Null => {}
        GoJson::Object(members) => decode_entries(members, &mut entries)?,
        _ => return Err(Problem::Document("the document is not an object")),
    }
    Ok(entries)
}

/// Decodes every entry into `into`; a repeated key replaces the earlier entry.
fn decode_entries(
    members: &[(String, GoJson)],
    into: &mut BTreeMap<String, Credential>,
) -> Result<(), Problem> {
    for (key, value) in members {
        let credential =
            decode_entry(value).map_err(|problem| Problem::Entry(key.clone(), problem))?;
        into.insert(key.clone(), credential);
    }
    Ok(())
}

/// `DockerConfigEntry.UnmarshalJSON`: `username`, `password`, `email` and `auth`; a non-empty
/// `auth` replaces username and password. `null` is an entry with empty credentials.
fn decode_entry(value: &GoJson) -> Result<Credential, EntryProblem> {
    let members = match value {
        GoJson::Null => &[][..],
        GoJson::Object(members) => members.as_slice(),
        _ => return Err(EntryProblem::NotAnObject),
    };
    let (mut username, mut password, mut email, mut auth) =
        (String::new(), String::new(), String::new(), String::new());
    for (name, value) in members {
        let (field, slot) = if go_field_is(name, "username") {
            ("username", &mut username)
        } else if go_field_is(name, "password") {
            ("password", &mut password)
        } else if go_field_is(name, "email") {
            ("email", &mut email)
        } else if go_field_is(name, "auth") {
            ("auth", &mut auth)
        } else {
            continue;
        };
        match value {
            GoJson::String(text) => *slot = text.clone(),
            GoJson::Null => {}
            _ => return Err(EntryProblem::NotAString(field)),
        }
    }
    if auth.is_empty() {
        return Ok(Credential::new(username, password));
    }
    decode_auth(&auth)
}

/// `decodeDockerConfigFieldAuth`: base64 (padded when it ends in `=`, unpadded otherwise) of
/// `username:password`, split at the first `:`.
fn decode_auth(auth: &str) -> Result<Credential, EntryProblem> {
    let padded = auth.trim().ends_with('=');
    let decoded = decode_base64(auth.as_bytes(), padded).ok_or(EntryProblem::AuthNotBase64)?;
    let text = String::from_utf8_lossy(&decoded);
    let (username, password) = text.split_once(':').ok_or(EntryProblem::AuthNoSeparator)?;
    Ok(Credential::new(username, password))
}

#[cfg(test)]
mod tests {
    use crate::fixtures::{config_json, dockercfg, parse};
    use crate::testing::{b64, b64_unpadded};
    use crate::{Credential, EntryProblem, SecretError};
    use serde_json::json;

    #[test]
    fn auth_overrides_username_and_password() {
        let payload = json!({"auths": {
            "a.example.com": {"username": "u", "password": "p", "auth": b64("x:y:z")},
            "b.example.com": {"username": "u", "password": "p", "auth": ""},
            "c.example.com": {"username": "u", "auth": b64(":only-password")},
            "d.example.com": {"auth": b64("no-password:")},
            // Unpadded base64 is accepted since the kubelet falls back to RawStdEncoding.
            "e.example.com": {"auth": b64_unpadded("user:pw")},
        }});
        let entries = parse(&config_json(&payload.to_string())).unwrap();
        let expected = [
            ("a.example.com", "x", "y:z"),
            ("b.example.com", "u", "p"),
            ("c.example.com", "", "only-password"),
            ("d.example.com", "no-password", ""),
            ("e.example.com", "user", "pw"),
        ];
        assert_eq!(entries.len(), expected.len());
        for ((key, credential), (want_key, user, password)) in entries.iter().zip(expected) {
            assert_eq!(key, want_key);
            assert_eq!(
                (credential.username(), credential.password()),
                (user, password),
                "{key}"
            );
        }
    }

    #[test]
    fn identity_and_registry_tokens_are_ignored_like_the_kubelet() {
        let payload = json!({"auths": {"registry.example.com": {
            "identitytoken": "token-1", "registrytoken": "token-2", "email": "a@b.c",
        }}});
        let entries = parse(&config_json(&payload.to_string())).unwrap();
        let (key, credential) = &entries[0];
        assert_eq!(key, "registry.example.com");
        assert_eq!(credential, &Credential::new("", ""));
        assert_eq!(credential.identity_token(), None);
        assert_eq!(credential.registry_token(), None);
    }

    #[test]
    fn malformed_documents() {
        let document = |payload: &str| match parse(&config_json(payload)) {
            Err(SecretError::BadDocument { problem, .. }) => problem,
            other => panic!("{payload}: {other:?}"),
        };
        assert_eq!(document("[]"), "the document is not an object");
        assert_eq!(document(r#"{"auths": "x"}"#), "\"auths\" is not an object");
        assert_eq!(
            document(r#"{"HttpHeaders": {"a": 1}}"#),
            "\"HttpHeaders\" is not an object of strings"
        );
        assert!(matches!(
            parse(&dockercfg("\"x\"")),
            Err(SecretError::BadDocument { .. })
        ));

        let entry = |payload: &str| match parse(&dockercfg(payload)) {
            Err(SecretError::BadEntry { entry, problem, .. }) => (entry, problem),
            other => panic!("{payload}: {other:?}"),
        };
        let key = "registry.example.com".to_owned();
        assert_eq!(
            entry(r#"{"registry.example.com": "x"}"#),
            (key.clone(), EntryProblem::NotAnObject)
        );
        assert_eq!(
            entry(r#"{"registry.example.com": {"username": 5}}"#),
            (key.clone(), EntryProblem::NotAString("username"))
        );
        assert_eq!(
            entry(r#"{"registry.example.com": {"auth": "!!!="}}"#),
            (key.clone(), EntryProblem::AuthNotBase64)
        );
        assert_eq!(
            entry(&format!(
                r#"{{"registry.example.com": {{"auth": "{}"}}}}"#,
                b64("nocolon")
            )),
            (key, EntryProblem::AuthNoSeparator)
        );
        let error = parse(&dockercfg(r#"{"registry.example.com": {"auth": "!!!="}}"#)).unwrap_err();
        assert!(!error.is_wrong_type());
        assert_eq!(
            error.to_string(),
            r#"secret "team-a/regcred": key ".dockercfg": entry "registry.example.com": "auth" is not valid base64"#
        );
    }
}
