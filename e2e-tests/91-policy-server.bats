#!/usr/bin/env bats
# The policy where users run it: the real Kubewarden policy-server (POLICY_SERVER, else
# policy-server on PATH), started here on loopback (lib/policy_server.bash) with a
# policies.yml shaped like the one the Kubewarden controller writes, the policy pulled from a
# local registry through registry:// after `kwctl push`, AdmissionReviews POSTed to
# /validate/<id> as the API server does. Skipped, saying so, without a policy-server; runs in
# the test-host pass of `make e2e-tests` only. What the server does with policy modes,
# mutations, invalid settings and policy groups is documented in docs/policy-server.md; each
# scenario below asserts one of those statements.

bats_require_minimum_version 1.5.0

# policies_json: the main server's policies.yml (JSON is YAML), ids named as the controller
# names them (clusterwide-NAME, clusterwide-group-NAME), every one from the pushed module.
policies_json() {
  jq -n --arg mod "registry://$POLICY_REF" --arg anon "$REG_ANON" --arg down "$REG_DOWN" '
    [{apiVersion: "v1", kind: "ServiceAccount"}, {apiVersion: "v1", kind: "Secret"},
     {apiVersion: "v1", kind: "Node"}] as $context
    | {"module": $mod, policyMode: "protect", allowedToMutate: false,
       contextAwareResources: $context, hostCapabilities: ["*"], settings: {}} as $policy
    # what the group member "images" and the stand-in for trusted-repos check
    | {"module": $mod, contextAwareResources: $context, hostCapabilities: ["*"], settings: {}} as $images
    | {"module": $mod, hostCapabilities: ["*"],
       settings: {lookupRegistries: [$anon, $down], actions: {notLookedUp: "reject", absent: "warn"}}} as $trusted
    | {
      "clusterwide-resolvable-images": $policy,
      "clusterwide-monitor": ($policy + {policyMode: "monitor"}),
      "clusterwide-pin-mutating": ($policy + {allowedToMutate: true, settings: {pinDigests: true}}),
      "clusterwide-pin-validating": ($policy + {settings: {pinDigests: true}}),
      "clusterwide-platforms": ($policy + {settings: {requiredPlatforms: ["cluster"]}}),
      "clusterwide-no-context": ($policy | del(.contextAwareResources)),
      "clusterwide-invalid": ($policy + {settings: {actions: {absent: "block"}}}),
      "clusterwide-custom-message": ($policy + {message: "an image of this workload will not pull"}),
      # the shape of the ClusterAdmissionPolicyGroup in docs/operations.md ("In a policy group"), trusted() standing in for trusted-repos
      "clusterwide-group-trusted-and-images": {
        policyMode: "protect", expression: "trusted() && images()",
        message: "images must come from a trusted registry and exist there",
        policies: {images: $images, trusted: $trusted}},
      "clusterwide-group-images-or-trusted": {
        policyMode: "protect", expression: "images() || trusted()",
        message: "the images must exist or come from a trusted registry",
        policies: {images: $images, trusted: $trusted}},
      "clusterwide-group-monitor": {
        policyMode: "monitor", expression: "trusted() && images()",
        message: "images must come from a trusted registry and exist there",
        policies: {images: $images, trusted: $trusted}},
      "clusterwide-group-pinned": {
        policyMode: "protect", expression: "images() && pinned()",
        message: "the images must exist and be pinned",
        policies: {images: $images, pinned: ($images + {settings: {pinDigests: true}})}}
    }'
}

setup_file() {
  load lib/common
  load lib/policy_server
  [[ -z "$(ps_skip_reason)" && -f "$POLICY_WASM" ]] && ! on_kwctl || return 0
  registry_start anon
  registry_start auth
  REG_DOWN="127.0.0.1:$(unused_port)"
  export REG_DOWN
  push_image "$(build_image migrate-2.1.0)" anon platform/migrate:2.1.0
  push_image "$(build_image app-1.4.2)" anon team/app:1.4.2
  push_image "$(build_image busybox)" anon library/busybox:1.36
  push_image "$(build_image alpine)" anon library/alpine:3.20
  push_image "$(build_image private)" auth private/app:v1
  E2E_SOURCES=$(write_sources_yaml default --insecure "$REG_ANON" --insecure "$REG_AUTH" --insecure "$REG_DOWN")
  export E2E_SOURCES

  # The cluster the server reads through its kubeconfig: the namespaces' default
  # ServiceAccounts, a pull secret for the auth registry, a ServiceAccount naming it, and two
  # Nodes (amd64, arm64).
  E2E_CLUSTER=$(cluster_with_nodes ps)
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: builder" "  namespace: team-a" \
    "imagePullSecrets:" "  - name: regcred" | cluster_add "$E2E_CLUSTER" 11-builder.yaml
  export E2E_CLUSTER

  POLICY_REF="$REG_ANON/policies/resolvable-images:v0.1.0"
  export POLICY_REF
  PUSHED_WITH=$(ps_push_policy "$POLICY_WASM" "$POLICY_REF")
  export PUSHED_WITH
  policies_json >"$BATS_FILE_TMPDIR/policies.yml"
  # As the controller runs it, plus --continue-on-errors for clusterwide-invalid (a flag that
  # changes nothing for valid policies); the start without it is its own scenario below.
  PS_KUBECONFIG=$(apiserver_serve "$E2E_CLUSTER") ps_start main "$BATS_FILE_TMPDIR/policies.yml" --continue-on-errors
}

