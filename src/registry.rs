//! Registry lookups and their verdicts: one per distinct location, either with the policy
//! server's credentials (`oci/v1/manifest_digest`, on every host) or, where the host offers it
//! and the operator enabled it, with each pod's own credentials in one batch
//! (`oci/v1/resolve_images`); and the verdict of a mirror chain from its locations' verdicts.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::credentials::Keyring;
use crate::host::{Host, ImageLookup, ImageResolution, ResolveImagesRequest};
use crate::mirrors::Location;
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

    /// True when no new host call should start.
    pub fn is_spent(&self, host: &impl Host) -> bool {
        self.remaining(host).is_zero()
    }

    /// The failure of a check the budget left no time for.
    pub fn not_checked(&self) -> Failure {
        Failure::new(
            FailureKind::Unreachable,
            format!(
                "not checked in time: the policy's time budget of {} ms (timeBudgetMs) was spent on earlier lookups",
                self.limit.as_millis()
            ),
        )
    }
}

/// One location to look up, with the index of the pod spec whose credentials apply.
#[derive(Debug, Clone, Copy)]
pub struct LookupRequest<'a> {
    /// The image at that location.
    pub reference: &'a ImageReference,
    /// Which pod spec (index into the keyrings) the image belongs to.
    pub unit: usize,
}

/// Verdicts of every location looked up.
#[derive(Debug, Default)]
pub struct Lookups {
    verdicts: BTreeMap<(Option<usize>, String), Verdict>,
    credentialed: bool,
    /// Why credentialed lookups were not used although enabled.
    pub fallback: Option<String>,
}

impl Lookups {
    /// The verdict for `reference` looked up for pod spec `unit`: from the credentialed batch,
    /// or looked up now with the stock capability, once per distinct reference. Stock lookups
    /// are made on demand so that a mirror chain stops at the first location with the image.
    pub fn verdict(
        &mut self,
        unit: usize,
        reference: &ImageReference,
        budget: &Budget,
        host: &impl Host,
    ) -> Verdict {
        let key = (
            self.credentialed.then_some(unit),
            reference.lookup_reference(),
        );
        if let Some(verdict) = self.verdicts.get(&key) {
            return verdict.clone();
        }
        let verdict = if budget.is_spent(host) {
            Verdict::Failed(budget.not_checked())
        } else {
            match host.manifest_digest(&key.1) {
                Ok(digest) => Verdict::Resolved { digest },
                Err(text) => Verdict::Failed(classify_host_error(&text)),
            }
        };
        self.verdicts.insert(key, verdict.clone());
        verdict
    }

    /// True when the verdicts came from the pods' own credentials.
    pub fn used_pod_credentials(&self) -> bool {
        self.credentialed
    }
}

