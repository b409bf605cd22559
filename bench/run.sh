#!/usr/bin/env bash
# `make bench`: measures the policy and prints markdown tables. Every figure is set against a
# baseline measured side by side in the same run, on the same machine, so the ratios mean
# something even when the absolute times move with the machine's load. Nothing is asserted.
#
#   0. policy-server  the policy, the probe and accept-all on the real Kubewarden policy-server
#                     (POLICY_SERVER, else policy-server on PATH; skipped, saying so,
#                     when there is none): requests per second, p50, p99, the server's CPU
#                     and page faults per request, warm, cold and 50 ms away; peak RSS.
#                     bench/policy_server.sh, with the load generator bench/loadgen.rs;
#   0a. audit         admission latency before and during a background-audit sweep on the real
#                     policy-server, on one server and on two, at 100 and 10 at once (bench/audit.sh,
#                     bench/audit_sweep.py; skipped, saying so, without a policy-server);
#   0b. profile       (only when BENCH_SECTIONS names it, ~6 minutes; needs valgrind) the same
#                     server under callgrind: instructions and instruction-cache misses per
#                     request, the policy's compiled code apart from the server's, which do not
#                     move with the machine's load. bench/policy_server.sh, bench/server_callgrind.py;
#   1. guest cost     `policy-host bench` (host calls answered from memory) on Pods of 1, 10
#                     and 100 containers, against guests/accept-all (parses, accepts) and
#                     guests/probe (parses, one oci/v1/manifest_digest per distinct image,
#                     accepts) in the same host;
#   2. module size    raw, after wasm-opt, the baselines, and the policy's code by crate
#                     (bench/size_by_crate.py on a `wasm-opt -Os -g` build, which keeps names);
#   3. end to end     `policy-host run` against a local docker-registry with 10 images,
#                     against plain sequential `curl -I` of the same manifests;
#   4. batching       stock sequential lookups against one oci/v1/resolve_images call, with
#                     50 ms added to every registry request by e2e-tests/lib/fault_proxy.py;
#                     the batch at the host's default bound (16 lookups at a time per
#                     registry) and with every lookup at once (the bound set to the batch).
#
# Expects what `make bench` builds: policy.wasm, the raw module, the test host and the
# accept-all and probe modules (ACCEPT_ALL_WASM, PROBE_WASM). Only 127.0.0.1 is contacted. Knobs (environment):
# BENCH_ITERATIONS (guest evaluations per case, 200), BENCH_REPEATS (end-to-end runs per
# case, 10), BENCH_OUT (where raw JSON and the tables go, target/bench), BENCH_SECTIONS (the
# sections to run, "server audit guest size e2e batch broker" by default; "profile" only when named),
# and those of bench/policy_server.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ITERATIONS=${BENCH_ITERATIONS:-200}
REPEATS=${BENCH_REPEATS:-10}
OUT=${BENCH_OUT:-$ROOT/target/bench}
RAW_WASM=$ROOT/target/wasm32-wasip1/release/resolvable_images_wasm.wasm
POLICY=${BENCH_POLICY_WASM:-$ROOT/policy.wasm}
ACCEPT_ALL=${ACCEPT_ALL_WASM:-$ROOT/target/bench/accept-all.wasm}
PROBE=${PROBE_WASM:-$ROOT/target/bench/probe.wasm}
HOST=${POLICY_HOST:-$ROOT/target/debug/policy-host}
SECTIONS=" ${BENCH_SECTIONS:-server audit guest size e2e batch broker} "
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
LOADGEN=$OUT/loadgen
# section NAME: whether BENCH_SECTIONS asks for NAME.
section() { [[ "$SECTIONS" == *" $1 "* ]]; }

for f in "$POLICY" "$ACCEPT_ALL" "$PROBE" $(section size && echo "$RAW_WASM") \
  $(section guest || section e2e || section batch && echo "$HOST"); do
  [[ -e "$f" ]] || { echo "bench: $f is missing; run 'make bench'" >&2; exit 1; }
done

