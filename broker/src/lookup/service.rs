//! One request, from the caller's credential to the answer: decode the name, check the
//! destination, take the concurrency permits, read the pull secrets, run the credential loop
//! against the real registry, answer with its status and digest, and log one line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use broker_reference::{
    BrokeredName, Credentials, ManifestReference, Unsealing, MALFORMED_PULL_SECRET,
};
use kubelet_credentials::Credential;
use oci_client::errors::OciDistributionError;
use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use registry_client::credential_loop::{self, Attempt, Found, Manifest, Outcome, Unanswered};
use registry_client::pool::{Pool, UrlSlot, MANIFEST_MEDIA_TYPES};
use registry_client::RegistryError;
use serde_json::json;
use tokio::time::Instant as Deadline;

use crate::cluster::providers::{Given, ProviderRunner, Question};
use crate::cluster::tenancy::{self, Admission, NotServed, Tenancy};
use crate::cluster::{Cluster, ClusterError};
use crate::lookup::cause::Cause;
use crate::lookup::gates::{Closed, GateLimits, Gates, Pass};
use crate::lookup::reply::Reply;
use crate::lookup::unanswerable::{Overload, Unanswerable};
use crate::registries::destinations::Destinations;
use crate::registries::tag_lists::{Asked, TagLists};
use crate::telemetry::logs;
use crate::telemetry::metrics::Metrics;
use crate::trust::caller::Caller;
use crate::trust::keys::Keys;

/// The limits of a broker; every one bounds something a Pod author can influence.
#[derive(Debug, Clone)]
pub struct Limits {
    /// One registry request (with its token request), per credential.
    pub attempt_timeout: Duration,
    /// A whole lookup, every credential included; keep it under the policy's `timeBudgetMs`.
    pub lookup_timeout: Duration,
    /// Lookups in flight in the whole broker.
    pub max_concurrent: usize,
    /// Lookups in flight to one registry, so a silent registry cannot take every slot.
    pub max_per_registry: usize,
    /// Lookups in flight to one registry for one namespace, so one tenant cannot take every
    /// slot of a registry (crate::lookup::gates).
    pub max_per_namespace: usize,
    /// Lookups in flight in the whole broker for one namespace, whatever registries it names.
    pub max_concurrent_per_namespace: usize,
    /// Registries silent for one namespace at once before its lookups of registries that have
    /// not answered it are answered at once: rotating made-up host names cannot evade the
    /// back-off (crate::lookup::gates).
    pub max_silent_per_namespace: usize,
    /// Registries whose state (limits, protocol, challenges) is kept at once.
    pub max_registries: usize,
    /// After a registry let an attempt of a namespace's lookup time out, how long that
    /// namespace's lookups of it fail at once instead of waiting again: a silent registry
    /// costs one time-out per period, not one per lookup (the stock policy server holds one
    /// lock for all lookups while it waits).
    pub silent_backoff: Duration,
}

/// The broker: configuration, shared clients and state.
pub struct Broker {
    /// Who may ask.
    pub caller: Caller,
    /// Whose names are answered: those sealed with one of these keys.
    pub keys: Keys,
    /// Where pull secrets come from.
    pub cluster: Cluster,
    /// The registry client.
    pub pool: Pool,
    /// Where requests may go.
    pub destinations: Arc<Destinations>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Which namespaces are never served.
    pub tenancy: Tenancy,
    /// Limits.
    pub limits: Limits,
    gates: Gates,
    providers: Option<ProviderRunner>,
    tag_lists: Option<TagLists>,
}

/// The credential the registry answered the first 404 to (`Anonymous` for the anonymous
/// try): the one that lists the repository's tags for suggestions.
type Answered404 = std::sync::Mutex<Option<RegistryAuth>>;

/// One try of the loop once the node's credential providers are asked.
enum Try {
    /// A credential (`None`: the anonymous pull of an image nothing covers).
    Credential(Option<Credential>),
    /// A plugin that failed: an attempt without a definitive answer.
    Failed(String),
}

