//! The policy's unsafe code (the `json-extent` crate) on any bytes: the scanner never panics,
//! agrees with serde_json on where a valid JSON value ends, and `compare` orders any two byte
//! strings as slices do (its word-at-a-time reads are the crate's `unsafe`).
//!
//! The first byte splits the input for `compare`: the rest is cut in two at that offset.

use json_extent::compare::compare;
use json_extent::{ascii_text, Scanner};

/// The property, on one input; panics where it does not hold.
pub fn run(data: &[u8]) {
    compares_as_slices_order(data);
    if let Ok(text) = std::str::from_utf8(data) {
        ends_where_serde_ends(text);
    }
    assert_eq!(
        ascii_text(data).is_some(),
        data.is_ascii(),
        "ascii_text disagrees with is_ascii"
    );
}

fn compares_as_slices_order(data: &[u8]) {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let (a, b) = rest.split_at(usize::from(cut).min(rest.len()));
    let n = a.len().min(b.len());
    let expected = a[..n].cmp(&b[..n]) as i32;
    assert_eq!(compare(a, b).signum(), expected, "compare({a:?}, {b:?})");
}

fn ends_where_serde_ends(text: &str) {
    let mut scanner = Scanner::new(text);
    let extent = scanner.value();
    // serde reads one value and then only white space: the scanner must find that same value.
    if let Ok(whole) = serde_json::from_str::<serde_json::Value>(text) {
        let extent = extent.unwrap_or_else(|e| panic!("valid JSON refused: {e}: {text:?}"));
        let again: serde_json::Value = serde_json::from_str(extent)
            .unwrap_or_else(|e| panic!("extent {extent:?} of {text:?} is not JSON: {e}"));
        assert_eq!(whole, again, "extent {extent:?} of {text:?}");
        assert!(
            scanner.at_end(),
            "text left after the only value of {text:?}"
        );
    }
}
