//! What a credentialed lookup's answer means, credential by credential. The kubelet
//! (`kuberuntime_image.go`, `PullImage`) tries every credential its keyring matched, in order;
//! any error, a 404 included, moves on to the next, and the pull fails only when all failed.
//! So a lookup is `absent` only when every credential was tried, each got a definitive answer
//! (404 or a refusal) and at least one a 404; a refusal next to a 404 is still certain. The
//! host concludes that (`docs/credentialed-lookups.md`); this module checks its conclusion
//! against the attempts it reports, never making it more certain, and words the failure so that
//! it names which pull secret saw a 404 and which was refused: secrets by name, never content.

use crate::failure::LookupResult;
use crate::failure::{Failure, FailureKind};
use crate::host::{summarise, Attempt, AttemptOutcome, LookupAnswer};

/// The result of a credentialed lookup whose credentials came from `sources` (each one's pull
/// secret, `namespace/name`, in the order they were sent; empty for an anonymous lookup).
pub fn result_of(answer: LookupAnswer, sources: &[Option<String>]) -> LookupResult {
    let (claimed, detail, attempts) = match answer {
        LookupAnswer::Found { digest, .. } => return Ok(digest),
        LookupAnswer::NotFound {
            detail, attempts, ..
        } => (FailureKind::Absent, detail, attempts),
        LookupAnswer::Unauthorized {
            detail, attempts, ..
        } => (FailureKind::Unauthorized, detail, attempts),
        LookupAnswer::Unreachable {
            detail, attempts, ..
        } => (FailureKind::Unreachable, detail, attempts),
    };
    if attempts.is_empty() || sources.is_empty() {
        // An anonymous lookup, or a host that does not report attempts: its word.
        return Err(Failure::new(claimed, summarise(&detail)));
    }
    let kind = least_certain(claimed, kind_of(&attempts, sources.len()));
    Err(Failure::new(kind, describe(kind, &attempts, sources)))
}

/// What the attempts add up to under the kubelet's rule, for `credentials` credentials.
fn kind_of(attempts: &[Attempt], credentials: usize) -> FailureKind {
    let any = |outcome| attempts.iter().any(|a| a.outcome == outcome);
    if attempts.len() < credentials
        || any(AttemptOutcome::Unreachable)
        || any(AttemptOutcome::Found)
    {
        // A credential not tried, without a definitive answer, or (against the contract) one
        // that read the image: the node might still pull it.
        FailureKind::Unreachable
    } else if any(AttemptOutcome::NotFound) {
        FailureKind::Absent
    } else {
        FailureKind::Unauthorized
    }
}

/// Of two verdicts on the same lookup, the one that claims less.
fn least_certain(a: FailureKind, b: FailureKind) -> FailureKind {
    let rank = |kind| match kind {
        FailureKind::Absent => 2,
        FailureKind::Unauthorized => 1,
        _ => 0,
    };
    if rank(b) < rank(a) {
        b
    } else {
        a
    }
}

