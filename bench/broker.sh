#!/usr/bin/env bash
# `make bench`, the lookup broker (docs/broker.md): one private image looked up on the real
# stock policy-server through the broker (with the namespace's pull secret) against the same
# lookup made directly (with the policy server's own credential for the registry). Every
# request names a tag not looked up before, so neither the policy server's cache nor the
# broker's answers are reused: "cold" is the first lookup of a fresh broker process (Secret
# read, connection, challenge), "warm" the next ones. Prints a markdown table; nothing is
# asserted. Skips, saying so, without a policy-server (POLICY_SERVER, else on PATH) or the broker.
# Knobs: BENCH_BROKER_REPEATS (warm lookups per column, 5), BROKER_BIN, POLICY_SERVER.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
broker_server_bench "Lookup broker: a brokered lookup against a direct one (real policy-server)"

registry_start auth >/dev/null
n=$((2 * (REPEATS + 1)))
for ((i = 1; i <= n; i++)); do
  push_image "$(build_image "bench-$i")" auth "bench/app:t$i" >/dev/null
done
cluster=$(write_cluster_dir bench)
{
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
  broker_key_secret_yaml
} | cluster_add "$cluster" 10-secret.yaml
kubeconfig=$(apiserver_serve "$cluster")
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
broker_start broker --apiserver-port "$api_port" \
  --sources "$(write_sources_yaml upstream --insecure "$REG_AUTH")" >/dev/null
docker="$E2E_WORK/docker-config/both"
mkdir -p "$docker"
jq -n --arg b "$BROKER_ADDR" --arg ba "$(printf '%s:%s' "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD" | base64 -w0)" \
  --arg r "$REG_AUTH" --arg ra "$(printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0)" \
  '{auths: {($b): {auth: $ba}, ($r): {auth: $ra}}}' >"$docker/config.json"
policies="$E2E_WORK/policies.yml"
broker_policies "$policies" \
  brokered "{\"lookupBroker\": {\"host\": \"$BROKER_ADDR\", \"keySecret\": $BROKER_KEY_SECRET}, \"timeBudgetMs\": 10000}" \
  direct '{"timeBudgetMs": 10000}'
broker_policy_server_start ps "$policies" "$docker" \
  "$(write_sources_yaml ps --insecure "$REG_AUTH" --insecure "$BROKER_ADDR")" "$kubeconfig"

# one_ms POLICY TAG: wall time (ms) of one decision on a Pod in team-a running bench/app:TAG.
one_ms() {
  local req start
  req=$(request_with_images pod-create.json "app=$REG_AUTH/bench/app:$2" sidecar.remove init-schema.remove)
  request_edit_pod_spec "$req" '.imagePullSecrets = [{name: "regcred"}]'
  start=$(date +%s%N)
  broker_validate ps "$1" "$req" >/dev/null
  echo $((($(date +%s%N) - start) / 1000000))
}

tag=1
brokered_cold=$(one_ms brokered "t$tag"); tag=$((tag + 1))
direct_cold=$(one_ms direct "t$tag"); tag=$((tag + 1))
brokered_warm=$(for ((r = 0; r < REPEATS; r++)); do one_ms brokered "t$((tag + r))"; done | median)
tag=$((tag + REPEATS))
direct_warm=$(for ((r = 0; r < REPEATS; r++)); do one_ms direct "t$((tag + r))"; done | median)
echo "| lookup | cold (ms) | warm, median of $REPEATS (ms) |"
echo "|---|---:|---:|"
echo "| direct (policy server's own credential) | $direct_cold | $direct_warm |"
echo "| through the broker (the namespace's pull secret) | $brokered_cold | $brokered_warm |"
