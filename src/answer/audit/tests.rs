use serde_json::{json, Value};

use super::*;
use crate::plan::admission::ValidationPayload;
use crate::settings::Actions;
use crate::vocabulary::failure::Failure;
use crate::vocabulary::reference::ImageReference;
use crate::vocabulary::workload::{ContainerImage, ContainerList};

fn request(value: Value) -> AdmissionRequest<'static> {
    // the text lives for the test: a request borrows its objects from it
    let text: &'static str = Box::leak(json!({ "request": value }).to_string().into_boxed_str());
    ValidationPayload::parse(text.as_bytes()).unwrap().request
}

fn origin(value: Value) -> Origin {
    let request = request(value);
    Origin::of(&request, || request.object().metadata())
}

fn finding(container: &str, image: &str, kind: FailureKind) -> Finding {
    Finding::image(
        ContainerImage {
            list: ContainerList::Regular,
            name: container.into(),
            image: image.into(),
            pull_policy: None,
            pointer: "/spec/containers/0/image".into(),
        },
        ImageReference::parse(image).ok(),
        Failure::new(kind, "manifest unknown"),
    )
}

fn resource(kind: &str) -> Resource {
    Resource {
        kind: kind.into(),
        namespace: "team-a".into(),
        name: "web".into(),
    }
}

fn audit(kind: &str, object: &Value, findings: &[Finding], actions: &Actions) -> Decision {
    let raw = serde_json::value::to_raw_value(object).unwrap();
    report(
        &resource(kind),
        Object::new(Some(raw.get())),
        findings,
        &[],
        actions,
    )
}

#[test]
fn the_scanner_shape_is_an_audit_and_nothing_else_is() {
    let stored = json!({"metadata": {"name": "web", "resourceVersion": "4711"}});
    assert_eq!(
        origin(json!({"operation": "CREATE", "object": stored})),
        Origin::Audit
    );
    // the API server names the user, even an anonymous one
    assert_eq!(
        origin(json!({"operation": "CREATE", "object": stored,
                      "userInfo": {"username": "system:anonymous"}})),
        Origin::Admission
    );
    // no user but a new object (a hand-written fixture): admission, judged as before
    assert_eq!(
        origin(json!({"operation": "CREATE", "object": {"metadata": {"name": "web"}}})),
        Origin::Admission
    );
    // the scanner sends only CREATE
    assert_eq!(
        origin(json!({"operation": "UPDATE", "object": stored})),
        Origin::Admission
    );
    // a resourceVersion of the wrong type reads as absent
    assert_eq!(
        origin(json!({"operation": "CREATE", "object": {"metadata": {"resourceVersion": 7}}})),
        Origin::Admission
    );
}

#[test]
fn what_admission_rejects_fails_and_says_what_breaks_next() {
    let findings = [finding(
        "app",
        "registry.example/team/app:gone",
        FailureKind::Absent,
    )];
    let decision = audit("CronJob", &json!({}), &findings, &Actions::default());
    assert!(!decision.accepted);
    let message = decision.message.unwrap();
    assert!(
        message.starts_with(
            "CronJob team-a/web: 1 image will not pull. Next: its next scheduled run fails with ErrImagePull.\n- container \"app\" image \"registry.example/team/app:gone\": not found on registry registry.example: manifest unknown."
        ),
        "{message}"
    );
    for (kind, next) in [
        ("Deployment", "new Pods (a scale-up, a rollout"),
        ("StatefulSet", "a Pod rescheduled after an eviction"),
        ("DaemonSet", "its Pod on a new or replaced node"),
        ("Job", "Pods the Job still starts"),
        ("Pod", "this Pod is not re-created by a controller"),
    ] {
        let message = audit(kind, &json!({}), &findings, &Actions::default())
            .message
            .unwrap();
        assert!(message.contains(next), "{kind}: {message}");
    }
}

#[test]
fn what_is_uncertain_passes_and_says_why() {
    let findings = [finding(
        "app",
        "ghcr.io/org/private:1",
        FailureKind::Unauthorized,
    )];
    let decision = audit("Deployment", &json!({}), &findings, &Actions::default());
    assert!(decision.accepted);
    let message = decision.message.unwrap();
    assert!(
        message.starts_with(
            "not verified, so no failure (the next pull may still succeed): container \"app\" image \"ghcr.io/org/private:1\": not authorized on registry ghcr.io"
        ),
        "{message}"
    );
    // an operator who rejects it at admission sees it fail in the report too
    let strict = Actions::default().with(FailureKind::Unauthorized, Action::Reject);
    assert!(!audit("Deployment", &json!({}), &findings, &strict).accepted);
}

#[test]
fn an_image_only_node_caches_still_hold_fails_unless_absent_is_not_rejected() {
    let findings = [finding(
        "app",
        "registry.example/app:1",
        FailureKind::CachedOnNodes,
    )];
    assert!(!audit("Deployment", &json!({}), &findings, &Actions::default()).accepted);
    let lenient = Actions::default().with(FailureKind::Absent, Action::Warn);
    assert!(audit("Deployment", &json!({}), &findings, &lenient).accepted);
}

