//! Prometheus metrics, kept and written by `prometheus-client` in the Prometheus text format
//! (version 0.0.4, the one the hand-written exposition served), and readiness.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `Content-Type` of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// The outcomes a lookup is counted under.
/// The lookup log line's `outcome` words (service.rs, unanswerable.rs, and the credential
/// loop's `Outcome::word`).
pub const OUTCOMES: [&str; 11] = [
    "found",
    "notFound",
    "unauthorized",
    "unreachable",
    "invalid",
    "unsealed",
    "expired",
    "malformedSecret",
    "refusedDestination",
    "overloaded",
    "namespaceNotEnabled",
];
/// The results an upstream attempt is counted under: the credential loop's `Attempt::word`,
/// as in the log line's `attempts`.
pub const ATTEMPTS: [&str; 4] = ["found", "notFound", "unauthorized", "unreachable"];
/// What a reload is counted under: the files the broker reads again while it runs.
pub const RELOADED: [&str; 3] = ["keys", "callers", "certificate"];

/// A set of files read again while the broker runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reloaded {
    /// `--key-dir`.
    Keys,
    /// `--caller-dir`.
    Callers,
    /// `--tls-cert` and `--tls-key`.
    Certificate,
}

impl Reloaded {
    /// Its label value (one of [`RELOADED`]).
    pub fn word(self) -> &'static str {
        RELOADED[self as usize]
    }
}

/// Upper bounds (seconds) of the lookup duration histogram.
const BUCKETS: [f64; 8] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

/// One label, its value one of the fixed words above: never a word a request chose.
type Label = [(&'static str, &'static str); 1];

/// The broker's counters.
pub struct Metrics {
    ready: AtomicBool,
    registry: Registry,
    lookups: Family<Label, Counter>,
    attempts: Family<Label, Counter>,
    callers_refused: Counter,
    in_flight: Gauge,
    duration: Histogram,
    reload_failures: Family<Label, Counter>,
    /// Since when each reload has been failing, `None` while it succeeds.
    failing_since: Mutex<[Option<Instant>; RELOADED.len()]>,
    /// How long a reload may fail before `/readyz` says not ready (ms).
    reload_grace_ms: AtomicU64,
}

