#!/usr/bin/env bats
# Registry mirrors (settings.registries, shaped like containers-registries.conf): lookups follow
# the chain a node follows, mirrors first, then the primary location (never a blocked one);
# "absent" needs every location to say so. The mirror is a second local registry serving the primary under cache/.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  scenario_setup_file
  host_ready || return 0
  registry_start anon mirror
  push_image "$(build_image mirror-only)" mirror cache/team/app:mirror-only
  push_image "$(build_image std)" mirror cache/team/app:1.4.2
  # At the mirror's root: a tag and an image by digest that the primary lacks; and under
  # dockerhub/, as a containerd `override_path` host serves the upstream.
  push_image "$(build_image mirror-only)" mirror team/app:mirror-only
  push_image "$(build_image mirror-digest)" mirror team/app:digest-on-mirror
  push_image "$(build_image mirror-path)" mirror dockerhub/team/app:under-path
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

# Exact annotations and messages, and what was asked, from a recorded session: the mirror
# serves the primary at its root (no cache/ path).

@test "an image only on the mirror is admitted, and the annotation names the mirror" {
  settings=$(mirror_settings mirror-all "[{\"location\": \"$REG_MIRROR\", \"pullFromMirror\": \"all\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  # Only "app" came from the mirror: the other containers' images are on the upstream only,
  # which the chain reaches after the mirror's 404.
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app:mirror-only: $REG_MIRROR/team/app:mirror-only"
  # The chain stops at the first location that has the image: the upstream is not asked for
  # it; the sidecar's image, missing on the mirror, is then asked at the upstream.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_MIRROR/team/app:mirror-only"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "$REG_ANON/team/app:mirror-only"
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_MIRROR/library/busybox:1.36"
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_ANON/library/busybox:1.36"
}

@test "a digest-only mirror is skipped for a tag; the message names only the primary" {
  settings=$(mirror_settings mirror-digest-only "[{\"location\": \"$REG_MIRROR\", \"pullFromMirror\": \"digest-only\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/team/app:mirror-only\": not found on registry $REG_ANON: Registry error: url http://$REG_ANON/v2/team/app/manifests/mirror-only" \
    "manifest unknown"
  assert_message_lacks "$REG_MIRROR" "mirror " "primary "
  assert_no_annotations
  # The host was never asked anything about the mirror.
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_ANON/team/app:mirror-only"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "$REG_MIRROR"
}

@test "a digest-only mirror serves a digest reference the upstream lacks" {
  digest=$(digest_of "$REG_MIRROR/team/app:digest-on-mirror")
  settings=$(mirror_settings mirror-digest-only "[{\"location\": \"$REG_MIRROR\", \"pullFromMirror\": \"digest-only\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$digest")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app@$digest: $REG_MIRROR/team/app@$digest"
}

@test "absent from mirror and primary is rejected, naming both locations" {
  settings=$(mirror_settings mirror-all "[{\"location\": \"$REG_MIRROR\", \"pullFromMirror\": \"all\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:nowhere")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"app\" image \"$REG_ANON/team/app:nowhere\": not found on registry $REG_ANON and its mirrors: " \
    "mirror $REG_MIRROR/team/app:nowhere: not found (Registry error: url http://$REG_MIRROR/v2/team/app/manifests/nowhere" \
    "; primary $REG_ANON/team/app:nowhere: not found (Registry error: url http://$REG_ANON/v2/team/app/manifests/nowhere" \
    "Hint: check that the tag or digest was pushed to $REG_ANON/team/app"
  assert_message_lacks "init-schema" "sidecar"
  assert_no_annotations
}

@test "a mirror location with a path (containerd override_path) is asked under that path" {
  settings=$(mirror_settings mirror-path "[{\"location\": \"$REG_MIRROR/dockerhub\", \"pullFromMirror\": \"all\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:under-path")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app:under-path: $REG_MIRROR/dockerhub/team/app:under-path"
}

@test "a mirror that is down and a primary without the image is uncertain, not absent" {
  settings=$(mirror_settings mirror-down "[{\"location\": \"$REG_DOWN\", \"pullFromMirror\": \"all\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:nowhere")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  # The node might have pulled it from the mirror: a warning (actions.unreachable), not a rejection.
  assert_allowed
  assert_warning_contains "container \"app\"" "actions.unreachable: warn" \
    "mirror $REG_DOWN/team/app:nowhere: registry unreachable"
  assert_only_whole_warnings_annotation
}

# registries.conf `blocked = true` (OpenShift's NeverContactSource): the nodes never contact
# $REG_ANON/team; its mirror, the mirror's root, is the only location asked.
# blocked_settings NAME JSON-MIRRORS: settings blocking $REG_ANON/team with those mirrors.
blocked_settings() {
  write_settings "$1" "$(jq -n --arg p "$REG_ANON/team" --argjson m "$2" '{registries: [{prefix: $p, blocked: true, mirrors: $m}]}')"
}

@test "a blocked source: an image on its mirror is admitted; one only at the source is absent, naming the mirror" {
  settings=$(blocked_settings blocked-mirror "[{\"location\": \"$REG_MIRROR/team\"}]")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:mirror-only")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_warning_count 0
  assert_annotation_is resolvable-images/resolved-from-mirror \
    "container \"app\" $REG_ANON/team/app:mirror-only: $REG_MIRROR/team/app:mirror-only"

  # 1.4.2 is on the source (and under the mirror's cache/), not at the mirror's team/
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains \
    "container \"app\" image \"$REG_ANON/team/app:1.4.2\": not found on $REG_MIRROR/team/app:1.4.2 (the nodes refuse pulls from $REG_ANON/team): " \
    "Hint: the nodes pull it only from $REG_MIRROR/team/app:1.4.2"
  assert_session_asked "$BATS_TEST_TMPDIR/session.yml" OciManifestDigest "$REG_MIRROR/team/app:1.4.2"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "$REG_ANON/team/app"
}

@test "a blocked source without a mirror is rejected unasked, naming the setting" {
  settings=$(blocked_settings blocked-alone '[]')
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings" \
    --record-host-capabilities-interactions "$BATS_TEST_TMPDIR/session.yml"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" \
    "container \"app\" image \"$REG_ANON/team/app:1.4.2\": refused by the nodes on registry $REG_ANON: nodes refuse pulls from $REG_ANON/team (registries[0].blocked), with no mirror"
  assert_session_never_mentions "$BATS_TEST_TMPDIR/session.yml" "$REG_ANON/team/app"
}
