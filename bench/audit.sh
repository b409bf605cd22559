# shellcheck shell=bash
# Sourced by bench/run.sh (section `audit`), after bench/policy_server.sh: admission latency on
# the real policy-server before and during a background-audit sweep (bench/audit_sweep.py
# sends both, the sweep as the audit scanner does), side by side in one run, in three
# installations (docs/audit.md):
#
#   one server, audit.lookups on     what any policy that looks images up does on the stock
#                                    server: the sweep's cold lookups and admission share the
#                                    workers and the server's one lookup lock;
#   one server, audit.lookups off    this policy's default on the admission instance: the
#                                    scanner is answered "not audited" without a lookup;
#   two servers (recommended)        admission on one server, the audit instance
#                                    (audit.lookups: true) on a PolicyServer of its own, at the
#                                    scanner's default of 100 requests at once and at
#                                    BENCH_AUDIT_LOW_PARALLEL (10).
#
# Every sweep audits BENCH_AUDIT_WORKLOADS (300) Deployments, each naming a tag never asked
# before on a registry 50 ms away (e2e-tests/lib/fault_proxy.py). Admission: BENCH_AUDIT_CLIENTS
# (4) clients send a Pod whose image the server has cached, and a Pod naming a new image
# (through the 50 ms registry) every 2 s of the sweep. Targets (issue: background audit):
# admission p99 during the sweep ≤ 2× before + 50 ms, no admission error, a new image answered
# within 1 s, the sweep finishes.

# audit_lines FILE COUNT TAG_PREFIX PREFIX: COUNT Deployments as the audit scanner sends them
# (e2e-tests/lib/audit.bash's audit_request: the shape and its source), one a line, each with the image
# PREFIX/img-0:TAG_PREFIX-R.
audit_lines() {
  jq -c --argjson count "$2" --arg t "$3" --arg p "$4" "$AUDIT_REQUEST"'
    .request as $r | range($count) as $i
    | ($r.object | .metadata += {name: "web-\($i)", uid: "00000000-0000-4000-8000-\($i | tostring | ("000000000000" + .) | .[-12:])",
          resourceVersion: "\(1000 + $i)", generation: 1}
       | .spec.template.spec |= (del(.initContainers)
           | .containers = [{name: "app", image: "\($p)/img-0:\($t)-\($i)"}])
       | .status = {replicas: 1, readyReplicas: 1}) as $stored
    | audit_request($stored; $r.kind)' \
    "$FIXTURES_DIR/deployment-create.json" >"$1"
  assert_loopback_only "$1"
}

# audit_case LABEL ADMISSION_ADDR AUDIT_ADDR AUDIT_ID PARALLEL: one sweep with admission
# traffic; the JSON line goes to $OUT/audit-LABEL.json.
audit_case() {
  local label=$1 admission=$2 audit=$3 id=$4 parallel=$5 dir="$E2E_WORK/audit-bench"
  local n=${BENCH_AUDIT_WORKLOADS:-300}
  add_tags 1 "sweep-$label" "$n"
  add_tags 1 "new-$label" 60
  audit_lines "$dir/sweep-$label.jsonl" "$n" "sweep-$label" "$AUDIT_SLOW/bench"
  review_lines "$dir/new-$label.jsonl" 1 60 "new-$label" "$AUDIT_SLOW/bench"
  python3 "$ROOT/bench/audit_sweep.py" --admission "http://$admission/validate/admission" \
    --warm-body "$dir/warm.json" --new-bodies "$dir/new-$label.jsonl" \
    --audit "http://$audit/audit/$id" --sweep-bodies "$dir/sweep-$label.jsonl" \
    --parallel "$parallel" --clients "${BENCH_AUDIT_CLIENTS:-4}" >"$OUT/audit-$label.json"
}

# server_idle PID...: waits (at most 300 s) until each server spends under 3 % of a core for a
# second: requests whose client timed out stay queued in the server and run on, and would
# fall into the next case.
server_idle() {
  local pid i a b
  for pid in "$@"; do
    for ((i = 0; i < 300; i++)); do
      a=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
      sleep 1
      b=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
      ((b - a > 3)) || break
    done
  done
}

