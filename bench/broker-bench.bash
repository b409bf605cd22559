# shellcheck shell=bash
# What the broker's benchmarks share (bench/broker*.sh source it): the repository root as the
# working directory, BENCH_BROKER_REPEATS as REPEATS, the e2e helpers (registries, images, the
# broker), and medians of rows measured interleaved.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${BENCH_BROKER_REPEATS:-5}
# shellcheck source=e2e-tests/lib/common.bash
source e2e-tests/lib/common.bash
# shellcheck source=e2e-tests/lib/broker.bash
source e2e-tests/lib/broker.bash

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }'; }

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
