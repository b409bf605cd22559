//! How many lookups wait on a registry, and which ones are not made at all: the broker's
//! defence against a registry that is slow or silent, kept per registry and per namespace.
//!
//! A registry has `max_per_registry` slots; one namespace holds at most `max_per_namespace` of
//! them (half, rounded up, unless configured). That is a cap, not fair queueing: it needs no
//! queue and no scheduler, and it bounds what one tenant can do, which is the point. A
//! namespace whose repository went silent fills its own share and waits there; the other
//! namespaces' lookups of the same registry still find the rest free. (Fair queueing would
//! also share out slots that are free for the moment, but the lookups this protects are short,
//! and a cap keeps the worst case obvious: it takes several namespaces at once to fill a
//! registry.)
//!
//! "Silent" (a registry that let an attempt run out its own time-out: its lookups are answered
//! at once for `silent_backoff` instead of waiting again) is kept per namespace and registry:
//! one namespace's silent repository, or a registry that ignores that namespace's credentials,
//! must not make another namespace's lookups of the same registry fail fast.
//!
//! Two limits per namespace span registries, since a Pod author names as many registries as
//! they like: a namespace holds at most `max_concurrent_per_namespace` of the broker's
//! `max_concurrent` slots (half by default), so lookups of many registries, each within its
//! registry's share, still leave the other namespaces slots; and once `max_silent_per_namespace`
//! registries are silent for a namespace, its lookups of registries that have not answered it
//! (while followed) are answered at once too. Silence is keyed by registry name, so without
//! that cap a tenant rotating made-up host names would find every one of them new, each costing
//! a full time-out; with it, a namespace's silent registries cost at most that many time-outs
//! per back-off period, and registries that answered it are still asked.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant as Deadline;

/// The most namespaces followed per registry: namespaces are few (each opted in), but a
/// bound keeps the table's size independent of who asks.
const MAX_TENANTS: usize = 1024;
/// The most namespaces followed in the whole broker, for the same reason.
const MAX_NAMESPACES: usize = 4096;

/// The limits the gates enforce.
#[derive(Debug, Clone, Copy)]
pub struct GateLimits {
    /// Lookups in flight in the whole broker.
    pub max_concurrent: usize,
    /// Lookups in flight to one registry.
    pub max_per_registry: usize,
    /// Lookups in flight to one registry for one namespace.
    pub max_per_namespace: usize,
    /// Lookups in flight in the whole broker for one namespace.
    pub max_concurrent_per_namespace: usize,
    /// Registries silent for one namespace at once before its lookups of registries that have
    /// not answered it are refused at once.
    pub max_silent_per_namespace: usize,
    /// Registries followed at once.
    pub max_registries: usize,
}

/// Why a lookup was not let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// `max_registries` registries are followed and every one is busy.
    Registries,
    /// This namespace's lookups of this registry went silent recently.
    Silent,
    /// This namespace has `max_silent_per_namespace` registries silent, and this registry has
    /// not answered it.
    SilentRegistries,
    /// The slots stayed full until the lookup's deadline.
    Lookups,
}

/// One namespace's state at one registry.
struct Tenant {
    slots: Arc<Semaphore>,
    silent_until: Mutex<Option<Instant>>,
    /// A lookup of this namespace was answered without the registry going silent.
    answered: AtomicBool,
}

impl Tenant {
    fn silent(&self) -> bool {
        self.silent_until
            .lock()
            .ok()
            .and_then(|until| *until)
            .is_some_and(|until| Instant::now() < until)
    }
}

/// One namespace's state across registries.
struct Namespace {
    slots: Arc<Semaphore>,
    /// The registries (by key) silent for it, until when.
    silent: Mutex<HashMap<String, Instant>>,
}

impl Namespace {
    /// How many registries are silent for it now (those whose back-off ended forgotten).
    fn silent_registries(&self) -> usize {
        let now = Instant::now();
        self.silent.lock().map_or(0, |mut silent| {
            silent.retain(|_, until| now < *until);
            silent.len()
        })
    }
}

/// One registry's state.
struct Gate {
    slots: Arc<Semaphore>,
    tenants: Mutex<HashMap<String, Arc<Tenant>>>,
}

impl Gate {
    fn any_silent(&self) -> bool {
        self.tenants
            .lock()
            .map(|tenants| tenants.values().any(|t| t.silent()))
            .unwrap_or(false)
    }
}

