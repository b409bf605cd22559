#!/usr/bin/env bats
# Image volumes (`volumes[].image`, KEP-4639): the kubelet pulls them like container images,
# with the pod's pull secrets and their own pullPolicy, before any container starts. The policy
# checks them wherever it reads a pod spec, names the volume, looks a reference shared with a
# container up once, pins them, and asks a platform of them only where an index offers a choice.
# Test images: ml/model:v1 (an image, linux/amd64), ml/weights:v1 (an OCI artifact: empty
# config, one non-layer blob, no platform anywhere), and scenario.bash's standard images.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  scenario_setup_file
  host_ready || return 0
  push_image "$(build_image model)" anon ml/model:v1
  push_artifact anon ml/weights:v1
}
teardown_file() { load lib/common; scenario_teardown_file; }
setup() {
  load lib/common
  load lib/certainty # request_edit, assert_session_lookups
  require_host
  SESSION="$BATS_TEST_TMPDIR/session.yml"
}

# push_artifact NAME REPO:TAG: pushes an OCI artifact (artifactType, the empty config
# descriptor, one blob of a media type that is not a layer's) to registry NAME with the
# distribution API, as oras would, and records its digest.
push_artifact() {
  local name=$1 repo=${2%:*} tag=${2##*:} addr dir blob config manifest location
  addr=$(registry_addr "$name")
  dir="$(e2e_workdir)/images/artifact-${repo//\//-}"
  mkdir -p "$dir"
  printf 'weights of %s\n' "$2" >"$dir/blob"
  printf '{}' >"$dir/config"
  for blob in blob config; do
    location=$(curl -fsS --noproxy '*' --max-time 10 -X POST -D - -o /dev/null \
      "http://$addr/v2/$repo/blobs/uploads/" | tr -d '\r' | awk -F': ' 'tolower($1) == "location" { print $2 }')
    [[ -n "$location" ]] || { echo "push_artifact: no upload location" >&2; return 1; }
    [[ "$location" == http* ]] || location="http://$addr$location"
    curl -fsS --noproxy '*' --max-time 10 -X PUT -H 'Content-Type: application/octet-stream' \
      --data-binary "@$dir/$blob" "$location&digest=sha256:$(sha256_of "$dir/$blob")" >/dev/null || return 1
  done
  jq -cn --arg b "sha256:$(sha256_of "$dir/blob")" --argjson bs "$(stat -c %s "$dir/blob")" \
    --arg c "sha256:$(sha256_of "$dir/config")" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      artifactType: "application/vnd.example.model.v1",
      config: {mediaType: "application/vnd.oci.empty.v1+json", digest: $c, size: 2},
      layers: [{mediaType: "application/vnd.example.model.weights.v1", digest: $b, size: $bs,
                annotations: {"org.opencontainers.image.title": "weights.bin"}}]}' >"$dir/manifest.json"
  curl -fsS --noproxy '*' --max-time 10 -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' \
    --data-binary "@$dir/manifest.json" "http://$addr/v2/$repo/manifests/$tag" >/dev/null || return 1
  record_digest "$name" "$2"
}

# add_image_volume FILE NAME REFERENCE [PULL-POLICY]: appends an image volume to the pod spec of
# the request's object and oldObject (pullPolicy left out when not given, as in a template a
# tool fills in later), then refuses references off loopback.
add_image_volume() {
  local file=$1 name=$2 reference=$3 policy=${4:-}
  request_edit_pod_spec "$file" "$(jq -cn --arg n "$name" --arg r "$reference" --arg p "$policy" \
    '{name: $n, image: ({reference: $r} + (if $p == "" then {} else {pullPolicy: $p} end))}' |
    sed 's/^/.volumes = ((.volumes \/\/ []) + [/; s/$/])/')"
  assert_loopback_only "$file"
}

# run_recorded REQUEST [HOST OPTIONS...]: policy_run, recording the host calls into $SESSION.
run_recorded() {
  rm -f "$SESSION"
  policy_run "$@" --record-host-capabilities-interactions "$SESSION"
}