teardown_file() {
  load lib/common
  load lib/policy_server
  ps_teardown_file
}

setup() {
  load lib/common
  load lib/policy_server
  require_policy_server
  ps_use main
}

@test "the policy is pushed (kwctl push) and loaded by the server from registry://" {
  [[ "$PUSHED_WITH" == kwctl ]] || echo "# no kwctl (KWCTL, or kwctl on PATH): pushed with the test host's push" >&3
  run -0 skopeo inspect --raw --tls-verify=false "docker://$POLICY_REF"
  [ "$(jq -r .config.mediaType <<<"$output")" = application/vnd.wasm.config.v1+json ]
  layer=$(jq -r '.layers[0].digest' <<<"$output")
  # the server downloaded that layer from the registry into its download directory
  module="$PS_DIR/policies/registry/$REG_ANON/policies/resolvable-images:v0.1.0"
  [ -f "$module" ] || _fail_with "no module downloaded from $REG_ANON: $(find "$PS_DIR/policies" -type f)"
  [ "sha256:$(sha256sum "$module" | cut -d' ' -f1)" = "$layer" ]
}

@test "Pod and Deployment whose images exist: allowed, no message, no warning, no patch" {
  for fixture in pod-create.json deployment-create.json; do
    req=$(local_request "$fixture")
    run -0 ps_validate clusterwide-resolvable-images "$req"
    assert_allowed
    assert_no_message
    assert_no_warnings
    assert_no_patch
  done
}

@test "Pod with a missing tag: denied, the message names the Pod, container, image, registry and reason" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_rejected
  assert_message_contains "Pod team-a/web" "container \"app\"" "$REG_ANON/team/app:9.9.9" "not found on registry $REG_ANON"
  # no code: the API server makes it a 4xx (a 500 is what the server answers for its own failures)
  assert_status_code ""
}

@test "Deployment with a missing tag: denied, naming the Deployment" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_rejected
  assert_message_contains "Deployment team-a/web" "container \"app\"" "$REG_ANON/team/app:9.9.9" "not found on registry $REG_ANON"
}

@test "Deployment with a private image: allowed, the warning reaches the AdmissionReview response" {
  req=$(local_request deployment-create.json "app=$REG_AUTH/private/app:v1")
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" \
    "actions.uncoveredRegistry" "no pull secret in namespace team-a covers $REG_AUTH"
}

@test "Pod with an image on a registry that is down: allowed with a warning saying why" {
  req=$(local_request pod-create.json "app=$REG_DOWN/team/app:1.4.2")
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "$REG_DOWN" "actions.unreachable"
}

@test "a custom message replaces the policy's, which moves to the causes; warnings stay" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9" "sidecar=$REG_DOWN/library/busybox:1.36")
  run -0 ps_validate clusterwide-custom-message "$req"
  assert_rejected
  assert_message_is "an image of this workload will not pull"
  jq -e '.status.details.causes | any(.message | contains("not found on registry") and contains("container \"app\""))' \
    <<<"$output" >/dev/null || _fail_with "the policy's message is not among the causes"
  assert_warning_contains "container \"sidecar\"" "actions.unreachable"
}

@test "policyMode monitor: a certain failure is admitted without message, warnings kept, and the server logs the verdict" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.8" "sidecar=$REG_DOWN/library/busybox:1.36")
  run -0 ps_validate clusterwide-monitor "$req"
  assert_allowed
  assert_no_message
  assert_no_patch
  assert_warning_contains "container \"sidecar\"" "actions.unreachable"
  run -0 grep -F 'policy evaluation (monitor mode)' "$PS_LOG"
  [[ "$output" == *clusterwide-monitor* && "$output" == *"$REG_ANON/team/app:9.9.8"* ]] ||
    _fail_with "the monitor-mode log line lacks the policy or the image: $output"
}

