# shellcheck shell=bash
# The real Kubewarden policy-server, as a cluster runs it, started by a suite on loopback:
# plain HTTP, no Kubernetes unless a KUBECONFIG names the fake API server
# (lib/fake_apiserver.py), an offline sigstore trust config, the suite's sources.yaml for the
# plain-HTTP registries, its own HOME, RUST_BACKTRACE and KUBEWARDEN_* unset. Load it after
# lib/common (`load lib/common; load lib/policy_server`).
#
#   require_policy_server            in `setup`: skip, saying why, when there is no binary
#   ps_push_policy WASM REF          annotate, push to registry://REF (kwctl, else the test host)
#   ps_start NAME POLICIES [FLAG...] start, wait until ready; exports PS_ADDR, PS_DIR, PS_LOG
#   ps_use NAME                      talk to another running server
#   ps_validate ID REQUEST           POST /validate/ID; prints the AdmissionResponse
#   ps_post ID REQUEST               the raw POST (ps_last_http, ps_last_ms), for time-outs
#   ps_audit ID REQUEST              POST /audit/ID, as the audit scanner does
#   ps_stop NAME / ps_stop_all       by pid (registry_stop_all stops them too)
#   ps_teardown_file                 for `teardown_file`: everything stopped, nothing left
#
# Each server lives in $E2E_WORK/registries/ps-NAME (pid, log, HOME, downloads), so that
# registry_stop_all, which every teardown_file already calls, stops it by its pid file.
# The answers are AdmissionResponses, so lib/policy.bash's assertions (assert_allowed,
# assert_message_contains, assert_warning_contains, assert_patch_is, ...) apply to them.

# policy_server_bin: the policy-server of this run, as a Kubewarden user installs it:
# $POLICY_SERVER, else `policy-server` on PATH. Prints its absolute path; prints nothing and
# fails when there is none.
policy_server_bin() {
  local bin="${POLICY_SERVER:-$(command -v policy-server || true)}"
  [[ -n "$bin" && -x "$bin" ]] || return 1
  printf '%s\n' "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
}

# ps_skip_reason: why the policy-server scenarios cannot run here, or nothing when they can.
# A missing binary is a skip even under CI=true (a fresh machine has none); a missing
# policy build is an error under CI=true, as for the other suites (require_host).
ps_skip_reason() {
  if ! policy_server_bin >/dev/null; then
    echo "SKIPPED: no policy-server (set POLICY_SERVER to a policy-server from Kubewarden's releases, or put one on PATH): the real policy-server suite did not run"
  fi
}

# require_policy_server: in bats `setup`. Skips loudly without a policy-server; fails in CI
# (like require_host) when the policy itself is not built; runs once per `make e2e-tests`, in
# the test-host pass (E2E_HOST=kwctl skips it: the host of these scenarios is the server).
require_policy_server() {
  local why
  why=$(ps_skip_reason)
  [[ -z "$why" ]] || skip "$why"
  if on_kwctl; then skip "runs in the E2E_HOST=test-host pass only: the policy-server is the host here"; fi
  if [[ ! -f "$POLICY_WASM" ]]; then
    why="the policy ($POLICY_WASM) is not built; run 'make annotated-policy.wasm'"
    if [[ "${CI:-}" == true ]]; then
      echo "$why" >&2
      return 1
    fi
    skip "$why"
  fi
}

