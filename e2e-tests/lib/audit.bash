# shellcheck shell=bash
# Kubewarden's background audit, as the audit scanner does it (kubewarden-controller at
# 3460bb719b3816ddf5eb958665282c9b9ce8ee29; ../shared/reference/audit-scanner.md). The scanner
# is a Go program that cannot be built here; these helpers build its request and read its
# answer the way it does:
#
#   audit_review REQUEST_FILE [JQ_EDIT]  the scanner's AdmissionReview for the object of an
#                                        admission request: prints the new file's path
#   report_result                        pass | fail | error for the AdmissionResponse in
#                                        $output, as report.go records it
#   docs_audit_result VERDICT            the result docs/audit.md promises for VERDICT
#   report_append ID KIND NAME           adds $output's result to the suite's PolicyReport
#                                        excerpt ($AUDIT_REPORT, JSON lines)

# audit_review REQUEST_FILE [JQ_EDIT]: internal/audit-scanner/scanner/admission_request.go,
# newAdmissionRequest: uid = the object's uid, kind = requestKind = its GroupVersionKind,
# resource = {group, version, resource: <the Kind>} (not the plural), operation CREATE, the
# object as stored (uid, resourceVersion, managedFields, status), no user, no oldObject, no
# dryRun. Go's encoding/json writes the empty user as `"userInfo": {}` (the field has no
# omitempty; its members do), and policy-server 1.36 refuses a request without the field. JQ_EDIT edits the stored object (its status, its ownerReferences).
# AUDIT_REQUEST: the jq function audit_request($stored; $kind), the scanner's AdmissionReview
# for a stored object of GroupVersionKind $kind (above); bench/audit.sh builds its sweep with it.
AUDIT_REQUEST='def audit_request($stored; $kind):
  {kind: "AdmissionReview", apiVersion: "admission.k8s.io/v1",
   request: {uid: $stored.metadata.uid, kind: $kind, requestKind: $kind,
     resource: {group: $kind.group, version: $kind.version, resource: $kind.kind},
     name: $stored.metadata.name, namespace: $stored.metadata.namespace,
     operation: "CREATE", userInfo: {}, object: $stored}};'

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
# v1alpha2, as report.go fills it), one JSON line in $AUDIT_REPORT.
report_append() {
  [[ -n "${AUDIT_REPORT:-}" ]] || return 0
  jq -c --arg policy "$1" --arg kind "$2" --arg name "$3" --arg result "$(report_result)" '
    {resource: "\($kind) team-a/\($name)", policy: $policy, result: $result,
     message: (.status.message // "")}' \
    <<<"$output" >>"$AUDIT_REPORT"
}