# The e2e helpers: registries, images, requests (loopback only, no proxy).
E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench.XXXXXX")
export E2E_WORK POLICY_HOST=$HOST POLICY_WASM=$POLICY
# shellcheck source=e2e-tests/lib/common.bash
source "$ROOT/e2e-tests/lib/common.bash"
mkdir -p "$OUT"
PROXY_PIDS=()

# Everything started here stops on exit, whatever happens.
cleanup() {
  local pid
  for pid in "${PROXY_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  registry_stop_all
  rm -rf "$E2E_WORK"
}
trap cleanup EXIT

# ms_now: wall clock in milliseconds.
ms_now() { date +%s%3N; }

# median: the median of the numbers on stdin (one a line).
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ratio A B: A/B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# pod_request FILE N PREFIX: a Pod CREATE with N containers c0.. using PREFIX/img-I:1.0.
pod_request() {
  local file=$1 n=$2 prefix=$3
  jq --argjson n "$n" --arg p "$prefix" '.request.object.spec |= (del(.initContainers)
      | .containers = [range($n) | {name: "c\(.)", image: "\($p)/img-\(.):1.0"}])' \
    "$FIXTURES_DIR/pod-create.json" >"$file"
  assert_loopback_only "$file"
}

# proxy_start ARGS...: starts fault_proxy.py (loopback, kernel-chosen port) and sets
# PROXY_ADDR=127.0.0.1:PORT. Not to be called in $(...): the pid must reach cleanup.
proxy_start() {
  local port_file
  port_file=$(mktemp "$E2E_WORK/proxy.XXXXXX")
  rm -f "$port_file"
  python3 "$E2E_DIR/lib/fault_proxy.py" --port-file "$port_file" "$@" >/dev/null 2>"$port_file.log" &
  PROXY_PIDS+=($!)
  wait_until 10 test -s "$port_file"
  PROXY_ADDR="127.0.0.1:$(cat "$port_file")"
}

machine() {
  printf '%s, %s cores (nproc), %s' "$(date -u +%Y-%m-%d)" "$(nproc)" \
    "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)"
}

echo "# resolvable-images-policy benchmarks"
echo
echo "$(machine); $ITERATIONS guest evaluations per case, $REPEATS end-to-end runs per case (medians)."

# The registry of sections 0 and 3, with 20 images.
registry_start anon >/dev/null
img=$(build_image bench)
for i in $(seq 0 19); do push_image "$img" anon "bench/img-$i:1.0"; done

# --- 0. The real policy-server --------------------------------------------------------------
if section server; then
  # shellcheck source=bench/policy_server.sh
  source "$ROOT/bench/policy_server.sh"
  rustc --edition 2021 -O "$ROOT/bench/loadgen.rs" -o "$LOADGEN"
  trap 'ps_stop; cleanup' EXIT
  server_bench
fi

# --- 0a. Background audit and admission on the real policy-server -------------------------
if section audit; then
  # shellcheck source=bench/policy_server.sh
  source "$ROOT/bench/policy_server.sh"
  # shellcheck source=e2e-tests/lib/audit.bash
  source "$ROOT/e2e-tests/lib/audit.bash"
  # shellcheck source=bench/audit.sh
  source "$ROOT/bench/audit.sh"
  trap 'ps_stop; cleanup' EXIT
  audit_bench
fi

# --- 0b. The real policy-server under callgrind (opt-in: BENCH_SECTIONS=profile) ------------
if section profile; then
  # shellcheck source=bench/policy_server.sh
  source "$ROOT/bench/policy_server.sh"
  trap 'ps_stop; cleanup' EXIT
  server_profile
fi

