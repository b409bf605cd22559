#!/usr/bin/env bash
# `make bench`, the lookup broker's tag suggestions (docs/broker.md): the broker asked
# directly, as the stock policy server asks for a tag that does not exist (HEAD, then GET for
# the error's body), for a repository of 2,000 tags on a real local registry: a broker that
# suggests nothing (--no-tag-suggestions) against one that lists the tags for every lookup
# (each from a namespace of its own, so that no listing is cached) and one whose listing is
# cached. Every lookup names a tag not asked before. Figures are medians and their ratio to
# the row without suggestions, measured interleaved; nothing is asserted. Needs only the broker
# binary (`make broker`); skips, saying so, without it. Knobs: BENCH_BROKER_REPEATS (lookups
# per row, 5), BROKER_BIN.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
broker_alone_bench "Lookup broker: a rejection with tag suggestions against one without (2,000 tags)"

registry_start anon >/dev/null
push_image "$(build_image bench-suggestions)" anon big/app:1.0.0 >/dev/null
tags_in_storage anon big/app 1.0.0 1999
n=$((REPEATS + 1))
cluster=$(write_cluster_dir bench-suggestions)
{
  for ((i = 1; i <= n; i++)); do broker_namespace_yaml "cold-$i"; done
  broker_namespace_yaml team-a
  broker_key_secret_yaml
} | cluster_add "$cluster" 10-namespaces.yaml
apiserver_serve "$cluster" >/dev/null
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
sources=$(write_sources_yaml upstream --insecure "$REG_ANON")
broker_start plain --apiserver-port "$api_port" --sources "$sources" --no-tag-suggestions >/dev/null
plain=$BROKER_ADDR
broker_start suggesting --apiserver-port "$api_port" --sources "$sources" >/dev/null
suggesting=$BROKER_ADDR

# one_ms BROKER NAMESPACE TAG: wall time (ms) of the HEAD and the GET of NAMESPACE's anonymous
# lookup of big/app:TAG; fails unless both are 404.
one_ms() {
  local body="$2/n/d.${REG_ANON/:/_}/big/app" url start code
  BROKER_ADDR=$1
  url="http://$1/v2/$(broker_seal "$body" "$3")/manifests/$3"
  start=$(date +%s%N)
  for method in --head --get; do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 20 "$method" \
      -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" "$url")
    [[ "$code" == 404 ]] || { echo "bench: $method big/app:$3 answered $code" >&2; return 1; }
  done
  awk -v ns="$(($(date +%s%N) - start))" 'BEGIN { printf "%.1f\n", ns / 1e6 }'
}

# measure ROW ROUND: one 404 of a tag not asked before (a namespace of its own per round
# for the uncached row)
measure() {
  case "$1" in
    plain) one_ms "$plain" team-a "1.0.1999${2}p" ;;
    uncached) one_ms "$suggesting" "cold-$2" "1.0.1999${2}u" ;;
    cached) one_ms "$suggesting" team-a "1.0.1999${2}c" ;;
  esac
}
interleaved "$n" plain uncached cached
# the suggesting broker's log: every GET suggested (the rows would compare nothing otherwise)
suggested=$(jq -s '[.[] | select(.msg == "lookup" and .method == "GET" and .suggestedTags == 3)] | length' "$BROKER_LOG")
((suggested == 2 * n)) || { echo "bench: $suggested of $((2 * n)) GETs suggested tags" >&2; exit 1; }
plain_ms=${MEDIANS[plain]} uncached_ms=${MEDIANS[uncached]} cached_ms=${MEDIANS[cached]}
echo "| brokered 404 (HEAD + GET), 2,000 tags | median of $REPEATS (ms) | against no suggestions |"
echo "|---|---:|---:|"
echo "| no suggestions (\`--no-tag-suggestions\`) | $plain_ms | 1.00 |"
echo "| suggestions, the tags listed for this lookup | $uncached_ms | $(ratio "$plain_ms" "$uncached_ms") |"
echo "| suggestions, the listing cached | $cached_ms | $(ratio "$plain_ms" "$cached_ms") |"
