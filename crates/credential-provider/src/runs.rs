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
use std::sync::atomic::{AtomicU64, Ordering};
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

/// One lock per key: the run of a key in flight, which the other lookups of the key wait for
/// and whose answer they take, as the kubelet's single flight gives it (so even an answer that
/// is not cached serves every lookup that waited for it).
pub(crate) struct Flights<T> {
    keys: Mutex<HashMap<String, Arc<Flight<T>>>>,
}

impl<T> Default for Flights<T> {
    fn default() -> Self {
        Flights {
            keys: Mutex::default(),
        }
    }
}

/// The runs of one key: how many ended, and the last one's answer.
pub(crate) struct Flight<T> {
    ended: AtomicU64,
    last: Arc<tokio::sync::Mutex<Option<T>>>,
}

impl<T> Default for Flight<T> {
    fn default() -> Self {
        Flight {
            ended: AtomicU64::new(0),
            last: Arc::new(tokio::sync::Mutex::new(None)),
        }
    }
}

/// A key's lock, held: the caller's turn to run, or the answer of the run it waited for.
pub(crate) enum Turn<T> {
    /// A run ended while this lookup waited: its answer.
    Answered(T),
    /// This lookup's turn: its run's answer goes to [`Held::ended`].
    Run(Held<T>),
}

/// The lock of a key, held by the lookup whose turn it is.
pub(crate) struct Held<T> {
    flight: Arc<Flight<T>>,
    guard: OwnedMutexGuard<Option<T>>,
}

impl<T: Clone> Held<T> {
    /// The run ended with `answer`, which the lookups waiting now are given.
    pub(crate) fn ended(mut self, answer: T) {
        *self.guard = Some(answer);
        self.flight.ended.fetch_add(1, Ordering::SeqCst);
    }
}

impl<T: Clone> Flights<T> {
    /// The key's turn, waited for until `deadline`; `None` when the run in flight outlived it.
    pub(crate) async fn enter(&self, key: &str, deadline: Deadline) -> Option<Turn<T>> {
        let flight = {
            let mut map = self.keys.lock().ok()?;
            if map.len() >= MAX_FOLLOWED && !map.contains_key(key) {
                // a flight only the map holds has no run and no waiter
                map.retain(|_, flight| Arc::strong_count(flight) > 1);
            }
            map.entry(key.to_owned()).or_default().clone()
        };
        let seen = flight.ended.load(Ordering::SeqCst);
        let mut guard = tokio::time::timeout_at(deadline, flight.last.clone().lock_owned())
            .await
            .ok()?;
        if flight.ended.load(Ordering::SeqCst) != seen {
            if let Some(answer) = guard.as_ref() {
                return Some(Turn::Answered(answer.clone()));
            }
        }
        // the last answer was for the lookups that waited for it (one not to be cached, maybe)
        *guard = None;
        Some(Turn::Run(Held { flight, guard }))
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
    async fn one_key_in_flight_leaves_the_other_keys_free_and_its_waiters_get_its_answer() {
        let flights = Flights::<u32>::default();
        let Some(Turn::Run(held)) = flights.enter("a", soon()).await else {
            panic!("a free key is the caller's turn");
        };
        assert!(flights.enter("a", soon()).await.is_none(), "a waits");
        assert!(matches!(
            flights.enter("b", soon()).await,
            Some(Turn::Run(_))
        ));
        let waiter = flights.enter("a", Deadline::now() + Duration::from_secs(5));
        tokio::pin!(waiter);
        assert!(
            futures_poll_once(&mut waiter).await.is_none(),
            "still waiting"
        );
        held.ended(7);
        assert!(matches!(waiter.await, Some(Turn::Answered(7))));
        // a lookup that comes after the run ended runs again
        assert!(matches!(
            flights.enter("a", soon()).await,
            Some(Turn::Run(_))
        ));
    }

    /// Polls `future` once: its output if it is ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(
        future: &mut F,
    ) -> Option<F::Output> {
        tokio::select! {
            biased;
            output = future => Some(output),
            () = std::future::ready(()) => None,
        }
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
