#!/usr/bin/env bats
# Certain means certain: `reject` only for pulls that will certainly fail, and never a word
# more than a user may read. One numbered section per case where that is at stake, each against
# real registries (Debian's docker-registry on 127.0.0.1 and on [::1], an htpasswd registry, a
# web server that is not a registry, a port that never answers), asserting the decision and the
# text. tests/certainty.rs proves the same points natively; this suite proves them through a
# host: the test host and (E2E_HOST=kwctl) the real kwctl, which reads Kubernetes objects from
# the fake API server serving the same cluster directory. What was (not) asked is read from
# recorded sessions (--record-host-capabilities-interactions, on both hosts).
#
# Where the hosts differ:
# - Point 3, a registry on [::1]: neither host can look up a bracketed IPv6 reference. The test
#   host's oci-client answers "Invalid OCI image reference: invalid reference format", kwctl
#   1.36 "invalid reference format"; neither sends a request (the registry's access log stays
#   empty). So the image that exists is not confirmed and the missing tag is not proven
#   missing: both are "cannot be parsed by the policy server … no request sent; the kubelet
#   pulls it" (not "registry unreachable", which is not what happened),
#   never invalidReference, never a rejection. (skopeo 1.9 refuses the reference
#   too, so the images are pushed while the same storage is served on 127.0.0.1.)
# - Point 6: kwctl's own log (policy-evaluator's "callback evaluation failed") prints the host
#   error with the page in it; that is the operator's log, not the policy's. The policy's
#   answer holds nothing of the page on either host, and on the test host, whose stderr carries
#   only the guest's log events, neither do the policy's logs.
# - Point 10, a registry that never answers: on a policy server 1.36 one request whose image
#   names such a host holds upstream's lookup cache lock, so every later lookup of every
#   request waits behind it. Neither host here can show that: each evaluates one request per
#   process (and the test host bounds a lookup with --oci-timeout-secs, default 10 s; kwctl
#   has no bound and would hang), so one request's hang cannot block another's lookups. What
#   this suite proves is the policy-side mitigation: with lookupRegistries, an image on any
#   other registry makes no host call (the hung endpoint sees no connection) and the decision
#   arrives at once. Without it the lookup goes out and hangs until the host's time-out, as in
#   35-faults.bats (test host only).

bats_require_minimum_version 1.5.0

load lib/certainty_suite

setup_file() {
  certainty_setup_file || return 0
  # Tags that existed and were deleted from the registry (by digest, as retention does).
  vanish_image anon team/app:gone
  vanish_image anon team/web:gone
}

setup() {
  certainty_setup
  # Each test gets its own cluster: the standard ServiceAccounts plus what the test adds.
  E2E_CLUSTER="$BATS_TEST_TMPDIR/cluster"
  mkdir -p "$E2E_CLUSTER"
  cp "$(e2e_workdir)/cluster/default/"*.yaml "$E2E_CLUSTER/"
}

# The helpers a test started (lib/certainty.bash) end with it; the registries with the file.
teardown() {
  local name
  for name in v6 page404 page200 hung; do registry_stop "$name"; done
}

# run_recorded REQUEST [HOST OPTIONS...]: policy_run, recording the host calls into $SESSION
# (a new file each time; policy_run keeps it for the suite-wide secret scan).
run_recorded() {
  rm -f "$SESSION"
  policy_run "$@" --record-host-capabilities-interactions "$SESSION"
}

# assert_nothing_says TEXT...: neither the response nor anything else on stdout contains TEXT.
assert_nothing_says() {
  local s
  for s in "$@"; do
    [[ "$output" != *"$s"* ]] || _fail_with "the response contains: $s" || return 1
  done
}

# ---------------------------------------------------------------------------------------------
# 1. Pods created by controllers, and mirror Pods

