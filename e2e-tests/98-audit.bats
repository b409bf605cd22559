#!/usr/bin/env bats
# Background audit on the real Kubewarden policy-server, in the deployment docs/audit.md
# recommends: the admission instance (settings as users write them, audit.lookups off) on one
# server, the audit instance (audit.lookups: true) on a server of its own. Requests are built
# exactly as the audit scanner builds them (lib/audit.bash, citing admission_request.go) and
# POSTed to /audit/<policy>; each answer is read as report.go records it (pass, fail, error),
# and each result is checked against the table of docs/audit.md. The PolicyReport excerpt of
# docs/audit.md is these answers ($E2E_WORK/audit-report.jsonl), and the last test fails when
# the two differ (E2E_AUDIT_EXCERPT=FILE writes this run's excerpt). Skipped, saying
# so, without a policy-server; runs in the test-host pass of `make e2e-tests` only.

bats_require_minimum_version 1.5.0

# policies_json: one policies.yml for both servers, ids as the controller names them.
policies_json() {
  jq -n --arg mod "registry://$POLICY_REF" '
    [{apiVersion: "v1", kind: "ServiceAccount"}, {apiVersion: "v1", kind: "Secret"},
     {apiVersion: "v1", kind: "Node"}] as $context
    | {"module": $mod, policyMode: "protect", allowedToMutate: false,
       contextAwareResources: $context, hostCapabilities: ["*"]} as $policy
    | {"clusterwide-resolvable-images": ($policy + {settings: {exemptNamespaces: ["kube-system"]}}),
       "clusterwide-resolvable-images-audit": ($policy + {settings: {audit: {lookups: true}}}),
       "clusterwide-resolvable-images-audit-monitor": ($policy + {policyMode: "monitor", settings: {audit: {lookups: true}}})}'
}

setup_file() {
  load lib/common
  load lib/policy_server
  [[ -z "$(ps_skip_reason)" && -f "$POLICY_WASM" ]] && ! on_kwctl || return 0
  registry_start anon
  REG_DOWN="127.0.0.1:$(unused_port)"
  export REG_DOWN
  push_image "$(build_image migrate-2.1.0)" anon platform/migrate:2.1.0
  push_image "$(build_image app-1.4.2)" anon team/app:1.4.2
  push_image "$(build_image busybox)" anon library/busybox:1.36
  # the release that will be deleted after admission: an image of its own, so that deleting
  # its manifest removes nothing else
  push_image "$(build_image app-2.0.0)" anon team/app:2.0.0
  E2E_SOURCES=$(write_sources_yaml default --insecure "$REG_ANON" --insecure "$REG_DOWN")
  export E2E_SOURCES
  E2E_CLUSTER=$(cluster_with_nodes audit)
  export E2E_CLUSTER
  POLICY_REF="$REG_ANON/policies/resolvable-images:v0.1.0"
  export POLICY_REF
  ps_push_policy "$POLICY_WASM" "$POLICY_REF" >/dev/null
  policies_json >"$BATS_FILE_TMPDIR/policies.yml"
  local kubeconfig
  kubeconfig=$(apiserver_serve "$E2E_CLUSTER")
  PS_KUBECONFIG=$kubeconfig ps_start admission "$BATS_FILE_TMPDIR/policies.yml"
  PS_KUBECONFIG=$kubeconfig ps_start audit "$BATS_FILE_TMPDIR/policies.yml"
  AUDIT_REPORT="$(e2e_workdir)/audit-report.jsonl"
  : >"$AUDIT_REPORT"
  export AUDIT_REPORT
}

teardown_file() {
  load lib/common
  load lib/policy_server
  ps_teardown_file
}

setup() {
  load lib/common
  load lib/policy_server
  load lib/audit
  require_policy_server
}

# gone_release: the Deployment-shaped workloads of this suite were admitted with team/app:2.0.0;
# afterwards its manifest is deleted from the registry (what k8s-image-availability-exporter
# watches for). Idempotent.
gone_release() {
  [[ -f "$BATS_FILE_TMPDIR/deleted" ]] && return 0
  skopeo delete --tls-verify=false "docker://$REG_ANON/team/app:2.0.0"
  : >"$BATS_FILE_TMPDIR/deleted"
}

