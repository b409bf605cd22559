//! The broker's logs: `tracing` events written by `tracing-subscriber`'s JSON formatter, one
//! object per line on stdout, each event's fields at the top level (`flatten_event`) next to
//! `timestamp`, `level` and `target`. The broker's own events carry a `msg` field (`lookup`,
//! `listening`, `terminating`, `draining`, `stopped`, `failed`) that names the record; the
//! level comes from `RUST_LOG` (default `info`, which keeps the dependencies' debug events
//! out).

use std::io;

use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// The filter when `RUST_LOG` is unset.
const DEFAULT_FILTER: &str = "info";

/// The JSON subscriber writing to `writer`, events filtered by `filter`.
pub fn subscriber<W>(writer: W, filter: EnvFilter) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_env_filter(filter)
        .with_writer(writer)
        .finish()
}

/// Installs the JSON subscriber on stdout for the whole process; an unreadable `RUST_LOG`
/// is said on stderr and replaced by the default.
pub fn init() {
    let filter = match EnvFilter::try_from_default_env() {
        Ok(filter) => filter,
        Err(e) => {
            if std::env::var_os(EnvFilter::DEFAULT_ENV).is_some() {
                eprintln!(
                    "resolvable-images-broker: RUST_LOG ignored ({e}), logging at {DEFAULT_FILTER}"
                );
            }
            EnvFilter::new(DEFAULT_FILTER)
        }
    };
    // fails only when a subscriber is already set, which nothing else in the process does
    let _ = tracing::subscriber::set_global_default(subscriber(io::stdout, filter));
}

/// A list as the JSON text of an array: `tracing` records strings, numbers and booleans, so a
/// list field (`attempts`, `skippedSecrets`) is its JSON text, read back with jq's `fromjson`.
pub fn json_list<T: serde::Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

#[cfg(test)]
pub mod capture {
    //! The lines a closure logs, for tests.

    use std::io::{self, Write};
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::EnvFilter;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;

        fn make_writer(&'w self) -> Buffer {
            self.clone()
        }
    }

    /// Each JSON line `f` logs (on this thread), parsed.
    pub fn lines(f: impl FnOnce()) -> Vec<serde_json::Value> {
        let buffer = Buffer::default();
        let subscriber = super::subscriber(buffer.clone(), EnvFilter::new("info"));
        tracing::subscriber::with_default(subscriber, f);
        let text = String::from_utf8(buffer.0.lock().expect("buffer").clone()).expect("utf-8");
        text.lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_one_json_line_with_its_fields_at_the_top() {
        let lines = capture::lines(|| {
            tracing::info!(msg = "stopped", unfinished = 2_u64, tls = false);
            tracing::debug!(msg = "filtered out at info");
        });
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert_eq!(line["msg"], "stopped");
        assert_eq!(line["unfinished"], 2);
        assert_eq!(line["tls"], false);
        assert_eq!(line["level"], "INFO");
        assert!(line["timestamp"].is_string());
        assert!(line.get("fields").is_none(), "flattened: {line}");
    }

    #[test]
    fn a_list_is_its_json_text() {
        assert_eq!(json_list(&["found", "refused"]), r#"["found","refused"]"#);
        assert_eq!(json_list::<String>(&[]), "[]");
    }
}
