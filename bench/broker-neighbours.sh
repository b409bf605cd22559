#!/usr/bin/env bash
# `make bench`, noisy neighbours (docs/broker.md, "What a registry can do to the broker"): one
# well-behaved namespace's brokered lookups, asked of the broker directly as the policy server
# asks them (sealed names, the caller credential), alone and then beside three hostile
# namespaces at once, each with four lookups in flight all the time: team-silent names a
# registry that never answers (a fresh tag every lookup), team-hang's images make the credential
# provider plugin hang (crates/test-credential-provider), team-rotate names fifty registries in
# turn, each a listener that never answers. The neighbours run paced (each worker at most
# BENCH_NEIGHBOUR_RATE lookups a second, about what one policy server can send: a fresh lookup
# costs it tens of ms of CPU, docs/performance.md) and unpaced (as fast as the broker answers,
# which only a caller holding the broker's credential could do), and, as a control, unpaced
# against a second broker process (the same load on the machine, none on the broker measured:
# what is left is the machine's CPU, not a limit of the broker). The brokers have
# deploy/broker.yaml's time-out and destination flags, no loopback allowance (every registry
# allowed by name), its default limits. The well-behaved namespace (team-good) asks an anonymous
# image and, through the same plugin, a private one, in turn, on real registries
# (docker-registry) on loopback. Prints its p50 and p99 in each phase, their ratio to alone (the
# target: p99 at most 1.5x), its errors, the neighbours' rate and the broker's CPU; nothing is
# asserted. Needs only the broker and plugin binaries (`make broker`); skips, saying so, without
# them. Knobs: BENCH_NEIGHBOUR_LOOKUPS (lookups of each kind per phase, 300: the p99 of 100 is
# their second slowest, one stall), BENCH_NEIGHBOUR_RATE (10), BROKER_BIN, TEST_PROVIDER_BIN.
set -euo pipefail

# shellcheck source=bench/broker-bench.bash
source "$(dirname "${BASH_SOURCE[0]}")/broker-bench.bash"
LOOKUPS=${BENCH_NEIGHBOUR_LOOKUPS:-300}
RATE=${BENCH_NEIGHBOUR_RATE:-10}
broker_alone_bench "Lookup broker: one namespace's lookups beside three hostile namespaces (broker alone)" plugin

registry_start anon >/dev/null
registry_start auth >/dev/null
image=$(build_image bench-neighbours)
push_image "$image" anon team/app:v1 >/dev/null
push_image "$image" auth shared/app:v1 >/dev/null
push_image "$image" auth shared/hang-app:v1 >/dev/null
silent=$(fault_proxy_start silent hang)
fault_proxy_start rotate hang --listeners 50 >/dev/null
anon="localhost:${REG_ANON##*:}" auth="localhost:${REG_AUTH##*:}" slow="localhost:${silent##*:}"
mapfile -t rotating < <(sed 's/^/localhost:/' "$E2E_WORK/registries/rotate/port.all")
bin="$E2E_WORK/provider-bin"
mkdir -p "$bin"
cp "$PROVIDER_BIN" "$bin/shared"
config="$E2E_WORK/credential-providers.yaml"
# one provider for both namespaces' private images, never kept (a run per lookup), hanging
# (until the broker kills it) for images naming "hang"
printf '%s\n' "apiVersion: kubelet.config.k8s.io/v1" "kind: CredentialProviderConfig" "providers:" \
  "  - name: shared" "    matchImages:" "      - \"$auth/shared\"" \
  "    defaultCacheDuration: \"0s\"" "    apiVersion: credentialprovider.kubelet.k8s.io/v1" \
  "    args: [--username, \"$REG_AUTH_USER\", --slow-image, hang]" \
  "    env:" "      - name: TEST_PROVIDER_PASSWORD" "        value: \"$REG_AUTH_PASSWORD\"" >"$config"
cluster=$(write_cluster_dir bench-neighbours)
{
  broker_namespace_yaml team-good
  broker_namespace_yaml team-hang
  broker_key_secret_yaml
} | cluster_add "$cluster" 10-namespaces.yaml
apiserver_serve "$cluster" >/dev/null
api_port=$(cat "$E2E_WORK/registries/apiserver/port")
mapfile -t flags < <(deploy_broker_flags)
allowed=() insecure=()
for r in "$anon" "$auth" "$slow" "${rotating[@]}"; do
  allowed+=(--allow-registry "$r") insecure+=(--insecure "$r")
