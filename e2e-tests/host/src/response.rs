//! Guest responses and the AdmissionResponse printed on stdout.
//!
//! Mirrors policy-evaluator's `AdmissionResponse`: `auditAnnotations` and
//! `warnings` are always present (possibly `null`) while `patchType`, `patch`
//! and `status` are omitted when empty, which is what `kwctl run` prints.

use std::collections::BTreeMap;

use anyhow::Result;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a guest's `validate` returns (the SDK's `ValidationResponse`).
#[derive(Debug, Clone, Deserialize)]
pub struct PolicyValidationResponse {
    /// Whether the request is accepted.
    pub accepted: bool,
    /// Rejection message.
    #[serde(default)]
    pub message: Option<String>,
    /// Rejection code.
    #[serde(default)]
    pub code: Option<u16>,
    /// The object after mutation, when the policy mutates.
    #[serde(default)]
    pub mutated_object: Option<Value>,
    /// Audit annotations.
    #[serde(default)]
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// Warnings for the API client.
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// What a guest's `validate_settings` returns.
#[derive(Debug, Clone, Deserialize)]
pub struct SettingsValidationResponse {
    /// Whether the settings are valid.
    pub valid: bool,
    /// Why they are not.
    #[serde(default)]
    pub message: Option<String>,
}

/// `status` of an AdmissionResponse.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AdmissionResponseStatus {
    /// Human-readable message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// HTTP-like code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
}

/// The admission/v1 AdmissionResponse as kwctl prints it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    /// Copied from the request.
    pub uid: String,
    /// Verdict.
    pub allowed: bool,
    /// `JSONPatch` when a patch is present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<String>,
    /// Base64 of the JSONPatch from the request's object to the mutated object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    /// Why a request was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<AdmissionResponseStatus>,
    /// Audit annotations (always serialized, `null` when absent, like upstream).
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// Warnings (always serialized, `null` when absent, like upstream).
    pub warnings: Option<Vec<String>>,
}

impl AdmissionResponse {
    /// Reject with a message and code.
    pub fn reject(uid: String, message: String, code: u16) -> Self {
        Self {
            uid,
            allowed: false,
            status: Some(AdmissionResponseStatus {
                message: Some(message),
                code: Some(code),
            }),
            ..Default::default()
        }
    }

    /// What the policy server answers when evaluation itself failed.
    pub fn reject_internal_server_error(uid: String, message: String) -> Self {
        Self::reject(uid, format!("internal server error: {message}"), 500)
    }

    /// Turn a guest's verdict into an AdmissionResponse; `req_obj` is the
    /// request's `object` (absent for DELETE), used to compute the patch.
    pub fn from_policy_validation_response(
        uid: String,
        req_obj: Option<&Value>,
        resp: &PolicyValidationResponse,
    ) -> Result<Self> {
        let original = req_obj.filter(|v| !v.is_null());
        if resp.mutated_object.is_some() && original.is_none() {
            return Ok(Self {
                uid,
                allowed: false,
                status: Some(AdmissionResponseStatus {
                    message: Some("Incoming object is null, which happens only with DELETE operations, but the policy is attempting a mutation. This is not allowed".to_owned()),
                    code: None,
                }),
                ..Default::default()
            });
        }
        let patch = match (&resp.mutated_object, original) {
            (Some(mutated), Some(original)) => {
                let diff = json_patch::diff(original, mutated);
                if diff.0.is_empty() {
                    None
                } else {
                    Some(
                        base64::engine::general_purpose::STANDARD
                            .encode(serde_json::to_string(&diff)?),
                    )
                }
            }
            _ => None,
        };
        let status = if resp.message.is_some() || resp.code.is_some() {
            Some(AdmissionResponseStatus {
                message: resp.message.clone(),
                code: resp.code,
            })
        } else {
            None
        };
        Ok(Self {
            uid,
            allowed: resp.accepted,
            patch_type: patch.as_ref().map(|_| "JSONPatch".to_owned()),
            patch,
            status,
            audit_annotations: resp.audit_annotations.clone(),
            warnings: resp.warnings.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepted_serializes_like_kwctl() {
        let r: PolicyValidationResponse =
            serde_json::from_value(json!({"accepted": true})).expect("resp");
        let a = AdmissionResponse::from_policy_validation_response("u".into(), None, &r)
            .expect("build");
        assert_eq!(
            serde_json::to_string(&a).expect("json"),
            r#"{"uid":"u","allowed":true,"auditAnnotations":null,"warnings":null}"#
        );
    }

    #[test]
    fn rejection_and_patch() {
        let r: PolicyValidationResponse = serde_json::from_value(
            json!({"accepted": false, "message": "no", "code": 400, "warnings": ["w"]}),
        )
        .expect("resp");
        let a = AdmissionResponse::from_policy_validation_response("u".into(), None, &r)
            .expect("build");
        assert_eq!(
            a.status,
            Some(AdmissionResponseStatus {
                message: Some("no".into()),
                code: Some(400)
            })
        );
        assert_eq!(a.warnings, Some(vec!["w".into()]));

        let original = json!({"spec": {"image": "a"}});
        let r: PolicyValidationResponse = serde_json::from_value(
            json!({"accepted": true, "mutated_object": {"spec": {"image": "b"}}}),
        )
        .expect("resp");
        let a = AdmissionResponse::from_policy_validation_response("u".into(), Some(&original), &r)
            .expect("build");
        assert_eq!(a.patch_type.as_deref(), Some("JSONPatch"));
        let patch = base64::engine::general_purpose::STANDARD
            .decode(a.patch.expect("patch"))
            .expect("b64");
        let patch: Value = serde_json::from_slice(&patch).expect("json");
        assert_eq!(
            patch,
            json!([{"op": "replace", "path": "/spec/image", "value": "b"}])
        );
    }

    #[test]
    fn internal_server_error() {
        let a = AdmissionResponse::reject_internal_server_error(
            "u".into(),
            "Guest call failure: x".into(),
        );
        assert_eq!(
            serde_json::to_value(&a).expect("json"),
            json!({"uid":"u","allowed":false,"status":{"message":"internal server error: Guest call failure: x","code":500},"auditAnnotations":null,"warnings":null})
        );
    }
}
