#!/usr/bin/env bats
# Private and TLS registries: the host's own credentials and trusted CAs decide what can be
# verified; what cannot be verified is a warning, never a rejection, by default.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

@test "private image, host without credentials: admitted with a 'not authorized' warning" {
  # The pod has no pull secret either: the default answer is "no pull secret covers" (see
  # 25-pull-secrets.bats for pods that have one).
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "$REG_AUTH/private/app:v1" \
    "not authorized on registry $REG_AUTH" "actions.uncoveredRegistry"
}

@test "private image, host given a Docker config: resolved, no warning" {
  config=$(write_docker_config good "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD")
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  run -0 --separate-stderr policy_run "$req" --docker-config-json-path "$config"
  assert_allowed
  assert_warning_count 0
}

@test "private image, wrong password in the Docker config: 'not authorized' warning" {
  config=$(write_docker_config wrong "$REG_AUTH" "$REG_AUTH_USER" not-the-password)
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  run -0 --separate-stderr policy_run "$req" --docker-config-json-path "$config"
  assert_allowed
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH"
}

@test "a 401 never counts as absent: missing tag on the auth registry without credentials warns" {
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:no-such-tag")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "$REG_AUTH/private/app:no-such-tag" "not authorized"
}

@test "missing tag on the auth registry with credentials is rejected as not found" {
  config=$(write_docker_config good "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD")
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:no-such-tag")
  run -0 --separate-stderr policy_run "$req" --docker-config-json-path "$config"
  assert_rejected
  assert_message_contains "container \"app\"" "$REG_AUTH/private/app:no-such-tag" "not found on registry $REG_AUTH"
}

@test "actions.uncoveredRegistry=reject turns the warning into a rejection" {
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/reject-uncovered.json"
  assert_rejected
  assert_message_contains "container \"app\"" "not authorized on registry $REG_AUTH" "imagePullSecret"
  assert_warning_count 0
}

@test "TLS registry with its CA in sources.yaml: resolved" {
  sources=$(write_sources_yaml tls-ca --insecure "$REG_ANON" --ca "$REG_TLS" "$REG_TLS_CA")
  req=$(local_request pod-create.json "app=$REG_TLS/secure/app:v1")
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources"
  assert_allowed
  assert_warning_count 0
}

@test "TLS registry with its CA: a missing tag is rejected" {
  sources=$(write_sources_yaml tls-ca --insecure "$REG_ANON" --ca "$REG_TLS" "$REG_TLS_CA")
  req=$(local_request pod-create.json "app=$REG_TLS/secure/app:v2")
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources"
  assert_rejected
  assert_message_contains "$REG_TLS/secure/app:v2" "not found on registry $REG_TLS"
}

@test "TLS registry without its CA: admitted with an 'unreachable' warning" {
  sources=$(write_sources_yaml no-ca --insecure "$REG_ANON")
  req=$(local_request pod-create.json "app=$REG_TLS/secure/app:v1")
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources"
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "registry unreachable on registry $REG_TLS" "actions.unreachable"
}
