#!/usr/bin/env bash
# A two-minute tour of resolvable-images-policy: starts local registries, pushes an image,
# and shows what the policy answers for three Pods. Builds nothing: run `make` first (the
# policy wasm and crates/test-host). Everything it starts is stopped on exit.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=e2e-tests/lib/common.bash
source "$here/lib/common.bash"

# The host that runs the policy: kwctl when DEMO_KWCTL names it (`make demo` sets it when kwctl
# is found), else the test host crates/test-host (POLICY_HOST).
if [[ -n "${DEMO_KWCTL:-}" ]]; then
  [[ -x "$DEMO_KWCTL" && -f "$POLICY_WASM" ]] ||
    { echo "demo: $DEMO_KWCTL (kwctl) and $POLICY_WASM are needed" >&2; exit 1; }
  echo "Host: kwctl ($DEMO_KWCTL, $(env -u RUST_BACKTRACE "$DEMO_KWCTL" --version 2>/dev/null | head -n1))"
else
  host_ready || { echo "demo: build first: $POLICY_WASM and $POLICY_HOST are needed" >&2; exit 1; }
  echo "Host: the test host ($POLICY_HOST; kwctl not found)"
fi

E2E_WORK=$(mktemp -d)
export E2E_WORK
cleanup() { registry_stop_all; rm -rf "$E2E_WORK"; }
trap cleanup EXIT

echo "Starting a public and a password-protected registry on loopback..."
registry_start anon
registry_start auth
push_image "$(build_image demo)" anon shop/frontend:2.3.1
push_image "$(build_image demo-private)" auth shop/payments:1.0.0
E2E_SOURCES=$(write_sources_yaml demo --insecure "$REG_ANON" --insecure "$REG_AUTH")
echo "  pushed $REG_ANON/shop/frontend:2.3.1 and $REG_AUTH/shop/payments:1.0.0 (private)"

# decide REQUEST: the policy's answer on one line. kwctl runs with RUST_BACKTRACE unset (it
# would print backtraces into host errors), a HOME of its own, the insecure local registries
# from --sources-path, and no Kubernetes access (it would need an API server): the policy then
# says what it could not read. KWCTL_SIGSTORE_TRUST_CONFIG passes an offline sigstore trust
# file, for a kwctl that tries to download sigstore's trust root.
decide() {
  if [[ -z "${DEMO_KWCTL:-}" ]]; then
    policy_run "$1"
    return
  fi
  mkdir -p "$E2E_WORK/kwctl-home"
  env -u RUST_BACKTRACE HOME="$E2E_WORK/kwctl-home" "$DEMO_KWCTL" run \
    --request-path "$1" --settings-path "$SCENARIOS_DIR/defaults.json" --sources-path "$E2E_SOURCES" \
    ${KWCTL_SIGSTORE_TRUST_CONFIG:+--sigstore-trust-config "$KWCTL_SIGSTORE_TRUST_CONFIG"} \
    "$POLICY_WASM" 2>"$E2E_WORK/kwctl.log" | tail -n1
}

# show TITLE IMAGE: builds a Pod whose container "app" runs IMAGE and prints the decision.
show() {
  local title=$1 image=$2 req response
  req=$(request_with_images pod-create.json "app=$image" init-schema.remove sidecar.remove)
  response=$(decide "$req")
  printf '\n== %s\n   image: %s\n' "$title" "$image"
  jq -r '
    "   decision: " + (if .allowed then "ALLOWED" else "REJECTED" end),
    (.status.message // empty | "   message:\n" + (split("\n") | map("     " + .) | join("\n"))),
    ((.warnings // [])[] | "   warning: " + .)' <<<"$response"
}

show "An image that exists" "$REG_ANON/shop/frontend:2.3.1"
show "A mistyped tag" "$REG_ANON/shop/frontend:2.3.l"
show "A private image the policy server has no credentials for" "$REG_AUTH/shop/payments:1.0.0"
echo
