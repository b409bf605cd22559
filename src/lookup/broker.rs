//! The lookup broker (`broker/`, docs/broker.md): on a stock policy server, whose OCI
//! capabilities only use the policy server's own credentials, a lookup that needs a pod's pull
//! secrets is rewritten to a reference on the broker's host that encodes the request's
//! namespace, the pod's pull secret names (or its ServiceAccount) and the real image
//! (`crates/broker-reference`, its `spec` module). The policy server looks that up with the
//! credential it holds for the broker; the broker looks the real image up with the pod's
//! secrets, the kubelet's way, and answers with the registry's status and digest.
//!
//! Three rules keep one namespace's secrets out of another's lookups: the broker answers only
//! names sealed with the key of the Secret `lookupBroker.keySecret` names, which only this
//! policy is granted (so no other module of the policy server can write one), and only for
//! the broker host, the tag or digest and the minutes the seal names; the namespace
//! encoded is the admission request's, never anything an image says; and no lookup of a
//! reference on the broker's host leaves the policy unless the policy encoded it for this
//! request ([`BrokerGuard`]), since the policy server would send its broker credential with it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use broker_reference::{Credentials, Sealer, SealingKey};
use serde_json::Value;

use crate::host::{
    Host, HostError, HostErrorKind, ListAllRequest, ResolveImagesRequest, ResolveImagesResponse,
    ResourceRequest,
};
use crate::plan::pull_secrets::PullSecrets;
use crate::plan::{Pod, PodId};
pub use crate::settings::broker_settings::{BrokerSettings, BrokerUse, KeySecret};
use crate::settings::credential_providers::{covering, Provider};
use crate::vocabulary::failure::{Failure, FailureKind, LookupResult};
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::workload::PodSpecView;
use kubelet_credentials::{distinct_names, Keyring, SecretSource};

/// The brokered lookups of one request: which (pod, image) go through the broker, with which
/// credentials.
#[derive(Debug, Clone)]
pub struct BrokerRoutes {
    settings: BrokerSettings,
    routes: BTreeMap<(PodId, String), Credentials>,
    /// The (pod, image name, location) whose brokered lookup may not use the credentials a
    /// node sends there: a location of another name than the image's (a mirror, a `location`
    /// rewrite) for which the pod's keyring or the providers may differ by name. Its `absent`
    /// is not certain ([`BrokerRoutes::settle`]).
    unlike: BTreeSet<(PodId, String, String)>,
    /// What seals this request's names (the key, read once a lookup is routed, and one
    /// reading of the wall clock for their expiry); `None` when the request's namespace or
    /// the broker host cannot be encoded (nothing is brokered); why not, when the key cannot
    /// be read.
    sealer: Result<Option<Sealer>, String>,
    issued: Issued,
}

/// The brokered references the policy wrote for this request: the only references on the
/// broker's host [`BrokerGuard`] lets through. Ordered sets and maps here and in the routes: a
/// request has few names, each long, and comparing them costs the guest less than hashing.
pub type Issued = Rc<RefCell<BTreeSet<String>>>;

impl BrokerRoutes {
    /// Decides, for every image of every pod, whether its lookups go through the broker, and
    /// reads the sealing key when one does. Every reference it writes is added to `issued`.
    /// An image the nodes' credential `providers` cover is credentialed too: the broker runs
    /// the plugins. When one of them needs the pod's ServiceAccount (`tokenAttributes`) and
    /// the pod names no pull secret of its own, the name carries the ServiceAccount, whose
    /// pull secrets are then the pod's (the ServiceAccount admission plugin copied them, or
    /// there were none), so that the broker can run that plugin for it.
    pub fn plan(
        settings: &BrokerSettings,
        namespace: &str,
        pods: &[Pod],
        providers: &[Provider],
        issued: Issued,
        host: &impl Host,
    ) -> Self {
        let mut routes = BTreeMap::new();
        let mut unlike = BTreeSet::new();
        for pod in pods {
            let Some(spec) = &pod.spec else { continue };
            let credentials = pod_credentials(spec, pod.secrets.as_ref());
            for check in &pod.checks {
                let Ok(image) = &check.reference else {
                    continue;
                };
                let name = image.name();
                let matching = || covering(providers, &name);
                let provided = matching().next().is_some();
                let needs_account = matching().any(|p| p.token_attributes.is_some());
                let credentials = match &credentials {
                    Credentials::PullSecrets(names) if needs_account && names.is_empty() => {
                        Credentials::ServiceAccount(spec.service_account().to_owned())
                    }
                    _ => credentials.clone(),
                };
                let covered = provided
                    || match &pod.secrets {
                        Some(secrets) if secrets.consulted() => secrets.keyring.covers(&name),
                        // secrets not read by the policy: the broker reads them; a pod naming none
                        // has none, a template may get its ServiceAccount's
                        _ => match &credentials {
                            Credentials::PullSecrets(names) => !names.is_empty(),
                            Credentials::ServiceAccount(_) => true,
                        },
                    };
                if settings.usage == BrokerUse::All || covered {
                    if settings.usage == BrokerUse::All {
                        let keyring = pod.keyring();
                        for location in &check.chain {
                            let at = &location.reference;
                            if !same_credentials(&credentials, keyring, providers, image, at) {
                                unlike.insert((pod.id, name.clone(), at.lookup_reference()));
                            }
                        }
                    }
                    routes.insert((pod.id, name), credentials);
                }
            }
        }
        let sealer = if routes.is_empty() {
            Ok(None)
        } else {
            read_key(&settings.key_secret, host).map(|key| {
                let expires = broker_reference::expiry(host.unix_time().as_secs());
                Sealer::new(key, &settings.host, namespace, expires).ok()
            })
        };
        BrokerRoutes {
            settings: settings.clone(),
            routes,
            unlike,
            sealer,
            issued,
        }
    }

