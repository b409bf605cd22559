//! The evaluation's time for host calls: every step that calls the host (lookups, pull
//! secrets, Node lists, platform manifests) spends from one budget, so it lives below them all.

use std::cell::Cell;
use std::time::Duration;

use crate::failure::{Failure, FailureKind};
use crate::host::{Host, HostError};

/// The time an evaluation may spend on host calls, measured with the host's clock. A host
/// call cannot be interrupted, so the budget decides whether to make the *next* one: not when
/// what is left is less than the slowest lookup of this request took, since that one would
/// most likely overrun.
///
/// The clock is read once per host call, after it: under a real host every reading is a WASI
/// call, and lookups are the policy's most frequent path. A call is taken to start at the
/// previous reading, so the guest's own work between two calls (microseconds, against a
/// budget in milliseconds) counts towards the later call.
#[derive(Debug, Clone)]
pub struct Budget {
    deadline: Duration,
    limit: Duration,
    slowest: Cell<Duration>,
    /// The latest clock reading.
    last: Cell<Duration>,
}

impl Budget {
    /// A budget of `limit` starting now.
    pub fn start(host: &impl Host, limit: Duration) -> Self {
        let now = host.now();
        Budget {
            deadline: now + limit,
            limit,
            slowest: Cell::new(Duration::ZERO),
            last: Cell::new(now),
        }
    }

    /// What is left of the budget.
    pub fn remaining(&self, host: &impl Host) -> Duration {
        self.remaining_at(self.read(host))
    }

    /// Reads the clock after host calls the budget does not measure (pull secrets, Node
    /// lists), so that the next lookup is not charged for them.
    pub fn resume(&self, host: &impl Host) {
        self.read(host);
    }

    fn read(&self, host: &impl Host) -> Duration {
        let now = host.now();
        self.last.set(now);
        now
    }

    fn remaining_at(&self, now: Duration) -> Duration {
        self.deadline.saturating_sub(now)
    }

    /// Makes one host call if another may start (time is left, and at least as much as the
    /// slowest call so far took), remembering how long it took; otherwise the failure of a
    /// check the budget left no time for.
    pub fn call<T>(
        &self,
        host: &impl Host,
        call: impl FnOnce() -> Result<T, HostError>,
    ) -> Result<T, Failure> {
        let started = self.last.get();
        let remaining = self.remaining_at(started);
        if remaining.is_zero() || remaining < self.slowest.get() {
            return Err(self.not_checked_at(started));
        }
        let result = call();
        self.record(self.read(host).saturating_sub(started));
        result.map_err(|error| error.failure())
    }

    /// Runs one host call, remembering how long it took.
    pub fn measure<T>(&self, host: &impl Host, call: impl FnOnce() -> T) -> T {
        let started = self.last.get();
        let result = call();
        self.record(self.read(host).saturating_sub(started));
        result
    }

    fn record(&self, took: Duration) {
        self.slowest.set(self.slowest.get().max(took));
    }

    /// The failure of a check the budget left no time for.
    pub fn not_checked(&self, host: &impl Host) -> Failure {
        self.not_checked_at(self.read(host))
    }

    fn not_checked_at(&self, now: Duration) -> Failure {
        let limit = self.limit.as_millis();
        let detail = if self.remaining_at(now).is_zero() {
            format!("not checked in time: the policy's time budget of {limit} ms (timeBudgetMs) was spent on earlier lookups")
        } else {
            format!(
                "not checked in time: less than the slowest lookup ({} ms) was left of timeBudgetMs ({limit} ms)",
                self.slowest.get().as_millis()
            )
        };
        Failure::new(FailureKind::Unreachable, detail)
    }
}
