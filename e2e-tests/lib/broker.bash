# shellcheck shell=bash
# The lookup broker (broker/) and a stock policy-server in front of it, on 127.0.0.1, for
# 94-broker.bats. Both processes are registered under $E2E_WORK/registries/NAME/pid, so
# registry_stop_all stops them with the registries.
#
#   broker_start broker {--apiserver-port PORT | --kubeconfig FILE} --sources FILE [--caller USER PASSWORD]
#                [--no-loopback-allowance] [ARGS...]
#       (sealing keys: $BROKER_KEY, the one the policy reads from broker_key_secret_yaml; the
#       tests' registries are on loopback, which the broker refuses by default: it is allowed
#       unless --no-loopback-allowance)
#   broker_namespace_yaml NAMESPACE [VALUE|-]   # a Namespace that opted in (or VALUE, - none)
#   broker_token_binding_yaml NAMESPACE          # the Secret its minted tokens are bound to
#       -> BROKER_ADDR=127.0.0.1:PORT, BROKER_LOG (its stdout: one JSON line per lookup)
#   broker_policy_server_start ps POLICIES.yml DOCKER-CONFIG-DIR SOURCES.yml KUBECONFIG
#       -> PS_PORT_<NAME> (the validation port), log in registries/NAME/policy-server.log
#   broker_validate NAME POLICY-ID REQUEST  # prints the AdmissionReview's response
#   deploy_broker_flags                     # deploy/broker.yaml's time-out and destination flags
#   deploy_settings BROKER-HOST             # deploy/policy-server.yaml's policy settings, as JSON
#   deploy_policy_spec                      # its ClusterAdmissionPolicy's spec, as JSON
#   broker_readyz STATUS; broker_reload_fails WHAT FILE CONTENT  # readiness and failed reloads
#
# Lookups the policy makes through a policy server are the policy server's: the stock
# policy-server ($POLICY_SERVER, else on PATH) is required; suites skip
# loudly without it.

# The caller credential the policy server holds for the broker (fake, fixed, so that the
# secret scan can look for it).
BROKER_CALLER_USER="${BROKER_CALLER_USER:-e2e-broker-caller-3v8k}"
BROKER_CALLER_PASSWORD="${BROKER_CALLER_PASSWORD:-e2e-Broker-Caller-Pw-6t1m}"
# The key that seals brokered names, shared by the broker (--key-dir) and the policy (the
# Secret of lookupBroker.keySecret); fake and fixed like the caller credential.
BROKER_KEY="${BROKER_KEY:-e2e-Broker-Sealing-Key-9q4w-0123456789abcdef}"
# lookupBroker.keySecret of the suites' settings.
BROKER_KEY_SECRET='{"namespace": "kubewarden", "name": "broker-key"}'

# broker_key_secret_yaml: the Secret kubewarden/broker-key holding $BROKER_KEY, for the fake
# API server.
broker_key_secret_yaml() {
  printf '%s\n' "---" "apiVersion: v1" "kind: Secret" "metadata:" "  name: broker-key" \
    "  namespace: kubewarden" "type: Opaque" "data:" "  key: $(printf '%s' "$BROKER_KEY" | base64 -w0)"
}

# broker_token_binding_yaml NAMESPACE: the Secret the broker binds the ServiceAccount tokens it
# mints in NAMESPACE to (docs/broker.md, "Installing"; broker/src/cluster/token_binding.rs).
broker_token_binding_yaml() {
  printf '%s\n' "---" "apiVersion: v1" "kind: Secret" "metadata:" \
    "  name: resolvable-images-broker-token-binding" "  namespace: $1" \
    "  uid: 5d2c8e0a-e2e0-4f1b-8a6d-binding00001" "type: Opaque"
}

# broker_namespace_yaml NAMESPACE [VALUE|-]: a Namespace for the fake API server labelled
# resolvable-images.kubewarden.io/broker=VALUE (default `enabled`; `-`: no label). The broker
# serves only namespaces that opted in with that label (docs/broker.md).
broker_namespace_yaml() {
  local value=${2:-enabled}
  printf '%s\n' "---" "apiVersion: v1" "kind: Namespace" "metadata:" "  name: $1"
  [[ "$value" == - ]] || printf '%s\n' "  labels:" "    resolvable-images.kubewarden.io/broker: $value"
}

