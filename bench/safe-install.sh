#!/usr/bin/env bash
# `make bench`, the shipped install's broker (deploy/broker.yaml's time-outs and destination
# flags, no loopback allowance): one namespace's anonymous lookups (team-b, which did not opt
# in) asked of the broker directly, as the policy server asks them (sealed names, the caller
# credential), alone and then beside a neighbour namespace whose pods name a host that never
# answers and an internal address (e2e-tests/89-safe-install.bats asserts the same
# structurally). Prints team-b's p50 and p99 both ways, their ratio and its errors; nothing is
# asserted. Needs only the broker binary (`make broker`); skips, saying so, without it.
# Knobs: BENCH_SAFE_REPEATS (lookups per column, 50), BROKER_BIN.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
REPEATS=${BENCH_SAFE_REPEATS:-50}
broker_alone_bench "The shipped install: one namespace's lookups beside a hostile neighbour (broker alone)"

registry_start anon >/dev/null
push_image "$(build_image bench-safe)" anon team/app:v1 >/dev/null
silent=$(fault_proxy_start silent hang)
listener=$(fault_proxy_start listener hang)
good="localhost:${REG_ANON##*:}" slow="localhost:${silent##*:}"
cluster=$(write_cluster_dir bench-safe)
broker_key_secret_yaml | cluster_add "$cluster" 10-key.yaml
apiserver_serve "$cluster" >/dev/null
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
mapfile -t flags < <(deploy_broker_flags)
broker_start broker --apiserver-port "$api_port" --no-loopback-allowance \
  --sources "$(write_sources_yaml upstream --insecure "$good" --insecure "$slow")" \
  --allow-registry "$good" --allow-registry "$slow" "${flags[@]}" >/dev/null

# lookup_ms NAMESPACE REGISTRY REPO TAG: "STATUS MS" of one anonymous brokered HEAD.
lookup_ms() {
  local out
  out=$(curl -s -o /dev/null -I -w '%{http_code} %{time_total}' --max-time 10 \
    -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    "http://$BROKER_ADDR/v2/$(broker_seal "$1/n/d.${2/:/_}/$3" "$4")/manifests/$4") || true
  awk -v o="$out" 'BEGIN { split(o, f, " "); printf "%s %.1f\n", f[1], f[2] * 1000 }'
}

# column FILE: team-b's REPEATS lookups, one after another, into FILE ("STATUS MS" a line).
column() {
  local i
  for ((i = 0; i < REPEATS; i++)); do lookup_ms team-b "$good" team/app v1; done >"$1"
}

# pct FILE P: the P-th percentile (nearest rank) of the found lookups' times.
pct() {
  awk '$1 == 200 { print $2 }' "$1" | sort -n |
    awk -v p="$2" '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit } r = int((p * NR + 99) / 100); if (r < 1) r = 1; print v[r] }'
}

column "$E2E_WORK/alone.txt"
# the neighbour: team-a's pods name the silent host (a fresh tag each time) and internal
# addresses, as fast as the broker answers
(
  i=0
  while :; do
    i=$((i + 1))
    lookup_ms team-a "$slow" slow/app "t$i" >/dev/null
    lookup_ms team-a "$listener" x/app v1 >/dev/null
    lookup_ms team-a 10.0.3.7:10250 x/app v1 >/dev/null
  done
) &
neighbour=$!
sleep 0.5
column "$E2E_WORK/beside.txt"
kill "$neighbour" 2>/dev/null || true

errors=$(awk '$1 != 200' "$E2E_WORK/alone.txt" "$E2E_WORK/beside.txt" | wc -l)
connected=$(grep -c "connection" "$E2E_WORK/registries/listener/proxy.log" || true)
a50=$(pct "$E2E_WORK/alone.txt" 50) a99=$(pct "$E2E_WORK/alone.txt" 99)
b50=$(pct "$E2E_WORK/beside.txt" 50) b99=$(pct "$E2E_WORK/beside.txt" 99)
echo "| team-b, $REPEATS lookups | p50 ms | p99 ms |"
echo "|---|---|---|"
echo "| alone | $a50 | $a99 |"
echo "| beside a silent host and internal addresses | $b50 | $b99 |"
echo "| ratio (beside / alone) | $(ratio "$a50" "$b50") | $(ratio "$a99" "$b99") |"
echo
echo "team-b's errors: $errors; connections to the internal listener: $connected"