@test "a workload whose images exist passes, without a message" {
  ps_use audit
  req=$(audit_review "$(local_request deployment-create.json)" '.status = {replicas: 1, readyReplicas: 1}')
  run -0 ps_audit clusterwide-resolvable-images-audit "$req"
  [ "$(report_result)" = pass ]
  assert_no_message
  report_append clusterwide-resolvable-images-audit Deployment web
}

@test "admitted, then its tag deleted: a Deployment, a StatefulSet, a CronJob and a bare Pod fail, each saying what breaks next" {
  # admitted while the release existed
  ps_use admission
  run -0 ps_validate clusterwide-resolvable-images "$(local_request deployment-create.json "app=$REG_ANON/team/app:2.0.0")"
  assert_allowed
  gone_release
  ps_use audit
  local digest
  digest=$(digest_of "$REG_ANON/team/app:2.0.0")
  for case in "deployment-create.json|Deployment|new Pods (a scale-up, a rollout" \
    "statefulset-create.json|StatefulSet|new Pods (a scale-up, a rollout, a Pod rescheduled after an eviction or a node failure)" \
    "cronjob-create.json|CronJob|its next scheduled run fails with ErrImagePull" \
    "pod-create.json|Pod|this Pod is not re-created by a controller"; do
    IFS='|' read -r fixture kind next <<<"$case"
    edit=.
    [[ "$kind" != Pod ]] || edit=".status = {phase: \"Running\", containerStatuses: [{name: \"app\", imageID: \"$REG_ANON/team/app@$digest\"}]}"
    req=$(audit_review "$(local_request "$fixture" "app=$REG_ANON/team/app:2.0.0")" "$edit")
    run -0 ps_audit clusterwide-resolvable-images-audit "$req"
    [ "$(report_result)" = fail ] || _fail_with "$kind: expected fail"
    [ "$(report_result)" = "$(docs_audit_result absent)" ] || _fail_with "docs/audit.md says $(docs_audit_result absent) for absent"
    assert_message_contains "$kind team-a/web: 1 image will not pull" "Next: $next" \
      "container \"app\" image \"$REG_ANON/team/app:2.0.0\"" "not found on registry $REG_ANON"
    if [[ "$kind" == Pod ]]; then
      assert_message_contains "It runs $digest: to keep that version, set the image to $REG_ANON/team/app@$digest"
    else
      assert_message_lacks "It runs"
    fi
    report_append clusterwide-resolvable-images-audit "$kind" web
  done
}

@test "objects a controller owns stay with their owner: a ReplicaSet's Pod and a Deployment's ReplicaSet pass" {
  gone_release
  ps_use audit
  owner='.metadata.ownerReferences = [{apiVersion: "apps/v1", kind: $k, name: "web-7d9f", uid: "1f0c2a7e-0000-4000-8000-000000000001", controller: true, blockOwnerDeletion: true}]'
  req=$(audit_review "$(local_request pod-create.json "app=$REG_ANON/team/app:2.0.0")" "${owner//\$k/\"ReplicaSet\"}")
  run -0 ps_audit clusterwide-resolvable-images-audit "$req"
  [ "$(report_result)" = pass ]
  assert_no_message
  req=$(audit_review "$(local_request replicaset-create.json "app=$REG_ANON/team/app:2.0.0")" "${owner//\$k/\"Deployment\"}")
  run -0 ps_audit clusterwide-resolvable-images-audit "$req"
  [ "$(report_result)" = pass ]
  assert_no_message
}

@test "an image the check could not verify passes, and the message says why" {
  ps_use audit
  req=$(audit_review "$(local_request deployment-create.json "sidecar=$REG_DOWN/library/busybox:1.36")")
  run -0 ps_audit clusterwide-resolvable-images-audit "$req"
  [ "$(report_result)" = pass ]
  [ "$(report_result)" = "$(docs_audit_result unreachable)" ] || _fail_with "docs/audit.md says $(docs_audit_result unreachable) for unreachable"
  assert_message_contains "not verified, so no failure (the next pull may still succeed)" \
    "container \"sidecar\" image \"$REG_DOWN/library/busybox:1.36\"" "registry unreachable on registry $REG_DOWN"
  assert_no_warnings
  report_append clusterwide-resolvable-images-audit Deployment web-sidecar-down
}

