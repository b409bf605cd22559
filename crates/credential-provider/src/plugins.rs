//! The configured plugins with their caches: which ones an image asks, what each gives it, and
//! each run at most once per cache key while its answer lasts (concurrent lookups of the key
//! wait for the run in progress, as the kubelet's single flight does; other keys do not:
//! crate::runs).
//!
//! Cache keys as the kubelet's (`pkg/credentialprovider/plugin/plugin.go`): the answer's
//! `cacheKeyType` picks the image, its registry or one global key; a plugin with
//! `tokenAttributes` adds the ServiceAccount (namespace, name, UID, the annotations passed) or,
//! with `cacheType: Token`, the token's digest too. A lookup reads the image's, then the
//! registry's, then the global entry.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::time::Instant as Deadline;

use crate::config::{Provider, Skipped, TokenCacheType};
use crate::exec::{exec, RunError};
use crate::protocol::{AuthEntry, CacheKeyType, Request};
use crate::runs::{Flights, RunLimits, Shares, Silence, Turn};

/// The credentials of one answer, by keyring key.
pub type Auth = Arc<[(String, AuthEntry)]>;

/// Who a token-mode plugin is run for: the pod's ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
}

/// One question to a plugin: `image` (a repository without tag) for a lookup of `namespace`,
/// answered by `deadline`. `account`, `token` and `annotations` are the ServiceAccount, the
/// TokenRequest's token and [`Plugin::annotations`], for a plugin with `tokenAttributes`.
pub struct Ask<'a> {
    /// The lookup's namespace: whose share of the runs it takes, whose silence it reads.
    pub namespace: &'a str,
    /// The repository.
    pub image: &'a str,
    /// The pod's ServiceAccount.
    pub account: Option<&'a Account>,
    /// Its token.
    pub token: Option<&'a str>,
    /// The annotations passed.
    pub annotations: &'a BTreeMap<String, String>,
    /// When the lookup stops waiting: a run still going then is killed.
    pub deadline: Deadline,
}

/// Why a plugin gave no credentials: every case is an attempt without a definitive answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PluginError {
    /// The run failed (it could not start, exited non-zero, or answered badly).
    #[error("{0}")]
    Failed(RunError),
    /// The run, or the run of the same key it waited for, outlived the lookup.
    #[error("no answer within the lookup's time")]
    NoAnswer,
    /// A recent run for this key and namespace failed or gave no answer.
    #[error("it failed or gave no answer for this image in the last {} s; not run again yet", .0.as_secs())]
    Silenced(Duration),
    /// The namespace's share of the runs, or all runs, stayed taken until the deadline.
    #[error("the plugin runs of this namespace, or all plugin runs, are busy")]
    Busy,
}

/// A `requiredServiceAccountAnnotationKeys` key the ServiceAccount lacks: the kubelet does not
/// run the plugin for the pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the ServiceAccount lacks the required annotation {0:?}")]
pub struct MissingAnnotation(pub String);

/// The configured plugins.
pub struct Plugins {
    bin_dir: PathBuf,
    plugins: Vec<Plugin>,
    limits: RunLimits,
    shares: Shares,
}

impl Plugins {
    /// The plugins of `providers`, run from `bin_dir`, with the default [`RunLimits`].
    pub fn new(bin_dir: PathBuf, providers: Vec<Provider>) -> Self {
        Self::with_limits(bin_dir, providers, RunLimits::default())
    }

    /// The plugins of `providers`, run from `bin_dir` within `limits`.
    pub fn with_limits(bin_dir: PathBuf, providers: Vec<Provider>, limits: RunLimits) -> Self {
        Plugins {
            bin_dir,
            plugins: providers.into_iter().map(Plugin::new).collect(),
            shares: Shares::new(limits),
            limits,
        }
    }

    /// The same plugins, run within `limits`.
    pub fn limited(mut self, limits: RunLimits) -> Self {
        self.shares = Shares::new(limits);
        self.limits = limits;
        self
    }

    /// Every plugin, in the config's order.
    pub fn all(&self) -> &[Plugin] {
        &self.plugins
    }