done
# the control: a second broker, alike, that only the neighbours' "elsewhere" phase asks
for name in other broker; do
  broker_start "$name" --apiserver-port "$api_port" --no-loopback-allowance \
    --sources "$(write_sources_yaml upstream "${insecure[@]}")" "${allowed[@]}" "${flags[@]}" \
    --image-credential-provider-config "$config" --image-credential-provider-bin-dir "$bin" \
    --provider-namespaces "shared=" >/dev/null
  [[ $name == broker ]] || other=$BROKER_ADDR other_log=$BROKER_LOG
done

# url NAMESPACE REGISTRY REPO TAG [BROKER]: the URL on BROKER (default $BROKER_ADDR) of REPO:TAG
# of REGISTRY for NAMESPACE, no pull secret (sealed before the figures are taken: good for
# minutes).
url() {
  local host=${5:-$BROKER_ADDR}
  printf 'http://%s/v2/%s/manifests/%s\n' "$host" "$(broker_seal "$1/n/d.${2/:/_}/$3" "$4" "" "" "$host")" "$4"
}
# one URL: "STATUS MS" of one brokered GET.
one() {
  local out
  out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 20 \
    -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$1") || true
  awk -v s="${out%% *}" -v t="${out#* }" 'BEGIN { printf "%s %.1f\n", s, t * 1000 }'
}
anon_url=$(url team-good "$anon" team/app v1)
private_url=$(url team-good "$auth" shared/app v1)
# column DIR COUNT: COUNT lookups of each kind, in turn, "STATUS MS" lines appended to
# DIR/anonymous and DIR/plugin.
column() {
  local i
  mkdir -p "$1"
  for ((i = 0; i < $2; i++)); do
    one "$anon_url" >>"$1/anonymous"
    one "$private_url" >>"$1/plugin"
  done
}
# hostile FILE [RATE]: the URLs of FILE asked over and over, four at a time (one keep-alive
# connection each, so that the client's own processes cost the machine little), each worker at
# most RATE lookups a second (curl --rate), else as fast as the broker answers; each worker in
# a process group of its own, its id in $E2E_WORK/hostile.pids.
hostile() {
  local worker
  local -a rate=()
  [[ -z "${2:-}" ]] || rate=(--rate "$2/s")
  for worker in 1 2 3 4; do
    setsid bash -c 'while :; do xargs curl -s --max-time 20 "${@:3}" -u "$2" \
      -H "Accept: application/vnd.oci.image.manifest.v1+json" <"$1" >/dev/null 2>&1; done' \
      _ "$1" "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" "${rate[@]}" &
    echo $! >>"$E2E_WORK/hostile.pids"
  done
}
# calm: stops the hostile workers (their process groups, by id).
calm() {
  local pid
  [[ -s "$E2E_WORK/hostile.pids" ]] || return 0
  while read -r pid; do kill -- "-$pid" 2>/dev/null || true; done <"$E2E_WORK/hostile.pids"
  : >"$E2E_WORK/hostile.pids"
}
# ticks: the broker's CPU time so far (utime + stime, clock ticks).
ticks() { awk '{ print $14 + $15 }' "/proc/$(cat "$E2E_WORK/registries/broker/pid")/stat"; }
# the neighbours' URLs, sealed now: 200 fresh tags of the silent registry, the plugin's hanging
# image, the fifty registries in turn
# image, the fifty registries in turn; for this broker and (*.other) for the control
for at in "" other; do
  host=${at:+$other}
  for ((i = 0; i < 200; i++)); do url team-silent "$slow" slow/app "t$i" "$host"; done >"$E2E_WORK/silent.urls$at"
  for ((i = 0; i < 50; i++)); do url team-hang "$auth" shared/hang-app v1 "$host"; done >"$E2E_WORK/hang.urls$at"
  for ((i = 0; i < 200; i++)); do url team-rotate "${rotating[i % 50]}" x/app "t$i" "$host"; done >"$E2E_WORK/rotate.urls$at"
done

