#!/usr/bin/env bash
# check-patched-kwctl.sh [KWCTL]
#
# Checks a kwctl built with the upstream/kubewarden/ series (upstream/build-kwctl.sh) on the
# credentialed scenario the oci/v1/resolve_images proposal is for (a private image only a pod's
# pull secret can read; docs/design/rfc-resolve-images.md), end to end, with real components only:
#   - Debian's docker-registry with htpasswd Basic auth (private/app:v1 pushed with skopeo),
#     plus an anonymous one (the request fixtures name images there too);
#   - a small fake Kubernetes API server (python3, below) serving the team-a `default`
#     ServiceAccount and a kubernetes.io/dockerconfigjson Secret `regcred` holding the
#     registry's credentials; kwctl reaches it through KUBECONFIG;
#   - kwctl with an empty HOME: it has no credentials of its own for the registry.
# A Pod naming the private image and a missing tag of it, with imagePullSecrets [regcred],
# must be resolved as the registry says (v1 found, no-such-tag absent, nothing
# "unauthorized"), and neither the password nor its base64 forms may appear in kwctl's
# output, its logs or its recorded session. The session must replay to the same answer.
# A wrong password must give "the pod's pull secrets ... were refused". If STOCK_KWCTL is
# executable, the stock kwctl must give the fallback with its one warning.
#
# Environment: KWCTL (default: $1, then /work/kwctl-patched/kwctl), STOCK_KWCTL (default
# /work/shared/tools/kwctl), POLICY_WASM (default the release build of this repository),
# KEEP_WORK=1 keeps the scratch directory. Needs docker-registry, htpasswd (apache2-utils),
# skopeo, jq, curl, python3. Exit status 0 when every check passed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
KWCTL=${KWCTL:-${1:-/work/kwctl-patched/kwctl}}
STOCK_KWCTL=${STOCK_KWCTL:-/work/shared/tools/kwctl}
export POLICY_WASM=${POLICY_WASM:-$repo/target/wasm32-wasip1/release/resolvable_images_policy.wasm}

for tool in docker-registry htpasswd skopeo jq curl python3; do
  command -v "$tool" >/dev/null || { echo "check-patched-kwctl.sh: $tool is missing" >&2; exit 2; }
done
[[ -x "$KWCTL" ]] || { echo "check-patched-kwctl.sh: no kwctl at $KWCTL (build it with upstream/build-kwctl.sh)" >&2; exit 2; }
[[ -f "$POLICY_WASM" ]] || { echo "check-patched-kwctl.sh: no policy at $POLICY_WASM (make policy.wasm)" >&2; exit 2; }

E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/check-patched-kwctl.XXXXXX")
export E2E_WORK
# shellcheck source=e2e-tests/lib/common.bash
source "$repo/e2e-tests/lib/common.bash"
unset RUST_BACKTRACE

apiserver_pid=""
cleanup() {
  [[ -n "$apiserver_pid" ]] && kill "$apiserver_pid" 2>/dev/null || true
  registry_stop_all || true
  if [[ "${KEEP_WORK:-}" == 1 ]]; then
    echo "scratch directory kept: $E2E_WORK"
  else
    rm -rf "$E2E_WORK"
  fi
}
trap cleanup EXIT

failures=0
pass() { printf 'PASS  %s\n' "$1"; }
fail() { printf 'FAIL  %s\n' "$1"; failures=$((failures + 1)); }
check() { # check DESCRIPTION CMD...
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}

echo "kwctl under test: $KWCTL ($("$KWCTL" --version 2>/dev/null | head -n1))"
[[ -f "$(dirname "$KWCTL")/BUILD-INFO" ]] && sed 's/^/  /' "$(dirname "$KWCTL")/BUILD-INFO"

# --- registries and images -------------------------------------------------------------
registry_start anon
registry_start auth
push_image "$(build_image private)" auth private/app:v1
SOURCES=$(write_sources_yaml check --insecure "$REG_ANON" --insecure "$REG_AUTH")
echo "registries: anonymous $REG_ANON, htpasswd $REG_AUTH (user $REG_AUTH_USER)"

