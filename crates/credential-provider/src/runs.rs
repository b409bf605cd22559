//! When a plugin may run, so that no tenant slows another through the plugins and no lookup
//! waits twice for a plugin that does not answer:
//!
//! - [`Flights`]: one run in flight per cache key; other lookups of the key wait for it and
//!   read its answer from the cache (the kubelet's single flight), while runs of other keys,
//!   another namespace's among them, go ahead;
//! - [`Shares`]: at most `total` runs at once, one namespace at most `per_namespace` of them
//!   (a cap, as the broker's registry gates are: it bounds what one tenant can take);
//! - [`Silence`]: after a run that failed or outlived its lookup, the lookups of that key and
//!   namespace are answered at once for a while instead of waiting again, as a silent
//!   registry is (the stock policy server asks HEAD then GET: the GET must not wait again).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedMutexGuard, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant as Deadline;

/// The most keys, namespaces or silences followed at once: past it, idle ones are forgotten.
const MAX_FOLLOWED: usize = 4096;

/// How many plugin runs may be in flight, and for how long a key stays silent.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// Runs in flight, every plugin and namespace together.
    pub total: usize,
    /// Runs in flight for one namespace.
    pub per_namespace: usize,
    /// How long a key is answered at once after a run failed or outlived its lookup.
    pub silence: Duration,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            total: 8,
            per_namespace: default_share(8),
            silence: Duration::from_secs(30),
        }
    }
}

/// The default share of one namespace: half the runs, rounded up.
pub fn default_share(total: usize) -> usize {
    total.max(1).div_ceil(2)
}

/// The run slots: the whole's and each namespace's.
pub(crate) struct Shares {
    per_namespace: usize,
    total: Arc<Semaphore>,
    namespaces: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// The slots one run holds.
pub(crate) struct Slots {
    _own: OwnedSemaphorePermit,
    _total: Option<OwnedSemaphorePermit>,
}

impl Shares {
    pub(crate) fn new(limits: RunLimits) -> Self {
        let total = limits.total.max(1);
        Shares {
            per_namespace: limits.per_namespace.clamp(1, total),
            total: Arc::new(Semaphore::new(total)),
            namespaces: Mutex::default(),
        }
    }

    /// The namespace's slot, waited for until `deadline`; `None` when none came free.
    pub(crate) async fn namespace(&self, namespace: &str, deadline: Deadline) -> Option<Slots> {
        let semaphore = {
            let mut map = self.namespaces.lock().ok()?;
            if map.len() >= MAX_FOLLOWED && !map.contains_key(namespace) {
                let share = self.per_namespace;
                map.retain(|_, s| s.available_permits() < share);
            }
            map.entry(namespace.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_namespace)))
                .clone()
        };
        let own = tokio::time::timeout_at(deadline, semaphore.acquire_owned()).await;
        Some(Slots {
            _own: own.ok()?.ok()?,
            _total: None,
        })
    }

    /// Adds one of the whole's slots to `slots`, waited for until `deadline`.
    pub(crate) async fn total(&self, slots: Slots, deadline: Deadline) -> Option<Slots> {
        let total = tokio::time::timeout_at(deadline, self.total.clone().acquire_owned()).await;
        Some(Slots {
            _total: Some(total.ok()?.ok()?),
            ..slots
        })
    }
}

/// One lock per key: the run of a key in flight, which the other lookups of the key wait for.
#[derive(Default)]
pub(crate) struct Flights {
    keys: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Flights {
    /// The key's lock, waited for until `deadline`; `None` when the run in flight outlived it.
    pub(crate) async fn enter(&self, key: &str, deadline: Deadline) -> Option<OwnedMutexGuard<()>> {
        let lock = {
            let mut map = self.keys.lock().ok()?;
            if map.len() >= MAX_FOLLOWED && !map.contains_key(key) {
                // a lock only the map holds has no run and no waiter
                map.retain(|_, lock| Arc::strong_count(lock) > 1);
            }
            map.entry(key.to_owned()).or_default().clone()
        };
        tokio::time::timeout_at(deadline, lock.lock_owned())
            .await
            .ok()
    }
}

/// The keys silenced, with when each speaks again.
#[derive(Default)]
pub(crate) struct Silence {
    until: Mutex<HashMap<String, Instant>>,
}

impl Silence {
    /// Until when `key` is silent, if it is.
    pub(crate) fn until(&self, key: &str) -> Option<Instant> {
        let map = self.until.lock().ok()?;
        map.get(key)
            .copied()
            .filter(|until| Instant::now() < *until)
    }

    /// Silences `key` for `length`. With [`MAX_FOLLOWED`] keys silent, none is added: a
    /// hanging plugin then costs each lookup its time again, within its namespace's share.
    pub(crate) fn silence(&self, key: String, length: Duration) {
        let Ok(mut map) = self.until.lock() else {
            return;
        };
        let now = Instant::now();
        if map.len() >= MAX_FOLLOWED {
            map.retain(|_, until| now < *until);
        }
        if map.len() < MAX_FOLLOWED || map.contains_key(&key) {
            map.insert(key, now + length);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soon() -> Deadline {
        Deadline::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn a_namespace_holds_at_most_its_share_and_the_others_find_the_rest() {
        let shares = Shares::new(RunLimits {
            total: 4,
            per_namespace: 2,
            ..RunLimits::default()
        });
        let mut held = Vec::new();
        for _ in 0..2 {
            let own = shares.namespace("slow", soon()).await.expect("its share");
            held.push(shares.total(own, soon()).await.expect("a slot"));
        }
        assert!(
            shares.namespace("slow", soon()).await.is_none(),
            "a third run of one namespace waits past its deadline"
        );
        for _ in 0..2 {
            let own = shares.namespace("fast", soon()).await.expect("its share");
            held.push(shares.total(own, soon()).await.expect("the rest"));
        }
        let own = shares.namespace("third", soon()).await.expect("its share");
        assert!(shares.total(own, soon()).await.is_none(), "all runs taken");
        held.pop();
        let own = shares.namespace("third", soon()).await.expect("its share");
        assert!(shares.total(own, soon()).await.is_some());
    }

    #[tokio::test]
    async fn one_key_in_flight_leaves_the_other_keys_free() {
        let flights = Flights::default();
        let held = flights.enter("a", soon()).await.expect("free");
        assert!(flights.enter("a", soon()).await.is_none(), "a waits");
        assert!(flights.enter("b", soon()).await.is_some(), "b does not");
        drop(held);
        assert!(flights.enter("a", soon()).await.is_some());
    }

    #[test]
    fn a_silence_lasts_its_length_for_its_key_only() {
        let silence = Silence::default();
        silence.silence("a".into(), Duration::from_secs(60));
        assert!(silence.until("a").is_some());
        assert!(silence.until("b").is_none());
        silence.silence("b".into(), Duration::ZERO);
        assert!(silence.until("b").is_none(), "a zero silence is none");
    }

    #[test]
    fn a_share_is_half_rounded_up_and_never_zero() {
        assert_eq!(default_share(8), 4);
        assert_eq!(default_share(3), 2);
        assert_eq!(default_share(0), 1);
    }
}
