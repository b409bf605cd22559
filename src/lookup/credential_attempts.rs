//! What a credentialed lookup's answer means, credential by credential. The kubelet
//! (`kuberuntime_image.go`, `PullImage`) tries every credential its keyring matched, in order;
//! any error, a 404 included, moves on to the next, and the pull fails only when all failed.
//! So a lookup is `absent` only when every credential was tried, each got a definitive answer
//! (404 or a refusal) and at least one a 404; a refusal next to a 404 is still certain. The
//! host concludes that (`docs/design/credentialed-lookups.md`); this module checks its conclusion
//! against the attempts it reports, never making it more certain, and words the failure so that
//! it names which pull secret saw a 404 and which was refused: secrets by name, never content.

use crate::host::{summarise, Attempt, AttemptOutcome, LookupAnswer};
use crate::vocabulary::failure::LookupResult;
use crate::vocabulary::failure::{Failure, FailureKind};

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

/// `pull secret "team-a/first" was refused, pull secret "team-a/second" got 404 (…; …)`: who
/// saw what, in the kubelet's order and grouped by outcome, then the registry's words (last,
/// so that a warning cut to its length keeps the names).
fn describe(kind: FailureKind, attempts: &[Attempt], sources: &[Option<String>]) -> String {
    // (what, singular verb, plural verb) of each attempt, then of each credential not tried
    let outcomes = attempts
        .iter()
        .map(|attempt| match attempt.outcome {
            AttemptOutcome::NotFound => ("got 404", "got 404"),
            AttemptOutcome::Unauthorized => ("was refused", "were refused"),
            AttemptOutcome::Unreachable => ("got no definitive answer", "got no definitive answer"),
            AttemptOutcome::Found => ("read it", "read it"),
        })
        .chain(
            (attempts.len()..sources.len())
                .map(|_| ("was not tried in time", "were not tried in time")),
        );
    let mut groups: Vec<((&str, &str), Vec<usize>)> = Vec::new();
    for (i, verbs) in outcomes.enumerate() {
        match groups.iter_mut().find(|(v, _)| *v == verbs) {
            Some((_, members)) => members.push(i),
            None => groups.push((verbs, vec![i])),
        }
    }
    let said: Vec<String> = groups
        .iter()
        .map(|((singular, plural), members)| {
            let verb = if members.len() == 1 { singular } else { plural };
            format!("{} {verb}", name_all(members, sources))
        })
        .collect();
    let mut details: Vec<String> = Vec::new();
    for attempt in attempts {
        let detail = summarise(&attempt.detail);
        if !detail.is_empty() && !details.contains(&detail) {
            details.push(detail);
        }
    }
    let details = if details.is_empty() {
        String::new()
    } else {
        format!(" ({})", details.join("; "))
    };
    let said = said.join(", ");
    match kind {
        FailureKind::Absent if sources.len() > 1 => {
            format!("every pull secret the kubelet would try failed: {said}{details}")
        }
        FailureKind::Unreachable => {
            format!("{said}: not certain, a later try might succeed{details}")
        }
        // "not authorized", and "the pod's pull secrets … were refused", say the verb already
        FailureKind::Unauthorized if groups.len() == 1 => {
            let (_, members) = &groups[0];
            format!("{}{details}", name_all(members, sources))
        }
        _ => format!("{said}{details}"),
    }
}

/// `pull secret "a"`, `pull secrets "a" and "b"`, `credential 1 and pull secret "b"`.
fn name_all(members: &[usize], sources: &[Option<String>]) -> String {
    let secrets: Option<Vec<&str>> = members
        .iter()
        .map(|&i| sources.get(i).and_then(Option::as_deref))
        .collect();
    let names: Vec<String> = match secrets {
        Some(secrets) => {
            let quoted: Vec<String> = secrets.iter().map(|s| format!("{s:?}")).collect();
            let noun = if quoted.len() == 1 {
                "pull secret"
            } else {
                "pull secrets"
            };
            return format!("{noun} {}", and_list(&quoted));
        }
        None => members
            .iter()
            .map(|&i| match sources.get(i).and_then(Option::as_deref) {
                Some(secret) => format!("pull secret {secret:?}"),
                None => format!("credential {}", i + 1),
            })
            .collect(),
    };
    and_list(&names)
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
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
            "every pull secret the kubelet would try failed: pull secret \"team-a/first\" was refused, pull secret \"team-a/second\" got 404 (authentication required; manifest unknown)"
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
        // a host that stopped at the first 404, as hosts did before the contract required every
        // credential to be tried whatever the error
        let stopped = not_found(vec![attempt(AttemptOutcome::NotFound, "manifest unknown")]);
        let failure =
            result_of(stopped, &sources(&["team-a/a", "team-a/b"])).expect_err("a failure");
        assert_eq!(failure.kind, FailureKind::Unreachable);
        assert!(
            failure.detail.starts_with("pull secret \"team-a/a\" got 404, pull secret \"team-a/b\" was not tried in time: not certain"),
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
        assert_eq!(
            failure.detail,
            "pull secret \"team-a/a\" got no definitive answer, pull secret \"team-a/b\" got 404: not certain, a later try might succeed (500 Internal Server Error; manifest unknown)"
        );
        // every attempt refused: unauthorized, not absent
        let refused = not_found(vec![
            attempt(AttemptOutcome::Unauthorized, "401"),
            attempt(AttemptOutcome::Unauthorized, "403"),
        ]);
        let failure = result_of(refused, &sources(&["team-a/a", "team-a/b"])).expect_err("failure");
        assert_eq!(failure.kind, FailureKind::Unauthorized);
        assert_eq!(
            failure.detail,
            "pull secrets \"team-a/a\" and \"team-a/b\" (401; 403)"
        );
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
        assert_eq!(failure.detail, "credential 1 and pull secret \"a/b\" (401)");
    }
}