/// What a broker is made of, apart from its limits.
pub struct Parts {
    /// Who may ask.
    pub caller: Caller,
    /// The sealing keys.
    pub keys: Keys,
    /// The API server.
    pub cluster: Cluster,
    /// The registry client.
    pub pool: Pool,
    /// Where requests may go.
    pub destinations: Arc<Destinations>,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Which namespaces are never served.
    pub tenancy: Tenancy,
}

/// What the log line of a lookup says (names only, never secret content).
struct LogLine {
    method: &'static str,
    name: Option<BrokeredName>,
    reference: String,
    outcome: &'static str,
    status: u16,
    matched: Option<usize>,
    attempts: Vec<&'static str>,
    served_by: Option<usize>,
    skipped: Vec<String>,
    reason: Option<String>,
    /// How many tags a 404 suggested, when its tags were looked at.
    suggested: Option<usize>,
}

impl Broker {
    /// A broker with these parts.
    pub fn new(parts: Parts, limits: Limits) -> Self {
        let gates = Gates::new(GateLimits {
            max_concurrent: limits.max_concurrent,
            max_per_registry: limits.max_per_registry,
            max_per_namespace: limits.max_per_namespace,
            max_concurrent_per_namespace: limits.max_concurrent_per_namespace,
            max_silent_per_namespace: limits.max_silent_per_namespace,
            max_registries: limits.max_registries,
        });
        Broker {
            caller: parts.caller,
            keys: parts.keys,
            cluster: parts.cluster,
            pool: parts.pool,
            destinations: parts.destinations,
            metrics: parts.metrics,
            tenancy: parts.tenancy,
            limits,
            gates,
            providers: None,
            tag_lists: None,
        }
    }

    /// The broker, suggesting the nearest tags on a `GET` answered 404
    /// (crate::registries::tag_lists).
    pub fn with_tag_suggestions(mut self, tag_lists: TagLists) -> Self {
        self.tag_lists = Some(tag_lists);
        self
    }

    /// The broker, also trying the credentials of the node's credential provider plugins.
    pub fn with_providers(mut self, providers: ProviderRunner) -> Self {
        self.providers = Some(providers);
        self
    }

    /// Answers one request of the distribution API.
    pub async fn handle(&self, method: &str, path: &str, authorization: Option<&[u8]>) -> Reply {
        if !self.caller.admits(authorization) {
            self.metrics.caller_refused();
            let mut answer = Reply::error(
                401,
                "UNAUTHORIZED",
                "the lookup broker answers only the policy server's credential",
            );
            answer.headers.push((
                "WWW-Authenticate",
                "Basic realm=\"resolvable-images-broker\"".into(),
            ));
            return answer;
        }
        let method = match method {
            "GET" => "GET",
            "HEAD" => "HEAD",
            _ => return Reply::error(405, "UNSUPPORTED", "the lookup broker is read-only"),
        };
        if path == "/v2/" || path == "/v2" {
            let mut answer = Reply::json(200, json!({}));
            answer
                .headers
                .push(("Docker-Distribution-API-Version", "registry/2.0".into()));
            return answer;
        }
        let Some((name, reference)) = path
            .strip_prefix("/v2/")
            .and_then(|rest| rest.rsplit_once("/manifests/"))
        else {
            return Reply::error(
                404,
                "UNSUPPORTED",
                "the lookup broker answers manifest lookups only",
            );
        };
        let started = Instant::now();
        let _in_flight = self.metrics.in_flight();
        let (answer, line) = self.lookup(method, name, reference).await;
        let took = started.elapsed();
        self.metrics.lookup(line.outcome, took.as_secs_f64());
        log(&line, took);
        answer
    }

    async fn lookup(&self, method: &'static str, name: &str, reference: &str) -> (Reply, LogLine) {
        let mut line = LogLine {
            method,
            name: None,
            reference: String::new(),
            outcome: "invalid",
            status: 400,
            matched: None,
            attempts: Vec::new(),
            served_by: None,
            skipped: Vec::new(),
            reason: None,
            suggested: None,
        };
        let answer = match self
            .look_up(method == "GET", name, reference, &mut line)
            .await
        {
            Ok(answer) => answer,
            Err(refusal) => {
                line.outcome = refusal.outcome();
                line.reason = refusal.reason();
                refusal.reply()
            }
        };
        line.status = answer.status;
        (answer, line)
    }

