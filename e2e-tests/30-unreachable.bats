#!/usr/bin/env bats
# A registry that cannot be asked: a warning by default (the pull may still work), a
# rejection or silence when the operator says so.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

@test "registry down: admitted with an 'unreachable' warning by default" {
  req=$(local_request deployment-create.json "app=$REG_DOWN/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "$REG_DOWN/team/app:1.4.2" \
    "registry unreachable on registry $REG_DOWN" "actions.unreachable"
}

@test "registry down with actions.unreachable=reject: rejected with the reason and a hint" {
  req=$(local_request deployment-create.json "app=$REG_DOWN/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/reject-unreachable.json"
  assert_rejected
  assert_message_contains "Deployment team-a/web" "container \"app\"" "$REG_DOWN/team/app:1.4.2" \
    "registry unreachable on registry $REG_DOWN" "Hint: $REG_DOWN could not be asked"
}

@test "registry down with actions.unreachable=allow: admitted silently" {
  req=$(local_request deployment-create.json "app=$REG_DOWN/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/allow-unreachable.json"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "absent and unreachable together: rejected for the absent image, warned for the other" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9" "sidecar=$REG_DOWN/library/busybox:1.36")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_ANON"
  assert_message_lacks "container \"sidecar\""
  assert_warning_contains "container \"sidecar\"" "registry unreachable on registry $REG_DOWN"
}

@test "actions.absent=warn: a missing tag becomes a warning" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$SCENARIOS_DIR/warn-absent.json"
  assert_allowed
  assert_warning_contains "container \"app\"" "not found on registry $REG_ANON" "actions.absent"
}

@test "a registry that accepts and never answers: the lookup times out into an 'unreachable' warning" {
  skip_on_kwctl "--oci-timeout-secs: kwctl has no time-out for OCI lookups; a registry that never answers hangs it"
  command -v python3 >/dev/null || skip "python3 is needed for the silent listener"
  blackhole_start
  sources=$(write_sources_yaml blackhole --insecure "$REG_BLACKHOLE")
  req=$(local_request deployment-create.json "app=$REG_BLACKHOLE/team/app:1.4.2" init-schema.remove sidecar.remove)
  local started=$SECONDS
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources" --oci-timeout-secs 2
  local elapsed=$((SECONDS - started))
  registry_stop blackhole
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "registry unreachable on registry $REG_BLACKHOLE" "actions.unreachable"
  ((elapsed < 20)) || _fail_with "took ${elapsed}s with a 2 s time-out"
}

@test "a hung registry spends the time budget: later lookups are reported as not checked, not waited for" {
  skip_on_kwctl "--oci-timeout-secs: kwctl has no time-out for OCI lookups; a registry that never answers hangs it"
  command -v python3 >/dev/null || skip "python3 is needed for the silent listener"
  blackhole_start
  sources=$(write_sources_yaml blackhole --insecure "$REG_BLACKHOLE")
  # Lookups run in the order of the references: a/… first (hangs), then b/… and c/….
  req=$(local_request deployment-create.json "init-schema=$REG_BLACKHOLE/a/migrate:1" \
    "app=$REG_BLACKHOLE/b/app:1" "sidecar=$REG_BLACKHOLE/c/busybox:1")
  local started=$SECONDS
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources" --oci-timeout-secs 2
  local elapsed=$((SECONDS - started))
  registry_stop blackhole
  assert_allowed
  assert_warning_count 3
  assert_warning_contains "init container \"init-schema\"" "registry unreachable" "timed out"
  assert_warning_contains "container \"app\"" "not checked in time" "timeBudgetMs"
  assert_warning_contains "container \"sidecar\"" "not checked in time"
  # one time-out, not three
  ((elapsed < 15)) || _fail_with "took ${elapsed}s: the later lookups were waited for"
}
