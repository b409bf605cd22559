#!/usr/bin/env bats
# Registry lookups on the anonymous registry: what exists is admitted silently, what is
# certainly absent is rejected with a message naming the container, image and registry.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

@test "existing tags are admitted without message or warning" {
  req=$(local_request pod-create.json)
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "a missing tag is rejected, naming the container, image, registry and reason" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Pod team-a/web" "1 image will not pull" \
    "container \"app\" image \"$REG_ANON/team/app:9.9.9\"" \
    "not found on registry $REG_ANON" "manifest unknown" "Hint:"
  # only the failing container is listed
  assert_message_lacks "init-schema" "sidecar"
}

@test "a missing repository is rejected as not found" {
  req=$(local_request pod-create.json "sidecar=$REG_ANON/team/no-such-repo:1.0")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"sidecar\"" "$REG_ANON/team/no-such-repo:1.0" "not found on registry $REG_ANON"
  assert_message_lacks "container \"app\""
}

@test "an image without a tag is looked up as :latest" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "image \"$REG_ANON/team/app\" ($REG_ANON/team/app:latest)" "not found"
}

@test "every failing container is listed, in one message" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9" "init-schema=$REG_ANON/platform/migrate:0.0.1")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "2 images will not pull" "init container \"init-schema\"" \
    "$REG_ANON/platform/migrate:0.0.1" "container \"app\"" "$REG_ANON/team/app:9.9.9"
}

@test "an existing digest is admitted" {
  digest=$(digest_of "$REG_ANON/team/app:1.4.2")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$digest")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "a missing digest is rejected as not found" {
  missing="sha256:$(printf '0%.0s' {1..64})"
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$missing")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"app\"" "$REG_ANON/team/app@$missing" "not found on registry $REG_ANON"
}

@test "tag@digest: the digest decides (missing tag, existing digest is admitted)" {
  digest=$(digest_of "$REG_ANON/team/app:1.4.2")
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:no-such-tag@$digest")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "a multi-platform index is admitted" {
  req=$(local_request pod-create.json "app=$REG_ANON/test/multi:v1")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "a Docker schema 2 manifest is admitted" {
  req=$(local_request pod-create.json "app=$REG_ANON/test/app:v2s2")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "nested repositories resolve, and a missing nested tag is rejected" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/sub/app:1.0" "sidecar=$REG_ANON/a/b/c/d/app:1.0")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0

  req=$(local_request deployment-create.json "app=$REG_ANON/team/sub/app:2.0")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Deployment team-a/web" "$REG_ANON/team/sub/app:2.0" "not found on registry $REG_ANON"
}
