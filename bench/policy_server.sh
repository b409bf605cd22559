# shellcheck shell=bash
# Sourced by bench/run.sh: the policy, the probe and accept-all on the real Kubewarden
# policy-server, side by side in one server, one run. Defines server_bench (timed, with
# LOADGEN, the load generator built from bench/loadgen.rs) and server_profile (counted under
# callgrind); expects run.sh's helpers (registry REG_ANON with bench/img-0..9:1.0 pushed,
# proxy_start, machine).
#
# Cases, each with 1 and 10 distinct images per Pod:
#   warm   the same images every request: the server's 60 s digest cache answers;
#   cold   a tag never asked before in every request (tags are added to the registry's
#          storage as copies of 1.0): every lookup reaches the registry;
#   50 ms  cold, through e2e-tests/lib/fault_proxy.py adding 50 ms to every registry request.
# The three modules of a case are interleaved (bench/loadgen.rs: round after round), so a
# change in the machine's load falls on all of them alike; ratios are what to read.
# Knobs: POLICY_SERVER (else policy-server on PATH), BENCH_CONNECTIONS (8),
# BENCH_WORKERS (2), BENCH_SERVER_REQUESTS (warm requests per module and case, 3000),
# BENCH_COLD_REQUESTS (cold, 1 image: 60; 10 images: a fifth of it), BENCH_SLOW_REQUESTS (50 ms
# away, 1 image: 30; 10 images: a fifth of it). Cold lookups are slow on this server (see
# docs/performance.md), hence the small counts.

PS_BIN=${POLICY_SERVER:-$(command -v policy-server || echo policy-server)}
PS_PID=""

# ps_stop: stops the server started here, by its pid.
ps_stop() {
  [[ -n "$PS_PID" ]] || return 0
  kill "$PS_PID" 2>/dev/null || true
  wait "$PS_PID" 2>/dev/null || true
  PS_PID=""
}