/// With `keyrings` (one per pod spec), looks every location up at once through the credentialed
/// capability. Otherwise, or if the host cannot do it, [`Lookups::verdict`] asks the stock
/// capability on demand.
pub fn look_up(
    requests: &[LookupRequest<'_>],
    keyrings: Option<&[&Keyring]>,
    budget: &Budget,
    host: &impl Host,
) -> Lookups {
    let mut lookups = Lookups::default();
    if let Some(keyrings) = keyrings {
        match resolve_with_credentials(requests, keyrings, budget, host) {
            Ok(verdicts) => {
                lookups.verdicts = verdicts;
                lookups.credentialed = true;
                return lookups;
            }
            Err(reason) => lookups.fallback = Some(reason),
        }
    }
    lookups
}

/// One `oci/v1/resolve_images` call for every distinct (pod spec, location), each with the
/// credentials the kubelet would try. An `Err` means the host could not do it.
fn resolve_with_credentials(
    requests: &[LookupRequest<'_>],
    keyrings: &[&Keyring],
    budget: &Budget,
    host: &impl Host,
) -> Result<BTreeMap<(Option<usize>, String), Verdict>, String> {
    let mut keys: Vec<(Option<usize>, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut lookups = Vec::new();
    for request in requests {
        let key = (Some(request.unit), request.reference.lookup_reference());
        if !seen.insert(key.clone()) {
            continue;
        }
        let credentials = keyrings
            .get(request.unit)
            .map(|keyring| keyring.lookup(&request.reference.name()))
            .unwrap_or_default();
        lookups.push(ImageLookup {
            image: key.1.clone(),
            credentials: credentials
                .into_iter()
                .map(|c| c.to_capability_json())
                .collect(),
        });
        keys.push(key);
    }
    let remaining = budget.remaining(host);
    if remaining.is_zero() {
        return Ok(keys
            .into_iter()
            .map(|key| (key, Verdict::Failed(budget.not_checked())))
            .collect());
    }
    let request = ResolveImagesRequest {
        lookups,
        timeout_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
    };
    let response = host.resolve_images(&request).map_err(|e| summarise(&e))?;
    if response.results.len() != keys.len() {
        return Err(format!(
            "the host answered {} results for {} lookups",
            response.results.len(),
            keys.len()
        ));
    }
    Ok(keys
        .into_iter()
        .zip(response.results)
        .map(|(key, result)| {
            let verdict = if result.image() == key.1 {
                verdict_of(result)
            } else {
                Verdict::Failed(Failure::new(
                    FailureKind::Unreachable,
                    format!("the host answered for {} instead", result.image()),
                ))
            };
            (key, verdict)
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

/// The outcome of a mirror chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainVerdict {
    /// A location has the image.
    Resolved {
        /// The manifest digest.
        digest: String,
        /// The location that had it.
        location: ImageReference,
        /// True when that location is a mirror.
        is_mirror: bool,
    },
    /// No location has it, or none could say.
    Failed(Failure),
}

/// Combines the verdicts of a chain as a node would experience it: the first location that has
/// the image wins; absent only when every location said absent; otherwise the most telling
/// uncertainty. With more than one location the detail names each one and what it said.
pub fn chain_verdict(
    locations: &[Location],
    mut verdict: impl FnMut(&ImageReference) -> Option<Verdict>,
) -> ChainVerdict {
    let mut failures: Vec<(&Location, Failure)> = Vec::new();
    for location in locations {
        match verdict(&location.reference) {
            Some(Verdict::Resolved { digest }) => {
                return ChainVerdict::Resolved {
                    digest,
                    location: location.reference.clone(),
                    is_mirror: location.is_mirror,
                }
            }
            Some(Verdict::Failed(failure)) => failures.push((location, failure)),
            None => {}
        }
    }
    let rank = |kind: FailureKind| match kind {
        FailureKind::Unreachable => 0,
        FailureKind::HostRefused => 1,
        FailureKind::Unauthorized => 2,
        _ => 3,
    };
    let Some(kind) = failures
        .iter()
        .map(|(_, f)| f.kind)
        .min_by_key(|k| rank(*k))
    else {
        return ChainVerdict::Failed(Failure::new(
            FailureKind::Unreachable,
            "no location to look the image up at",
        ));
    };
    if failures.len() == 1 {
        return ChainVerdict::Failed(failures.remove(0).1);
    }
    let detail = failures
        .iter()
        .map(|(location, failure)| {
            let role = if location.is_mirror {
                "mirror"
            } else {
                "primary"
            };
            format!(
                "{role} {}: {} ({})",
                location.reference.lookup_reference(),
                failure.kind,
                failure.detail
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    ChainVerdict::Failed(Failure::new(kind, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(image: &str, is_mirror: bool) -> Location {
        Location {
            reference: ImageReference::parse(image).unwrap(),
            is_mirror,
        }
    }

    fn failed(kind: FailureKind, detail: &str) -> Option<Verdict> {
        Some(Verdict::Failed(Failure::new(kind, detail)))
    }

    #[test]
    fn the_first_location_with_the_image_wins() {
        let chain = [location("m.local/a:1", true), location("r.io/a:1", false)];
        let verdict = chain_verdict(&chain, |r| {
            if r.registry() == "m.local" {
                failed(FailureKind::Absent, "manifest unknown")
            } else {
                Some(Verdict::Resolved {
                    digest: "sha256:x".into(),
                })
            }
        });
        assert_eq!(
            verdict,
            ChainVerdict::Resolved {
                digest: "sha256:x".into(),
                location: chain[1].reference.clone(),
                is_mirror: false
            }
        );
    }

    #[test]
    fn absent_only_when_every_location_says_so_and_each_is_named() {
        let chain = [location("m.local/a:1", true), location("r.io/a:1", false)];
        let ChainVerdict::Failed(all_absent) =
            chain_verdict(&chain, |_| failed(FailureKind::Absent, "manifest unknown"))
        else {
            panic!("expected a failure");
        };
        assert_eq!(all_absent.kind, FailureKind::Absent);
        assert_eq!(
            all_absent.detail,
            "mirror m.local/a:1: not found (manifest unknown); primary r.io/a:1: not found (manifest unknown)"
        );
        let ChainVerdict::Failed(mixed) = chain_verdict(&chain, |r| {
            if r.registry() == "m.local" {
                failed(FailureKind::Unreachable, "connection refused")
            } else {
                failed(FailureKind::Absent, "manifest unknown")
            }
        }) else {
            panic!("expected a failure");
        };
        assert_eq!(
            mixed.kind,
            FailureKind::Unreachable,
            "an unreachable mirror might have had it"
        );
    }

    #[test]
    fn a_single_location_keeps_its_own_failure() {
        let chain = [location("r.io/a:1", false)];
        let ChainVerdict::Failed(failure) =
            chain_verdict(&chain, |_| failed(FailureKind::Unauthorized, "401"))
        else {
            panic!("expected a failure");
        };
        assert_eq!(failure, Failure::new(FailureKind::Unauthorized, "401"));
    }
}
