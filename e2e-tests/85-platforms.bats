#!/usr/bin/env bats
# requiredPlatforms: an image without a manifest for a platform the pods will run on fails as
# surely as a missing tag. Test images: test/multi:v1 (linux/amd64 + linux/arm64 index),
# team/app:1.4.2 (linux/amd64 only), test/arm:v1 (linux/arm64 only), test/app:v2s2 (amd64);
# test/amd64-only:v1 (an index with linux/amd64 only), test/single-amd64:v1, test/single-arm64:v1.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  scenario_setup_file
  host_ready || return 0
  # An amd64-only index (what a registry serves for an image published for amd64 only), and
  # single-platform manifests whose platform is only in their config.
  push_image "$(build_index_for amd64-only amd64)" anon test/amd64-only:v1 --all
  push_image "$(build_image single-amd64 amd64)" anon test/single-amd64:v1
  push_image "$(build_image single-arm64 arm64)" anon test/single-arm64:v1
}
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

# Exact messages, and what was asked, from a recorded session. The fixture's other containers
# are removed, so the image under test is the only one that can fail.

@test "an index without linux/arm64 is rejected naming what it has; the two-platform index passes" {
  req=$(local_request pod-create.json "app=$REG_ANON/test/amd64-only:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-arm64.json"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/test/amd64-only:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm64; the image has linux/amd64." \
    "Hint: build and push the image for the missing platforms"
  assert_no_patch

  req=$(local_request pod-create.json "app=$REG_ANON/test/multi:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-arm64.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "a single-platform manifest is judged by its config" {
  req=$(local_request pod-create.json "app=$REG_ANON/test/single-amd64:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-arm64.json" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains "container \"app\" image \"$REG_ANON/test/single-amd64:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm64; the image has linux/amd64."
  # The manifest is not an index: the platform came from its config, read by digest.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestAndConfig \
    "$REG_ANON/test/single-amd64@$(digest_of "$REG_ANON/test/single-amd64:v1")"

  req=$(local_request pod-create.json "app=$REG_ANON/test/single-arm64:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-arm64.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "cluster means the Nodes' platforms; a nodeSelector on kubernetes.io/arch narrows them" {
  cluster=$(cluster_with_nodes nodes)
  req=$(local_request deployment-create.json "app=$REG_ANON/test/amd64-only:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" \
    --settings-path "$SCENARIOS_DIR/platforms-cluster.json" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains "Deployment team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/test/amd64-only:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm64; the image has linux/amd64."
  # The Nodes were listed, once.
  run -0 session_requests "$BATS_TEST_TMPDIR/session.yml"
  [ "$(grep -c '^KubernetesListResourceAll$' <<<"$output")" -eq 1 ]

  # The same Deployment, scheduled on amd64 nodes only: amd64 is all it needs.
  request_edit_pod_spec "$req" '.nodeSelector = {"kubernetes.io/arch": "amd64"}'
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" \
    --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0

  # Without the nodeSelector, an image with both platforms is fine on this cluster.
  req=$(local_request deployment-create.json "app=$REG_ANON/test/multi:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" \
    --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_allowed
  assert_warning_count 0
}
