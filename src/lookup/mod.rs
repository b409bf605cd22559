//! Registry lookups: one per distinct location, either with the policy server's credentials
//! (`oci/v1/manifest_digest`, on every host, made on demand) or, where the host offers it and
//! the operator enabled it, with each pod's own credentials in one batch
//! (`oci/v1/resolve_images`); and what a mirror chain's lookups add up to.
//!
//! The folder holds the rewrite to the lookup broker ([`broker`]) and what a credentialed
//! lookup's attempts mean ([`credential_attempts`]).

pub mod broker;
pub mod credential_attempts;

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use crate::host::{Host, ImageLookup, ResolveImagesRequest};
use crate::lookup::broker::BrokerRoutes;
use crate::plan::{Pod, PodId};
use crate::settings::lookup_scope::Scope;
use crate::settings::mirrors::Location;
use crate::vocabulary::failure::{Failure, FailureKind};
use crate::vocabulary::reference::ImageReference;
use kubelet_credentials::Keyring;

pub use crate::host::budget::Budget;
pub use crate::vocabulary::failure::LookupResult;

/// Lookups are kept apart by whose credentials they used: the policy server's (`credentials`
/// `None`) or those a pod's keyring gives the image's own name (the kubelet looks credentials
/// up once, by that name, and the runtime sends them to every location of the chain).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct LookupKey {
    credentials: Option<(PodId, String)>,
    reference: String,
}

/// The lookups of one request, each made at most once.
#[derive(Debug)]
pub struct Lookups<'s> {
    scope: &'s dyn Scope,
    /// What the scope says of each registry asked about (few per request).
    refusals: Vec<(String, Option<Failure>)>,
    results: BTreeMap<LookupKey, LookupResult>,
    credentialed: bool,
    /// Why credentialed lookups were not used although enabled.
    pub fallback: Option<String>,
    /// Lookups that go through the lookup broker, when one is configured.
    broker: Option<BrokerRoutes>,
    /// The (pod, image name) whose lookups went through the broker.
    brokered: BTreeSet<(PodId, String)>,
}

impl<'s> Lookups<'s> {
    /// Starts the request's lookups. With `credentialed` (and every pod's secrets read), every
    /// location of every check is looked up at once through the credentialed capability;
    /// otherwise, or if the host cannot do it, `Lookups::at` asks the stock capability on
    /// demand.
    pub fn start(
        pods: &[Pod],
        scope: &'s dyn Scope,
        credentialed: bool,
        budget: &Budget,
        host: &impl Host,
    ) -> Self {
        let mut lookups = Lookups {
            scope,
            refusals: Vec::new(),
            results: BTreeMap::new(),
            credentialed: false,
            fallback: None,
            broker: None,
            brokered: BTreeSet::new(),
        };
        let keyrings: Option<Vec<&Keyring>> = credentialed
            .then(|| pods.iter().map(Pod::keyring).collect())
            .flatten();
        if let Some(keyrings) = keyrings {
            match look_up_with_credentials(pods, &keyrings, scope, budget, host) {
                Ok(results) => {
                    lookups.results = results;
                    lookups.credentialed = true;
                }
                Err(reason) => lookups.fallback = Some(reason),
            }
        }
        lookups
    }