@test "1. a controller's Pod whose tag was deleted (ReplicaSet, Job, StatefulSet): admitted, no lookup" {
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  # The tag is really gone: the same Pod without an owner is rejected.
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"c0\"" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON"
  local owner
  for owner in apps/v1:ReplicaSet batch/v1:Job apps/v1:StatefulSet; do
    owned_by "$req" "${owner%%:*}" "${owner#*:}"
    run -0 --separate-stderr run_recorded "$req"
    assert_allowed
    assert_no_message
    assert_warning_count 0
    assert_session_lookups "$SESSION" 0
  done
}

@test "1. ownedPods: check: the ReplicaSet's Pod is looked up and rejected" {
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  owned_by "$req" apps/v1 ReplicaSet
  settings=$(write_settings owned-check '{"ownedPods": "check"}')
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "Pod team-a/web: 1 image will not pull" "container \"c0\"" \
    "$REG_ANON/team/app:gone" "not found on registry $REG_ANON" "manifest unknown"
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:gone"
}

@test "1. an ephemeral container added to an owned Pod is still checked" {
  # kubectl debug on a ReplicaSet's Pod whose own tag was deleted since.
  req=$(local_request pod-ephemeral-update.json "app=$REG_ANON/team/app:gone" \
    "object:debugger=$REG_ANON/library/alpine:9.9.9")
  owned_by "$req" apps/v1 ReplicaSet
  run -0 --separate-stderr run_recorded "$req"
  assert_rejected
  assert_message_contains "ephemeral container \"debugger\"" "$REG_ANON/library/alpine:9.9.9" "not found on registry $REG_ANON"
  assert_message_lacks "container \"app\""
  assert_session_lookups "$SESSION" 1
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/library/alpine:9.9.9"

  # an existing debug image is admitted
  req=$(local_request pod-ephemeral-update.json "app=$REG_ANON/team/app:gone")
  owned_by "$req" apps/v1 ReplicaSet
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_count 0
}

@test "1. a mirror Pod (kubernetes.io/config.mirror) is never checked, even with ownedPods: check" {
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  request_edit "$req" '.request.object.metadata.annotations = {"kubernetes.io/config.mirror": "3c2b1a0f9e8d7c6b", "kubernetes.io/config.source": "file"}'
  settings=$(write_settings owned-check '{"ownedPods": "check"}')
  for s in "$SCENARIOS_DIR/defaults.json" "$settings"; do
    run -0 --separate-stderr run_recorded "$req" --settings-path "$s"
    assert_allowed
    assert_no_message
    assert_warning_count 0
    assert_session_empty "$SESSION"
  done
}

# ---------------------------------------------------------------------------------------------
# 2. IfNotPresent images that nodes already have

@test "2. a deleted IfNotPresent tag a Node still lists: admitted with cachedOnNodes naming the node" {
  { node_yaml worker-cache-1 "$REG_ANON/team/app:gone" "$REG_ANON/library/busybox:1.36"
    node_yaml worker-fresh-1; } | cluster_add "$E2E_CLUSTER" 20-nodes.yaml
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  request_edit_pod_spec "$req" '.containers[0].imagePullPolicy = "IfNotPresent"'
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 1
  # the cause first, whole within the 256 bytes of a warning
  assert_warning_contains "container \"c0\" image \"$REG_ANON/team/app:gone\": not found (cached on nodes)"
  assert_warning_contains "allowed (actions.cachedOnNodes: warn): before 1.35 any pod starts from it; from 1.35, by default, only one preloaded or pulled without pod credentials"
  # the nodes and the registry's answer, cut from the warning, are in the audit annotation
  jq -e '.auditAnnotations["resolvable-images/warnings"] | contains("cached on 1 node(s) (worker-cache-1); the registry said:")' <<<"$output" >/dev/null ||
    _fail_with "the whole warning is not in the audit annotation"
  # the Nodes were listed once, after the 404
  [[ "$(session_kinds "$SESSION" | tr '\n' ' ')" == "OciManifestDigest KubernetesListResourceAll " ]] ||
    { session_requests "$SESSION" >&2; false; }

  # the default pull policy of a tag is IfNotPresent too
  request_edit_pod_spec "$req" 'del(.containers[0].imagePullPolicy)'
  run -0 --separate-stderr policy_run "$req"
  assert_allowed
  assert_warning_contains "not found (cached on nodes)" "before 1.35 any pod starts from it"
}