# --- 1. Guest cost ------------------------------------------------------------------------
if section guest; then
echo
echo "## Guest cost per evaluation (host answers from memory)"
echo
echo "| containers | policy median (µs) | policy p95 (µs) | accept-all median (µs) | ratio to accept-all | probe median (µs) | ratio to probe | host calls | bytes to host / to guest (host calls) | validate payload (bytes) | peak memory, policy / accept-all (64 KiB pages) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in 1 10 100; do
  req="$E2E_WORK/pod-$n.json"
  pod_request "$req" "$n" "127.0.0.1:5000/bench"
  "$HOST" bench "$POLICY" -r "$req" -n "$ITERATIONS" --settings-json '{}' >"$OUT/guest-policy-$n.json"
  "$HOST" bench "$ACCEPT_ALL" -r "$req" -n "$ITERATIONS" --settings-json '{}' >"$OUT/guest-accept-all-$n.json"
  "$HOST" bench "$PROBE" -r "$req" -n "$ITERATIONS" --settings-json '{}' >"$OUT/guest-probe-$n.json"
  jq -r --slurpfile b "$OUT/guest-accept-all-$n.json" --slurpfile p "$OUT/guest-probe-$n.json" --arg n "$n" '
    def r: (. * 100 | round) / 100;
    "| \($n) | \(.median_us) | \(.p95_us) | \($b[0].median_us) | \((.median_us / $b[0].median_us) | r) | \($p[0].median_us) | \((.median_us / $p[0].median_us) | r) | \(.host_calls_per_request) | \(.host_call_bytes_to_host_per_request) / \(.host_call_bytes_to_guest_per_request) | \(.validate_request_bytes) | \(.peak_memory_pages) / \($b[0].peak_memory_pages) |"
  ' "$OUT/guest-policy-$n.json"
done
echo
echo "## Guest cost per fresh instance (new store, instantiation, wapc_init, validate: what policy-server 1.36 does for every request)"
echo
echo "| containers | policy median (µs) | probe median (µs) | accept-all median (µs) | policy / probe | policy − probe (µs) |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 1 10; do
  req="$E2E_WORK/pod-$n.json"
  for m in policy probe accept-all; do
    case $m in policy) mod=$POLICY ;; probe) mod=$PROBE ;; accept-all) mod=$ACCEPT_ALL ;; esac
    "$HOST" bench "$mod" -r "$req" -n "$ITERATIONS" --settings-json '{}' --fresh-instances >"$OUT/fresh-$m-$n.json"
  done
  jq -r --slurpfile p "$OUT/fresh-probe-$n.json" --slurpfile a "$OUT/fresh-accept-all-$n.json" --arg n "$n" '
    def r: (. * 100 | round) / 100;
    "| \($n) | \(.median_us) | \($p[0].median_us) | \($a[0].median_us) | \((.median_us / $p[0].median_us) | r) | \((.median_us - $p[0].median_us) | r) |"
  ' "$OUT/fresh-policy-$n.json"
done
echo
echo "## Wasm instructions per fresh evaluation, by settings document"
echo
echo "The wasm operators one fresh instance executes (\`_start\`, \`wapc_init\`, \`validate\`), counted"
echo "by wasmtime's fuel: they do not move with the machine's load. The documents of bench/settings/,"
echo "REGISTRY being the bench's images' registry. Target: large ≤ 1.1× \`{}\` with 1 image."
echo
echo "| containers | policy: \`{}\` / README / large | README / \`{}\` | large / \`{}\` | probe: \`{}\` / large |"
echo "|---:|---:|---:|---:|---:|"
for n in 1 10; do
  req="$E2E_WORK/pod-$n.json"
  for s in empty readme large; do
    doc=$(sed "s#REGISTRY#127.0.0.1:5000#g" "$ROOT/bench/settings/$s.json")
    "$HOST" bench "$POLICY" -r "$req" -n 20 --warmup 2 --settings-json "$doc" --fresh-instances >"$OUT/instructions-policy-$s-$n.json"
    "$HOST" bench "$PROBE" -r "$req" -n 20 --warmup 2 --settings-json "$doc" --fresh-instances >"$OUT/instructions-probe-$s-$n.json"
  done
  jq -rn --arg n "$n" \
    --slurpfile e "$OUT/instructions-policy-empty-$n.json" --slurpfile d "$OUT/instructions-policy-readme-$n.json" \
    --slurpfile l "$OUT/instructions-policy-large-$n.json" --slurpfile pe "$OUT/instructions-probe-empty-$n.json" \
    --slurpfile pl "$OUT/instructions-probe-large-$n.json" '
    def r: (. * 100 | round) / 100;
    def i: .[0].wasm_instructions_per_request;
    "| \($n) | \($e | i) / \($d | i) / \($l | i) | \((($d | i) / ($e | i)) | r) | \((($l | i) / ($e | i)) | r) | \($pe | i) / \($pl | i) |"'
