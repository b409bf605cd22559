#!/usr/bin/env bats
# Mirrors, required platforms, digest pinning and custom kinds against real registries: the
# live counterpart of tests/features.rs. Two anonymous registries: REG_ANON holds every image
# of the fixtures (and plays the upstream of the mirror scenarios), REG_MIRROR plays its
# mirror and holds images the upstream does not have.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  load lib/features
  host_ready || return 0
  registry_start anon
  registry_start anon mirror

  # The fixtures' images, each built on its own so each has its own digest: a pinning patch
  # that wrote one image's digest into another container's field would show.
  push_image "$(build_image app-1.4.2)" anon team/app:1.4.2
  push_image "$(build_image migrate-2.1.0)" anon platform/migrate:2.1.0
  push_image "$(build_image busybox-1.36)" anon library/busybox:1.36

  # Only on the mirror: a tag, and an image referenced by digest only.
  push_image "$(build_image mirror-only)" mirror team/app:mirror-only
  push_image "$(build_image mirror-digest)" mirror team/app:digest-on-mirror
  # A mirror serving the upstream under a path, as a containerd `override_path` host does.
  push_image "$(build_image mirror-path)" mirror dockerhub/team/app:under-path
  # An UPDATE to this tag is what a pinning patch must be limited to.
  push_image "$(build_image app-1.5.0)" anon team/app:1.5.0
  # A mirror that is down: nothing listens there.
  REG_MIRROR_DOWN="127.0.0.1:$(unused_port)"
  export REG_MIRROR_DOWN

  # Platforms: linux/amd64 + linux/arm64/v8 index, an amd64-only index, and single-platform
  # manifests whose platform is only in their config.
  push_image "$(build_multiarch_image multi)" anon test/multi:v1 --all
  push_image "$(build_index_for amd64-only amd64)" anon test/amd64-only:v1 --all
  push_image "$(build_image_for single-amd64 amd64)" anon test/single-amd64:v1
  push_image "$(build_image_for single-arm64 arm64)" anon test/single-arm64:v1

  E2E_SOURCES=$(write_sources_yaml features --insecure "$REG_ANON" --insecure "$REG_MIRROR" --insecure "$REG_MIRROR_DOWN")
  E2E_CLUSTER=$(write_cluster_dir default)
  export E2E_SOURCES E2E_CLUSTER
}

teardown_file() { load lib/common; scenario_teardown_file; }

setup() {
  load lib/common
  load lib/features
  require_host
}

# ---------------------------------------------------------------------------------------
# Mirrors

@test "mirrors: an image only on the mirror is admitted, and the annotation names the mirror" {
  settings=$(mirror_settings mirror-all "$REG_ANON" "$REG_MIRROR")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  # Only "app" came from the mirror: the other containers' images are on the upstream only,
  # which the chain reaches after the mirror's 404.
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app:mirror-only: $REG_MIRROR/team/app:mirror-only"
  # The chain stops at the first location that has the image: the upstream is not asked for
  # it; the sidecar's image, missing on the mirror, is then asked at the upstream.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_MIRROR/team/app:mirror-only"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "$REG_ANON/team/app:mirror-only"
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_MIRROR/library/busybox:1.36"
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_ANON/library/busybox:1.36"
}

@test "mirrors: a digest-only mirror is skipped for a tag; the message names only the primary" {
  settings=$(mirror_settings mirror-digest-only "$REG_ANON" "$REG_MIRROR" digest-only)
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/team/app:mirror-only\": not found on registry $REG_ANON: Registry error: url http://$REG_ANON/v2/team/app/manifests/mirror-only" \
    "manifest unknown"
  assert_message_lacks "$REG_MIRROR" "mirror " "primary "
  assert_no_annotations
  # The host was never asked anything about the mirror.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_ANON/team/app:mirror-only"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "$REG_MIRROR"
}

@test "mirrors: a digest-only mirror serves a digest reference the upstream lacks" {
  digest=$(digest_of "$REG_MIRROR/team/app:digest-on-mirror")
  settings=$(mirror_settings mirror-digest-only "$REG_ANON" "$REG_MIRROR" digest-only)
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$digest")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app@$digest: $REG_MIRROR/team/app@$digest"
}

@test "mirrors: absent from mirror and primary is rejected, naming both locations" {
  settings=$(mirror_settings mirror-all "$REG_ANON" "$REG_MIRROR")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:nowhere")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"app\" image \"$REG_ANON/team/app:nowhere\": not found on registry $REG_ANON and its mirrors: " \
    "mirror $REG_MIRROR/team/app:nowhere: not found (Registry error: url http://$REG_MIRROR/v2/team/app/manifests/nowhere" \
    "; primary $REG_ANON/team/app:nowhere: not found (Registry error: url http://$REG_ANON/v2/team/app/manifests/nowhere" \
    "Hint: check that the tag or digest was pushed to $REG_ANON/team/app"
  assert_message_lacks "init-schema" "sidecar"
  assert_no_annotations
}

@test "mirrors: a mirror location with a path (containerd override_path) is asked under that path" {
  settings=$(mirror_settings mirror-path "$REG_ANON" "$REG_MIRROR/dockerhub")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:under-path")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app:under-path: $REG_MIRROR/dockerhub/team/app:under-path"
}