@test "2. the same image with imagePullPolicy Always: rejected, and the Nodes are not read" {
  node_yaml worker-cache-1 "$REG_ANON/team/app:gone" | cluster_add "$E2E_CLUSTER" 20-nodes.yaml
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  request_edit_pod_spec "$req" '.containers[0].imagePullPolicy = "Always"'
  run -0 --separate-stderr run_recorded "$req"
  assert_rejected
  assert_message_contains "container \"c0\"" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON"
  assert_message_lacks "cached on"
  [[ "$(session_kinds "$SESSION" | tr '\n' ' ')" == "OciManifestDigest " ]] ||
    { session_requests "$SESSION" >&2; false; }
}

@test "2. Nodes that list only another tag prove nothing: rejected" {
  node_yaml worker-cache-1 "$REG_ANON/team/app:1.4.2" | cluster_add "$E2E_CLUSTER" 20-nodes.yaml
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  run -0 --separate-stderr policy_run "$req"
  assert_rejected
  assert_message_contains "container \"c0\"" "not found on registry $REG_ANON"
}

# ---------------------------------------------------------------------------------------------
# 3. A registry on [::1]

@test "3. a registry listening on [::1]: never invalidReference, never rejected; 'cannot be parsed by the policy server'" {
  ipv6_registry_start v6 app:1
  # The registry serves the image: a kubelet (containerd) pulls [::1]:PORT/app:1.
  [[ "$(curl -g -s --noproxy '*' -o /dev/null -w '%{http_code}' -I \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$REG_V6/v2/app/manifests/1")" == 200 ]]
  # [::1] is loopback, but the guard of lib/scenario.bash knows 127.0.0.1 and localhost only.
  local E2E_ALLOW_IMAGES="$REG_V6/app:1 $REG_V6/app:9.9.9"
  req=$(certainty_pod "$REG_V6/app:1" "$REG_V6/app:9.9.9")
  sources=$(write_sources_yaml v6 --insecure "$REG_V6")
  before=$(grep -c '/v2/app/manifests' "$(e2e_workdir)/registries/v6/registry.log" || true)
  run -0 --separate-stderr run_recorded "$req" --sources-path "$sources"
  assert_allowed
  assert_no_message
  assert_warning_count 2
  assert_nothing_says "invalid image reference" "invalidReference"
  # Both hosts' OCI clients refuse the bracketed host before any request: the existing tag
  # cannot be confirmed, and the missing one cannot be proven missing.
  local detail="Invalid OCI image reference"              # the test host (oci-client's parser)
  on_kwctl && detail="invalid reference format"           # kwctl 1.36
  for image in "$REG_V6/app:1" "$REG_V6/app:9.9.9"; do
    assert_warning_contains "image \"$image\": cannot be parsed by the policy server on registry $REG_V6; allowed (actions.unreachable: warn)" \
      "no request sent; the kubelet pulls it: " "$detail"
  done
  # Nothing was unreachable: no request left the host, so no message may say it was.
  assert_nothing_says "registry unreachable"
  # Each host's answer to the lookup, as its session recorded it (the first line).
  local answer="message: 'Invalid OCI image reference: invalid reference format'"
  on_kwctl && answer="message: invalid reference format"
  [[ "$(grep -c -xF "    $answer" "$SESSION")" == 2 ]] || { cat "$SESSION" >&2; _fail_with "expected two answers: $answer"; }
  after=$(grep -c '/v2/app/manifests' "$(e2e_workdir)/registries/v6/registry.log" || true)
  [[ "$after" == "$before" ]] || _fail_with "the [::1] registry was asked after all: $(tail -n 3 "$(e2e_workdir)/registries/v6/registry.log")"
}

# ---------------------------------------------------------------------------------------------
# 4. Custom kinds with template placeholders

# taskrun_request IMAGE: a Tekton-like TaskRun CREATE in team-a whose pod template holds
# placeholders in typed fields the policy does not read.
taskrun_request() {
  local file
  file="$(e2e_workdir)/requests/taskrun.$RANDOM.json"
  mkdir -p "$(dirname "$file")"
  jq -n --arg image "$1" --arg other "$REG_ANON/library/busybox:1.36" '{
    apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
    request: {uid: "4d3c2b1a-0f9e-4d8c-9b7a-665544332211",
      kind: {group: "tekton.dev", version: "v1", kind: "TaskRun"},
      resource: {group: "tekton.dev", version: "v1", resource: "taskruns"},
      requestKind: {group: "tekton.dev", version: "v1", kind: "TaskRun"},
      requestResource: {group: "tekton.dev", version: "v1", resource: "taskruns"},
      name: "build", namespace: "team-a", operation: "CREATE",
      userInfo: {username: "kubernetes-admin", groups: ["system:authenticated"]},
      object: {apiVersion: "tekton.dev/v1", kind: "TaskRun",
        metadata: {name: "build", namespace: "team-a", creationTimestamp: null},
        spec: {podTemplate: {
          terminationGracePeriodSeconds: "{{workflow.parameters.grace}}",
          securityContext: {runAsUser: "$(params.uid)"},
          containers: [
            {name: "step", image: $image, ports: "{{inputs.parameters.ports}}",
             resources: {limits: {cpu: "{{cpu}}"}}},
            {name: "report", image: $other, ports: [{containerPort: "{{inputs.parameters.port}}"}]}]}}},
      oldObject: null, dryRun: false,
      options: {kind: "CreateOptions", apiVersion: "meta.k8s.io/v1"}}}' >"$file"
  assert_loopback_only "$file" || return 1
  printf '%s\n' "$file"
}

