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
/// The longest a token is kept, whatever `expires_in` says: a registry chooses that number, and
/// one near `u64::MAX` must neither overflow the clock nor pin a token for ever.
const MAX_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

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
/// The most bytes of tokens kept at once: registries, repositories and credentials come from
/// Pod authors, so the cache is bounded by what it holds, not only by its count.
const MAX_TOKEN_BYTES: usize = 4 << 20;
/// A token longer than this is used but not kept (real registries' are a few KiB).
const MAX_KEPT_TOKEN: usize = 16 << 10;

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
    /// The token and how long it may be kept (at most [`MAX_TOKEN_TTL`]), `None` when the
    /// answer has none.
    pub fn into_token(self) -> Option<(String, Duration)> {
        let ttl =
            Duration::from_secs(self.expires_in.unwrap_or(DEFAULT_TOKEN_SECS)).min(MAX_TOKEN_TTL);
        let token = self.token.or(self.access_token)?;
        (!token.is_empty()).then_some((token, ttl))
    }
}

/// Bearer tokens of one process, by [`TokenKey`]; expired ones are never returned.
#[derive(Default)]
pub struct TokenCache {
    tokens: Mutex<Tokens>,
}

/// The cached tokens and the bytes they hold.
#[derive(Default)]
struct Tokens {
    by_key: HashMap<TokenKey, (String, Instant)>,
    bytes: usize,
}

impl Tokens {
    fn size(key: &TokenKey, token: &str) -> usize {
        key.registry.len() + key.scope.len() + token.len()
    }

    fn remove(&mut self, key: &TokenKey) {
        if let Some((token, _)) = self.by_key.remove(key) {
            self.bytes = self.bytes.saturating_sub(Self::size(key, &token));
        }
    }

    fn retain_live(&mut self, now: Instant) {
        self.by_key.retain(|_, (_, expires)| *expires > now);
        self.bytes = self.by_key.iter().map(|(k, (t, _))| Self::size(k, t)).sum();
    }
}

impl TokenCache {
    /// The live token for exactly this key.
    pub fn get(&self, key: &TokenKey) -> Option<String> {
        let tokens = self.tokens.lock().ok()?;
        let (token, expires) = tokens.by_key.get(key)?;
        (Instant::now() < *expires).then(|| token.clone())
    }

    /// Keep `token` for `key` for `ttl` (less a safety margin, at most [`MAX_TOKEN_TTL`]),
    /// within the cache's bounds.
    pub fn insert(&self, key: TokenKey, token: String, ttl: Duration) {
        if token.len() > MAX_KEPT_TOKEN {
            return;
        }
        let now = Instant::now();
        let expires = now + ttl.min(MAX_TOKEN_TTL).saturating_sub(EXPIRY_MARGIN);
        let size = Tokens::size(&key, &token);
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.remove(&key);
            if tokens.by_key.len() >= MAX_TOKENS || tokens.bytes + size > MAX_TOKEN_BYTES {
                tokens.retain_live(now);
                if tokens.by_key.len() >= MAX_TOKENS || tokens.bytes + size > MAX_TOKEN_BYTES {
                    *tokens = Tokens::default();
                }
            }
            tokens.bytes += size;
            tokens.by_key.insert(key, (token, expires));
        }
    }

    /// How many bytes the cache holds (its bound is `MAX_TOKEN_BYTES`).
    pub fn bytes(&self) -> usize {
        self.tokens.lock().map_or(0, |t| t.bytes)
    }

    /// Drop `token` for `key` after the registry refused it (a newer one is kept).
    pub fn forget(&self, key: &TokenKey, token: &str) {
        if let Ok(mut tokens) = self.tokens.lock() {
            if tokens.by_key.get(key).is_some_and(|(t, _)| t == token) {
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

    /// A registry's `expires_in` near `u64::MAX` is kept a day at most: no overflow of the
    /// clock (which panicked, resetting the connection), and the token is still used.
    #[test]
    fn a_huge_expires_in_is_clamped_never_a_panic() {
        let answer: TokenAnswer =
            serde_json::from_str(&format!(r#"{{"token": "t", "expires_in": {}}}"#, u64::MAX))
                .expect("an answer");
        let (token, ttl) = answer.into_token().expect("a token");
        assert_eq!(ttl, MAX_TOKEN_TTL);
        let cache = TokenCache::default();
        let a = RegistryAuth::Anonymous;
        cache.insert(key("r", "app", &a), token, Duration::from_secs(u64::MAX));
        assert_eq!(cache.get(&key("r", "app", &a)).as_deref(), Some("t"));
        cache.insert(key("r", "max", &a), "m".into(), Duration::MAX);
        assert_eq!(cache.get(&key("r", "max", &a)).as_deref(), Some("m"));
    }

    #[test]
    fn the_cache_is_bounded_by_bytes_and_keeps_no_giant_token() {
        let cache = TokenCache::default();
        let a = RegistryAuth::Basic("alice".into(), "pw-a".into());
        let ttl = Duration::from_secs(600);
        cache.insert(key("r", "giant", &a), "x".repeat(MAX_KEPT_TOKEN + 1), ttl);
        assert_eq!(cache.get(&key("r", "giant", &a)), None);
        assert_eq!(cache.bytes(), 0);
        let token = "t".repeat(MAX_KEPT_TOKEN);
        for i in 0..(2 * MAX_TOKEN_BYTES / MAX_KEPT_TOKEN) {
            cache.insert(key("r", &format!("app{i}"), &a), token.clone(), ttl);
            assert!(cache.bytes() <= MAX_TOKEN_BYTES, "{} bytes", cache.bytes());
        }
        cache.insert(key("r", "last", &a), "t1".into(), ttl);
        cache.insert(key("r", "last", &a), "t2".into(), ttl);
        assert_eq!(cache.get(&key("r", "last", &a)).as_deref(), Some("t2"));
        assert!(cache.bytes() <= MAX_TOKEN_BYTES);
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