# broker_seal BODY ASKED [KEY [EXPIRES [HOST]]]: the r4 name of BODY (`<namespace>/<credentials>/
# <registry>/<repo>`) for ASKED, the tag or digest of the manifest URL, sealed with KEY (default
# $BROKER_KEY) for the broker host HOST (default $BROKER_ADDR) until EXPIRES (Unix seconds;
# default: as the policy writes it, the next 5-minute boundary plus 5 minutes), the b3sum
# recipe of crates/broker-reference/src/spec.rs.
broker_seal() {
  local body=$1 asked=$2 key=${3:-$BROKER_KEY} expires=${4:-} host=${5:-$BROKER_ADDR} sep=:
  local derived seal
  [[ -n "$expires" ]] || expires=$((($(date +%s) + 299) / 300 * 300 + 300))
  [[ "$asked" != *:* ]] || sep=@
  derived=$(printf '%s' "$key" |
    b3sum --derive-key 'resolvable-images-policy lookup broker r4 seal key' --no-names)
  # b3sum --keyed reads the 32-byte key on its standard input, the message from a file; the
  # format string is the key's bytes as \x escapes
  # shellcheck disable=SC2059
  seal=$(printf "$(printf '%s' "$derived" | sed 's/../\\x&/g')" |
    b3sum --keyed --no-names <(printf '%s/r4/%s/%s%s%s' "$host" "$expires" "$body" "$sep" "$asked") |
    cut -c1-32)
  printf 'r4/%s/%s/%s\n' "$seal" "$expires" "$body"
}

# require_broker: skips a test of the broker alone without its binary, and on the kwctl pass
# (it needs no engine: it runs once, on the test host's pass).
require_broker() {
  [[ -x "$(broker_bin)" ]] || skip "no broker binary at $(broker_bin): make broker"
  [[ "$E2E_HOST" != kwctl ]] || skip "needs no engine: runs once, with E2E_HOST=test-host"
}

# fault_proxy_start NAME MODE [fault_proxy.py OPTIONS...]: lib/fault_proxy.py in MODE, stopped
# with the registries (registries/NAME/pid); prints its address once it listens.
fault_proxy_start() {
  local name=$1 mode=$2 dir
  shift 2
  dir="$(e2e_workdir)/registries/$name"
  mkdir -p "$dir"
  # 3>&- : bats waits for every process holding its fd 3
  python3 "$E2E_DIR/lib/fault_proxy.py" --mode "$mode" --port-file "$dir/port" "$@" \
    >/dev/null 2>"$dir/proxy.log" 3>&- &
  echo $! >"$dir/pid"
  wait_until 10 test -s "$dir/port" || { cat "$dir/proxy.log" >&2; return 1; }
  printf '127.0.0.1:%s\n' "$(cat "$dir/port")"
}

# deploy_broker_flags: the broker's time-out and destination flags of deploy/broker.yaml, one a
# line (its addresses, TLS and files are the test's own).
deploy_broker_flags() {
  python3 - "$REPO_ROOT/deploy/broker.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
[deployment] = [d for d in docs if d["kind"] == "Deployment"]
for arg in deployment["spec"]["template"]["spec"]["containers"][0]["args"]:
    if arg.split("=")[0] in ("--attempt-timeout-ms", "--lookup-timeout-ms", "--deny-destination"):
        print(arg)
EOF
}

# deploy_settings BROKER-HOST: the ClusterAdmissionPolicy's settings of deploy/policy-server.yaml,
# as JSON, with lookupBroker.host replaced.
deploy_settings() {
  deploy_policy_spec | jq -c --arg host "$1" '.settings | .lookupBroker.host = $host'
}

# deploy_policy_spec: the spec of deploy/policy-server.yaml's ClusterAdmissionPolicy, as JSON.
deploy_policy_spec() {
  python3 -c 'import json, sys, yaml
docs = yaml.safe_load_all(open(sys.argv[1]))
print(json.dumps(next(d for d in docs if d and d.get("kind") == "ClusterAdmissionPolicy")["spec"]))' \
    "$REPO_ROOT/deploy/policy-server.yaml"
}

# broker_bin: the broker binary ($BROKER_BIN, else the workspace's build, `make broker`).
broker_bin() {
  printf '%s\n' "${BROKER_BIN:-$REPO_ROOT/target/debug/resolvable-images-broker}"
}