@test "4. a custom kind with placeholders in fields the policy does not read: a missing tag is rejected, not a 400" {
  settings=$(write_settings taskrun '{"customResources": [{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "podSpecs": ["$.spec.podTemplate"]}]}')
  req=$(taskrun_request "$REG_ANON/team/app:9.9.9")
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  [[ "$(jq -r '.status.code // "none"' <<<"$output")" != 400 ]] || _fail_with "a 400"
  assert_message_contains "TaskRun team-a/build: 1 image will not pull" "container \"step\"" \
    "$REG_ANON/team/app:9.9.9" "not found on registry $REG_ANON"
}

@test "4. a custom kind with placeholders in fields the policy does not read: an existing tag is admitted" {
  settings=$(write_settings taskrun '{"customResources": [{"apiVersion": "tekton.dev/v1", "kind": "TaskRun", "podSpecs": ["$.spec.podTemplate"]}]}')
  req=$(taskrun_request "$REG_ANON/team/app:1.4.2")
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:1.4.2"
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/library/busybox:1.36"
}

# ---------------------------------------------------------------------------------------------
# 5. Warnings within Kubernetes' limits

@test "5. twenty unverifiable images on an htpasswd registry: one grouped warning within the limits, all 20 in the audit annotation" {
  local -a images=()
  for i in $(seq 0 19); do images+=("$REG_AUTH/private/app-$i:1"); done
  req=$(certainty_pod "${images[@]}")
  # 20 lookups must all end as "not authorized": a time budget no loaded machine spends (kwctl
  # tries HTTPS before plain HTTP on each), so that none ends as "not checked in time".
  run -0 --separate-stderr policy_run "$req" --settings-json '{"timeBudgetMs": 20000}'
  assert_allowed
  assert_no_message
  jq -e '(.warnings | length) >= 1 and all(.warnings[]; utf8bytelength <= 256)
         and ([.warnings[] | utf8bytelength] | add) <= 4096' <<<"$output" >/dev/null ||
    _fail_with "warnings beyond 256 bytes each or 4096 together"
  assert_warning_count 1
  assert_warning_contains "20 images on registry $REG_AUTH: not authorized; allowed (actions.uncoveredRegistry: warn); all in the audit annotation resolvable-images/warnings: container \"c0\" image \"$REG_AUTH/private/app-0:1\""
  annotation=$(jq -r '.auditAnnotations["resolvable-images/warnings"] // ""' <<<"$output")
  [[ "$(grep -c . <<<"$annotation")" == 20 ]] || _fail_with "the audit annotation does not hold 20 warnings: $annotation"
  for i in $(seq 0 19); do
    grep -qF "container \"c$i\" image \"$REG_AUTH/private/app-$i:1\": not authorized on registry $REG_AUTH" <<<"$annotation" ||
      _fail_with "the audit annotation lacks c$i"
  done
}