@test "pinDigests with allowedToMutate: true: a JSONPatch pinning each image comes back" {
  req=$(local_request pod-create.json)
  run -0 ps_validate clusterwide-pin-mutating "$req"
  assert_allowed
  assert_patch_is "$(jq -n --arg i "$REG_ANON/platform/migrate:2.1.0@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" \
    --arg a "$REG_ANON/team/app:1.4.2@$(digest_of "$REG_ANON/team/app:1.4.2")" \
    --arg s "$REG_ANON/library/busybox:1.36@$(digest_of "$REG_ANON/library/busybox:1.36")" '[
      {op: "replace", path: "/spec/initContainers/0/image", value: $i},
      {op: "replace", path: "/spec/containers/0/image", value: $a},
      {op: "replace", path: "/spec/containers/1/image", value: $s}]')"
}

@test "pinDigests with allowedToMutate: false: a clear denial naming the policy, not a 500" {
  req=$(local_request pod-create.json)
  run -0 ps_validate clusterwide-pin-validating "$req"
  [ "$(ps_last_http)" = 200 ]
  assert_rejected
  assert_message_contains "Request rejected by policy clusterwide-pin-validating" \
    "The policy attempted to mutate the request, but it is currently configured to not allow mutations"
  assert_status_code ""
  assert_no_patch
  # nothing to mutate: the same policy admits
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$(digest_of "$REG_ANON/team/app:1.4.2")" \
    "init-schema=$REG_ANON/platform/migrate@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" sidecar.pull=Never)
  run -0 ps_validate clusterwide-pin-validating "$req"
  assert_allowed
  assert_no_patch
}

@test "invalid settings with --continue-on-errors: the server starts, every request to that policy is refused with the settings error" {
  for fixture in pod-create.json deployment-create.json; do
    req=$(local_request "$fixture")
    run -0 ps_validate clusterwide-invalid "$req"
    assert_rejected
    assert_message_contains "Policy settings are invalid" "actions.absent" "block"
    assert_status_code 500
  done
  # the other policies of the server are unaffected
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
}

@test "invalid settings without --continue-on-errors: the server refuses to start, naming the field" {
  jq -n --arg mod "registry://$POLICY_REF" '{"clusterwide-invalid": {"module": $mod,
      policyMode: "protect", allowedToMutate: false, hostCapabilities: ["*"],
      settings: {actions: {absent: "block"}}}}' >"$BATS_TEST_TMPDIR/invalid.yml"
  run ps_start invalid "$BATS_TEST_TMPDIR/invalid.yml"
  [ "$status" -eq 1 ]
  ps_use main
  log="$(e2e_workdir)/registries/ps-invalid/server.log"
  [ "$(cat "$(e2e_workdir)/registries/ps-invalid/exit")" -ne 0 ]
  echo "# exit status $(cat "$(e2e_workdir)/registries/ps-invalid/exit"): $(grep -F 'Policy settings are invalid' "$log" | head -n1)" >&3
  run -0 grep -F 'Policy settings are invalid' "$log"
  [[ "$output" == *actions.absent* && "$output" == *block* ]] || _fail_with "the error does not name the field: $output"
  [[ ! -f "$(e2e_workdir)/registries/ps-invalid/pid" ]]
}

@test "context-aware: the Pod's pull secret is read from the API server (kubeconfig)" {
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "actions.unauthorized" "this check used the policy server's credentials"
  # a secret the cluster does not have
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "no-such-secret"}]'
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_warning_contains "pull secret \"team-a/no-such-secret\"" "missing pull secret" "actions.missingPullSecret"
}

@test "context-aware: a template's ServiceAccount and its pull secrets are read from the API server" {
  req=$(local_request statefulset-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.serviceAccountName = "builder"'
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" "actions.unauthorized" \
    "the pod's pull secrets cover $REG_AUTH"
  request_edit_pod_spec "$req" '.serviceAccountName = "nobody"'
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_warning_contains "ServiceAccount \"team-a/nobody\"" "missing pull secret" "does not exist"
}

@test "context-aware: requiredPlatforms cluster lists the Nodes from the API server" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:1.4.2" init-schema.remove sidecar.remove)
  run -0 ps_validate clusterwide-platforms "$req"
  assert_rejected
  assert_message_contains "container \"app\"" "no manifest for a required platform" "linux/arm64"
  request_edit_pod_spec "$req" '.nodeSelector = {"kubernetes.io/arch": "amd64"}'
  run -0 ps_validate clusterwide-platforms "$req"
  assert_allowed
  assert_no_warnings
}

