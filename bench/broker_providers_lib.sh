# shellcheck shell=bash
# Sourced by the broker-alone benchmarks of credential provider plugins
# (bench/broker-providers.sh, bench/broker-providers-fairness.sh), from the repository's root:
# the e2e helpers (registries, the fake API server, the broker), and providers_bench TITLE,
# which prints the section's title and exits 0, saying so, without the broker or the tests'
# plugin binary (`make broker`), else gives the benchmark a work directory ($E2E_WORK) that
# is removed, with every registry and broker it started, on exit.
# shellcheck source=e2e-tests/lib/common.bash
source e2e-tests/lib/common.bash
# shellcheck source=e2e-tests/lib/broker.bash
source e2e-tests/lib/broker.bash
PROVIDER_BIN=${TEST_PROVIDER_BIN:-$ROOT/target/debug/test-credential-provider}

providers_bench() {
  echo
  echo "## $1"
  echo
  if [[ ! -x "$(broker_bin)" || ! -x "$PROVIDER_BIN" ]]; then
    echo "skipped: no broker ($(broker_bin)) or plugin ($PROVIDER_BIN) binary: run 'make broker'"
    exit 0
  fi
  E2E_WORK=$(mktemp -d)
  export E2E_WORK
  trap 'jobs -p | xargs -r kill 2>/dev/null; registry_stop_all; rm -rf "$E2E_WORK"' EXIT
}