# ---------------------------------------------------------------------------------------------
# 6. Internal services are not read back to the user

@test "6. a web server answering 404 with an HTML page: the page is described by its size, never quoted" {
  web_start page404 404
  req=$(certainty_pod "$WEB_PAGE404/admin/console:1")
  sources=$(write_sources_yaml web --insecure "$WEB_PAGE404")
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources"
  assert_nothing_says "$WEB_SECRET" "alice" "0xfeedbeef" "<html" "Admin console"
  grep -q '/v2/admin/console/manifests/1' "$(e2e_workdir)/registries/page404/web.log" || _fail_with "the server was not asked"
  # The policy's own log lines do not quote it either (test host: its stderr carries only the
  # guest's log events; kwctl's stderr also has kwctl's own log, which prints the host error,
  # page included, for the operator).
  if ! on_kwctl; then [[ "$stderr" != *"$WEB_SECRET"* ]] || _fail_with "the guest logged the page"; fi
  # A 404 is a 404: the registry-shaped answer says the image is not there.
  assert_rejected
  assert_message_contains "container \"c0\"" "not found on registry $WEB_PAGE404" \
    "code: 404, a non-registry body of $WEB_PAGE404_BYTES bytes"
}

@test "6. a web server answering 200 with an HTML page: nothing of the page in the answer" {
  web_start page200 200
  req=$(certainty_pod "$WEB_PAGE200/admin/console:1")
  sources=$(write_sources_yaml web --insecure "$WEB_PAGE200")
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources"
  assert_nothing_says "$WEB_SECRET" "alice" "0xfeedbeef" "<html" "Admin console"
  grep -q '/v2/admin/console/manifests/1' "$(e2e_workdir)/registries/page200/web.log" || _fail_with "the server was not asked"
  # oci/v1/manifest_digest hashes whatever a 200 serves: "it exists", nothing to say.
  assert_allowed
  assert_no_message
  assert_warning_count 0
}

@test "6. a registry at a link-local address (169.254.169.254) is never asked" {
  # Not loopback: the policy must not ask it, which the session below proves; the default
  # deniedLookupNetworks apply (scenarios/defaults.json is {}).
  local E2E_ALLOW_IMAGES="169.254.169.254/latest/meta-data:1"
  req=$(certainty_pod "169.254.169.254/latest/meta-data:1")
  start=$(millis)
  run -0 --separate-stderr run_recorded "$req"
  elapsed=$(($(millis) - start))
  assert_allowed
  assert_no_message
  assert_warning_count 1
  assert_warning_contains "container \"c0\" image \"169.254.169.254/latest/meta-data:1\": not looked up on registry 169.254.169.254; allowed (actions.notLookedUp: warn)" \
    "not looked up: 169.254.169.254 is in 169.254.0.0/16, a network lookups are never sent to (deniedLookupNetworks"
  assert_session_lookups "$SESSION" 0
  echo "# decided in ${elapsed} ms" >&3
}

# ---------------------------------------------------------------------------------------------
# 7. UPDATEs that change what decides a pull