/// A counter family registered as `name`, with a zero shown for each of `words` under
/// `label` from the start.
fn family(
    registry: &mut Registry,
    (name, help): (&str, &str),
    label: &'static str,
    words: &[&'static str],
) -> Family<Label, Counter> {
    let family = Family::<Label, Counter>::default();
    for word in words {
        let _zero = family.get_or_create(&[(label, word)]);
    }
    registry.register(name, help, family.clone());
    family
}

impl Default for Metrics {
    /// Registered under the names the hand-written exposition used (the library adds the
    /// counters' `_total`), so scrapes and dashboards see no change.
    fn default() -> Self {
        let mut registry = Registry::default();
        let r = &mut registry;
        let lookups = family(
            r,
            ("broker_lookups", "Lookups answered, by outcome"),
            "outcome",
            &OUTCOMES,
        );
        let attempts = family(
            r,
            (
                "broker_upstream_attempts",
                "Registry attempts (one per credential tried), by result",
            ),
            "result",
            &ATTEMPTS,
        );
        let callers_refused = Counter::default();
        r.register(
            "broker_callers_refused",
            "Requests without the caller credential",
            callers_refused.clone(),
        );
        let reloads = "Failed readings of the keys, caller credentials or TLS certificate \
                       (the old ones kept)";
        let reload_failures = family(r, ("broker_reload_failures", reloads), "what", &RELOADED);
        let in_flight = Gauge::default();
        r.register(
            "broker_lookups_in_flight",
            "Lookups being answered",
            in_flight.clone(),
        );
        let duration = Histogram::new(BUCKETS);
        r.register(
            "broker_lookup_duration_seconds",
            "Time to answer a lookup",
            duration.clone(),
        );
        Metrics {
            ready: AtomicBool::default(),
            registry,
            lookups,
            attempts,
            callers_refused,
            in_flight,
            duration,
            reload_failures,
            failing_since: Mutex::default(),
            reload_grace_ms: AtomicU64::default(),
        }
    }
}

impl Metrics {
    /// Marks the broker ready (listening, caller credential and API access configured).
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Marks the broker not ready: it is draining (SIGTERM), so that `/readyz` takes it out of
    /// the Service's endpoints while the lookups in flight finish.
    pub fn set_not_ready(&self) {
        self.ready.store(false, Ordering::SeqCst);
    }

    /// Whether `/readyz` says ready: started, not draining, and no reload failing for longer
    /// than the grace ([`Metrics::set_reload_grace`]): a broker that cannot read its keys or
    /// caller credentials any more goes on with the old ones (a mount caught mid-update is
    /// common), but not unnoticed for long, since a revoked key would go on working.
    pub fn is_ready(&self) -> bool {
        let grace = Duration::from_millis(self.reload_grace_ms.load(Ordering::Relaxed));
        let failing_too_long = self.failing_since.lock().map_or(true, |since| {
            since.iter().flatten().any(|at| at.elapsed() >= grace)
        });
        self.ready.load(Ordering::SeqCst) && !failing_too_long
    }

    /// How long a reload may fail before the broker is not ready.
    pub fn set_reload_grace(&self, grace: Duration) {
        let ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        self.reload_grace_ms.store(ms, Ordering::Relaxed);
    }

    /// Counts a failed reload of `what`, and remembers since when it fails.
    pub fn reload_failed(&self, what: Reloaded) {
        self.reload_failures
            .get_or_create(&[("what", what.word())])
            .inc();
        if let Ok(mut since) = self.failing_since.lock() {
            since[what as usize].get_or_insert_with(Instant::now);
        }
    }

    /// A reload of `what` succeeded: it is not failing any more.
    pub fn reload_succeeded(&self, what: Reloaded) {
        if let Ok(mut since) = self.failing_since.lock() {
            since[what as usize] = None;
        }
    }

    /// The value a reload of `what` read, counted as a success; or `None` when it failed,
    /// which is logged (a `reloadFailed` warning with the error, which names the file, never
    /// its content) and counted: the caller keeps what it held.
    pub fn reloaded<T, E: std::fmt::Display>(
        &self,
        what: Reloaded,
        read: Result<T, E>,
    ) -> Option<T> {
        match read {
            Ok(value) => {
                self.reload_succeeded(what);
                Some(value)
            }
            Err(error) => {
                tracing::warn!(msg = "reloadFailed", what = what.word(), error = %error, "keeping what was read before");
                self.reload_failed(what);
                None
            }
        }
    }

    /// Counts a finished lookup; a word not in [`OUTCOMES`] only in the duration.
    pub fn lookup(&self, outcome: &str, seconds: f64) {
        if let Some(word) = OUTCOMES.iter().find(|o| **o == outcome) {
            self.lookups.get_or_create(&[("outcome", word)]).inc();
        }
        self.duration.observe(seconds);
    }

    /// Counts an upstream attempt.
    pub fn attempt(&self, result: &str) {
        if let Some(word) = ATTEMPTS.iter().find(|o| **o == result) {
            self.attempts.get_or_create(&[("result", word)]).inc();
        }
    }

    /// Counts a request without the caller credential.
    pub fn caller_refused(&self) {
        self.callers_refused.inc();
    }

    /// A lookup started; the guard counts it finished when dropped.
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(self)
    }

    /// The exposition text ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; a metric that could not be written would leave
        // the text short, never the scrape unanswered.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }
}

