#!/usr/bin/env bats
# The credential loop: the kubelet tries every credential, whatever the error. A registry that
# answers per user (lib/per_user_registry.py: Debian's docker-registry gives every user the
# same view, so it cannot) and a Pod with two pull secrets, checked with credentialed lookups
# (--enable-resolve-images): only the second secret sees the image -> found; a 401 and a 404
# -> absent, naming both; a 500 (or no answer) and a 404 -> a warning; only refusals ->
# unauthorized. Test host only: kwctl has no such capability, so these are skipped on it.

bats_require_minimum_version 1.5.0

setup() {
  load lib/common
  load lib/per_user_registry
  require_host
  skip_on_kwctl "oci/v1/resolve_images (--enable-resolve-images) is a proposed capability kwctl lacks"
  E2E_CLUSTER="$BATS_TEST_TMPDIR/cluster"
  mkdir -p "$E2E_CLUSTER"
  cp "$(write_cluster_dir default)/"*.yaml "$E2E_CLUSTER/"
}

teardown() {
  load lib/common
  registry_stop_all
}

# secrets_for FIRST [SECOND]: the pull secrets "first" (and "second") for the fake, with the
# credentials of those fixture users ("USER:wrong" for a wrong password).
secrets_for() {
  local name user password
  for name in first second; do
    [[ $# -gt 0 ]] || break
    user=${1%%:*} password=$(pur_password "${1%%:*}")
    [[ "$1" == *:wrong ]] && password=not-the-password-3v1
    pull_secret_yaml team-a "$name" "$REG_PUR" "$(pur_user "$user")" "$password"
    shift
  done | cluster_add "$E2E_CLUSTER" 10-secrets.yaml
}

# loop_run SECRET...: a Pod whose only container runs $REG_PUR/team/app:v1 with the pull
# secrets named (first, second), checked with credentialed lookups (settings: $LOOP_SETTINGS,
# default scenarios/credentialed-lookups.json).
loop_run() {
  local req sources refs
  req=$(request_with_images pod-create.json "app=$REG_PUR/team/app:v1" sidecar.remove init-schema.remove)
  refs=$(printf '%s\n' "$@" | jq -R '{name: .}' | jq -sc .)
  request_edit_pod_spec "$req" ".imagePullSecrets = $refs"
  sources=$(write_sources_yaml per-user --insecure "$REG_PUR")
  run -0 --separate-stderr policy_run "$req" --settings-path "${LOOP_SETTINGS:-$SCENARIOS_DIR/credentialed-lookups.json}" \
    --enable-resolve-images --sources-path "$sources"
}

# asked: the fixture users the fake saw for manifests, in order, without the host's first
# unauthenticated request of each run (that one only learns the Basic challenge).
asked() {
  per_user_registry_users pur | grep -vx anonymous | paste -sd' ' -
}

# no_credential_leak: no fixture credential of the fake in the response or the host's stderr.
no_credential_leak() {
  local user password
  while read -r user password; do
    [[ "$output" != *"$password"* && "${stderr:-}" != *"$password"* ]] || _fail_with "a password leaked"
    [[ "$output" != *"$user"* && "${stderr:-}" != *"$user"* ]] || _fail_with "a registry user name leaked"
    [[ "$output" != *"$(printf '%s:%s' "$user" "$password" | base64 -w0)"* ]] || _fail_with "a base64 auth leaked"
  done < <(pur_credentials)
  [[ "$output" != *not-the-password-3v1* ]] || _fail_with "the wrong password leaked"
}

@test "two pull secrets, only the second sees the image: found, admitted; the first alone: absent" {
  per_user_registry_start pur --image team/app:v1 bob=404 alice=sees:team/app
  secrets_for bob alice
  loop_run first second
  assert_allowed
  assert_warning_count 0
  [[ "$(asked)" == "bob alice" ]] || _fail_with "expected bob then alice to be asked, got: $(asked)"
  # no anonymous try after the credentials; an unauthenticated first request that learns the
  # challenge (the test host's) is allowed, not required (kwctl's client sends Basic at once)
  [[ "$(per_user_registry_users pur | paste -sd' ' -)" =~ ^(anonymous )?bob\ alice$ ]] ||
    _fail_with "unexpected requests: $(per_user_registry_users pur | paste -sd' ' -)"
  no_credential_leak

  # the same registry, with the first secret only: bob's 404 is the only answer
  loop_run first
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_PUR" "pull secret \"team-a/first\" got 404"
  no_credential_leak
}

@test "first pull secret refused (401), second gets 404: denied as absent, naming both" {
  per_user_registry_start pur --image team/app:v1 carol=401 bob=404
  secrets_for carol bob
  loop_run first second
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_PUR" \
    "every pull secret the kubelet would try failed: pull secret \"team-a/first\" was refused, pull secret \"team-a/second\" got 404"
  [[ "$(asked)" == "carol bob" ]] || _fail_with "expected carol then bob, got: $(asked)"
  no_credential_leak

  # a wrong password is a refusal too
  secrets_for alice:wrong bob
  loop_run first second
  assert_rejected
  assert_message_contains "not found on registry $REG_PUR" \
    "pull secret \"team-a/first\" was refused, pull secret \"team-a/second\" got 404"
  no_credential_leak
}

@test "first pull secret gets a 500, second a 404: a warning (unreachable), never absent" {
  per_user_registry_start pur --image team/app:v1 dave=500 bob=404
  secrets_for dave bob
  loop_run first second
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "registry unreachable on registry $REG_PUR" "actions.unreachable" \
    "pull secret \"team-a/first\" got no definitive answer, pull secret \"team-a/second\" got 404: not certain"
  [[ "$(asked)" == "dave bob" ]] || _fail_with "expected dave then bob, got: $(asked)"
  no_credential_leak
}

@test "first pull secret gets no answer, second a 404: a warning once time runs out, never absent" {
  per_user_registry_start pur --image team/app:v1 erin=hang bob=404
  secrets_for erin bob
  loop_run first second
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "registry unreachable on registry $REG_PUR" "actions.unreachable" \
    "pull secret \"team-a/first\" got no definitive answer, pull secret \"team-a/second\" was not tried in time"
  no_credential_leak

  # a warning is cut to 256 bytes; a rejection (actions.unreachable: reject) says it all
  LOOP_SETTINGS="$BATS_TEST_TMPDIR/reject-unreachable.json"
  echo '{"pullSecrets": {"credentialedLookups": true}, "actions": {"unreachable": "reject"}}' >"$LOOP_SETTINGS"
  loop_run first second
  assert_rejected
  assert_message_contains "container \"app\"" "registry unreachable on registry $REG_PUR" \
    "pull secret \"team-a/second\" was not tried in time: not certain, a later try might succeed (timed out after"
}

@test "every pull secret refused: the unauthorized warning, naming them" {
  per_user_registry_start pur --image team/app:v1 carol=401 alice=sees:team/app
  secrets_for carol alice:wrong
  loop_run first second
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_PUR" "actions.unauthorized" \
    "the pod's pull secrets for $REG_PUR were refused: pull secrets \"team-a/first\" and \"team-a/second\""
  no_credential_leak
}