# --- the fake API server ---------------------------------------------------------------
objects="$E2E_WORK/apiserver/objects"
mkdir -p "$objects"
cat >"$E2E_WORK/apiserver/server.py" <<'PY'
"""A fake Kubernetes API server for kwctl: discovery of the core group, GET of the JSON
objects in OBJECTS_DIR (404 Status otherwise), LIST of Nodes with a resourceVersion and a
watch that stays open. Request lines go to stderr, bodies never do."""
import json, os, sys, time, glob
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

RESOURCES = [
    ("namespaces", "namespace", "Namespace", False),
    ("nodes", "node", "Node", False),
    ("pods", "pod", "Pod", True),
    ("secrets", "secret", "Secret", True),
    ("serviceaccounts", "serviceaccount", "ServiceAccount", True),
]
PLURAL = {kind: plural for plural, _, kind, _ in RESOURCES}
objects = {}
for path in glob.glob(os.path.join(sys.argv[2], "*.json")):
    with open(path) as f:
        obj = json.load(f)
    key = (PLURAL[obj["kind"]], obj["metadata"].get("namespace"), obj["metadata"]["name"])
    obj.setdefault("metadata", {}).setdefault("resourceVersion", "1")
    objects[key] = obj

def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("apiserver: " + (fmt % args) + "\n")

    def send_json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        parts = [p for p in url.path.split("/") if p]
        if parts == ["api"]:
            return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        if parts == ["apis"]:
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if parts == ["version"]:
            return self.send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0"})
        if parts == ["api", "v1"]:
            return self.send_json(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1",
                "resources": [{"name": p, "singularName": s, "namespaced": n, "kind": k,
                               "verbs": ["get", "list", "watch"]} for p, s, k, n in RESOURCES]})
        if len(parts) >= 3 and parts[:2] == ["api", "v1"]:
            rest = parts[2:]
            namespace = None
            if rest[0] == "namespaces" and len(rest) >= 3:
                namespace, rest = rest[1], rest[2:]
            if len(rest) == 2:
                obj = objects.get((rest[0], namespace, rest[1]))
                if obj is None:
                    return self.send_json(404, status(404, "NotFound", f'{rest[0]} "{rest[1]}" not found'))
                return self.send_json(200, obj)
            if len(rest) == 1:
                if query.get("watch", ["false"])[0] in ("true", "1"):
                    # a watch with no events: keep it open
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self.wfile.flush()
                    time.sleep(600)
                    return
                items = [o for (p, ns, _), o in objects.items()
                         if p == rest[0] and (namespace is None or ns == namespace)]
                kind = next(k for p, _, k, _ in RESOURCES if p == rest[0])
                return self.send_json(200, {"kind": kind + "List", "apiVersion": "v1",
                                            "metadata": {"resourceVersion": "1"}, "items": items})
        return self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))

ThreadingHTTPServer.daemon_threads = True
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
server.serve_forever()
PY

# pull_secret NAME USER PASSWORD: the Secret a `kubectl create secret docker-registry` makes.
pull_secret() {
  local config
  config=$(jq -cn --arg h "$REG_AUTH" --arg u "$2" --arg p "$3" \
    '{auths: {($h): {username: $u, password: $p, auth: ("\($u):\($p)" | @base64)}}}' | base64 -w0)
  jq -n --arg name "$1" --arg c "$config" '{apiVersion: "v1", kind: "Secret",
    metadata: {name: $name, namespace: "team-a"}, type: "kubernetes.io/dockerconfigjson",
    data: {".dockerconfigjson": $c}}'
}
jq -n '{apiVersion: "v1", kind: "ServiceAccount", metadata: {name: "default", namespace: "team-a"}}' \
  >"$objects/sa-default.json"
jq -n '{apiVersion: "v1", kind: "Namespace", metadata: {name: "team-a"}}' >"$objects/ns-team-a.json"
pull_secret regcred "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" >"$objects/secret-regcred.json"
pull_secret regcred-wrong "$REG_AUTH_USER" not-the-password-9z >"$objects/secret-regcred-wrong.json"