# scale_update [JQ-EXPR]: the Deployment scale-only UPDATE (deployment-update-scale.json) with
# every container on a deleted tag in both objects, and JQ-EXPR applied to the new template only.
scale_update() {
  local req
  req=$(local_request deployment-update-scale.json "app=$REG_ANON/team/app:gone" \
    "init-schema=$REG_ANON/team/web:gone" "sidecar=$REG_ANON/library/busybox:1.36")
  [[ -z "${1:-}" ]] || request_edit "$req" ".request.object.spec.template.spec |= ($1)"
  printf '%s\n' "$req"
}

@test "7. a scale-only UPDATE of a Deployment whose tags were deleted: admitted, nothing looked up" {
  req=$(scale_update)
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_warning_count 0
  assert_session_lookups "$SESSION" 0
}

@test "7. an UPDATE that adds imagePullSecrets: every image checked again, the deleted tags rejected" {
  pull_secret_yaml team-a regcred "$REG_ANON" someone something | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(scale_update '.imagePullSecrets = [{name: "regcred"}]')
  run -0 --separate-stderr run_recorded "$req"
  assert_rejected
  assert_message_contains "Deployment team-a/web: 2 images will not pull" \
    "container \"app\" image \"$REG_ANON/team/app:gone\": not found on registry $REG_ANON" \
    "init container \"init-schema\" image \"$REG_ANON/team/web:gone\": not found on registry $REG_ANON"
  assert_session_lookups "$SESSION" 3
}

@test "7. an UPDATE that changes serviceAccountName: every image checked again" {
  printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: builder" "  namespace: team-a" |
    cluster_add "$E2E_CLUSTER" 11-builder.yaml
  req=$(scale_update '.serviceAccountName = "builder"')
  run -0 --separate-stderr run_recorded "$req"
  assert_rejected
  assert_message_contains "2 images will not pull" "container \"app\"" "not found on registry $REG_ANON"
  assert_session_lookups "$SESSION" 3
}

@test "7. an UPDATE that changes nodeSelector: checked again with requiredPlatforms, not without" {
  req=$(scale_update '.nodeSelector = {"kubernetes.io/arch": "amd64"}')
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_warning_count 0
  assert_session_lookups "$SESSION" 0

  settings=$(write_settings platforms-amd64 '{"requiredPlatforms": ["linux/amd64"]}')
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "2 images will not pull" "container \"app\"" "not found on registry $REG_ANON"
  assert_session_asked "$SESSION" OciManifestDigest "$REG_ANON/team/app:gone"
}

# ---------------------------------------------------------------------------------------------
# 8. An empty pull secret name

@test "8. a template whose imagePullSecrets is [{name: \"\"}]: the ServiceAccount's secret is not used" {
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: builder" "  namespace: team-a" \
    "imagePullSecrets:" "  - name: regcred" | cluster_add "$E2E_CLUSTER" 11-builder.yaml
  req=$(local_request deployment-create.json "app=$REG_AUTH/private/app:v1")
  request_edit_pod_spec "$req" '.serviceAccountName = "builder"'
  # The control: with no list, the plugin copies the ServiceAccount's secret, which covers the
  # registry (the 401 is the policy server's, not the pod's).
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" "the pod's pull secrets cover $REG_AUTH"
  session_kinds "$SESSION" | grep -qx KubernetesGetResource || { session_requests "$SESSION" >&2; false; }

  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: ""}]'
  run -0 --separate-stderr run_recorded "$req"
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "container \"app\"" "not authorized on registry $REG_AUTH" "actions.uncoveredRegistry" \
    "no pull secret in namespace team-a covers $REG_AUTH"
  # Neither the ServiceAccount nor a secret "" was read.
  [[ -z "$(session_kinds "$SESSION" | grep -v '^Oci' || true)" ]] ||
    { printf 'Kubernetes objects were read:\n' >&2; session_requests "$SESSION" >&2; false; }
  [[ "$output" != *"$REG_AUTH_PASSWORD"* ]]
}

# ---------------------------------------------------------------------------------------------
# 9. A 404 seen by another identity