    /// Decodes the request, admits it, reads its pull secrets and runs the credential loop;
    /// a lookup that cannot be made is an [`Unanswerable`].
    async fn look_up(
        &self,
        get: bool,
        name: &str,
        reference: &str,
        line: &mut LogLine,
    ) -> Result<Reply, Unanswerable> {
        // the tag or digest first: the seal is good for one of them only
        let reference = ManifestReference::parse(reference).map_err(Unanswerable::Undecodable)?;
        let keys = self.keys.current();
        let unsealing = Unsealing {
            keys: &keys,
            own_hosts: self.destinations.own_hosts(),
            now: unix_now(),
        };
        let name = BrokeredName::decode(name, &reference, &unsealing)
            .map_err(Unanswerable::Undecodable)?;
        line.name = Some(name.clone());
        line.reference = reference.as_str().to_owned();
        let registry = name.registry.clone();
        let deadline = Deadline::now() + self.limits.lookup_timeout;
        self.serves(&name.namespace, self.anonymous(&name), deadline)
            .await?;
        let pass = self.admit(&registry, &name.namespace, deadline).await?;
        let secrets = tokio::time::timeout_at(
            deadline,
            self.cluster
                .pull_secrets(&name.namespace, &name.credentials),
        )
        .await
        .unwrap_or(Err(ClusterError::NoAnswer))
        .map_err(|error| Unanswerable::SecretsUnavailable {
            namespace: name.namespace.clone(),
            error,
        })?;
        line.skipped = secrets.skipped;
        if let Some(problem) = secrets.malformed {
            // the kubelet's keyring fails on it before any registry is asked
            line.outcome = "malformedSecret";
            return Ok(Reply::error(
                403,
                "DENIED",
                &format!("denied: {MALFORMED_PULL_SECRET} {problem}; the kubelet fails every pull of the pod"),
            ));
        }
        let image = format!("{}/{}", name.registry, name.repository);
        let credentials: Vec<Credential> = secrets
            .keyring
            .lookup(&image)
            .into_iter()
            .cloned()
            .collect();
        line.matched = Some(credentials.len());
        let upstream = upstream_of(&name, &reference);
        let answered_404 = Answered404::default();
        let (lookup, asked_providers) = self
            .run_loop(credentials, &name, &upstream, get, deadline, &answered_404)
            .await;
        self.record(&lookup, &pass, line);
        // only a GET's body reaches the policy
        let not_found = get && matches!(lookup.outcome, Outcome::NotFound { .. });
        let auth = answered_404
            .into_inner()
            .ok()
            .flatten()
            .filter(|_| not_found);
        let suggested = self
            .suggest(&name.namespace, &upstream, auth, deadline, line)
            .await;
        Ok(outcome_answer(
            lookup.outcome,
            &name,
            asked_providers,
            line,
            &suggested,
        ))
    }

    /// What a lookup's attempts tell: a silent registry to the gate, each attempt to the
    /// metrics, the attempts and the outcome to the log line.
    fn record(&self, lookup: &credential_loop::Lookup, pass: &Pass, line: &mut LogLine) {
        if lookup.attempts.iter().any(Attempt::registry_was_silent) {
            pass.went_silent(self.limits.silent_backoff);
        } else {
            pass.answered();
        }
        line.attempts = lookup.attempts.iter().map(Attempt::word).collect();
        for attempt in &lookup.attempts {
            self.metrics.attempt(attempt.word());
        }
        line.outcome = lookup.outcome.word();
    }