api_port=$(free_port)
python3 "$E2E_WORK/apiserver/server.py" "$api_port" "$objects" 2>"$E2E_WORK/apiserver/requests.log" 3>&- &
apiserver_pid=$!
wait_until 10 curl -sf --noproxy '*' -o /dev/null "http://127.0.0.1:$api_port/api/v1" ||
  { echo "the fake API server did not start" >&2; cat "$E2E_WORK/apiserver/requests.log" >&2; exit 1; }
export KUBECONFIG="$E2E_WORK/kubeconfig"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: fake
    cluster:
      server: http://127.0.0.1:$api_port
users:
  - name: fake
    user:
      token: fake-apiserver-token
contexts:
  - name: fake
    context:
      cluster: fake
      user: fake
      namespace: team-a
current-context: fake
EOF
echo "fake API server: http://127.0.0.1:$api_port (KUBECONFIG=$KUBECONFIG)"

# --- the policy, annotated by the kwctl under test (contextAwareResources) --------------
export HOME="$E2E_WORK/home"
mkdir -p "$HOME"
"$KWCTL" annotate -m "$repo/policy-metadata.yml" -u "$repo/README.md" \
  -o "$E2E_WORK/annotated-policy.wasm" "$POLICY_WASM" 2>"$E2E_WORK/annotate.log"

# request POD-SECRET: the Pod fixture with init-schema and app=private/app:v1,
# sidecar=private/app:no-such-tag, all on the htpasswd registry, and imagePullSecrets
# [POD-SECRET]; prints its path.
request() {
  local req
  req=$(local_request pod-create.json "init-schema=$REG_AUTH/private/app:v1" \
    "app=$REG_AUTH/private/app:v1" "sidecar=$REG_AUTH/private/app:no-such-tag")
  request_edit_pod_spec "$req" ".imagePullSecrets = [{name: \"$1\"}]"
  printf '%s\n' "$req"
}

# kw NAME KWCTL ARGS...: runs `KWCTL run` on the annotated policy; stdout in NAME.out,
# stderr in NAME.err, exit status in NAME.rc.
kw() {
  local name=$1 bin=$2 rc=0
  shift 2
  "$bin" run --sources-path "$SOURCES" --allow-context-aware "$@" \
    "$E2E_WORK/annotated-policy.wasm" >"$E2E_WORK/$name.out" 2>"$E2E_WORK/$name.err" || rc=$?
  echo "$rc" >"$E2E_WORK/$name.rc"
  printf '  %-10s rc=%s %s\n' "$name" "$rc" "$(summary "$E2E_WORK/$name.out")"
}
summary() {
  jq -c '{allowed, message: .status.message, warnings}' "$1" 2>/dev/null || echo "(no JSON answer)"
}
answer() { jq -r "$2" "$E2E_WORK/$1.out" 2>/dev/null; }
# no_secret FILE...: none of the files holds the password, user:password in base64, or the
# Secret's .dockerconfigjson value.
no_secret() {
  local b64 cfg
  b64=$(printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0)
  cfg=$(jq -r '.data[".dockerconfigjson"]' "$objects/secret-regcred.json")
  ! grep -l -F -e "$REG_AUTH_PASSWORD" -e "$b64" -e "$cfg" "$@"
}

settings="$SCENARIOS_DIR/credentialed-lookups.json"
req=$(request regcred)
echo
echo "runs (settings: $(jq -c . "$settings")):"

# 1. credentialed lookup, recorded
kw credentialed "$KWCTL" --request-path "$req" --settings-path "$settings" \
  --record-host-capabilities-interactions "$E2E_WORK/session.yml"
# 2. the recorded session, replayed
kw replayed "$KWCTL" --request-path "$req" --settings-path "$settings" \
  --replay-host-capabilities-interactions "$E2E_WORK/session.yml"