/// `pull secret "team-a/first" was refused (…); pull secret "team-a/second" got 404 (…)`, in
/// the kubelet's order, with what the verdict rests on.
fn describe(kind: FailureKind, attempts: &[Attempt], sources: &[Option<String>]) -> String {
    let name = |i: usize| match sources.get(i).and_then(Option::as_deref) {
        Some(secret) => format!("pull secret {secret:?}"),
        None => format!("credential {}", i + 1),
    };
    let mut parts: Vec<String> = attempts
        .iter()
        .enumerate()
        .map(|(i, attempt)| {
            let what = match attempt.outcome {
                AttemptOutcome::NotFound => "got 404",
                AttemptOutcome::Unauthorized => "was refused",
                AttemptOutcome::Unreachable => "got no definitive answer",
                AttemptOutcome::Found => "read it",
            };
            format!("{} {what} ({})", name(i), summarise(&attempt.detail))
        })
        .collect();
    let untried: Vec<String> = (attempts.len()..sources.len()).map(name).collect();
    if !untried.is_empty() {
        parts.push(format!("{} not tried in time", untried.join(", ")));
    }
    let list = parts.join("; ");
    match kind {
        FailureKind::Absent if sources.len() > 1 => {
            format!("every pull secret the kubelet would try failed: {list}")
        }
        FailureKind::Unreachable => {
            format!("{list}; not certain: a later try with the same credentials might succeed")
        }
        _ => list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(outcome: AttemptOutcome, detail: &str) -> Attempt {
        Attempt {
            outcome,
            detail: detail.to_owned(),
        }
    }

    fn sources(names: &[&str]) -> Vec<Option<String>> {
        names.iter().map(|n| Some((*n).to_owned())).collect()
    }

    fn not_found(attempts: Vec<Attempt>) -> LookupAnswer {
        LookupAnswer::NotFound {
            image: "r.io/a:1".into(),
            detail: "whatever the host says".into(),
            attempts,
        }
    }

    #[test]
    fn a_refusal_and_a_404_is_absent_naming_both_secrets() {
        let answer = not_found(vec![
            attempt(AttemptOutcome::Unauthorized, "authentication required"),
            attempt(AttemptOutcome::NotFound, "manifest unknown"),
        ]);
        let failure =
            result_of(answer, &sources(&["team-a/first", "team-a/second"])).expect_err("a failure");
        assert_eq!(failure.kind, FailureKind::Absent);
        assert_eq!(
            failure.detail,
            "every pull secret the kubelet would try failed: pull secret \"team-a/first\" was refused (authentication required); pull secret \"team-a/second\" got 404 (manifest unknown)"
        );
    }

    #[test]
    fn a_single_secret_is_named_without_the_preamble() {
        let answer = not_found(vec![attempt(AttemptOutcome::NotFound, "manifest unknown")]);
        let failure = result_of(answer, &sources(&["team-a/regcred"])).expect_err("a failure");
        assert_eq!(failure.kind, FailureKind::Absent);
        assert_eq!(
            failure.detail,
            "pull secret \"team-a/regcred\" got 404 (manifest unknown)"
        );
    }

    #[test]
    fn a_host_claiming_more_than_its_attempts_show_is_not_believed() {
        // a host that stopped at the first 404 (the contract before issue 17)
        let stopped = not_found(vec![attempt(AttemptOutcome::NotFound, "manifest unknown")]);
        let failure =
            result_of(stopped, &sources(&["team-a/a", "team-a/b"])).expect_err("a failure");
        assert_eq!(failure.kind, FailureKind::Unreachable);
        assert!(
            failure
                .detail
                .contains("pull secret \"team-a/b\" not tried in time"),
            "{}",
            failure.detail
        );
        // a 500 next to a 404: a retry might succeed
        let mixed = not_found(vec![
            attempt(AttemptOutcome::Unreachable, "500 Internal Server Error"),
            attempt(AttemptOutcome::NotFound, "manifest unknown"),
        ]);
        let failure = result_of(mixed, &sources(&["team-a/a", "team-a/b"])).expect_err("failure");
        assert_eq!(failure.kind, FailureKind::Unreachable);
        assert!(
            failure.detail.ends_with("might succeed"),
            "{}",
            failure.detail
        );
        // every attempt refused: unauthorized, not absent
        let refused = not_found(vec![
            attempt(AttemptOutcome::Unauthorized, "401"),
            attempt(AttemptOutcome::Unauthorized, "403"),
        ]);
        let failure = result_of(refused, &sources(&["team-a/a", "team-a/b"])).expect_err("failure");
        assert_eq!(failure.kind, FailureKind::Unauthorized);
    }

    #[test]
    fn the_host_is_never_made_more_certain() {
        let answer = LookupAnswer::Unreachable {
            image: "r.io/a:1".into(),
            detail: "timed out".into(),
            attempts: vec![
                attempt(AttemptOutcome::NotFound, "manifest unknown"),
                attempt(AttemptOutcome::NotFound, "manifest unknown"),
            ],
        };
        let failure = result_of(answer, &sources(&["a/a", "a/b"])).expect_err("failure");
        assert_eq!(failure.kind, FailureKind::Unreachable);
    }

    #[test]
    fn without_attempts_or_credentials_the_hosts_word_stands() {
        let answer = LookupAnswer::NotFound {
            image: "r.io/a:1".into(),
            detail: "manifest unknown".into(),
            attempts: Vec::new(),
        };
        let failure = result_of(answer, &sources(&["a/a"])).expect_err("failure");
        assert_eq!(
            failure,
            Failure::new(FailureKind::Absent, "manifest unknown")
        );
        let anonymous = not_found(vec![attempt(AttemptOutcome::NotFound, "x")]);
        assert_eq!(
            result_of(anonymous, &[]).expect_err("failure").detail,
            "whatever the host says"
        );
    }

    #[test]
    fn credentials_without_a_secret_are_numbered() {
        let answer = LookupAnswer::Unauthorized {
            image: "r.io/a:1".into(),
            detail: "401".into(),
            attempts: vec![
                attempt(AttemptOutcome::Unauthorized, "401"),
                attempt(AttemptOutcome::Unauthorized, "401"),
            ],
        };
        let failure = result_of(answer, &[None, Some("a/b".into())]).expect_err("failure");
        assert_eq!(
            failure.detail,
            "credential 1 was refused (401); pull secret \"a/b\" was refused (401)"
        );
    }
}