    /// The brokered reference for looking up `location` for `image` of `pod`, or `None` when
    /// that lookup is not brokered (not routed, a mirror location without `use: all`, or not
    /// encodable); the
    /// failure to report instead of a lookup when the sealing key could not be read.
    pub fn reference(
        &self,
        pod: PodId,
        image: &ImageReference,
        location: &ImageReference,
    ) -> Option<Result<String, Failure>> {
        // The kubelet picks credentials by the image's own name and the runtime sends them to
        // every mirror; the broker picks them by the name it is given. With `use: all` every
        // location is brokered, sealed with the image's credentials for its own name, and an
        // `absent` where the names may get other credentials is not trusted (`settle`); with
        // `credentialed` only the image's own registry is.
        let elsewhere =
            location.registry() != image.registry() || location.repository() != image.repository();
        if self.routes.is_empty()
            || (elsewhere && self.settings.usage != BrokerUse::All)
            // an image on the broker's host is never brokered (nor looked up: BrokerGuard)
            || broker_reference::is_broker_host(location.registry(), &self.settings.host)
        {
            return None;
        }
        let credentials = self.routes.get(&(pod, image.name()))?;
        let sealer = match &self.sealer {
            Ok(sealer) => sealer.as_ref()?,
            Err(why) => return Some(Err(self.key_unreadable(why))),
        };
        let digest = location.digest().map(|d| d.as_str());
        let tag = match (digest, location.tag()) {
            (_, Some(tag)) => Some(tag),
            (None, None) => Some("latest"),
            (Some(_), None) => None,
        };
        let reference = sealer
            .reference(
                credentials,
                location.registry(),
                location.repository(),
                tag,
                digest,
            )
            .ok()?;
        self.issued.borrow_mut().insert(reference.clone());
        Some(Ok(reference))
    }

    /// The result of a brokered lookup of `location` for `image` of `pod`, as certain as the
    /// credentials it used: an `absent` from a location the broker asked with other
    /// credentials than a node would send there (the keyring by the location's name, not the
    /// image's) is "not checked", never a verdict (certainty rule).
    pub fn settle(
        &self,
        pod: PodId,
        image: &ImageReference,
        location: &ImageReference,
        result: LookupResult,
    ) -> LookupResult {
        match result {
            Err(failure)
                if failure.kind == FailureKind::Absent
                    && self.unlike.contains(&(
                        pod,
                        image.name(),
                        location.lookup_reference(),
                    )) =>
            {
                Err(Failure::new(
                    FailureKind::Unreachable,
                    format!(
                        "not checked: asked with the credentials of its own name, a node sends those of {}; {}",
                        image.name(),
                        failure.detail
                    ),
                ))
            }
            other => other,
        }
    }

    /// A routed lookup not made: the broker would refuse a name without the key's seal.
    fn key_unreadable(&self, why: &str) -> Failure {
        let KeySecret { namespace, name } = &self.settings.key_secret;
        Failure::new(
            FailureKind::Unreachable,
            format!("not checked: broker key Secret {namespace}/{name} {why}"),
        )
    }

    /// A failed brokered lookup, told in terms of the real image: the broker's host and the
    /// encoded name never reach a message. A 401 without `DENIED` is the broker refusing the
    /// policy server itself (no or a wrong caller credential) or the name's seal (the broker
    /// holds another key, has another name, or its clock says the seal expired): nothing was
    /// learnt about the image.
    pub fn explain(&self, error: &HostError, brokered: &str, location: &ImageReference) -> Failure {
        // the broker's tag suggestions, out of the text every message below quotes
        let (suggestions, text) = broker_reference::suggested_tags::read(error.text());
        let mut failure = if text == error.text() {
            self.explain_error(error, brokered, location)
        } else {
            self.explain_error(&HostError::lookup(text), brokered, location)
        };
        if failure.kind == FailureKind::Absent {
            failure.suggestions = suggestions;
        }
        failure
    }