# audit_row LABEL TEXT: the table row of a case.
audit_row() {
  jq -r --arg what "$2" '
    def ms: if . == null then "–" elif . >= 100 then round else . * 10 | round / 10 end;
    . as $c | ($c.before.p99_ms * 2 + 50) as $limit
    | "| \($what) | \($c.before.p50_ms | ms) / \($c.before.p99_ms | ms) | \($c.during.p50_ms | ms) / \($c.during.p99_ms | ms) / \($c.during.max_ms | ms) | \($c.during.errors) of \($c.during.requests) | \($c.new_image.max_ms | ms) (\($c.new_image.requests)) | \($c.sweep.seconds) s: \($c.sweep.pass) pass, \($c.sweep.fail) fail, \($c.sweep.error) error | \(if $c.during.p99_ms <= $limit and $c.during.errors == 0 and $c.new_image.errors == 0 and ($c.new_image.max_ms // 0) <= 1000 then "met" else "**not met**" end) |"' \
    "$OUT/audit-$1.json"
}

# audit_bench: the section; prints its table, or says loudly why it was skipped.
audit_bench() {
  echo
  echo "## Background audit and admission on the real policy-server"
  echo
  if [[ ! -x "$PS_BIN" ]]; then
    echo "SKIPPED: no policy-server binary at $PS_BIN (set POLICY_SERVER, or put policy-server on PATH, to measure one)."
    echo "bench: audit tables SKIPPED: no binary at $PS_BIN" >&2
    return 0
  fi
  local dir="$E2E_WORK/audit-bench" one two one_pid two_pid low=${BENCH_AUDIT_LOW_PARALLEL:-10}
  mkdir -p "$dir" "$E2E_WORK/policy-server/home"
  proxy_start --mode delay --upstream "$REG_ANON" --delay-ms 50
  AUDIT_SLOW=$PROXY_ADDR
  annotate "$POLICY" "$ROOT/policy-metadata.yml" "$dir/policy.wasm"
  # the admission instance as docs/audit.md installs it, and two audit instances
  jq -n --arg x "file://$dir/policy.wasm" '
      ["oci/v1/manifest_digest", "oci/v1/oci_manifest", "oci/v1/oci_manifest_config"] as $oci
      | {admission: {module: $x, settings: {exemptNamespaces: ["kube-system"]}, hostCapabilities: $oci},
         "audit-here": {module: $x, settings: {audit: {lookups: true}}, hostCapabilities: $oci},
         audit: {module: $x, settings: {audit: {lookups: true}}, hostCapabilities: $oci}}' >"$dir/policies.yml"
  pod_request "$dir/warm.json" 1 "$REG_ANON/bench"
  local sources
  sources=$(write_sources_yaml audit-bench --insecure "$REG_ANON" --insecure "$AUDIT_SLOW")
  PS_NAME=ps-admission ps_start "$dir/policies.yml" "$sources"
  one=$PS_ADDR one_pid=$PS_PID
  PS_NAME=ps-audit ps_start "$dir/policies.yml" "$sources"
  two=$PS_ADDR two_pid=$PS_PID
  PROXY_PIDS+=("$one_pid" "$two_pid") # stopped by cleanup, whatever happens
  PS_PID=$one_pid
  local case
  for case in "shared-lookups $one audit-here 100" "shared-default $one admission 100" \
    "dedicated $two audit 100" "dedicated-low $two audit $low"; do
    # shellcheck disable=SC2086 # the words of a case
    set -- $case
    server_idle "$one_pid" "$two_pid"
    audit_case "$1" "$one" "$2" "$3" "$4"
  done
  ps_stop
  PS_PID=$two_pid
  ps_stop
  echo "$("$PS_BIN" --version 2>/dev/null | head -n1), --workers ${BENCH_WORKERS:-2} per server, one machine. Each sweep: ${BENCH_AUDIT_WORKLOADS:-300} Deployments with distinct tags on a registry 50 ms away, POSTed to /audit/<policy> as the audit scanner does (bench/audit_sweep.py: a new connection each, 10 s time-out). Admission: ${BENCH_AUDIT_CLIENTS:-4} clients, a Pod whose image the server has cached; a Pod naming a new image every 2 s of the sweep. $(machine); load average before: $LOAD_BEFORE, after: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
  echo "| installation | admission before: p50 / p99 (ms) | during the sweep: p50 / p99 / max (ms) | admission errors | new image: max ms (requests) | the sweep | target |"
  echo "|---|---:|---:|---:|---:|---|---|"
  audit_row shared-lookups "one policy server, audit.lookups on (100 at once)"
  audit_row shared-default "one policy server, audit.lookups off: the admission instance's default (100 at once)"
  audit_row dedicated "admission and audit on policy servers of their own (100 at once)"
  audit_row dedicated-low "admission and audit on policy servers of their own (parallelResources $low)"
}
