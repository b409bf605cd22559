//! Who a lookup presents itself as, what a registry asks for, and the bearer
//! tokens the pooled client keeps between lookups.
//!
//! The rule this module exists for: a token is reused only by lookups that
//! presented the same credential to the same registry for the same repository
//! scope. Tokens are keyed by an [`Identity`], a SHA-256 of the whole
//! credential (user *and* password), so a token obtained with credential A is
//! never sent for credential B, nor for an anonymous lookup, even when the two
//! credentials share a user name.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http_auth::parser::ChallengeParser;
use oci_client::secrets::RegistryAuth;
use reqwest::header::HeaderValue;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// How long a token without `expires_in` is kept (oci-client's default).
const DEFAULT_TOKEN_SECS: u64 = 60;
/// Tokens are dropped this long before they expire, so none expires in flight.
const EXPIRY_MARGIN: Duration = Duration::from_secs(5);

/// A credential reduced to a digest: the key of the token cache. It cannot
/// be printed back into the credential, so holding it in maps is harmless.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Identity([u8; 32]);

impl Identity {
    /// The identity of `auth`: every byte of the credential counts.
    pub fn of(auth: &RegistryAuth) -> Self {
        let mut hash = Sha256::new();
        match auth {
            RegistryAuth::Anonymous => hash.update(b"anonymous"),
            RegistryAuth::Basic(user, password) => {
                hash.update(b"basic\0");
                hash.update((user.len() as u64).to_le_bytes());
                hash.update(user.as_bytes());
                hash.update(password.as_bytes());
            }
            RegistryAuth::Bearer(token) => {
                hash.update(b"bearer\0");
                hash.update(token.as_bytes());
            }
        }
        Identity(hash.finalize().into())
    }
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

/// What a registry's `GET /v2/` answered in `WWW-Authenticate`, as
/// oci-client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    /// No challenge: requests go without credentials (as oci-client does).
    None,
    /// A challenge that is not `Bearer` (HTTP Basic): basic credentials are sent as they are.
    Basic,
    /// Token authentication: a token is asked for at `realm`.
    Bearer {
        /// Token endpoint.
        realm: String,
        /// `service` parameter to pass along, if any.
        service: Option<String>,
    },
}

impl Challenge {
    /// Read the `WWW-Authenticate` header of a `/v2/` answer.
    pub fn from_header(value: Option<&HeaderValue>) -> Self {
        let Some(value) = value else {
            return Challenge::None;
        };
        let Ok(text) = value.to_str() else {
            return Challenge::Basic;
        };
        for challenge in ChallengeParser::new(text).flatten() {
            if !challenge.scheme.eq_ignore_ascii_case("Bearer") {
                continue;
            }
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            if let Some(realm) = param("realm") {
                return Challenge::Bearer {
                    realm,
                    service: param("service"),
                };
            }
        }
        Challenge::Basic
    }
}

/// The most tokens kept at once.
const MAX_TOKENS: usize = 4096;

/// Where a cached token may be used: one registry, one repository scope, one identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    /// `host[:port]` of the registry.
    pub registry: String,
    /// `repository:<name>:pull`.
    pub scope: String,
    /// Who obtained the token.
    pub identity: Identity,
}

/// A token endpoint's answer (Docker's `token` or OAuth2's `access_token`).
#[derive(Deserialize)]
pub struct TokenAnswer {
    token: Option<String>,
    access_token: Option<String>,
    expires_in: Option<u64>,
}

impl TokenAnswer {
    /// The token and how long it may be kept, `None` when the answer has none.
    pub fn into_token(self) -> Option<(String, Duration)> {
        let ttl = Duration::from_secs(self.expires_in.unwrap_or(DEFAULT_TOKEN_SECS));
        let token = self.token.or(self.access_token)?;
        (!token.is_empty()).then_some((token, ttl))
    }
}

/// Bearer tokens of one process, by [`TokenKey`]; expired ones are never returned.
#[derive(Default)]
pub struct TokenCache {
    tokens: Mutex<HashMap<TokenKey, (String, Instant)>>,
}

impl TokenCache {
    /// The live token for exactly this key.
    pub fn get(&self, key: &TokenKey) -> Option<String> {
        let tokens = self.tokens.lock().ok()?;
        let (token, expires) = tokens.get(key)?;
        (Instant::now() < *expires).then(|| token.clone())
    }

