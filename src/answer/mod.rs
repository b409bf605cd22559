//! Turning findings into the policy's answer: which action each failure gets, and messages that
//! name the resource, the container, the image, the registry, the reason and what to do.
//!
//! The folder holds the answer to Kubewarden's audit scanner ([`audit`]): what the next pull
//! of the object's images will do, rather than whether the request is admitted.

pub mod audit;
pub mod warning;

use std::collections::HashMap;

use kubewarden_policy_sdk::response::ValidationResponse;

use crate::plan::finding::Finding;
pub use crate::plan::finding::WARNING_MAX;
use crate::settings::ActionFor;
use crate::vocabulary::action::Action;
use crate::vocabulary::failure::Failure;
use crate::vocabulary::object::Resource;
use crate::vocabulary::text::truncate;

/// The API server keeps at most this many bytes of warnings per response and drops the rest.
pub const WARNINGS_TOTAL_MAX: usize = 4096;
/// The audit annotation that keeps every warning whole when one was cut to [`WARNING_MAX`]
/// bytes, or when there were too many to send one each.
pub const WARNINGS_ANNOTATION: &str = "resolvable-images/warnings";
/// The audit annotation that records failures accepted with `allow`.
pub const ALLOWED_ANNOTATION: &str = "resolvable-images/allowed-unverified";

/// What serde writes for [`Decision::accept`] (a test holds them equal).
const ACCEPTED: &[u8] =
    br#"{"accepted":true,"message":null,"code":null,"mutated_object":null,"audit_annotations":null,"warnings":null}"#;

/// The policy's answer to one admission request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// Whether the request is admitted.
    pub accepted: bool,
    /// Why it was rejected.
    pub message: Option<String>,
    /// HTTP code of a rejection; `None` lets the host choose.
    pub code: Option<u16>,
    /// Warnings `kubectl` prints, accepted or not.
    pub warnings: Vec<String>,
    /// Annotations for the API server's audit log.
    pub audit_annotations: HashMap<String, String>,
    /// The object with pinned digests, when the policy mutates it.
    pub mutated_object: Option<serde_json::Value>,
}

impl Decision {
    /// Admit without comment.
    pub fn accept() -> Self {
        Decision {
            accepted: true,
            ..Decision::default()
        }
    }

    /// Refuse a request the policy cannot read (code 400), explaining what is wrong with it.
    pub fn malformed(message: impl Into<String>) -> Self {
        Decision {
            accepted: false,
            message: Some(message.into()),
            code: Some(400),
            ..Decision::default()
        }
    }

    /// The JSON answer of waPC `validate`. The answer of most requests (admitted, nothing to
    /// say) is written as the constant serde writes for it: serde's serialisation of the
    /// response was a tenth of a fresh instance's instruction-cache misses.
    pub fn to_json(&self) -> Vec<u8> {
        let Decision {
            accepted,
            message,
            code,
            warnings,
            audit_annotations,
            mutated_object,
        } = self;
        if *accepted
            && message.is_none()
            && code.is_none()
            && warnings.is_empty()
            && audit_annotations.is_empty()
            && mutated_object.is_none()
        {
            return ACCEPTED.to_vec();
        }
        self.to_json_by_serde()
    }

    /// [`Decision::to_json`] by serde, out of line.
    #[cold]
    #[inline(never)]
    fn to_json_by_serde(&self) -> Vec<u8> {
        let response = ValidationResponse {
            accepted: self.accepted,
            message: self.message.clone(),
            code: self.code,
            mutated_object: self.mutated_object.clone(),
            audit_annotations: (!self.audit_annotations.is_empty())
                .then(|| self.audit_annotations.clone()),
            warnings: (!self.warnings.is_empty()).then(|| self.warnings.clone()),
        };
        serde_json::to_vec(&response).unwrap_or_else(|_| {
            br#"{"accepted":false,"message":"resolvable-images-policy could not encode its answer"}"#.to_vec()
        })
    }
}

