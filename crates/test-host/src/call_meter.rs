//! Counting host calls and the bytes they move across the guest boundary,
//! for `test-host bench`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Totals since creation; read them before and after a call to get its share.
#[derive(Debug, Default)]
pub struct CallMeter {
    calls: AtomicU64,
    to_host: AtomicU64,
    to_guest: AtomicU64,
}

/// A reading of a [`CallMeter`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CallCounts {
    /// Host calls made by the guest.
    pub calls: u64,
    /// Payload bytes the guest sent with them.
    pub to_host: u64,
    /// Answer (or error text) bytes handed back to the guest.
    pub to_guest: u64,
}

impl CallMeter {
    /// Account for one host call with a `to_host`-byte payload and a `to_guest`-byte answer.
    pub fn record(&self, to_host: usize, to_guest: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.to_host.fetch_add(to_host as u64, Ordering::Relaxed);
        self.to_guest.fetch_add(to_guest as u64, Ordering::Relaxed);
    }

    /// The totals so far.
    pub fn read(&self) -> CallCounts {
        CallCounts {
            calls: self.calls.load(Ordering::Relaxed),
            to_host: self.to_host.load(Ordering::Relaxed),
            to_guest: self.to_guest.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_calls_and_bytes() {
        let meter = CallMeter::default();
        meter.record(10, 20);
        meter.record(1, 2);
        assert_eq!(
            meter.read(),
            CallCounts {
                calls: 2,
                to_host: 11,
                to_guest: 22
            }
        );
    }
}
