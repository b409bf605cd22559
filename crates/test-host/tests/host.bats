#!/usr/bin/env bats
# Regression tests of test-host itself (not of the policy), with the probe guest
# (guests/host-call-probe) and real Debian docker-registry instances on 127.0.0.1.
#
# Needs: the test host (target/debug/test-host, or $POLICY_HOST), the probe guest built for
# wasm32-wasip1 (or $HOST_CALL_PROBE), docker-registry, skopeo, htpasswd, jq. Run: make host-tests

bats_require_minimum_version 1.5.0

HOST_DIR="$(cd "$(dirname "$BATS_TEST_FILENAME")/.." && pwd)"
ROOT="$(cd "$HOST_DIR/../.." && pwd)"
H="${POLICY_HOST:-$ROOT/target/debug/test-host}"
G="${HOST_CALL_PROBE:-$ROOT/target/wasm32-wasip1/release/host_call_probe.wasm}"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# start_registry NAME [auth]: exports PORT_<NAME>, records the pid for teardown.
start_registry() {
  local name=$1 port dir="$BATS_FILE_TMPDIR/$1"
  port=$(free_port)
  mkdir -p "$dir"
  {
    printf 'version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: %s/data\n' "$dir"
    printf 'http:\n  addr: 127.0.0.1:%s\n  secret: not-a-secret\n' "$port"
    if [[ ${2:-} == auth ]]; then
      htpasswd -Bbn user pass >"$dir/htpasswd"
      printf 'auth:\n  htpasswd:\n    realm: r\n    path: %s/htpasswd\n' "$dir"
    fi
  } >"$dir/config.yml"
  docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 50); do
    curl -s --noproxy '*' -o /dev/null "http://127.0.0.1:$port/v2/" && break
    sleep 0.1
  done
  eval "export PORT_$name=$port"
}

build_layout() {
  local d="$BATS_FILE_TMPDIR/layout" l c m
  mkdir -p "$d/blobs/sha256" "$BATS_FILE_TMPDIR/root"
  echo hello >"$BATS_FILE_TMPDIR/root/hello"
  tar --mtime=@0 -C "$BATS_FILE_TMPDIR/root" -cf "$BATS_FILE_TMPDIR/layer.tar" hello
  l=$(sha256sum "$BATS_FILE_TMPDIR/layer.tar" | cut -d' ' -f1)
  cp "$BATS_FILE_TMPDIR/layer.tar" "$d/blobs/sha256/$l"
  printf '{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"config":{}}' "$l" >"$BATS_FILE_TMPDIR/config.json"
  c=$(sha256sum "$BATS_FILE_TMPDIR/config.json" | cut -d' ' -f1)
  cp "$BATS_FILE_TMPDIR/config.json" "$d/blobs/sha256/$c"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$c" "$(stat -c %s "$BATS_FILE_TMPDIR/config.json")" "$l" "$(stat -c %s "$BATS_FILE_TMPDIR/layer.tar")" >"$BATS_FILE_TMPDIR/manifest.json"
  m=$(sha256sum "$BATS_FILE_TMPDIR/manifest.json" | cut -d' ' -f1)
  cp "$BATS_FILE_TMPDIR/manifest.json" "$d/blobs/sha256/$m"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"v1"}}]}' \
    "$m" "$(stat -c %s "$BATS_FILE_TMPDIR/manifest.json")" >"$d/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$d/oci-layout"
  echo "sha256:$m" >"$BATS_FILE_TMPDIR/digest"
}

setup_file() {
  [[ -x $H && -f $G ]] || skip "build test-host and guests/host-call-probe first"
  export NO_PROXY='*' no_proxy='*'
  start_registry anon
  start_registry auth auth
  build_layout
  skopeo --insecure-policy copy --quiet --preserve-digests --dest-tls-verify=false \
    "oci:$BATS_FILE_TMPDIR/layout:v1" "docker://127.0.0.1:$PORT_anon/test/app:v1"
  skopeo --insecure-policy copy --quiet --preserve-digests --dest-tls-verify=false --dest-creds user:pass \
    "oci:$BATS_FILE_TMPDIR/layout:v1" "docker://127.0.0.1:$PORT_auth/test/app:v1"
  PORT_down=$(free_port)
  export PORT_down
  printf 'insecure_sources: ["127.0.0.1:%s", "127.0.0.1:%s", "127.0.0.1:%s"]\n' "$PORT_anon" "$PORT_auth" "$PORT_down" \
    >"$BATS_FILE_TMPDIR/sources.yaml"
  mkdir -p "$BATS_FILE_TMPDIR/docker"
  printf '{"auths":{"127.0.0.1:%s":{"auth":"%s"}}}' "$PORT_auth" "$(printf user:pass | base64 -w0)" \
    >"$BATS_FILE_TMPDIR/docker/config.json"
  printf '{"uid":"u1","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x"}]}}}' \
    >"$BATS_FILE_TMPDIR/request.json"
  mkdir -p "$BATS_FILE_TMPDIR/cluster"
  printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: regcred, namespace: team-a}\ntype: kubernetes.io/dockerconfigjson\ndata: {.dockerconfigjson: e30=}\n' \
    >"$BATS_FILE_TMPDIR/cluster/secret.yaml"
}

