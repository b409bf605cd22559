//! The slice of Kubewarden's validation payload the policy reads. Our own types rather than the
//! SDK's `KubernetesAdmissionRequest`, which types `requestResource` as a kind and refuses
//! explicit `null`s that real API servers send; here every field is optional and tolerant, so
//! a malformed request is reported precisely instead of failing as a whole.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// What the host passes to `validate`: the policy's settings and the admission request.
#[derive(Debug, Clone, Deserialize)]
pub struct ValidationPayload {
    /// The settings, validated by the caller (`null` when the policy has none).
    #[serde(default)]
    pub settings: Value,
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
    /// The object as it would be stored.
    pub object: Value,
    /// The object before an UPDATE.
    pub old_object: Value,
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
    /// The object's name as people know it: the request name, else `metadata.name`, else the
    /// server-side `generateName` prefix followed by `*`.
    pub fn display_name(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        let metadata = &self.object["metadata"];
        if let Some(name) = metadata["name"].as_str().filter(|n| !n.is_empty()) {
            return name.to_owned();
        }
        match metadata["generateName"].as_str() {
            Some(prefix) if !prefix.is_empty() => format!("{prefix}*"),
            _ => "(unnamed)".to_owned(),
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
    use serde_json::json;

    #[test]
    fn tolerates_nulls_and_unknown_operations() {
        let payload: ValidationPayload = serde_json::from_value(json!({
            "settings": null,
            "request": {"uid": null, "kind": null, "namespace": null, "operation": "PATCH",
                        "object": null, "requestResource": {"group": "", "resource": "pods"}}
        }))
        .unwrap();
        assert_eq!(payload.request.operation, Operation::Other);
        assert_eq!(payload.request.kind, GroupVersionKind::default());
        assert!(payload.request.namespace.is_empty());
    }

    #[test]
    fn display_name_falls_back_to_generate_name() {
        let request = AdmissionRequest {
            object: json!({"metadata": {"generateName": "web-7d9f-"}}),
            ..Default::default()
        };
        assert_eq!(request.display_name(), "web-7d9f-*");
        let named = AdmissionRequest {
            object: json!({"metadata": {"name": "web"}}),
            ..Default::default()
        };
        assert_eq!(named.display_name(), "web");
    }

    #[test]
    fn wrong_types_are_errors_not_panics() {
        let result = serde_json::from_value::<ValidationPayload>(json!({"request": {"kind": 7}}));
        assert!(result.is_err());
        let result = serde_json::from_value::<ValidationPayload>(json!({"settings": {}}));
        assert!(result.unwrap_err().to_string().contains("request"));
    }
}
