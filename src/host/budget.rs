//! The evaluation's time for host calls: every step that calls the host (lookups, pull
//! secrets, Node lists, platform manifests) spends from one budget, so it lives below them all.

use std::cell::Cell;
use std::time::Duration;

use crate::host::{Host, HostError};
use crate::vocabulary::failure::{Failure, FailureKind};

/// The time an evaluation may spend on host calls, measured with the host's clock. A host
/// call cannot be interrupted, so the budget decides whether to make the *next* one: not when
/// what is left is less than the slowest lookup of this request took, since that one would
/// most likely overrun.
///
/// The clock is read when it is needed, not around every call: under a real host every
/// reading is a WASI call through wasmtime's WASI layer, code that a fresh instance finds cold
/// (counted on the real policy-server under callgrind, in
/// bench/results/policy-server.md). A measured call ends at the next
/// reading, the one taken before the next call decides whether that call may start; so the
/// last call of a request is never timed, and a one-lookup Pod reads the clock once. A call is
/// taken to start at the latest reading, so the guest's own work between two calls
/// (microseconds, against a budget in milliseconds) counts towards one of them.
#[derive(Debug, Clone)]
pub struct Budget {
    deadline: Duration,
    limit: Duration,
    slowest: Cell<Duration>,
    /// The latest clock reading.
    last: Cell<Duration>,
    /// True while a measured call, started at `last`, has not been timed yet.
    open: Cell<bool>,
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
            open: Cell::new(false),
        }
    }

    /// What is left of the budget.
    pub fn remaining(&self, host: &impl Host) -> Duration {
        self.remaining_at(self.read(host))
    }

    /// Reads the clock after host calls the budget does not measure, made before any lookup
    /// (planning's pull secrets), so that the first lookup is not charged for them.
    pub fn resume(&self, host: &impl Host) {
        self.read(host);
    }

    /// Runs host calls the budget does not measure, made between lookups (Node lists), so that
    /// no lookup is charged for them: a lookup still being timed ends before them, and the next
    /// one starts after them. They still spend from the deadline.
    pub fn outside<T>(&self, host: &impl Host, calls: impl FnOnce() -> T) -> T {
        if self.open.get() {
            self.read(host);
        }
        let result = calls();
        self.read(host);
        result
    }

    /// Reads the clock, ending the measured call in flight, if any.
    fn read(&self, host: &impl Host) -> Duration {
        let now = host.now();
        if self.open.replace(false) {
            self.record(now.saturating_sub(self.last.get()));
        }
        self.last.set(now);
        now
    }

    /// The time now, read only when a measured call has run since the latest reading: else
    /// the latest reading is at most the guest's own work old.
    fn now(&self, host: &impl Host) -> Duration {
        if self.open.get() {
            self.read(host)
        } else {
            self.last.get()
        }
    }

    fn remaining_at(&self, now: Duration) -> Duration {
        self.deadline.saturating_sub(now)
    }

    /// Makes one host call if another may start (time is left, and at least as much as the
    /// slowest call so far took), timing it; otherwise the failure of a check the budget left
    /// no time for.
    pub fn call<T>(
        &self,
        host: &impl Host,
        call: impl FnOnce() -> Result<T, HostError>,
    ) -> Result<T, Failure> {
        self.call_explained(host, call, |error| error.failure())
    }

    /// As [`Budget::call`], with the host's error turned into a failure by `explain` (which
    /// knows what the call was, as the lookup broker's routes do).
    pub fn call_explained<T>(
        &self,
        host: &impl Host,
        call: impl FnOnce() -> Result<T, HostError>,
        explain: impl FnOnce(HostError) -> Failure,
    ) -> Result<T, Failure> {
        let now = self.now(host);
        let remaining = self.remaining_at(now);
        if remaining.is_zero() || remaining < self.slowest.get() {
            return Err(self.not_checked_at(now));
        }
        self.measure(host, call).map_err(explain)
    }

    /// Runs one host call, timing it.
    pub fn measure<T>(&self, host: &impl Host, call: impl FnOnce() -> T) -> T {
        // ends the call before this one, if it is still being timed
        self.now(host);
        let result = call();
        self.open.set(true);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{InMemoryHost, ListAllRequest};

    fn lookup(budget: &Budget, host: &InMemoryHost) -> Result<String, Failure> {
        budget.call(host, || host.manifest_digest("registry.example.com/app:1"))
    }

    fn list_nodes(host: &InMemoryHost) {
        let request = ListAllRequest {
            api_version: "v1".into(),
            kind: "Node".into(),
            label_selector: None,
            field_selector: None,
            field_masks: None,
        };
        let _ = host.list_resources_all(&request);
    }

    #[test]
    fn the_clock_is_read_once_at_the_start_and_once_before_each_later_lookup() {
        let host = InMemoryHost::new().with_latency(Duration::from_millis(10));
        let budget = Budget::start(&host, Duration::from_secs(1));
        let _ = lookup(&budget, &host);
        assert_eq!(host.clock_readings(), 1, "one lookup: the start only");
        for _ in 0..4 {
            let _ = lookup(&budget, &host);
        }
        assert_eq!(
            host.clock_readings(),
            5,
            "five lookups: the start, then one before each"
        );
    }

    #[test]
    fn a_lookup_is_timed_at_the_next_reading_and_calls_outside_the_budget_are_not_charged_to_it() {
        // 300 ms per call, 1000 ms in all: a lookup (0..300), a Node list outside the budget
        // (300..600), a second lookup (600..900) that may start since the slowest lookup took
        // 300 ms, not 600; then 100 ms are left, less than 300: the third is refused.
        let host = InMemoryHost::new().with_latency(Duration::from_millis(300));
        let budget = Budget::start(&host, Duration::from_secs(1));
        assert!(lookup(&budget, &host).is_err(), "manifest unknown");
        budget.outside(&host, || list_nodes(&host));
        let _ = lookup(&budget, &host);
        let refused = lookup(&budget, &host).expect_err("no time for a third");
        assert_eq!(
            refused.detail,
            "not checked in time: less than the slowest lookup (300 ms) was left of timeBudgetMs (1000 ms)"
        );
        assert_eq!(host.digest_calls().len(), 2, "{:?}", host.calls());
        // the start, before and after the list, before the refused lookup
        assert_eq!(host.clock_readings(), 4);
    }

    #[test]
    fn a_spent_budget_refuses_the_next_lookup_with_a_fresh_reading() {
        let host = InMemoryHost::new().with_latency(Duration::from_millis(500));
        let budget = Budget::start(&host, Duration::from_secs(1));
        let _ = lookup(&budget, &host);
        let _ = lookup(&budget, &host);
        let refused = lookup(&budget, &host).expect_err("1000 ms spent of 1000");
        assert_eq!(
            refused.detail,
            "not checked in time: the policy's time budget of 1000 ms (timeBudgetMs) was spent on earlier lookups"
        );
        assert_eq!(budget.remaining(&host), Duration::ZERO);
    }
}
