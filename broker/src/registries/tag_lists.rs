//! The tags a 404 suggests (crate::registries::nearest_tags), from the repository's tag
//! listing made with
//! the credential the registry accepted for the lookup (a pull secret's, a plugin's, or none),
//! cached per namespace, credential, registry and repository, so that one namespace's listing
//! never answers another's, and a rollout of one typo in many Pods lists once. A listing is
//! bounded in pages and bytes and never outlives the lookup's deadline; whatever goes wrong,
//! the 404 is answered without suggestions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oci_client::secrets::RegistryAuth;
use oci_client::Reference;
use registry_client::auth::Identity;
use registry_client::pool::{Pool, TagLimits, UrlSlot};
use tokio::time::Instant as Deadline;

use crate::registries::nearest_tags;

/// What one listing reads at most: 1,000 tags a page (distribution's own default page), 20
/// pages, 4 MiB.
pub const LISTING: TagLimits = TagLimits {
    page_size: 1000,
    max_pages: 20,
    max_bytes: 4 << 20,
};
/// What the cache holds at most, every listing together.
const MAX_CACHED_BYTES: usize = 16 << 20;
/// The cache's cost of a tag beyond its bytes (the `String`).
const PER_TAG_BYTES: usize = 24;

/// Whose listing of which repository: the credential as a digest only.
#[derive(Clone, PartialEq, Eq, Hash)]
struct ListKey {
    namespace: String,
    credential: Identity,
    registry: String,
    repository: String,
}

/// A listing and when it was made; `None` when the repository could not be listed (a listing
/// that failed is not made again for the cache's time either).
struct Listed {
    at: Instant,
    /// The order listings were kept in: the first to go when the cache is full is the lowest.
    order: u64,
    tags: Option<Arc<Vec<String>>>,
    bytes: usize,
}

/// The tag listings of the broker.
pub struct TagLists {
    ttl: Duration,
    entries: Mutex<HashMap<ListKey, Listed>>,
}

/// The lookup a 404 answered: what to list, as whom, and the tag asked.
pub struct Asked<'a> {
    /// The request's namespace.
    pub namespace: &'a str,
    /// The image, with the tag asked.
    pub upstream: &'a Reference,
    /// The credential the registry answered 404 to.
    pub auth: &'a RegistryAuth,
}

