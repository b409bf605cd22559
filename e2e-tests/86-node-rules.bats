#!/usr/bin/env bats
# The node's exact rules, against real registries and Node fixtures: platforms as
# containerd's matcher takes them (arm/v6 serves an arm/v7 node; amd64/v3 does not serve a
# baseline amd64 node; an index entry without `platform` judged by its config), `cluster`
# narrowed as the scheduler narrows it (node affinity, taints and tolerations, a pod that fits
# no Node), credentials sent to mirrors as the kubelet and containerd send them (the mirror's
# own log says which user it saw; a Docker Hub secret reaches a Docker Hub mirror), pins only
# where a pull by digest finds the digest, and the mirror rules of containers-registries.conf
# (a `*.domain` prefix keeps the port; a literal and a wildcard prefix of the same length:
# the first in sorted order; a single-label `location` is refused).
#
# The wildcard scenarios use `*.localhost` and `*.d.localhost`: the image is written as
# e2e.localhost:PORT/… (x.d.localhost:PORT/…), which nothing resolves here, so the rules also
# rewrite the primary `location` to loopback: the written name is never contacted. Likewise
# the Docker Hub scenario rewrites docker.io's primary to a local registry.
#
# Registries: anon (the standard images, and the primaries), mirror (anonymous, a tag-only
# mirror with other digests), authmirror (htpasswd, the same user as auth, logging every
# request with its user).

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  load lib/node_rules
  scenario_setup_file
  host_ready || return 0
  registry_start anon mirror
  nr_registry_start_logged auth authmirror

  # Platforms: arm/v6 (and amd64); amd64/v3 only; amd64/v3 plus an entry whose platform is
  # only in its config (arm64) and that entry's attestation; an amd64-only index.
  push_image "$(nr_build_index arm-v6 linux/amd64 linux/arm/v6)" anon nr/arm-v6:v1 --all
  push_image "$(nr_build_index amd64-v3 linux/amd64/v3)" anon nr/amd64-v3:v1 --all
  push_image "$(nr_build_index no-platform linux/amd64/v3 -linux/arm64 attestation)" anon nr/no-platform:v1 --all
  push_image "$(build_index_for nr-amd64-only amd64)" anon nr/amd64-only:v1 --all

  # Credentials: nr/private:v1 only on the authenticated mirror, whose htpasswd has the one
  # user; nr/private:v2 only on the primary ($REG_AUTH, the same user).
  push_image "$(build_image nr-private)" authmirror nr/private:v1
  push_image "$(build_image nr-private-v2)" auth nr/private:v2

  # Pinning: the tag-only mirror's tag has another digest than the primary's. pin-unsafe: the
  # primary lacks the mirror's digest; pin-safe: the primary has it too, by digest only.
  push_image "$(build_image nr-pin-unsafe-primary)" anon nr/pin-unsafe:v1
  push_image "$(build_image nr-pin-unsafe-mirror)" mirror nr/pin-unsafe:v1
  push_image "$(build_image nr-pin-safe-primary)" anon nr/pin-safe:v1
  push_image "$(build_image nr-pin-safe-mirror)" mirror nr/pin-safe:v1
  nr_push_by_digest "$(build_image nr-pin-safe-mirror)" anon nr/pin-safe >/dev/null

  E2E_SOURCES=$(write_sources_yaml node-rules --insecure "$REG_ANON" --insecure "$REG_AUTH" \
    --insecure "$REG_DOWN" --insecure "$REG_MIRROR" --insecure "$REG_AUTHMIRROR" \
    --insecure "localhost:${REG_ANON##*:}")
  export E2E_SOURCES
}
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; load lib/node_rules; require_host; }

# pod_running IMAGE: a Pod (team-a/web) whose only container, "app", runs IMAGE.
pod_running() {
  local_request pod-create.json "app=$1" init-schema.remove sidecar.remove
}

# --- platforms: containerd's matcher -------------------------------------------------------