one "$anon_url" >/dev/null # warm: the Namespace read, the connections, the token
one "$private_url" >/dev/null
# Five rounds, each of team-good's lookups alone, then beside the neighbours paced, unpaced,
# and unpaced against the other broker: a change in the machine's load falls on every column alike. Per phase: the broker's
# CPU (ticks), wall time (ms) and the neighbours' lookups (its log lines).
declare -A cpu=() wall=() seen=()
trap 'calm; jobs -p | xargs -r kill 2>/dev/null; registry_stop_all; rm -rf "$E2E_WORK"' EXIT
for ((round = 0; round < 5; round++)); do
  for phase in alone paced unpaced elsewhere; do
    log=$BROKER_LOG
    case $phase in
      elsewhere) for name in silent hang rotate; do hostile "$E2E_WORK/$name.urlsother"; done; log=$other_log ;;
      paced) for name in silent hang rotate; do hostile "$E2E_WORK/$name.urls" "$RATE"; done ;;
      unpaced) for name in silent hang rotate; do hostile "$E2E_WORK/$name.urls"; done ;;
    esac
    [[ $phase == alone ]] || sleep 2 # past the first time-outs: the neighbours' steady state
    mine=$((2 * (LOOKUPS / 5))) # team-good's own log lines, in this broker's log
    [[ $log == "$BROKER_LOG" ]] || mine=0
    t=$(ticks) ms=$(date +%s%3N) lines=$(wc -l <"$log")
    column "$E2E_WORK/$phase" $((LOOKUPS / 5))
    cpu[$phase]=$((${cpu[$phase]:-0} + $(ticks) - t)) wall[$phase]=$((${wall[$phase]:-0} + $(date +%s%3N) - ms))
    seen[$phase]=$((${seen[$phase]:-0} + $(tail -n +"$((lines + 1))" "$log" | grep -c '"msg":"lookup"' || true) - mine))
    calm
  done
done

# row KIND PHASE: p50 / p99, the ratios of p50 / p99 to alone, errors of KIND's lookups in PHASE.
row() {
  local a50 a99 b50 b99
  a50=$(awk '{ print $2 }' "$E2E_WORK/alone/$1" | percentile 50) a99=$(awk '{ print $2 }' "$E2E_WORK/alone/$1" | percentile 99)
  b50=$(awk '{ print $2 }' "$E2E_WORK/$2/$1" | percentile 50) b99=$(awk '{ print $2 }' "$E2E_WORK/$2/$1" | percentile 99)
  printf '%s / %s | %s / %s | %s' "$b50" "$b99" "$(ratio "$a50" "$b50")" "$(ratio "$a99" "$b99")" "$(errors "$E2E_WORK/$2/$1")"
}
hz=$(getconf CLK_TCK)
# load PHASE: the neighbours' lookups a second and the broker's CPU (% of a core) in PHASE.
load() {
  awk -v n="${seen[$1]}" -v t="${cpu[$1]}" -v w="${wall[$1]}" -v h="$hz" \
    'BEGIN { printf "%.0f lookups/s, broker CPU %.0f %%", 1000 * n / w, 100000 * t / h / w }'
}
echo "| team-good's lookups ($LOOKUPS of each kind a column) | p50 / p99 (ms) | against alone: p50 / p99 (target p99 <= 1.5) | errors | neighbours' load |"
echo "|---|---:|---:|---:|---|"
for kind in anonymous plugin; do
  echo "| $kind, alone | $(row "$kind" alone) | $(load alone) |"
  echo "| $kind, beside the three, each worker at $RATE/s | $(row "$kind" paced) | $(load paced) |"
  echo "| $kind, beside the three, unpaced | $(row "$kind" unpaced) | $(load unpaced) |"
  echo "| $kind, control: the same unpaced neighbours asking another broker process | $(row "$kind" elsewhere) | $(load elsewhere) |"
done
echo
echo "The neighbours' answers, every phase: $(jq -r 'select(.msg == "lookup") | "\(.namespace) \(.outcome)"' "$BROKER_LOG" |
  grep -v '^team-good' | sort | uniq -c | awk '{ printf "%s%s %s: %s", (NR > 1 ? "; " : ""), $2, $3, $1 }')."
echo "$(basename "$(broker_bin)") at $(broker_bin | sed "s#^$ROOT/##"); $(date -u +%Y-%m-%d), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)."