@test "context-aware: without contextAwareResources the server refuses the reads, and the policy says so" {
  req=$(local_request deployment-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 ps_validate clusterwide-no-context "$req"
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_ANON"
  assert_warning_contains "pull secrets were not consulted"
}

@test "context-aware: no credential of the pull secret reaches a response or the server's log" {
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  run -0 ps_validate clusterwide-resolvable-images "$req"
  encoded=$(printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0)
  for secret in "$REG_AUTH_PASSWORD" "$encoded"; do
    [[ "$output" != *"$secret"* ]] || _fail_with "a credential is in the response"
    run ! grep -F -q -- "$secret" "$PS_LOG"
  done
}

@test "group trusted() && images(): both accept: allowed" {
  req=$(local_request pod-create.json)
  run -0 ps_validate clusterwide-group-trusted-and-images "$req"
  assert_allowed
  assert_no_message
  assert_no_warnings
}

@test "group trusted() && images(): a missing image is denied with the group's message, the member's in the causes" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 ps_validate clusterwide-group-trusted-and-images "$req"
  assert_rejected
  assert_message_is "images must come from a trusted registry and exist there"
  # trusted() accepts (absent: warn, its warning dropped), images() rejects: the one cause
  assert_causes_are spec.policies.images
  assert_cause_contains spec.policies.images "container \"app\"" "$REG_ANON/team/app:9.9.9" "not found on registry $REG_ANON"
}

@test "group trusted() && images(): an untrusted registry: denied by trusted(), with the group's message" {
  req=$(local_request pod-create.json "app=$REG_AUTH/private/app:v1")
  run -0 ps_validate clusterwide-group-trusted-and-images "$req"
  assert_rejected
  assert_message_contains "images must come from a trusted registry and exist there"
  assert_causes_are spec.policies.trusted
  assert_cause_contains spec.policies.trusted "$REG_AUTH/private/app:v1" "not looked up: registry $REG_AUTH is not in lookupRegistries"
  assert_no_warnings
}

@test "group trusted() && images(): && stops at the first rejection, the second member is never evaluated" {
  # both members reject an invalid reference (the || group below lists both); here only trusted() ran
  req=$(local_request pod-create.json "app=$REG_ANON/Team/App:1")
  run -0 ps_validate clusterwide-group-trusted-and-images "$req"
  assert_rejected
  assert_causes_are spec.policies.trusted
  assert_cause_contains spec.policies.trusted "container \"app\"" "invalid image reference"
}

@test "group trusted() && images(): two accepts with warnings: allowed, and no warning reaches the user" {
  req=$(local_request pod-create.json "app=$REG_DOWN/team/app:1.4.2")
  # alone, the policy warns
  run -0 ps_validate clusterwide-resolvable-images "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "actions.unreachable"
  # in the group, the same verdicts are an accept without the warnings
  run -0 ps_validate clusterwide-group-trusted-and-images "$req"
  assert_allowed
  assert_no_message
  assert_no_warnings
}

@test "group images() || trusted(): one member's accept (with a warning) admits, silently" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  # images() rejects, trusted() (absent: warn) accepts with a warning
  run -0 ps_validate clusterwide-group-images-or-trusted "$req"
  assert_allowed
  assert_no_message
  assert_no_warnings
}

@test "group images() || trusted(): both reject: denied with the group's message, both members in the causes" {
  req=$(local_request pod-create.json "app=$REG_ANON/Team/App:1")
  run -0 ps_validate clusterwide-group-images-or-trusted "$req"
  assert_rejected
  assert_message_is "the images must exist or come from a trusted registry"
  assert_causes_are spec.policies.images spec.policies.trusted
  assert_cause_contains spec.policies.images "container \"app\"" "invalid image reference" 'repository path component "Team" has uppercase letters'
  assert_cause_contains spec.policies.trusted "container \"app\"" "invalid image reference"
}

@test "group with a member that mutates (pinDigests): the server counts the patch as that member's rejection" {
  req=$(local_request pod-create.json)
  run -0 ps_validate clusterwide-group-pinned "$req"
  assert_rejected
  assert_message_contains "the images must exist and be pinned"
  assert_causes_are spec.policies.pinned
  assert_cause_contains spec.policies.pinned "mutation is not allowed inside of policy group"
  assert_no_patch
  # a request with nothing to pin passes the same group
  req=$(local_request pod-create.json "app=$REG_ANON/team/app@$(digest_of "$REG_ANON/team/app:1.4.2")" \
    "init-schema=$REG_ANON/platform/migrate@$(digest_of "$REG_ANON/platform/migrate:2.1.0")" sidecar.pull=Never)
  run -0 ps_validate clusterwide-group-pinned "$req"
  assert_allowed
}

@test "group in policyMode monitor: a rejection is admitted, without message; the server logs the verdict" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.7")
  run -0 ps_validate clusterwide-group-monitor "$req"
  assert_allowed
  assert_no_message
  assert_no_warnings
  run -0 grep -F 'policy evaluation (monitor mode)' "$PS_LOG"
  [[ "$output" == *clusterwide-group-monitor* ]] || _fail_with "no monitor-mode log line for the group: $output"
}
