#!/usr/bin/env bats
# Objects created by controllers, one level up: a ReplicaSet a Deployment
# created and a Job a CronJob created carry a template that was judged when their owner was
# admitted. When the tag has since been deleted (as a retention policy deletes it: by digest,
# `vanish_image`), the controller's next ReplicaSet or Job must not be denied, while nodes that
# still hold the image would run it; a user's own ReplicaSet or Job, with no controller owner,
# is checked as before. Against a real registry, on the test host and (E2E_HOST=kwctl) the
# real kwctl; what was (not) asked is read from recorded sessions, on both hosts.

bats_require_minimum_version 1.5.0

load lib/certainty_suite

setup_file() {
  certainty_setup_file || return 0
  vanish_image anon team/app:gone
}

setup() {
  certainty_setup
  # The defaults, with a time budget a loaded machine cannot spend on three lookups (kwctl
  # tries HTTPS twice before plain HTTP on each).
  BUDGET='"timeBudgetMs": 10000'
  DEFAULTS=$(write_settings budget "{$BUDGET}")
}

# run_recorded REQUEST [HOST OPTIONS...]: policy_run, recording the host calls into $SESSION.
run_recorded() {
  rm -f "$SESSION"
  policy_run "$@" --record-host-capabilities-interactions "$SESSION"
}

# gone_request FIXTURE: the fixture on the local registry with container "app" on the deleted
# tag (init container and sidecar on images that exist).
gone_request() {
  local_request "$1" "app=$REG_ANON/team/app:gone"
}

# assert_admitted_unasked: admitted, silently, and the session holds no host call at all.
assert_admitted_unasked() {
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_session_empty "$SESSION"
}

@test "a ReplicaSet created by a Deployment, tag since deleted: admitted, nothing looked up" {
  req=$(gone_request replicaset-create.json)
  owned_by "$req" apps/v1 Deployment
  run -0 --separate-stderr run_recorded "$req"
  assert_admitted_unasked
}

@test "a Job created by a CronJob, tag since deleted: admitted, nothing looked up" {
  req=$(gone_request job-create.json)
  owned_by "$req" batch/v1 CronJob
  run -0 --separate-stderr run_recorded "$req"
  assert_admitted_unasked
}

@test "a user's own ReplicaSet and Job (no owner) on the deleted tag: rejected, the registry asked" {
  local fixture kind
  for fixture in replicaset-create.json:ReplicaSet job-create.json:Job; do
    kind=${fixture#*:}
    req=$(gone_request "${fixture%%:*}")
    run -0 --separate-stderr run_recorded "$req" --settings-path "$DEFAULTS"
    assert_rejected
    assert_message_contains "$kind team-a/web: 1 image will not pull" "container \"app\"" \
      "$REG_ANON/team/app:gone" "not found on registry $REG_ANON" "manifest unknown"
    assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:gone"
    assert_session_lookups "$SESSION" 3
  done
}

@test "an owner that is not the controller, or a kind the policy does not check, owns nothing: rejected" {
  req=$(gone_request replicaset-create.json)
  owned_by "$req" apps/v1 Deployment
  request_edit "$req" '.request.object.metadata.ownerReferences[0].controller = false'
  run -0 --separate-stderr policy_run "$req" --settings-path "$DEFAULTS"
  assert_rejected
  assert_message_contains "ReplicaSet team-a/web" "not found on registry $REG_ANON"

  # An Argo Rollout's ReplicaSet: checked until the Rollout is a kind the policy checks.
  owned_by "$req" argoproj.io/v1alpha1 Rollout
  run -0 --separate-stderr policy_run "$req" --settings-path "$DEFAULTS"
  assert_rejected
  settings=$(write_settings rollouts "{$BUDGET, \"customResources\": [{\"apiVersion\": \"argoproj.io/v1alpha1\", \"kind\": \"Rollout\", \"podSpecs\": [\"\$.spec.template.spec\"]}]}")
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_admitted_unasked
}

@test "ownedObjects: check, and its former name ownedPods: check, look owned objects up again" {
  req=$(gone_request replicaset-create.json)
  owned_by "$req" apps/v1 Deployment
  settings=$(write_settings owned-objects-check "{$BUDGET, \"ownedObjects\": \"check\"}")
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "ReplicaSet team-a/web: 1 image will not pull" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON"
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:gone"

  req=$(gone_request job-create.json)
  owned_by "$req" batch/v1 CronJob
  settings=$(write_settings owned-pods-check "{$BUDGET, \"ownedPods\": \"check\"}")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "Job team-a/web: 1 image will not pull" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON"
}

@test "ownedObjects: skip (the UI's default) next to an older ownedPods: check: check wins, the ReplicaSet is looked up" {
  req=$(gone_request replicaset-create.json)
  owned_by "$req" apps/v1 Deployment
  settings=$(write_settings owned-both "{$BUDGET, \"ownedObjects\": \"skip\", \"ownedPods\": \"check\"}")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "ReplicaSet team-a/web: 1 image will not pull" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON"
}
