//! The credential loop, as the kubelet runs it (`kuberuntime_image.go`, `PullImage`) and as
//! the project's shared contract states it (`docs/design/credentialed-lookups.md`): every credential
//! the keyring matched, in order; the first success wins; any error, a 404 included, moves on
//! to the next; no anonymous try once credentials matched; one anonymous try when none did.
//!
//! The lookup broker and the test host's `oci/v1/resolve_images` both run lookups through
//! [`run`] and classify the registry's answers with [`classify`], so that the two agree on
//! what a registry's answer proves.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE};
use tokio::time::Instant;

use crate::RegistryError;

/// What one attempt with one credential ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// The registry has the manifest.
    Found(Found),
    /// The registry said the manifest or the repository does not exist.
    NotFound {
        /// What the registry said, on one line.
        detail: String,
        /// The registry's OCI error envelope, as JSON, when it sent one.
        envelope: Option<String>,
    },
    /// The registry refused the credential (401, 403, `DENIED`, `UNAUTHORIZED`).
    Refused {
        /// What the registry said, on one line.
        detail: String,
    },
    /// No definitive answer: a retry, or the node, might succeed.
    Failed(Unanswered),
}

/// A found manifest: its digest, and for a `GET` its body and media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// `Docker-Content-Digest`.
    pub digest: String,
    /// The manifest (`GET` only).
    pub manifest: Option<Manifest>,
}

/// A manifest's bytes and media type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The body as the registry sent it.
    pub body: Vec<u8>,
    /// Its media type ([`media_type_of`]).
    pub media_type: String,
}

impl Manifest {
    /// A manifest whose media type is read from its body.
    pub fn new(body: Vec<u8>) -> Self {
        let media_type = media_type_of(&body);
        Manifest { body, media_type }
    }
}

/// Why an attempt ended without a definitive answer. Never carries credential bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unanswered {
    /// Nothing came back within `within`: the registry went silent.
    NoAnswer {
        /// The time the attempt was given.
        within: Duration,
        /// True when that was the rest of the whole lookup's time, not the attempt's own.
        lookup_deadline: bool,
    },
    /// An answer that settles nothing: 5xx, 429, an unknown OCI code, a transport or TLS
    /// error, an unreadable answer.
    Indefinite(String),
    /// A credential this client cannot send (an identity token alone): not tried.
    UnusableCredential,
}

impl fmt::Display for Unanswered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unanswered::NoAnswer {
                within,
                lookup_deadline: false,
            } => write!(f, "no answer within {} ms", within.as_millis()),
            Unanswered::NoAnswer {
                within,
                lookup_deadline: true,
            } => write!(f, "timed out after {} ms", within.as_millis()),
            Unanswered::Indefinite(reason) => f.write_str(reason),
            Unanswered::UnusableCredential => f.write_str(
                "credential not usable by this host (identity tokens are not supported), not tried",
            ),
        }
    }
}

impl Attempt {
    /// The contract's word for the attempt, for answers, logs and metrics.
    pub fn word(&self) -> &'static str {
        match self {
            Attempt::Found(_) => "found",
            Attempt::NotFound { .. } => "notFound",
            Attempt::Refused { .. } => "unauthorized",
            Attempt::Failed(_) => "unreachable",
        }
    }

    /// What the attempt established, on one line: the digest, or the registry's reason.
    pub fn detail(&self) -> String {
        match self {
            Attempt::Found(found) => found.digest.clone(),
            Attempt::NotFound { detail, .. } | Attempt::Refused { detail } => detail.clone(),
            Attempt::Failed(unanswered) => unanswered.to_string(),
        }
    }

    /// True when the registry went silent on this attempt.
    pub fn got_no_answer(&self) -> bool {
        matches!(self, Attempt::Failed(Unanswered::NoAnswer { .. }))
    }

    /// True when the registry let this attempt run out its own time-out: the registry is
    /// silent. An attempt cut by the lookup's deadline is not evidence of that (a lookup with
    /// many credentials spends the deadline on its own), so one tenant cannot mark a registry
    /// silent for every other.
    pub fn registry_was_silent(&self) -> bool {
        matches!(
            self,
            Attempt::Failed(Unanswered::NoAnswer {
                lookup_deadline: false,
                ..
            })
        )
    }
}

/// What a lookup established, per the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A credential found the manifest.
    Found {
        /// Which credential served (0-based; 0 also for the anonymous try).
        index: usize,
        /// Its answer.
        found: Found,
    },
    /// Every credential was tried, every attempt was definitive and at least one said 404:
    /// the pull will certainly fail.
    NotFound {
        /// The first 404's OCI error envelope, if the registry sent one.
        envelope: Option<String>,
    },
    /// Every credential was tried and refused.
    Unauthorized,
    /// An attempt had no definitive answer, or credentials were left untried.
    Unreachable {
        /// The first such attempt's reason.
        reason: Unanswered,
    },
}

impl Outcome {
    /// The contract's word for the outcome.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Found { .. } => "found",
            Outcome::NotFound { .. } => "notFound",
            Outcome::Unauthorized => "unauthorized",
            Outcome::Unreachable { .. } => "unreachable",
        }
    }
}

/// One lookup's attempts and what they add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// What the attempts establish.
    pub outcome: Outcome,
    /// Every attempt made, in credential order.
    pub attempts: Vec<Attempt>,
    /// False when the deadline left credentials untried.
    pub complete: bool,
}