teardown_file() {
  local p
  for p in "$BATS_FILE_TMPDIR"/*/pid; do
    [[ -f $p ]] && kill "$(cat "$p")" 2>/dev/null
  done
  true
}

# probe SETTINGS [flags...]: runs the probe guest; $output is the AdmissionResponse.
probe() {
  local settings=$1
  shift
  run --separate-stderr "$H" run "$G" --request-path "$BATS_FILE_TMPDIR/request.json" \
    --settings-json "$settings" --sources-path "$BATS_FILE_TMPDIR/sources.yaml" "$@"
}

# digest_call IMAGE: settings calling oci/v1/manifest_digest once.
digest_call() {
  jq -cn --arg i "$1" '{calls: [{namespace: "oci", operation: "v1/manifest_digest", payload: $i}]}'
}

# result N: the Nth host-call result (ok payload or error text) reported by the probe.
result() {
  jq -r '.status.message' <<<"$output" | jq -r ".[$1] | (.ok // .err)"
}

@test "manifest_digest: existing tag answers the registry's digest" {
  probe "$(digest_call "127.0.0.1:$PORT_anon/test/app:v1")"
  [ "$status" -eq 0 ]
  [ "$(result 0)" = "{\"digest\":\"$(cat "$BATS_FILE_TMPDIR/digest")\"}" ]
}

@test "manifest_digest: missing tag gives upstream's text" {
  probe "$(digest_call "127.0.0.1:$PORT_anon/test/app:nope")"
  url="http://127.0.0.1:$PORT_anon/v2/test/app/manifests/nope"
  [ "$(result 0)" = "Host error: Callback evaluation failure: Fail to interact with OCI registry: Registry error: url $url, envelope: OCI API errors: [OCI API error: manifest unknown]

Caused by:
    Registry error: url $url, envelope: OCI API errors: [OCI API error: manifest unknown]" ]
}

@test "manifest_digest: basic auth from the docker config, 401 without it" {
  probe "$(digest_call "127.0.0.1:$PORT_auth/test/app:v1")" --docker-config-json-path "$BATS_FILE_TMPDIR/docker"
  [[ "$(result 0)" == '{"digest":"sha256:'* ]]
  probe "$(digest_call "127.0.0.1:$PORT_auth/test/app:v1")"
  [[ "$(result 0)" == "Host error: Callback evaluation failure: Fail to interact with OCI registry: Not authorized: url http://127.0.0.1:$PORT_auth/v2/test/app/manifests/v1"* ]]
}

@test "manifest_digest: registry down reads as a transport error" {
  probe "$(digest_call "127.0.0.1:$PORT_down/test/app:v1")"
  [[ "$(result 0)" == *"error sending request for url (http://127.0.0.1:$PORT_down/v2/test/app/manifests/v1)"* ]]
  [[ "$(result 0)" == *"Connection refused (os error 111)" ]]
}

@test "dispatch errors: unknown binding, namespace, operation" {
  probe '{"calls":[{"binding":"x","namespace":"oci","operation":"v1/manifest_digest","payload":"a"},{"namespace":"nope","operation":"a","payload":"a"},{"namespace":"oci","operation":"v9/x","payload":"a"}]}'
  [ "$(result 0)" = "Host error: unknown binding: x" ]
  [ "$(result 1)" = "Host error: unknown namespace: nope" ]
  [ "$(result 2)" = "Host error: unknown operation: v9/x" ]
}

@test "--host-capabilities denies with upstream's text" {
  probe "$(digest_call busybox)" --host-capabilities 'kubernetes/*'
  [ "$(result 0)" = "Host error: Policy has not been granted access to the 'oci/v1/manifest_digest' host capability. The violation has been reported." ]
}

@test "kubernetes get_resource: cluster dir, context-aware gate, not-found text" {
  get='{"calls":[{"namespace":"kubernetes","operation":"get_resource","payload":{"api_version":"v1","kind":"Secret","name":"regcred","namespace":"team-a","disable_cache":false,"field_masks":["type"]}},{"namespace":"kubernetes","operation":"get_resource","payload":{"api_version":"v1","kind":"Secret","name":"regcred","namespace":"team-b","disable_cache":false}}]}'
  probe "$get" --cluster-dir "$BATS_FILE_TMPDIR/cluster"
  [ "$(result 0)" = "Host error: Policy has not been granted access to Kubernetes v1/Secret resources. The violation has been reported." ]
  probe "$get" --cluster-dir "$BATS_FILE_TMPDIR/cluster" --allow-context-aware
  [ "$(result 0)" = '{"apiVersion":"v1","kind":"Secret","metadata":{"name":"regcred","namespace":"team-a"},"type":"kubernetes.io/dockerconfigjson"}' ]
  [ "$(result 1)" = "Host error: Callback evaluation failure: Cannot find v1/Secret named 'regcred' inside of namespace 'Some(\"team-b\")'" ]
}

@test "invalid settings: message on stderr, exit 1" {
  probe '{"invalid":"bad settings"}'
  [ "$status" -eq 1 ]
  [ "$output" = "" ]
  [ "$stderr" = "Provided settings are not valid: bad settings" ]
}

@test "a reader that closed the pipe before the answer: the run ends quietly, exit 0" {
  # `true` reads nothing and exits at once: the answer meets a closed pipe
  run --separate-stderr bash -c 'set -o pipefail; "$1" run "$2" --request-path "$3" --settings-json "{}" \
    --sources-path "$4" | true' _ "$H" "$G" "$BATS_FILE_TMPDIR/request.json" "$BATS_FILE_TMPDIR/sources.yaml"
  [ "$status" -eq 0 ]
  [[ "$stderr" != *panicked* ]]
}

@test "guest error: internal server error 500" {
  probe '{"fail":"boom"}'
  [ "$status" -eq 0 ]
  [ "$output" = '{"uid":"u1","allowed":false,"status":{"message":"internal server error: Guest call failure: boom","code":500},"auditAnnotations":null,"warnings":null}' ]
}

@test "mutation: base64 JSONPatch" {
  probe '{"mutate_image":"y"}'
  [ "$(jq -r .patchType <<<"$output")" = JSONPatch ]
  [ "$(jq -r .patch <<<"$output" | base64 -d)" = '[{"op":"replace","path":"/spec/containers/0/image","value":"y"}]' ]
}

@test "record then replay gives the same answer; a different request is a mismatch" {
  s="$(digest_call "127.0.0.1:$PORT_anon/test/app:nope")"
  probe "$s" --record-host-capabilities-interactions "$BATS_FILE_TMPDIR/session.yml"
  live_first_line=$(result 0 | head -1)
  grep -q '!OciManifestDigest' "$BATS_FILE_TMPDIR/session.yml"
  probe "$s" --replay-host-capabilities-interactions "$BATS_FILE_TMPDIR/session.yml"
  [ "$(result 0)" = "$live_first_line" ]
  probe "$(digest_call other)" --replay-host-capabilities-interactions "$BATS_FILE_TMPDIR/session.yml"
  [[ "$(result 0)" == 'Host error: Callback evaluation failure: Replay error: unexpected request. Was expecting OciManifestDigest { image: "127.0.0.1:'*'" }, got OciManifestDigest { image: "other" } instead' ]]
}

@test "--oci-timeout-secs bounds a registry that never answers" {
  port=$(free_port)
  ready="$BATS_TEST_TMPDIR/listening"
  timeout 30 python3 -c "
import socket, time
s = socket.socket(); s.bind(('127.0.0.1', $port)); s.listen(8); s.settimeout(1)
open('$ready', 'w').close()
end = time.time() + 20; c = []
while time.time() < end:
    try: c.append(s.accept())
    except OSError: pass
" &
  pid=$!
  # bound and listening before the lookup, however slowly python starts on a loaded machine
  for _ in $(seq 100); do [ -e "$ready" ] && break; sleep 0.1; done
  [ -e "$ready" ]
  SECONDS=0
  probe "$(digest_call "127.0.0.1:$port/test/app:v1")" --oci-timeout-secs 1
  kill "$pid" 2>/dev/null || true
  [ "$SECONDS" -lt 10 ]
  [[ "$(result 0)" == *"error sending request for url (https://127.0.0.1:$port/v2/test/app/manifests/v1)"*"operation timed out" ]]
}

@test "annotate, push, then run from registry://" {
  printf 'rules: []\nmutating: false\nannotations:\n  io.kubewarden.policy.title: host-call-probe\n' >"$BATS_FILE_TMPDIR/meta.yml"
  run "$H" annotate --metadata-path "$BATS_FILE_TMPDIR/meta.yml" --output-path "$BATS_FILE_TMPDIR/annotated.wasm" "$G"
  [ "$status" -eq 0 ]
  grep -q 'io.kubewarden.metadata' "$BATS_FILE_TMPDIR/annotated.wasm"
  grep -q '"protocolVersion":"v1"' "$BATS_FILE_TMPDIR/annotated.wasm"
  run --separate-stderr "$H" push "$BATS_FILE_TMPDIR/annotated.wasm" "registry://127.0.0.1:$PORT_anon/policies/host-call-probe:v1" \
    --sources-path "$BATS_FILE_TMPDIR/sources.yaml"
  [ "$status" -eq 0 ]
  [[ "$output" == sha256:* ]]
  run --separate-stderr "$H" run "registry://127.0.0.1:$PORT_anon/policies/host-call-probe:v1" \
    --request-path "$BATS_FILE_TMPDIR/request.json" --sources-path "$BATS_FILE_TMPDIR/sources.yaml"
  [ "$status" -eq 0 ]
  [ "$output" = '{"uid":"u1","allowed":true,"auditAnnotations":null,"warnings":null}' ]
}

@test "resolve_images: off by default; with the flag, the guest's credentials in order" {
  lookups=$(jq -cn --arg a "127.0.0.1:$PORT_auth/test/app" --arg d "127.0.0.1:$PORT_down/test/app:v1" '{
    lookups: [
      {image: ($a + ":v1"), credentials: [{username: "user", password: "wrong"}, {username: "user", password: "pass"}]},
      {image: ($a + ":v1"), credentials: []},
      {image: ($a + ":nope"), credentials: [{username: "user", password: "pass"}]},
      {image: $d, credentials: []}
    ], timeoutMs: 1500}')
  s=$(jq -cn --argjson p "$lookups" '{calls: [{namespace: "oci", operation: "v1/resolve_images", payload: $p}]}')
  probe "$s"
  [ "$(result 0)" = "Host error: unknown operation: v1/resolve_images" ]
  probe "$s" --enable-resolve-images --docker-config-json-path "$BATS_FILE_TMPDIR/docker" \
    --record-host-capabilities-interactions "$BATS_FILE_TMPDIR/resolve.yml"
  [ "$(result 0 | jq -r '[.results[].outcome] | join(",")')" = "found,unauthorized,notFound,unreachable" ]
  [ "$(result 0 | jq -r '.results[2].detail')" = "manifest unknown" ]
  ! grep -q ': pass$' "$BATS_FILE_TMPDIR/resolve.yml"
  grep -q 'password: <redacted>' "$BATS_FILE_TMPDIR/resolve.yml"
}

@test "bench: --fresh-instances evaluates each request on a new instance, with the same host calls" {
  local s
  s=$(jq -cn --arg i "127.0.0.1:$PORT_anon/test/app:v1" '{first_call_only: true, calls: [{namespace: "oci", operation: "v1/manifest_digest", payload: $i}]}')
  # kept instance: the timed calls are not its first, so the guest rejects them
  run --separate-stderr "$H" bench "$G" -r "$BATS_FILE_TMPDIR/request.json" --settings-json "$s" -n 3 --warmup 1
  [ "$status" -eq 0 ]
  jq -e '.fresh_instances == false and .accepted == false and .host_calls_per_request == 1' <<<"$output"
  # a new instance per evaluation: every call is that instance's first
  run --separate-stderr "$H" bench "$G" -r "$BATS_FILE_TMPDIR/request.json" --settings-json "$s" -n 3 --warmup 1 --fresh-instances
  [ "$status" -eq 0 ]
  jq -e '.fresh_instances == true and .accepted == true and .host_calls_per_request == 1 and .median_us > 0' <<<"$output"
}

@test "bench: POLICY_HOST_PERF_MAP=1 names the guest's compiled functions; --skip-memory-pass leaves memory null" {
  local pid
  POLICY_HOST_PERF_MAP=1 "$H" bench "$G" -r "$BATS_FILE_TMPDIR/request.json" --settings-json '{}' \
    -n 1 --warmup 0 --skip-memory-pass >"$BATS_TEST_TMPDIR/bench.json" &
  pid=$!
  wait "$pid"
  grep -q 'host_call_probe::validate' "/tmp/perf-$pid.map"
  rm -f "/tmp/perf-$pid.map"
  jq -e '.peak_memory_pages == null and .peak_memory_bytes == null and .host_calls_per_request == 0' "$BATS_TEST_TMPDIR/bench.json"
  # without the variable, no map
  "$H" bench "$G" -r "$BATS_FILE_TMPDIR/request.json" --settings-json '{}' -n 1 --warmup 0 >"$BATS_TEST_TMPDIR/bench.json" &
  pid=$!
  wait "$pid"
  [ ! -e "/tmp/perf-$pid.map" ]
  jq -e '.peak_memory_pages > 0' "$BATS_TEST_TMPDIR/bench.json"
}