    /// The result for the location `reference` of `image`, looked up for `pod`: from the
    /// credentialed batch, or looked up now with the stock capability (at the lookup broker
    /// where its routes send it), once per distinct reference. Stock lookups are made on
    /// demand so that a mirror chain stops at the first location with the image.
    fn at(
        &mut self,
        pod: PodId,
        image: &ImageReference,
        reference: &ImageReference,
        budget: &Budget,
        host: &impl Host,
    ) -> LookupResult {
        // through the broker (the reference rewritten for it), unless the batch answered
        let brokered = match &self.broker {
            Some(routes) if !self.credentialed => routes
                .reference(pod, image, reference)
                .map(|rewritten| (routes, rewritten)),
            _ => None,
        };
        let key = LookupKey {
            credentials: (self.credentialed || brokered.as_ref().is_some_and(|(_, r)| r.is_ok()))
                .then(|| (pod, image.name())),
            reference: reference.lookup_reference(),
        };
        // one search of the results, not a `get` and an `insert`: a key is a long string
        let entry = match self.results.entry(key) {
            Entry::Occupied(known) => return known.get().clone(),
            Entry::Vacant(entry) => entry,
        };
        // the scope judges the real registry, and failures name it, never the broker
        let result = match (refusal(&mut self.refusals, self.scope, reference), brokered) {
            (Some(refusal), _) => Err(refusal),
            (None, None) => budget.call(host, || host.manifest_digest(&entry.key().reference)),
            (None, Some((_, Err(unsealable)))) => Err(unsealable),
            (None, Some((routes, Ok(rewritten)))) => {
                self.brokered.insert((pod, image.name()));
                let result = budget.call_explained(
                    host,
                    || host.manifest_digest(&rewritten),
                    |error| routes.explain(&error, &rewritten, reference),
                );
                routes.settle(pod, image, reference, result)
            }
        };
        entry.insert(result).clone()
    }

    /// Sends the lookups `routes` says to the lookup broker (unless the credentialed batch
    /// already answered them).
    pub fn through_broker(&mut self, routes: BrokerRoutes) {
        self.broker = Some(routes);
    }

    /// True when the lookups of `image` for `pod` used the pod's own credentials (the
    /// credentialed batch, or the lookup broker).
    pub fn used_pod_credentials_for(&self, pod: PodId, image: &ImageReference) -> bool {
        self.credentialed || self.brokered.contains(&(pod, image.name()))
    }

    /// Where a node pulling `image` through `chain` for `pod` finds it, or why it does not.
    pub fn chain<'c>(
        &mut self,
        pod: PodId,
        image: &ImageReference,
        chain: &'c [Location],
        budget: &Budget,
        host: &impl Host,
    ) -> Result<Found<'c>, Failure> {
        chain_result(chain, |reference| {
            self.at(pod, image, reference, budget, host)
        })
    }

    /// True when the results came from the pods' own credentials.
    pub fn used_pod_credentials(&self) -> bool {
        self.credentialed
    }
}

/// [`Scope::refusal`], asked once per registry of the request (`known`).
fn refusal(
    known: &mut Vec<(String, Option<Failure>)>,
    scope: &dyn Scope,
    reference: &ImageReference,
) -> Option<Failure> {
    let registry = reference.registry();
    if let Some((_, refusal)) = known.iter().find(|(r, _)| r == registry) {
        return refusal.clone();
    }
    let refusal = scope.refusal(reference);
    known.push((registry.to_owned(), refusal.clone()));
    refusal
}

/// The lookups of a credentialed batch, in request order, and the locations the scope refused.
#[derive(Default)]
struct Batch {
    keys: Vec<LookupKey>,
    lookups: Vec<ImageLookup>,
    /// Per lookup, the pull secret each credential came from (names for messages).
    sources: Vec<Vec<Option<String>>>,
    refused: BTreeMap<LookupKey, LookupResult>,
}