@test "9. a 404 from a registry in notFoundMayMeanDenied, the pod holding a secret for it: admitted as unauthorized" {
  pull_secret_yaml team-a regcred "$REG_ANON" someone something | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  settings=$(write_settings hiding '{"notFoundMayMeanDenied": ["127.0.0.1*"]}')
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_allowed
  assert_no_message
  assert_warning_count 1
  assert_warning_contains "container \"c0\" image \"$REG_ANON/team/app:gone\": not authorized on registry $REG_ANON; allowed (actions.unauthorized: warn)" \
    "$REG_ANON may answer 404 to hide repositories from callers without access (notFoundMayMeanDenied)"

  # without a secret for it the node pulls anonymously and sees the same 404
  request_edit_pod_spec "$req" 'del(.imagePullSecrets)'
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"c0\"" "not found on registry $REG_ANON"
}

@test "9. notFoundMayMeanDenied: [] trusts the 404: rejected" {
  pull_secret_yaml team-a regcred "$REG_ANON" someone something | cluster_add "$E2E_CLUSTER" 10-secret.yaml
  req=$(certainty_pod "$REG_ANON/team/app:gone")
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  settings=$(write_settings trusting '{"notFoundMayMeanDenied": []}')
  run -0 --separate-stderr policy_run "$req" --settings-path "$settings"
  assert_rejected
  assert_message_contains "container \"c0\"" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON" "manifest unknown"
  assert_message_lacks "notFoundMayMeanDenied"
}

# ---------------------------------------------------------------------------------------------
# 10. A registry that never answers

@test "10. a hung registry outside lookupRegistries: decided at once, never contacted, 'not in lookupRegistries'" {
  hang_start hung
  req=$(certainty_pod "$REG_HUNG/team/app:1.4.2" "$REG_ANON/team/app:gone")
  sources=$(write_sources_yaml hung --insecure "$REG_ANON" --insecure "$REG_HUNG")
  settings=$(write_settings lookup-anon "$(jq -n --arg r "$REG_ANON" '{lookupRegistries: [$r]}')")
  start=$(millis)
  run -0 --separate-stderr run_recorded "$req" --settings-path "$settings" --sources-path "$sources"
  elapsed=$(($(millis) - start))
  # the listed registry is still asked, and its 404 still rejects
  assert_rejected
  assert_message_contains "container \"c1\"" "$REG_ANON/team/app:gone" "not found on registry $REG_ANON"
  assert_warning_count 1
  assert_warning_contains "container \"c0\" image \"$REG_HUNG/team/app:1.4.2\": not looked up on registry $REG_HUNG; allowed (actions.notLookedUp: warn): not looked up: registry $REG_HUNG is not in lookupRegistries"
  assert_session_lookups "$SESSION" 1
  assert_session_never_mentions "$SESSION" "$REG_HUNG"
  [[ "$(hang_connections hung)" == 0 ]] || _fail_with "the hung registry was contacted"
  echo "# decided in ${elapsed} ms" >&3
  # a host start-up and one lookup; a hung lookup would take the host's 10 s time-out (test
  # host) or forever (kwctl)
  ((elapsed < 8000)) || _fail_with "the decision took ${elapsed} ms"
}

@test "10. without lookupRegistries the hung registry is asked: the host's time-out, then 'registry unreachable' (as 35-faults)" {
  skip_on_kwctl "--oci-timeout-secs: kwctl has no time-out for OCI lookups; a registry that never answers hangs it"
  hang_start hung
  req=$(certainty_pod "$REG_HUNG/team/app:1.4.2")
  sources=$(write_sources_yaml hung --insecure "$REG_HUNG")
  start=$(millis)
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources" --oci-timeout-secs 2
  elapsed=$(($(millis) - start))
  assert_allowed
  assert_warning_contains "container \"c0\"" "registry unreachable on registry $REG_HUNG" "actions.unreachable" "timed out"
  (("$(hang_connections hung)" >= 1)) || _fail_with "the hung registry was not contacted"
  ((elapsed >= 2000)) || _fail_with "decided in ${elapsed} ms, before the host's time-out"
}
