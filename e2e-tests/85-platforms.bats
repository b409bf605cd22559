#!/usr/bin/env bats
# requiredPlatforms: an image without a manifest for a platform the pods will run on fails as
# surely as a missing tag. Test images: test/multi:v1 (linux/amd64 + linux/arm64 index),
# team/app:1.4.2 (linux/amd64 only), test/arm:v1 (linux/arm64 only), test/app:v2s2 (amd64).

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

# one_image IMAGE: a Deployment whose only container runs IMAGE.
one_image() {
  local_request deployment-create.json "app=$1" init-schema.remove sidecar.remove
}

# add_node NAME ARCH: a linux Node of ARCH in the test's cluster directory.
add_node() {
  printf '%s\n' "---" "apiVersion: v1" "kind: Node" "metadata:" "  name: $1" "  labels:" \
    "    kubernetes.io/os: linux" "    kubernetes.io/arch: $2" "status:" "  nodeInfo:" \
    "    operatingSystem: linux" "    architecture: $2" | cluster_add "$E2E_CLUSTER" "node-$1.yaml"
}

@test "a multi-platform index has every required platform" {
  req=$(one_image "$REG_ANON/test/multi:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-amd64-arm64.json"
  assert_allowed
  assert_warning_count 0
}

@test "a single-platform image lacking a required platform is rejected, naming what it has" {
  req=$(one_image "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-amd64-arm64.json"
  assert_rejected
  assert_message_contains "container \"app\"" "no manifest for a required platform" "linux/arm64" "linux/amd64"
}

@test "the platform of a single manifest is read from its config (arm64-only, Docker schema 2)" {
  settings=$(write_settings arm64 '{"requiredPlatforms":["linux/arm64"]}')
  req=$(one_image "$REG_ANON/test/arm:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0

  req=$(one_image "$REG_ANON/test/app:v2s2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "no manifest for a required platform" "linux/arm64" "linux/amd64"
}

@test "a nodeSelector on kubernetes.io/arch narrows the requirement" {
  req=$(one_image "$REG_ANON/team/app:1.4.2")
  request_edit_pod_spec "$req" '.nodeSelector = {"kubernetes.io/arch": "amd64"}'
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-amd64-arm64.json"
  assert_allowed
  assert_warning_count 0
}

@test "requiredPlatforms: cluster uses the Nodes' platforms" {
  E2E_CLUSTER="$BATS_TEST_TMPDIR/cluster"
  mkdir -p "$E2E_CLUSTER"
  cp "$(e2e_workdir)/cluster/default/"*.yaml "$E2E_CLUSTER/"
  add_node worker-1 amd64
  req=$(one_image "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_allowed
  assert_warning_count 0

  add_node worker-2 arm64
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_rejected
  assert_message_contains "no manifest for a required platform" "linux/arm64"
}

@test "actions.missingPlatform=warn admits with a warning" {
  req=$(one_image "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-warn.json"
  assert_allowed
  assert_warning_contains "container \"app\"" "no manifest for a required platform" "actions.missingPlatform"
}

@test "an invalid platform is refused when the policy loads" {
  req=$(one_image "$REG_ANON/team/app:1.4.2")
  run -1 --separate-stderr policy_run "$req" --settings-json '{"requiredPlatforms":["linux"]}'
  [[ "$stderr" == *"Provided settings are not valid"* && "$stderr" == *"requiredPlatforms[0]"* ]]
}