done
fi

# --- 2. Module size -----------------------------------------------------------------------
if section size; then
echo
echo "## Module size"
echo
echo "| module | bytes |"
echo "|---|---:|"
echo "| policy, raw (\`$(realpath --relative-to="$ROOT" "$RAW_WASM")\`) | $(stat -c %s "$RAW_WASM") |"
echo "| policy, wasm-opt -Os (\`policy.wasm\`) | $(stat -c %s "$POLICY") |"
accept_raw=$ROOT/target/wasm32-wasip1/release/accept_all.wasm
[[ -e "$accept_raw" ]] && echo "| accept-all, raw | $(stat -c %s "$accept_raw") |"
echo "| accept-all, wasm-opt -Os (the one measured) | $(stat -c %s "$ACCEPT_ALL") |"
echo "| probe, wasm-opt -Os (the one measured) | $(stat -c %s "$PROBE") |"
if command -v wasm-opt >/dev/null; then
  # the same optimisation as policy.wasm, keeping the name section that attributes code to crates
  wasm-opt -Os -g "$RAW_WASM" -o "$OUT/policy-names.wasm"
  named=$OUT/policy-names.wasm
else
  named=$RAW_WASM
fi
echo
echo "### Policy code by crate ($(basename "$named"); drop glue and trait impls go to the type's crate)"
echo
python3 "$ROOT/bench/size_by_crate.py" "$named" 15
fi

# --- 3. End to end against a local registry -----------------------------------------------
policy_ms() { # policy_ms REQUEST [HOST OPTIONS...]: wall time of one decision, in ms
  local req=$1 start out
  shift
  start=$(ms_now)
  out=$("$HOST" run "${MODULE:-$POLICY}" --request-path "$req" --sources-path "$SOURCES" "$@" 2>/dev/null)
  echo $(($(ms_now) - start))
  # a benchmark of wrong answers is worthless: every image exists
  [[ "$(jq -r '.allowed' <<<"$out")" == true && "$(jq '.warnings // [] | length' <<<"$out")" == 0 ]] ||
    { echo "bench: unexpected answer: $out" >&2; return 1; }
}
accept='application/vnd.oci.image.manifest.v1+json,application/vnd.oci.image.index.v1+json,application/vnd.docker.distribution.manifest.v2+json,application/vnd.docker.distribution.manifest.list.v2+json'
curl_ms() { # curl_ms N: wall time of N sequential HEAD requests in one curl, in ms
  local start urls=() i
  for ((i = 0; i < $1; i++)); do urls+=("http://$REG_ANON/v2/bench/img-$i/manifests/1.0"); done
  start=$(ms_now)
  curl -sf --noproxy "*" -I -H "Accept: $accept" "${urls[@]}" >/dev/null
  echo $(($(ms_now) - start))
}

if section e2e; then
SOURCES=$(write_sources_yaml bench --insecure "$REG_ANON")
req10="$E2E_WORK/pod-e2e-10.json"
pod_request "$req10" 10 "$REG_ANON/bench"
policy_ms "$req10" --settings-json '{}' >/dev/null # compilation cache warm
for ((r = 0; r < REPEATS; r++)); do policy_ms "$req10" --settings-json '{}'; done >"$OUT/e2e-policy.txt"
for ((r = 0; r < REPEATS; r++)); do curl_ms 10; done >"$OUT/e2e-curl.txt"
# the fixed cost of a decision: the same run with accept-all, which makes no lookup
MODULE=$ACCEPT_ALL policy_ms "$req10" --settings-json '{}' >/dev/null
for ((r = 0; r < REPEATS; r++)); do MODULE=$ACCEPT_ALL policy_ms "$req10" --settings-json '{}'; done >"$OUT/e2e-accept-all.txt"
# ... and with the policy itself, its namespace exempt: module load and parsing, no lookup
exempt='{"exemptNamespaces": ["team-a"]}'
for ((r = 0; r < REPEATS; r++)); do policy_ms "$req10" --settings-json "$exempt"; done >"$OUT/e2e-policy-exempt.txt"
p=$(median <"$OUT/e2e-policy.txt")
c=$(median <"$OUT/e2e-curl.txt")
a=$(median <"$OUT/e2e-accept-all.txt")
x=$(median <"$OUT/e2e-policy-exempt.txt")
echo
echo "## End to end: 10 distinct images on a local docker-registry (plain HTTP)"
echo
echo "| what | median (ms) |"
echo "|---|---:|"
echo "| \`policy-host run\`: process, module load (cache warm), 10 lookups, decision | $p |"
echo "| \`curl -I\`: 10 sequential HEADs in one process, the lookups alone | $c |"
echo "| \`policy-host run\` with accept-all: process and module load, no lookup | $a |"
echo "| \`policy-host run\`, the policy with the namespace exempt: process, module load, no lookup | $x |"
echo "| ratio policy / curl | $(ratio "$p" "$c") |"
echo "| ratio (policy - policy exempt) / curl: the 10 lookups as the host makes them | $(ratio "$(awk -v p="$p" -v a="$x" 'BEGIN { print p - a }')" "$c") |"
fi

