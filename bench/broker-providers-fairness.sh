#!/usr/bin/env bash
# `make bench`, plugins shared fairly (docs/credential-providers.md): one
# namespace's brokered lookups through a credential provider plugin, alone and then beside a
# namespace whose lookups through the same plugin are slow (the plugin takes a second for its
# images, run every lookup), on a real registry on loopback. Prints the well-behaved
# namespace's p50 and p99 with and without the slow neighbour and their ratio (the target:
# p99 at most 1.2x alone), and its errors. Nothing is asserted. Needs only the broker and plugin
# binaries (`make broker`); skips, saying so, without them. Knobs: BENCH_FAIRNESS_LOOKUPS
# (lookups per column, 100), BROKER_BIN, TEST_PROVIDER_BIN.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
LOOKUPS=${BENCH_FAIRNESS_LOOKUPS:-100}
broker_alone_bench "Lookup broker: one namespace's plugin lookups beside a slow namespace's (broker alone)" plugin

registry_start auth >/dev/null
image=$(build_image bench-fairness)
push_image "$image" auth shared/app:v1 >/dev/null
push_image "$image" auth shared/slow-app:v1 >/dev/null
bin="$E2E_WORK/provider-bin"
mkdir -p "$bin"
cp "$PROVIDER_BIN" "$bin/shared"
config="$E2E_WORK/credential-providers.yaml"
# one provider for both namespaces, its answers never kept: a run per lookup
printf '%s\n' "apiVersion: kubelet.config.k8s.io/v1" "kind: CredentialProviderConfig" "providers:" \
  "  - name: shared" "    matchImages:" "      - \"$REG_AUTH/shared\"" \
  "    defaultCacheDuration: \"0s\"" "    apiVersion: credentialprovider.kubelet.k8s.io/v1" \
  "    args: [--username, \"$REG_AUTH_USER\", --slow-image, slow, --slow-ms, \"1000\"]" \
  "    env:" "      - name: TEST_PROVIDER_PASSWORD" "        value: \"$REG_AUTH_PASSWORD\"" >"$config"
cluster=$(write_cluster_dir bench-fairness)
{
  broker_namespace_yaml team-fast
  broker_namespace_yaml team-slow
  broker_key_secret_yaml
} | cluster_add "$cluster" 10-namespaces.yaml
apiserver_serve "$cluster" >/dev/null
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
broker_start broker --apiserver-port "$api_port" \
  --sources "$(write_sources_yaml upstream --insecure "$REG_AUTH")" \
  --image-credential-provider-config "$config" --image-credential-provider-bin-dir "$bin" \
  --provider-namespaces "shared=" >/dev/null

# url NAMESPACE REPO: the broker's URL of NAMESPACE's REPO:v1 with no pull secret (sealed once:
# good for minutes, and no seal is computed while the figures are taken).
url() { printf 'http://%s/v2/%s/manifests/v1' "$BROKER_ADDR" "$(broker_seal "$1/n/d.${REG_AUTH/:/_}/$2" v1)"; }
fast_url=$(url team-fast shared/app)
slow_url=$(url team-slow shared/slow-app)
# one URL: "STATUS MS" of one brokered GET.
one() {
  local out
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 20 \
    -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$1")
  awk -v s="${out%% *}" -v t="${out#* }" 'BEGIN { printf "%s %.1f\n", s, t * 1000 }'
}
# column FILE: LOOKUPS lookups of team-fast, one after another, "STATUS MS" lines into FILE.
column() {
  local i
  for ((i = 0; i < LOOKUPS; i++)); do one "$fast_url"; done >"$1"
}

one "$fast_url" >/dev/null # warm: the Namespace read, the connection, the token
column "$E2E_WORK/alone"
# the neighbour: four lookups of team-slow at a time, each holding a run for a second
for worker in 1 2 3 4; do
  (while :; do one "$slow_url" >/dev/null; done) &
done
sleep 1
column "$E2E_WORK/beside"
alone_p50=$(awk '{ print $2 }' "$E2E_WORK/alone" | percentile 50)
alone_p99=$(awk '{ print $2 }' "$E2E_WORK/alone" | percentile 99)
beside_p50=$(awk '{ print $2 }' "$E2E_WORK/beside" | percentile 50)
beside_p99=$(awk '{ print $2 }' "$E2E_WORK/beside" | percentile 99)
echo "| team-fast's brokered lookups ($LOOKUPS) | p50 (ms) | p99 (ms) | errors |"
echo "|---|---:|---:|---:|"
echo "| alone | $alone_p50 | $alone_p99 | $(errors "$E2E_WORK/alone") |"
echo "| beside team-slow (4 slow lookups at a time) | $beside_p50 | $beside_p99 | $(errors "$E2E_WORK/beside") |"
echo "| ratio (target p99 <= 1.2) | $(ratio "$alone_p50" "$beside_p50") | $(ratio "$alone_p99" "$beside_p99") | |"
