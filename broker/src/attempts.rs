//! The credential loop, as the kubelet runs it (`kuberuntime_image.go`, `PullImage`) and as
//! the project's shared contract states it (`docs/credentialed-lookups.md`): every credential
//! the keyring matched, in order; the first success wins; any error moves on to the next; no
//! anonymous try once credentials matched; one anonymous try when none did. What the attempts
//! add up to is one [`Outcome`].

use std::future::Future;

use oci_client::errors::{OciDistributionError, OciErrorCode};
use registry_client::RegistryError;

/// What one attempt with one credential ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The registry has the manifest.
    Found(Found),
    /// The registry said the manifest or repository does not exist (404, `MANIFEST_UNKNOWN`,
    /// `NAME_UNKNOWN`); the registry's OCI error body when it sent one.
    NotFound(Option<String>),
    /// The registry refused the credential (401, 403, `DENIED`, `UNAUTHORIZED`).
    Refused,
    /// No definitive answer (connection, TLS, time-out, 5xx, 429, unreadable answer): a retry
    /// might succeed. The reason never carries credential bytes.
    Failed(String),
}

/// A found manifest: its digest, and for `GET` its body and media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `Docker-Content-Digest`.
    pub digest: String,
    /// The manifest and its media type (`GET` only).
    pub manifest: Option<(Vec<u8>, String)>,
}

impl Attempt {
    /// The short word logs and metrics use.
    pub fn word(&self) -> &'static str {
        match self {
            Attempt::Found(_) => "found",
            Attempt::NotFound(_) => "notFound",
            Attempt::Refused => "refused",
            Attempt::Failed(_) => "failed",
        }
    }
}

/// What a lookup established, per the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The first credential (by index) that found the manifest.
    Found {
        /// Which credential served (0-based; 0 also for the anonymous try).
        index: usize,
        /// Its answer.
        found: Found,
    },
    /// Every attempt was definitive and at least one said 404: the pull will certainly fail.
    NotFound {
        /// The first 404's OCI error body, if the registry sent one.
        envelope: Option<String>,
    },
    /// Every attempt was refused.
    Unauthorized,
    /// At least one attempt had no definitive answer and none succeeded.
    Unreachable {
        /// The first such attempt's reason.
        reason: String,
    },
}

impl Outcome {
    /// The contract's name of the outcome, for logs and metrics.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Found { .. } => "found",
            Outcome::NotFound { .. } => "notFound",
            Outcome::Unauthorized => "unauthorized",
            Outcome::Unreachable { .. } => "unreachable",
        }
    }
}

/// Tries `credentials` in order with `attempt` (which gets each credential's index and the
/// credential, `None` meaning anonymous), stopping at the first success. Returns the outcome
/// and every attempt's result, in order.
pub async fn run<C, F, Fut>(credentials: Vec<C>, mut attempt: F) -> (Outcome, Vec<Attempt>)
where
    F: FnMut(usize, Option<C>) -> Fut,
    Fut: Future<Output = Attempt>,
{
    let mut results = Vec::new();
    if credentials.is_empty() {
        results.push(attempt(0, None).await);
    } else {
        for (index, credential) in credentials.into_iter().enumerate() {
            let result = attempt(index, Some(credential)).await;
            let found = matches!(result, Attempt::Found(_));
            results.push(result);
            if found {
                break;
            }
        }
    }
    (summarise(&results), results)
}

/// What the attempts add up to (the contract's table).
pub fn summarise(results: &[Attempt]) -> Outcome {
    if let Some((index, found)) = results.iter().enumerate().find_map(|(i, r)| match r {
        Attempt::Found(found) => Some((i, found.clone())),
        _ => None,
    }) {
        return Outcome::Found { index, found };
    }
    if let Some(reason) = results.iter().find_map(|r| match r {
        Attempt::Failed(reason) => Some(reason.clone()),
        _ => None,
    }) {
        return Outcome::Unreachable { reason };
    }
    match results.iter().find_map(|r| match r {
        Attempt::NotFound(envelope) => Some(envelope.clone()),
        _ => None,
    }) {
        Some(envelope) => Outcome::NotFound { envelope },
        None if results.is_empty() => Outcome::Unreachable {
            reason: "no attempt was made".into(),
        },
        None => Outcome::Unauthorized,
    }
}

/// Classifies a failed attempt from the registry client's error.
pub fn classify(error: &RegistryError) -> Attempt {
    match error {
        RegistryError::Oci(oci) => classify_oci(oci),
        RegistryError::Timeout(_) => Attempt::Failed("the registry did not answer in time".into()),
        other => Attempt::Failed(one_line(other)),
    }
}

fn classify_oci(error: &OciDistributionError) -> Attempt {
    match error {
        OciDistributionError::UnauthorizedError { .. } => Attempt::Refused,
        OciDistributionError::RegistryError { envelope, .. } => {
            let has =
                |wanted: &[OciErrorCode]| envelope.errors.iter().any(|e| wanted.contains(&e.code));
            if has(&[OciErrorCode::Denied, OciErrorCode::Unauthorized]) {
                Attempt::Refused
            } else if has(&[OciErrorCode::ManifestUnknown, OciErrorCode::NameUnknown]) {
                Attempt::NotFound(serde_json::to_string(envelope).ok())
            } else {
                Attempt::Failed(format!("the registry answered: {envelope}"))
            }
        }
        OciDistributionError::ServerError { code, .. } => match code {
            401 | 403 => Attempt::Refused,
            404 => Attempt::NotFound(None),
            code => Attempt::Failed(format!("the registry answered HTTP {code}")),
        },
        other => Attempt::Failed(one_line(other)),
    }
}