    /// [`BrokerRoutes::explain`] of an error without suggestions.
    fn explain_error(
        &self,
        error: &HostError,
        brokered: &str,
        location: &ImageReference,
    ) -> Failure {
        let registry = location.registry();
        let malformed = error
            .denied_words()
            .and_then(|words| words.strip_prefix(broker_reference::MALFORMED_PULL_SECRET));
        if let Some(problem) = malformed {
            // the kubelet's keyring fails on it: every pull of the pod fails, this one included
            return Failure::new(
                FailureKind::MalformedPullSecret,
                format!("{} (read by the lookup broker)", problem.trim()),
            );
        }
        let not_served = error.denied_words().and_then(|words| {
            let why = words.strip_prefix(broker_reference::NAMESPACE_NOT_ENABLED)?;
            // the broker's reason without its hint for the operator, to fit a warning
            let why = why.trim_start_matches(':').trim();
            Some(why.split(" (").next().unwrap_or(why))
        });
        if let Some(why) = not_served {
            // the broker serves only namespaces that opted in: nothing about the image
            return Failure::new(FailureKind::Unreachable, format!("not checked: {why}"));
        }
        if error.kind() == HostErrorKind::Unauthorized && !error.registry_denied() {
            return Failure::new(
                FailureKind::Unreachable,
                format!(
                    "not checked: the lookup broker refused the lookup (the policy server's credential, lookupBroker.keySecret's key, a lookupBroker.host the broker does not call its own, or clocks apart); {registry} not asked"
                ),
            );
        }
        if !error.got_an_answer() {
            // the broker's own address, not the registry's: it is the one that did not answer
            let host = &self.settings.host;
            return Failure::new(
                FailureKind::Unreachable,
                format!(
                    "not checked: lookup broker {host} did not answer ({})",
                    self.without_name(&error.summary(), brokered)
                ),
            );
        }
        let failure = error.failure();
        let words = error.answer_words().unwrap_or(failure.detail);
        let detail = self.in_terms_of(&words, brokered, location);
        // first, so that the cut of a long warning keeps it
        Failure {
            detail: format!("through the lookup broker: {detail}"),
            ..failure
        }
    }

    /// `text` with the encoded name of `brokered` left out: in the broker's URLs, and bare
    /// (a host error may quote the reference as it was given).
    fn without_name(&self, text: &str, brokered: &str) -> String {
        let host = &self.settings.host;
        let path = brokered
            .strip_prefix(&format!("{host}/"))
            .unwrap_or(brokered);
        let encoded = path.split(['@', ':']).next().unwrap_or(path);
        if encoded.is_empty() {
            return text.to_owned();
        }
        text.replace(&format!("/v2/{encoded}/"), "/v2/…/")
            .replace(encoded, "…")
    }

    /// `text` with every spelling of the brokered reference (the broker's host, the encoded
    /// name, its `/v2/` URL) replaced by the real image's registry and repository.
    fn in_terms_of(&self, text: &str, brokered: &str, location: &ImageReference) -> String {
        let host = &self.settings.host;
        let path = brokered
            .strip_prefix(&format!("{host}/"))
            .unwrap_or(brokered);
        // encoded names have no `:`: what follows one is the tag
        let encoded = path.split(['@', ':']).next().unwrap_or(path);
        let (registry, repository) = (location.registry(), location.repository());
        [
            (
                format!("{host}/v2/{encoded}/"),
                format!("{registry}/v2/{repository}/"),
            ),
            (
                format!("{host}/{encoded}"),
                format!("{registry}/{repository}"),
            ),
            (encoded.to_owned(), repository.to_owned()),
            (host.clone(), registry.to_owned()),
        ]
        .iter()
        .fold(text.to_owned(), |text, (from, to)| text.replace(from, to))
    }
}

/// The credentials a pod's lookups are sealed with: the pod's pull secret names, else its
/// ServiceAccount's; a template whose ServiceAccount the policy read and found naming no pull
/// secret at all is anonymous (the broker then serves it without the opt-in, crate docs).
fn pod_credentials(spec: &PodSpecView, secrets: Option<&PullSecrets>) -> Credentials {
    match spec.secret_source() {
        SecretSource::PodSpec => Credentials::PullSecrets(
            distinct_names(spec.image_pull_secrets.iter().map(String::as_str))
                .into_iter()
                // names that cannot be Secrets are skipped, as the kubelet skips them
                .filter(|n| broker_reference::is_dns_subdomain(n))
                .map(str::to_owned)
                .collect(),
        ),
        SecretSource::ServiceAccount(_)
            if secrets.is_some_and(|s| {
                s.consulted() && s.keyring.is_empty() && s.findings.is_empty()
            }) =>
        {
            Credentials::PullSecrets(Vec::new())
        }
        SecretSource::ServiceAccount(account) => Credentials::ServiceAccount(account),
    }
}