    /// The plugins whose `matchImages` cover `image` (a repository without tag), in the
    /// config's order.
    pub fn matching<'a>(&'a self, image: &'a str) -> impl Iterator<Item = &'a Plugin> + 'a {
        self.plugins
            .iter()
            .filter(move |plugin| plugin.provider.matches(image))
    }

    /// What `plugin` gives `ask`: its cached answer, else a run of it (or the answer of the run
    /// of the same key in flight), within the namespace's share of the runs. A run that fails or
    /// outlives the lookup silences the key for the namespace.
    pub async fn credentials(&self, plugin: &Plugin, ask: &Ask<'_>) -> Result<Auth, PluginError> {
        let scope = plugin.scope(ask.account, ask.token, ask.annotations);
        if let Some(auth) = plugin.cached(ask.image, &scope) {
            return Ok(auth);
        }
        let silence_key = length_prefixed(&[ask.namespace, ask.image, &scope]);
        let answer = self.answer(plugin, ask, &scope, &silence_key).await;
        if matches!(answer, Err(PluginError::Failed(_) | PluginError::NoAnswer)) {
            plugin.silence.silence(silence_key, self.limits.silence);
        }
        answer
    }

    /// The answer of a run, this lookup's or the one in flight it waited for.
    async fn answer(
        &self,
        plugin: &Plugin,
        ask: &Ask<'_>,
        scope: &str,
        silence_key: &str,
    ) -> Result<Auth, PluginError> {
        let silenced = || plugin.silence.until(silence_key).map(|_| self.silenced());
        if let Some(error) = silenced() {
            return Err(error);
        }
        // the namespace's share first: a lookup waiting for its key holds no slot of another
        // namespace
        let own = self.shares.namespace(ask.namespace, ask.deadline).await;
        let own = own.ok_or(PluginError::Busy)?;
        let flight = cache_key(ask.image, scope);
        let held = match plugin.flights.enter(&flight, ask.deadline).await {
            None => return Err(PluginError::NoAnswer),
            Some(Turn::Answered(answer)) => return answer,
            Some(Turn::Run(held)) => held,
        };
        // a run before this one may have answered for it, or failed for its namespace
        if let Some(auth) = plugin.cached(ask.image, scope) {
            return Ok(auth);
        }
        if let Some(error) = silenced() {
            return Err(error);
        }
        let slots = self.shares.total(own, ask.deadline).await;
        let _slots = slots.ok_or(PluginError::Busy)?;
        let ran = tokio::time::timeout_at(ask.deadline, self.run(plugin, ask, scope)).await;
        let answer = match ran {
            Ok(Ok(auth)) => Ok(auth),
            Ok(Err(reason)) => Err(PluginError::Failed(reason)),
            // the run is dropped, and its process killed (crate::exec)
            Err(_) => Err(PluginError::NoAnswer),
        };
        held.ended(answer.clone());
        answer
    }

    fn silenced(&self) -> PluginError {
        PluginError::Silenced(self.limits.silence)
    }

    /// One run of `plugin`, its answer kept under its cache key.
    async fn run(&self, plugin: &Plugin, ask: &Ask<'_>, scope: &str) -> Result<Auth, RunError> {
        let image = ask.image;
        let request = Request {
            api_version: &plugin.provider.api_version,
            kind: "CredentialProviderRequest",
            image,
            service_account_token: ask.token,
            service_account_annotations: ask.annotations.clone(),
        };
        let response = exec(&self.bin_dir, &plugin.provider, &request).await?;
        let auth: Auth = response.auth.into();
        let keep = response
            .cache_duration
            .unwrap_or(plugin.provider.default_cache_duration);
        if !keep.is_zero() {
            let base = match response.cache_key_type {
                CacheKeyType::Image => image,
                CacheKeyType::Registry => registry_of(image),
                CacheKeyType::Global => GLOBAL,
            };
            if let Some(until) = Instant::now().checked_add(keep) {
                plugin.keep(cache_key(base, scope), auth.clone(), until);
            }
        }
        Ok(auth)
    }
}

/// The global cache key's base.
const GLOBAL: &str = "global";

/// The most answers one plugin keeps; past it, expired ones are dropped, then all.
const MAX_CACHED: usize = 4096;

/// One configured plugin and its cache.
pub struct Plugin {
    provider: Provider,
    cache: Mutex<HashMap<String, (Auth, Instant)>>,
    flights: Flights<Result<Auth, PluginError>>,
    silence: Silence,
}

impl Plugin {
    fn new(provider: Provider) -> Self {
        Plugin {
            provider,
            cache: Mutex::default(),
            flights: Flights::default(),
            silence: Silence::default(),
        }
    }

    /// Its configuration.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The annotations of `account` the plugin is given: every required one (one missing is
    /// an error: the kubelet does not run the plugin) and the optional ones it has.
    pub fn annotations(
        &self,
        account: &Account,
    ) -> Result<BTreeMap<String, String>, MissingAnnotation> {
        let Some(attributes) = &self.provider.token_attributes else {
            return Ok(BTreeMap::new());
        };
        let has = |key: &str| account.annotations.contains_key(key);
        if let Some(Skipped::MissingAnnotation(key)) = attributes.skipped_for(Some(&has)) {
            return Err(MissingAnnotation(key.to_owned()));
        }
        let named = attributes
            .required_annotations
            .iter()
            .chain(&attributes.optional_annotations);
        Ok(named
            .filter_map(|key| Some((key.clone(), account.annotations.get(key)?.clone())))
            .collect())
    }

    /// The part of the cache key that says whose answer it is.
    fn scope(
        &self,
        account: Option<&Account>,
        token: Option<&str>,
        annotations: &BTreeMap<String, String>,
    ) -> String {
        let (Some(attributes), Some(account)) = (&self.provider.token_attributes, account) else {
            return String::new();
        };
        let mut parts = vec![
            account.namespace.as_str(),
            account.name.as_str(),
            account.uid.as_str(),
        ];
        for (key, value) in annotations {
            parts.push(key);
            parts.push(value);
        }
        let digest;
        if attributes.cache_type == TokenCacheType::Token {
            digest = format!("{:x}", Sha256::digest(token.unwrap_or_default()));
            parts.push(&digest);
        }
        length_prefixed(&parts)
    }

    fn cached(&self, image: &str, scope: &str) -> Option<Auth> {
        let cache = self.cache.lock().ok()?;
        let now = Instant::now();
        [image, registry_of(image), GLOBAL]
            .into_iter()
            .find_map(|base| {
                cache
                    .get(&cache_key(base, scope))
                    .filter(|(_, until)| now < *until)
                    .map(|(auth, _)| auth.clone())
            })
    }

    fn keep(&self, key: String, auth: Auth, until: Instant) {
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        if cache.len() >= MAX_CACHED {
            let now = Instant::now();
            cache.retain(|_, (_, until)| now < *until);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (auth, until));
    }
}

/// The registry (host and port) of a repository: its first path segment, as the kubelet
/// takes it for `cacheKeyType: Registry`.
fn registry_of(image: &str) -> &str {
    image.split('/').next().unwrap_or(image)
}

fn cache_key(base: &str, scope: &str) -> String {
    length_prefixed(&[base, scope])
}

/// Parts joined so that no two lists give the same key.
fn length_prefixed(parts: &[&str]) -> String {
    parts.iter().map(|p| format!("{}:{p};", p.len())).collect()
}

#[cfg(test)]
mod tests;
