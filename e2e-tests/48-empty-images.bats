#!/usr/bin/env bats
# Words that match the verdict: an empty or blank image is no reference.
# The API server refuses a Pod without an image, and its validation (validateContainerCommon)
# requires one in built-in templates too, so a validating webhook never sees one there; a
# mutating webhook (this policy with pinDigests) and a custom kind's template can, and a blank
# template image (" ") passes validation as a placeholder some tools fill in. Nothing is looked
# up, nothing is proven: a warning that says so (`notLookedUp`), never "invalid image reference:
# the reference is empty". On the test host and (E2E_HOST=kwctl)
# the real kwctl, against the scenario's registry; the other images are still looked up.

bats_require_minimum_version 1.5.0

load lib/certainty_suite

# empty_app FIXTURE IMAGE: the fixture on the local registry, container "app" set to IMAGE (set
# after the loopback guard, which knows only references).
empty_app() {
  local req
  req=$(local_request "$1") || return 1
  request_edit_pod_spec "$req" "(.containers[] | select(.name == \"app\") | .image) = $(jq -n --arg i "$2" '$i')"
  printf '%s\n' "$req"
}

@test "an empty image in a Deployment, a CronJob and a Pod: admitted with 'no image to look up', the others looked up" {
  local fixture
  for fixture in deployment-create.json cronjob-create.json pod-create.json; do
    req=$(empty_app "$fixture" "")
    rm -f "$SESSION"
    # a time budget a loaded machine cannot spend on two lookups (kwctl tries HTTPS first)
    run -0 --separate-stderr policy_run "$req" --settings-json '{"timeBudgetMs": 10000}' \
      --record-host-capabilities-interactions "$SESSION"
    assert_allowed
    assert_no_message
    assert_warning_count 1
    assert_warning_contains "container \"app\" image \"\": no image to look up; allowed (actions.notLookedUp: warn): the image is empty: there is no reference to look up"
    assert_message_lacks "the reference is empty"
    [[ "$output" != *"invalid image reference"* ]] || _fail_with "$fixture: called an invalid reference"
    assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/platform/migrate:2.1.0"
    assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/library/busybox:1.36"
    assert_session_lookups "$SESSION" 2
  done
}

@test "a blank template image (a placeholder): the same words; notLookedUp: reject refuses it with a hint" {
  req=$(empty_app deployment-create.json " ")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "container \"app\" image \" \": no image to look up; allowed (actions.notLookedUp: warn): the image is blank (whitespace only): there is no reference to look up"
  run -0 --separate-stderr policy_run "$req" --settings-json '{"actions": {"notLookedUp": "reject"}}'
  assert_rejected
  assert_message_contains "Deployment team-a/web: 1 image will not pull" \
    "container \"app\" image \" \": no image to look up: the image is blank (whitespace only): there is no reference to look up. Hint: set the image"
}
