//! The slice of Kubewarden's validation payload the policy reads. Our own types rather than the
//! SDK's `KubernetesAdmissionRequest`, which types `requestResource` as a kind and refuses
//! explicit `null`s that real API servers send; here every field is optional and tolerant, so
//! a malformed request is reported precisely instead of failing as a whole.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::object::{Metadata, Object};

/// What the host passes to `validate`: the policy's settings and the admission request.
#[derive(Debug, Clone, Deserialize)]
pub struct ValidationPayload {
    /// The settings as their JSON text, validated by the caller (absent or `null` when the
    /// policy has none). Kept as text: most settings parse straight into their typed form
    /// ([`Settings::from_json`](crate::settings::Settings::from_json)), without a `Value` tree.
    #[serde(default)]
    pub settings: Option<Box<RawValue>>,
    /// The Kubernetes admission request.
    pub request: AdmissionRequest,
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

    fn payload(value: Value) -> Result<ValidationPayload, serde_json::Error> {
        serde_json::from_str(&value.to_string())
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