/// Counts one lookup in flight while alive.
pub struct InFlight<'m>(&'m Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The metrics listener has no authentication (the NetworkPolicy is its control,
    /// docs/broker.md): what it shows is counts under fixed label values, never a word a
    /// request or a registry chose (namespace, secret, registry, repository).
    #[test]
    fn the_metrics_show_only_fixed_names_and_labels() {
        let m = Metrics::default();
        m.lookup("found", 0.2);
        m.lookup("team-b/s.regcred", 0.2);
        m.attempt("unauthorized");
        m.attempt("registry.example/private");
        m.caller_refused();
        m.reload_failed(Reloaded::Keys);
        let text = m.render();
        assert!(
            text.contains("broker_reload_failures_total{what=\"keys\"} 1\n"),
            "{text}"
        );
        assert!(
            !text.contains("team-b") && !text.contains("registry.example"),
            "{text}"
        );
        let known = |line: &str| {
            let name = line.split(['{', ' ']).next().unwrap_or_default();
            let labels_fixed = match line.split_once('{') {
                None => true,
                Some((_, rest)) => {
                    let value = rest.split('"').nth(1).unwrap_or_default();
                    OUTCOMES.contains(&value)
                        || ATTEMPTS.contains(&value)
                        || RELOADED.contains(&value)
                        || value == "+Inf"
                        || value.parse::<f64>().is_ok()
                }
            };
            name.starts_with("broker_") && labels_fixed
        };
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(known(line), "{line}");
        }
    }

    #[test]
    fn a_failing_reload_turns_readiness_false_after_its_grace_until_one_succeeds() {
        let m = Metrics::default();
        m.set_ready();
        m.set_reload_grace(Duration::from_secs(3600));
        m.reload_failed(Reloaded::Callers);
        m.reload_failed(Reloaded::Callers);
        assert!(m.is_ready(), "within its grace");
        m.set_reload_grace(Duration::ZERO);
        assert!(!m.is_ready(), "past its grace");
        m.reload_succeeded(Reloaded::Keys);
        assert!(!m.is_ready(), "another reload's success changes nothing");
        m.reload_succeeded(Reloaded::Callers);
        assert!(m.is_ready());
        let text = m.render();
        assert!(text.contains("broker_reload_failures_total{what=\"callers\"} 2\n"));
        assert!(text.contains("broker_reload_failures_total{what=\"keys\"} 0\n"));
    }

    #[test]
    fn readiness_starts_false_turns_true_then_false_for_the_drain() {
        let m = Metrics::default();
        assert!(!m.is_ready());
        m.set_ready();
        assert!(m.is_ready());
        m.set_not_ready();
        assert!(!m.is_ready());
    }

    /// Every word a lookup is logged with is counted: the attempts' words are the credential
    /// loop's, the outcomes include the refusals made before any registry is asked.
    #[test]
    fn every_logged_word_is_counted() {
        let m = Metrics::default();
        for word in ["unauthorized", "unreachable"] {
            m.attempt(word);
        }
        for word in [
            "unsealed",
            "malformedSecret",
            "refusedDestination",
            "namespaceNotEnabled",
        ] {
            m.lookup(word, 0.01);
        }
        let text = m.render();
        for line in [
            "broker_upstream_attempts_total{result=\"unauthorized\"} 1",
            "broker_upstream_attempts_total{result=\"unreachable\"} 1",
            "broker_lookups_total{outcome=\"unsealed\"} 1",
            "broker_lookups_total{outcome=\"malformedSecret\"} 1",
            "broker_lookups_total{outcome=\"refusedDestination\"} 1",
            "broker_lookups_total{outcome=\"namespaceNotEnabled\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }

    #[test]
    fn renders_counters_and_a_consistent_histogram() {
        let m = Metrics::default();
        m.lookup("found", 0.02);
        m.lookup("notFound", 3.0);
        m.attempt("unauthorized");
        {
            let _guard = m.in_flight();
            assert!(m.render().contains("broker_lookups_in_flight 1\n"));
        }
        let text = m.render();
        assert!(
            text.contains("broker_lookups_total{outcome=\"found\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("broker_lookups_total{outcome=\"notFound\"} 1\n"));
        assert!(text.contains("broker_upstream_attempts_total{result=\"unauthorized\"} 1\n"));
        assert!(text.contains("broker_lookup_duration_seconds_bucket{le=\"0.05\"} 1\n"));
        assert!(text.contains("broker_lookup_duration_seconds_bucket{le=\"5\"} 2\n"));
        assert!(text.contains("broker_lookup_duration_seconds_count 2\n"));
        assert!(text.contains("broker_lookups_in_flight 0\n"));
        for family in [
            "# TYPE broker_lookups_total counter\n",
            "# TYPE broker_upstream_attempts_total counter\n",
            "# TYPE broker_callers_refused_total counter\n",
            "# TYPE broker_reload_failures_total counter\n",
            "# TYPE broker_lookups_in_flight gauge\n",
            "# TYPE broker_lookup_duration_seconds histogram\n",
        ] {
            assert!(text.contains(family), "{family} in {text}");
        }
        assert!(
            !text.contains("# EOF"),
            "the 0.0.4 text format, not OpenMetrics: {text}"
        );
    }
}
