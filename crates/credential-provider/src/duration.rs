//! Go's `time.ParseDuration`, the format of `defaultCacheDuration` and `cacheDuration`
//! (`metav1.Duration`): `1h30m`, `90s`, `1.5h`, `0`. Written here because the crates that parse
//! human durations read other formats (spaces, words, no fractions) and would accept strings the
//! kubelet refuses.

use std::time::Duration;

/// The longest duration Go has (`int64` nanoseconds, about 292 years), in seconds: Go refuses a
/// longer one, and so does this parser, so that a plugin's `cacheDuration` near `u64::MAX`
/// seconds never reaches time arithmetic (an `Instant` plus it would overflow and panic).
const GO_MAX_SECONDS: f64 = i64::MAX as f64 / 1e9;

/// Parses a Go duration; `None` for anything Go refuses (longer than [`GO_MAX_SECONDS`]
/// included), and for negative durations, which no cache duration can be.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() || rest.starts_with('-') {
        return None;
    }
    let mut rest = rest;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += value * seconds;
    }
    if total > GO_MAX_SECONDS {
        return None;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_reads_them() {
        let cases = [
            ("0", Some(0.0)),
            ("12h", Some(43_200.0)),
            ("1m30s", Some(90.0)),
            ("1.5h", Some(5400.0)),
            ("250ms", Some(0.25)),
            ("+5s", Some(5.0)),
            ("0s", Some(0.0)),
        ];
        for (text, seconds) in cases {
            assert_eq!(
                parse_go_duration(text).map(|d| d.as_secs_f64()),
                seconds,
                "{text}"
            );
        }
    }

    /// Go's own limit: `2562047h` is accepted, anything past `int64` nanoseconds refused, as
    /// Go refuses it; what is accepted can be added to the clock without a panic.
    #[test]
    fn durations_past_gos_range_are_refused_and_the_longest_fits_the_clock() {
        let longest = parse_go_duration("2562047h").expect("within Go's range");
        assert!(std::time::Instant::now().checked_add(longest).is_some());
        let near_max = format!("{}s", u64::MAX);
        for text in ["2562048h", "5124095576030431h", near_max.as_str()] {
            assert_eq!(parse_go_duration(text), None, "{text}");
        }
    }

    #[test]
    fn strings_go_refuses_are_refused() {
        for text in [
            "", "5", "1d", "-1s", "1 h", "h", ".s", "1..2s", "1h-2m", "abc",
        ] {
            assert_eq!(parse_go_duration(text), None, "{text}");
        }
    }
}