    /// The tags to suggest for `upstream`'s tag, listed with `auth`, the credential of the
    /// 404 (none without one): one more request, bounded as an attempt is and never past the lookup's deadline.
    async fn suggest(
        &self,
        namespace: &str,
        upstream: &Reference,
        auth: Option<RegistryAuth>,
        deadline: Deadline,
        line: &mut LogLine,
    ) -> Vec<String> {
        let (Some(lists), Some(auth)) = (&self.tag_lists, auth) else {
            return Vec::new();
        };
        let asked = Asked {
            namespace,
            upstream,
            auth: &auth,
        };
        let until = deadline.min(Deadline::now() + self.limits.attempt_timeout);
        let suggested = lists.suggest(&self.pool, &asked, until).await;
        line.suggested = Some(suggested.len());
        suggested
    }

    /// The credential loop over `credentials`, and the node's plugins when one covers the
    /// image; says whether the plugins were asked.
    async fn run_loop(
        &self,
        credentials: Vec<Credential>,
        name: &BrokeredName,
        upstream: &Reference,
        get: bool,
        deadline: Deadline,
        answered_404: &Answered404,
    ) -> (credential_loop::Lookup, bool) {
        let image = format!("{}/{}", name.registry, name.repository);
        let covering = self.providers.as_ref().filter(|p| p.cover(&image));
        let lookup = match covering {
            Some(providers) => {
                let trying = Trying {
                    upstream,
                    get,
                    deadline,
                    answered_404,
                };
                self.with_node_providers(providers, credentials, name, &trying)
                    .await
            }
            None => {
                credential_loop::run(
                    credentials,
                    deadline,
                    self.limits.lookup_timeout,
                    |credential| {
                        let auth = credential.as_ref().map(auth_of);
                        self.attempt(upstream, auth, get, answered_404)
                    },
                )
                .await
            }
        };
        (lookup, covering.is_some())
    }

    /// The credential loop when plugins cover the image: the pull secrets' credentials first
    /// (plugins are not run when one of them finds it), then the plugins' credentials and
    /// failures, every one tried; the anonymous pull only when neither gave a credential.
    async fn with_node_providers(
        &self,
        providers: &ProviderRunner,
        secrets: Vec<Credential>,
        name: &BrokeredName,
        trying: &Trying<'_>,
    ) -> credential_loop::Lookup {
        let Trying {
            upstream,
            get,
            deadline,
            answered_404,
        } = *trying;
        let timeout = self.limits.lookup_timeout;
        let mut before = Vec::new();
        if !secrets.is_empty() {
            let first = credential_loop::run(secrets, deadline, timeout, |credential| {
                self.attempt(
                    upstream,
                    credential.as_ref().map(auth_of),
                    get,
                    answered_404,
                )
            })
            .await;
            if matches!(first.outcome, Outcome::Found { .. }) || !first.complete {
                return first;
            }
            before = first.attempts;
        }
        let mut tries = self.plugin_tries(providers, name, deadline).await;
        let credential_given = tries.iter().any(|t| matches!(t, Try::Credential(_)));
        if before.is_empty() && !credential_given {
            tries.push(Try::Credential(None));
        }
        if tries.is_empty() {
            return credential_loop::Lookup {
                outcome: credential_loop::conclude(&before, true),
                attempts: before,
                complete: true,
            };
        }
        let second = credential_loop::run(tries, deadline, timeout, |t| async move {
            match t {
                Some(Try::Failed(reason)) => Attempt::Failed(Unanswered::Indefinite(reason)),
                Some(Try::Credential(c)) => {
                    let auth = c.as_ref().map(auth_of);
                    self.attempt(upstream, auth, get, answered_404).await
                }
                None => self.attempt(upstream, None, get, answered_404).await,
            }
        })
        .await;
        before.extend(second.attempts);
        credential_loop::Lookup {
            outcome: credential_loop::conclude(&before, second.complete),
            attempts: before,
            complete: second.complete,
        }
    }

