# shellcheck shell=bash
# Running the policy in the test host (or kwctl) and asserting on its AdmissionResponse
# ({uid, allowed, status: {message, code}, warnings: [...]}). The assertions read bats'
# $output, so call the host with `run --separate-stderr policy_run ...` (host logs stay out).

# on_kwctl: true when this run evaluates the policy with kwctl (E2E_HOST=kwctl).
on_kwctl() { [[ "$E2E_HOST" == kwctl ]]; }

# host_ready: true when the host of this run (the test host, or kwctl) and the policy are
# built. Outside CI a missing build skips the scenarios; in CI (CI=true) it is an error, so a
# broken build cannot pass as skips.
host_ready() {
  [[ -f "$POLICY_WASM" ]] || return 1
  if on_kwctl; then
    [[ -n "$KWCTL" && -x "$KWCTL" ]]
  else
    [[ -x "$POLICY_HOST" ]]
  fi
}

# require_host: in bats `setup`: skip (or fail in CI) when the host or the policy is missing.
require_host() {
  host_ready && return 0
  local why="test-host ($POLICY_HOST) or the policy ($POLICY_WASM) is not built; run 'make policy.wasm' and build crates/test-host"
  on_kwctl && why="E2E_HOST=kwctl needs KWCTL, an executable kwctl (KWCTL='$KWCTL'), and the policy ($POLICY_WASM)"
  if [[ "${CI:-}" == true ]]; then
    echo "$why" >&2
    return 1
  fi
  skip "$why"
}

# skip_on_kwctl REASON: in a test, before its first policy_run: skips the test on kwctl, for
# what only the test host can do (REASON says what). policy_run refuses the test-host-only
# options on kwctl, so a test that forgets this fails instead of testing something else.
skip_on_kwctl() {
  if on_kwctl; then skip "test host only: $1"; fi
}

# kwctl_exec ARGS...: kwctl, isolated: its own HOME ($E2E_KWCTL_HOME), RUST_BACKTRACE unset
# (kwctl would print backtraces into host errors), KUBECONFIG only when $KWCTL_KUBECONFIG names
# one (else Kubernetes reads fail as on a host without a cluster).
kwctl_exec() {
  mkdir -p "$E2E_KWCTL_HOME"
  env -u RUST_BACKTRACE -u KUBECONFIG HOME="$E2E_KWCTL_HOME" \
    ${KWCTL_KUBECONFIG:+KUBECONFIG="$KWCTL_KUBECONFIG"} "$KWCTL" "$@"
}

# kwctl_trust_config: prints the path of an offline sigstore trust configuration (a
# ClientTrustConfig with a Fulcio CA, Rekor and CT log keys generated here, no URL that
# resolves), made once per kwctl HOME. Without one, `kwctl run` first tries to download
# sigstore's trust root from the internet; an empty one makes live runs fail ("Fulcio
# certificates not found"). Nothing here is ever verified against it.
kwctl_trust_config() {
  local dir="$E2E_KWCTL_HOME/sigstore" new ca pub kid
  if [[ ! -s "$dir/trust-config.json" ]]; then
    # made in a directory of its own and renamed into place: suites run two at a time share
    # this HOME, and two writing the same files at once made one fail
    mkdir -p "$dir" && new=$(mktemp -d "$dir/new.XXXXXX") || return 1
    openssl ecparam -name prime256v1 -genkey -noout -out "$new/ca.key" 2>/dev/null &&
      openssl req -x509 -new -key "$new/ca.key" -sha256 -days 3650 -subj "/O=e2e/CN=e2e offline fulcio" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        -outform DER -out "$new/ca.der" 2>/dev/null &&
      openssl ec -in "$new/ca.key" -pubout -outform DER -out "$new/pub.der" 2>/dev/null || return 1
    ca=$(base64 -w0 "$new/ca.der") pub=$(base64 -w0 "$new/pub.der")
    kid=$(openssl dgst -sha256 -binary "$new/pub.der" | base64 -w0)
    jq -n --arg ca "$ca" --arg pub "$pub" --arg kid "$kid" '
      {rawBytes: $pub, keyDetails: "PKIX_ECDSA_P256_SHA_256", validFor: {start: "2020-01-01T00:00:00Z"}} as $key
      | {mediaType: "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
         trustedRoot: {mediaType: "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
           tlogs: [{baseUrl: "https://rekor.invalid", hashAlgorithm: "SHA2_256", publicKey: $key, logId: {keyId: $kid}}],
           certificateAuthorities: [{subject: {organization: "e2e", commonName: "e2e offline fulcio"},
             uri: "https://fulcio.invalid", certChain: {certificates: [{rawBytes: $ca}]},
             validFor: {start: "2020-01-01T00:00:00Z"}}],
           ctlogs: [{baseUrl: "https://ctfe.invalid", hashAlgorithm: "SHA2_256", publicKey: $key, logId: {keyId: $kid}}],
           timestampAuthorities: []},
         signingConfig: {mediaType: "application/vnd.dev.sigstore.signingconfig.v0.2+json",
           caUrls: [], oidcUrls: [], rekorTlogUrls: [], tsaUrls: [],
           rekorTlogConfig: {selector: "ANY"}, tsaConfig: {selector: "ANY"}}}' >"$new/trust-config.json" &&
      mv -f "$new/trust-config.json" "$dir/trust-config.json" || return 1
    rm -rf "$new"
  fi
  printf '%s\n' "$dir/trust-config.json"
}

