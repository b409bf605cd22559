#!/usr/bin/env bats
# Every workload kind, every container list, pull policies and operations: the policy finds
# the images where the API server keeps them and checks only what the kubelet will pull.

bats_require_minimum_version 1.5.0

setup_file() { load lib/common; scenario_setup_file; }
teardown_file() { load lib/common; scenario_teardown_file; }
setup() { load lib/common; require_host; }

# check_kind FIXTURE KIND: the fixture is admitted with its (local) images and rejected, with
# the kind and object named, when container "app" points at a missing tag.
check_kind() {
  local fixture=$1 kind=$2 req
  req=$(local_request "$fixture")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0

  req=$(local_request "$fixture" "app=$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "$kind team-a/web" "container \"app\"" "$REG_ANON/team/app:9.9.9" "not found"
}

@test "Pod" { check_kind pod-create.json Pod; }
@test "Deployment" { check_kind deployment-create.json Deployment; }
@test "ReplicaSet" { check_kind replicaset-create.json ReplicaSet; }
@test "StatefulSet" { check_kind statefulset-create.json StatefulSet; }
@test "DaemonSet" { check_kind daemonset-create.json DaemonSet; }
@test "Job" { check_kind job-create.json Job; }
@test "CronJob" { check_kind cronjob-create.json CronJob; }
@test "ReplicationController" { check_kind replicationcontroller-create.json ReplicationController; }

@test "init containers are checked" {
  req=$(local_request cronjob-create.json "init-schema=$REG_ANON/platform/migrate:0.0.1")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "CronJob team-a/web" "init container \"init-schema\"" "$REG_ANON/platform/migrate:0.0.1" "not found"
}

@test "ephemeral containers: an existing debug image is admitted" {
  req=$(local_request pod-ephemeral-update.json)
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "ephemeral containers: a missing debug image is rejected, the running containers are not re-checked" {
  # The running containers' images are gone from the registry; only the new debugger counts.
  req=$(local_request pod-ephemeral-update.json "object:debugger=$REG_ANON/library/alpine:0.0" \
    "app=$REG_ANON/team/app:gone" "sidecar=$REG_ANON/library/busybox:gone" "init-schema=$REG_ANON/platform/migrate:gone")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Pod team-a/web" "1 image will not pull" "ephemeral container \"debugger\"" "$REG_ANON/library/alpine:0.0"
  assert_message_lacks ":gone"
}

@test "imagePullPolicy Never is not looked up: a missing tag is admitted" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9" "app.pull=Never")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "imagePullPolicy Always on a missing tag is rejected" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9" "app.pull=Always")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"app\"" "not found"
}

@test "UPDATE with unchanged images is admitted even when an old image is now missing" {
  req=$(local_request deployment-update-scale.json "app=$REG_ANON/team/app:deleted-since")
  [ "$(jq '[.request.oldObject.spec.replicas, .request.object.spec.replicas]' -c "$req")" = "[2,5]" ]
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "UPDATE that changes an image to a missing tag is rejected" {
  req=$(local_request deployment-update-image.json "oldObject:app=$REG_ANON/team/app:1.4.2" "object:app=$REG_ANON/team/app:1.5.1")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "Deployment team-a/web" "container \"app\"" "$REG_ANON/team/app:1.5.1" "not found"
  assert_message_lacks "sidecar" "init-schema"
}

@test "UPDATE that changes an image to an existing tag is admitted" {
  req=$(local_request deployment-update-image.json "oldObject:app=$REG_ANON/team/app:1.4.2" "object:app=$REG_ANON/team/app:1.5.0")
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "DELETE is admitted without lookups" {
  req=$(local_request deployment-delete.json "app=$REG_ANON/team/app:9.9.9")
  [ "$(jq -r '.request.object' "$req")" = null ]
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "an unrelated kind (ConfigMap) is admitted" {
  # Its data holds an image string, which is not a container image; answer from a host that
  # has no registry at all (an empty recorded session): any lookup would be an error.
  printf '[]\n' >"$BATS_TEST_TMPDIR/empty-session.yml"
  run -0 --separate-stderr policy_run "$FIXTURES_DIR/configmap-create.json" \
    --replay-host-capabilities-interactions "$BATS_TEST_TMPDIR/empty-session.yml"
  assert_allowed
  assert_no_message
  assert_warning_count 0
}