/// A lookup's slots (its namespace's at the registry, its namespace's in the broker, the
/// registry's, the broker's), held until it is answered.
pub struct Pass {
    tenant: Arc<Tenant>,
    namespace: Arc<Namespace>,
    registry: String,
    _permits: [OwnedSemaphorePermit; 4],
}

impl Pass {
    /// The registry let this lookup's attempt run out its time-out: this namespace's lookups of
    /// it fail at once for `backoff`, and it counts among the namespace's silent registries.
    pub fn went_silent(&self, backoff: Duration) {
        let until = Instant::now() + backoff;
        if let Ok(mut silent_until) = self.tenant.silent_until.lock() {
            *silent_until = Some(until);
        }
        if let Ok(mut silent) = self.namespace.silent.lock() {
            silent.insert(self.registry.clone(), until);
        }
    }

    /// The registry answered this lookup without going silent: it stays asked for this
    /// namespace even when the namespace has too many silent registries.
    pub fn answered(&self) {
        self.tenant.answered.store(true, Ordering::Relaxed);
    }
}

/// The gates of every registry followed.
pub struct Gates {
    limits: GateLimits,
    total: Arc<Semaphore>,
    registries: Mutex<HashMap<String, Arc<Gate>>>,
    namespaces: Mutex<HashMap<String, Arc<Namespace>>>,
}

impl Gates {
    /// Gates with these limits (each at least 1).
    pub fn new(limits: GateLimits) -> Self {
        let limits = GateLimits {
            max_concurrent: limits.max_concurrent.max(1),
            max_per_registry: limits.max_per_registry.max(1),
            max_per_namespace: limits
                .max_per_namespace
                .clamp(1, limits.max_per_registry.max(1)),
            max_concurrent_per_namespace: limits
                .max_concurrent_per_namespace
                .clamp(1, limits.max_concurrent.max(1)),
            max_silent_per_namespace: limits.max_silent_per_namespace.max(1),
            max_registries: limits.max_registries.max(1),
        };
        Gates {
            total: Arc::new(Semaphore::new(limits.max_concurrent)),
            registries: Mutex::default(),
            namespaces: Mutex::default(),
            limits,
        }
    }

    /// Lets a lookup of `namespace` at `registry` through, waiting for its slots at most until
    /// `deadline`.
    pub async fn admit(
        &self,
        registry: &str,
        namespace: &str,
        deadline: Deadline,
    ) -> Result<Pass, Closed> {
        let key = broker_reference::registry_key(registry);
        let gate = self.gate(&key).ok_or(Closed::Registries)?;
        let tenant = self.tenant(&gate, namespace).ok_or(Closed::Registries)?;
        if tenant.silent() {
            return Err(Closed::Silent);
        }
        let spent = self.namespace(namespace).ok_or(Closed::Lookups)?;
        if !tenant.answered.load(Ordering::Relaxed)
            && spent.silent_registries() >= self.limits.max_silent_per_namespace
        {
            return Err(Closed::SilentRegistries);
        }
        let acquire = |semaphore: &Arc<Semaphore>| {
            tokio::time::timeout_at(deadline, semaphore.clone().acquire_owned())
        };
        // the namespace's shares first: a namespace at its cap waits without taking a
        // registry's or the broker's slot another namespace could use
        let own = acquire(&tenant.slots).await.ok().and_then(Result::ok);
        let own = own.ok_or(Closed::Lookups)?;
        let across = acquire(&spent.slots).await.ok().and_then(Result::ok);
        let across = across.ok_or(Closed::Lookups)?;
        let registry = acquire(&gate.slots).await.ok().and_then(Result::ok);
        let registry = registry.ok_or(Closed::Lookups)?;
        let total = acquire(&self.total).await.ok().and_then(Result::ok);
        let total = total.ok_or(Closed::Lookups)?;
        Ok(Pass {
            tenant,
            namespace: spent,
            registry: key,
            _permits: [own, across, registry, total],
        })
    }

