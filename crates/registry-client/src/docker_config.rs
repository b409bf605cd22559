//! Registry credentials from a Docker `config.json`, as the policy server
//! reads them (`--docker-config-json-path DIR`, filled from
//! `PolicyServer.spec.imagePullSecret`).
//!
//! Like upstream (policy-fetcher through the `docker_credential` crate), only
//! username/password credentials are used: an identity token falls back to
//! anonymous access. Credential helpers are not supported.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

use crate::ConfigError;

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawDockerConfig {
    #[serde(default)]
    auths: HashMap<String, AuthEntry>,
}

/// Credentials found for one registry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Credential {
    UsernamePassword(String, String),
    IdentityToken,
}

/// A parsed Docker config, reduced to what registry auth needs.
#[derive(Debug, Default, Clone)]
pub struct DockerConfig {
    credentials: HashMap<String, Credential>,
}

/// `https://host:port/v1/` and `host:port` both name `host:port`.
fn normalize_key(key: &str) -> String {
    let without_scheme = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    without_scheme
        .split('/')
        .next()
        .unwrap_or(without_scheme)
        .to_owned()
}

impl DockerConfig {
    /// Read `DIR/config.json`.
    pub fn from_dir(dir: &Path) -> Result<Self, ConfigError> {
        const WHAT: &str = "docker config";
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            what: WHAT,
            path: path.clone(),
            source,
        })?;
        Self::from_json(&text).map_err(|e| e.in_file(WHAT, path))
    }

    /// Parse the text of a `config.json`.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        let raw: RawDockerConfig = serde_json::from_str(text)?;
        let mut credentials = HashMap::new();
        for (key, entry) in raw.auths {
            let credential = if entry.identitytoken.is_some() {
                Some(Credential::IdentityToken)
            } else if let (Some(u), Some(p)) = (entry.username.clone(), entry.password.clone()) {
                Some(Credential::UsernamePassword(u, p))
            } else if let Some(auth) = entry.auth.as_deref() {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .map_err(|source| ConfigError::Base64 {
                        key: key.clone(),
                        source,
                    })?;
                let decoded = String::from_utf8(decoded).map_err(|source| ConfigError::Utf8 {
                    key: key.clone(),
                    source,
                })?;
                decoded
                    .split_once(':')
                    .map(|(u, p)| Credential::UsernamePassword(u.to_owned(), p.to_owned()))
            } else {
                None
            };
            if let Some(c) = credential {
                credentials.insert(normalize_key(&key), c);
            }
        }
        Ok(Self { credentials })
    }

    /// Auth to use for `registry` (as `oci_client::Reference::registry()` names it).
    pub fn auth(&self, registry: &str) -> RegistryAuth {
        let candidates: Vec<&str> = if registry == "docker.io" || registry == "index.docker.io" {
            vec!["docker.io", "index.docker.io", "registry-1.docker.io"]
        } else {
            vec![registry]
        };
        for candidate in candidates {
            match self.credentials.get(candidate) {
                Some(Credential::UsernamePassword(u, p)) => {
                    return RegistryAuth::Basic(u.clone(), p.clone())
                }
                Some(Credential::IdentityToken) => {
                    eprintln!(
                        "test-host: the credential for {registry} is an identity token, which this client does not use: looking up anonymously"
                    );
                    return RegistryAuth::Anonymous;
                }
                None => {}
            }
        }
        RegistryAuth::Anonymous
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(a: RegistryAuth) -> Option<(String, String)> {
        match a {
            RegistryAuth::Basic(u, p) => Some((u, p)),
            _ => None,
        }
    }

    #[test]
    fn auth_username_password_and_identity_token() {
        let cfg = DockerConfig::from_json(
            r#"{"auths":{
                "127.0.0.1:5001":{"auth":"dXNlcjpwYXNz"},
                "https://127.0.0.1:5002/v1/":{"username":"u2","password":"p2"},
                "127.0.0.1:5003":{"identitytoken":"tok"},
                "https://index.docker.io/v1/":{"auth":"aHViOnNlY3JldA=="}
            }}"#,
        )
        .expect("parse");
        assert_eq!(
            basic(cfg.auth("127.0.0.1:5001")),
            Some(("user".into(), "pass".into()))
        );
        assert_eq!(
            basic(cfg.auth("127.0.0.1:5002")),
            Some(("u2".into(), "p2".into()))
        );
        assert!(matches!(
            cfg.auth("127.0.0.1:5003"),
            RegistryAuth::Anonymous
        ));
        assert!(matches!(
            cfg.auth("127.0.0.1:5999"),
            RegistryAuth::Anonymous
        ));
        assert_eq!(
            basic(cfg.auth("docker.io")),
            Some(("hub".into(), "secret".into()))
        );
    }
}
