//! The slice of Kubewarden's validation payload the policy reads. Our own types rather than the
//! SDK's `KubernetesAdmissionRequest`, which types `requestResource` as a kind and refuses
//! explicit `null`s that real API servers send; here every field is optional and tolerant, so
//! a malformed request is reported precisely instead of failing as a whole.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::json_extent::{ascii_text, ExtentError, Scanner};
use crate::settings::{Settings, SettingsError};

use crate::object::{Metadata, Object};

/// What the host passes to `validate`: the policy's settings and the admission request.
#[derive(Debug)]
pub struct ValidationPayload<'a> {
    /// The settings, validated by the host when it loaded the policy, read as the request
    /// needs them ([`Settings::read_from`]); the defaults when absent.
    pub settings: Settings<'a>,
    /// The Kubernetes admission request.
    pub request: AdmissionRequest,
}

impl<'a> ValidationPayload<'a> {
    /// Reads the payload in one pass: serde parses the request; of the settings only their
    /// members are delimited, at a few instructions a byte where serde would spend a dozen on
    /// text most requests never read.
    pub fn parse(payload: &'a [u8]) -> Result<Self, PayloadError> {
        let text = match ascii_text(payload) {
            Some(text) => text,
            None => std::str::from_utf8(payload).map_err(|_| PayloadError::NotUtf8)?,
        };
        let mut scanner = Scanner::new(text);
        scanner.enter_object()?;
        let (mut settings, mut request) = (None, None);
        let mut first = true;
        while let Some(key) = scanner.next_key(std::mem::take(&mut first))? {
            match key {
                "request" => {
                    if request.is_some() {
                        return Err(PayloadError::Duplicate("request"));
                    }
                    let mut stream = serde_json::Deserializer::from_str(scanner.rest()).into_iter();
                    let read = stream.next().ok_or(PayloadError::MissingRequest)?;
                    request = Some(read.map_err(PayloadError::Request)?);
                    scanner.advance(stream.byte_offset());
                }
                "settings" => {
                    if settings.is_some() {
                        return Err(PayloadError::Duplicate("settings"));
                    }
                    settings = Some(Settings::read_from(&mut scanner)?);
                }
                _ => {
                    scanner.value()?;
                }
            }
        }
        if !scanner.at_end() {
            return Err(PayloadError::Trailing);
        }
        Ok(ValidationPayload {
            settings: settings.unwrap_or_default(),
            request: request.ok_or(PayloadError::MissingRequest)?,
        })
    }
}

/// Why the `validate` payload could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// JSON is UTF-8.
    #[error("the payload is not UTF-8")]
    NotUtf8,
    /// The payload's own structure is broken.
    #[error(transparent)]
    Structure(#[from] ExtentError),
    /// `request` is not an admission request.
    #[error(transparent)]
    Request(serde_json::Error),
    /// No `request` member.
    #[error("missing field `request`")]
    MissingRequest,
    /// A member written twice.
    #[error("duplicate field `{0}`")]
    Duplicate(&'static str),
    /// Settings that cannot be read.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// Text after the payload's object.
    #[error("trailing characters after the payload")]
    Trailing,
}

/// A Kubernetes `AdmissionRequest`, reduced to what decides and explains a decision.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AdmissionRequest {
    /// Correlates the answer with the request.
    #[serde(deserialize_with = "null_as_default")]
    pub uid: String,
    /// The kind of `object`, which selects where the pod spec is.
    #[serde(deserialize_with = "null_as_default")]
    pub kind: GroupVersionKind,
    /// Set for subresource requests such as `pods/ephemeralcontainers`.
    #[serde(deserialize_with = "null_as_default")]
    pub sub_resource: String,
    /// The object name; empty when the client asked the server to generate one.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    /// The namespace of the object; empty for cluster-scoped objects.
    #[serde(deserialize_with = "null_as_default")]
    pub namespace: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    #[serde(deserialize_with = "null_as_default")]
    pub operation: Operation,
    /// The object as it would be stored, as JSON ([`AdmissionRequest::object`] reads it).
    pub object: Option<Box<RawValue>>,
    /// The object before an UPDATE, as JSON.
    pub old_object: Option<Box<RawValue>>,
    /// Who asked: the API server always says; Kubewarden's audit scanner sends none.
    #[serde(deserialize_with = "null_as_default")]
    pub user_info: UserInfo,
}