# ps_ready ADDR: the readiness probe answers 200.
ps_ready() {
  [[ "$(curl -s --noproxy '*' --max-time 2 -o /dev/null -w '%{http_code}' "http://$1/readiness")" == 200 ]]
}

# _ps_ready_or_dead PID ADDR: stop waiting when the server is ready or has exited.
_ps_ready_or_dead() { ! kill -0 "$1" 2>/dev/null || ps_ready "$2"; }

# ps_start NAME POLICIES_FILE [POLICY-SERVER FLAG...]: starts a policy-server named NAME
# serving POLICIES_FILE (YAML or JSON) on free loopback ports, 2 workers, and waits (up to
# PS_START_TIMEOUT s, default 180: it pulls and compiles every module first) until its
# readiness probe answers. Options from the environment: PS_SOURCES (default $E2E_SOURCES),
# PS_KUBECONFIG (Kubernetes reads go to the API server it names; see apiserver_serve).
# Exports PS_ADDR (host:port of the API), PS_DIR and PS_LOG. Returns 1, with PS_EXIT set to
# the exit status (also in $PS_DIR/exit) and the log's tail on stderr, when the server exits
# instead (a start-up failure is then asserted on "$PS_LOG"). Call it directly, not through
# `run`, except to assert such a failure.
ps_start() {
  local name=$1 policies=$2 bin dir port ready_port pid trust attempt
  shift 2
  bin=$(policy_server_bin) || { echo "ps_start: no policy-server" >&2; return 1; }
  dir="$(e2e_workdir)/registries/ps-$name"
  mkdir -p "$dir/home" "$dir/policies" "$dir/sigstore"
  trust=$(kwctl_trust_config) || { echo "ps_start: could not write the sigstore trust config" >&2; return 1; }
  local -a args=(--policies "$policies" --addr 127.0.0.1 --workers 2
    --ignore-kubernetes-connection-failure --sigstore-trust-config "$trust"
    --sigstore-cache-dir "$dir/sigstore" --policies-download-dir "$dir/policies" --log-no-color)
  local sources=${PS_SOURCES:-${E2E_SOURCES:-}}
  [[ -n "$sources" ]] && args+=(--sources-path "$sources")
  # Nothing from the caller's environment configures the server: KUBEWARDEN_* are its flags.
  local -a unset_env=(-u RUST_BACKTRACE -u KUBECONFIG)
  local var
  while IFS= read -r var; do unset_env+=(-u "$var"); done < <(compgen -e | grep '^KUBEWARDEN_' || true)
  PS_EXIT=""
  for attempt in 1 2 3; do
    port=$(free_port) ready_port=$(free_port)
    [[ "$port" != "$ready_port" ]] || continue
    # 3>&- : bats waits for every process holding its fd 3; the server must not keep it.
    env "${unset_env[@]}" HOME="$dir/home" ${PS_KUBECONFIG:+KUBECONFIG="$PS_KUBECONFIG"} \
      "$bin" "${args[@]}" --port "$port" --readiness-probe-port "$ready_port" "$@" \
      >"$dir/server.log" 2>&1 3>&- &
    pid=$!
    echo "$pid" >"$dir/pid"
    wait_until "${PS_START_TIMEOUT:-180}" _ps_ready_or_dead "$pid" "127.0.0.1:$ready_port" || true
    if kill -0 "$pid" 2>/dev/null && ps_ready "127.0.0.1:$ready_port"; then
      PS_ADDR="127.0.0.1:$port" PS_DIR=$dir PS_LOG="$dir/server.log"
      echo "$PS_ADDR" >"$dir/addr"
      export PS_ADDR PS_DIR PS_LOG
      return 0
    fi
    if kill -0 "$pid" 2>/dev/null; then
      registry_kill "$pid"
      rm -f "$dir/pid"
      echo "ps_start: $name not ready after ${PS_START_TIMEOUT:-180} s:" >&2
      tail -n 20 "$dir/server.log" >&2
      return 1
    fi
    PS_EXIT=0
    wait "$pid" || PS_EXIT=$?
    echo "$PS_EXIT" >"$dir/exit"
    rm -f "$dir/pid"
    PS_DIR=$dir PS_LOG="$dir/server.log"
    export PS_EXIT PS_DIR PS_LOG
    # a port taken between free_port and the bind: try others; anything else is the answer
    grep -q 'Address already in use' "$dir/server.log" || break
  done
  echo "ps_start: $name exited with status $PS_EXIT:" >&2
  tail -n 20 "$dir/server.log" >&2
  return 1
}

# ps_use NAME: makes the running server NAME the one ps_validate talks to (PS_ADDR, PS_DIR,
# PS_LOG), for files that start several.
ps_use() {
  local dir
  dir="$(e2e_workdir)/registries/ps-$1"
  [[ -s "$dir/addr" ]] || { echo "ps_use: no policy-server $1" >&2; return 1; }
  PS_ADDR=$(cat "$dir/addr") PS_DIR=$dir PS_LOG="$dir/server.log"
  export PS_ADDR PS_DIR PS_LOG
}

# ps_post ID REQUEST_FILE: POSTs the AdmissionReview REQUEST_FILE to /validate/ID of the
# current server (/PS_ENDPOINT/ID when set: `audit` for the audit scanner's endpoint), as the
# API server's webhook client does, giving up after PS_CLIENT_TIMEOUT
# seconds (default 10, the webhook's default timeoutSeconds). Writes the body to stdout;
# records the HTTP status and the time taken in $PS_DIR/last.http and last.ms (ps_last_http,
# ps_last_ms). Fails only when curl does (no answer in time: status 000).
ps_post() {
  local id=$1 request=$2 start end code rc=0 body
  body=$(mktemp)
  start=$(date +%s%N)
  code=$(curl -s --noproxy '*' --max-time "${PS_CLIENT_TIMEOUT:-10}" -o "$body" -w '%{http_code}' \
    -H 'Content-Type: application/json' --data-binary "@$request" "http://$PS_ADDR/${PS_ENDPOINT:-validate}/$id") || rc=$?
  end=$(date +%s%N)
  echo "${code:-000}" >"$PS_DIR/last.http"
  echo $(((end - start) / 1000000)) >"$PS_DIR/last.ms"
  cat "$body"
  if [[ -n "${E2E_TRANSCRIPT_DIR:-}" ]]; then
    # every answer goes to the suite-wide secret scan of 99-no-leak.bats
    mkdir -p "$E2E_TRANSCRIPT_DIR"
    { cat "$body"; echo; } >>"$E2E_TRANSCRIPT_DIR/policy-run.log"
  fi
  rm -f "$body"
  return "$rc"
}

# ps_last_http / ps_last_ms: the HTTP status and the milliseconds of the last ps_post.
ps_last_http() { cat "$PS_DIR/last.http"; }
ps_last_ms() { cat "$PS_DIR/last.ms"; }

# ps_validate ID REQUEST_FILE: evaluates REQUEST_FILE with the policy (or group) ID of the
# current server; prints the AdmissionResponse (the review's `response`), whose uid must be
# the request's. Fails, with the body on stderr, on anything but HTTP 200 with a response.
ps_validate() {
  local id=$1 request=$2 body code uid
  body=$(ps_post "$id" "$request") || { echo "ps_validate: no answer from $PS_ADDR/${PS_ENDPOINT:-validate}/$id within ${PS_CLIENT_TIMEOUT:-10} s" >&2; return 1; }
  code=$(ps_last_http)
  if [[ "$code" != 200 ]]; then
    printf 'ps_validate: HTTP %s from /%s/%s: %s\n' "$code" "${PS_ENDPOINT:-validate}" "$id" "$body" >&2
    return 1
  fi
  uid=$(jq -r '.request.uid' "$request")
  jq -e --arg uid "$uid" '.kind == "AdmissionReview" and .response.uid == $uid' <<<"$body" >/dev/null ||
    { printf 'ps_validate: not an AdmissionReview answering %s: %s\n' "$uid" "$body" >&2; return 1; }
  jq -c '.response' <<<"$body"
}

# ps_audit ID REQUEST_FILE: as ps_validate, to /audit/ID, where Kubewarden's audit scanner
# sends its requests (lib/audit.bash builds them).
ps_audit() { PS_ENDPOINT=audit ps_validate "$@"; }

# assert_status_code CODE: the response's status.code is CODE ("" for none).
assert_status_code() {
  [[ "$(jq -r '.status.code // ""' <<<"$output")" == "$1" ]] || _fail_with "expected status.code '$1'"
}

# assert_message_is MESSAGE: status.message is exactly MESSAGE (a group's or a custom message).
assert_message_is() {
  [[ "$(jq -r '.status.message // ""' <<<"$output")" == "$1" ]] || _fail_with "expected the message: $1"
}

# assert_no_warnings: the response carries no warning at all.
assert_no_warnings() { assert_warning_count 0; }

# assert_cause_contains FIELD STRING...: status.details.causes has an entry for FIELD (a
# group's `spec.policies.MEMBER`) whose message contains every STRING.
assert_cause_contains() {
  local field=$1
  shift
  jq -e --arg f "$field" --args '[.status.details.causes // [] | .[] | select(.field == $f)
      | .message // "" | . as $m | $ARGS.positional | all(. as $s | $m | contains($s))] | any' \
    "$@" <<<"$output" >/dev/null || _fail_with "no cause for $field containing all of: $*"
}

# assert_causes_are FIELD...: exactly these fields among status.details.causes (in any order).
assert_causes_are() {
  jq -e --args '[.status.details.causes // [] | .[].field] | sort == ($ARGS.positional | sort)' \
    "$@" <<<"$output" >/dev/null || _fail_with "expected causes for exactly: $*"
}

# ps_push_policy WASM REF: annotates WASM with policy-metadata.yml and README.md and pushes it
# to registry://REF, as Kubewarden distributes a policy: with kwctl ($KWCTL, else kwctl on
# PATH), else with the test host's annotate and push (the same artifact, see
# 70-distribution.bats). Prints the tool it used; their logs go to $E2E_WORK/ps-push.log.
ps_push_policy() {
  local wasm=$1 ref=$2 kwctl="${KWCTL:-$(command -v kwctl || true)}" annotated log
  annotated="$(e2e_workdir)/ps-annotated-policy.wasm" log="$(e2e_workdir)/ps-push.log"
  local -a meta=(--metadata-path "$REPO_ROOT/policy-metadata.yml" --usage-path "$REPO_ROOT/README.md"
    --output-path "$annotated" "$wasm")
  local -a push=(push --sources-path "${PS_SOURCES:-$E2E_SOURCES}" "$annotated" "registry://$ref")
  if [[ -n "$kwctl" && -x "$kwctl" ]]; then
    { KWCTL=$kwctl kwctl_exec annotate "${meta[@]}" && KWCTL=$kwctl kwctl_exec "${push[@]}"; } >"$log" 2>&1 ||
      { cat "$log" >&2; return 1; }
    echo kwctl
  else
    { "$POLICY_HOST" annotate "${meta[@]}" && "$POLICY_HOST" "${push[@]}"; } >"$log" 2>&1 ||
      { cat "$log" >&2; return 1; }
    echo test-host
  fi
}

# ps_stop NAME: stops the server NAME by its pid and waits until it is gone.
ps_stop() {
  local dir
  dir="$(e2e_workdir)/registries/ps-$1"
  [[ -f "$dir/pid" ]] || return 0
  registry_kill "$(cat "$dir/pid")"
  rm -f "$dir/pid" "$dir/addr"
}

# ps_teardown_file: for bats `teardown_file`: stops the servers and the registries of this file
# by their pids, and fails if one survived.
ps_teardown_file() {
  ps_stop_all
  registry_stop_all
  local left
  left=$(registry_pids)
  [[ -z "$left" ]] || { echo "still running: $left" >&2; return 1; }
}

# ps_stop_all: stops every policy-server of this run (teardown; registry_stop_all does it too).
ps_stop_all() {
  local pidfile
  for pidfile in "$(e2e_workdir)"/registries/ps-*/pid; do
    [[ -e "$pidfile" ]] || continue
    registry_kill "$(cat "$pidfile")"
    rm -f "$pidfile" "$(dirname "$pidfile")/addr"
  done
}
