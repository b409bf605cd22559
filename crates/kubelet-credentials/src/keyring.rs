//! The kubelet's keyring (`keyring.go`, `BasicDockerKeyring`): the credentials of a pod's pull
//! secrets filed by registry key, and which of them a pull of a given image tries, in order.

use std::collections::BTreeMap;
use std::fmt;

use super::credential::Credential;
use super::label_glob::glob_match;
use super::registry_url::RegistryUrl;

/// The keyring key whose credentials serve Docker Hub images no key matched
/// (`https://index.docker.io/v1/` is stored under it).
const DEFAULT_REGISTRY_HOST: &[u8] = b"index.docker.io";

/// The kubelet's `BasicDockerKeyring`: credentials by registry key, looked up by image.
#[derive(Default, Clone)]
pub struct Keyring {
    /// Credentials by key (`host[:port][/path]`), each list in insertion order. Iterated in
    /// reverse, the keys are the kubelet's reverse-sorted index: longer paths come first.
    creds: BTreeMap<Vec<u8>, Vec<Credential>>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("keys", &self.creds.len())
            .finish_non_exhaustive()
    }
}

impl Keyring {
    /// An empty keyring: every lookup pulls anonymously.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one `auths` entry, as `BasicDockerKeyring.Add` does: `https://` is put in front of a
    /// key without `https://` or `http://`, the URL is parsed as Go's `url.Parse` does (a key
    /// that does not parse is skipped, as the kubelet skips it), a `/v1/` or `/v2/` path prefix
    /// is dropped, and the credential is filed under `host[:port]` plus the path unless that is
    /// empty or `/`. Call it in the order of the pod's secrets.
    pub fn add(&mut self, key: &str, credential: Credential) {
        let rest = key
            .strip_prefix("https://")
            .or_else(|| key.strip_prefix("http://"))
            .unwrap_or(key);
        let Some(url) = RegistryUrl::parse(rest.as_bytes()) else {
            return;
        };
        let mut path = url.path.as_slice();
        if path.starts_with(b"/v2/") || path.starts_with(b"/v1/") {
            path = &path[3..];
        }
        let mut index_key = url.host;
        if !path.is_empty() && path != b"/" {
            index_key.extend_from_slice(path);
        }
        self.creds.entry(index_key).or_default().push(credential);
    }

    /// True when no entry was added: the kubelet pulls anonymously.
    pub fn is_empty(&self) -> bool {
        self.creds.is_empty()
    }

    /// Every credential the kubelet tries for `image`, in its order: keys in reverse-sorted
    /// order (more specific paths first), each key's credentials in insertion order. When no
    /// key matches and the image is on Docker Hub, the `index.docker.io` entry. Empty means an
    /// anonymous pull.
    ///
    /// `image` is the normalised repository without tag or digest, as the kubelet passes it:
    /// `docker.io/library/busybox`, `registry.example.com:5000/team/app`.
    pub fn lookup(&self, image: &str) -> Vec<&Credential> {
        let matched: Vec<&Credential> = self
            .creds
            .iter()
            .rev()
            .filter(|(key, _)| urls_match_str(key, image.as_bytes()))
            .flat_map(|(_, credentials)| credentials)
            .collect();
        if !matched.is_empty() {
            return matched;
        }
        if is_default_registry_match(image) {
            if let Some(credentials) = self.creds.get(DEFAULT_REGISTRY_HOST) {
                return credentials.iter().collect();
            }
        }
        Vec::new()
    }

    /// Whether a pull of `image` (as for [`Keyring::lookup`]) would send any credential: when
    /// none, the kubelet pulls anonymously.
    pub fn covers(&self, image: &str) -> bool {
        !self.is_empty() && !self.lookup(image).is_empty()
    }
}