    /// What the node's plugins covering `name`'s image give: a try with each credential, or
    /// a failure.
    async fn plugin_tries(
        &self,
        providers: &ProviderRunner,
        name: &BrokeredName,
        deadline: Deadline,
    ) -> Vec<Try> {
        let timeout = self.limits.lookup_timeout;
        let image = format!("{}/{}", name.registry, name.repository);
        let question = Question {
            namespace: &name.namespace,
            credentials: &name.credentials,
            image: &image,
            deadline,
        };
        let given =
            tokio::time::timeout_at(deadline, providers.credentials(&self.cluster, &question))
                .await
                .unwrap_or_else(|_| {
                    vec![Given::Failed(format!(
                        "the credential providers gave no answer within {} ms",
                        timeout.as_millis()
                    ))]
                });
        given
            .into_iter()
            .map(|g| match g {
                Given::Credential(c) => Try::Credential(Some(c)),
                Given::Failed(reason) => Try::Failed(reason),
            })
            .collect()
    }

    /// Whether `name` spends nothing of its namespace: no pull secret named and no plugin
    /// covering the image (crate::cluster::tenancy serves it without the opt-in).
    fn anonymous(&self, name: &BrokeredName) -> bool {
        let image = format!("{}/{}", name.registry, name.repository);
        matches!(&name.credentials, Credentials::PullSecrets(names) if names.is_empty())
            && !self.providers.as_ref().is_some_and(|p| p.cover(&image))
    }

    /// Whether `namespace` is served (crate::cluster::tenancy): a protected one is refused by
    /// name, an
    /// `anonymous` lookup of any other served unread, a credentialed one by its Namespace's
    /// label; nothing else is read before this says yes.
    async fn serves(
        &self,
        namespace: &str,
        anonymous: bool,
        deadline: Deadline,
    ) -> Result<(), Unanswerable> {
        let refused = |why| Unanswerable::NamespaceNotServed {
            namespace: namespace.to_owned(),
            why,
        };
        match self.tenancy.admission(namespace, anonymous) {
            Admission::Refused(why) => return Err(refused(why)),
            Admission::Served => return Ok(()),
            Admission::IfOptedIn => {}
        }
        let object = tokio::time::timeout_at(deadline, self.cluster.namespace(namespace))
            .await
            .unwrap_or(Err(ClusterError::NoAnswer))
            .map_err(|error| Unanswerable::NamespaceUnreadable {
                namespace: namespace.to_owned(),
                error,
            })?;
        match object {
            Some(object) if tenancy::opted_in(&object) => Ok(()),
            _ => Err(refused(NotServed::NotOptedIn)),
        }
    }

    /// The destination check and the concurrency slots of a lookup of `registry` for
    /// `namespace`, waiting for them at most until `deadline`.
    async fn admit(
        &self,
        registry: &str,
        namespace: &str,
        deadline: Deadline,
    ) -> Result<Pass, Unanswerable> {
        if let Some(reason) = self.destinations.refuses_registry(registry) {
            return Err(Unanswerable::RefusedDestination {
                registry: registry.to_owned(),
                reason,
            });
        }
        let overloaded = |why| Unanswerable::Overloaded {
            registry: registry.to_owned(),
            why,
        };
        match self.gates.admit(registry, namespace, deadline).await {
            Ok(pass) => Ok(pass),
            Err(Closed::Registries) => Err(overloaded(Overload::Registries)),
            Err(Closed::Lookups) => Err(overloaded(Overload::Lookups)),
            Err(Closed::Silent) => Err(Unanswerable::Silent {
                registry: registry.to_owned(),
                backoff: self.limits.silent_backoff,
            }),
            Err(Closed::SilentRegistries) => Err(Unanswerable::SilentRegistries {
                registry: registry.to_owned(),
                limit: self.limits.max_silent_per_namespace,
                backoff: self.limits.silent_backoff,
            }),
        }
    }

    /// One attempt with one credential (`None`: anonymous), bounded by the attempt time-out;
    /// the credential of the first 404 is noted in `answered_404`.
    async fn attempt(
        &self,
        reference: &Reference,
        auth: Option<RegistryAuth>,
        get: bool,
        answered_404: &Answered404,
    ) -> Attempt {
        let auth = auth.unwrap_or(RegistryAuth::Anonymous);
        let attempt = self.attempt_with(reference, &auth, get).await;
        if matches!(attempt, Attempt::NotFound { .. }) {
            if let Ok(mut first) = answered_404.lock() {
                first.get_or_insert(auth);
            }
        }
        attempt
    }