/// Tries `credentials` in order with `attempt` (given each credential, `None` meaning the
/// anonymous try), stopping at the first success. An attempt still running at `deadline` ends
/// the loop as [`Unanswered::NoAnswer`] after `timeout`, the credentials after it untried.
pub async fn run<C, F, Fut>(
    credentials: Vec<C>,
    deadline: Instant,
    timeout: Duration,
    mut attempt: F,
) -> Lookup
where
    F: FnMut(Option<C>) -> Fut,
    Fut: Future<Output = Attempt>,
{
    let tries: Vec<Option<C>> = if credentials.is_empty() {
        vec![None]
    } else {
        credentials.into_iter().map(Some).collect()
    };
    let total = tries.len();
    let mut attempts = Vec::with_capacity(total);
    for credential in tries {
        let Ok(result) = tokio::time::timeout_at(deadline, attempt(credential)).await else {
            attempts.push(Attempt::Failed(Unanswered::NoAnswer {
                within: timeout,
                lookup_deadline: true,
            }));
            break;
        };
        let found = matches!(result, Attempt::Found(_));
        attempts.push(result);
        if found {
            break;
        }
    }
    let complete = attempts.len() == total || matches!(attempts.last(), Some(Attempt::Found(_)));
    Lookup {
        outcome: conclude(&attempts, complete),
        attempts,
        complete,
    }
}

/// What `attempts` add up to (the contract's table); `complete` is false when credentials
/// were left untried.
pub fn conclude(attempts: &[Attempt], complete: bool) -> Outcome {
    if let Some((index, found)) = attempts.iter().enumerate().find_map(|(i, a)| match a {
        Attempt::Found(found) => Some((i, found.clone())),
        _ => None,
    }) {
        return Outcome::Found { index, found };
    }
    if let Some(reason) = attempts.iter().find_map(|a| match a {
        Attempt::Failed(reason) => Some(reason.clone()),
        _ => None,
    }) {
        return Outcome::Unreachable { reason };
    }
    if attempts.is_empty() || !complete {
        return Outcome::Unreachable {
            reason: Unanswered::Indefinite("not every credential was tried".into()),
        };
    }
    match attempts.iter().find_map(|a| match a {
        Attempt::NotFound { envelope, .. } => Some(envelope.clone()),
        _ => None,
    }) {
        Some(envelope) => Outcome::NotFound { envelope },
        None => Outcome::Unauthorized,
    }
}

/// Classifies a failed attempt from the registry client's error: what proves the manifest
/// absent, what is a refusal, and what settles nothing.
pub fn classify(error: &RegistryError) -> Attempt {
    match error {
        RegistryError::Oci(oci) => classify_oci(oci),
        // a 404 is the registry's answer whatever its code says; a DENIED in it stays a refusal
        RegistryError::NotFoundStatus(oci) => match classify_oci(oci) {
            Attempt::Failed(_) => Attempt::NotFound {
                detail: one_line(oci),
                envelope: match oci {
                    OciDistributionError::RegistryError { envelope, .. } => {
                        serde_json::to_string(envelope).ok()
                    }
                    _ => None,
                },
            },
            definitive => definitive,
        },
        other => Attempt::Failed(Unanswered::Indefinite(one_line(other))),
    }
}

fn classify_oci(error: &OciDistributionError) -> Attempt {
    match error {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Attempt::Refused {
            detail: error.to_string(),
        },
        OciDistributionError::RegistryError { envelope, .. } => {
            let messages: Vec<&str> = envelope.errors.iter().map(|e| e.message.as_str()).collect();
            let detail = if messages.iter().all(|m| m.is_empty()) {
                error.to_string()
            } else {
                messages.join("; ")
            };
            let has =
                |wanted: &[OciErrorCode]| envelope.errors.iter().any(|e| wanted.contains(&e.code));
            if has(&[
                OciErrorCode::ManifestUnknown,
                OciErrorCode::NameUnknown,
                // Harbor's code for a missing artifact or repository
                OciErrorCode::NotFound,
            ]) {
                Attempt::NotFound {
                    detail,
                    envelope: serde_json::to_string(envelope).ok(),
                }
            } else if has(&[OciErrorCode::Denied, OciErrorCode::Unauthorized]) {
                Attempt::Refused { detail }
            } else {
                Attempt::Failed(Unanswered::Indefinite(detail))
            }
        }
        OciDistributionError::ServerError { code, .. } => match code {
            401 | 403 => Attempt::Refused {
                detail: error.to_string(),
            },
            404 => Attempt::NotFound {
                detail: error.to_string(),
                envelope: None,
            },
            _ => Attempt::Failed(Unanswered::Indefinite(error.to_string())),
        },
        other => Attempt::Failed(Unanswered::Indefinite(one_line(other))),
    }
}

/// The manifest's own `mediaType`, else what its shape says (an index has `manifests`).
pub fn media_type_of(body: &[u8]) -> String {
    let value: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    match value.get("mediaType").and_then(|m| m.as_str()) {
        Some(media_type) => media_type.to_owned(),
        None if value.get("manifests").is_some() => OCI_IMAGE_INDEX_MEDIA_TYPE.into(),
        None => OCI_IMAGE_MEDIA_TYPE.into(),
    }
}

/// An error and its causes on one line, each cause once (the registry client's texts carry
/// URLs and statuses, never credentials).
pub fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
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
mod tests;