/// Whether `image` is pulled from Docker Hub, judged by its name as `isDefaultRegistryMatch`.
pub(super) fn is_default_registry_match(image: &str) -> bool {
    let Some((first, _)) = image.split_once('/') else {
        return !image.is_empty();
    };
    if first.is_empty() {
        return false;
    }
    if first == "docker.io" || first == "index.docker.io" {
        return true;
    }
    !first.contains(['.', ':'])
}

// ---------------------------------------------------------------------------------------------
// Matching keys against images (keyring.go: URLsMatchStr, ParseSchemelessURL, SplitURL).

/// `URLsMatchStr`: both sides parsed as the rest of `https://` URLs; equal ports, the same
/// number of host labels, each label matching as a [`glob_match`] glob, and the key's path a
/// prefix of the image's. Anything that does not parse, or a malformed glob, is no match.
pub(super) fn urls_match_str(glob: &[u8], target: &[u8]) -> bool {
    let (Some(glob), Some(target)) = (RegistryUrl::parse(glob), RegistryUrl::parse(target)) else {
        return false;
    };
    let (glob_labels, glob_port) = glob.labels_and_port();
    let (target_labels, target_port) = target.labels_and_port();
    glob_port == target_port
        && glob_labels.len() == target_labels.len()
        && target.path.starts_with(&glob.path)
        && glob_labels
            .iter()
            .zip(&target_labels)
            .all(|(pattern, label)| glob_match(pattern, label) == Ok(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{assert_shows_no_secret, config_json, dockercfg, keyring_of, owned};
    use crate::fixtures::{SECRET_PASSWORD, SECRET_USER};
    use crate::testing::b64;
    use serde_json::json;

    /// The one credential of [`one_key`] keyrings.
    fn bot() -> Credential {
        Credential::new("team-a-bot", "pull-token")
    }

    /// A keyring made from one `kubernetes.io/dockerconfigjson` secret whose only `auths` entry
    /// is `key`, holding [`bot`] as an `auth` field: the whole path from secret to keyring.
    fn one_key(key: &str) -> Keyring {
        let auth = b64("team-a-bot:pull-token");
        keyring_of(&[config_json(
            &json!({"auths": {key: {"auth": auth}}}).to_string(),
        )])
    }

    /// A keyring with one credential per key, named after its key, added in the given order.
    fn named_keys(keys: &[&str]) -> Keyring {
        let mut keyring = Keyring::new();
        for key in keys {
            keyring.add(key, Credential::new(*key, "pw"));
        }
        keyring
    }

    /// The usernames `lookup` gives for `image`, in order.
    fn usernames(keyring: &Keyring, image: &str) -> Vec<String> {
        let found = keyring.lookup(image);
        found.iter().map(|c| c.username().to_owned()).collect()
    }

    /// The keys a keyring files its credentials under, in lookup order.
    fn stored_keys(keyring: &Keyring) -> Vec<String> {
        let keys = keyring.creds.keys().rev();
        keys.map(|key| String::from_utf8_lossy(key).into_owned())
            .collect()
    }

    #[test]
    fn add_files_each_key_under_host_and_path() {
        let cases = [
            // Without a scheme, `https://` is assumed; either scheme is dropped from the key.
            ("registry.example.test", "registry.example.test"),
            ("https://registry.example.test", "registry.example.test"),
            ("http://registry.example.test", "registry.example.test"),
            // A bare `/` path is no path.
            ("registry.example.test/", "registry.example.test"),
            // `/v1/` and `/v2/` are API prefixes, not part of the repository path.
            ("https://registry.example.test/v2/", "registry.example.test"),
            ("registry.example.test/v1/", "registry.example.test"),
            (
                "registry.example.test/v1/team-a",
                "registry.example.test/team-a",
            ),
            (
                "https://registry.example.test/v2/team-a/app",
                "registry.example.test/team-a/app",
            ),
            // Only those two, and only with the slash after them.
            ("registry.example.test/v3/", "registry.example.test/v3/"),
            ("registry.example.test/v2", "registry.example.test/v2"),
            (
                "registry.example.test/v2team",
                "registry.example.test/v2team",
            ),
            // The port stays in the key, and so does a trailing slash after a path.
            (
                "registry.example.test:5000/team-a",
                "registry.example.test:5000/team-a",
            ),
            (
                "registry.example.test/team-a/",
                "registry.example.test/team-a/",
            ),
            // What `kubectl create secret docker-registry` writes for Docker Hub.
            ("https://index.docker.io/v1/", "index.docker.io"),
        ];
        for (configured, stored) in cases {
            assert_eq!(stored_keys(&one_key(configured)), [stored], "{configured}");
        }
    }

    #[test]
    fn spellings_of_one_key_share_its_entry_in_insertion_order() {
        let keyring = named_keys(&[
            "https://registry.example.test/v2/",
            "registry.example.test",
            "http://registry.example.test/",
        ]);
        assert_eq!(stored_keys(&keyring), ["registry.example.test"]);
        assert_eq!(
            usernames(&keyring, "registry.example.test/team-a/app"),
            [
                "https://registry.example.test/v2/",
                "registry.example.test",
                "http://registry.example.test/",
            ]
        );
    }

    /// Checks `urls_match_str` on `(key, image, matches)` cases.
    fn assert_urls_match(cases: &[(&str, &str, bool)]) {
        for &(glob, target, expected) in cases {
            assert_eq!(
                urls_match_str(glob.as_bytes(), target.as_bytes()),
                expected,
                "{glob} vs {target}"
            );
        }
    }

    #[test]
    fn urls_match_labels_one_by_one() {
        assert_urls_match(&[
            // The same host; an empty key path is a prefix of every image path.
            ("registry.example.test", "registry.example.test", true),
            (
                "registry.example.test",
                "registry.example.test/team-a/app",
                true,
            ),
            // Every label must match its counterpart.
            ("registry.example.test", "registry.example.org/app", false),
            ("registry.example.test", "mirror.example.test/app", false),
            ("r*.example.test", "mirror.example.test/app", false),
            // Hosts are compared as written, not lowercased.
            ("Registry.example.test", "registry.example.test/app", false),
        ]);
    }

    #[test]
    fn urls_match_globs_within_a_label() {
        assert_urls_match(&[
            // `*` may stand for a whole label...
            ("*.example.test", "registry.example.test/app", true),
            ("registry.*.test", "registry.example.test/app", true),
            ("registry.example.*", "registry.example.test/app", true),
            ("*.*.example.test", "eu.registry.example.test/app", true),
            ("*", "localhost/app", true),
            // ...or for part of one; `[...]` is one character of a class.
            ("reg-*.example.test", "reg-eu.example.test/app", true),
            ("reg-*.example.test", "mirror-eu.example.test/app", false),
            ("reg[0-9].example.test", "reg7.example.test/app", true),
            ("reg[^0-9].example.test", "reg7.example.test/app", false),
            // `?` never reaches the glob: both sides are read as URLs first, where it starts
            // the query, so this key is the one-label host `reg`.
            ("reg?.example.test", "reg1.example.test/app", false),
            ("reg?.example.test", "reg/app", true),
            // A malformed glob matches nothing, not even its own text.
            ("reg[.example.test", "reg[.example.test/app", false),
        ]);
    }

    #[test]
    fn urls_match_needs_as_many_labels() {
        // A glob never spans a dot.
        assert_urls_match(&[
            ("*.example.test", "example.test/app", false),
            ("*.example.test", "eu.registry.example.test/app", false),
            ("*.*.example.test", "registry.example.test/app", false),
            ("*", "registry.example.test/app", false),
        ]);
    }

    #[test]
    fn urls_match_needs_equal_ports() {
        // Both absent counts as equal; no port is implied by the scheme.
        let host = "registry.example.test";
        assert_urls_match(&[
            (
                "registry.example.test:5000",
                "registry.example.test:5000/app",
                true,
            ),
            (
                "*.example.test:5000",
                "registry.example.test:5000/app",
                true,
            ),
            (
                "registry.example.test:5000",
                "registry.example.test:5001/app",
                false,
            ),
            (host, "registry.example.test:5000/app", false),
            (
                "registry.example.test:5000",
                "registry.example.test/app",
                false,
            ),
            (
                "registry.example.test:443",
                "registry.example.test/app",
                false,
            ),
        ]);
    }

    #[test]
    fn urls_match_needs_the_key_path_as_a_string_prefix() {
        // Not a glob, and not whole segments.
        let key = "registry.example.test/team-a";
        let wide = "*.example.test:5000/team-a";
        assert_urls_match(&[
            (key, "registry.example.test/team-a", true),
            (key, "registry.example.test/team-a/app", true),
            (key, "registry.example.test/team-ab/app", true),
            (key, "registry.example.test/team-b/app", false),
            (key, "registry.example.test", false),
            (
                "registry.example.test/team-a/app",
                "registry.example.test/team-a",
                false,
            ),
            (
                "registry.example.test/team-*",
                "registry.example.test/team-a/app",
                false,
            ),
            (wide, "registry.example.test:5000/team-a/app", true),
            (wide, "registry.example.test:5000/team-b/app", false),
        ]);
    }

    #[test]
    fn configured_keys_hit_the_images_their_rules_cover() {
        let cases = [
            (
                "https://registry.example.test",
                "registry.example.test/team-a/app",
            ),
            (
                "http://registry.example.test",
                "registry.example.test/team-a/app",
            ),
            ("registry.example.test/", "registry.example.test/team-a/app"),
            (
                "https://registry.example.test/v2/",
                "registry.example.test/team-a/app",
            ),
            (
                "https://registry.example.test/v1/team-a",
                "registry.example.test/team-a/app",
            ),
            ("https://*.example.test", "mirror.example.test/team-a/app"),
            (
                "https://registry.*.test",
                "registry.example.test/team-a/app",
            ),
            (
                "https://registry.example.*",
                "registry.example.test/team-a/app",
            ),
            (
                "https://*.example.test/team-a",
                "mirror.example.test/team-a/app",
            ),
            (
                "https://registry.example.test:5000",
                "registry.example.test:5000/team-a/app",
            ),
            (
                "*.example.test:5000",
                "registry.example.test:5000/team-a/app",
            ),
            (
                "registry.example.test:5000/team-a/",
                "registry.example.test:5000/team-a/app",
            ),
        ];
        for (key, image) in cases {
            assert_eq!(
                owned(one_key(key).lookup(image)),
                [bot()],
                "{key} vs {image}"
            );
        }
    }

    #[test]
    fn configured_keys_miss_the_images_their_rules_exclude() {
        let cases = [
            (
                "https://registry.example.test",
                "registry.example.org/team-a/app",
            ),
            ("https://*.example.org", "registry.example.test/team-a/app"),
            ("https://mirror.*.test", "registry.example.test/team-a/app"),
            ("registry.example.t?", "registry.example.test/team-a/app"),
            ("*.example.test", "eu.registry.example.test/team-a/app"),
            (
                "registry.example.test:5000",
                "registry.example.test/team-a/app",
            ),
            (
                "registry.example.test",
                "registry.example.test:5000/team-a/app",
            ),
            (
                "https://registry.example.test/v2/team-b",
                "registry.example.test/team-a/app",
            ),
            (
                "registry.example.test/v3/team-a",
                "registry.example.test/team-a/app",
            ),
            // The trailing slash makes the key's path longer than the image's.
            (
                "registry.example.test/team-a/",
                "registry.example.test/team-a",
            ),
        ];
        for (key, image) in cases {
            assert!(one_key(key).lookup(image).is_empty(), "{key} vs {image}");
        }
    }

    #[test]
    fn docker_hub_key_serves_docker_hub_images_by_fallback() {
        let keyring = one_key("https://index.docker.io/v1/");
        // `index.docker.io` has three labels, `docker.io` two: only the fallback reaches these.
        for image in ["docker.io/library/busybox", "docker.io/team-a/app"] {
            assert!(!urls_match_str(DEFAULT_REGISTRY_HOST, image.as_bytes()));
            assert_eq!(owned(keyring.lookup(image)), [bot()], "{image}");
        }
    }

    #[test]
    fn docker_hub_key_serves_short_names_too() {
        // Names as written in a pod, for callers that do not normalise first.
        let keyring = one_key("https://index.docker.io/v1/");
        for image in ["busybox", "team-a/app", "localhost/team-a/app"] {
            assert_eq!(owned(keyring.lookup(image)), [bot()], "{image}");
        }
    }

    #[test]
    fn docker_hub_key_matches_its_own_host_directly() {
        let keyring = one_key("https://index.docker.io/v1/");
        assert!(urls_match_str(
            DEFAULT_REGISTRY_HOST,
            b"index.docker.io/team-a/app"
        ));
        assert_eq!(owned(keyring.lookup("index.docker.io/team-a/app")), [bot()]);
    }

    #[test]
    fn docker_hub_key_does_not_serve_other_registries() {
        let keyring = one_key("https://index.docker.io/v1/");
        for image in [
            "registry.example.test/team-a/app",
            "registry.example.test:5000/app",
            "localhost:5000/app",
        ] {
            assert!(keyring.lookup(image).is_empty(), "{image}");
        }
    }

    #[test]
    fn docker_hub_fallback_only_when_no_key_matched() {
        let keyring = named_keys(&["https://index.docker.io/v1/", "docker.io/team-a"]);
        assert_eq!(
            usernames(&keyring, "docker.io/team-a/app"),
            ["docker.io/team-a"]
        );
        assert_eq!(
            usernames(&keyring, "docker.io/team-b/app"),
            ["https://index.docker.io/v1/"]
        );
        // Without an `index.docker.io` entry there is nothing to fall back to.
        let without_hub = named_keys(&["docker.io/team-a"]);
        assert!(without_hub.lookup("docker.io/team-b/app").is_empty());
    }

    #[test]
    fn default_registry_is_judged_by_the_first_component() {
        let cases = [
            // No `/`: the whole string is a repository name on Docker Hub.
            ("busybox", true),
            ("registry.example.test", true),
            // A first component without `.` or `:` is a namespace, not a host.
            ("team-a/app", true),
            ("localhost/team-a/app", true),
            // Docker Hub's own names.
            ("docker.io/library/busybox", true),
            ("index.docker.io/team-a/app", true),
            // Anything else with a `.` or a `:` is another registry.
            ("registry.example.test/team-a/app", false),
            ("registry:5000/team-a/app", false),
            ("localhost:5000/app", false),
            ("hub.docker.io/team-a/app", false),
            ("docker.io.example.test/app", false),
            // An empty first component is no name at all.
            ("", false),
            ("/team-a/app", false),
        ];
        for (image, expected) in cases {
            assert_eq!(is_default_registry_match(image), expected, "{image:?}");
        }
    }

    #[test]
    fn lookup_tries_keys_in_reverse_sorted_order() {
        let keyring = named_keys(&[
            "*.example.test",
            "registry.example.test/team-a",
            "registry.example.test",
            "r*.example.test",
            "registry.example.test/team-a/app",
        ]);
        let host_wide = ["registry.example.test", "r*.example.test", "*.example.test"];
        let team_a = ["registry.example.test/team-a"];
        let app = [
            "registry.example.test/team-a/app",
            "registry.example.test/team-a",
        ];
        let cases: [(&str, Vec<&str>); 8] = [
            // A longer path sorts after its own prefix, so reversed it comes first.
            (
                "registry.example.test/team-a/app",
                [&app[..], &host_wide].concat(),
            ),
            // Path prefixes are string prefixes: `app` covers `app-v2`.
            (
                "registry.example.test/team-a/app-v2",
                [&app[..], &host_wide].concat(),
            ),
            (
                "registry.example.test/team-a/tool",
                [&team_a[..], &host_wide].concat(),
            ),
            // Keys of the same depth sort by their text: `*` sorts before letters, so the
            // wider glob is tried last.
            ("registry.example.test/team-b/app", host_wide.to_vec()),
            ("registry.example.test", host_wide.to_vec()),
            ("mirror.example.test/team-a/app", vec!["*.example.test"]),
            ("registry.example.org/team-a/app", vec![]),
            ("example.test/team-a/app", vec![]),
        ];
        for (image, expected) in cases {
            assert_eq!(usernames(&keyring, image), expected, "{image}");
        }
    }

    #[test]
    fn secrets_add_in_order_and_specific_paths_come_first() {
        let first = config_json(
            &json!({"auths": {
                "registry.example.com": {"username": "first", "password": "1"},
            }})
            .to_string(),
        );
        let second = dockercfg(
            &json!({
                "https://registry.example.com/v2/": {"username": "second", "password": "2"},
                "registry.example.com/team": {"username": "team", "password": "3"},
            })
            .to_string(),
        );
        let keyring = keyring_of(&[first.clone(), second.clone()]);
        let names = |image| -> Vec<String> {
            keyring
                .lookup(image)
                .iter()
                .map(|c| c.username().to_owned())
                .collect()
        };
        assert_eq!(
            names("registry.example.com/team/app"),
            ["team", "first", "second"]
        );
        assert_eq!(names("registry.example.com/other/app"), ["first", "second"]);
        let reversed = keyring_of(&[second, first]);
        let names: Vec<&str> = reversed
            .lookup("registry.example.com/other/app")
            .iter()
            .map(|c| c.username())
            .collect();
        assert_eq!(names, ["second", "first"]);
    }

    #[test]
    fn docker_hub_secret_from_kubectl_covers_normalised_names() {
        let hub = config_json(&json!({"auths": {
            "https://index.docker.io/v1/": {"username": "hub", "password": "pw", "auth": b64("hub:pw")},
        }}).to_string());
        let keyring = keyring_of(&[hub]);
        for image in [
            "docker.io/library/busybox",
            "docker.io/team/app",
            "index.docker.io/team/app",
        ] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("hub", "pw")],
                "{image}"
            );
        }
        assert!(keyring.lookup("ghcr.io/team/app").is_empty());
        // A direct match wins over the Docker Hub fallback.
        let mut both = keyring.clone();
        both.add("docker.io", Credential::new("direct", "pw"));
        let names: Vec<&str> = both
            .lookup("docker.io/library/busybox")
            .iter()
            .map(|c| c.username())
            .collect();
        assert_eq!(names, ["direct"]);
    }

    #[test]
    fn an_empty_keyring_covers_nothing() {
        let keyring = Keyring::new();
        assert!(keyring.is_empty());
        assert!(!keyring.covers("docker.io/library/busybox"));
        let unparsable = named_keys(&["registry.example.test:port"]);
        assert!(unparsable.is_empty());
        let one = one_key("registry.example.test");
        assert!(one.covers("registry.example.test/team-a/app"));
        assert!(!one.covers("registry.example.org/team-a/app"));
    }

    #[test]
    fn debug_shows_no_secret() {
        assert_shows_no_secret(&format!("{:?}", Keyring::new()));
        let mut keyring = Keyring::new();
        let credential = Credential::new(SECRET_USER, SECRET_PASSWORD)
            .with_identity_token(SECRET_PASSWORD)
            .with_registry_token(SECRET_PASSWORD);
        keyring.add("registry.example.com", credential);
        assert_shows_no_secret(&format!("{keyring:?}"));
    }
}
