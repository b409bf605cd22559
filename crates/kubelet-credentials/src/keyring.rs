//! The kubelet's keyring (`keyring.go`, `BasicDockerKeyring`): the credentials of a pod's pull
//! secrets filed by registry key, and which of them a pull of a given image tries, in order.

use std::collections::BTreeMap;
use std::fmt;

use super::credential::Credential;
use super::go_path::path_match;
use super::go_url::{parse_http_url, split_host_port};

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
    /// key without `https://` or `http://`, the URL is parsed as Go's `net/url` does (a key
    /// that does not parse is skipped, as the kubelet skips it), a `/v1/` or `/v2/` path prefix
    /// is dropped, and the credential is filed under `host[:port]` plus the path unless that is
    /// empty or `/`. Call it in the order of the pod's secrets.
    pub fn add(&mut self, key: &str, credential: Credential) {
        let url = if key.starts_with("https://") || key.starts_with("http://") {
            parse_http_url(key.as_bytes())
        } else {
            parse_http_url(format!("https://{key}").as_bytes())
        };
        let Some(url) = url else { return };
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
fn is_default_registry_match(image: &str) -> bool {
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

/// `URLsMatchStr`: both sides parsed as `https://` URLs; equal ports, the same number of host
/// labels, each label matching as a `path.Match` glob, and the key's path a prefix of the
/// image's. Anything that does not parse, or a malformed glob, is no match.
pub(super) fn urls_match_str(glob: &[u8], target: &[u8]) -> bool {
    let with_scheme = |s: &[u8]| [b"https://".as_slice(), s].concat();
    let (Some(glob), Some(target)) = (
        parse_http_url(&with_scheme(glob)),
        parse_http_url(&with_scheme(target)),
    ) else {
        return false;
    };
    let (glob_labels, glob_port) = split_url(&glob.host);
    let (target_labels, target_port) = split_url(&target.host);
    glob_port == target_port
        && glob_labels.len() == target_labels.len()
        && target.path.starts_with(&glob.path)
        && glob_labels
            .iter()
            .zip(&target_labels)
            .all(|(pattern, label)| path_match(pattern, label) == Ok(true))
}

/// `SplitURL`: the host's dot-separated labels and its port (empty when `net.SplitHostPort`
/// refuses the host, which then keeps any `:port` in its last label).
fn split_url(host: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let (name, port) = split_host_port(host).unwrap_or((host, b""));
    (name.split(|&b| b == b'.').collect(), port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{assert_shows_no_secret, config_json, dockercfg, keyring_of, owned};
    use crate::fixtures::{SECRET_PASSWORD, SECRET_USER};
    use crate::testing::b64;
    use serde_json::json;

    /// The fixture of the kubelet's keyring tests: one `.dockercfg` entry for `key`, user
    /// foo, password bar, with an email.
    fn foo_bar_keyring(key: &str) -> Keyring {
        let payload = json!({key: {"email": "foo@bar.baz", "auth": b64("foo:bar")}});
        keyring_of(&[dockercfg(&payload.to_string())])
    }

    // keyring_test.go: TestURLsMatch.
    #[test]
    fn urls_match() {
        let cases = [
            // match when there is no path component
            ("*.kubernetes.io", "prefix.kubernetes.io", true),
            ("prefix.*.io", "prefix.kubernetes.io", true),
            ("prefix.kubernetes.*", "prefix.kubernetes.io", true),
            ("*-good.kubernetes.io", "prefix-good.kubernetes.io", true),
            // match with path components
            ("*.kubernetes.io/blah", "prefix.kubernetes.io/blah", true),
            ("prefix.*.io/foo", "prefix.kubernetes.io/foo/bar", true),
            // match with path components and ports
            (
                "*.kubernetes.io:1111/blah",
                "prefix.kubernetes.io:1111/blah",
                true,
            ),
            (
                "prefix.*.io:1111/foo",
                "prefix.kubernetes.io:1111/foo/bar",
                true,
            ),
            // no match when number of parts mismatch
            ("*.kubernetes.io", "kubernetes.io", false),
            ("*.*.kubernetes.io", "prefix.kubernetes.io", false),
            ("*.*.kubernetes.io", "kubernetes.io", false),
            // no match when some parts mismatch
            ("kubernetes.io", "kubernetes.com", false),
            ("k*.io", "quay.io", false),
            // no match when ports mismatch
            (
                "*.kubernetes.io:1234/blah",
                "prefix.kubernetes.io:1111/blah",
                false,
            ),
            (
                "prefix.*.io/foo",
                "prefix.kubernetes.io:1111/foo/bar",
                false,
            ),
        ];
        for (glob, target, expected) in cases {
            assert_eq!(
                urls_match_str(glob.as_bytes(), target.as_bytes()),
                expected,
                "{glob} vs {target}"
            );
        }
    }

    // keyring_test.go: TestDockerKeyringForGlob.
    #[test]
    fn docker_keyring_for_glob() {
        let cases = [
            ("https://hello.kubernetes.io", "hello.kubernetes.io"),
            ("https://*.docker.io", "prefix.docker.io"),
            ("https://prefix.*.io", "prefix.docker.io"),
            ("https://prefix.docker.*", "prefix.docker.io"),
            ("https://*.docker.io/path", "prefix.docker.io/path"),
            ("https://prefix.*.io/path", "prefix.docker.io/path/subpath"),
            ("https://prefix.docker.*/path", "prefix.docker.io/path"),
            ("https://*.docker.io:8888", "prefix.docker.io:8888"),
            ("https://prefix.*.io:8888", "prefix.docker.io:8888"),
            ("https://prefix.docker.*:8888", "prefix.docker.io:8888"),
            (
                "https://*.docker.io/path:1111",
                "prefix.docker.io/path:1111",
            ),
            ("https://*.docker.io/v1/", "prefix.docker.io/path:1111"),
            ("https://*.docker.io/v2/", "prefix.docker.io/path:1111"),
            (
                "https://prefix.docker.*/path:1111",
                "prefix.docker.io/path:1111",
            ),
            ("prefix.docker.io:1111", "prefix.docker.io:1111/path"),
            ("*.docker.io:1111", "prefix.docker.io:1111/path"),
        ];
        for (glob, target) in cases {
            let keyring = foo_bar_keyring(glob);
            let found = keyring.lookup(&format!("{target}/foo/bar"));
            assert_eq!(
                owned(found),
                vec![Credential::new("foo", "bar")],
                "{glob} vs {target}"
            );
        }
    }

    // keyring_test.go: TestKeyringMiss.
    #[test]
    fn keyring_miss() {
        let cases = [
            ("https://hello.kubernetes.io", "world.mesos.org/foo/bar"),
            ("https://*.docker.com", "prefix.docker.io"),
            ("https://suffix.*.io", "prefix.docker.io"),
            ("https://prefix.docker.c*", "prefix.docker.io"),
            (
                "https://prefix.*.io/path:1111",
                "prefix.docker.io/path/subpath:1111",
            ),
            ("suffix.*.io", "prefix.docker.io"),
        ];
        for (glob, lookup) in cases {
            let keyring = foo_bar_keyring(glob);
            assert!(
                keyring.lookup(&format!("{lookup}/foo/bar")).is_empty(),
                "{glob} vs {lookup}"
            );
        }
    }

    // keyring_test.go: TestKeyringMissWithDockerHubCredentials.
    #[test]
    fn keyring_miss_with_docker_hub_credentials() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        assert!(keyring.lookup("world.mesos.org/foo/bar").is_empty());
    }

    // keyring_test.go: TestKeyringHitWithUnqualifiedDockerHub, with the name as written and as
    // the kubelet passes it after normalisation.
    #[test]
    fn keyring_hit_with_unqualified_docker_hub() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        for image in ["google/docker-registry", "docker.io/google/docker-registry"] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("foo", "bar")],
                "{image}"
            );
        }
    }

    // keyring_test.go: TestKeyringHitWithUnqualifiedLibraryDockerHub.
    #[test]
    fn keyring_hit_with_unqualified_library_docker_hub() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        for image in ["jenkins", "docker.io/library/jenkins"] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("foo", "bar")],
                "{image}"
            );
        }
    }

    // keyring_test.go: TestKeyringHitWithQualifiedDockerHub (the kubelet test looks up
    // "index.docker.io/v1/" + "/google/docker-registry", a direct host match).
    #[test]
    fn keyring_hit_with_qualified_docker_hub() {
        let keyring = foo_bar_keyring("https://index.docker.io/v1/");
        for image in [
            "index.docker.io/v1//google/docker-registry",
            "index.docker.io/google/docker-registry",
            "docker.io/google/docker-registry",
        ] {
            assert_eq!(
                owned(keyring.lookup(image)),
                vec![Credential::new("foo", "bar")],
                "{image}"
            );
        }
    }

    // keyring_test.go: TestIsDefaultRegistryMatch.
    #[test]
    fn default_registry_match() {
        let cases = [
            ("foo/bar", true),
            ("docker.io/foo/bar", true),
            ("index.docker.io/foo/bar", true),
            ("foo", true),
            ("", false),
            ("registry.tld/foo/bar", false),
            ("registry:5000/foo/bar", false),
            ("myhostdocker.io/foo/bar", false),
            ("/foo", false),
        ];
        for (image, expected) in cases {
            assert_eq!(is_default_registry_match(image), expected, "{image:?}");
        }
    }

    // keyring_test.go: TestDockerKeyringLookup.
    #[test]
    fn docker_keyring_lookup() {
        let ada = Credential::new("ada", "smash");
        let grace = Credential::new("grace", "squash");
        let mut keyring = Keyring::new();
        keyring.add("bar.example.com/pong", grace.clone());
        keyring.add("bar.example.com", ada.clone());
        let cases: [(&str, Vec<Credential>); 7] = [
            // direct match
            ("bar.example.com", vec![ada.clone()]),
            // direct match deeper than other possible matches
            ("bar.example.com/pong", vec![grace.clone(), ada.clone()]),
            // no direct match, deeper path ignored
            ("bar.example.com/ping", vec![ada.clone()]),
            // match first part of path token
            ("bar.example.com/pongz", vec![grace.clone(), ada.clone()]),
            // match regardless of sub-path
            (
                "bar.example.com/pong/pang",
                vec![grace.clone(), ada.clone()],
            ),
            // no host match
            ("example.com", vec![]),
            ("foo.example.com", vec![]),
        ];
        for (image, expected) in cases {
            assert_eq!(owned(keyring.lookup(image)), expected, "{image}");
        }
    }

    // keyring_test.go: TestIssue3797 — a key with scheme and /v1/ path matches by host.
    #[test]
    fn scheme_and_version_path_match_the_host() {
        let rex = Credential::new("rex", "tiny arms");
        let mut keyring = Keyring::new();
        keyring.add("https://quay.io/v1/", rex.clone());
        for image in ["quay.io", "quay.io/foo", "quay.io/foo/bar"] {
            assert_eq!(owned(keyring.lookup(image)), vec![rex.clone()], "{image}");
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