    /// The state of `namespace` across registries, made on first use; `None` when
    /// [`MAX_NAMESPACES`] are followed and all are busy or silent somewhere.
    fn namespace(&self, namespace: &str) -> Option<Arc<Namespace>> {
        let mut map = self.namespaces.lock().ok()?;
        let share = self.limits.max_concurrent_per_namespace;
        if map.len() >= MAX_NAMESPACES && !map.contains_key(namespace) {
            map.retain(|_, n| n.slots.available_permits() < share || n.silent_registries() > 0);
            if map.len() >= MAX_NAMESPACES {
                return None;
            }
        }
        Some(
            map.entry(namespace.to_owned())
                .or_insert_with(|| {
                    Arc::new(Namespace {
                        slots: Arc::new(Semaphore::new(share)),
                        silent: Mutex::default(),
                    })
                })
                .clone(),
        )
    }

    /// The gate of the registry `key` (its [`broker_reference::registry_key`]), made on first
    /// use; `None` when `max_registries` registries are followed and all are busy.
    fn gate(&self, key: &str) -> Option<Arc<Gate>> {
        let mut map = self.registries.lock().ok()?;
        if map.len() >= self.limits.max_registries && !map.contains_key(key) {
            let max = self.limits.max_per_registry;
            let busy = |g: &Arc<Gate>| g.slots.available_permits() < max;
            // forget idle registries that are not silent, then idle silent ones (names a Pod
            // author made up must not lock every other registry out); busy ones keep their limit
            map.retain(|_, g| busy(g) || g.any_silent());
            if map.len() >= self.limits.max_registries {
                map.retain(|_, g| busy(g));
            }
            if map.len() >= self.limits.max_registries {
                return None;
            }
        }
        Some(
            map.entry(key.to_owned())
                .or_insert_with(|| {
                    Arc::new(Gate {
                        slots: Arc::new(Semaphore::new(self.limits.max_per_registry)),
                        tenants: Mutex::default(),
                    })
                })
                .clone(),
        )
    }

    /// The state of `namespace` at `gate`, made on first use; `None` when [`MAX_TENANTS`] are
    /// followed there and all are busy.
    fn tenant(&self, gate: &Gate, namespace: &str) -> Option<Arc<Tenant>> {
        let mut map = gate.tenants.lock().ok()?;
        let share = self.limits.max_per_namespace;
        if map.len() >= MAX_TENANTS && !map.contains_key(namespace) {
            let busy = |t: &Arc<Tenant>| t.slots.available_permits() < share;
            map.retain(|_, t| busy(t) || t.silent());
            if map.len() >= MAX_TENANTS {
                map.retain(|_, t| busy(t));
            }
            if map.len() >= MAX_TENANTS {
                return None;
            }
        }
        Some(
            map.entry(namespace.to_owned())
                .or_insert_with(|| {
                    Arc::new(Tenant {
                        slots: Arc::new(Semaphore::new(share)),
                        silent_until: Mutex::new(None),
                        answered: AtomicBool::new(false),
                    })
                })
                .clone(),
        )
    }
}

