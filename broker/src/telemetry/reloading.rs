//! A value read from a mounted Secret and read again while the broker runs (the sealing keys,
//! the caller credentials, the TLS certificate): the kubelet updates a mounted Secret in place,
//! so the value is read again when it is older than its period. A reading that fails (a mount
//! caught mid-update, a file that is no longer valid) keeps the value held, and is loud
//! (`Metrics::reloaded`: a warning naming the file, a counted failure, `/readyz` false past
//! the grace).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::telemetry::metrics::{Metrics, Reloaded};

/// How old a value may be before it is read again by default: well under the kubelet's sync
/// period for mounted Secrets (about a minute).
pub const RELOAD_AFTER: Duration = Duration::from_secs(10);

/// A value, when it was read, and how it is read again.
pub struct Reloading<T> {
    what: Reloaded,
    held: Mutex<(Instant, Arc<T>)>,
    every: Duration,
    metrics: Arc<Metrics>,
}

impl<T> Reloading<T> {
    /// `value`, just read, counted as `what`; read again every [`RELOAD_AFTER`].
    pub fn new(what: Reloaded, value: T) -> Self {
        Reloading {
            what,
            held: Mutex::new((Instant::now(), Arc::new(value))),
            every: RELOAD_AFTER,
            metrics: Arc::default(),
        }
    }

    /// Read again every `every`, its failed readings counted in `metrics`.
    pub fn every(mut self, every: Duration, metrics: Arc<Metrics>) -> Self {
        self.every = every;
        self.metrics = metrics;
        self
    }

    /// The value held, read with `read` first when it is older than the period (`None` only
    /// when a panic poisoned the lock).
    pub fn current<E: std::fmt::Display>(
        &self,
        read: impl FnOnce() -> Result<T, E>,
    ) -> Option<Arc<T>> {
        let mut held = self.held.lock().ok()?;
        if held.0.elapsed() >= self.every {
            if let Some(value) = self.metrics.reloaded(self.what, read()) {
                held.1 = Arc::new(value);
            }
            held.0 = Instant::now();
        }
        Some(held.1.clone())
    }

    /// Makes the value `by` older, so that a test need not wait for its period.
    #[cfg(test)]
    pub fn age_by(&self, by: Duration) {
        if let Ok(mut held) = self.held.lock() {
            held.0 = held.0.checked_sub(by).unwrap_or(held.0);
        }
    }
}