impl Batch {
    /// Every distinct (pod, image, location): one keyring lookup by the image's own name, whose
    /// credentials go to every location of its chain, as the kubelet and the runtime do.
    fn of(pods: &[Pod], keyrings: &[&Keyring], scope: &dyn Scope) -> Self {
        let mut batch = Batch::default();
        let mut refusals = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let checks = pods.iter().zip(keyrings).flat_map(|(pod, keyring)| {
            pod.checks
                .iter()
                .map(move |check| (pod.id, *keyring, check))
        });
        for (pod, keyring, check) in checks {
            let Ok(image) = &check.reference else {
                continue;
            };
            let name = image.name();
            let matched = keyring.lookup(&name);
            let credentials: Vec<_> = matched.iter().map(|c| c.to_capability_json()).collect();
            let sources: Vec<_> = matched
                .iter()
                .map(|c| c.source().map(str::to_owned))
                .collect();
            for location in &check.chain {
                let key = LookupKey {
                    credentials: Some((pod, name.clone())),
                    reference: location.reference.lookup_reference(),
                };
                if !seen.insert(key.clone()) {
                    continue;
                }
                if let Some(refusal) = refusal(&mut refusals, scope, &location.reference) {
                    batch.refused.insert(key, Err(refusal));
                    continue;
                }
                batch.lookups.push(ImageLookup {
                    image: key.reference.clone(),
                    credentials: credentials.clone(),
                });
                batch.sources.push(sources.clone());
                batch.keys.push(key);
            }
        }
        batch
    }
}

/// One `oci/v1/resolve_images` call for the whole [`Batch`]. An `Err` says why the host could
/// not do it.
fn look_up_with_credentials(
    pods: &[Pod],
    keyrings: &[&Keyring],
    scope: &dyn Scope,
    budget: &Budget,
    host: &impl Host,
) -> Result<BTreeMap<LookupKey, LookupResult>, String> {
    let Batch {
        keys,
        lookups: batch,
        sources,
        refused,
    } = Batch::of(pods, keyrings, scope);
    let remaining = budget.remaining(host);
    if keys.is_empty() || remaining.is_zero() {
        let results = keys
            .into_iter()
            .map(|key| (key, Err(budget.not_checked(host))));
        return Ok(refused.into_iter().chain(results).collect());
    }
    let request = ResolveImagesRequest {
        lookups: batch,
        timeout_ms: u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX),
    };
    let response = budget
        .measure(host, || host.resolve_images(&request))
        .map_err(|e| e.summary())?;
    if response.results.len() != keys.len() {
        return Err(format!(
            "the host answered {} results for {} lookups",
            response.results.len(),
            keys.len()
        ));
    }
    Ok(refused
        .into_iter()
        .chain(keys.into_iter().zip(response.results).zip(sources).map(
            |((key, answer), sources)| {
                let result = if answer.image() == key.reference {
                    credential_attempts::result_of(answer, &sources)
                } else {
                    Err(Failure::new(
                        FailureKind::Unreachable,
                        format!("the host answered for {} instead", answer.image()),
                    ))
                };
                (key, result)
            },
        ))
        .collect())
}

/// Where a chain found the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found<'c> {
    /// The manifest digest.
    pub digest: String,
    /// The location that had it, one of its chain's.
    pub location: &'c Location,
}