/// The default share of one namespace: half the slots (a registry's, or the broker's),
/// rounded up.
pub fn default_share(slots: usize) -> usize {
    slots.max(1).div_ceil(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(per_registry: usize) -> Gates {
        Gates::new(GateLimits {
            max_concurrent: 64,
            max_per_registry: per_registry,
            max_per_namespace: default_share(per_registry),
            max_concurrent_per_namespace: 64,
            max_silent_per_namespace: 64,
            max_registries: 16,
        })
    }

    fn soon() -> Deadline {
        Deadline::now() + Duration::from_millis(50)
    }

    #[tokio::test]
    async fn one_namespaces_silence_leaves_another_namespace_asking() {
        let g = gates(8);
        let pass = g.admit("r.example", "team-b", soon()).await.expect("first");
        pass.went_silent(Duration::from_secs(60));
        drop(pass);
        assert_eq!(
            g.admit("r.example", "team-b", soon()).await.err(),
            Some(Closed::Silent)
        );
        // the same registry, spelt another way, for team-b: still silent
        assert_eq!(
            g.admit("R.Example:443", "team-b", soon()).await.err(),
            Some(Closed::Silent)
        );
        assert!(g.admit("r.example", "team-a", soon()).await.is_ok());
        assert!(g.admit("other.example", "team-b", soon()).await.is_ok());
    }

    #[tokio::test]
    async fn one_namespace_holds_at_most_its_share_of_a_registry() {
        let g = gates(8);
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(g.admit("r.example", "team-b", soon()).await.expect("share"));
        }
        assert_eq!(
            g.admit("r.example", "team-b", soon()).await.err(),
            Some(Closed::Lookups),
            "a fifth lookup of team-b waits past its deadline"
        );
        for _ in 0..4 {
            held.push(
                g.admit("r.example", "team-a", soon())
                    .await
                    .expect("the rest"),
            );
        }
        // the registry is full now, whoever asks
        assert_eq!(
            g.admit("r.example", "team-c", soon()).await.err(),
            Some(Closed::Lookups)
        );
        held.pop();
        assert!(g.admit("r.example", "team-c", soon()).await.is_ok());
    }

    #[tokio::test]
    async fn one_namespace_holds_at_most_its_share_of_the_broker_across_registries() {
        let g = Gates::new(GateLimits {
            max_concurrent: 8,
            max_per_registry: 8,
            max_per_namespace: 4,
            max_concurrent_per_namespace: default_share(8),
            max_silent_per_namespace: 64,
            max_registries: 64,
        });
        let mut held = Vec::new();
        // one lookup per made-up registry: each within its registry's share
        for i in 0..4 {
            let registry = format!("r{i}.example");
            held.push(g.admit(&registry, "team-b", soon()).await.expect("share"));
        }
        assert_eq!(
            g.admit("r4.example", "team-b", soon()).await.err(),
            Some(Closed::Lookups),
            "a fifth registry of team-b waits past its deadline"
        );
        for i in 0..4 {
            let registry = format!("r{i}.example");
            held.push(
                g.admit(&registry, "team-a", soon())
                    .await
                    .expect("the rest"),
            );
        }
        assert_eq!(
            g.admit("other.example", "team-c", soon()).await.err(),
            Some(Closed::Lookups),
            "the broker is full now, whoever asks"
        );
        held.remove(0);
        assert!(g.admit("other.example", "team-c", soon()).await.is_ok());
    }

    #[tokio::test]
    async fn rotating_host_names_are_answered_at_once_past_the_silent_cap() {
        let g = Gates::new(GateLimits {
            max_silent_per_namespace: 2,
            ..gates(8).limits
        });
        let answered = g
            .admit("known.example", "team-b", soon())
            .await
            .expect("known");
        answered.answered();
        drop(answered);
        for registry in ["made-up-1.example", "made-up-2.example"] {
            let pass = g.admit(registry, "team-b", soon()).await.expect("new");
            pass.went_silent(Duration::from_secs(60));
        }
        // a third made-up name is refused before it can cost a time-out, as is any registry
        // that has not answered team-b
        for registry in ["made-up-3.example", "Made-Up-4.example:443"] {
            assert_eq!(
                g.admit(registry, "team-b", soon()).await.err(),
                Some(Closed::SilentRegistries),
                "{registry}"
            );
        }
        assert_eq!(
            g.admit("made-up-1.example", "team-b", soon()).await.err(),
            Some(Closed::Silent)
        );
        // a registry that answered team-b is still asked, and other namespaces are untouched
        assert!(g.admit("known.example", "team-b", soon()).await.is_ok());
        assert!(g.admit("made-up-3.example", "team-a", soon()).await.is_ok());
    }

    #[tokio::test]
    async fn the_silent_cap_counts_only_registries_still_in_back_off() {
        let g = Gates::new(GateLimits {
            max_silent_per_namespace: 1,
            ..gates(8).limits
        });
        let pass = g
            .admit("made-up-1.example", "team-b", soon())
            .await
            .expect("new");
        // a back-off that is already over
        pass.went_silent(Duration::ZERO);
        drop(pass);
        assert!(g.admit("made-up-2.example", "team-b", soon()).await.is_ok());
        let pass = g
            .admit("made-up-3.example", "team-b", soon())
            .await
            .expect("new");
        pass.went_silent(Duration::from_secs(60));
        assert_eq!(
            g.admit("made-up-4.example", "team-b", soon()).await.err(),
            Some(Closed::SilentRegistries)
        );
    }

    #[test]
    fn a_share_is_half_rounded_up_and_never_zero() {
        assert_eq!(default_share(8), 4);
        assert_eq!(default_share(3), 2);
        assert_eq!(default_share(1), 1);
        assert_eq!(default_share(0), 1);
    }
}