# session_count FILE KIND IMAGE: how many KIND requests the session made for IMAGE.
session_count() {
  [[ -s "$1" ]] || { echo 0; return; }
  session_requests "$1" | grep -cxF "$2	$3" || true
}

# check_volume_kind FIXTURE KIND: the fixture with an existing image volume is admitted; with
# the volume on a tag never pushed it is rejected, naming the object, the volume and the image.
check_volume_kind() {
  local fixture=$1 kind=$2 req
  req=$(local_request "$fixture")
  add_image_volume "$req" model "$REG_ANON/ml/model:v1" IfNotPresent
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0

  req=$(local_request "$fixture")
  add_image_volume "$req" model "$REG_ANON/ml/model:v9" IfNotPresent
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "$kind team-a/web: 1 image will not pull" \
    "- volume \"model\" image \"$REG_ANON/ml/model:v9\": not found on registry $REG_ANON"
  assert_message_lacks "container \"app\"" "container \"sidecar\""
}

@test "Pod: a missing image volume is rejected, naming the volume" { check_volume_kind pod-create.json Pod; }
@test "Deployment: a missing image volume is rejected, naming the volume" { check_volume_kind deployment-create.json Deployment; }
@test "CronJob: a missing image volume is rejected, naming the volume" { check_volume_kind cronjob-create.json CronJob; }

@test "an image volume with pullPolicy Never is not looked up" {
  req=$(local_request deployment-create.json)
  add_image_volume "$req" model "$REG_ANON/ml/model:v9" Never
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_session_never_mentions "$SESSION" "ml/model"
  # the containers still were
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:1.4.2"
}

@test "an image volume without pullPolicy defaults as a container: IfNotPresent for a tag, Always for latest" {
  # a template a tool has not defaulted: the tag decides, as SetDefaults_ImageVolumeSource does.
  # A Node still lists both missing references: only an IfNotPresent pull can start from it.
  cluster=$(write_cluster_dir volume-nodes)
  node_yaml worker-cache-1 "$REG_ANON/ml/model:v9" "$REG_ANON/ml/model:latest" | cluster_add "$cluster" 20-nodes.yaml
  req=$(local_request deployment-create.json)
  add_image_volume "$req" model "$REG_ANON/ml/model:v9"
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster"
  assert_allowed
  assert_warning_contains "volume \"model\" image \"$REG_ANON/ml/model:v9\": not found (cached on nodes)" "before 1.35"
  jq -e '.auditAnnotations["resolvable-images/warnings"] | contains("worker-cache-1")' <<<"$output" >/dev/null ||
    _fail_with "the nodes are not in the audit annotation"

  req=$(local_request deployment-create.json)
  add_image_volume "$req" model "$REG_ANON/ml/model"
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster"
  assert_rejected
  assert_message_contains "volume \"model\" image \"$REG_ANON/ml/model\" ($REG_ANON/ml/model:latest)" "not found"
  assert_message_lacks "cached on"
}

@test "an invalid image volume reference is refused without a lookup, whatever its pullPolicy" {
  local policy
  for policy in IfNotPresent Never; do
    req=$(local_request pod-create.json)
    add_image_volume "$req" model "$REG_ANON/ML/Model:v1" "$policy"
    run -0 --separate-stderr run_recorded "$req"
    assert_rejected
    assert_message_contains "- volume \"model\" image \"$REG_ANON/ML/Model:v1\": invalid image reference" \
      'repository path component "ML" has uppercase letters' "InvalidImageName"
    assert_session_never_mentions "$SESSION" "ML/Model"
  done
}

@test "a reference shared by a container and an image volume is looked up once" {
  req=$(local_request pod-create.json)
  # the container's image, and the same image spelled with its default tag elsewhere
  add_image_volume "$req" same "$REG_ANON/team/app:1.4.2" IfNotPresent
  add_image_volume "$req" model "$REG_ANON/ml/model:v1" IfNotPresent
  add_image_volume "$req" model-again "$REG_ANON/ml/model:v1" Always
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_warning_count 0
  [ "$(session_count "$SESSION" OciManifestDigest "$REG_ANON/team/app:1.4.2")" = 1 ] ||
    { session_requests "$SESSION" >&2; false; }
  [ "$(session_count "$SESSION" OciManifestDigest "$REG_ANON/ml/model:v1")" = 1 ] ||
    { session_requests "$SESSION" >&2; false; }
  # migrate, app, busybox, model: four distinct references, four lookups
  assert_session_lookups "$SESSION" 4
}

