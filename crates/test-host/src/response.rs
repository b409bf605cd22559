//! What the guest answers, and the AdmissionResponse the host prints from it.
//!
//! The printed JSON is a contract: the e2e suites run once on this host and once on kwctl
//! and assert on the same output, so it has kwctl's shape, field for field:
//! `auditAnnotations` and `warnings` always present (`null` when the guest sent none),
//! `patchType`, `patch` and `status` left out when empty, and inside `status` a missing
//! `message` or `code` left out.

use std::collections::BTreeMap;
use std::fmt::Display;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A guest's answer to `validate`; the field names are the SDK's `ValidationResponse` on
/// the wire.
#[derive(Debug, Clone, Deserialize)]
pub struct GuestVerdict {
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

/// A guest's answer to `validate_settings`, or the host's refusal when the call failed.
#[derive(Debug, Clone, Deserialize)]
pub struct SettingsVerdict {
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
    /// Audit annotations (always serialized, `null` when absent, as kwctl prints them).
    pub audit_annotations: Option<BTreeMap<String, String>>,
    /// Warnings (always serialized, `null` when absent, as kwctl prints them).
    pub warnings: Option<Vec<String>>,
}

/// Starts the message of a response to an evaluation that failed before the guest gave a
/// verdict. Kept word for word: policy-server answers a failed evaluation with this prefix
/// and code 500, and `tests/host.bats` pins the whole message.
const FAILED_EVALUATION_PREFIX: &str = "internal server error: ";
/// The `status.code` of that response, policy-server's.
const FAILED_EVALUATION_CODE: u16 = 500;

/// The request a response is written for: the `uid` the response echoes, and the `object` a
/// mutation is compared with to make the patch.
pub struct Reply<'a> {
    uid: String,
    object: Option<&'a Value>,
}

impl<'a> Reply<'a> {
    /// A reply to `request`, an AdmissionRequest. Its object counts as missing when absent
    /// or `null`, as in a DELETE.
    pub fn to(request: &'a Value) -> Self {
        let uid = request
            .get("uid")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Self {
            uid: uid.to_owned(),
            object: request.get("object").filter(|o| !o.is_null()),
        }
    }

    /// The guest's verdict as a response: accepted or not, its message and code as the
    /// status (when it gave either), its annotations and warnings, and a mutation as the
    /// base64 JSONPatch from the request's object to the mutated one. A mutation of a request
    /// without an object cannot be expressed as a patch and refuses the request.
    pub fn verdict(self, verdict: &GuestVerdict) -> AdmissionResponse {
        let patch = match (&verdict.mutated_object, self.object) {
            (None, _) => None,
            (Some(_), None) => {
                return self.refusal(AdmissionResponseStatus {
                    message: Some(
                        "refused: the policy changed the object of a request that carries \
                         none (a deletion), which no patch can express"
                            .to_owned(),
                    ),
                    // without a code, as kwctl answers such a verdict
                    code: None,
                });
            }
            (Some(mutated), Some(object)) => match encoded_patch(object, mutated) {
                Ok(patch) => patch,
                Err(e) => return self.failure(format_args!("cannot encode the patch: {e}")),
            },
        };
        let status = (verdict.message.is_some() || verdict.code.is_some()).then(|| {
            AdmissionResponseStatus {
                message: verdict.message.clone(),
                code: verdict.code,
            }
        });
        AdmissionResponse {
            uid: self.uid,
            allowed: verdict.accepted,
            patch_type: patch.is_some().then(|| "JSONPatch".to_owned()),
            patch,
            status,
            audit_annotations: verdict.audit_annotations.clone(),
            warnings: verdict.warnings.clone(),
        }
    }

    /// The response when the evaluation ended without a verdict (the guest trapped, ran out
    /// of time or answered something else): a refusal saying why, as policy-server words it.
    pub fn failure(self, reason: impl Display) -> AdmissionResponse {
        self.refusal(AdmissionResponseStatus {
            message: Some(format!("{FAILED_EVALUATION_PREFIX}{reason}")),
            code: Some(FAILED_EVALUATION_CODE),
        })
    }

    fn refusal(self, status: AdmissionResponseStatus) -> AdmissionResponse {
        AdmissionResponse {
            uid: self.uid,
            allowed: false,
            status: Some(status),
            ..Default::default()
        }
    }
}

