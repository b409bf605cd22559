//! ServiceAccount tokens reused as the kubelet reuses them: its token manager
//! (`pkg/kubelet/token`) keeps a token per ServiceAccount, audience and bound object and asks
//! for a new one only when the old one is past 80% of its life. A plugin with
//! `cacheType: Token` is keyed by its token's digest, so a fresh token per lookup would run it
//! for every lookup; with the token reused, two lookups of one ServiceAccount share a key and
//! its run. Concurrent lookups of one ServiceAccount wait for one TokenRequest.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most tokens kept at once: past it, tokens no lookup waits on are dropped.
const MAX_KEPT: usize = 4096;

/// Whose token: the ServiceAccount (namespace, name, UID) and the audience.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TokenKey {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID: a ServiceAccount deleted and made again under the name gets new tokens.
    pub uid: String,
    /// The audience the token is for.
    pub audience: String,
}

type Slot = Arc<tokio::sync::Mutex<Option<(String, Instant)>>>;

/// The tokens kept, each until it is to be renewed.
#[derive(Default)]
pub struct Tokens {
    kept: Mutex<HashMap<TokenKey, Slot>>,
}

impl Tokens {
    /// The token of `key`: the one kept, else one `mint` gives, kept for 80% of `lifetime`.
    pub async fn get<E, F>(&self, key: &TokenKey, lifetime: Duration, mint: F) -> Result<String, E>
    where
        F: Future<Output = Result<String, E>>,
    {
        let slot = self.slot(key);
        let mut kept = slot.lock().await;
        if let Some((token, until)) = kept.as_ref() {
            if Instant::now() < *until {
                return Ok(token.clone());
            }
        }
        let token = mint.await?;
        let reuse = lifetime.mul_f64(0.8);
        *kept = Instant::now()
            .checked_add(reuse)
            .map(|until| (token.clone(), until));
        Ok(token)
    }

    fn slot(&self, key: &TokenKey) -> Slot {
        let Ok(mut kept) = self.kept.lock() else {
            // a poisoned table: a slot of its own, kept by no one
            return Slot::default();
        };
        if kept.len() >= MAX_KEPT && !kept.contains_key(key) {
            kept.retain(|_, slot| Arc::strong_count(slot) > 1);
        }
        kept.entry(key.clone()).or_default().clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn key(name: &str) -> TokenKey {
        TokenKey {
            namespace: "team-a".into(),
            name: name.into(),
            uid: "uid-1".into(),
            audience: "registry.test".into(),
        }
    }

    #[tokio::test]
    async fn concurrent_lookups_of_one_account_share_one_token() {
        let tokens = Tokens::default();
        let minted = AtomicUsize::new(0);
        let mint = || async {
            let n = minted.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await;
            Ok::<_, ()>(format!("token-{n}"))
        };
        let life = Duration::from_secs(600);
        let builder = key("builder");
        let (a, b) = tokio::join!(
            tokens.get(&builder, life, mint()),
            tokens.get(&builder, life, mint())
        );
        assert_eq!(a, Ok("token-0".into()));
        assert_eq!(b, Ok("token-0".into()));
        let other = tokens.get(&key("other"), life, mint()).await;
        assert_eq!(
            other,
            Ok("token-1".into()),
            "another account, its own token"
        );
        assert_eq!(minted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_token_past_four_fifths_of_its_life_is_renewed_and_a_failure_kept_for_none() {
        let tokens = Tokens::default();
        let short = Duration::ZERO;
        let (b, c) = (key("b"), key("c"));
        let first = tokens.get(&b, short, async { Ok::<_, ()>("t1".into()) });
        assert_eq!(first.await, Ok("t1".to_owned()));
        let second = tokens.get(&b, short, async { Ok::<_, ()>("t2".into()) });
        assert_eq!(second.await, Ok("t2".to_owned()), "renewed");
        let failed = tokens.get(&c, short, async { Err::<String, _>("refused") });
        assert_eq!(failed.await, Err("refused"));
        let after = tokens.get(&c, short, async { Ok::<_, &str>("t3".into()) });
        assert_eq!(after.await, Ok("t3".to_owned()));
    }
}
