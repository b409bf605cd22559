#!/usr/bin/env bats
# Settings: exemptions, invalid image references, and settings the policy refuses to load.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

@test "an exempt namespace is not checked" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/exempt-namespace.json"
  assert_allowed
  assert_warning_count 0

  # the same request in another namespace is
  request_in_namespace "$req" team-b
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/exempt-namespace.json"
  assert_rejected
  assert_message_contains "Deployment team-b/web" "not found"
}

@test "an image matching an exemptImages glob is not checked, the others are" {
  req=$(local_request deployment-create.json "app=$REG_ANON/exempt/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/exempt-images.json"
  assert_allowed
  assert_warning_count 0

  req=$(local_request deployment-create.json "app=$REG_ANON/exempt/app:9.9.9" "sidecar=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/exempt-images.json"
  assert_rejected
  assert_message_contains "container \"sidecar\"" "$REG_ANON/team/app:9.9.9"
  assert_message_lacks "container \"app\""

  # without the exemption the same image is rejected
  req=$(local_request deployment-create.json "app=$REG_ANON/exempt/app:9.9.9")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "$REG_ANON/exempt/app:9.9.9" "not found"
}

# check_invalid IMAGE REASON: IMAGE in container "app" is rejected as an invalid reference
# with REASON, before any lookup (these images never reach the host).
check_invalid() {
  local image=$1 reason=$2 req
  req=$(E2E_ALLOW_IMAGES="$image" local_request pod-create.json "app=$image")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Pod team-a/web" "container \"app\" image \"$image\"" "invalid image reference" "$reason" "InvalidImageName"
}

@test "invalid reference: empty path component" {
  check_invalid "Registry.Example.com//x" "the repository path has an empty component"
}

@test "invalid reference: uppercase repository" {
  check_invalid "$REG_ANON/Team/App:1" 'repository path component "Team" has uppercase letters'
}

@test "invalid reference: uppercase repository on Docker Hub" {
  check_invalid "docker.io/Foo/bar:1" 'repository path component "Foo" has uppercase letters'
}

@test "invalid reference: a bare 64-hex name" {
  check_invalid "$(printf 'ab%.0s' {1..32})" "a bare 64-digit hex string is an image ID"
}

@test "invalid reference: a bad tag" {
  check_invalid "$REG_ANON/team/app:-bad" 'tag "-bad" is not letters, digits'
}

@test "invalid settings: an unknown field is refused, naming it" {
  req=$(local_request pod-create.json)
  run -1 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/invalid-unknown-field.json"
  [[ "$stderr" == *"Provided settings are not valid"* ]]
  [[ "$stderr" == *"exemptNamespace"* ]]
}

@test "invalid settings: an unknown action is refused, naming the field and the choices" {
  req=$(local_request pod-create.json)
  run -1 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/invalid-action.json"
  [[ "$stderr" == *"Provided settings are not valid"* ]]
  [[ "$stderr" == *"actions.absent"* && "$stderr" == *"block"* ]]
}

@test "invalid settings: a misspelt action key is refused, naming it" {
  req=$(local_request pod-create.json)
  run -1 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/invalid-action-key.json"
  [[ "$stderr" == *"Provided settings are not valid"* && "$stderr" == *"absnet"* ]]
}

@test "invalid settings given inline are refused too" {
  req=$(local_request pod-create.json)
  run -1 --separate-stderr policy_run "$req" --settings-json '{"exemptImages":["[unclosed"]}'
  [[ "$stderr" == *"Provided settings are not valid"* && "$stderr" == *"exemptImages[0]"* ]]
}