impl TagLists {
    /// An empty cache whose listings are kept for `ttl`.
    pub fn new(ttl: Duration) -> Self {
        TagLists {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// The tags to suggest for `asked`'s tag, nearest first; none when it asks a digest, the
    /// repository cannot be listed, or not before `deadline`.
    pub async fn suggest(&self, pool: &Pool, asked: &Asked<'_>, deadline: Deadline) -> Vec<String> {
        let Some(tag) = asked.upstream.tag() else {
            return Vec::new();
        };
        let key = ListKey {
            namespace: asked.namespace.to_owned(),
            credential: Identity::of(asked.auth),
            registry: asked.upstream.registry().to_owned(),
            repository: asked.upstream.repository().to_owned(),
        };
        let tags = match self.cached(&key) {
            Some(tags) => tags,
            None => {
                let slot = UrlSlot::default();
                let listing = pool.tags(asked.upstream, asked.auth, LISTING, &slot);
                let tags = match tokio::time::timeout_at(deadline, listing).await {
                    Ok(Ok(tags)) => Some(Arc::new(
                        tags.into_iter()
                            .filter(|t| broker_reference::is_tag(t))
                            .collect::<Vec<_>>(),
                    )),
                    _ => None,
                };
                self.keep(key, tags.clone());
                tags
            }
        };
        tags.map(|tags| {
            nearest_tags::nearest(tag, tags.iter().map(String::as_str))
                .into_iter()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
    }

    fn cached(&self, key: &ListKey) -> Option<Option<Arc<Vec<String>>>> {
        let entries = self.entries.lock().ok()?;
        let listed = entries.get(key)?;
        (listed.at.elapsed() < self.ttl).then(|| listed.tags.clone())
    }

    /// Keeps a listing within [`MAX_CACHED_BYTES`]: expired listings go first, then the
    /// oldest; one larger than the whole cache is not kept.
    fn keep(&self, key: ListKey, tags: Option<Arc<Vec<String>>>) {
        let bytes = key.namespace.len()
            + key.registry.len()
            + key.repository.len()
            + tags
                .as_ref()
                .map_or(0, |tags| tags.iter().map(|t| t.len() + PER_TAG_BYTES).sum());
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if bytes > MAX_CACHED_BYTES {
            entries.remove(&key);
            return;
        }
        entries.retain(|k, listed| k != &key && listed.at.elapsed() < self.ttl);
        let mut total: usize = entries.values().map(|l| l.bytes).sum();
        let order = entries.values().map(|l| l.order + 1).max().unwrap_or(0);
        while total + bytes > MAX_CACHED_BYTES {
            let Some(oldest) = entries
                .iter()
                .min_by_key(|(_, l)| l.order)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            total -= entries.remove(&oldest).map_or(0, |l| l.bytes);
        }
        entries.insert(
            key,
            Listed {
                at: Instant::now(),
                order,
                tags,
                bytes,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(namespace: &str, auth: &RegistryAuth) -> ListKey {
        ListKey {
            namespace: namespace.into(),
            credential: Identity::of(auth),
            registry: "r.example".into(),
            repository: "team/app".into(),
        }
    }

    #[test]
    fn a_listing_serves_only_its_namespace_and_credential() {
        let lists = TagLists::new(Duration::from_secs(60));
        let alice = RegistryAuth::Basic("alice".into(), "a-pw".into());
        let other = RegistryAuth::Basic("alice".into(), "another-pw".into());
        lists.keep(key("team-a", &alice), Some(Arc::new(vec!["v1".into()])));
        assert!(lists.cached(&key("team-a", &alice)).is_some());
        assert!(lists.cached(&key("team-b", &alice)).is_none());
        assert!(lists.cached(&key("team-a", &other)).is_none());
        assert!(lists
            .cached(&key("team-a", &RegistryAuth::Anonymous))
            .is_none());
    }

    #[test]
    fn listings_expire_and_the_cache_stays_bounded() {
        let expired = TagLists::new(Duration::ZERO);
        expired.keep(
            key("a", &RegistryAuth::Anonymous),
            Some(Arc::new(Vec::new())),
        );
        assert!(expired
            .cached(&key("a", &RegistryAuth::Anonymous))
            .is_none());

        let lists = TagLists::new(Duration::from_secs(60));
        // each listing a third of the cache: the fourth pushes the oldest out
        let third: Vec<String> = (0..MAX_CACHED_BYTES / 3 / (PER_TAG_BYTES + 8))
            .map(|i| format!("t{i:07}"))
            .collect();
        for ns in ["n1", "n2", "n3", "n4"] {
            lists.keep(
                key(ns, &RegistryAuth::Anonymous),
                Some(Arc::new(third.clone())),
            );
        }
        let held = |ns: &str| lists.cached(&key(ns, &RegistryAuth::Anonymous)).is_some();
        assert!(!held("n1") && held("n2") && held("n3") && held("n4"));
        let total: usize = lists
            .entries
            .lock()
            .map_or(0, |e| e.values().map(|l| l.bytes).sum());
        assert!(total <= MAX_CACHED_BYTES, "{total}");
        // larger than the whole cache: not kept
        let huge: Vec<String> = (0..MAX_CACHED_BYTES / PER_TAG_BYTES)
            .map(|i| i.to_string())
            .collect();
        lists.keep(key("n5", &RegistryAuth::Anonymous), Some(Arc::new(huge)));
        assert!(!held("n5"));
    }
}
