//! The request fixtures of `tests/fixtures/requests`, for the unit tests that hold a reader to
//! serde's reading over every request the suites send.

use serde_json::Value;

/// Every fixture's AdmissionReview, parsed.
pub fn reviews() -> Vec<Value> {
    std::fs::read_dir("tests/fixtures/requests")
        .expect("the request fixtures")
        .map(|entry| {
            let path = entry.expect("a fixture").path();
            let text = std::fs::read_to_string(&path).expect("a readable fixture");
            serde_json::from_str(&text).expect("a JSON fixture")
        })
        .collect()
}
