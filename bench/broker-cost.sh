#!/usr/bin/env bash
# `make bench`, what the safe install costs (deploy/, docs/broker.md): admission on the real
# stock policy-server with deploy/'s policy settings (`use: all`: every lookup through the
# broker, which runs with deploy/broker.yaml's time-out and destination flags) against the same
# policy making its lookups itself (no lookupBroker), two policies of one server, measured
# interleaved (bench/loadgen.rs, one request at a time), with 1 and 10 images per Pod:
#   warm   the same images every request: the server's digest cache answers both;
#   cold   a tag never asked before in every request: every lookup reaches the registry (the
#          broker's connections to it stay open between lookups, the server's do not);
#   50 ms  cold, through e2e-tests/lib/fault_proxy.py adding 50 ms to every registry request;
#          then also asking for an anonymous bearer token first, as Docker Hub, GHCR and Quay
#          do (the broker keeps its token, the server fetches one per lookup).
# Both policies get timeBudgetMs 30000 (deploy/ has 1500) so that slow lookups are timed, not
# turned into warnings. Prints p50 and p99 per row, their ratio broker / own lookups and the
# policy server's CPU per request (the broker's is not counted: it is another process);
# nothing is asserted. Skips, saying so, without a policy-server (POLICY_SERVER, else on PATH)
# or the broker. Knobs: BENCH_COST_REQUESTS (warm requests per policy and Pod size, 5000: their
# p99 is the 50th slowest, which one stall of the machine hardly moves; cold 100, whose p99 is
# the second slowest; 50 ms away 10; or a fifteenth and a hundred-and-fiftieth of a smaller
# count, each at least 3), BROKER_BIN, POLICY_SERVER.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
# shellcheck source=bench/policy_server.sh
source "$ROOT/bench/policy_server.sh"
broker_server_bench "The safe install's cost: every lookup through the broker against the server's own (real policy-server)"
WARM=${BENCH_COST_REQUESTS:-5000}
LOADGEN=$E2E_WORK/loadgen
rustc --edition 2021 -O "$ROOT/bench/loadgen.rs" -o "$LOADGEN"

registry_start anon >/dev/null
img=$(build_image bench-cost)
for i in $(seq 0 9); do push_image "$img" anon "bench/img-$i:1.0" >/dev/null; done
far=$(fault_proxy_start far delay --upstream "$REG_ANON" --delay-ms 50)
token=$(fault_proxy_start token bearer --upstream "$REG_ANON" --delay-ms 50)
cluster=$(write_cluster_dir bench-cost)
# deploy/'s key Secret, by its own name
broker_key_secret_yaml | sed 's/name: broker-key/name: resolvable-images-broker-key/' |
  cluster_add "$cluster" 10-key.yaml
kubeconfig=$(apiserver_serve "$cluster")
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
mapfile -t flags < <(deploy_broker_flags)
broker_start broker --apiserver-port "$api_port" \
  --sources "$(write_sources_yaml upstream --insecure "$REG_ANON" --insecure "$far" --insecure "$token")" "${flags[@]}" >/dev/null
policies="$E2E_WORK/policies.yml"
broker_policies "$policies" \
  broker "$(deploy_settings "$BROKER_ADDR" | jq -c '.timeBudgetMs = 30000')" \
  engine '{"timeBudgetMs": 30000}'
docker=$(write_docker_config caller "$BROKER_ADDR" "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD")
broker_policy_server_start ps "$policies" "$docker" \
  "$(write_sources_yaml ps --insecure "$REG_ANON" --insecure "$far" --insecure "$token" --insecure "$BROKER_ADDR")" "$kubeconfig"
pid=$(cat "$E2E_WORK/registries/ps/pid")

# cost_case LABEL IMAGES REQUESTS REGISTRY [TAGGED]: one loadgen run of both policies
# interleaved on Pods of IMAGES images of REGISTRY (TAGGED: a fresh tag per request and
# policy, one untimed request first: the broker's first lookup of a repository fetches the
# token it then keeps, as it has in a running cluster); prints the table row.
cost_case() {
  local label=$1 n=$2 count=$3 reg=$4 tagged=${5:-} id raw="$E2E_WORK/cost-$1-$2.jsonl"
  local -a targets=()
  for id in engine broker; do
    if [[ -n "$tagged" ]]; then
      add_tags "$n" "$id-${label//[^a-z0-9]/}$n" "$((count + 1))"
      review_lines "$E2E_WORK/$id.jsonl" "$n" "$((count + 1))" "$id-${label//[^a-z0-9]/}$n" "$reg/bench"
    else
      review_lines "$E2E_WORK/$id.jsonl" "$n" 1 "" "$reg/bench"
    fi
    targets+=(--target "$id=/validate/$id=$E2E_WORK/$id.jsonl")
  done
  # rounds of 30 requests (at least 4, at most one request each): a stall of the machine then
  # falls on both policies alike
  local rounds=$((count / 30 > 4 ? count / 30 : (count < 4 ? count : 4)))
  "$LOADGEN" --addr "127.0.0.1:$PS_PORT_ps" --connections 1 --rounds "$rounds" \
    --requests "$count" --max-secs 120 --warmup "$([[ -n "$tagged" ]] && echo 1 || echo 5)" \
    --server-pid "$pid" "${targets[@]}" >"$raw"
  jq -rs --arg case "$label" --arg n "$n" '
    def ms: if . >= 100 then round else . * 10 | round / 10 end;
    def r2: . * 100 | round / 100;
    (map({key: .target, value: .}) | from_entries) as $m | $m.engine as $e | $m.broker as $b
    | "| \($case) | \($n) | \($e.requests) | \($e.p50_ms | ms) / \($e.p99_ms | ms) | \($b.p50_ms | ms) / \($b.p99_ms | ms) | \($b.p50_ms / $e.p50_ms | r2) / \($b.p99_ms / $e.p99_ms | r2) | \($e.server_cpu_us_per_request) / \($b.server_cpu_us_per_request) | \([.[] | .errors + .not_allowed + .warned] | add) |"' "$raw"
}

echo "| registry | images | requests per policy | own lookups: p50 / p99 (ms) | through the broker: p50 / p99 (ms) | broker / own: p50 / p99 | server CPU per request, own / broker (µs) | errors, denials, warnings |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for n in 1 10; do cost_case warm "$n" "$WARM" "$REG_ANON"; done
# share PART HIGH: WARM / PART, within [3, HIGH].
share() {
  local n=$((WARM / $1))
  ((n > $2)) && n=$2
  ((n < 3)) && n=3
  echo "$n"
}
cold=$(share 15 100) slow=$(share 150 10)
for n in 1 10; do cost_case cold "$n" "$cold" "$REG_ANON" tagged; done
for n in 1 10; do cost_case "50 ms away" "$n" "$slow" "$far" tagged; done
for n in 1 10; do cost_case "50 ms away, token" "$n" "$slow" "$token" tagged; done
echo
echo "$("$(policy_server_bin)" --version 2>/dev/null | head -n1), --workers 2, one request at a time, loopback; $(date -u +%Y-%m-%d), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)."
