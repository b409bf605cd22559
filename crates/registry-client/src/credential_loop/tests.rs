//! The loop's order and stopping rule over scripted answers, the contract's table, and the
//! classification of real oci-client errors (moved here from the broker's `attempts` and the
//! test host's `resolve_images` tests, which each had a copy).

use std::cell::RefCell;

use super::*;

fn found(digest: &str) -> Attempt {
    Attempt::Found(Found {
        digest: digest.into(),
        manifest: None,
    })
}

fn not_found(envelope: Option<&str>) -> Attempt {
    Attempt::NotFound {
        detail: "manifest unknown".into(),
        envelope: envelope.map(str::to_owned),
    }
}

fn refused() -> Attempt {
    Attempt::Refused {
        detail: "401 Unauthorized".into(),
    }
}

fn failed(reason: &str) -> Attempt {
    Attempt::Failed(Unanswered::Indefinite(reason.into()))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime")
}

/// Runs the loop over scripted answers, recording which credentials were tried.
fn script(credentials: &[&str], answers: &[Attempt]) -> (Lookup, Vec<Option<String>>) {
    let tried = RefCell::new(Vec::new());
    let answers = answers.to_vec();
    let credentials: Vec<String> = credentials.iter().map(|s| s.to_string()).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let lookup = runtime().block_on(run(
        credentials,
        deadline,
        Duration::from_secs(60),
        |credential| {
            let answer = answers[tried.borrow().len()].clone();
            tried.borrow_mut().push(credential);
            async move { answer }
        },
    ));
    assert_eq!(lookup.attempts.len(), tried.borrow().len());
    (lookup, tried.into_inner())
}

#[test]
fn the_first_success_wins_and_stops_the_loop() {
    for before in [not_found(None), refused(), failed("503")] {
        let (lookup, tried) = script(
            &["a", "b", "c"],
            &[before, found("sha256:1"), found("sha256:2")],
        );
        assert_eq!(
            lookup.outcome,
            Outcome::Found {
                index: 1,
                found: Found {
                    digest: "sha256:1".into(),
                    manifest: None
                }
            }
        );
        assert_eq!(tried, vec![Some("a".into()), Some("b".into())]);
    }
}

#[test]
fn no_anonymous_try_once_credentials_matched() {
    let (lookup, tried) = script(&["a"], &[refused(), found("sha256:anonymous")]);
    assert_eq!(lookup.outcome, Outcome::Unauthorized);
    assert_eq!(tried, vec![Some("a".into())]);
}

#[test]
fn without_credentials_one_anonymous_try() {
    let (lookup, tried) = script(&[], &[found("sha256:1")]);
    assert_eq!(lookup.outcome.word(), "found");
    assert_eq!(tried, vec![None]);
    let (lookup, _) = script(&[], &[not_found(Some("{}"))]);
    assert_eq!(
        lookup.outcome,
        Outcome::NotFound {
            envelope: Some("{}".into())
        }
    );
}

#[test]
fn a_refusal_and_a_404_is_still_not_found() {
    let (lookup, _) = script(&["a", "b"], &[refused(), not_found(Some("e"))]);
    assert_eq!(
        lookup.outcome,
        Outcome::NotFound {
            envelope: Some("e".into())
        }
    );
}

#[test]
fn all_refused_is_unauthorized() {
    let (lookup, _) = script(&["a", "b"], &[refused(), refused()]);
    assert_eq!(lookup.outcome, Outcome::Unauthorized);
}

#[test]
fn one_uncertain_attempt_makes_it_unreachable() {
    let (lookup, _) = script(
        &["a", "b", "c"],
        &[not_found(None), failed("timed out"), refused()],
    );
    assert_eq!(
        lookup.outcome,
        Outcome::Unreachable {
            reason: Unanswered::Indefinite("timed out".into())
        }
    );
}

#[test]
fn the_deadline_ends_the_loop_and_leaves_the_rest_untried() {
    let tried = RefCell::new(0);
    let timeout = Duration::from_millis(20);
    let lookup = runtime().block_on(run(
        vec!["a", "b"],
        Instant::now() + timeout,
        timeout,
        |_| {
            *tried.borrow_mut() += 1;
            async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                found("sha256:late")
            }
        },
    ));
    assert_eq!(*tried.borrow(), 1, "the second credential is not tried");
    assert!(!lookup.complete);
    assert!(lookup.attempts[0].got_no_answer());
    assert!(
        !lookup.attempts[0].registry_was_silent(),
        "the lookup's own deadline says nothing of the registry"
    );
    assert_eq!(lookup.attempts[0].detail(), "timed out after 20 ms");
    assert_eq!(lookup.outcome.word(), "unreachable");
    let own_timeout = Attempt::Failed(Unanswered::NoAnswer {
        within: timeout,
        lookup_deadline: false,
    });
    assert!(own_timeout.registry_was_silent());
}

