# shellcheck shell=bash
# Common setup for the e2e tests: paths, the loopback-only guard, and the other libraries.
# Source it from bats (`load lib/common`) or from a script; it defines functions only.

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_ROOT=$(cd "$E2E_DIR/.." && pwd)
FIXTURES_DIR="$REPO_ROOT/tests/fixtures/requests"
SCENARIOS_DIR="$E2E_DIR/scenarios"
SESSIONS_DIR="$E2E_DIR/sessions"
POLICY_HOST="${POLICY_HOST:-$REPO_ROOT/target/debug/test-host}"
POLICY_WASM="${POLICY_WASM:-$REPO_ROOT/target/wasm32-wasip1/release/resolvable_images_wasm.wasm}"
export E2E_DIR REPO_ROOT FIXTURES_DIR SCENARIOS_DIR SESSIONS_DIR POLICY_HOST POLICY_WASM
# The host that evaluates the policy: `test-host` (default), the test host above, or
# `kwctl`, the real Kubewarden CLI at $KWCTL, run with its own HOME (store, wasmtime cache).
# `make e2e-tests` runs the suite on the test host, then again on kwctl when given one.
E2E_HOST="${E2E_HOST:-test-host}"
KWCTL="${KWCTL:-}"
E2E_KWCTL_HOME="${E2E_KWCTL_HOME:-$REPO_ROOT/.e2e-work/kwctl-home}"
export E2E_HOST KWCTL E2E_KWCTL_HOME

# Every registry these tests talk to is on 127.0.0.1: make sure no proxy setting sends a
# request elsewhere, and that loopback is never proxied.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY='*' no_proxy='*'

# shellcheck source=e2e-tests/lib/registry.bash
source "$E2E_DIR/lib/registry.bash"
# shellcheck source=e2e-tests/lib/images.bash
source "$E2E_DIR/lib/images.bash"
# shellcheck source=e2e-tests/lib/fixtures.bash
source "$E2E_DIR/lib/fixtures.bash"
# shellcheck source=e2e-tests/lib/policy.bash
source "$E2E_DIR/lib/policy.bash"
# shellcheck source=e2e-tests/lib/scenario.bash
source "$E2E_DIR/lib/scenario.bash"
# shellcheck source=e2e-tests/lib/sessions.bash
source "$E2E_DIR/lib/sessions.bash"

# e2e_workdir: the scratch directory of this run. Bats gives each file its own, which it
# removes; scripts set E2E_WORK themselves (see demo.sh).
e2e_workdir() {
  if [[ -z "${E2E_WORK:-}" ]]; then
    E2E_WORK="${BATS_FILE_TMPDIR:?set E2E_WORK outside bats}"
    export E2E_WORK
  fi
  mkdir -p "$E2E_WORK"
  printf '%s\n' "$E2E_WORK"
}

# wait_until TIMEOUT_SECS CMD...: polls CMD every 0.1 s; fails after TIMEOUT_SECS. Used
# instead of fixed sleeps so tests are as fast as the machine allows.
wait_until() {
  local timeout=$1; shift
  local deadline=$((SECONDS + timeout))
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