/// Applies the configured actions to the findings of one request. `notes` are warnings about
/// the check itself (e.g. pull secrets that could not be read), given whatever the outcome.
pub fn decide(
    resource: &Resource,
    findings: &[Finding],
    notes: &[String],
    actions: &impl ActionFor,
) -> Decision {
    let mut rejected = Vec::new();
    let mut decision = Decision::accept();
    let mut warned = Vec::new();
    let mut allowed = Vec::new();
    for finding in findings {
        match actions.action_for(finding.failure.kind) {
            Action::Reject => rejected.push(finding.rejection_line()),
            Action::Warn => warned.push(finding),
            Action::Allow => allowed.push(finding.audit_record()),
        }
    }
    decision.warnings = warnings(notes, &warned);
    let cut = warned.iter().any(|f| warning::Warning::of(f).cut);
    if cut || decision.warnings.len() < notes.len() + warned.len() {
        let all: Vec<String> = warned.iter().map(|f| f.audit_record()).collect();
        decision
            .audit_annotations
            .insert(WARNINGS_ANNOTATION.to_owned(), all.join("\n"));
    }
    if !allowed.is_empty() {
        decision
            .audit_annotations
            .insert(ALLOWED_ANNOTATION.to_owned(), allowed.join("; "));
    }
    if !rejected.is_empty() {
        let count = rejected.len();
        let noun = if count == 1 { "image" } else { "images" };
        decision.accepted = false;
        decision.message = Some(format!(
            "{resource}: {count} {noun} will not pull:\n{}",
            rejected.join("\n")
        ));
    }
    decision
}

/// The warnings of a response: one per note and warned finding while they fit the API
/// server's [`WARNINGS_TOTAL_MAX`]; past that, one per failure kind and registry, and a last
/// one that says how many more the audit annotation holds.
fn warnings(notes: &[String], warned: &[&Finding]) -> Vec<String> {
    let notes = notes.iter().map(|note| truncate(note, WARNING_MAX));
    let each: Vec<String> = notes
        .clone()
        .chain(warned.iter().map(|f| warning::of(f)))
        .collect();
    if total_len(&each) <= WARNINGS_TOTAL_MAX {
        return each;
    }
    let mut groups: Vec<(&Failure, String, Vec<&Finding>)> = Vec::new();
    for finding in warned {
        let registry = finding
            .reference()
            .map(|r| r.registry().to_owned())
            .unwrap_or_default();
        let failure = &finding.failure;
        match groups.iter_mut().find(|(f, r, _)| {
            (f.kind, f.observed) == (failure.kind, failure.observed) && *r == registry
        }) {
            Some((_, _, members)) => members.push(finding),
            None => groups.push((failure, registry, vec![finding])),
        }
    }
    let grouped = groups
        .iter()
        .map(|(failure, registry, members)| match members.as_slice() {
            [single] => warning::of(single),
            _ => group_warning(failure, registry, members),
        });
    let mut kept: Vec<String> = Vec::new();
    let all: Vec<String> = notes.chain(grouped).collect();
    // Room for the closing line, which is short.
    let budget = WARNINGS_TOTAL_MAX - 100;
    for (i, warning) in all.iter().enumerate() {
        if total_len(&kept) + warning.len() > budget {
            kept.push(format!(
                "{} more warnings: see the audit annotation {WARNINGS_ANNOTATION}",
                all.len() - i
            ));
            break;
        }
        kept.push(warning.clone());
    }
    kept
}

/// One warning for several findings like `failure` on `registry`.
fn group_warning(failure: &Failure, registry: &str, members: &[&Finding]) -> String {
    let subjects: Vec<String> = members.iter().map(|f| f.subject(60)).collect();
    let on = if registry.is_empty() {
        String::new()
    } else {
        format!(" on registry {registry}")
    };
    let line = format!(
        "{} images{on}: {}; allowed (actions.{}: warn); all in the audit annotation {WARNINGS_ANNOTATION}: {}",
        members.len(),
        failure.label(),
        failure.kind.setting_key(),
        subjects.join(", ")
    );
    truncate(&line, WARNING_MAX)
}

