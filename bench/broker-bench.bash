# shellcheck shell=bash
# What the broker's benchmarks share (bench/broker*.sh and bench/safe-install.sh source it): the
# repository root as the working directory, BENCH_BROKER_REPEATS as REPEATS, the e2e helpers
# (registries, images, the broker), medians of rows measured interleaved, and the preambles of
# those on the real policy-server (broker_server_bench) and of those that ask the broker alone
# (broker_alone_bench).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${BENCH_BROKER_REPEATS:-5}
# shellcheck source=e2e-tests/lib/common.bash
source e2e-tests/lib/common.bash
# shellcheck source=e2e-tests/lib/broker.bash
source e2e-tests/lib/broker.bash

# median, percentile P (nearest rank): of the numbers on stdin; ratio A B: B / A, two decimals;
# errors FILE: the lines of FILE ("STATUS MS" a line) whose status is not 200.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }'; }
percentile() { sort -n | awk -v p="$1" '{ v[NR] = $1 } END { i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print v[i] }'; }
errors() { awk '$1 != 200' "$1" | wc -l; }

# interleaved ROUNDS ROW...: `measure ROW ROUND` (the script's; prints ms) for every round and
# row, the rows interleaved so that the machine's load falls on each alike; the first round
# (connections, first reads) is left out. MEDIANS[ROW]: the median of the others.
declare -gA MEDIANS=()
interleaved() {
  local rounds=$1 i row ms
  shift
  local -A times=()
  for ((i = 1; i <= rounds; i++)); do
    for row in "$@"; do
      ms=$(measure "$row" "$i")
      ((i == 1)) || times[$row]+="$ms "
    done
  done
  for row in "$@"; do
    MEDIANS[$row]=$(tr ' ' '\n' <<<"${times[$row]}" | grep . | median)
  done
}

# broker_server_bench TITLE: the title of a benchmark on the real policy-server (POLICY_SERVER,
# else on PATH) in front of the broker; exits 0, saying so, without the server, the broker or the
# annotated policy ($POLICY_WASM), else gives the benchmark a work directory ($E2E_WORK) that
# is removed, with every registry and server it started, on exit.
POLICY_WASM=${BENCH_POLICY_WASM:-$ROOT/annotated-policy.wasm}
broker_server_bench() {
  echo
  echo "## $1"
  echo
  if ! policy_server_bin >/dev/null; then
    echo "skipped: no policy-server (set POLICY_SERVER, or put policy-server on PATH)"
    exit 0
  fi
  if [[ ! -x "$(broker_bin)" || ! -f "$POLICY_WASM" ]]; then
    echo "skipped: no broker binary ($(broker_bin)) or policy ($POLICY_WASM): run 'make broker annotated-policy.wasm'"
    exit 0
  fi
  E2E_WORK=$(mktemp -d)
  export E2E_WORK
  trap 'registry_stop_all; rm -rf "$E2E_WORK"' EXIT
}

# broker_alone_bench TITLE [plugin]: the title of a benchmark that asks the broker directly;
# exits 0, saying so, without the broker's binary or, with `plugin`, the tests' credential
# provider plugin ($PROVIDER_BIN; both `make broker`), else gives the benchmark a work
# directory ($E2E_WORK) that is removed, with every registry, broker and background job it
# started, on exit.
PROVIDER_BIN=${TEST_PROVIDER_BIN:-$ROOT/target/debug/test-credential-provider}
broker_alone_bench() {
  echo
  echo "## $1"
  echo
  if [[ ! -x "$(broker_bin)" ]]; then
    echo "skipped: no broker binary ($(broker_bin)): run 'make broker'"
    exit 0
  fi
  if [[ "${2:-}" == plugin && ! -x "$PROVIDER_BIN" ]]; then
    echo "skipped: no plugin binary ($PROVIDER_BIN): run 'make broker'"
    exit 0
  fi
  E2E_WORK=$(mktemp -d)
  export E2E_WORK
  trap 'jobs -p | xargs -r kill 2>/dev/null; registry_stop_all; rm -rf "$E2E_WORK"' EXIT
}
