#!/usr/bin/env bats
# Recorded host capability sessions: a replay answers like the live host, with no registry
# running, so kwctl users can replay the sessions in e2e-tests/sessions/ too.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; }
teardown_file() { load lib/common; registry_stop_all; }
setup() { load lib/common; require_host; }

# same_answer LIVE REPLAYED: the two AdmissionResponses decide alike, with the same message
# and warnings. One difference is expected: a session keeps only the first line of a host
# error (as kwctl's does), so where the live answer quotes the root cause of a "Caused by:"
# chain, e.g. " (Connection refused (os error 111))", the replayed text stops before it.
same_answer() {
  jq -e -n --argjson live "$1" --argjson replay "$2" '
    def texts: [.status.message // empty] + (.warnings // []);
    def alike($l; $r): $l == $r or ($l | startswith($r + " (")) or ($l | startswith($r + " …"));
    ($live.allowed == $replay.allowed) and ($live.status.code == $replay.status.code)
    and (($live | texts | length) == ($replay | texts | length))
    and ([$live | texts, ($replay | texts)] | transpose | all(alike(.[0]; .[1])))' >/dev/null
}

# replay NAME: replays sessions/NAME.yml for sessions/NAME.request.json with default settings.
replay() {
  policy_run "$SESSIONS_DIR/$1.request.json" \
    --replay-host-capabilities-interactions "$SESSIONS_DIR/$1.yml"
}

@test "committed sessions replay to their recorded answers, without any registry" {
  [ -z "$(registry_pids)" ]
  local name count=0
  for session in "$SESSIONS_DIR"/*.yml; do
    name=$(basename "$session" .yml)
    run -0 --separate-stderr replay "$name"
    [ "$(response_summary "$output")" = "$(response_summary "$(cat "$SESSIONS_DIR/$name.response.json")")" ] ||
      { echo "$name: replay differs from $name.response.json: $output"; return 1; }
    count=$((count + 1))
  done
  [ "$count" -ge 4 ]
}

@test "committed sessions: each records the decision its name says" {
  run -0 --separate-stderr replay resolved
  assert_allowed; assert_warning_count 0
  run -0 --separate-stderr replay missing-tag
  assert_rejected; assert_message_contains "container \"app\"" "127.0.0.1:5000/team/app:9.9.9" "not found on registry 127.0.0.1:5000"
  run -0 --separate-stderr replay unauthorized
  assert_allowed; assert_warning_contains "container \"app\"" "not authorized on registry 127.0.0.1:5001"
  run -0 --separate-stderr replay unreachable
  assert_allowed; assert_warning_contains "container \"sidecar\"" "registry unreachable on registry 127.0.0.1:5999"
}

@test "a replay of a fresh recording gives the live answer after the registries are gone" {
  scenario_setup_file
  local -a names=(resolved missing unauthorized private-with-creds unreachable)
  local -A requests=()
  requests[resolved]=$(local_request statefulset-create.json)
  requests[missing]=$(local_request statefulset-create.json "app=$REG_ANON/team/app:9.9.9" "init-schema=$REG_ANON/platform/nothing:1")
  requests[unauthorized]=$(local_request statefulset-create.json "sidecar=$REG_AUTH/private/app:v1")
  requests[private-with-creds]=$(local_request statefulset-create.json "sidecar=$REG_AUTH/private/app:v1")
  requests[unreachable]=$(local_request statefulset-create.json "app=$REG_DOWN/team/app:1.4.2")
  local config
  config=$(write_docker_config good "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD")
  local -A live=()
  for name in "${names[@]}"; do
    local -a extra=()
    [[ $name == private-with-creds ]] && extra=(--docker-config-json-path "$config")
    run -0 --separate-stderr policy_run "${requests[$name]}" "${extra[@]}" \
      --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/$name.yml"
    live[$name]=$output
    [ -s "$BATS_TEST_TMPDIR/$name.yml" ]
  done

  registry_stop_all
  [ -z "$(registry_pids)" ]

  for name in "${names[@]}"; do
    run -0 --separate-stderr policy_run "${requests[$name]}" \
      --replay-host-capabilities-interactions "$BATS_TEST_TMPDIR/$name.yml"
    same_answer "${live[$name]}" "$output" ||
      { printf '%s: live and replayed answers differ\nlive:   %s\nreplay: %s\n' "$name" "${live[$name]}" "$output"; return 1; }
  done
}
