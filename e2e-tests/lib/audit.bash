# shellcheck shell=bash
# Kubewarden's background audit, as the audit scanner does it (kubewarden-controller's
# internal/audit-scanner, Kubewarden 1.36; docs/audit.md says what it sends). The scanner is a
# Go program that needs a cluster; these helpers build its request and read its answer the
# way it does:
#
#   audit_review REQUEST_FILE [JQ_EDIT]  the scanner's AdmissionReview for the object of an
#                                        admission request: prints the new file's path
#   report_result                        pass | fail | error for the AdmissionResponse in
#                                        $output, as report.go records it
#   docs_audit_result VERDICT            the result docs/audit.md promises for VERDICT
#   report_append ID KIND NAME           adds $output's result to the suite's PolicyReport
#                                        excerpt ($AUDIT_REPORT, JSON lines)
#   report_excerpt FILE                  those results as docs/audit.md's excerpt writes them
#   docs_report_excerpt                  the excerpt in docs/audit.md

# audit_review REQUEST_FILE [JQ_EDIT]: the scanner's AdmissionReview for the object of an
# admission request, stored as the API server keeps it (uid, resourceVersion, managedFields,
# status); JQ_EDIT edits the stored object (its status, its ownerReferences).
#
# AUDIT_REQUEST: the jq function audit_request($stored; $kind), that AdmissionReview for a
# stored object of GroupVersionKind $kind, field for field as the scanner's json.Marshal writes
# it; bench/audit.sh builds its sweep with it. internal/audit-scanner/scanner/admission_request.go
# (newAdmissionRequest, newAdmissionReview) fills uid = the object's uid, name, namespace,
# kind = requestKind = its GroupVersionKind, resource = {group, version, resource: <the Kind>}
# (not the plural), operation CREATE and object; nothing else. How k8s.io/api (v0.36.1, its
# go.mod) encodes the rest of admission/v1's AdmissionRequest:
# - userInfo has no omitempty (its members do): `"userInfo": {}`, no user. policy-server 1.36
#   refuses a request without the field.
# - oldObject and options are runtime.RawExtension, a struct, which encoding/json never omits
#   (omitempty does not apply to structs), and an empty RawExtension marshals as null:
#   `"oldObject": null, "options": null`.
# - name, namespace (omitempty strings) are left out when empty; subResource, requestResource,
#   requestSubResource and dryRun (omitempty, unset) are left out.
# - the review's TypeMeta is not set, and kind and apiVersion are omitempty: the scanner's
#   AdmissionReview has no `kind` and no `apiVersion`, only `request` (response is nil and
#   omitempty). policy-server reads both as optional (crates/policy-server/src/api/
#   admission_review.rs).
AUDIT_REQUEST='def audit_request($stored; $kind):
  {request: ({uid: $stored.metadata.uid, kind: $kind,
      resource: {group: $kind.group, version: $kind.version, resource: $kind.kind},
      requestKind: $kind}
    + (if ($stored.metadata.name // "") != "" then {name: $stored.metadata.name} else {} end)
    + (if ($stored.metadata.namespace // "") != "" then {namespace: $stored.metadata.namespace} else {} end)
    + {operation: "CREATE", userInfo: {}, object: $stored, oldObject: null, options: null})};'

audit_review() {
  local file=$1 edit=${2:-.} out uid
  out="${file%.json}-audit-$RANDOM.json"
  uid=$(cat /proc/sys/kernel/random/uuid)
  jq --arg uid "$uid" --arg rv "$((RANDOM + 1000))" "$AUDIT_REQUEST
    .request as \$r
    | (\$r.object | .metadata += {uid: \$uid, resourceVersion: \$rv, generation: 1,
        managedFields: [{manager: \"kubectl-client-side-apply\", operation: \"Update\",
                         apiVersion: \$r.object.apiVersion, fieldsType: \"FieldsV1\", fieldsV1: {}}]}
       | .status = (.status // {}) | $edit) as \$stored
    | audit_request(\$stored; \$r.kind)" "$file" >"$out" || return 1
  printf '%s\n' "$out"
}

# report_result: internal/audit-scanner/report/report.go: an answer with status.code 500 is an
# error, allowed: true a pass, false a fail; warnings are not recorded.
report_result() {
  jq -r 'if .status.code == 500 then "error" elif .allowed then "pass" else "fail" end' <<<"$output"
}

# docs_audit_result VERDICT: the result column of VERDICT's row in docs/audit.md's table.
docs_audit_result() {
  awk -F'|' -v v="\`$1\`" '{ gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3) } $2 == v { print $3; exit }' \
    "$REPO_ROOT/docs/audit.md"
}

# report_append POLICY KIND NAME: $output's result as a PolicyReport result (wgpolicyk8s.io
# v1alpha2, as report.go fills it) for the object KIND team-a/NAME, one JSON line in
# $AUDIT_REPORT.
report_append() {
  [[ -n "${AUDIT_REPORT:-}" ]] || return 0
  jq -c --arg policy "$1" --arg kind "$2" --arg name "$3" --arg result "$(report_result)" '
    {resource: "\($kind) team-a/\($name)", kind: $kind, namespace: "team-a", name: $name,
     policy: $policy, result: $result, message: (.status.message // "")}' \
    <<<"$output" >>"$AUDIT_REPORT"
}

# report_excerpt REPORT_JSONL: the results of REPORT_JSONL as docs/audit.md's PolicyReport
# excerpt writes them: one PolicyReport per result (report.go writes one per resource), its
# scope, and the result's fields as the scanner fills them (internal/audit-scanner/report/
# policyreports.go, newPolicyReportResult: source kubewarden, the policy's unique name, the
# result, message = status.message, left out when empty; no severity or category, since the
# audit instance is in protect mode and carries no io.kubewarden.policy.severity/category
# annotation; timestamp, scored and properties left out). Registry addresses are written
# port-independently ($REG_ANON as 127.0.0.1:5000, $REG_DOWN as 127.0.0.1:5001) and digests as
# sha256:…, so the excerpt does not change from run to run.
report_excerpt() {
  jq -rn --arg anon "${REG_ANON:-}" --arg down "${REG_DOWN:-}" '
    def api: {Deployment: "apps/v1", StatefulSet: "apps/v1", DaemonSet: "apps/v1",
              ReplicaSet: "apps/v1", CronJob: "batch/v1", Job: "batch/v1", Pod: "v1"}[.kind];
    def port_free: (if $anon != "" then split($anon) | join("127.0.0.1:5000") else . end)
      | (if $down != "" then split($down) | join("127.0.0.1:5001") else . end)
      | gsub("sha256:[0-9a-f]{64}"; "sha256:…");
    [inputs] | to_entries[]
    | (if .key > 0 then "---" else empty end),
      (.value
       | "apiVersion: wgpolicyk8s.io/v1alpha2", "kind: PolicyReport",
         "scope: {apiVersion: \(api), kind: \(.kind), namespace: \(.namespace), name: \(.name)}",
         "results:", "- source: kubewarden", "  policy: \(.policy)", "  result: \(.result)",
         (if .message == "" then empty
          else "  message: |-", (.message | port_free | split("\n")[] | "    \(.)") end))' \
    "$1"
}

# docs_report_excerpt: docs/audit.md's PolicyReport excerpt, the ```yaml block after the line
# `<!-- checked by e2e-tests/98-audit.bats -->`, without its comment lines.
docs_report_excerpt() {
  awk '/^<!-- checked by e2e-tests\/98-audit.bats -->/ { marked = 1; next }
       marked && !inside && /^```yaml/ { inside = 1; next }
       inside && /^```/ { exit }
       inside && !/^ *#/ { print }' "$REPO_ROOT/docs/audit.md"
}
