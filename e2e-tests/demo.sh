#!/usr/bin/env bash
# A two-minute tour of resolvable-images-policy: starts local registries, pushes an image,
# and shows what the policy answers for three Pods. Builds nothing: run `make` first (the
# policy wasm and e2e-tests/host). Everything it starts is stopped on exit.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=e2e-tests/lib/common.bash
source "$here/lib/common.bash"

host_ready || { echo "demo: build first: $POLICY_WASM and $POLICY_HOST are needed" >&2; exit 1; }

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

# show TITLE IMAGE: builds a Pod whose container "app" runs IMAGE and prints the decision.
show() {
  local title=$1 image=$2 req response
  req=$(request_with_images pod-create.json "app=$image" init-schema.remove sidecar.remove)
  response=$(policy_run "$req")
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