/// Combines the lookups of a chain as a node would experience them: the first location that
/// has the image wins; absent only when every location said absent; otherwise the most telling
/// uncertainty. With more than one location the detail names each one and what it said.
pub fn chain_result<'c>(
    locations: &'c [Location],
    mut look_up: impl FnMut(&ImageReference) -> LookupResult,
) -> Result<Found<'c>, Failure> {
    let mut failures: Vec<(&Location, Failure)> = Vec::new();
    for location in locations {
        match look_up(&location.reference) {
            Ok(digest) => return Ok(Found { digest, location }),
            Err(failure) => failures.push((location, failure)),
        }
    }
    // What is least certain wins: a location that was not asked (or could not answer) might
    // have had the image.
    let rank = |kind: FailureKind| match kind {
        FailureKind::Unreachable | FailureKind::NotLookedUp => 0,
        FailureKind::HostRefused => 1,
        FailureKind::Unauthorized => 2,
        _ => 3,
    };
    let Some(kind) = failures
        .iter()
        .map(|(_, f)| f.kind)
        .min_by_key(|k| rank(*k))
    else {
        return Err(Failure::new(
            FailureKind::Unreachable,
            "no location to look the image up at",
        ));
    };
    if failures.len() == 1 {
        return Err(failures.remove(0).1);
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
    // the message names the image's own registry: its suggestions, when it is the one primary
    let mut primaries = failures.iter().filter(|(location, _)| !location.is_mirror);
    let suggestions = match (kind, primaries.next(), primaries.next()) {
        (FailureKind::Absent, Some((_, primary)), None) => primary.suggestions.clone(),
        _ => Vec::new(),
    };
    Err(Failure {
        suggestions,
        ..Failure::new(kind, detail)
    })
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

    fn failed(kind: FailureKind, detail: &str) -> LookupResult {
        Err(Failure::new(kind, detail))
    }

    #[test]
    fn the_first_location_with_the_image_wins() {
        let chain = [location("m.local/a:1", true), location("r.io/a:1", false)];
        let found = chain_result(&chain, |r| {
            if r.registry() == "m.local" {
                failed(FailureKind::Absent, "manifest unknown")
            } else {
                Ok("sha256:x".into())
            }
        });
        assert_eq!(
            found,
            Ok(Found {
                digest: "sha256:x".into(),
                location: &chain[1],
            })
        );
    }

    #[test]
    fn absent_only_when_every_location_says_so_and_each_is_named() {
        let chain = [location("m.local/a:1", true), location("r.io/a:1", false)];
        let Err(all_absent) =
            chain_result(&chain, |_| failed(FailureKind::Absent, "manifest unknown"))
        else {
            panic!("expected a failure");
        };
        assert_eq!(all_absent.kind, FailureKind::Absent);
        assert_eq!(
            all_absent.detail,
            "mirror m.local/a:1: not found (manifest unknown); primary r.io/a:1: not found (manifest unknown)"
        );
        let Err(mixed) = chain_result(&chain, |r| {
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
    fn an_absent_chain_suggests_the_tags_of_its_primary_only() {
        let chain = [location("m.local/a:1", true), location("r.io/a:1", false)];
        let suggesting = |tag: &str| Failure {
            suggestions: vec![tag.to_owned()],
            ..Failure::new(FailureKind::Absent, "manifest unknown")
        };
        let absent = |r: &ImageReference| {
            Err(suggesting(if r.registry() == "m.local" {
                "mirror-tag"
            } else {
                "1.0"
            }))
        };
        let Err(failure) = chain_result(&chain, absent) else {
            panic!("expected a failure");
        };
        assert_eq!(failure.suggestions, ["1.0"]);
        let Err(uncertain) = chain_result(&chain, |r| {
            if r.registry() == "m.local" {
                failed(FailureKind::Unreachable, "connection refused")
            } else {
                Err(suggesting("1.0"))
            }
        }) else {
            panic!("expected a failure");
        };
        assert!(uncertain.suggestions.is_empty(), "{uncertain:?}");
    }

    #[test]
    fn a_single_location_keeps_its_own_failure() {
        let chain = [location("r.io/a:1", false)];
        let Err(failure) = chain_result(&chain, |_| failed(FailureKind::Unauthorized, "401"))
        else {
            panic!("expected a failure");
        };
        assert_eq!(failure, Failure::new(FailureKind::Unauthorized, "401"));
    }

    #[test]
    fn a_location_not_asked_keeps_the_chain_uncertain() {
        let chain = [location("m.local/a:1", true), location("r.io/a:1", false)];
        for order in [[true, false], [false, true]] {
            let chain: Vec<Location> = order
                .iter()
                .map(|&mirror_first| chain[usize::from(!mirror_first)].clone())
                .collect();
            let Err(failure) = chain_result(&chain, |r| {
                if r.registry() == "m.local" {
                    failed(FailureKind::NotLookedUp, "not in lookupRegistries")
                } else {
                    failed(FailureKind::Absent, "manifest unknown")
                }
            }) else {
                panic!("expected a failure");
            };
            assert_eq!(failure.kind, FailureKind::NotLookedUp, "{order:?}");
        }
    }
}
