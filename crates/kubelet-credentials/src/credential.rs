//! One registry credential, as a pull secret yields it and the credentialed host capability
//! takes it, in a type that cannot be printed.

use std::fmt;

use serde_json::Value;

/// Registry credentials from a pull secret. Deliberately without derived `Debug`, `Display` or
/// `Serialize`, so that no log line or error message can carry them by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    username: String,
    password: String,
    identity_token: Option<String>,
    registry_token: Option<String>,
    /// The pull secret it came from (`team-a/regcred`): a name, never content, so that
    /// messages can say which secret saw a 404 and which was refused.
    source: Option<String>,
}

impl Credential {
    /// A username/password pair: all the kubelet ever takes from a pull secret.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Credential {
            username: username.into(),
            password: password.into(),
            identity_token: None,
            registry_token: None,
            source: None,
        }
    }

    /// The same credential, labelled with the pull secret it came from (`namespace/name`).
    pub fn with_source(mut self, secret: impl Into<String>) -> Self {
        self.source = Some(secret.into());
        self
    }

    /// The pull secret it came from, if known: a name for messages, never secret content.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The same credential with an OAuth identity token, for sources other than pull secrets.
    pub fn with_identity_token(mut self, token: impl Into<String>) -> Self {
        self.identity_token = Some(token.into());
        self
    }

    /// The same credential with a registry bearer token, for sources other than pull secrets.
    pub fn with_registry_token(mut self, token: impl Into<String>) -> Self {
        self.registry_token = Some(token.into());
        self
    }

    /// The username (possibly empty: the kubelet keeps entries without one).
    pub fn username(&self) -> &str {
        &self.username
    }

    /// The password (possibly empty).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The identity token. Always `None` for pull secrets: the kubelet does not read
    /// `identitytoken` from them.
    pub fn identity_token(&self) -> Option<&str> {
        self.identity_token.as_deref()
    }

    /// The registry token. Always `None` for pull secrets: the kubelet does not read
    /// `registrytoken` from them.
    pub fn registry_token(&self) -> Option<&str> {
        self.registry_token.as_deref()
    }

    /// The credential as the credentialed host capability takes it: `username` and `password`,
    /// plus `identityToken` / `registryToken` when present.
    pub fn to_capability_json(&self) -> Value {
        let mut object = serde_json::Map::new();
        object.insert("username".into(), Value::String(self.username.clone()));
        object.insert("password".into(), Value::String(self.password.clone()));
        if let Some(token) = &self.identity_token {
            object.insert("identityToken".into(), Value::String(token.clone()));
        }
        if let Some(token) = &self.registry_token {
            object.insert("registryToken".into(), Value::String(token.clone()));
        }
        Value::Object(object)
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential { username: <redacted>, password: <redacted>, .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::assert_shows_no_secret;
    use crate::fixtures::{SECRET_PASSWORD, SECRET_USER};
    use serde_json::json;

    #[test]
    fn capability_json() {
        assert_eq!(
            Credential::new("u", "p").to_capability_json(),
            json!({"username": "u", "password": "p"})
        );
        assert_eq!(
            Credential::new("u", "p")
                .with_identity_token("i")
                .with_registry_token("r")
                .to_capability_json(),
            json!({"username": "u", "password": "p", "identityToken": "i", "registryToken": "r"})
        );
    }

    #[test]
    fn debug_shows_no_secret() {
        let credential = Credential::new(SECRET_USER, SECRET_PASSWORD)
            .with_identity_token(SECRET_PASSWORD)
            .with_registry_token(SECRET_PASSWORD);
        assert_shows_no_secret(&format!("{credential:?}"));
    }
}