/// The error and its causes on one line, for logs (registry-client's texts carry URLs and
/// statuses, never credentials).
fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn found(digest: &str) -> Attempt {
        Attempt::Found(Found {
            digest: digest.into(),
            manifest: None,
        })
    }

    /// Runs the loop over scripted answers, recording which credentials were tried.
    fn script(credentials: &[&str], answers: &[Attempt]) -> (Outcome, Vec<Option<String>>) {
        let tried = RefCell::new(Vec::new());
        let answers = answers.to_vec();
        let credentials: Vec<String> = credentials.iter().map(|s| s.to_string()).collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let (outcome, results) = runtime.block_on(run(credentials, |index, credential| {
            tried.borrow_mut().push(credential);
            let answer = answers[index].clone();
            async move { answer }
        }));
        assert_eq!(results.len(), tried.borrow().len());
        (outcome, tried.into_inner())
    }

    #[test]
    fn the_first_success_wins_and_stops_the_loop() {
        let (outcome, tried) = script(
            &["a", "b", "c"],
            &[Attempt::Refused, found("sha256:1"), found("sha256:2")],
        );
        assert_eq!(
            outcome,
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

    #[test]
    fn any_error_moves_on_even_a_404() {
        let (outcome, tried) = script(&["a", "b"], &[Attempt::NotFound(None), found("sha256:1")]);
        assert_eq!(outcome.word(), "found");
        assert_eq!(tried.len(), 2);
        let (outcome, _) = script(
            &["a", "b"],
            &[Attempt::Failed("x".into()), found("sha256:1")],
        );
        assert_eq!(outcome.word(), "found");
    }

    #[test]
    fn no_anonymous_try_once_credentials_matched() {
        let (outcome, tried) = script(&["a"], &[Attempt::Refused, found("sha256:anonymous")]);
        assert_eq!(outcome, Outcome::Unauthorized);
        assert_eq!(tried, vec![Some("a".into())]);
    }

    #[test]
    fn without_credentials_one_anonymous_try() {
        let (outcome, tried) = script(&[], &[found("sha256:1")]);
        assert_eq!(outcome.word(), "found");
        assert_eq!(tried, vec![None]);
        let (outcome, _) = script(&[], &[Attempt::NotFound(Some("{}".into()))]);
        assert_eq!(
            outcome,
            Outcome::NotFound {
                envelope: Some("{}".into())
            }
        );
    }

    #[test]
    fn a_refusal_and_a_404_is_still_not_found() {
        let (outcome, _) = script(
            &["a", "b"],
            &[Attempt::Refused, Attempt::NotFound(Some("e".into()))],
        );
        assert_eq!(
            outcome,
            Outcome::NotFound {
                envelope: Some("e".into())
            }
        );
    }

    #[test]
    fn all_refused_is_unauthorized() {
        let (outcome, _) = script(&["a", "b"], &[Attempt::Refused, Attempt::Refused]);
        assert_eq!(outcome, Outcome::Unauthorized);
    }

    #[test]
    fn one_uncertain_attempt_makes_it_unreachable() {
        let (outcome, _) = script(
            &["a", "b", "c"],
            &[
                Attempt::NotFound(None),
                Attempt::Failed("timed out".into()),
                Attempt::Refused,
            ],
        );
        assert_eq!(
            outcome,
            Outcome::Unreachable {
                reason: "timed out".into()
            }
        );
    }

    #[test]
    fn registry_errors_are_classified_by_code_and_status() {
        let envelope = |code: &str| {
            let body = format!(r#"{{"errors":[{{"code":"{code}","message":"m"}}]}}"#);
            RegistryError::Oci(OciDistributionError::RegistryError {
                envelope: serde_json::from_str(&body).expect("envelope"),
                url: "https://r/v2/a/manifests/b".into(),
            })
        };
        assert!(matches!(
            classify(&envelope("MANIFEST_UNKNOWN")),
            Attempt::NotFound(Some(_))
        ));
        assert!(matches!(
            classify(&envelope("NAME_UNKNOWN")),
            Attempt::NotFound(Some(_))
        ));
        assert_eq!(classify(&envelope("DENIED")), Attempt::Refused);
        assert_eq!(classify(&envelope("UNAUTHORIZED")), Attempt::Refused);
        assert!(matches!(
            classify(&envelope("TOOMANYREQUESTS")),
            Attempt::Failed(_)
        ));
        let server = |code: u16| {
            RegistryError::Oci(OciDistributionError::ServerError {
                code,
                url: "u".into(),
                message: String::new(),
            })
        };
        assert_eq!(classify(&server(404)), Attempt::NotFound(None));
        assert_eq!(classify(&server(403)), Attempt::Refused);
        assert!(matches!(classify(&server(503)), Attempt::Failed(_)));
        assert!(matches!(classify(&server(429)), Attempt::Failed(_)));
        assert_eq!(
            classify(&RegistryError::Oci(
                OciDistributionError::UnauthorizedError { url: "u".into() }
            )),
            Attempt::Refused
        );
        assert!(matches!(
            classify(&RegistryError::Timeout(
                registry_client::RequestTimeout::new("u")
            )),
            Attempt::Failed(_)
        ));
    }
}