/// The requesting user, reduced to what tells an API server's request from an audit
/// scanner's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct UserInfo {
    /// The user name; the API server sends one even for anonymous requests
    /// (`system:anonymous`).
    #[serde(deserialize_with = "null_as_default")]
    pub username: String,
}

/// The group, version and kind of the request's object.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct GroupVersionKind {
    /// API group: empty for core objects, `apps`, `batch`, …
    #[serde(deserialize_with = "null_as_default")]
    pub group: String,
    /// API version such as `v1`.
    #[serde(deserialize_with = "null_as_default")]
    pub version: String,
    /// Kind such as `Deployment`.
    #[serde(deserialize_with = "null_as_default")]
    pub kind: String,
}

/// The admission operation; only CREATE and UPDATE can introduce images.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// A new object.
    Create,
    /// A change to an existing object.
    Update,
    /// A deletion.
    Delete,
    /// A connect (exec, attach, port-forward).
    Connect,
    /// Anything this version does not know.
    #[default]
    #[serde(other)]
    Other,
}

impl AdmissionRequest {
    /// The object as it would be stored.
    pub fn object(&self) -> Object<'_> {
        Object::new(self.object.as_deref())
    }

    /// The object before an UPDATE.
    pub fn old_object(&self) -> Object<'_> {
        Object::new(self.old_object.as_deref())
    }

    /// The object's name as people know it: the request name, else `metadata.name`, else the
    /// server-side `generateName` prefix followed by `*`.
    pub fn display_name(&self, metadata: &Metadata) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        if !metadata.name.is_empty() {
            return metadata.name.clone();
        }
        match metadata.generate_name.as_str() {
            "" => "(unnamed)".to_owned(),
            prefix => format!("{prefix}*"),
        }
    }
}

/// Treats an explicit JSON `null` like an absent field.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn payload(value: Value) -> Result<ValidationPayload<'static>, PayloadError> {
        // the text lives for the test: a payload borrows its settings from it
        let text: &'static str = Box::leak(value.to_string().into_boxed_str());
        ValidationPayload::parse(text.as_bytes())
    }

    #[test]
    fn tolerates_nulls_and_unknown_operations() {
        let payload = payload(json!({
            "settings": null,
            "request": {"uid": null, "kind": null, "namespace": null, "operation": "PATCH",
                        "object": null, "requestResource": {"group": "", "resource": "pods"}}
        }))
        .unwrap();
        assert!(payload.request.object.is_none());
        assert_eq!(payload.request.operation, Operation::Other);
        assert_eq!(payload.request.kind, GroupVersionKind::default());
        assert!(payload.request.namespace.is_empty());
    }

    #[test]
    fn display_name_falls_back_to_generate_name() {
        let name = |object: Value| {
            let request = payload(json!({"request": {"object": object}}))
                .unwrap()
                .request;
            request.display_name(&request.object().metadata())
        };
        assert_eq!(
            name(json!({"metadata": {"generateName": "web-7d9f-"}})),
            "web-7d9f-*"
        );
        assert_eq!(name(json!({"metadata": {"name": "web"}})), "web");
        assert_eq!(name(json!({"metadata": {"name": ""}})), "(unnamed)");
        assert_eq!(name(json!(null)), "(unnamed)");
    }

    #[test]
    fn wrong_types_are_errors_not_panics() {
        let result = payload(json!({"request": {"kind": 7}}));
        assert!(result.is_err());
        let result = payload(json!({"settings": {}}));
        assert!(result.unwrap_err().to_string().contains("request"));
    }
}