/// The bytes of `warnings` together.
fn total_len(warnings: &[String]) -> usize {
    warnings.iter().map(String::len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Actions;
    use crate::vocabulary::failure::FailureKind;
    use crate::vocabulary::reference::ImageReference;
    use crate::vocabulary::workload::{ContainerImage, ContainerList};

    fn finding(image: &str, kind: FailureKind, detail: &str) -> Finding {
        Finding::image(
            ContainerImage {
                list: ContainerList::Regular,
                name: "app".into(),
                image: image.into(),
                pull_policy: None,
                pointer: "/spec/containers/0/image".into(),
            },
            ImageReference::parse(image).ok(),
            Failure::new(kind, detail),
        )
    }

    fn resource() -> Resource {
        Resource {
            kind: "Deployment".into(),
            namespace: "team-a".into(),
            name: "web".into(),
        }
    }

    #[test]
    fn rejection_names_everything() {
        let findings = [
            finding("ngnix:1.25", FailureKind::Absent, "manifest unknown"),
            finding(
                "docker.io/Team/x",
                FailureKind::InvalidReference,
                "repository path component \"Team\" has uppercase letters",
            ),
        ];
        let decision = decide(&resource(), &findings, &[], &Actions::default());
        assert!(!decision.accepted);
        let message = decision.message.unwrap();
        assert!(
            message.starts_with("Deployment team-a/web: 2 images will not pull:\n"),
            "{message}"
        );
        assert!(message.contains(
            "- container \"app\" image \"ngnix:1.25\" (docker.io/library/ngnix:1.25): not found on registry docker.io: manifest unknown. Hint: check that the tag or digest was pushed to docker.io/library/ngnix"
        ), "{message}");
        assert!(message.contains(
            "- container \"app\" image \"docker.io/Team/x\": invalid image reference: repository path component \"Team\" has uppercase letters. Hint:"
        ), "{message}");
    }

    #[test]
    fn warnings_say_why_they_were_allowed_within_256_bytes() {
        let long_detail = "x".repeat(1000);
        let findings = [finding(
            "ghcr.io/org/private:1",
            FailureKind::Unauthorized,
            &long_detail,
        )];
        let decision = decide(&resource(), &findings, &[], &Actions::default());
        assert!(decision.accepted);
        assert_eq!(decision.warnings.len(), 1);
        let warning = &decision.warnings[0];
        assert!(warning.len() <= WARNING_MAX, "{}", warning.len());
        assert!(warning.starts_with(
            "container \"app\" image \"ghcr.io/org/private:1\": not authorized on registry ghcr.io; allowed (actions.unauthorized: warn): xxx"
        ), "{warning}");
    }

    #[test]
    fn allow_goes_to_the_audit_annotation_only() {
        let actions = Actions::default().with(FailureKind::Unreachable, Action::Allow);
        let findings = [finding(
            "a.io/b:1",
            FailureKind::Unreachable,
            "connection refused",
        )];
        let decision = decide(&resource(), &findings, &[], &actions);
        assert!(decision.accepted && decision.warnings.is_empty());
        assert!(decision.audit_annotations[ALLOWED_ANNOTATION].contains("connection refused"));
    }

    #[test]
    fn huge_images_are_quoted_truncated() {
        let image = format!("a.io/{}:1", "b".repeat(100_000));
        let decision = decide(
            &resource(),
            &[finding(
                &image,
                FailureKind::InvalidReference,
                "the repository path is 100000 characters long; at most 255 are allowed",
            )],
            &[],
            &Actions::default(),
        );
        assert!(decision.message.unwrap().len() < 1_000);
    }

    #[test]
    fn response_json_has_the_sdk_shape() {
        let decision = decide(
            &resource(),
            &[finding("a.io/b:1", FailureKind::Unreachable, "down")],
            &[],
            &Actions::default(),
        );
        let json: serde_json::Value = serde_json::from_slice(&decision.to_json()).unwrap();
        assert_eq!(json["accepted"], true);
        assert_eq!(json["warnings"].as_array().map(Vec::len), Some(1));
        assert!(json["message"].is_null());
        let malformed: serde_json::Value =
            serde_json::from_slice(&Decision::malformed("bad").to_json()).unwrap();
        assert_eq!(malformed["code"], 400);
        assert_eq!(malformed["accepted"], false);
    }

    #[test]
    fn many_warnings_are_grouped_within_the_api_servers_limits() {
        let mut findings: Vec<Finding> = (0..20)
            .map(|i| {
                finding(
                    &format!("ghcr.io/org/private-{i}:1"),
                    FailureKind::Unauthorized,
                    &"401 ".repeat(60),
                )
            })
            .collect();
        findings.push(finding(
            "quay.io/org/a:1",
            FailureKind::Unreachable,
            "connection refused",
        ));
        let decision = decide(&resource(), &findings, &[], &Actions::default());
        assert!(decision.accepted);
        assert_eq!(decision.warnings.len(), 2, "{:?}", decision.warnings);
        assert!(decision.warnings[0].starts_with(
            "20 images on registry ghcr.io: not authorized; allowed (actions.unauthorized: warn); all in the audit annotation resolvable-images/warnings: container \"app\" image \"ghcr.io/org/private-0:1\""
        ), "{}", decision.warnings[0]);
        assert!(decision.warnings[1]
            .starts_with("container \"app\" image \"quay.io/org/a:1\": registry unreachable"));
        assert!(decision.warnings.iter().all(|w| w.len() <= WARNING_MAX));
        let all = &decision.audit_annotations[WARNINGS_ANNOTATION];
        assert_eq!(all.lines().count(), 21, "{all}");
        assert!(all.contains("ghcr.io/org/private-19:1") && all.contains("401 401"));
    }

    #[test]
    fn warnings_of_many_registries_stop_at_the_total_limit() {
        let findings: Vec<Finding> = (0..40)
            .map(|i| {
                finding(
                    &format!("r{i}.example.com/a:1"),
                    FailureKind::Unreachable,
                    &"x".repeat(300),
                )
            })
            .collect();
        let decision = decide(&resource(), &findings, &[], &Actions::default());
        let total: usize = decision.warnings.iter().map(String::len).sum();
        assert!(total <= WARNINGS_TOTAL_MAX, "{total}");
        let last = decision.warnings.last().unwrap();
        assert!(
            last.ends_with("more warnings: see the audit annotation resolvable-images/warnings"),
            "{last}"
        );
        assert_eq!(
            decision.audit_annotations[WARNINGS_ANNOTATION]
                .lines()
                .count(),
            40
        );
    }

    #[test]
    fn few_warnings_stay_one_each_without_the_annotation() {
        let findings: Vec<Finding> = (0..3)
            .map(|i| {
                finding(
                    &format!("ghcr.io/org/p{i}:1"),
                    FailureKind::Unauthorized,
                    "401",
                )
            })
            .collect();
        let decision = decide(&resource(), &findings, &[], &Actions::default());
        assert_eq!(decision.warnings.len(), 3);
        assert!(!decision.audit_annotations.contains_key(WARNINGS_ANNOTATION));
    }

    #[test]
    fn the_plain_acceptance_is_what_serde_writes() {
        let accepted = Decision::accept();
        assert_eq!(accepted.to_json(), accepted.to_json_by_serde());
        // anything more is serde's to write
        let warned = Decision {
            warnings: vec!["w".to_owned()],
            ..Decision::accept()
        };
        assert_ne!(warned.to_json(), ACCEPTED);
        assert_eq!(warned.to_json(), warned.to_json_by_serde());
        let refused = Decision::malformed("bad");
        assert_eq!(refused.to_json(), refused.to_json_by_serde());
        let annotated = Decision {
            audit_annotations: [("a".to_owned(), "b".to_owned())].into(),
            ..Decision::accept()
        };
        assert_ne!(annotated.to_json(), ACCEPTED);
        let mutated = Decision {
            mutated_object: Some(serde_json::json!({})),
            ..Decision::accept()
        };
        assert_ne!(mutated.to_json(), ACCEPTED);
    }
}
