use super::*;
use crate::telemetry::logs::capture;

#[test]
fn the_lookup_line_keeps_its_keys_and_its_lists_as_json_text() {
    let line = LogLine {
        method: "HEAD",
        name: None,
        reference: "v1".into(),
        outcome: "found",
        status: 200,
        matched: Some(3),
        attempts: vec!["unauthorized", "found"],
        served_by: Some(1),
        skipped: vec!["secret/gone".into()],
        reason: None,
        suggested: None,
    };
    let lines = capture::lines(|| log(&line, Duration::from_millis(42)));
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    assert_eq!(l["msg"], "lookup");
    assert_eq!(l["method"], "HEAD");
    assert_eq!(l["namespace"], "");
    assert_eq!(l["reference"], "v1");
    assert_eq!(l["outcome"], "found");
    assert_eq!(l["status"], 200);
    assert_eq!(l["credentialsMatched"], 3);
    assert_eq!(l["servedBy"], 1);
    assert_eq!(l["ms"], 42);
    let attempts: Vec<String> =
        serde_json::from_str(l["attempts"].as_str().expect("text")).expect("JSON");
    assert_eq!(attempts, ["unauthorized", "found"]);
    let skipped: Vec<String> =
        serde_json::from_str(l["skippedSecrets"].as_str().expect("text")).expect("JSON");
    assert_eq!(skipped, ["secret/gone"]);
    // no reason, no key
    assert!(l.get("reason").is_none(), "{l}");
}

/// A registry's 404 reaches the caller as its code with the broker's words: its message
/// and detail (here a secret-looking string) never do, nor an error of another code.
#[test]
fn a_404_keeps_the_code_never_the_registrys_words() {
    let body = |envelope: Option<&str>| {
        let answer = not_found_reply(envelope.map(str::to_owned), &[]);
        assert_eq!(answer.status, 404);
        let text = String::from_utf8(answer.body).expect("UTF-8");
        assert!(!text.contains("s3cr3t"), "{text}");
        serde_json::from_str::<serde_json::Value>(&text).expect("JSON")
    };
    let lure = r#"{"errors": [{"code": "DENIED", "message": "denied: s3cr3t-Lure"}, {"code": "NAME_UNKNOWN", "message": "token=s3cr3t-Lure", "detail": {"password": "s3cr3t-Lure"}}]}"#;
    assert_eq!(
        body(Some(lure)),
        json!({"errors": [{"code": "NAME_UNKNOWN", "message": "repository name not known to registry", "detail": null}]})
    );
    let fallback = json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown", "detail": null}]});
    let odd = [
        None,
        Some("not JSON s3cr3t-Lure"),
        Some(r#"{"errors": [{"code": "s3cr3t-Lure"}]}"#),
    ];
    for envelope in odd {
        assert_eq!(body(envelope), fallback, "{envelope:?}");
    }
}

#[test]
fn a_404_carries_the_brokers_suggestions_only() {
    let registry = r#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"gone (nearest tags: evil)"},{"code":"NAME_UNKNOWN","message":"x (nearest tags: evil2)"}]}"#;
    let answer = not_found_reply(Some(registry.into()), &["v1.2.3".into(), "-bad".into()]);
    let body: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
    assert_eq!(
        body,
        json!({"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown (nearest tags: v1.2.3)", "detail": null}]})
    );
    let none = not_found_reply(None, &[]);
    let body: serde_json::Value = serde_json::from_slice(&none.body).expect("JSON");
    assert_eq!(body["errors"][0]["message"], "manifest unknown");
}

#[test]
fn a_lookup_not_decoded_has_no_credentials_matched_nor_served_by() {
    let line = LogLine {
        method: "GET",
        name: None,
        reference: String::new(),
        outcome: "unsealed",
        status: 401,
        matched: None,
        attempts: Vec::new(),
        served_by: None,
        skipped: Vec::new(),
        reason: None,
        suggested: None,
    };
    let lines = capture::lines(|| log(&line, Duration::ZERO));
    let l = &lines[0];
    assert!(
        l.get("credentialsMatched").is_none() && l.get("servedBy").is_none(),
        "{l}"
    );
    assert_eq!(l["attempts"], "[]");
    assert_eq!(l["skippedSecrets"], "[]");
}