    async fn attempt_with(&self, reference: &Reference, auth: &RegistryAuth, get: bool) -> Attempt {
        let slot = UrlSlot::default();
        let work = async {
            if get {
                self.pool
                    .manifest_raw(reference, auth, MANIFEST_MEDIA_TYPES, &slot)
                    .await
                    .map(|(body, digest)| Found {
                        manifest: Some(Manifest::new(body)),
                        digest,
                    })
            } else {
                self.pool
                    .manifest_digest(reference, auth, &slot)
                    .await
                    .map(|digest| Found {
                        digest,
                        manifest: None,
                    })
            }
        };
        // the lookup's deadline is the credential loop's (credential_loop::run)
        let started = Instant::now();
        match tokio::time::timeout(self.limits.attempt_timeout, work).await {
            Ok(Ok(found)) => Attempt::Found(found),
            // a host that never completes a connection (a black hole, a TLS handshake left
            // hanging) is as silent as one that never answers: its own time-out ran out
            Ok(Err(error)) if connect_timed_out(&error) => Attempt::Failed(Unanswered::NoAnswer {
                within: started.elapsed(),
                lookup_deadline: false,
            }),
            Ok(Err(error)) => credential_loop::classify(&error),
            Err(_) => Attempt::Failed(Unanswered::NoAnswer {
                within: self.limits.attempt_timeout,
                lookup_deadline: false,
            }),
        }
    }
}

/// The credential loop's settings for one lookup, beyond its credentials.
#[derive(Clone, Copy)]
struct Trying<'a> {
    upstream: &'a Reference,
    get: bool,
    deadline: Deadline,
    answered_404: &'a Answered404,
}

/// The real image, with the tag or digest asked.
fn upstream_of(name: &BrokeredName, reference: &ManifestReference) -> Reference {
    let (registry, repository) = (name.registry.clone(), name.repository.clone());
    match reference {
        ManifestReference::Tag(tag) => Reference::with_tag(registry, repository, tag.clone()),
        ManifestReference::Digest(digest) => {
            Reference::with_digest(registry, repository, digest.clone())
        }
    }
}

/// Whether `error` is the registry client's connect time-out (`--connect-timeout-ms`), which
/// covers the TLS handshake.
fn connect_timed_out(error: &RegistryError) -> bool {
    matches!(error, RegistryError::Oci(OciDistributionError::RequestError(e)) if e.is_timeout())
}

fn found_reply(found: Found) -> Reply {
    let mut headers = vec![
        ("Docker-Content-Digest", found.digest),
        ("Docker-Distribution-API-Version", "registry/2.0".into()),
    ];
    let body = match found.manifest {
        Some(manifest) => {
            headers.push(("Content-Type", manifest.media_type));
            manifest.body
        }
        None => Vec::new(),
    };
    Reply {
        status: 200,
        headers,
        body,
    }
}

/// The answer a lookup's outcome gets, its details written to the log line.
fn outcome_answer(
    outcome: Outcome,
    name: &BrokeredName,
    asked_providers: bool,
    line: &mut LogLine,
    suggested: &[String],
) -> Reply {
    match outcome {
        Outcome::Found { index, found } => {
            line.served_by = Some(index);
            found_reply(found)
        }
        Outcome::NotFound { envelope } => not_found_reply(envelope, suggested),
        Outcome::Unauthorized => Reply::error(
            403,
            "DENIED",
            // oci-client shows only the message: it starts with the word clients classify by
            &format!(
                "denied: {} refused every credential the pod's pull secrets give it ({}{})",
                name.registry,
                describe(&name.credentials),
                if asked_providers {
                    ", and the node's credential providers"
                } else {
                    ""
                }
            ),
        ),
        Outcome::Unreachable { reason } => {
            // the class alone (crate::lookup::cause): the policy's warning names the registry, and
            // the
            // registry's own words stay in the operator's log
            line.reason = Some(reason.to_string());
            Reply::error(503, "UNAVAILABLE", &Cause::of(&reason).words(&reason))
        }
    }
}