@test "UPDATE: an unchanged image volume whose tag is gone does not block a scale-up; a new one is checked" {
  req=$(local_request deployment-update-scale.json)
  add_image_volume "$req" model "$REG_ANON/ml/model:deleted-since" IfNotPresent
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 0

  req=$(local_request deployment-update-scale.json)
  request_edit "$req" '.request.object.spec.template.spec.volumes = [{name: "model", image: {reference: "'"$REG_ANON"'/ml/model:v9"}}]'
  assert_loopback_only "$req"
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Deployment team-a/web" "volume \"model\" image \"$REG_ANON/ml/model:v9\"" "not found"
}

@test "pinDigests pins an image volume's reference (Pod and Deployment)" {
  req=$(local_request pod-create.json)
  add_image_volume "$req" model "$REG_ANON/ml/model:v1" IfNotPresent
  # the Pod already has the kube-api-access projected volume at index 0
  [ "$(jq -r '.request.object.spec.volumes[1].name' "$req")" = model ]
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  assert_patch_is "$(jq -cn --arg m "$REG_ANON/ml/model:v1@$(digest_of "$REG_ANON/ml/model:v1")" \
    --arg a "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")" \
    --arg b "$REG_ANON/library/busybox:1.36@$(digest_of "$REG_ANON/library/busybox:1.36")" \
    --arg i "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" '[
      {op: "replace", path: "/spec/volumes/1/image/reference", value: $m},
      {op: "replace", path: "/spec/containers/0/image", value: $a},
      {op: "replace", path: "/spec/containers/1/image", value: $b},
      {op: "replace", path: "/spec/initContainers/0/image", value: $i}]')"

  req=$(local_request deployment-create.json app.remove init-schema.remove)
  add_image_volume "$req" weights "$REG_ANON/ml/weights:v1" IfNotPresent
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/pin-digests.json"
  assert_allowed
  assert_patch_is "$(jq -cn --arg w "$REG_ANON/ml/weights:v1@$(digest_of "$REG_ANON/ml/weights:v1")" \
    --arg b "$REG_ANON/library/busybox:1.36@$(digest_of "$REG_ANON/library/busybox:1.36")" '[
      {op: "replace", path: "/spec/template/spec/volumes/0/image/reference", value: $w},
      {op: "replace", path: "/spec/template/spec/containers/0/image", value: $b}]')"
}

@test "requiredPlatforms: a mounted artifact or single manifest needs no platform; an index must offer one" {
  settings=$(write_settings volume-platforms '{"requiredPlatforms":["linux/amd64","linux/arm64"]}')
  # an artifact with no platform at all, and an arm64-only image: both mount on any node
  req=$(local_request deployment-create.json app.remove init-schema.remove "sidecar=$REG_ANON/test/multi:v1")
  add_image_volume "$req" weights "$REG_ANON/ml/weights:v1" IfNotPresent
  add_image_volume "$req" arm "$REG_ANON/test/arm:v1" IfNotPresent
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  # an artifact's config is not an image config: it is never read
  assert_session_never_mentions "$SESSION" "OciManifestAndConfig	$REG_ANON/ml/weights"

  # the same arm64-only image as a container's cannot run on amd64 nodes
  req=$(local_request deployment-create.json app.remove init-schema.remove "sidecar=$REG_ANON/test/arm:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"sidecar\"" "no manifest for a required platform"

  # an index is matched as for a container: arm/v7 nodes find no entry in amd64+arm64
  settings=$(write_settings volume-platforms-arm '{"requiredPlatforms":["linux/arm/v7"]}')
  req=$(local_request deployment-create.json app.remove init-schema.remove sidecar.remove)
  add_image_volume "$req" multi "$REG_ANON/test/multi:v1" IfNotPresent
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "- volume \"multi\" image \"$REG_ANON/test/multi:v1\"" \
    "no manifest for a required platform" "linux/arm/v7"
}