# --- 4. Stock sequential lookups against one batched call, 50 ms per request ----------------
if section batch; then
proxy_start --mode delay --upstream "$REG_ANON" --delay-ms 50
SLOW=$PROXY_ADDR
SOURCES=$(write_sources_yaml bench-slow --insecure "$SLOW")
CLUSTER=$(write_cluster_dir bench)
echo
echo "## Stock lookups against one batched oci/v1/resolve_images call (50 ms added per registry request)"
echo
echo "| images | stock, sequential (ms) | batched, 16 at a time (ms) | speed-up | batched, all at once (ms) | speed-up |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in 1 5 20; do
  req="$E2E_WORK/pod-slow-$n.json"
  pod_request "$req" "$n" "$SLOW/bench"
  # generous budgets: the point is the time the lookups take, not the budget
  policy_ms "$req" --settings-json '{"timeBudgetMs": 30000}' >/dev/null
  for ((r = 0; r < 5; r++)); do
    policy_ms "$req" --settings-json '{"timeBudgetMs": 30000}'
  done >"$OUT/batch-stock-$n.txt"
  batched=(--settings-json '{"timeBudgetMs": 30000, "pullSecrets": {"credentialedLookups": true}}'
    --enable-resolve-images --allow-context-aware --cluster-dir "$CLUSTER")
  for ((r = 0; r < 5; r++)); do policy_ms "$req" "${batched[@]}"; done >"$OUT/batch-resolve-$n.txt"
  for ((r = 0; r < 5; r++)); do
    policy_ms "$req" "${batched[@]}" --resolve-images-concurrency "$n"
  done >"$OUT/batch-resolve-all-$n.txt"
  s=$(median <"$OUT/batch-stock-$n.txt")
  b=$(median <"$OUT/batch-resolve-$n.txt")
  w=$(median <"$OUT/batch-resolve-all-$n.txt")
  echo "| $n | $s | $b | $(ratio "$s" "$b") | $w | $(ratio "$s" "$w") |"
done
fi

# --- 5. The lookup broker (bench/broker.sh: skips without the real policy-server; and
# bench/broker-providers.sh, the broker alone: a credential provider plugin against a pull
# secret; bench/broker-providers-fairness.sh: a namespace's plugin lookups beside a slow one's;
# bench/safe-install.sh: one namespace's lookups beside a hostile neighbour;
# bench/broker-cost.sh: admission with deploy/'s settings (every lookup brokered) against the
# server's own lookups, skips without the real policy-server; bench/broker-neighbours.sh: one
# namespace's lookups beside three hostile ones, the broker alone;
# bench/broker-suggestions.sh: a 404 with tag suggestions against one without) ---------------
if section broker; then
  bash "$ROOT/bench/broker.sh"
  bash "$ROOT/bench/broker-cost.sh"
  bash "$ROOT/bench/broker-neighbours.sh"
  bash "$ROOT/bench/broker-providers.sh"
  bash "$ROOT/bench/broker-providers-fairness.sh"
  bash "$ROOT/bench/safe-install.sh"
  bash "$ROOT/bench/broker-suggestions.sh"
fi
