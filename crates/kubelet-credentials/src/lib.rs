//! Image pull secrets and the kubelet's keyring: which registry credentials a pull of a given
//! image will try, by the rules of the kubelet's `pkg/credentialprovider`
//! (`keyring.go`, `config.go`, `secrets/secrets.go`), so that the policy checks an image with
//! exactly the credentials the kubelet would send, or with none when it would pull anonymously.
//!
//! Keys and images are read with the rules of Go's `url.Parse` that the keyring relies on
//! (<https://pkg.go.dev/net/url#Parse>), not by the `url` crate: WHATWG parsing lowercases and
//! IDNA-encodes hosts, drops default ports, resolves dot segments and refuses `[` in hosts, and
//! each of those changes which `auths` key matches an image. Likewise the JSON of a secret is
//! read with Go's `encoding/json` rules (case-insensitive field names, `null` as "unset",
//! duplicate keys applied in order).
//!
//! One file per concept:
//!
//! - `credential`: a registry credential, in a type that cannot be printed;
//! - `secret`: which Secrets count as pull secrets, where their document is, why one is unusable;
//! - `docker_config`: the kubelet's config types, decoded from that document;
//! - `go_json` and `go_base64`: Go's `encoding/json` and `encoding/base64` rules they rely on;
//! - `keyring`: the kubelet's keyring, matching `auths` keys against images;
//! - `registry_url`: a key or an image read as a URL, and its host split into labels and port;
//! - `label_glob`: the glob each host label of a key is (<https://pkg.go.dev/path#Match>);
//! - `pod_secrets`: which pull secrets a pod uses, its own or its ServiceAccount's.
//!
//! The policy (compiled to wasm) and the lookup broker (native) both use this crate, so it
//! depends on serde and serde_json only. The policy calls it `credentials`. Tested by a
//! test per rule, the shared keyring vectors when `../shared/vectors` is beside the clone, the
//! `keyring` and `docker_config` fuzz targets and the policy's decision tests; the `testing`
//! feature exports the builders of Secrets and base64 that the tests and fuzz targets share.

mod credential;
mod docker_config;
#[cfg(test)]
mod fixtures;
mod go_base64;
mod go_json;
mod keyring;
mod label_glob;
pub mod pod_secrets;
mod registry_url;
mod secret;
#[cfg(test)]
mod shared_vectors;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use credential::Credential;
pub use docker_config::EntryProblem;
pub use keyring::Keyring;
pub use pod_secrets::{distinct_names, service_account_secret_names, SecretSource};
pub use secret::{parse_pull_secret, SecretError};

/// Whether the keyring glob `glob` (a host glob with an optional port and path, no scheme)
/// covers `image` (a repository without tag), as `URLsMatchStr`: the rule of `auths` keys,
/// of credential providers' `matchImages` and of the keys of their answers.
pub fn url_matches(glob: &str, image: &str) -> bool {
    keyring::urls_match_str(glob.as_bytes(), image.as_bytes())
}

/// Whether Go's `url.Parse` accepts `https://` followed by `text`: the kubelet's only check of
/// a credential provider's `matchImages` entry (`ParseSchemelessURL` in
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/credentialprovider/plugin/config.go>).
/// An entry that parses but holds a scheme or a `*` in its path is accepted and never matches.
pub fn parses_as_schemeless_url(text: &str) -> bool {
    registry_url::RegistryUrl::parse(text.as_bytes()).is_some()
}

/// A Secret's `data` value as the API server sends it (padded standard base64), decoded as
/// the kubelet decodes it; `None` when it is not base64.
pub fn decode_secret_data(encoded: &str) -> Option<Vec<u8>> {
    go_base64::decode_base64(encoded.as_bytes(), true)
}

#[cfg(test)]
mod tests {
    use super::fixtures::{config_json, dockercfg, parse};
    use super::keyring::urls_match_str;
    use super::label_glob::glob_match;
    use super::secret::DOCKERCFG_TYPE;
    use super::{Credential, Keyring};
    use serde_json::json;

    // Edge cases of every parser at once, each string as a key, an image, a glob, a document
    // and an `auth`; minimised fuzz crashes go here too (CONTRIBUTING.md, Fuzzing).
    #[test]
    fn no_input_panics() {
        let strings = [
            "",
            "/",
            ":",
            "@",
            "[",
            "]",
            "[]",
            "[:]",
            "[::1]:",
            "%",
            "%2",
            "%25",
            "%ff",
            "*",
            "**",
            "\\",
            "[\\",
            "[a-",
            "[a-]",
            "[^",
            "?",
            "\u{212A}",
            "é.example.com",
            "a:b:c",
            "https://",
            "http://",
            "https:",
            "///",
            "a..b",
            ".",
            "..",
            "#",
            "?x",
            "index.docker.io",
            "docker.io/library/busybox",
            "x/v1/",
            "/v2/",
            "[\u{e9}]",
        ];
        let mut keyring = Keyring::new();
        for key in strings {
            keyring.add(key, Credential::new("u", "p"));
        }
        for image in strings {
            let _ = keyring.lookup(image);
            for pattern in strings {
                let _ = glob_match(pattern.as_bytes(), image.as_bytes());
                let _ = urls_match_str(pattern.as_bytes(), image.as_bytes());
            }
            let _ = parse(&config_json(image));
            let _ = parse(&dockercfg(&json!({image: {"auth": image}}).to_string()));
            let _ = parse(&json!({"type": DOCKERCFG_TYPE, "data": {".dockercfg": image}}));
        }
    }
}