# _kwctl_run_command REQUEST [HOST OPTIONS...]: sets the caller's `cmd` and `KWCTL_KUBECONFIG`
# to the kwctl run that does what `test-host run` does with these options. Most flags are
# kwctl's own; --cluster-dir DIR becomes the fake API server (lib/fake_apiserver.py) serving
# DIR, named by a kubeconfig; --host-capabilities becomes --allowed-host-capabilities. Options
# kwctl has no equivalent for fail: the test must call skip_on_kwctl.
_kwctl_run_command() {
  local request=$1 cap
  shift
  local -a args=() caps=()
  while (($#)); do
    case "$1" in
      --cluster-dir) KWCTL_KUBECONFIG=$(apiserver_serve "$2") || return 1; shift 2 ;;
      --host-capabilities)
        [[ -n "$2" ]] || { echo "policy_run: kwctl cannot be given an empty allow-list" >&2; return 1; }
        IFS=, read -ra caps <<<"$2"
        for cap in "${caps[@]}"; do args+=("--allowed-host-capabilities=$cap"); done
        shift 2 ;;
      -m | --metadata-path | --host-capabilities=* | --enable-resolve-images | --oci-timeout-secs)
        echo "policy_run: kwctl has no equivalent of $1: the test must call skip_on_kwctl" >&2
        return 1 ;;
      *) args+=("$1"); shift ;;
    esac
  done
  local trust
  trust=$(kwctl_trust_config) || { echo "policy_run: could not write the sigstore trust config" >&2; return 1; }
  cmd=(kwctl_exec run "$POLICY_WASM" --sigstore-trust-config "$trust" --request-path "$request" "${args[@]}")
}

# policy_run REQUEST [HOST OPTIONS...]: evaluates REQUEST with the policy, as a
# ClusterAdmissionPolicy with its contextAwareResources granted would be, on the host of this
# run (the options are the test host's; see _kwctl_run_command for kwctl). Unless the options
# say otherwise: default settings (scenarios/defaults.json); the cluster is $E2E_CLUSTER (the
# namespaces' default ServiceAccounts, see write_cluster_dir); the host's sources.yaml is
# $E2E_SOURCES (the plain-HTTP test registries marked insecure), since the host, like kwctl,
# speaks HTTPS only to registries not listed there. Set E2E_NO_CONTEXT=1 to deny Kubernetes reads.
policy_run() {
  local request=$1
  shift
  local -a opts=("$@")
  local given=" ${opts[*]} "
  if [[ "$given" != *" --settings-json "* && "$given" != *" --settings-path "* ]]; then
    opts+=(--settings-path "$SCENARIOS_DIR/defaults.json")
  fi
  if [[ -z "${E2E_NO_CONTEXT:-}" && "$given" != *" --allow-context-aware "* ]]; then
    opts+=(--allow-context-aware)
  fi
  if [[ "$given" != *" --replay-host-capabilities-interactions "* ]]; then
    if [[ -z "${E2E_NO_CONTEXT:-}" && "$given" != *" --cluster-dir "* && -n "${E2E_CLUSTER:-}" ]]; then
      opts+=(--cluster-dir "$E2E_CLUSTER")
    fi
    if [[ "$given" != *" --sources-path "* && -n "${E2E_SOURCES:-}" ]]; then
      opts+=(--sources-path "$E2E_SOURCES")
    fi
  fi
  local -a cmd=("$POLICY_HOST" run "$POLICY_WASM" --request-path "$request" "${opts[@]}")
  local KWCTL_KUBECONFIG=""
  if on_kwctl; then
    _kwctl_run_command "$request" "${opts[@]}" || return 1
  fi
  if [[ -z "${E2E_TRANSCRIPT_DIR:-}" ]]; then
    "${cmd[@]}"
    return
  fi
  # Keep everything the host printed (answers, warnings, annotations, guest logs) and every
  # session it recorded for the suite-wide secret scan in 99-no-leak.bats.
  local out err rc=0
  out=$(mktemp) err=$(mktemp)
  "${cmd[@]}" >"$out" 2>"$err" || rc=$?
  cat "$out"
  cat "$err" >&2
  mkdir -p "$E2E_TRANSCRIPT_DIR"
  cat "$out" "$err" >>"$E2E_TRANSCRIPT_DIR/policy-run.log"
  rm -f "$out" "$err"
  _keep_recorded_session "${opts[@]}"
  return "$rc"
}

