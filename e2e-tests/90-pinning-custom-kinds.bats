#!/usr/bin/env bats
# pinDigests (the policy as a mutating policy: checked images rewritten to the digest that was
# resolved) and customResources (images found in other kinds by JSONPath).

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

# patch_ops: the JSONPatch of the response in $output, decoded ([] when there is none).
patch_ops() {
  local patch
  patch=$(jq -r '.patch // empty' <<<"$output")
  if [[ -z "$patch" ]]; then echo '[]'; else base64 -d <<<"$patch"; fi
}

# assert_patch_sets POINTER VALUE: the JSONPatch writes VALUE at POINTER.
assert_patch_sets() {
  jq -e --arg p "$1" --arg v "$2" 'any(.[]; (.op == "replace" or .op == "add") and .path == $p and .value == $v)' \
    <<<"$(patch_ops)" >/dev/null || _fail_with "the patch does not set $1 to $2: $(patch_ops)"
}

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

@test "pinDigests: every checked image is rewritten to tag@digest" {
  req=$(local_request deployment-create.json)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  [ "$(jq -r .patchType <<<"$output")" = JSONPatch ]
  assert_patch_sets /spec/template/spec/initContainers/0/image "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")"
  assert_patch_sets /spec/template/spec/containers/0/image "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")"
  assert_patch_sets /spec/template/spec/containers/1/image "$REG_ANON/library/busybox:1.36@$(digest_of "$REG_ANON/library/busybox:1.36")"
}

@test "pinDigests leaves alone images with a digest, images not pulled (Never), and rejected requests" {
  digest=$(digest_of "$REG_ANON/team/app:1.4.2")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$digest" "sidecar.pull=Never")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  [ "$(patch_ops | jq -c '[.[].path]')" = '["/spec/initContainers/0/image"]' ] || _fail_with "unexpected patch: $(patch_ops)"

  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_rejected
  [ "$(jq -r '.patch // "none"' <<<"$output")" = none ]
}

@test "without pinDigests the policy never mutates" {
  req=$(local_request deployment-create.json)
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  [ "$(jq -r '.patch // "none"' <<<"$output")" = none ]
}

@test "pinDigests on UPDATE: only the changed image is pinned" {
  req=$(local_request deployment-update-image.json "oldObject:app=$REG_ANON/team/app:1.4.2" "object:app=$REG_ANON/team/app:1.5.0")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  [ "$(patch_ops | jq -c '[.[].path]')" = '["/spec/template/spec/containers/0/image"]' ] || _fail_with "unexpected patch: $(patch_ops)"
  assert_patch_sets /spec/template/spec/containers/0/image "$REG_ANON/team/app:1.5.0@$(digest_of "$REG_ANON/team/app:1.5.0")"
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