@test "an invalid image reference fails as the docs say" {
  ps_use audit
  req=$(audit_review "$(local_request deployment-create.json "app=$REG_ANON/Team/App:1")")
  run -0 ps_audit clusterwide-resolvable-images-audit "$req"
  [ "$(report_result)" = fail ]
  [ "$(report_result)" = "$(docs_audit_result invalidReference)" ]
  assert_message_contains "container \"app\"" "invalid image reference"
}

@test "the admission instance answers the audit scanner at once, without a lookup, and says so" {
  gone_release
  ps_use admission
  # had it looked anything up, the answer would name the gone tag or the registry that is down
  req=$(audit_review "$(local_request deployment-create.json "app=$REG_ANON/team/app:2.0.0" "sidecar=$REG_DOWN/library/busybox:1.36")")
  run -0 ps_audit clusterwide-resolvable-images "$req"
  [ "$(report_result)" = pass ]
  assert_message_is "not audited: this instance answers admission and does not look images up for the audit scanner (audit.lookups is false); audit with an instance of its own (docs/audit.md)"
  # the same object, as the API server sends it, is checked as ever
  req=$(local_request deployment-create.json "sidecar=$REG_DOWN/library/busybox:1.36")
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_warning_contains "container \"sidecar\"" "actions.unreachable"
}

@test "monitor mode changes nothing on /audit: the audit answer is the policy's own" {
  gone_release
  ps_use audit
  req=$(audit_review "$(local_request deployment-create.json "app=$REG_ANON/team/app:2.0.0")")
  run -0 ps_audit clusterwide-resolvable-images-audit-monitor "$req"
  [ "$(report_result)" = fail ]
  assert_message_contains "Deployment team-a/web: 1 image will not pull"
}

@test "the report excerpt: one result per audited workload, in order, each message within 2048 characters" {
  [[ -s "$AUDIT_REPORT" ]] || skip "no report lines (the scenarios above did not run)"
  run -0 jq -s 'map(.message | length) | max' "$AUDIT_REPORT"
  ((output <= 2048))
  run -0 jq -rs 'map(.result) | join(" ")' "$AUDIT_REPORT"
  [ "$output" = "pass fail fail fail fail pass" ]
  # E2E_AUDIT_REPORT=FILE keeps the results as JSON lines
  [[ -z "${E2E_AUDIT_REPORT:-}" ]] || cp "$AUDIT_REPORT" "$E2E_AUDIT_REPORT"
}

@test "docs/audit.md's PolicyReport excerpt is what this run answered, word for word" {
  [[ -s "$AUDIT_REPORT" ]] || skip "no report lines (the scenarios above did not run)"
  report_excerpt "$AUDIT_REPORT" >"$BATS_TEST_TMPDIR/answered.yaml"
  # E2E_AUDIT_EXCERPT=FILE keeps this run's excerpt, to paste into docs/audit.md
  [[ -z "${E2E_AUDIT_EXCERPT:-}" ]] || cp "$BATS_TEST_TMPDIR/answered.yaml" "$E2E_AUDIT_EXCERPT"
  docs_report_excerpt >"$BATS_TEST_TMPDIR/documented.yaml"
  [[ -s "$BATS_TEST_TMPDIR/documented.yaml" ]] || {
    echo "docs/audit.md: no excerpt after <!-- checked by e2e-tests/98-audit.bats -->" >&2
    return 1
  }
  run diff -u --label docs/audit.md --label "this run" "$BATS_TEST_TMPDIR/documented.yaml" "$BATS_TEST_TMPDIR/answered.yaml"
  ((status == 0)) || {
    printf "docs/audit.md's PolicyReport excerpt differs from the suite's answers:\n%s\n" "$output" >&2
    return 1
  }
}