/// Whether the broker, given `location` sealed with `credentials`, uses the credentials a
/// node sends there for `image`: the same name; or no provider covering either name and a
/// keyring (known, or empty) that gives both names the same credentials.
fn same_credentials(
    credentials: &Credentials,
    keyring: Option<&Keyring>,
    providers: &[Provider],
    image: &ImageReference,
    location: &ImageReference,
) -> bool {
    if image.registry() == location.registry() && image.repository() == location.repository() {
        return true;
    }
    let (image, location) = (image.name(), location.name());
    if covering(providers, &image).next().is_some()
        || covering(providers, &location).next().is_some()
    {
        return false;
    }
    match (credentials, keyring) {
        (Credentials::PullSecrets(names), _) if names.is_empty() => true,
        (_, Some(keyring)) => keyring.lookup(&image) == keyring.lookup(&location),
        _ => false,
    }
}

/// Fields of the key Secret the policy reads: no other byte of it reaches the policy.
const KEY_FIELDS: &[&str] = &["data.key"];

/// The sealing key of `secret`'s `data.key`, or why not, in words that quote no byte of it.
fn read_key(secret: &KeySecret, host: &impl Host) -> Result<SealingKey, String> {
    let object = host
        .get_resource(&ResourceRequest::core(
            "Secret",
            &secret.namespace,
            &secret.name,
            KEY_FIELDS,
        ))
        .map_err(|error| {
            if error.is_not_found() {
                "does not exist".to_owned()
            } else {
                format!("could not be read: {}", error.summary())
            }
        })?;
    let encoded = object
        .pointer("/data/key")
        .and_then(Value::as_str)
        .ok_or("has no data.key")?;
    let bytes = kubelet_credentials::decode_secret_data(encoded)
        .ok_or("has a data.key that is not base64")?;
    SealingKey::from_secret(&bytes)
        .map_err(|_| format!("is shorter than {} bytes", SealingKey::MIN_LENGTH))
}

/// The host, with every OCI lookup of a reference on the broker's host refused unless the
/// policy wrote it for this request ([`Issued`]). Wraps the host for the whole evaluation, so
/// no path (lookups, platforms, node images) can send an image a Pod author wrote, however
/// much it looks like an encoded lookup, to the broker with the policy server's credential.
pub struct BrokerGuard<'h, H: Host> {
    inner: &'h H,
    broker_host: Option<&'h str>,
    issued: Issued,
}

impl<'h, H: Host> BrokerGuard<'h, H> {
    /// Guards `inner`; no guard without a broker.
    pub fn new(inner: &'h H, settings: Option<&'h BrokerSettings>, issued: Issued) -> Self {
        BrokerGuard {
            inner,
            broker_host: settings.map(|s| s.host.as_str()),
            issued,
        }
    }

    fn check(&self, reference: &str) -> Result<(), HostError> {
        let Some(host) = self.broker_host else {
            return Ok(());
        };
        let registry = reference.split_once('/').map_or(reference, |(r, _)| r);
        // the policy's own names first: every brokered lookup passes here
        if self.issued.borrow().contains(reference)
            || !broker_reference::is_broker_host(registry, host)
        {
            return Ok(());
        }
        Err(HostError::lookup(format!(
            "not looked up: the image names the lookup broker's host ({host}), which only the policy's own lookups may use"
        )))
    }
}

impl<H: Host> Host for BrokerGuard<'_, H> {
    fn manifest_digest(&self, reference: &str) -> Result<String, HostError> {
        self.check(reference)?;
        self.inner.manifest_digest(reference)
    }

    fn get_resource(&self, request: &ResourceRequest) -> Result<Value, HostError> {
        self.inner.get_resource(request)
    }

    fn oci_manifest(&self, reference: &str) -> Result<Value, HostError> {
        self.check(reference)?;
        self.inner.oci_manifest(reference)
    }

    fn oci_manifest_config(&self, reference: &str) -> Result<Value, HostError> {
        self.check(reference)?;
        self.inner.oci_manifest_config(reference)
    }

    fn list_resources_all(&self, request: &ListAllRequest) -> Result<Value, HostError> {
        self.inner.list_resources_all(request)
    }

    fn now(&self) -> std::time::Duration {
        self.inner.now()
    }

    fn unix_time(&self) -> std::time::Duration {
        self.inner.unix_time()
    }

    fn resolve_images(
        &self,
        request: &ResolveImagesRequest,
    ) -> Result<ResolveImagesResponse, HostError> {
        for lookup in &request.lookups {
            self.check(&lookup.image)?;
        }
        self.inner.resolve_images(request)
    }
}