# policy_server_bin (which policy-server this run uses) and the rest of the policy-server
# helpers: one definition, in lib/policy_server.bash.
# shellcheck source=e2e-tests/lib/policy_server.bash
source "$E2E_DIR/lib/policy_server.bash"

# broker_start NAME {--apiserver-port PORT | --kubeconfig FILE} --sources FILE [--caller USER PASSWORD]
#   [--no-loopback-allowance] [--drain-grace-ms MS|default] [ARGS...]
# A test's broker has no drain grace unless it asks for one (`default`: the binary's own), so
# that stopping it takes no grace period of its own.
broker_start() {
  local name=$1 dir port attempt api="" kubeconfig="" sources="" user=$BROKER_CALLER_USER password=$BROKER_CALLER_PASSWORD
  shift
  local -a extra=() loopback=(--allow-destination 127.0.0.0/8) grace=(--drain-grace-ms 0)
  while (($#)); do
    case "$1" in
      --drain-grace-ms) grace=(--drain-grace-ms "$2"); [[ "$2" != default ]] || grace=(); shift 2 ;;
      --apiserver-port) api=$2; shift 2 ;;
      --kubeconfig) kubeconfig=$2; shift 2 ;;
      --sources) sources=$2; shift 2 ;;
      --caller) user=$2 password=$3; shift 3 ;;
      --no-loopback-allowance) loopback=(); shift ;;
      *) extra+=("$1"); shift ;;
    esac
  done
  dir="$(e2e_workdir)/registries/$name"
  mkdir -p "$dir/caller" "$dir/keys"
  printf '%s' "$user" >"$dir/caller/username"
  printf '%s' "$password" >"$dir/caller/password"
  printf '%s\n' "$BROKER_KEY" >"$dir/keys/key"
  # the API server by URL, or (--kubeconfig) found the way a kubeconfig user finds it
  local -a where=(--apiserver "http://127.0.0.1:$api")
  [[ -z "$kubeconfig" ]] || where=()
  for attempt in 1 2 3; do
    port=$(free_port)
    # 3>&- : bats waits for every process holding its fd 3
    KUBECONFIG=${kubeconfig:-${KUBECONFIG:-}} "$(broker_bin)" --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$(free_port)" \
      --caller-dir "$dir/caller" --key-dir "$dir/keys" "${where[@]}" --sources "$sources" \
      --own-host "127.0.0.1:$port" --own-host "localhost:$port" "${loopback[@]}" "${grace[@]}" "${extra[@]}" \
      >"$dir/broker.log" 2>"$dir/broker.err" 3>&- &
    echo $! >"$dir/pid"
    if wait_until 10 grep -qs '"msg":"listening"' "$dir/broker.log"; then
      BROKER_ADDR="127.0.0.1:$port"
      BROKER_LOG="$dir/broker.log"
      BROKER_METRICS=$(jq -r 'select(.msg == "listening") | .metricsAddress' "$dir/broker.log")
      export BROKER_ADDR BROKER_LOG BROKER_METRICS
      return 0
    fi
    registry_kill "$(cat "$dir/pid")"
    cat "$dir/broker.err" >&2
  done
  return 1
}

# broker_policy_server_start NAME POLICIES DOCKER-CONFIG-DIR SOURCES KUBECONFIG
broker_policy_server_start() {
  local name=$1 policies=$2 docker=$3 sources=$4 kubeconfig=$5 dir port ready attempt bin
  bin=$(policy_server_bin) || { echo "no policy-server" >&2; return 1; }
  dir="$(e2e_workdir)/registries/$name"
  mkdir -p "$dir/home" "$dir/policies" "$dir/sigstore"
  local trust
  trust=$(E2E_KWCTL_HOME="$dir" kwctl_trust_config) || return 1
  for attempt in 1 2 3; do
    port=$(free_port) ready=$(free_port)
    env -u RUST_BACKTRACE HOME="$dir/home" KUBECONFIG="$kubeconfig" "$bin" \
      --policies "$policies" --addr 127.0.0.1 --port "$port" --readiness-probe-port "$ready" \
      --workers 2 --sources-path "$sources" --docker-config-json-path "$docker" \
      --sigstore-trust-config "$trust" --sigstore-cache-dir "$dir/sigstore" \
      --policies-download-dir "$dir/policies" --log-no-color \
      >"$dir/policy-server.log" 2>&1 3>&- &
    echo $! >"$dir/pid"
    # ready, or gone (a policy it cannot load): no point waiting out the time-out then
    wait_until 180 _ready_or_dead "$(cat "$dir/pid")" "$ready" || true
    if curl -sf --max-time 1 -o /dev/null "http://127.0.0.1:$ready/readiness"; then
      printf -v "PS_PORT_${name//-/_}" '%s' "$port"
      export "PS_PORT_${name//-/_}"
      return 0
    fi
    registry_kill "$(cat "$dir/pid")"
    tail -n 20 "$dir/policy-server.log" >&2
    # a module it refused is refused again: only a taken port is worth another try
    grep -q "Address already in use" "$dir/policy-server.log" || return 1
  done
  return 1
}