@test "mirrors: a mirror that is down and a primary without the image is uncertain, not absent" {
  settings=$(mirror_settings mirror-down "$REG_ANON" "$REG_MIRROR_DOWN")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:nowhere")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  # The node might have pulled it from the mirror: a warning (actions.unreachable), not a rejection.
  assert_allowed
  assert_warning_contains "container \"app\"" "actions.unreachable: warn" \
    "mirror $REG_MIRROR_DOWN/team/app:nowhere: registry unreachable"
  assert_no_annotations
}

# ---------------------------------------------------------------------------------------
# Required platforms. The fixture's other containers are removed, so the image under test
# is the only one that can fail.

@test "platforms: an index without linux/arm64 is rejected naming what it has; the two-platform index passes" {
  req=$(local_request pod-create.json "app=$REG_ANON/test/amd64-only:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-required-arm64.json"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/test/amd64-only:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm64; the image has linux/amd64." \
    "Hint: build and push the image for the missing platforms"
  assert_no_patch

  req=$(local_request pod-create.json "app=$REG_ANON/test/multi:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-required-arm64.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "platforms: a single-platform manifest is judged by its config" {
  req=$(local_request pod-create.json "app=$REG_ANON/test/single-amd64:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-required-arm64.json" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains "container \"app\" image \"$REG_ANON/test/single-amd64:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm64; the image has linux/amd64."
  # The manifest is not an index: the platform came from its config, read by digest.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestAndConfig \
    "$REG_ANON/test/single-amd64@$(digest_of "$REG_ANON/test/single-amd64:v1")"

  req=$(local_request pod-create.json "app=$REG_ANON/test/single-arm64:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-required-arm64.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "platforms: cluster means the Nodes' platforms; a nodeSelector on kubernetes.io/arch narrows them" {
  cluster=$(cluster_with_nodes nodes)
  req=$(local_request deployment-create.json "app=$REG_ANON/test/amd64-only:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" \
    --settings-path "$SCENARIOS_DIR/features-required-cluster.json" \
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
    --settings-path "$SCENARIOS_DIR/features-required-cluster.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0

  # Without the nodeSelector, an image with both platforms is fine on this cluster.
  req=$(local_request deployment-create.json "app=$REG_ANON/test/multi:v1" init-schema.remove sidecar.remove)
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" \
    --settings-path "$SCENARIOS_DIR/features-required-cluster.json"
  assert_allowed
  assert_warning_count 0
}

# ---------------------------------------------------------------------------------------
# Digest pinning: the expected digest is what skopeo reported when pushing (digest_of), not
# what the policy said, so the patch is checked against the registry.

@test "pinning: a Pod's images are pinned to their registry digests, as written" {
  req=$(local_request pod-create.json "sidecar=$REG_ANON/test/multi:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-pin-digests.json"
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

@test "pinning: a Deployment's template images are pinned at their template paths" {
  req=$(local_request deployment-create.json)
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-pin-digests.json"
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

@test "pinning: an image already pinned by digest is left out of the patch" {
  app_digest=$(digest_of "$REG_ANON/team/app:1.4.2")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:1.4.2@$app_digest" \
    "sidecar=$REG_ANON/library/busybox@$(digest_of "$REG_ANON/library/busybox:1.36")")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-pin-digests.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg init "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" '[
      {op: "replace", path: "/spec/initContainers/0/image", value: $init}]')"
}

@test "pinning: an UPDATE pins only the changed image; imagePullPolicy Never is not pinned" {
  # app changes to a new tag (pinned); sidecar changes too, but to an image the node must
  # already have (Never: not looked up, so not pinned); init-schema is unchanged (not checked).
  req=$(local_request deployment-update-image.json "object:app=$REG_ANON/team/app:1.5.0" \
    "object:sidecar=$REG_ANON/test/multi:v1" "object:sidecar.pull=Never")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-pin-digests.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg app "$REG_ANON/team/app:1.5.0@$(digest_of "$REG_ANON/team/app:1.5.0")" '[
      {op: "replace", path: "/spec/template/spec/containers/0/image", value: $app}]')"
}

@test "pinning: a rejected request carries no patch; without pinDigests nothing is patched" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-pin-digests.json"
  assert_rejected
  assert_message_contains "container \"app\" image \"$REG_ANON/team/app:9.9.9\": not found on registry $REG_ANON"
  assert_no_patch

  req=$(local_request pod-create.json)
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_patch
}

# ---------------------------------------------------------------------------------------
# Custom kinds: an Argo Workflow, its images named by JSONPath.

@test "custom kinds: a Workflow with a missing tag in templates[1] is rejected, naming the field" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-argo-workflow.json"
  assert_rejected
  assert_message_contains "Workflow team-a/build: 1 image will not pull:" \
    "image field \"\$['spec']['templates'][1]['container']['image']\" image \"$REG_ANON/team/app:9.9.9\": not found on registry $REG_ANON" \
    "manifest unknown"
  assert_message_lacks "templates'][0]"
  assert_no_patch
}

@test "custom kinds: a Workflow whose images all exist is admitted" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-argo-workflow.json" \
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

@test "custom kinds: without customResources a Workflow is admitted untouched, with no lookup" {
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

@test "custom kinds with pinDigests: the Workflow's image fields are pinned through their JSONPath locations" {
  req=$(workflow_request "$REG_ANON/platform/migrate:2.1.0" "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/features-argo-workflow-pinned.json"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n \
    --arg first "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" \
    --arg second "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")" '[
      {op: "replace", path: "/spec/templates/0/container/image", value: $first},
      {op: "replace", path: "/spec/templates/1/container/image", value: $second}]')"
}