#[test]
fn a_refused_image_only_node_caches_hold_follows_the_blocked_registry_action() {
    let mut cached = finding("app", "registry.example/app:1", FailureKind::CachedOnNodes);
    cached.failure.observed = Observed::RefusedButCached;
    let findings = [cached];
    assert!(!audit("Deployment", &json!({}), &findings, &Actions::default()).accepted);
    // the absent action does not decide it; the blockedRegistry action does
    let absent_warned = Actions::default().with(FailureKind::Absent, Action::Warn);
    assert!(!audit("Deployment", &json!({}), &findings, &absent_warned).accepted);
    let blocked_warned = Actions::default().with(FailureKind::BlockedRegistry, Action::Warn);
    assert!(audit("Deployment", &json!({}), &findings, &blocked_warned).accepted);
}

#[test]
fn a_running_pod_is_told_the_digest_it_runs() {
    let digest = format!("sha256:{}", "a".repeat(64));
    let pod = json!({"status": {
        "containerStatuses": [
            {"name": "app", "imageID": format!("registry.example/team/app@{digest}")},
            {"name": "other", "imageID": "sha256:local-id"}],
        "initContainerStatuses": "not a list"}});
    let findings = [
        finding("app", "registry.example/team/app:gone", FailureKind::Absent),
        finding(
            "other",
            "registry.example/team/other:gone",
            FailureKind::Absent,
        ),
    ];
    let message = audit("Pod", &pod, &findings, &Actions::default())
        .message
        .unwrap();
    assert!(
        message.contains(&format!(
            "It runs {digest}: to keep that version, set the image to registry.example/team/app@{digest} if the registry still has it."
        )),
        "{message}"
    );
    assert_eq!(message.matches("It runs").count(), 1, "{message}");
}

#[test]
fn digests_are_read_from_every_image_id_form() {
    let digest = format!("sha256:{}", "b".repeat(64));
    assert_eq!(
        digest_of(&format!("docker-pullable://nginx@{digest}")),
        Some(digest.as_str())
    );
    assert_eq!(
        digest_of(&format!("docker.io/library/nginx@{digest}")),
        Some(digest.as_str())
    );
    assert_eq!(digest_of("sha256:0123"), None);
    assert_eq!(digest_of(""), None);
}

#[test]
fn a_long_report_is_cut_to_what_a_report_cell_holds() {
    let findings: Vec<Finding> = (0..100)
        .map(|i| {
            finding(
                &format!("c{i}"),
                &format!("registry.example/app-{i}:gone"),
                FailureKind::Absent,
            )
        })
        .collect();
    let message = audit("Deployment", &json!({}), &findings, &Actions::default())
        .message
        .unwrap();
    assert!(message.len() <= AUDIT_MESSAGE_MAX, "{}", message.len());
    assert!(message.starts_with("Deployment team-a/web: 100 images will not pull."));
}

#[test]
fn an_admission_instance_answers_audits_without_looking_up() {
    let decision = not_audited();
    assert!(decision.accepted);
    assert!(decision.message.unwrap().contains("audit.lookups is false"));
}

/// docs/audit.md's table of what an audit reports per verdict: (verdict, result) for each row
/// of the table whose header is `| verdict | result | why |`.
fn documented_results() -> Vec<(String, String)> {
    let doc = include_str!("../../../docs/audit.md");
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|cell| cell.trim().to_owned())
            .collect()
    };
    let mut lines = doc
        .lines()
        .skip_while(|line| cells(line)[..] != ["verdict", "result", "why"]);
    assert!(
        lines.next().is_some(),
        "docs/audit.md has no `| verdict | result | why |` table"
    );
    lines
        .skip(1) // |---|---|---|
        .take_while(|line| line.trim_start().starts_with('|'))
        .map(|line| {
            let row = cells(line);
            let verdict = row[0]
                .strip_prefix('`')
                .and_then(|v| v.strip_suffix('`'))
                .unwrap_or_else(|| panic!("docs/audit.md: a verdict not in backticks: {line}"));
            (verdict.to_owned(), row[1].clone())
        })
        .collect()
}

#[test]
fn every_verdict_is_reported_as_docs_audit_md_says() {
    let table = documented_results();
    for (verdict, _) in &table {
        assert!(
            FailureKind::from_key(verdict).is_some(),
            "docs/audit.md lists `{verdict}`, which is no verdict of the policy"
        );
    }
    // the defaults as users get them: settings that name no action
    let actions = *crate::settings::Settings::from_value(&json!({}))
        .unwrap()
        .actions();
    for kind in FailureKind::ALL {
        let key = kind.setting_key();
        let rows: Vec<&String> = table
            .iter()
            .filter(|(verdict, _)| verdict == key)
            .map(|(_, result)| result)
            .collect();
        assert_eq!(
            rows.len(),
            1,
            "docs/audit.md must list `{key}` exactly once, not {} times",
            rows.len()
        );
        let findings = [finding("app", "registry.example/team/app:1", kind)];
        let decision = audit("Deployment", &json!({}), &findings, &actions);
        let result = if decision.accepted { "pass" } else { "fail" };
        assert_eq!(
            result, rows[0],
            "`{key}`: the audit reports {result}, docs/audit.md says {}",
            rows[0]
        );
    }
}