@test "arm/v6 in the index serves a linux/arm/v7 requirement (containerd runs v6 on v7); arm/v5 is not served" {
  req=$(pod_running "$REG_ANON/nr/arm-v6:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-arm-v7.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0

  # The reverse does not hold: a v5 node cannot run a v6 image.
  run -0 --separate-stderr policy_run "$req" --settings-json '{"requiredPlatforms":["linux/arm/v5"]}'
  assert_rejected
  assert_message_contains \
    "container \"app\" image \"$REG_ANON/nr/arm-v6:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm/v5; the image has linux/amd64, linux/arm/v6."
}

@test "an index with only linux/amd64/v3 does not serve linux/amd64 (the baseline level); amd64/v4 nodes run it" {
  req=$(pod_running "$REG_ANON/nr/amd64-v3:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-amd64.json"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/nr/amd64-v3:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/amd64; the image has linux/amd64/v3." \
    "Hint: build and push the image for the missing platforms"
  assert_no_patch

  run -0 --separate-stderr policy_run "$req" --settings-json '{"requiredPlatforms":["linux/amd64/v4"]}'
  assert_allowed
  assert_warning_count 0
}

@test "an index entry without a platform is judged by its config; its attestation stays out of the message" {
  req=$(pod_running "$REG_ANON/nr/no-platform:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-arm64.json" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  # arm64 is only in the config of the entry without a platform: it was read, by digest.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestAndConfig \
    "$REG_ANON/nr/no-platform@$(nr_entry_digest no-platform -linux/arm64)"

  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/platforms-amd64.json"
  assert_rejected
  assert_message_contains \
    "container \"app\" image \"$REG_ANON/nr/no-platform:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/amd64; the image has linux/amd64/v3, linux/arm64."
  assert_message_lacks "unknown"
}

# --- cluster: the Nodes a pod can land on ----------------------------------------------------

@test "cluster: required node affinity kubernetes.io/arch In [amd64] narrows the Nodes to amd64" {
  cluster=$(nr_cluster affinity nodes-amd64-arm64.yaml)
  req=$(pod_running "$REG_ANON/nr/amd64-only:v1")
  # Without the affinity, the arm64 Node counts: rejected.
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_rejected
  assert_message_contains "no manifest for linux/arm64; the image has linux/amd64."

  request_edit_pod_spec "$req" '.affinity = {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {
    nodeSelectorTerms: [{matchExpressions: [{key: "kubernetes.io/arch", operator: "In", values: ["amd64"]}]}]}}}'
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "cluster: an arm64 Node tainted NoSchedule is not counted for a pod that does not tolerate it" {
  cluster=$(nr_cluster tainted nodes-amd64-arm64-tainted.yaml)
  req=$(pod_running "$REG_ANON/nr/amd64-only:v1")
  # The fixture's only tolerations are the not-ready/unreachable ones every Pod gets.
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "cluster: the same pod tolerating the arm64 taint can land there, and is rejected for arm64" {
  cluster=$(nr_cluster tainted nodes-amd64-arm64-tainted.yaml)
  req=$(pod_running "$REG_ANON/nr/amd64-only:v1")
  request_edit_pod_spec "$req" '.tolerations += [{key: "kubernetes.io/arch", operator: "Equal", value: "arm64", effect: "NoSchedule"}]'
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/nr/amd64-only:v1\": no manifest for a required platform on registry $REG_ANON: no manifest for linux/arm64; the image has linux/amd64."
}

@test "cluster: a pod that fits no Node is admitted with a warning saying so" {
  cluster=$(nr_cluster no-fit nodes-amd64-arm64.yaml)
  req=$(pod_running "$REG_ANON/nr/amd64-only:v1")
  request_edit_pod_spec "$req" '.nodeSelector = {pool: "gpu"}'
  run -0 --separate-stderr policy_run "$req" --cluster-dir "$cluster" --settings-path "$SCENARIOS_DIR/platforms-cluster.json"
  assert_allowed
  assert_no_message
  assert_warning_count 1
  assert_warning_contains "the pod fits no Node of the cluster"
}

# --- credentials on mirrors (test host: oci/v1/resolve_images) -------------------------------

# credentialed_mirror_settings: credentialed lookups, and $REG_AUTH mirrored by $REG_AUTHMIRROR.
credentialed_mirror_settings() {
  write_settings credentialed-mirror "$(jq -n --arg p "$REG_AUTH" --arg m "$REG_AUTHMIRROR" \
    '{pullSecrets: {credentialedLookups: true}, registries: [{prefix: $p, mirrors: [{location: $m}]}]}')"
}

# secret_for HOST:PORT: a cluster for this test whose Secret team-a/regcred has the auth
# registries' credentials for HOST:PORT only; prints the cluster directory.
secret_for() {
  local cluster
  cluster=$(write_cluster_dir "secret-$BATS_TEST_NUMBER")
  pull_secret_yaml team-a regcred "$1" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$cluster" 10-secret.yaml
  printf '%s\n' "$cluster"
}

# run_with_secret_for HOST:PORT REQUEST SETTINGS: runs REQUEST with its pods naming the pull
# secret regcred, which holds the auth registries' credentials for HOST:PORT only, with
# SETTINGS and oci/v1/resolve_images; the session goes to $SESSION, and MARK is where the
# authenticated mirror's log stood before the run.
run_with_secret_for() {
  local cluster
  cluster=$(secret_for "$1")
  request_edit_pod_spec "$2" '.imagePullSecrets = [{name: "regcred"}]'
  SESSION="$BATS_TEST_TMPDIR/session.yml"
  MARK=$(nr_log_mark authmirror)
  run -0 --separate-stderr policy_run "$2" --cluster-dir "$cluster" --settings-path "$3" \
    --enable-resolve-images --record-host-capabilities-interactions "$SESSION"
}

@test "a pull secret for the primary's name is sent to its mirror too: the mirror saw that user" {
  skip_on_kwctl "reads the credentials in the test host's recorded session; kwctl records the Secret as the API server answered it"
  # app: only the mirror has it; sidecar: only the primary, so the mirror answers 404 for it.
  req=$(local_request pod-create.json "app=$REG_AUTH/nr/private:v1" "sidecar=$REG_AUTH/nr/private:v2" init-schema.remove)
  run_with_secret_for "$REG_AUTH" "$req" "$(credentialed_mirror_settings)"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_AUTH/nr/private:v1: $REG_AUTHMIRROR/nr/private:v1"
  nr_no_secret_leak
  # What the policy gave the host: the secret, for the mirror's lookups as for the primary's.
  [[ "$(nr_session_credentials "$SESSION" "$REG_AUTHMIRROR/nr/private:v1")" == 1 ]] ||
    _fail_with "the mirror's lookup of v1 did not carry the one credential"
  [[ "$(nr_session_credentials "$SESSION" "$REG_AUTHMIRROR/nr/private:v2")" == 1 ]] ||
    _fail_with "the mirror's lookup of v2 did not carry the one credential"
  # The mirror's own log. docker-registry 2.8 names the user (auth.user.name) on error
  # responses only: the 404 for v2 says who asked; the 200 for v1 was an "authorized request",
  # which its htpasswd, with that one user, grants to no one else; no credential was refused.
  # (A registry's first request goes without credentials and learns the challenge from its
  # 401, as containerd's resolver does: that "error authorizing context" is no refusal.)
  log=$(nr_log_since authmirror "$MARK" nr/private)
  grep -F "http.request.uri=/v2/nr/private/manifests/v1" <<<"$log" | grep -qF 'msg="authorized request"' ||
    _fail_with "the mirror did not authorize a request for nr/private:v1"
  grep -F "http.request.uri=/v2/nr/private/manifests/v2" <<<"$log" | grep -qF 'err.code="manifest unknown"' ||
    _fail_with "the mirror was not asked for nr/private:v2"
  ! grep -qF "authentication failure" <<<"$log" || _fail_with "the mirror refused the credential for nr/private"
  [[ "$(nr_users_seen authmirror "$MARK" nr/private)" == "$REG_AUTH_USER" ]] ||
    _fail_with "the mirror did not see (only) the secret's user: $(nr_users_seen authmirror "$MARK" nr/private | wc -l) user(s)"
}

@test "a pull secret for the mirror's host alone is not sent there: not authorized on the registry and its mirrors" {
  skip_on_kwctl "reads the credentials in the test host's recorded session; kwctl records the Secret as the API server answered it"
  req=$(pod_running "$REG_AUTH/nr/private:v1")
  run_with_secret_for "$REG_AUTHMIRROR" "$req" "$(credentialed_mirror_settings)"
  # A node finds no credential by the image's name and pulls anonymously from both: refused,
  # which is uncertain (actions.unauthorized: warn), not a rejection.
  assert_allowed
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH and its mirrors"
  assert_only_whole_warnings_annotation
  nr_no_secret_leak
  # No credential for either location of the chain, and the mirror was asked anonymously:
  # refused, and never as a user.
  [[ "$(nr_session_credentials "$SESSION" "$REG_AUTHMIRROR/nr/private:v1")" == 0 ]] ||
    _fail_with "the mirror's lookup carried a credential"
  [[ "$(nr_session_credentials "$SESSION" "$REG_AUTH/nr/private:v1")" == 0 ]] ||
    _fail_with "the primary's lookup carried a credential"
  log=$(nr_log_since authmirror "$MARK" nr/private)
  grep -F "http.request.uri=/v2/nr/private/manifests/v1" <<<"$log" | grep -qF "error authorizing context" ||
    _fail_with "the mirror was not asked for nr/private:v1"
  ! grep -qF 'msg="authorized request"' <<<"$log" || _fail_with "the mirror authorized a request: the mirror-only secret was sent"
  [[ -z "$(nr_users_seen authmirror "$MARK" nr/private)" ]] || _fail_with "the mirror saw a user: the mirror-only secret was sent"
}

@test "a Docker Hub secret (https://index.docker.io/v1/) is sent to a Docker Hub mirror" {
  skip_on_kwctl "reads the credentials in the test host's recorded session; kwctl records the Secret as the API server answered it"
  # docker.io's chain: the authenticated mirror, then a primary rewritten to $REG_AUTH, so
  # Docker Hub itself is never contacted.
  settings=$(write_settings docker-hub-mirror "$(jq -n --arg l "$REG_AUTH" --arg m "$REG_AUTHMIRROR" \
    '{pullSecrets: {credentialedLookups: true}, registries: [{prefix: "docker.io", location: $l, mirrors: [{location: $m}]}]}')")
  req=$(E2E_ALLOW_IMAGES="nr/private:v1" pod_running "nr/private:v1")
  run_with_secret_for "https://index.docker.io/v1/" "$req" "$settings"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" nr/private:v1: $REG_AUTHMIRROR/nr/private:v1"
  nr_no_secret_leak
  [[ "$(nr_session_credentials "$SESSION" "$REG_AUTHMIRROR/nr/private:v1")" == 1 ]] ||
    _fail_with "the mirror's lookup did not carry the Docker Hub credential"
  log=$(nr_log_since authmirror "$MARK" nr/private)
  grep -F "http.request.uri=/v2/nr/private/manifests/v1" <<<"$log" | grep -qF 'msg="authorized request"' ||
    _fail_with "the mirror did not authorize a request for nr/private:v1"
  assert_session_never_mentions "$SESSION" "docker.io"
}

# --- pinning through a tag-only mirror -------------------------------------------------------

# tag_only_pin_settings: pinDigests, and $REG_ANON mirrored by the tag-only $REG_MIRROR.
tag_only_pin_settings() {
  write_settings tag-only-pin "$(jq -n --arg p "$REG_ANON" --arg m "$REG_MIRROR" \
    '{pinDigests: true, registries: [{prefix: $p, mirrors: [{location: $m, pullFromMirror: "tag-only"}]}]}')"
}

@test "pinDigests: a digest from a tag-only mirror the primary lacks is not pinned, and the annotation says why" {
  mirror_digest=$(digest_of "$REG_MIRROR/nr/pin-unsafe:v1")
  [[ "$mirror_digest" != "$(digest_of "$REG_ANON/nr/pin-unsafe:v1")" ]]
  req=$(pod_running "$REG_ANON/nr/pin-unsafe:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$(tag_only_pin_settings)" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_no_patch
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/nr/pin-unsafe:v1: $REG_MIRROR/nr/pin-unsafe:v1"
  assert_annotation_is resolvable-images/not-pinned \
    "container \"app\" $REG_ANON/nr/pin-unsafe:v1: a pull by digest skips the tag-only mirror $REG_MIRROR and asks $REG_ANON/nr/pin-unsafe@$mirror_digest first, which does not have $mirror_digest (not found)"
  # The one more lookup: the mirror's digest, on the primary.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_ANON/nr/pin-unsafe@$mirror_digest"
}

@test "pinDigests: when the primary has the tag-only mirror's digest too, the image is pinned to it" {
  mirror_digest=$(digest_of "$REG_MIRROR/nr/pin-safe:v1")
  [[ "$mirror_digest" != "$(digest_of "$REG_ANON/nr/pin-safe:v1")" ]]
  req=$(pod_running "$REG_ANON/nr/pin-safe:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$(tag_only_pin_settings)"
  assert_allowed
  assert_warning_count 0
  assert_patch_is "$(jq -n --arg app "$REG_ANON/nr/pin-safe:v1@$mirror_digest" '[
      {op: "replace", path: "/spec/containers/0/image", value: $app}]')"
  [[ "$(jq -r '(.auditAnnotations // {})["resolvable-images/not-pinned"] // ""' <<<"$output")" == "" ]] ||
    _fail_with "expected no not-pinned annotation"
}

# --- mirror rules ----------------------------------------------------------------------------

@test "a *.domain prefix keeps the registry's port in the rewritten mirror and primary locations" {
  port=${REG_ANON##*:}
  image="e2e.localhost:$port/team/app:1.4.2"
  settings=$(write_settings wildcard-port \
    '{"registries":[{"prefix":"*.localhost","location":"127.0.0.1","mirrors":[{"location":"localhost"}]}]}')
  req=$(E2E_ALLOW_IMAGES="$image" pod_running "$image")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  # e2e.localhost:PORT/team/app through *.localhost -> localhost: the rest, ":PORT/team/app", is kept.
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $image: localhost:$port/team/app:1.4.2"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "e2e.localhost"

  # Absent: both locations, each with the port, are named; the written name is never asked.
  image="e2e.localhost:$port/team/app:9.9.9"
  req=$(E2E_ALLOW_IMAGES="$image" pod_running "$image")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/absent.yml"
  assert_rejected
  assert_message_contains "container \"app\" image \"$image\": not found" \
    "mirror localhost:$port/team/app:9.9.9: not found" "primary 127.0.0.1:$port/team/app:9.9.9: not found"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/absent.yml" "e2e.localhost"
}

@test "a literal and a *.domain prefix of the same length: the first in sorted order (the wildcard) wins" {
  port=${REG_ANON##*:}
  image="x.d.localhost:$port/team/app:1.4.2"
  # Both rewrite to loopback; only the chosen rule's location is asked.
  settings=$(write_settings wildcard-order \
    '{"registries":[{"prefix":"x.d.localhost","location":"localhost"},{"prefix":"*.d.localhost","location":"127.0.0.1"}]}')
  req=$(E2E_ALLOW_IMAGES="$image" pod_running "$image")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_warning_count 0
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "127.0.0.1:$port/team/app:1.4.2"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "localhost:$port"
}

@test "a single-label location (registry) is refused when the policy loads, naming registries[0].location" {
  req=$(pod_running "$REG_ANON/team/app:1.4.2")
  run -1 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/invalid-location-single-label.json"
  [[ "$stderr" == *"Provided settings are not valid"* && "$stderr" == *"registries[0].location"* ]] ||
    _fail_with "expected the settings to be refused, naming registries[0].location"
  [[ "$stderr" == *'"registry" does not start with a registry host'* ]] ||
    _fail_with "expected the reason: not a registry host"
}