/// A 404 in the broker's own words: the OCI code of the registry's first not-found error
/// (`MANIFEST_UNKNOWN` when it gave none), never its `message` or `detail`, which a registry a
/// Pod author chose can fill with anything (a lure, or words that read as the broker's). The
/// `suggested` tags (broker_reference::suggested_tags, checked against the tag rule there)
/// follow the message: the one piece of registry text the broker passes on.
fn not_found_reply(envelope: Option<String>, suggested: &[String]) -> Reply {
    let code = envelope
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|envelope| {
            envelope
                .get("errors")?
                .as_array()?
                .iter()
                .filter_map(|e| e.get("code")?.as_str())
                .find_map(|code| NOT_FOUND.iter().find(|(known, _)| *known == code))
                .copied()
        })
        .unwrap_or(NOT_FOUND[0]);
    let message = format!(
        "{}{}",
        code.1,
        broker_reference::suggested_tags::mark(suggested)
    );
    let body = json!({"errors": [{"code": code.0, "message": message, "detail": null}]});
    Reply {
        status: 404,
        headers: vec![("Content-Type", "application/json".into())],
        body: body.to_string().into_bytes(),
    }
}

/// The not-found codes a 404 keeps, each with the broker's fixed words for it: words the
/// policy reads as "absent" (`src/host/error.rs`), since clients show the message alone.
const NOT_FOUND: [(&str, &str); 3] = [
    ("MANIFEST_UNKNOWN", "manifest unknown"),
    ("NAME_UNKNOWN", "repository name not known to registry"),
    ("NOT_FOUND", "image manifest not found"),
];

/// The registry client's authorization for a keyring credential: a registry token as a
/// bearer token, else username and password.
fn auth_of(credential: &Credential) -> RegistryAuth {
    match credential.registry_token() {
        Some(token) if !token.is_empty() => RegistryAuth::Bearer(token.to_owned()),
        _ => RegistryAuth::Basic(
            credential.username().to_owned(),
            credential.password().to_owned(),
        ),
    }
}

/// Which credentials, by name, for messages.
fn describe(credentials: &Credentials) -> String {
    match credentials {
        Credentials::PullSecrets(names) if names.is_empty() => "no pull secrets".into(),
        Credentials::PullSecrets(names) => format!("pull secrets {}", names.join(", ")),
        Credentials::ServiceAccount(name) => format!("the pull secrets of ServiceAccount {name}"),
    }
}

/// One structured line per lookup (a `tracing` event, JSON on stdout: crate::telemetry::logs); the
/// lists are their JSON text, an absent value (`servedBy` before a credential found it) is
/// left out.
fn log(line: &LogLine, took: Duration) {
    let (namespace, credentials, registry, repository) = match &line.name {
        Some(n) => (
            n.namespace.as_str(),
            describe(&n.credentials),
            n.registry.as_str(),
            n.repository.as_str(),
        ),
        None => ("", String::new(), "", ""),
    };
    tracing::info!(
        msg = "lookup",
        method = line.method,
        namespace,
        credentials = credentials.as_str(),
        registry,
        repository,
        reference = line.reference.as_str(),
        outcome = line.outcome,
        status = line.status,
        credentialsMatched = line.matched.map(|n| n as u64),
        attempts = logs::json_list(&line.attempts).as_str(),
        servedBy = line.served_by.map(|n| n as u64),
        skippedSecrets = logs::json_list(&line.skipped).as_str(),
        reason = line.reason.as_deref(),
        suggestedTags = line.suggested.map(|n| n as u64),
        ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
    );
}

/// The broker's clock for seals' expiry, Unix seconds (a clock before the epoch reads 0, and
/// every seal is then too far ahead: refused, never accepted).
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
#[cfg(test)]
mod tests;