# ps_start POLICIES SOURCES [READY_SECS [LAUNCHER...]]: starts policy-server on loopback
# ports (no TLS, no cluster), through LAUNCHER when given (valgrind), and waits up to
# READY_SECS (60) until it is ready; sets PS_PID and PS_ADDR. Its files go to $E2E_WORK/PS_NAME
# (default policy-server), so that two servers can run at once.
ps_start() {
  local policies=$1 sources=$2 ready=${3:-60} dir="$E2E_WORK/${PS_NAME:-policy-server}" port probe_port attempt
  shift $(($# < 3 ? $# : 3))
  local launcher=("$@")
  mkdir -p "$dir/home" "$dir/downloads" "$dir/sigstore"
  E2E_KWCTL_HOME="$dir/home" # where kwctl_trust_config keeps its offline trust file
  for attempt in 1 2 3; do
    port=$(free_port)
    probe_port=$(free_port)
    env -u RUST_BACKTRACE -u KUBECONFIG HOME="$dir/home" "${launcher[@]}" "$PS_BIN" \
      --policies "$policies" --addr 127.0.0.1 --port "$port" --readiness-probe-port "$probe_port" \
      --workers "${BENCH_WORKERS:-2}" --sources-path "$sources" --policy-timeout 30 \
      --ignore-kubernetes-connection-failure --sigstore-trust-config "$(kwctl_trust_config)" \
      --sigstore-cache-dir "$dir/sigstore" --policies-download-dir "$dir/downloads" \
      --log-level warn --log-no-color >"$dir/server.log" 2>&1 3>&- &
    PS_PID=$!
    if wait_until "$ready" ps_ready_or_dead "$probe_port" && kill -0 "$PS_PID" 2>/dev/null; then
      PS_ADDR=127.0.0.1:$port
      return 0
    fi
    echo "bench: policy-server did not start (attempt $attempt):" >&2
    tail -n 5 "$dir/server.log" >&2
    ps_stop
  done
  return 1
}

# ps_annotate DIR: accept-all, the probe and the policy, annotated into DIR (as
# accept-all.wasm, lookup-baseline.wasm, policy.wasm).
ps_annotate() {
  annotate "$ACCEPT_ALL" "$ROOT/bench/baseline-metadata.yml" "$1/accept-all.wasm"
  annotate "$LOOKUP_BASELINE" "$ROOT/bench/baseline-metadata.yml" "$1/lookup-baseline.wasm"
  annotate "$POLICY" "$ROOT/policy-metadata.yml" "$1/policy.wasm"
}

# settings_policies DIR CAPS_JSON: the policies.yml entries of the policy under each settings
# document of bench/settings/ (policy: `{}`, policy-readme, policy-large), the bench's
# registry ($REG_ANON) put where the documents say REGISTRY; and the probe under the same two
# documents (probe-readme, probe-large), which ignores them: the server sends a policy its
# settings with every request, so what a document costs the server whoever reads it is the
# probe's share, and only the rest is the policy's.
settings_policies() {
  local s
  for s in empty readme large; do sed "s/REGISTRY/$REG_ANON/g" "$ROOT/bench/settings/$s.json"; done |
    jq -s --arg x "file://$1/policy.wasm" --arg p "file://$1/lookup-baseline.wasm" --argjson caps "$2" '
      {policy: {module: $x, settings: .[0], hostCapabilities: $caps},
       "policy-readme": {module: $x, settings: .[1], hostCapabilities: $caps},
       "policy-large": {module: $x, settings: .[2], hostCapabilities: $caps},
       "probe-readme": {module: $p, settings: .[1], hostCapabilities: $caps},
       "probe-large": {module: $p, settings: .[2], hostCapabilities: $caps}}'
}

# annotate MODULE METADATA OUT: MODULE with its metadata embedded, which policy-server needs
# (the protocol version); with kwctl where there is one, else with the test host.
annotate() {
  local kwctl=${KWCTL:-$(command -v kwctl || true)}
  if [[ -n "$kwctl" && -x "$kwctl" ]]; then
    env -u RUST_BACKTRACE HOME="$E2E_WORK/policy-server/home" "$kwctl" annotate -m "$2" -o "$3" "$1" 2>/dev/null
  else
    "$HOST" annotate --metadata-path "$2" --output-path "$3" "$1" >/dev/null
  fi
}

# ps_ready_or_dead PORT: the server is ready, or its process is gone.
ps_ready_or_dead() {
  ! kill -0 "$PS_PID" 2>/dev/null ||
    curl -sf --noproxy '*' -o /dev/null "http://127.0.0.1:$1/readiness"
}

# ps_memory FIELD: the server's FIELD (VmRSS, VmHWM) from /proc, in MiB.
ps_memory() {
  awk -v f="$1:" '$1 == f { printf "%.0f", $2 / 1024 }' "/proc/$PS_PID/status"
}

# review_lines FILE N COUNT TAG_PREFIX PREFIX: COUNT AdmissionReviews, one a line, each a Pod
# of N containers c0.. with images PREFIX/img-I:TAG; TAG is 1.0 when TAG_PREFIX is empty, else
# TAG_PREFIX-R for the R-th review (distinct tags for a cold cache).
review_lines() {
  local file=$1 n=$2 count=$3 tag=$4 prefix=$5
  jq -c --argjson n "$n" --argjson count "$count" --arg t "$tag" --arg p "$prefix" '
    . as $review | range($count) as $r
    | $review | .request.object.spec |= (del(.initContainers)
        | .containers = [range($n) | {name: "c\(.)",
            image: "\($p)/img-\(.):\(if $t == "" then "1.0" else "\($t)-\($r)" end)"}])' \
    "$FIXTURES_DIR/pod-create.json" >"$file"
  assert_loopback_only "$file"
}

# add_tags N TAG_PREFIX COUNT: tags TAG_PREFIX-0..COUNT-1 of bench/img-0..N-1, copies of 1.0
# made in the registry's storage (the registry reads tags from its files on every request).
add_tags() {
  python3 - "$E2E_WORK/registries/anon/data/docker/registry/v2/repositories/bench" "$@" <<'EOF'
import shutil, sys
root, n, prefix, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
for i in range(n):
    tags = f"{root}/img-{i}/_manifests/tags"
    for r in range(count):
        shutil.copytree(f"{tags}/1.0", f"{tags}/{prefix}-{r}")
EOF
}

# server_case LABEL IMAGES WARMUP REQUESTS MAX_SECS ROUNDS POLICY_ID ACCEPT BASELINE POLICY
# [EXTRA_ID...]: one loadgen run of the modules interleaved (accept-all, probe, the policy as
# POLICY_ID, and each EXTRA_ID, another instance of the policy, on the POLICY requests);
# appends a table row per module to $OUT/server-rows.md and keeps the raw JSON lines in
# $OUT/server-LABEL.jsonl.
server_case() {
  local label=$1 images=$2 warmup=$3 requests=$4 secs=$5 rounds=$6 policy_id=$7
  local accept=$8 probe=$9 policy=${10} raw="$OUT/server-${1// /}-$2.jsonl" extra=()
  local id
  for id in "${@:11}"; do extra+=(--target "$id=/validate/$id=$policy"); done
  "$LOADGEN" --addr "$PS_ADDR" --connections "${BENCH_CONNECTIONS:-8}" --rounds "$rounds" \
    --requests "$requests" --max-secs "$secs" --warmup "$warmup" --server-pid "$PS_PID" \
    --target "accept-all=/validate/accept-all=$accept" \
    --target "probe=/validate/probe=$probe" \
    --target "policy=/validate/$policy_id=$policy" "${extra[@]}" >"$raw"
  jq -rs --arg case "$label" --arg images "$images" '
    (map(select(.target == "probe")) | .[0]) as $probe
    | .[] | "| \($case) | \($images) | \(.target) | \(.requests) | \(if .rps < 10 then (.rps * 10 | round / 10) else (.rps | round) end) | \(.p50_ms * 100 | round / 100) | \(.p99_ms * 100 | round / 100) | \(.server_cpu_us_per_request) | \(.server_minflt_per_request) | \(if (.target | startswith("policy")) or (.target | startswith("probe-")) then "\(.p50_ms / $probe.p50_ms * 100 | round / 100)× / \(.server_cpu_us_per_request / $probe.server_cpu_us_per_request * 100 | round / 100)×" else "" end) |"' \
    "$raw" >>"$OUT/server-rows.md"
  # a benchmark of wrong answers is worthless: every image exists, every answer must admit
  if jq -e 'select(.errors > 0 or .not_allowed > 0 or .warned > 0)' "$raw" >/dev/null; then
    echo "bench: $label: failed or refused requests:" >&2
    jq -c 'select(.errors > 0 or .not_allowed > 0 or .warned > 0) | {target, errors, not_allowed, warned, first_error}' \
      "$raw" >&2
    return 1
  fi
}

# server_bench: the section; prints its tables, or says loudly why it was skipped.
server_bench() {
  echo
  echo "## The real policy-server"
  echo
  if [[ ! -x "$PS_BIN" ]]; then
    echo "SKIPPED: no policy-server binary at $PS_BIN (set POLICY_SERVER, or put policy-server on PATH, to measure one)."
    echo "bench: policy-server tables SKIPPED: no binary at $PS_BIN" >&2
    return 0
  fi
  local warm=${BENCH_SERVER_REQUESTS:-3000} cold=${BENCH_COLD_REQUESTS:-60}
  local slow=${BENCH_SLOW_REQUESTS:-30} dir="$E2E_WORK/server-bench" n
  mkdir -p "$dir" "$E2E_WORK/policy-server/home"
  proxy_start --mode delay --upstream "$REG_ANON" --delay-ms 50
  local slow_reg=$PROXY_ADDR
  ps_annotate "$dir"
  # one server, every module, with the same grant: the registry capabilities the policy may
  # use (none is granted by default). The policy with default settings, and with a budget that
  # lets ten 50 ms lookups finish (the default 1.5 s would turn slow answers into warnings).
  local oci='["oci/v1/manifest_digest", "oci/v1/oci_manifest", "oci/v1/oci_manifest_config"]'
  jq -n --arg a "file://$dir/accept-all.wasm" --arg p "file://$dir/lookup-baseline.wasm" --arg x "file://$dir/policy.wasm" \
    --argjson oci "$oci" --argjson documents "$(settings_policies "$dir" "$oci")" '
      {"accept-all": {module: $a, settings: {}, hostCapabilities: $oci},
       probe: {module: $p, settings: {}, hostCapabilities: $oci},
       "policy-patient": {module: $x, settings: {timeBudgetMs: 30000}, hostCapabilities: $oci}}
      + $documents' >"$dir/policies.yml"
  ps_start "$dir/policies.yml" "$(write_sources_yaml server-bench --insecure "$REG_ANON" --insecure "$slow_reg")"
  local idle_rss
  idle_rss=$(ps_memory VmRSS)
  : >"$OUT/server-rows.md"
  for n in 1 10; do
    review_lines "$dir/warm-$n.jsonl" "$n" 1 "" "$REG_ANON/bench"
    server_case "warm" "$n" 200 "$warm" 90 20 policy \
      "$dir/warm-$n.jsonl" "$dir/warm-$n.jsonl" "$dir/warm-$n.jsonl" policy-readme policy-large \
      probe-readme probe-large
  done
  for n in 1 10; do
    local count=$((n == 1 ? cold : (cold + 4) / 5))
    add_tags "$n" "probe-cold$n" "$count"
    add_tags "$n" "policy-cold$n" "$count"
    review_lines "$dir/probe-cold-$n.jsonl" "$n" "$count" "probe-cold$n" "$REG_ANON/bench"
    review_lines "$dir/policy-cold-$n.jsonl" "$n" "$count" "policy-cold$n" "$REG_ANON/bench"
    server_case "cold" "$n" 0 "$count" 60 3 policy-patient \
      "$dir/probe-cold-$n.jsonl" "$dir/probe-cold-$n.jsonl" "$dir/policy-cold-$n.jsonl"
  done
  for n in 1 10; do
    local count=$((n == 1 ? slow : (slow + 4) / 5))
    add_tags "$n" "probe-slow$n" "$count"
    add_tags "$n" "policy-slow$n" "$count"
    review_lines "$dir/probe-slow-$n.jsonl" "$n" "$count" "probe-slow$n" "$slow_reg/bench"
    review_lines "$dir/policy-slow-$n.jsonl" "$n" "$count" "policy-slow$n" "$slow_reg/bench"
    server_case "50 ms" "$n" 0 "$count" 120 2 policy-patient \
      "$dir/probe-slow-$n.jsonl" "$dir/probe-slow-$n.jsonl" "$dir/policy-slow-$n.jsonl"
  done
  local peak
  peak=$(ps_memory VmHWM)
  ps_stop
  echo "$("$PS_BIN" --version 2>/dev/null | head -n1), --workers ${BENCH_WORKERS:-2}, ${BENCH_CONNECTIONS:-8} client connections (bench/loadgen.rs, HTTP/1.1 keep-alive), loopback. $(machine); load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| cache | images | req/s: accept-all / probe / policy | p50 (ms): accept-all / probe / policy | p99 (ms): accept-all / probe / policy | policy / probe: p50, server CPU |"
  echo "|---|---:|---:|---:|---:|---:|"
  local f
  for f in "$OUT"/server-warm-1.jsonl "$OUT"/server-warm-10.jsonl "$OUT"/server-cold-1.jsonl \
    "$OUT"/server-cold-10.jsonl "$OUT"/server-50ms-1.jsonl "$OUT"/server-50ms-10.jsonl; do
    jq -rs --arg f "$(basename "$f" .jsonl)" '
      def r2: . * 100 | round / 100;
      def rps: if . < 10 then (. * 10 | round / 10) else round end;
      def ms: if . >= 100 then round else r2 end;
      (map({key: .target, value: .}) | from_entries) as $m
      | ($f | capture("server-(?<c>[a-z0-9]+)-(?<n>[0-9]+)")) as $k
      | "| \(if $k.c == "50ms" then "50 ms" else $k.c end) | \($k.n) | \($m["accept-all"].rps | rps) / \($m.probe.rps | rps) / \($m.policy.rps | rps) | \($m["accept-all"].p50_ms | ms) / \($m.probe.p50_ms | ms) / \($m.policy.p50_ms | ms) | \($m["accept-all"].p99_ms | ms) / \($m.probe.p99_ms | ms) / \($m.policy.p99_ms | ms) | \($m.policy.p50_ms / $m.probe.p50_ms | r2) / \($m.policy.server_cpu_us_per_request / $m.probe.server_cpu_us_per_request | r2) |"' "$f"
  done
  echo
  echo "Per module, with what the server process spent (CPU time of all its threads, minor page faults):"
  echo
  echo "| cache | images | module | requests | req/s | p50 (ms) | p99 (ms) | server CPU per request (µs) | server minor faults per request | policy / probe: p50, CPU |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
  cat "$OUT/server-rows.md"
  echo
  echo "Settings documents (bench/settings/): \`policy\` has \`{}\`, \`policy-readme\` the README's cluster example, \`policy-large\` every setting of docs/settings.md (20 mirrors, 50 exempt images, 20 exempt namespaces)."
  echo
  echo "| target (warm, same run) | settings | policy / probe, p50 | policy / probe, server CPU | the same, median of the per-round ratios | against the probe with the same document: p50, server CPU | target |"
  echo "|---|---|---:|---:|---:|---:|---:|"
  for n in 1 10; do
    for doc in "policy probe {}" "policy-readme probe-readme README" "policy-large probe-large large"; do
      # shellcheck disable=SC2086 # the words of a document
      set -- $doc
      jq -rs --arg n "$n" --arg id "$1" --arg same "$2" --arg name "$3" --arg t "$([[ $n == 1 ]] && echo 1.05 || echo 1.1)" '
        def r2: . * 100 | round / 100;
        def median: sort | .[length / 2 | floor];
        (map(select(.target == "probe"))[0]) as $p | (map(select(.target == $id))[0]) as $x
        | (map(select(.target == $same))[0]) as $q
        | [range([$p.rounds, $x.rounds] | map(length) | min)] as $i
        | "| \($n) image(s) | \($name) | \($x.p50_ms / $p.p50_ms | r2) | \($x.server_cpu_us_per_request / $p.server_cpu_us_per_request | r2) | \($i | map($x.rounds[.].p50_us / $p.rounds[.].p50_us) | median | r2), \($i | map($x.rounds[.].cpu_us / ([$p.rounds[.].cpu_us, 1] | max)) | median | r2) | \($x.p50_ms / $q.p50_ms | r2), \($x.server_cpu_us_per_request / $q.server_cpu_us_per_request | r2) | ≤ \($t) |"' \
        "$OUT/server-warm-$n.jsonl"
    done
  done
  echo
  echo "Server RSS: ${idle_rss} MiB after start (4 policies loaded), peak (VmHWM) ${peak} MiB after every case."
}

# server_profile: the section `profile` (not run by default: about 6 minutes, most of it the
# server compiling its modules under valgrind). The real policy-server under callgrind with
# cache simulation, BENCH_PROFILE_REQUESTS (20) identical warm requests to each module in turn,
# the counters dumped after each; bench/server_callgrind.py reads the dumps. Instructions and
# instruction-cache misses per request do not move with the machine's load as times do, so a
# change to the policy can be judged on one run (docs/performance.md; the first such counts:
# bench/results/policy-server.md).
server_profile() {
  echo
  echo "## The real policy-server under callgrind (instructions and I-cache misses per request)"
  echo
  if [[ ! -x "$PS_BIN" ]] || ! command -v valgrind >/dev/null || ! command -v callgrind_control >/dev/null; then
    echo "SKIPPED: needs a policy-server binary ($PS_BIN) and valgrind."
    echo "bench: callgrind profile SKIPPED (policy-server or valgrind missing)" >&2
    return 0
  fi
  local n=${BENCH_PROFILE_REQUESTS:-20} dir="$E2E_WORK/server-profile" images m
  mkdir -p "$dir" "$E2E_WORK/policy-server/home"
  ps_annotate "$dir"
  local oci='["oci/v1/manifest_digest"]' modules="accept-all probe policy policy-readme policy-large probe-large"
  jq -n --arg a "file://$dir/accept-all.wasm" --arg p "file://$dir/lookup-baseline.wasm" \
    --argjson oci "$oci" --argjson documents "$(settings_policies "$dir" "$oci")" '
      {"accept-all": {module: $a, settings: {}, hostCapabilities: $oci},
       probe: {module: $p, settings: {}, hostCapabilities: $oci}}
      + ($documents | del(."probe-readme"))' >"$dir/policies.yml"
  # compiling the modules under valgrind takes minutes
  ps_start "$dir/policies.yml" "$(write_sources_yaml server-profile --insecure "$REG_ANON")" 1200 \
    valgrind --tool=callgrind --cache-sim=yes --callgrind-out-file="$dir/callgrind.out" ||
    return 1
  # send N FILE MODULE: N requests, one after the other; the last answer must admit
  send() {
    local k
    for ((k = 0; k < $1; k++)); do
      curl -sf --noproxy '*' -o "$dir/answer.json" -H 'content-type: application/json' \
        --data "@$2" "http://$PS_ADDR/validate/$3"
    done
    jq -e '.response.allowed == true and (.response.warnings // [] | length == 0)' \
      "$dir/answer.json" >/dev/null || { echo "bench: $3 did not admit: $(cat "$dir/answer.json")" >&2; return 1; }
  }
  local dumps=()
  for images in 1 10; do
    review_lines "$dir/reviews-$images.jsonl" "$images" 1 "" "$REG_ANON/bench"
    head -n1 "$dir/reviews-$images.jsonl" >"$dir/review-$images.json"
    for m in $modules; do
      send 3 "$dir/review-$images.json" "$m" # warm the digest cache and the server's paths
    done
    # a dump of its own for everything before the measured requests (the first dump of a run
    # also carries costs from before it), then one per module
    callgrind_control -d warmup "$PS_PID" >/dev/null 2>&1
    for m in $modules; do
      callgrind_control -z "$PS_PID" >/dev/null 2>&1
      send "$n" "$dir/review-$images.json" "$m"
      callgrind_control -d "$m $images" "$PS_PID" >/dev/null 2>&1
    done
  done
  ps_stop
  local f
  for f in "$dir"/callgrind.out.*; do
    grep -q '^desc: Trigger: dump warmup' "$f" || dumps+=("$f")
  done
  python3 "$ROOT/bench/server_callgrind.py" "$n" "${dumps[@]}" >"$OUT/server-profile.jsonl"
  echo "$("$PS_BIN" --version 2>/dev/null | head -n1) under valgrind's callgrind (--cache-sim=yes: 32 KiB 8-way L1i), --workers ${BENCH_WORKERS:-2}, $n identical warm requests per module and Pod, one at a time. $(machine). Per request; \"wasm\" is the code wasmtime compiled from the modules, \"server\" everything else the server ran."
  echo
  echo "| images | module | instructions | I-cache misses | wasm: instructions | wasm: I-cache misses | server: instructions | server: I-cache misses |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|"
  jq -r '(.label | split(" ")) as [$m, $n]
    | "| \($n) | \($m) | \(.ir) | \(.i1mr) | \(.wasm_ir) | \(.wasm_i1mr) | \(.server_ir) | \(.server_i1mr) |"' \
    "$OUT/server-profile.jsonl"
  echo
  echo "| images | policy / probe: instructions | policy / probe: I-cache misses | policy − probe: wasm I-cache misses | policy − probe: server I-cache misses |"
  echo "|---:|---:|---:|---:|---:|"
  jq -rs 'def r2: . * 100 | round / 100;
    map({key: .label, value: .}) | from_entries as $d
    | ("1", "10") as $n | $d["probe \($n)"] as $p | $d["policy \($n)"] as $x
    | "| \($n) | \($x.ir / $p.ir | r2) | \($x.i1mr / $p.i1mr | r2) | \($x.wasm_i1mr - $p.wasm_i1mr) | \($x.server_i1mr - $p.server_i1mr) |"' \
    "$OUT/server-profile.jsonl"
  echo
  echo "What the settings documents cost (bench/settings/; target: large ≤ 1.1× \`{}\`'s wasm instructions with 1 image):"
  echo
  echo "| images | wasm instructions per request: \`{}\` / README / large | README / \`{}\` | large / \`{}\` | large, policy / probe: all instructions, server's, wasm |"
  echo "|---:|---:|---:|---:|---:|"
  jq -rs 'def r3: . * 1000 | round / 1000;
    map({key: .label, value: .}) | from_entries as $d
    | ("1", "10") as $n | $d["policy \($n)"].wasm_ir as $e | $d["policy-readme \($n)"].wasm_ir as $r
    | $d["policy-large \($n)"] as $x | $x.wasm_ir as $l | $d["probe-large \($n)"] as $p
    | "| \($n) | \($e) / \($r) / \($l) | \($r / $e | r3) | \($l / $e | r3) | \($x.ir / $p.ir | r3), \($x.server_ir / $p.server_ir | r3), \($l / $p.wasm_ir | r3) |"' \
    "$OUT/server-profile.jsonl"
}
