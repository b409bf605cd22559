//! The exec protocol (`credentialprovider.kubelet.k8s.io`): the request written to a plugin's
//! stdin and the response read from its stdout, as the kubelet reads them
//! (<https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/kubelet/pkg/apis/credentialprovider/v1/types.go>):
//! the response must carry the request's `apiVersion`, the kind `CredentialProviderResponse` and
//! a known `cacheKeyType`; unknown fields are refused (the kubelet decodes strictly).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::parse_go_duration;

/// What a plugin is asked: credentials for `image` (the repository, without tag or digest).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    /// The provider's configured protocol version.
    pub api_version: &'a str,
    /// Always `CredentialProviderRequest`.
    pub kind: &'static str,
    /// The repository, as the kubelet passes it.
    pub image: &'a str,
    /// A token of the pod's ServiceAccount (`tokenAttributes` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_token: Option<&'a str>,
    /// The ServiceAccount's annotations `tokenAttributes` name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub service_account_annotations: BTreeMap<String, String>,
}

/// What a plugin's answer applies to in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum CacheKeyType {
    /// The repository asked about.
    Image,
    /// Every image of the repository's registry (host and port).
    Registry,
    /// Every image.
    Global,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResponseFile {
    api_version: String,
    kind: String,
    cache_key_type: CacheKeyType,
    cache_duration: Option<String>,
    #[serde(default)]
    auth: Option<HashMap<String, AuthFile>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// A registry credential of a response; it cannot be printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthEntry {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub password: String,
}

impl fmt::Debug for AuthEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthEntry(<redacted>)")
    }
}

/// A plugin's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// What the answer applies to.
    pub cache_key_type: CacheKeyType,
    /// How long it is kept: `None` for the provider's default, zero for not at all.
    pub cache_duration: Option<Duration>,
    /// Credentials by keyring key (a host glob with an optional path).
    pub auth: Vec<(String, AuthEntry)>,
}

/// Why a plugin's stdout is not a response the kubelet accepts. It never quotes the output
/// beyond its header fields, since the rest may hold credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// Not JSON of the response's shape: where and what kind of error only, since serde's
    /// message may quote a credential.
    #[error("its answer is not a CredentialProviderResponse ({category:?} error at line {line} column {column})")]
    Shape {
        /// serde's category (syntax, data, end of input).
        category: serde_json::error::Category,
        /// The line of the error.
        line: usize,
        /// Its column.
        column: usize,
    },
    /// The response's `apiVersion` is not the request's.
    #[error("its answer's apiVersion {got:?} is not the request's {asked:?}")]
    ApiVersion {
        /// The response's.
        got: String,
        /// The request's.
        asked: String,
    },
    /// The response's `kind` is another.
    #[error("its answer's kind {0:?} is not CredentialProviderResponse")]
    Kind(String),
    /// `cacheDuration` is not a Go duration.
    #[error("cacheDuration {0:?} is not a duration")]
    CacheDuration(String),
}

/// Reads a plugin's stdout.
pub fn parse_response(stdout: &[u8], api_version: &str) -> Result<Response, ResponseError> {
    let file: ResponseFile = serde_json::from_slice(stdout).map_err(|e| ResponseError::Shape {
        category: e.classify(),
        line: e.line(),
        column: e.column(),
    })?;
    if file.api_version != api_version {
        return Err(ResponseError::ApiVersion {
            got: file.api_version,
            asked: api_version.to_owned(),
        });
    }
    if file.kind != "CredentialProviderResponse" {
        return Err(ResponseError::Kind(file.kind));
    }
    let cache_duration = file
        .cache_duration
        .map(|text| parse_go_duration(&text).ok_or(ResponseError::CacheDuration(text)))
        .transpose()?;
    let mut auth: Vec<(String, AuthEntry)> = file
        .auth
        .unwrap_or_default()
        .into_iter()
        .map(|(key, entry)| {
            (
                key,
                AuthEntry {
                    username: entry.username,
                    password: entry.password,
                },
            )
        })
        .collect();
    // a map has no order; the keyring orders its keys itself
    auth.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Response {
        cache_key_type: file.cache_key_type,
        cache_duration,
        auth,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "credentialprovider.kubelet.k8s.io/v1";

    #[test]
    fn a_response_reads_with_its_cache_fields_and_credentials() {
        let text = r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse",
            "cacheKeyType": "Registry", "cacheDuration": "5m",
            "auth": {"r.test": {"username": "u", "password": "p"}}}"#;
        let response = parse_response(text.as_bytes(), V1).expect("valid");
        assert_eq!(response.cache_key_type, CacheKeyType::Registry);
        assert_eq!(response.cache_duration, Some(Duration::from_secs(300)));
        assert_eq!(response.auth.len(), 1);
        assert_eq!(response.auth[0].0, "r.test");
        assert_eq!(response.auth[0].1.password, "p");
        let none = r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": "Global"}"#;
        let response = parse_response(none.as_bytes(), V1).expect("valid");
        assert_eq!(response.cache_duration, None);
        assert!(response.auth.is_empty());
    }

    #[test]
    fn a_response_the_kubelet_refuses_is_refused_without_quoting_it() {
        let cases = [
            (
                r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1beta1", "kind": "CredentialProviderResponse", "cacheKeyType": "Image"}"#,
                "apiVersion",
            ),
            (
                r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "Other", "cacheKeyType": "Image"}"#,
                "kind",
            ),
            (
                r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": "Pod"}"#,
                "not a CredentialProviderResponse",
            ),
            (
                r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse"}"#,
                "not a CredentialProviderResponse",
            ),
            (
                r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": "Image", "cacheDuration": "1d"}"#,
                "not a duration",
            ),
            (
                r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "CredentialProviderResponse", "cacheKeyType": "Image", "auth": {"r.test": {"username": "u", "password": "s3cret-Pw", "extra": 1}}}"#,
                "not a CredentialProviderResponse",
            ),
            ("s3cret-Pw", "not a CredentialProviderResponse"),
        ];
        for (text, problem) in cases {
            let error = parse_response(text.as_bytes(), V1)
                .expect_err(text)
                .to_string();
            assert!(error.contains(problem), "{text}: {error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
        let other_kind = r#"{"apiVersion": "credentialprovider.kubelet.k8s.io/v1", "kind": "Other", "cacheKeyType": "Image"}"#;
        assert_eq!(
            parse_response(other_kind.as_bytes(), V1),
            Err(ResponseError::Kind("Other".into()))
        );
    }

    #[test]
    fn the_request_carries_token_and_annotations_only_when_given() {
        let plain = Request {
            api_version: V1,
            kind: "CredentialProviderRequest",
            image: "r.test/team/app",
            service_account_token: None,
            service_account_annotations: BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_value(&plain).expect("json"),
            serde_json::json!({"apiVersion": V1, "kind": "CredentialProviderRequest", "image": "r.test/team/app"})
        );
        let with_token = Request {
            service_account_token: Some("t"),
            service_account_annotations: BTreeMap::from([("a".into(), "b".into())]),
            ..plain
        };
        let value = serde_json::to_value(&with_token).expect("json");
        assert_eq!(value["serviceAccountToken"], "t");
        assert_eq!(value["serviceAccountAnnotations"]["a"], "b");
    }
}
