//! Builders of the objects the tests and fuzz targets feed the policy: base64 as the Kubernetes
//! API encodes Secret data, pull secrets and ServiceAccounts in the fixtures' namespace. One set,
//! shared by the unit tests, the integration tests in `tests/` and the fuzz targets in `fuzz/`,
//! so that every suite builds a Secret the same way. Compiled for the crate's own unit tests and
//! with the `testing` feature only; never part of the policy.

use serde_json::{json, Value};

/// The namespace of every fixture request (`tests/fixtures/requests`), where the builders put
/// their objects.
pub const NAMESPACE: &str = "team-a";

/// The cases of `file` in the shared test vectors: `../shared/vectors/<file>` beside the
/// workspace (data gathered from upstream projects' tests, kept outside this repository and
/// absent from a user's clone). `None`, said on stderr so that `cargo test` shows the skip, when
/// the file is not there.
///
/// # Panics
/// When the file is there but is not a JSON list: a broken vector is a failed test.
pub fn shared_vectors(file: &str) -> Option<Vec<Value>> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())?;
    let path = root.join("../shared/vectors").join(file);
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!("skipped: ../shared/vectors/{file} not present");
        return None;
    };
    match serde_json::from_str(&text) {
        Ok(Value::Array(cases)) => Some(cases),
        _ => panic!("{} is not a JSON list of cases", path.display()),
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (Go's `base64.StdEncoding`): how the API serves Secret `data`
/// and how `kubectl` writes an `auth` field.
pub fn b64(data: impl AsRef<[u8]>) -> String {
    encode(data.as_ref(), true)
}

/// Standard base64 without padding (Go's `base64.RawStdEncoding`): an `auth` field the kubelet
/// also accepts.
pub fn b64_unpadded(data: impl AsRef<[u8]>) -> String {
    encode(data.as_ref(), false)
}

fn encode(data: &[u8], padded: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for group in data.chunks(3) {
        let bits = group
            .iter()
            .enumerate()
            .fold(0u32, |bits, (i, &b)| bits | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[(bits >> (18 - 6 * i) & 63) as usize]));
            } else if padded {
                out.push('=');
            }
        }
    }
    out
}

/// A Secret `name` of type `secret_type` as the Kubernetes API returns it: `document` under
/// data key `key`, base64-encoded.
pub fn secret(name: &str, secret_type: &str, key: &str, document: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": secret_type,
           "metadata": {"name": name, "namespace": NAMESPACE},
           "data": {key: b64(document)}})
}

/// A `kubernetes.io/dockerconfigjson` Secret holding `document` (`{"auths": {...}}`) as is,
/// for documents of any shape.
pub fn config_json_secret(name: &str, document: &str) -> Value {
    secret(
        name,
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        document,
    )
}

/// A legacy `kubernetes.io/dockercfg` Secret holding `document` (the bare entries) as is, for
/// documents of any shape.
pub fn dockercfg_secret(name: &str, document: &str) -> Value {
    secret(name, "kubernetes.io/dockercfg", ".dockercfg", document)
}

/// A `kubernetes.io/dockerconfigjson` Secret with one `auth` entry for `registry`, as
/// `kubectl create secret docker-registry` writes it.
pub fn dockerconfigjson(name: &str, registry: &str, user: &str, password: &str) -> Value {
    let config = json!({"auths": {registry: {"auth": b64(format!("{user}:{password}"))}}});
    config_json_secret(name, &config.to_string())
}

/// A legacy `kubernetes.io/dockercfg` Secret with one username/password entry for `registry`.
pub fn dockercfg(name: &str, registry: &str, user: &str, password: &str) -> Value {
    let config =
        json!({registry: {"username": user, "password": password, "email": "x@example.com"}});
    dockercfg_secret(name, &config.to_string())
}

/// A ServiceAccount `name` whose `imagePullSecrets` name `secrets`, in order.
pub fn service_account(name: &str, secrets: &[&str]) -> Value {
    let refs: Vec<Value> = secrets.iter().map(|s| json!({"name": s})).collect();
    json!({"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": name, "namespace": NAMESPACE}, "imagePullSecrets": refs})
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values checked with coreutils `base64`; padding removed by hand.
    #[test]
    fn base64_encodes_as_the_api_serves_secret_data() {
        let vectors: [(&[u8], &str, &str); 9] = [
            // Zero, two and one padding characters, by the input's length modulo three.
            (b"", "", ""),
            (b"t", "dA==", "dA"),
            (b"te", "dGU=", "dGU"),
            (b"tea", "dGVh", "dGVh"),
            (b"bot:", "Ym90Og==", "Ym90Og"),
            (
                b"team-a-bot:pull-token",
                "dGVhbS1hLWJvdDpwdWxsLXRva2Vu",
                "dGVhbS1hLWJvdDpwdWxsLXRva2Vu",
            ),
            // The last two symbols of the alphabet, and a zero byte.
            (&[0xff, 0xff, 0xfe], "///+", "///+"),
            (&[0xfb, 0xef], "++8=", "++8"),
            (&[0x00], "AA==", "AA"),
        ];
        for (data, padded, unpadded) in vectors {
            assert_eq!(b64(data), padded, "{data:?}");
            assert_eq!(b64_unpadded(data), unpadded, "{data:?}");
        }
    }

    #[test]
    fn secrets_are_as_the_api_serves_them() {
        let secret = dockerconfigjson("regcred", "r.io", "u", "p");
        assert_eq!(secret["type"], "kubernetes.io/dockerconfigjson");
        assert_eq!(secret["metadata"]["namespace"], NAMESPACE);
        let document = json!({"auths": {"r.io": {"auth": b64("u:p")}}}).to_string();
        assert_eq!(secret["data"][".dockerconfigjson"], b64(document));
        let legacy = dockercfg("legacy", "r.io", "u", "p");
        assert_eq!(legacy["type"], "kubernetes.io/dockercfg");
        assert!(legacy["data"][".dockercfg"].is_string());
        let account = service_account("default", &["a", "b"]);
        assert_eq!(
            account["imagePullSecrets"],
            json!([{"name": "a"}, {"name": "b"}])
        );
    }
}
