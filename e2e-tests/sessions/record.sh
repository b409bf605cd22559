#!/usr/bin/env bash
# Regenerates the recorded sessions in this directory: for each scenario, the request
# (NAME.request.json), the host capability exchanges (NAME.yml) and the answer a replay gives
# (NAME.response.json). Registries run on random ports while recording; the files are then
# rewritten to fixed addresses (127.0.0.1:5000 anonymous, :5001 auth, :5999 down), which a
# replay never contacts. Replay one with kwctl or the test host:
#   kwctl run --request-path sessions/missing-tag.request.json \
#     --settings-path scenarios/defaults.json --allow-context-aware \
#     --replay-host-capabilities-interactions sessions/missing-tag.yml policy.wasm
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=e2e-tests/lib/common.bash
source "$here/../lib/common.bash"

E2E_WORK=$(mktemp -d)
export E2E_WORK
cleanup() { registry_stop_all; rm -rf "$E2E_WORK"; }
trap cleanup EXIT

host_ready || { echo "build the policy and crates/test-host first" >&2; exit 1; }
scenario_setup_file

# port_of HOST:PORT: the port.
port_of() { printf '%s\n' "${1##*:}"; }

# A replay expects the exchanges in the recorded order. Should the policy ever order its
# lookups by reference, rewriting the ports must not reorder them: keep the random ports
# sorted like the fixed ones they become (anonymous < auth < down).
while (($(port_of "$REG_AUTH") <= $(port_of "$REG_ANON"))); do
  registry_stop auth
  registry_start auth
done
push_image "$(build_image private)" auth private/app:v1
while (($(port_of "$REG_DOWN") <= $(port_of "$REG_AUTH"))); do
  REG_DOWN="127.0.0.1:$(unused_port)"
done
E2E_SOURCES=$(write_sources_yaml recording --insecure "$REG_ANON" --insecure "$REG_AUTH" --insecure "$REG_DOWN")
for port in "$REG_ANON" "$REG_AUTH" "$REG_DOWN"; do
  ((${#port} == ${#REG_ANON})) || { echo "record.sh: ports of different lengths: $REG_ANON $REG_AUTH $REG_DOWN" >&2; exit 1; }
done

# record NAME FIXTURE [EDIT...]: records one scenario with the default settings.
record() {
  local name=$1 fixture=$2 req
  shift 2
  req=$(local_request "$fixture" "$@")
  policy_run "$req" --record-host-capabilities-interactions "$E2E_WORK/$name.yml" >/dev/null
  normalise <"$req" >"$here/$name.request.json"
  normalise <"$E2E_WORK/$name.yml" >"$here/$name.yml"
  policy_run "$here/$name.request.json" \
    --replay-host-capabilities-interactions "$here/$name.yml" | jq . >"$here/$name.response.json"
  if grep -q 'Replay error' "$here/$name.response.json"; then
    echo "record.sh: the rewritten session $name does not replay:" >&2
    cat "$here/$name.response.json" >&2
    exit 1
  fi
  echo "recorded $name: $(response_summary "$(cat "$here/$name.response.json")")"
}

# normalise: the random ports of this run become the fixed ones the files are kept with.
normalise() {
  sed -e "s/$REG_ANON/127.0.0.1:5000/g" -e "s/$REG_AUTH/127.0.0.1:5001/g" -e "s/$REG_DOWN/127.0.0.1:5999/g"
}

record resolved pod-create.json
record missing-tag deployment-create.json "app=$REG_ANON/team/app:9.9.9"
record unauthorized pod-create.json "app=$REG_AUTH/private/app:v1"
record unreachable deployment-create.json "sidecar=$REG_DOWN/library/busybox:1.36"
