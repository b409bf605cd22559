//! The configured plugins with their caches: which ones an image asks, what each gives it, and
//! each run at most once per cache key while its answer lasts (concurrent lookups wait for the
//! run in progress, as the kubelet's single flight does).
//!
//! Cache keys as the kubelet's (`pkg/credentialprovider/plugin/plugin.go`): the answer's
//! `cacheKeyType` picks the image, its registry or one global key; a plugin with
//! `tokenAttributes` adds the ServiceAccount (namespace, name, UID, the annotations passed) or,
//! with `cacheType: Token`, the token's digest. A lookup reads the image's, then the
//! registry's, then the global entry.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::config::{Provider, Skipped, TokenCacheType};
use crate::exec::exec;
use crate::protocol::{AuthEntry, CacheKeyType, Request};

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

/// The configured plugins.
pub struct Plugins {
    bin_dir: PathBuf,
    plugins: Vec<Plugin>,
}

impl Plugins {
    /// The plugins of `providers`, run from `bin_dir`.
    pub fn new(bin_dir: PathBuf, providers: Vec<Provider>) -> Self {
        Plugins {
            bin_dir,
            plugins: providers.into_iter().map(Plugin::new).collect(),
        }
    }

    /// The plugins whose `matchImages` cover `image` (a repository without tag), in the
    /// config's order.
    pub fn matching<'a>(&'a self, image: &'a str) -> impl Iterator<Item = &'a Plugin> + 'a {
        self.plugins
            .iter()
            .filter(move |plugin| plugin.provider.matches(image))
    }

    /// What `plugin` gives `image`: its cached answer, else a run of it. `token` and
    /// `annotations` are those [`Plugin::annotations`] and a TokenRequest gave, for a plugin
    /// with `tokenAttributes`.
    pub async fn credentials(
        &self,
        plugin: &Plugin,
        image: &str,
        account: Option<&Account>,
        token: Option<&str>,
        annotations: &BTreeMap<String, String>,
    ) -> Result<Auth, String> {
        let scope = plugin.scope(account, token, annotations);
        if let Some(auth) = plugin.cached(image, &scope) {
            return Ok(auth);
        }
        let _run = plugin.runs.lock().await;
        // the run this one waited for may have answered for it
        if let Some(auth) = plugin.cached(image, &scope) {
            return Ok(auth);
        }
        let request = Request {
            api_version: &plugin.provider.api_version,
            kind: "CredentialProviderRequest",
            image,
            service_account_token: token,
            service_account_annotations: annotations.clone(),
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
            plugin.keep(cache_key(base, &scope), auth.clone(), Instant::now() + keep);
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
    runs: tokio::sync::Mutex<()>,
}

impl Plugin {
    fn new(provider: Provider) -> Self {
        Plugin {
            provider,
            cache: Mutex::default(),
            runs: tokio::sync::Mutex::new(()),
        }
    }

    /// Its configuration.
    pub fn provider(&self) -> &Provider {
        &self.provider
    }

    /// The annotations of `account` the plugin is given: every required one (one missing is
    /// `Err(key)`: the kubelet does not run the plugin) and the optional ones it has.
    pub fn annotations(&self, account: &Account) -> Result<BTreeMap<String, String>, String> {
        let Some(attributes) = &self.provider.token_attributes else {
            return Ok(BTreeMap::new());
        };
        let has = |key: &str| account.annotations.contains_key(key);
        if let Some(Skipped::MissingAnnotation(key)) = attributes.skipped_for(Some(&has)) {
            return Err(key.to_owned());
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
