#!/usr/bin/env bats
# customResources: images found in other kinds by JSONPath, either bare image fields (an Argo
# Workflow) or whole pod specs (a Knative Service), looked up like a Pod's; with pinDigests,
# pinned through the JSONPath locations.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

# custom_request KIND-JSON OBJECT-JSON: an AdmissionReview CREATE for a custom kind in team-a.
custom_request() {
  local file
  file="$(e2e_workdir)/requests/custom.$RANDOM.json"
  mkdir -p "$(dirname "$file")"
  jq -n --argjson k "$1" --argjson o "$2" '{
    apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
    request: {uid: "9f0e1d2c-3b4a-4596-8877-665544332211", kind: $k.kind, resource: $k.resource,
      requestKind: $k.kind, requestResource: $k.resource, name: "web", namespace: "team-a",
      operation: "CREATE", userInfo: {username: "kubernetes-admin", uid: "a3f1c2d4-5b6e-4f70-8a91-b2c3d4e5f607",
        groups: ["system:authenticated"]},
      object: $o, oldObject: null, dryRun: false,
      options: {kind: "CreateOptions", apiVersion: "meta.k8s.io/v1", fieldManager: "kubectl-client-side-apply"}}}' >"$file"
  printf '%s\n' "$file"
}

@test "custom kind by image JSONPath (Argo Workflow): a missing image is rejected" {
  req=$(custom_request '{"kind": {"group": "argoproj.io", "version": "v1alpha1", "kind": "Workflow"},
      "resource": {"group": "argoproj.io", "version": "v1alpha1", "resource": "workflows"}}' \
    "$(jq -n --arg a "$REG_ANON/team/app:1.4.2" --arg b "$REG_ANON/library/busybox:0.0.0" '{
      apiVersion: "argoproj.io/v1alpha1", kind: "Workflow",
      metadata: {name: "web", namespace: "team-a", creationTimestamp: null},
      spec: {entrypoint: "main", templates: [
        {name: "main", container: {image: $a, command: ["/app"]}},
        {name: "check", script: {image: $b, command: ["sh"], source: "true"}}]}}')")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/custom-kinds.json"
  assert_rejected
  assert_message_contains "Workflow team-a/web" "1 image will not pull" "$REG_ANON/library/busybox:0.0.0" "not found on registry $REG_ANON"
  assert_message_lacks "$REG_ANON/team/app:1.4.2"

  # without the setting the kind is not the policy's business
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "custom kind by pod spec JSONPath (Knative Service): containers checked like a template's" {
  req=$(custom_request '{"kind": {"group": "serving.knative.dev", "version": "v1", "kind": "Service"},
      "resource": {"group": "serving.knative.dev", "version": "v1", "resource": "services"}}' \
    "$(jq -n --arg a "$REG_ANON/team/app:9.9.9" '{
      apiVersion: "serving.knative.dev/v1", kind: "Service",
      metadata: {name: "web", namespace: "team-a", creationTimestamp: null},
      spec: {template: {metadata: {creationTimestamp: null}, spec: {containers: [{name: "user-container", image: $a}]}}}}')")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/custom-kinds.json"
  assert_rejected
  assert_message_contains "Service team-a/web" "container \"user-container\"" "$REG_ANON/team/app:9.9.9" "not found"
}

# The Argo Workflow of e2e-tests/fixtures/workflow-create.json (workflow_request), with exact
# messages and patches, and what was asked from a recorded session.

@test "a Workflow with a missing tag in templates[1] is rejected, naming the field" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/custom-kinds-argo-workflow.json"
  assert_rejected
  assert_message_contains "Workflow team-a/build: 1 image will not pull:" \
    "image field \"\$['spec']['templates'][1]['container']['image']\" image \"$REG_ANON/team/app:9.9.9\": not found on registry $REG_ANON" \
    "manifest unknown"
  assert_message_lacks "templates'][0]"
  assert_no_patch
}

@test "a Workflow whose images all exist is admitted" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/custom-kinds-argo-workflow.json" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_no_patch
  # Both image fields were looked up, and nothing else: bare image fields have no pod spec,
  # so no ServiceAccount or pull secret is read.
  run -0 session_requests "$BATS_TEST_TMPDIR/session.yml"
  [ "$output" = "$(printf 'OciManifestDigest\t%s\n' "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:1.4.2")" ]
}

@test "without customResources a Workflow is admitted untouched, with no lookup" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_no_patch
  # Nothing at all was asked of the host.
  run -0 session_requests "$BATS_TEST_TMPDIR/session.yml"
  [ -z "$output" ]
}

@test "with pinDigests: the Workflow's image fields are pinned through their JSONPath locations" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/custom-kinds-argo-workflow-pinned.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg first "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" \
    --arg second "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")" '[
      {op: "replace", path: "/spec/templates/0/container/image", value: $first},
      {op: "replace", path: "/spec/templates/1/container/image", value: $second}]')"
}