/// The JSONPatch (RFC 6902) that turns `object` into `mutated`, serialized and base64
/// encoded as an AdmissionResponse's `patch`; `None` when the two are equal.
fn encoded_patch(object: &Value, mutated: &Value) -> serde_json::Result<Option<String>> {
    let patch = json_patch::diff(object, mutated);
    if patch.0.is_empty() {
        return Ok(None);
    }
    let text = serde_json::to_string(&patch)?;
    Ok(Some(base64::engine::general_purpose::STANDARD.encode(text)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict(answer: Value) -> GuestVerdict {
        serde_json::from_value(answer).expect("a verdict")
    }

    fn printed(response: &AdmissionResponse) -> String {
        serde_json::to_string(response).expect("json")
    }

    #[test]
    fn the_request_gives_the_uid_and_the_object_to_diff_against() {
        let request = json!({"uid": "req-7", "object": {"kind": "Pod"}});
        let reply = Reply::to(&request);
        assert_eq!(reply.uid, "req-7");
        assert_eq!(reply.object, Some(&json!({"kind": "Pod"})));
        // a deletion: the object is null, or not there at all
        for deletion in [json!({"uid": "d", "object": null}), json!({"uid": "d"})] {
            assert_eq!(Reply::to(&deletion).object, None, "{deletion}");
        }
        assert_eq!(Reply::to(&json!({})).uid, "");
    }

    #[test]
    fn a_bare_acceptance_prints_the_nulls_kwctl_prints() {
        let request = json!({"uid": "req-1"});
        let response = Reply::to(&request).verdict(&verdict(json!({"accepted": true})));
        assert_eq!(
            printed(&response),
            r#"{"uid":"req-1","allowed":true,"auditAnnotations":null,"warnings":null}"#
        );
    }

    #[test]
    fn a_refusal_carries_the_guests_message_code_and_warnings() {
        let request = json!({"uid": "req-2", "object": {"spec": {}}});
        let answer = json!({"accepted": false, "message": "image not pullable", "code": 403,
            "warnings": ["team-a/app:1 looked up anonymously"]});
        let response = Reply::to(&request).verdict(&verdict(answer));
        assert_eq!(
            serde_json::to_value(&response).expect("json"),
            json!({"uid": "req-2", "allowed": false,
                "status": {"message": "image not pullable", "code": 403},
                "auditAnnotations": null,
                "warnings": ["team-a/app:1 looked up anonymously"]})
        );
        // a message alone, or a code alone, is a status without the other field
        let answer = json!({"accepted": true, "code": 200});
        let response = Reply::to(&request).verdict(&verdict(answer));
        assert!(printed(&response).contains(r#""status":{"code":200}"#));
    }

    #[test]
    fn a_mutation_is_the_base64_patch_from_the_requests_object() {
        let request = json!({"uid": "req-3", "object": {"spec": {"containers": [
            {"name": "app", "image": "registry.example.test/team-a/app:1"}]}}});
        let pinned = json!({"spec": {"containers": [
            {"name": "app", "image": "registry.example.test/team-a/app@sha256:ab"}]}});
        let answer = json!({"accepted": true, "mutated_object": pinned});
        let response = Reply::to(&request).verdict(&verdict(answer));
        assert_eq!(response.patch_type.as_deref(), Some("JSONPatch"));
        let patch = base64::engine::general_purpose::STANDARD
            .decode(response.patch.expect("a patch"))
            .expect("base64");
        assert_eq!(
            serde_json::from_slice::<Value>(&patch).expect("json"),
            json!([{"op": "replace", "path": "/spec/containers/0/image",
                "value": "registry.example.test/team-a/app@sha256:ab"}])
        );
    }

    #[test]
    fn a_mutation_that_changes_nothing_is_no_patch() {
        let object = json!({"metadata": {"name": "web"}});
        let request = json!({"uid": "req-4", "object": object});
        let answer = json!({"accepted": true, "mutated_object": object});
        let response = Reply::to(&request).verdict(&verdict(answer));
        assert_eq!((response.patch_type, response.patch), (None, None));
        assert!(response.allowed);
    }

    #[test]
    fn a_mutated_deletion_is_refused_without_a_code() {
        let request = json!({"uid": "req-5", "operation": "DELETE", "object": null});
        let answer = json!({"accepted": true, "mutated_object": {"kind": "Pod"}});
        let response = Reply::to(&request).verdict(&verdict(answer));
        assert!(!response.allowed);
        assert_eq!(response.patch, None);
        let status = response.status.expect("a status");
        assert_eq!(status.code, None);
        assert!(status.message.is_some_and(|m| m.contains("deletion")));
    }

    #[test]
    fn a_failed_evaluation_is_policy_servers_500() {
        let request = json!({"uid": "req-6"});
        let response = Reply::to(&request).failure("Guest call failure: boom");
        assert_eq!(
            printed(&response),
            r#"{"uid":"req-6","allowed":false,"status":{"message":"internal server error: Guest call failure: boom","code":500},"auditAnnotations":null,"warnings":null}"#
        );
    }
}