    /// Keep `token` for `key` for `ttl` (less a safety margin).
    pub fn insert(&self, key: TokenKey, token: String, ttl: Duration) {
        let now = Instant::now();
        let expires = now + ttl.saturating_sub(EXPIRY_MARGIN);
        if let Ok(mut tokens) = self.tokens.lock() {
            // bounded: registries, repositories and credentials come from Pod authors
            if tokens.len() >= MAX_TOKENS {
                tokens.retain(|_, (_, expires)| *expires > now);
                if tokens.len() >= MAX_TOKENS {
                    tokens.clear();
                }
            }
            tokens.insert(key, (token, expires));
        }
    }

    /// Drop `token` for `key` after the registry refused it (a newer one is kept).
    pub fn forget(&self, key: &TokenKey, token: &str) {
        if let Ok(mut tokens) = self.tokens.lock() {
            if tokens.get(key).is_some_and(|(t, _)| t == token) {
                tokens.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(registry: &str, repo: &str, auth: &RegistryAuth) -> TokenKey {
        TokenKey {
            registry: registry.into(),
            scope: format!("repository:{repo}:pull"),
            identity: Identity::of(auth),
        }
    }

    #[test]
    fn identities_differ_by_every_part_of_the_credential() {
        let a = RegistryAuth::Basic("alice".into(), "pw-a".into());
        let a2 = RegistryAuth::Basic("alice".into(), "other".into());
        let split = RegistryAuth::Basic("alic".into(), "epw-a".into());
        let anon = RegistryAuth::Anonymous;
        assert_eq!(Identity::of(&a), Identity::of(&a.clone()));
        assert_ne!(Identity::of(&a), Identity::of(&a2));
        assert_ne!(Identity::of(&a), Identity::of(&split));
        assert_ne!(Identity::of(&a), Identity::of(&anon));
        assert!(!format!("{:?}", Identity::of(&a)).contains("alice"));
    }

    #[test]
    fn a_token_is_only_returned_for_its_own_key() {
        let cache = TokenCache::default();
        let a = RegistryAuth::Basic("alice".into(), "pw-a".into());
        let b = RegistryAuth::Basic("bob".into(), "pw-b".into());
        cache.insert(
            key("r:1", "app", &a),
            "tok-a".into(),
            Duration::from_secs(60),
        );
        assert_eq!(cache.get(&key("r:1", "app", &a)).as_deref(), Some("tok-a"));
        assert_eq!(cache.get(&key("r:1", "app", &b)), None);
        assert_eq!(
            cache.get(&key("r:1", "app", &RegistryAuth::Anonymous)),
            None
        );
        assert_eq!(cache.get(&key("r:1", "other", &a)), None);
        assert_eq!(cache.get(&key("r:2", "app", &a)), None);
    }

    #[test]
    fn expired_and_refused_tokens_are_not_reused() {
        let cache = TokenCache::default();
        let a = RegistryAuth::Basic("alice".into(), "pw-a".into());
        cache.insert(key("r", "short", &a), "t".into(), Duration::from_secs(3));
        assert_eq!(cache.get(&key("r", "short", &a)), None);
        cache.insert(key("r", "app", &a), "t1".into(), Duration::from_secs(60));
        cache.forget(&key("r", "app", &a), "stale");
        assert_eq!(cache.get(&key("r", "app", &a)).as_deref(), Some("t1"));
        cache.forget(&key("r", "app", &a), "t1");
        assert_eq!(cache.get(&key("r", "app", &a)), None);
    }

    #[test]
    fn challenges_read_like_oci_client() {
        let h = |s: &str| HeaderValue::from_str(s).expect("header");
        assert_eq!(Challenge::from_header(None), Challenge::None);
        assert_eq!(
            Challenge::from_header(Some(&h("Basic realm=\"Registry\""))),
            Challenge::Basic
        );
        assert_eq!(
            Challenge::from_header(Some(&h(
                "Bearer realm=\"https://auth.example/token\",service=\"reg\""
            ))),
            Challenge::Bearer {
                realm: "https://auth.example/token".into(),
                service: Some("reg".into())
            }
        );
    }
}
