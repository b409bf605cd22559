#!/usr/bin/env bats
# Registry mirrors (settings.registries, shaped like containers-registries.conf): lookups follow
# the chain a node follows, mirrors first, then the primary location; "absent" needs every
# location to say so. The mirror is a second local registry serving the primary under cache/.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  scenario_setup_file
  host_ready || return 0
  registry_start anon mirror
  push_image "$(build_image mirror-only)" mirror cache/team/app:mirror-only
  push_image "$(build_image std)" mirror cache/team/app:1.4.2
  E2E_SOURCES=$(write_sources_yaml mirrors --insecure "$REG_ANON" --insecure "$REG_AUTH" \
    --insecure "$REG_DOWN" --insecure "$REG_MIRROR")
  export E2E_SOURCES
}
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

# mirror_settings NAME JSON-MIRRORS: settings whose only rule sends $REG_ANON through the
# given mirrors (a JSON array); prints the file.
mirror_settings() {
  write_settings "$1" "$(jq -n --arg p "$REG_ANON" --argjson m "$2" '{registries: [{prefix: $p, mirrors: $m}]}')"
}

@test "an image only the mirror has is resolved there, and the audit annotation says so" {
  settings=$(mirror_settings mirror "[{\"location\": \"$REG_MIRROR/cache\"}]")
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  jq -e --arg m "$REG_MIRROR/cache/team/app:mirror-only" \
    '.auditAnnotations["resolvable-images/resolved-from-mirror"] | contains($m)' <<<"$output" >/dev/null ||
    _fail_with "no resolved-from-mirror annotation naming $REG_MIRROR/cache/team/app:mirror-only"
}

@test "an image only the primary has is resolved after the mirror's 404" {
  settings=$(mirror_settings mirror "[{\"location\": \"$REG_MIRROR/cache\"}]")
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:1.5.0")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  jq -e '(.auditAnnotations // {})["resolvable-images/resolved-from-mirror"] // "" | contains("1.5.0") | not' <<<"$output" >/dev/null ||
    _fail_with "1.5.0 came from the primary, not the mirror"
}

@test "absent everywhere: rejected, naming every location and what it said" {
  settings=$(mirror_settings mirror "[{\"location\": \"$REG_MIRROR/cache\"}]")
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"app\"" "not found" \
    "mirror $REG_MIRROR/cache/team/app:9.9.9: not found" "primary $REG_ANON/team/app:9.9.9: not found"
}

@test "a mirror that is down does not matter when the primary has the image" {
  settings=$(write_settings down-mirror "$(jq -n --arg p "$REG_ANON" --arg m "$REG_DOWN/cache" '{registries: [{prefix: $p, mirrors: [{location: $m}]}]}')")
  req=$(local_request deployment-create.json)
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
}

@test "mirror down and primary absent is uncertain: a warning, not a rejection" {
  settings=$(write_settings down-mirror "$(jq -n --arg p "$REG_ANON" --arg m "$REG_DOWN/cache" '{registries: [{prefix: $p, mirrors: [{location: $m}]}]}')")
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_contains "container \"app\"" "registry unreachable" "mirror $REG_DOWN/cache/team/app:9.9.9"
}

@test "pullFromMirror digest-only: a tag skips the mirror, a digest uses it" {
  settings=$(mirror_settings digest-only "[{\"location\": \"$REG_MIRROR/cache\", \"pullFromMirror\": \"digest-only\"}]")
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_ANON"
  assert_message_lacks "$REG_MIRROR"

  digest=$(digest_of "$REG_MIRROR/cache/team/app:mirror-only")
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app@$digest")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
}

@test "a rule's location rewrites the primary: the written registry is never asked" {
  settings=$(write_settings rewrite "$(jq -n --arg p "$REG_DOWN/team" --arg l "$REG_ANON/team" '{registries: [{prefix: $p, location: $l}]}')")
  req=$(local_request deployment-create.json "app=$REG_DOWN/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
}

@test "an invalid mirror location is refused when the policy loads, naming the field" {
  req=$(local_request deployment-create.json)
  run -1 --separate-stderr policy_run "$req" --settings-json '{"registries":[{"prefix":"docker.io","mirrors":[{"location":"https://mirror.internal"}]}]}'
  [[ "$stderr" == *"Provided settings are not valid"* && "$stderr" == *"registries[0].mirrors[0].location"* ]]
}