#[test]
fn a_404_with_credentials_left_untried_proves_nothing() {
    assert_eq!(
        conclude(&[not_found(None)], false).word(),
        "unreachable",
        "the untried credential might have found it"
    );
    assert_eq!(conclude(&[], true).word(), "unreachable");
}

fn envelope(code: &str) -> RegistryError {
    let body = format!(r#"{{"errors":[{{"code":"{code}","message":"m {code}"}}]}}"#);
    RegistryError::Oci(OciDistributionError::RegistryError {
        envelope: serde_json::from_str(&body).expect("envelope"),
        url: "https://r/v2/a/manifests/b".into(),
    })
}

fn server(code: u16) -> RegistryError {
    RegistryError::Oci(OciDistributionError::ServerError {
        code,
        url: "u".into(),
        message: String::new(),
    })
}

#[test]
fn every_not_found_code_is_definitive_harbors_included() {
    for code in ["MANIFEST_UNKNOWN", "NAME_UNKNOWN", "NOT_FOUND"] {
        match classify(&envelope(code)) {
            Attempt::NotFound { detail, envelope } => {
                assert_eq!(detail, format!("m {code}"));
                assert!(envelope.is_some_and(|e| e.contains(code)));
            }
            other => panic!("{code}: {other:?}"),
        }
    }
    assert_eq!(classify(&server(404)).word(), "notFound");
}

/// `code` in the envelope of a 404, as the pool reports it.
fn not_found_status(code: &str) -> RegistryError {
    let RegistryError::Oci(oci) = envelope(code) else {
        unreachable!("envelope() is an Oci error")
    };
    RegistryError::NotFoundStatus(oci)
}

#[test]
fn a_404_is_definitive_whatever_its_code_but_a_denial_stays_one() {
    for code in ["MANIFEST_UNKNOWN", "SOMETHING_NEW", "UNSUPPORTED"] {
        assert_eq!(
            classify(&not_found_status(code)).word(),
            "notFound",
            "{code}"
        );
    }
    assert_eq!(classify(&not_found_status("DENIED")).word(), "unauthorized");
    // the same unknown code outside a 404 settles nothing
    assert_eq!(classify(&envelope("SOMETHING_NEW")).word(), "unreachable");
    // the text is oci-client's, as a guest would see it
    assert_eq!(not_found_status("X").to_string(), envelope("X").to_string());
}

#[test]
fn refusals_by_code_and_status() {
    for code in ["DENIED", "UNAUTHORIZED"] {
        assert_eq!(classify(&envelope(code)).word(), "unauthorized", "{code}");
    }
    assert_eq!(classify(&server(401)).word(), "unauthorized");
    assert_eq!(classify(&server(403)).word(), "unauthorized");
    let unauthorized =
        RegistryError::Oci(OciDistributionError::UnauthorizedError { url: "u".into() });
    assert_eq!(classify(&unauthorized).word(), "unauthorized");
}

#[test]
fn what_settles_nothing_is_unreachable() {
    assert!(matches!(
        classify(&envelope("TOOMANYREQUESTS")),
        Attempt::Failed(Unanswered::Indefinite(reason)) if reason == "m TOOMANYREQUESTS"
    ));
    assert_eq!(classify(&server(503)).word(), "unreachable");
    assert_eq!(classify(&server(429)).word(), "unreachable");
    let timeout = RegistryError::Timeout(crate::RequestTimeout::new("u"));
    assert_eq!(classify(&timeout).word(), "unreachable");
    assert!(
        !classify(&timeout).got_no_answer(),
        "the client's own time-out is not silence measured by the loop"
    );
}

#[test]
fn the_media_type_comes_from_the_body_or_its_shape() {
    assert_eq!(
        media_type_of(br#"{"mediaType":"application/vnd.docker.distribution.manifest.v2+json"}"#),
        "application/vnd.docker.distribution.manifest.v2+json"
    );
    assert_eq!(
        media_type_of(br#"{"manifests":[]}"#),
        OCI_IMAGE_INDEX_MEDIA_TYPE
    );
    assert_eq!(media_type_of(b"not json"), OCI_IMAGE_MEDIA_TYPE);
}

#[test]
fn one_line_keeps_each_cause_once() {
    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
    let error = Outer(std::io::Error::other("inner"));
    assert_eq!(one_line(&error), "outer: inner");
}