# 3. a wrong password in the pod's secret
kw wrong-pass "$KWCTL" --request-path "$(request regcred-wrong)" --settings-path "$settings"
# 4. the stock kwctl on the same request
have_stock=false
if [[ -x "$STOCK_KWCTL" ]]; then
  have_stock=true
  kw stock "$STOCK_KWCTL" --request-path "$req" --settings-path "$settings"
fi
echo

check "credentialed: kwctl answered (exit 0)" test "$(cat "$E2E_WORK/credentialed.rc")" = 0
check "credentialed: rejected, because no-such-tag is absent" test "$(answer credentialed .allowed)" = false
check "credentialed: the message names sidecar's missing tag as 'not found on registry $REG_AUTH'" \
  bash -c '[[ "$1" == *"container \"sidecar\""* && "$1" == *"private/app:no-such-tag"* && "$1" == *"not found on registry $2"* ]]' _ \
  "$(answer credentialed .status.message)" "$REG_AUTH"
check "credentialed: container app (found with the pod's secret) is not in the message" \
  bash -c '[[ "$1" != *"container \"app\""* ]]' _ "$(answer credentialed .status.message)"
check "credentialed: no warning (nothing unauthorized, no fallback)" \
  test "$(answer credentialed '.warnings // [] | length')" = 0
check "credentialed: the session recorded an oci/v1/resolve_images exchange" \
  grep -q '!OciResolveImages' "$E2E_WORK/session.yml"
check "credentialed: the session recorded the registry's answers (found and notFound)" \
  bash -c 'grep -qF "\"outcome\":\"found\"" "$1" && grep -qF "\"outcome\":\"notFound\"" "$1"' _ "$E2E_WORK/session.yml"
check "credentialed: the session holds <redacted> in place of the credentials" \
  grep -q '<redacted>' "$E2E_WORK/session.yml"
check "replayed: same answer as the live run" \
  test "$(jq -cS '{allowed, status, warnings}' "$E2E_WORK/replayed.out")" = "$(jq -cS '{allowed, status, warnings}' "$E2E_WORK/credentialed.out")"
check "wrong password: allowed with the 'pull secrets ... were refused' warning" \
  bash -c '[[ "$(jq -r .allowed "$1")" == true && "$(jq -r ".warnings | join(\" \")" "$1")" == *"pull secrets for $2 were refused"* ]]' _ \
  "$E2E_WORK/wrong-pass.out" "$REG_AUTH"
if $have_stock; then
  check "stock kwctl: falls back with its one-line warning" \
    bash -c '[[ "$(jq -r ".warnings | join(\" \")" "$1")" == *"credentialed lookups (oci/v1/resolve_images) are not available here"* ]]' _ \
    "$E2E_WORK/stock.out"
  check "stock kwctl: cannot read the private image (unauthorized, kwctl has no credentials)" \
    bash -c '[[ "$(jq -r ".warnings | join(\" \")" "$1")" == *"not authorized on registry $2"* ]]' _ \
    "$E2E_WORK/stock.out" "$REG_AUTH"
fi
check "no credential in kwctl's outputs, logs or recorded session" \
  no_secret "$E2E_WORK"/*.out "$E2E_WORK"/*.err "$E2E_WORK/session.yml" "$E2E_WORK/annotate.log"
check "the fake API server served the Secret (the credentials came from get_resource)" \
  grep -q 'GET /api/v1/namespaces/team-a/secrets/regcred ' "$E2E_WORK/apiserver/requests.log"

echo
echo "recorded session (credentials redacted):"
grep -A12 '!OciResolveImages' "$E2E_WORK/session.yml" | sed 's/^/  /' | head -n 24
echo
echo "API server requests:"
sed 's/^/  /' "$E2E_WORK/apiserver/requests.log" | cut -c1-150 | sort | uniq -c | sort -rn | head -n 12

echo
if ((failures)); then
  echo "$failures check(s) failed; kwctl stderr of the credentialed run:"
  tail -n 20 "$E2E_WORK/credentialed.err"
  KEEP_WORK=1
  exit 1
fi
echo "all checks passed"
