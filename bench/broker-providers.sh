#!/usr/bin/env bash
# `make bench`, the lookup broker with the node's credential provider plugins
# (docs/credential-providers.md): the broker asked directly, as the policy server asks
# it (sealed names, the caller credential), for one private image, with the namespace's pull
# secret against the same lookup with no pull secret and a credential provider plugin (the
# tests' plugin, crates/test-credential-provider) answering the same credential: once run for
# every lookup (no cache), once with its answer cached. Every lookup names a tag not looked up
# before. Figures are medians and their ratio to the pull-secret column, measured side by
# side; nothing is asserted. Needs only the broker and plugin binaries (`make broker`); skips,
# saying so, without them. Knobs: BENCH_BROKER_REPEATS (lookups per row, 5), BROKER_BIN,
# TEST_PROVIDER_BIN.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
broker_alone_bench "Lookup broker: a credential provider plugin against a pull secret (broker alone)" plugin

registry_start auth >/dev/null
image=$(build_image bench-provider)
n=$((REPEATS + 1))
for repo in secret plugin cached; do
  for ((i = 1; i <= n; i++)); do
    push_image "$image" auth "$repo/app:t$i" >/dev/null
  done
done
bin="$E2E_WORK/provider-bin"
mkdir -p "$bin"
cp "$PROVIDER_BIN" "$bin/plugin"
cp "$PROVIDER_BIN" "$bin/cached"
config="$E2E_WORK/credential-providers.yaml"
{
  printf '%s\n' "apiVersion: kubelet.config.k8s.io/v1" "kind: CredentialProviderConfig" "providers:"
  for name in plugin cached; do
    duration=0s
    [[ "$name" == plugin ]] || duration=5m
    printf '%s\n' "  - name: $name" "    matchImages:" "      - \"$REG_AUTH/$name\"" \
      "    defaultCacheDuration: \"$duration\"" "    apiVersion: credentialprovider.kubelet.k8s.io/v1" \
      "    args:" "      - --username" "      - \"$REG_AUTH_USER\"" \
      "    env:" "      - name: TEST_PROVIDER_PASSWORD" "        value: \"$REG_AUTH_PASSWORD\""
  done
} >"$config"
cluster=$(write_cluster_dir bench-providers)
{
  pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
  broker_namespace_yaml team-a
  broker_key_secret_yaml
} | cluster_add "$cluster" 10-secret.yaml
apiserver_serve "$cluster" >/dev/null
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
broker_start broker --apiserver-port "$api_port" \
  --sources "$(write_sources_yaml upstream --insecure "$REG_AUTH")" \
  --image-credential-provider-config "$config" --image-credential-provider-bin-dir "$bin" \
  --provider-namespaces "plugin=;cached=" >/dev/null

# one_ms CREDENTIALS REPO TAG: wall time (ms) of one brokered GET of team-a's REPO:TAG; fails
# unless it is found.
one_ms() {
  local body="team-a/$1/d.${REG_AUTH/:/_}/$2" out
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 20 \
    -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$BROKER_ADDR/v2/$(broker_seal "$body" "$3")/manifests/$3")
  [[ "$out" == "200 "* ]] || { echo "bench: $2:$3 answered ${out%% *}" >&2; return 1; }
  awk -v t="${out#* }" 'BEGIN { printf "%.1f\n", t * 1000 }'
}

# the first lookup of each (Secret read, connection, the plugin's first run) is left out:
# these are the warm figures, interleaved so that the machine's load falls on every row
declare -A times=()
for ((i = 1; i <= n; i++)); do
  for row in "s.regcred secret" "n plugin" "n cached"; do
    read -r creds repo <<<"$row"
    ms=$(one_ms "$creds" "$repo/app" "t$i")
    ((i == 1)) || times[$repo]+="$ms "
  done
done
secret=$(tr ' ' '\n' <<<"${times[secret]}" | grep . | median)
plugin=$(tr ' ' '\n' <<<"${times[plugin]}" | grep . | median)
cached=$(tr ' ' '\n' <<<"${times[cached]}" | grep . | median)
echo "| brokered lookup (found) | median of $REPEATS (ms) | against the pull secret |"
echo "|---|---:|---:|"
echo "| the namespace's pull secret | $secret | 1.00 |"
echo "| a credential provider plugin, run every lookup | $plugin | $(ratio "$secret" "$plugin") |"
echo "| a credential provider plugin, its answer cached | $cached | $(ratio "$secret" "$cached") |"