# _keep_recorded_session [HOST OPTIONS...]: appends the session the options had recorded to
# the transcript: to policy-run.log, which every scan reads, and to redacting-sessions.log when
# the host redacts pull secrets in what it records (the test host does; kwctl records a Secret
# as the API server answered it).
_keep_recorded_session() {
  local session=""
  while (($#)); do
    [[ "$1" == --record-host-capabilities-interactions ]] && session=${2:-}
    shift
  done
  [[ -n "$session" && -s "$session" ]] || return 0
  cat "$session" >>"$E2E_TRANSCRIPT_DIR/policy-run.log"
  if ! on_kwctl; then
    cat "$session" >>"$E2E_TRANSCRIPT_DIR/redacting-sessions.log"
  fi
}

# _fail_with MESSAGE: prints MESSAGE and the response, and fails the assertion.
_fail_with() {
  printf '%s\nresponse: %s\n' "$1" "$output" >&2
  [[ -n "${stderr:-}" ]] && printf 'host stderr: %s\n' "$stderr" >&2
  return 1
}

# assert_allowed / assert_rejected: the decision of the response in $output.
assert_allowed() {
  [[ "$(jq -r '.allowed' <<<"$output" 2>/dev/null)" == true ]] || _fail_with "expected allowed=true"
}
assert_rejected() {
  [[ "$(jq -r '.allowed' <<<"$output" 2>/dev/null)" == false ]] || _fail_with "expected allowed=false"
}

# assert_message_contains STRING...: the rejection message contains every STRING.
assert_message_contains() {
  local message s
  message=$(jq -r '.status.message // ""' <<<"$output")
  for s in "$@"; do
    [[ "$message" == *"$s"* ]] || _fail_with "message lacks: $s" || return 1
  done
}

# assert_message_lacks STRING...: the message mentions none of them (e.g. a container that passed).
assert_message_lacks() {
  local message s
  message=$(jq -r '.status.message // ""' <<<"$output")
  for s in "$@"; do
    [[ "$message" != *"$s"* ]] || _fail_with "message should not mention: $s" || return 1
  done
}

# assert_no_message: an allowed answer without a status message.
assert_no_message() {
  [[ -z "$(jq -r '.status.message // ""' <<<"$output")" ]] || _fail_with "expected no message"
}

# assert_warning_count N: exactly N warnings.
assert_warning_count() {
  [[ "$(jq '(.warnings // []) | length' <<<"$output")" == "$1" ]] || _fail_with "expected $1 warning(s)"
}

# assert_warning_contains STRING...: one single warning contains every STRING, and every
# warning fits Kubernetes' 256-character limit.
assert_warning_contains() {
  jq -e '(.warnings // []) | all(length <= 256)' <<<"$output" >/dev/null ||
    _fail_with "a warning is longer than 256 characters" || return 1
  jq -e --args '(.warnings // []) | any(. as $w | $ARGS.positional | all(. as $s | $w | contains($s)))' \
    "$@" <<<"$output" >/dev/null || _fail_with "no warning contains all of: $*"
}

# response_summary: "allowed | message | warnings" on one line, for comparing two answers.
response_summary() {
  jq -c '{allowed, message: .status.message, code: .status.code, warnings: (.warnings // [])}' <<<"$1"
}

# response_patch: the JSONPatch of the response in $output, decoded (base64 -> JSON), or
# nothing when the response has no patch.
response_patch() {
  jq -r '.patch // empty' <<<"$output" | base64 -d
}

# assert_patch_is JSON: the response is a JSONPatch whose operations are exactly those of
# JSON (an array of {op, path, value}), in any order.
assert_patch_is() {
  [[ "$(jq -r '.patchType // ""' <<<"$output")" == JSONPatch ]] || _fail_with "expected patchType JSONPatch" || return 1
  local patch
  patch=$(response_patch) || _fail_with "the patch is not base64" || return 1
  jq -e -n --argjson got "$patch" --argjson want "$1" '($got | sort_by(.path)) == ($want | sort_by(.path))' >/dev/null ||
    _fail_with "patch differs; expected $(jq -c . <<<"$1"), got $patch"
}

# assert_no_patch: the response does not mutate (neither patchType nor patch).
assert_no_patch() {
  jq -e '(has("patch") | not) and (has("patchType") | not)' <<<"$output" >/dev/null ||
    _fail_with "expected no patch"
}

# assert_annotation_is KEY VALUE: auditAnnotations[KEY] is exactly VALUE.
assert_annotation_is() {
  [[ "$(jq -r --arg k "$1" '(.auditAnnotations // {})[$k] // ""' <<<"$output")" == "$2" ]] ||
    _fail_with "expected auditAnnotations[\"$1\"] = $2"
}

# assert_no_annotations: no audit annotation at all.
assert_no_annotations() {
  [[ "$(jq -c '.auditAnnotations // {}' <<<"$output")" == "{}" ]] || _fail_with "expected no auditAnnotations"
}

# assert_only_whole_warnings_annotation: no audit annotation but resolvable-images/warnings,
# which keeps a warning cut to 256 bytes whole.
assert_only_whole_warnings_annotation() {
  jq -e '(.auditAnnotations // {}) | keys - ["resolvable-images/warnings"] == []' <<<"$output" >/dev/null ||
    _fail_with "expected no auditAnnotations but resolvable-images/warnings"
}
