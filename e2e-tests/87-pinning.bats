#!/usr/bin/env bats
# pinDigests: the policy as a mutating policy, checked images rewritten to the digest that was
# resolved. The expected digest is what skopeo reported when pushing (digest_of), not what the
# policy said, so the patch is checked against the registry.

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

# The whole patch, compared exactly (assert_patch_is).

@test "a Pod's images are pinned to their registry digests, as written" {
  req=$(local_request pod-create.json "sidecar=$REG_ANON/test/multi:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  # A multi-platform image is pinned to its index digest, so every node still picks its own.
  assert_patch_is "$(jq -n \
    --arg app "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")" \
    --arg sidecar "$REG_ANON/test/multi:v1@$(digest_of "$REG_ANON/test/multi:v1")" \
    --arg init "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" '[
      {op: "replace", path: "/spec/containers/0/image", value: $app},
      {op: "replace", path: "/spec/containers/1/image", value: $sidecar},
      {op: "replace", path: "/spec/initContainers/0/image", value: $init}]')"
}

@test "a Deployment's template images are pinned at their template paths" {
  req=$(local_request deployment-create.json)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg app "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")" \
    --arg sidecar "$REG_ANON/library/busybox:1.36@$(digest_of "$REG_ANON/library/busybox:1.36")" \
    --arg init "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" '[
      {op: "replace", path: "/spec/template/spec/containers/0/image", value: $app},
      {op: "replace", path: "/spec/template/spec/containers/1/image", value: $sidecar},
      {op: "replace", path: "/spec/template/spec/initContainers/0/image", value: $init}]')"
}

@test "an image already pinned by digest is left out of the patch" {
  app_digest=$(digest_of "$REG_ANON/team/app:1.4.2")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:1.4.2@$app_digest" \
    "sidecar=$REG_ANON/library/busybox@$(digest_of "$REG_ANON/library/busybox:1.36")")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg init "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" '[
      {op: "replace", path: "/spec/initContainers/0/image", value: $init}]')"
}

@test "an UPDATE pins only the changed image; imagePullPolicy Never is not pinned" {
  # app changes to a new tag (pinned); sidecar changes too, but to an image the node must
  # already have (Never: not looked up, so not pinned); init-schema is unchanged (not checked).
  req=$(local_request deployment-update-image.json "object:app=$REG_ANON/team/app:1.5.0" \
    "object:sidecar=$REG_ANON/test/multi:v1" "object:sidecar.pull=Never")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg app "$REG_ANON/team/app:1.5.0@$(digest_of "$REG_ANON/team/app:1.5.0")" '[
      {op: "replace", path: "/spec/template/spec/containers/0/image", value: $app}]')"
}

@test "a rejected request carries no patch; without pinDigests nothing is patched" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_rejected
  assert_message_contains "container \"app\" image \"$REG_ANON/team/app:9.9.9\": not found on registry $REG_ANON"
  assert_no_patch

  req=$(local_request pod-create.json)
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_patch
}
