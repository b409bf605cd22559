#!/usr/bin/env bats
# Short names on CRI-O nodes (docs/short-names.md): `shortNames` says
# what the nodes do with an image written without a registry, and the policy predicts it
# against real registries, on the test host and (E2E_HOST=kwctl) the real kwctl. The search
# registries are two local docker-registry instances: `anon` (the scenario's images) and
# `empty` (none); every settings file here also sets lookupRegistries to 127.0.0.1, so a short
# name can never send a lookup to Docker Hub, whatever the policy decided. What was (not)
# asked is read from recorded sessions.

bats_require_minimum_version 1.5.0

load lib/certainty_suite

setup_file() {
  certainty_setup_file || return 0
  registry_start anon empty
  E2E_SOURCES=$(write_sources_yaml short-names --insecure "$REG_ANON" --insecure "$REG_EMPTY")
  export E2E_SOURCES
}

run_recorded() {
  rm -f "$SESSION"
  policy_run "$@" --record-host-capabilities-interactions "$SESSION"
}

# short_pod IMAGE...: certainty_pod for short names, which name Docker Hub unless resolved: the
# images are allowed past the loopback guard, and every settings file below keeps lookups on
# 127.0.0.1 (lookupRegistries).
short_pod() {
  local E2E_ALLOW_IMAGES="$*"
  certainty_pod "$@"
}

# short_settings NAME JSON: settings with `shortNames` = JSON and lookups kept on loopback; a
# time budget a loaded machine cannot spend on two lookups (kwctl tries HTTPS twice before
# plain HTTP on each).
short_settings() {
  write_settings "$1" "$(jq -n --argjson s "$2" '{shortNames: $s, lookupRegistries: ["127.0.0.1"], timeBudgetMs: 10000}')"
}

@test "enforcing, two search registries, no alias: rejected as a short name the nodes cannot resolve, nothing asked" {
  req=$(short_pod team/app:1.4.2)
  settings=$(short_settings enforcing-two "$(jq -n --arg a "$REG_EMPTY" --arg b "$REG_ANON" \
    '{mode: "enforcing", searchRegistries: [$a, $b]}')")
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"c0\" image \"team/app:1.4.2\": short name the nodes cannot resolve:" \
    "\"team/app\" is a short name with no alias, and CRI-O's short-name-mode enforcing refuses to choose among the 2 unqualified-search registries ($REG_EMPTY, $REG_ANON)" \
    "Hint: write the image with its registry"
  assert_session_lookups "$SESSION" 0
}

@test "enforcing, one search registry: looked up there; the tag that exists is admitted, a missing one rejected" {
  settings=$(short_settings enforcing-one "$(jq -n --arg a "$REG_ANON" '{mode: "enforcing", searchRegistries: [$a]}')")
  req=$(short_pod team/app:1.4.2)
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:1.4.2"
  assert_session_lookups "$SESSION" 1

  req=$(short_pod team/app:9.9.9)
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"c0\" image \"team/app:9.9.9\" ($REG_ANON/team/app:9.9.9): not found on registry $REG_ANON"
}

@test "an alias wins over two search registries, even under enforcing" {
  settings=$(short_settings alias "$(jq -n --arg a "$REG_EMPTY" --arg b "$REG_ANON" \
    '{mode: "enforcing", searchRegistries: [$a, $b], aliases: {app: "\($b)/team/app"}}')")
  req=$(short_pod app:1.4.2)
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:1.4.2"
  assert_session_lookups "$SESSION" 1
}

@test "permissive: each search registry in order; found on the second, absent only when both say 404" {
  settings=$(short_settings permissive "$(jq -n --arg a "$REG_EMPTY" --arg b "$REG_ANON" \
    '{mode: "permissive", searchRegistries: [$a, $b]}')")
  req=$(short_pod team/app:1.4.2)
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  [[ "$(session_requests "$SESSION" | awk -F'\t' '$1 == "OciManifestDigest" { print $2 }' | tr '\n' ' ')" == "$REG_EMPTY/team/app:1.4.2 $REG_ANON/team/app:1.4.2 " ]] ||
    { session_requests "$SESSION" >&2; _fail_with "expected the empty registry, then the scenario's"; }

  req=$(short_pod team/app:9.9.9)
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"c0\" image \"team/app:9.9.9\" ($REG_EMPTY/team/app:9.9.9): not found on search registries $REG_EMPTY, $REG_ANON"
}

@test "shortNames with a search registry but mode docker is refused, naming the field" {
  req=$(local_request pod-create.json)
  run -1 --separate-stderr policy_run "$req" --settings-json "{\"shortNames\": {\"searchRegistries\": [\"$REG_ANON\"]}}"
  [[ "$stderr" == *"Provided settings are not valid"* ]] || _fail_with "not refused as settings"
  [[ "$stderr" == *"shortNames.searchRegistries: only CRI-O reads it: set mode to enforcing, permissive or disabled"* ]] ||
    _fail_with "the field is not named"
  run -1 --separate-stderr policy_run "$req" --settings-json '{"shortNames": {"mode": "enforcing", "searchRegistries": ["quay"]}}'
  [[ "$stderr" == *"shortNames.searchRegistries[0]: \"quay\" is not a registry host[:port]"* ]] || _fail_with "the entry is not named"
}