# _ready_or_dead PID PORT: the policy server answers its readiness probe, or has exited.
_ready_or_dead() {
  ! kill -0 "$1" 2>/dev/null || curl -sf --max-time 1 -o /dev/null "http://127.0.0.1:$2/readiness"
}

# broker_policies FILE ID SETTINGS-JSON [ID SETTINGS-JSON]...: a policies.yml with the policy
# under each ID, with its contextAwareResources (Secrets, ServiceAccounts) granted.
broker_policies() {
  local file=$1 wasm
  shift
  wasm=$(cd "$(dirname "$POLICY_WASM")" && pwd)/$(basename "$POLICY_WASM")
  local json='{}'
  while (($#)); do
    json=$(jq -c --arg id "$1" --arg m "file://$wasm" --argjson s "$2" \
      '. + {($id): {module: $m, settings: $s, allowedToMutate: false, timeoutEvalSeconds: 5, hostCapabilities: ["*"],
        contextAwareResources: [{apiVersion: "v1", kind: "Secret"}, {apiVersion: "v1", kind: "ServiceAccount"}]}}' <<<"$json")
    shift 2
  done
  jq . <<<"$json" >"$file"
}

# broker_validate NAME POLICY-ID REQUEST: the `response` of the policy server's answer.
broker_validate() {
  local var="PS_PORT_${1//-/_}" out
  out=$(curl -sf --max-time 20 -H 'Content-Type: application/json' --data-binary "@$3" \
    "http://127.0.0.1:${!var}/validate/$2") || { echo "policy-server $1 did not answer" >&2; return 1; }
  if [[ -n "${E2E_TRANSCRIPT_DIR:-}" ]]; then
    mkdir -p "$E2E_TRANSCRIPT_DIR"
    printf '%s\n' "$out" >>"$E2E_TRANSCRIPT_DIR/policy-run.log"
  fi
  jq -c '.response' <<<"$out"
}

# broker_readyz STATUS: the broker's /readyz answers STATUS.
broker_readyz() {
  [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$BROKER_METRICS/readyz")" == "$1" ]]
}

# broker_reload_fails WHAT FILE CONTENT: once FILE (of the files counted as WHAT, written with
# CONTENT) is broken, /readyz turns 503 (with --reload-failure-seconds 1), a reloadFailed
# warning names FILE but never CONTENT, and broker_reload_failures_total{what="WHAT"} counts it.
broker_reload_fails() {
  local what=$1 file=$2 content=$3
  wait_until 10 broker_readyz 503 || _fail_with "still ready with a broken $what"
  jq -se --arg f "$file" --arg w "$what" \
    'any(.[]; .msg == "reloadFailed" and .level == "WARN" and .what == $w and (.error | contains($f)))' \
    "$BROKER_LOG" >/dev/null || _fail_with "no warning naming $file: $(cat "$BROKER_LOG")"
  ! grep -qF "$content" "$BROKER_LOG" || _fail_with "the file's content was logged"
  curl -sf "http://$BROKER_METRICS/metrics" | grep -qE "^broker_reload_failures_total\{what=\"$what\"\} [1-9]" ||
    _fail_with "not counted: $(curl -s "http://$BROKER_METRICS/metrics" | grep reload)"
}

# broker_lookups_of NAMESPACE: the broker's log lines for lookups in NAMESPACE.
broker_lookups_of() {
  jq -c --arg ns "$1" 'select(.msg == "lookup" and .namespace == $ns)' "$BROKER_LOG"
}
