//! Registry lookups and their verdicts: one per distinct reference, either with the policy
//! server's credentials (`oci/v1/manifest_digest`, on every host) or, where the host offers
//! it and the operator enabled it, with the pods' own credentials in one batch
//! (`oci/v1/resolve_images`).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::credentials::Keyring;
use crate::host::{Host, ImageLookup, ImageResolution, ResolveImagesRequest};
use crate::reference::ImageReference;
use crate::verdict::{classify_host_error, summarise, Failure, FailureKind, Verdict};

/// The time an evaluation may spend on host calls, measured with the host's clock. A host
/// call cannot be interrupted, so the budget decides whether to make the *next* one.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    deadline: Duration,
    limit: Duration,
}

impl Budget {
    /// A budget of `limit` starting now.
    pub fn start(host: &impl Host, limit: Duration) -> Self {
        Budget {
            deadline: host.now() + limit,
            limit,
        }
    }

    /// What is left of the budget.
    pub fn remaining(&self, host: &impl Host) -> Duration {
        self.deadline.saturating_sub(host.now())
    }

    /// The verdict of an image the budget left no time for.
    fn not_checked(&self) -> Verdict {
        Verdict::Failed(Failure::new(
            FailureKind::Unreachable,
            format!(
                "not checked in time: the policy's time budget of {} ms (timeBudgetMs) was spent on earlier lookups",
                self.limit.as_millis()
            ),
        ))
    }
}

/// Verdicts by lookup reference, and a note when the credentialed path was unavailable.
#[derive(Debug, Default)]
pub struct Lookups {
    /// One verdict per distinct lookup reference.
    pub verdicts: BTreeMap<String, Verdict>,
    /// Why credentialed lookups were not used although enabled.
    pub fallback: Option<String>,
}

/// Looks up every distinct reference once. `keyring` is `Some` only when credentialed lookups
/// are enabled; if the host cannot do them, the stock capability answers instead.
pub fn look_up<'a>(
    references: impl IntoIterator<Item = &'a ImageReference>,
    keyring: Option<&Keyring>,
    budget: &Budget,
    host: &impl Host,
) -> Lookups {
    let mut distinct: BTreeMap<String, &ImageReference> = BTreeMap::new();
    for reference in references {
        distinct
            .entry(reference.lookup_reference())
            .or_insert(reference);
    }
    let mut lookups = Lookups::default();
    if let Some(keyring) = keyring {
        match resolve_with_credentials(&distinct, keyring, budget, host) {
            Ok(verdicts) => {
                lookups.verdicts = verdicts;
                return lookups;
            }
            Err(reason) => lookups.fallback = Some(reason),
        }
    }
    lookups.verdicts = distinct
        .into_keys()
        .map(|key| {
            let verdict = if budget.remaining(host).is_zero() {
                budget.not_checked()
            } else {
                match host.manifest_digest(&key) {
                    Ok(digest) => Verdict::Resolved { digest },
                    Err(text) => Verdict::Failed(classify_host_error(&text)),
                }
            };
            (key, verdict)
        })
        .collect();
    lookups
}

/// One `oci/v1/resolve_images` call for every reference, each with the credentials the
/// kubelet would try. An `Err` means the host could not do it and stock lookups should.
fn resolve_with_credentials(
    distinct: &BTreeMap<String, &ImageReference>,
    keyring: &Keyring,
    budget: &Budget,
    host: &impl Host,
) -> Result<BTreeMap<String, Verdict>, String> {
    let remaining = budget.remaining(host);
    if remaining.is_zero() {
        return Ok(distinct
            .keys()
            .map(|key| (key.clone(), budget.not_checked()))
            .collect());
    }
    let request = ResolveImagesRequest {
        lookups: distinct
            .iter()
            .map(|(key, reference)| ImageLookup {
                image: key.clone(),
                credentials: keyring
                    .lookup(&reference.name())
                    .into_iter()
                    .map(|credential| credential.to_capability_json())
                    .collect(),
            })
            .collect(),
        timeout_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
    };
    let response = host.resolve_images(&request).map_err(|e| summarise(&e))?;
    let mut answers: BTreeMap<String, Verdict> = response
        .results
        .into_iter()
        .map(|result| (result.image().to_owned(), verdict_of(result)))
        .collect();
    Ok(distinct
        .keys()
        .map(|key| {
            let verdict = answers.remove(key).unwrap_or_else(|| {
                Verdict::Failed(Failure::new(
                    FailureKind::Unreachable,
                    "the host's oci/v1/resolve_images answer has no result for this image",
                ))
            });
            (key.clone(), verdict)
        })
        .collect())
}

fn verdict_of(result: ImageResolution) -> Verdict {
    match result {
        ImageResolution::Found { digest, .. } => Verdict::Resolved { digest },
        ImageResolution::NotFound { detail, .. } => {
            Verdict::Failed(Failure::new(FailureKind::Absent, summarise(&detail)))
        }
        ImageResolution::Unauthorized { detail, .. } => {
            Verdict::Failed(Failure::new(FailureKind::Unauthorized, summarise(&detail)))
        }
        ImageResolution::Unreachable { detail, .. } => {
            Verdict::Failed(Failure::new(FailureKind::Unreachable, summarise(&detail)))
        }
    }
}
