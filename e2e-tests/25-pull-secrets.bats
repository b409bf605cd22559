#!/usr/bin/env bats
# Pull secrets read from the cluster (--cluster-dir): the policy emulates the ServiceAccount
# plugin for templates, reports missing, mistyped and malformed secrets, and explains a 401 by
# what the pod's secrets cover. No secret byte may reach any output.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }

setup() {
  load lib/common
  require_host
  # Each test gets its own cluster: the standard ServiceAccounts plus what the test adds.
  E2E_CLUSTER="$BATS_TEST_TMPDIR/cluster"
  mkdir -p "$E2E_CLUSTER"
  cp "$(e2e_workdir)/cluster/default/"*.yaml "$E2E_CLUSTER/"
}

# no_secret_leak: neither the response nor the host's stderr holds the registry password.
no_secret_leak() {
  [[ "$output" != *"$REG_AUTH_PASSWORD"* && "${stderr:-}" != *"$REG_AUTH_PASSWORD"* ]] ||
    _fail_with "the registry password leaked"
  local encoded
  encoded=$(printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0)
  [[ "$output" != *"$encoded"* ]] || _fail_with "the base64 credentials leaked"
}

@test "template, default ServiceAccount without secrets, private image: 'no pull secret covers' warning" {
  req=$(local_request deployment-create.json "app=$REG_AUTH/private/app:v1")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" \
    "actions.uncoveredRegistry" "no pull secret in namespace team-a covers $REG_AUTH"
}

@test "actions.uncoveredRegistry=reject: the same request is rejected with the hint to add a secret" {
  req=$(local_request deployment-create.json "app=$REG_AUTH/private/app:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/reject-uncovered.json"
  assert_rejected
  assert_message_contains "container \"app\"" "not authorized on registry $REG_AUTH" "add an imagePullSecret for $REG_AUTH"
}

@test "template naming a ServiceAccount that does not exist: 'missing pull secret' warning" {
  req=$(local_request deployment-create.json)
  request_edit_pod_spec "$req" '.serviceAccountName = "builder"'
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "ServiceAccount \"team-a/builder\"" "missing pull secret" "actions.missingPullSecret" "does not exist"
}

@test "the template's ServiceAccount secrets are used: a covering secret changes the explanation" {
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: builder" "  namespace: team-a" \
    "imagePullSecrets:" "  - name: regcred" | cluster_add "$E2E_CLUSTER" 11-builder.yaml
  req=$(local_request statefulset-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.serviceAccountName = "builder"'
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" "actions.unauthorized" \
    "the pod's pull secrets cover $REG_AUTH"
  no_secret_leak
}

@test "Pod with a pull secret that does not exist: 'missing pull secret' warning" {
  req=$(local_request pod-create.json)
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "pull secret \"team-a/regcred\"" "missing pull secret" "actions.missingPullSecret"
}

@test "Pod with a pull secret of the wrong type: warning" {
  printf '%s\n' "apiVersion: v1" "kind: Secret" "metadata:" "  name: regcred" "  namespace: team-a" \
    "type: Opaque" "data:" "  token: $(printf 'not-a-docker-config' | base64 -w0)" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json)
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "pull secret \"team-a/regcred\"" "wrong type" "actions.wrongPullSecretType"
}

@test "Pod with a malformed pull secret: rejected, without quoting the secret" {
  printf '%s\n' "apiVersion: v1" "kind: Secret" "metadata:" "  name: regcred" "  namespace: team-a" \
    "type: kubernetes.io/dockerconfigjson" "data:" \
    "  .dockerconfigjson: $(printf '{"auths": {"%s": {"auth": "%s"' "$REG_AUTH" "$REG_AUTH_PASSWORD" | base64 -w0)" |
    cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json)
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "pull secret \"team-a/regcred\"" "malformed pull secret" ".dockerconfigjson"
  no_secret_leak
}

@test "Pod with a covering secret, checked with the policy server's credentials: explained, resolved once the host has them" {
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "actions.unauthorized" "this check used the policy server's credentials"
  no_secret_leak

  config=$(write_docker_config good "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD")
  run -0 --separate-stderr policy_run "$req" --docker-config-json-path "$config"
  assert_allowed
  assert_warning_count 0
}

@test "actions.unauthorized=reject rejects an image the pod's secrets cover but the check could not read" {
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/reject-unauthorized.json"
  assert_rejected
  assert_message_contains "container \"app\"" "not authorized on registry $REG_AUTH"
  no_secret_leak
}

@test "credentialedLookups on a host without oci/v1/resolve_images: falls back, says so, still rejects what is absent" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/credentialed-lookups.json"
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_ANON"
  assert_warning_contains "credentialed lookups (oci/v1/resolve_images) are not available here"
}

@test "Kubernetes reads not granted: one note, and the lookups go on" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  E2E_NO_CONTEXT=1 run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_ANON"
  assert_warning_count 1
  assert_warning_contains "pull secrets were not consulted"
}

@test "credentialedLookups on a host with oci/v1/resolve_images: the pod's own secret reads the private image" {
  skip_on_kwctl "oci/v1/resolve_images (--enable-resolve-images) is a proposed capability only the test host offers"
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1" "sidecar=$REG_AUTH/private/app:no-such-tag")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/credentialed-lookups.json" --enable-resolve-images
  # app resolves with the pod's credentials; the missing tag is a proven 404 behind them
  assert_rejected
  assert_message_contains "container \"sidecar\"" "$REG_AUTH/private/app:no-such-tag" "not found on registry $REG_AUTH"
  assert_message_lacks "container \"app\""
  assert_warning_count 0
  no_secret_leak
}

@test "credentialedLookups with a wrong password in the pod's secret: 'the pod's pull secrets were refused'" {
  skip_on_kwctl "oci/v1/resolve_images (--enable-resolve-images) is a proposed capability only the test host offers"
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" not-the-password | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/credentialed-lookups.json" --enable-resolve-images
  assert_allowed
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" "actions.unauthorized" \
    "the pod's pull secrets for $REG_AUTH were refused"
  [[ "$output" != *not-the-password* ]] || _fail_with "the password leaked"
}

@test "credentialedLookups: recorded sessions redact the credentials" {
  skip_on_kwctl "oci/v1/resolve_images (--enable-resolve-images) is a proposed capability only the test host offers"
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/credentialed-lookups.json" \
    --enable-resolve-images --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_warning_count 0
  run -0 grep -c 'ResolveImages\|resolve_images' "$BATS_TEST_TMPDIR/session.yml"
  run ! grep -F -e "$REG_AUTH_PASSWORD" "$BATS_TEST_TMPDIR/session.yml"
}
