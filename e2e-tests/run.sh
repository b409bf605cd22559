#!/usr/bin/env bash
# `make e2e-tests`: the suites against real registries, on the real engine where one is given
# and on the test host for what the real engine cannot do.
#
# - Without kwctl (KWCTL empty): every suite on the test host (E2E_HOST=test-host).
# - With kwctl: every suite on kwctl first, in full; then, on the test host, only the tests
#   that kwctl skipped (what only the test host can do: sessions, fault injection,
#   oci/v1/resolve_images on a stock kwctl, …), found in kwctl's TAP output; and last the
#   leak check (99-no-leak.bats) over the transcripts of both runs.
#
# Each run takes two passes: the suite files whose assertions hold on a busy machine,
# E2E_JOBS files at a time (default 4: most of a suite's time is spent waiting on registries
# and time-outs; bats --jobs needs GNU parallel, else 1), then, one file at a time on a quiet
# machine, the suites that compare one latency with another (TIMED_SUITES below; after the
# stages `make check` runs beside this one have ended, E2E_QUIET_LOCK). A test whose only
# timing is a loose bound (a decision or a drain within seconds of its time-out) is not one.
# A file's tests always run in order (setup_file shares its registries).
#
# Needs POLICY_WASM, POLICY_HOST and E2E_TRANSCRIPT_DIR (the Makefile sets them); KWCTL is
# optional. Prints each run's TAP lines and a closing `N passed, N failed, N skipped` line.
set -euo pipefail

e2e=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$(cd "$e2e/.." && pwd)/.e2e-work
mkdir -p "$work"
: "${POLICY_WASM:?}" "${POLICY_HOST:?}" "${E2E_TRANSCRIPT_DIR:?}"
export POLICY_WASM POLICY_HOST E2E_TRANSCRIPT_DIR
# the test images, written once for the whole run (lib/images.bash, image_layout)
E2E_IMAGE_CACHE=$work/images
rm -rf "$E2E_IMAGE_CACHE"
export E2E_IMAGE_CACHE

passed=0 failed=0 skipped=0
TIMED_SUITES=(89-safe-install 93-policy-server-hung-registry 94-broker 95-broker-limits 98-audit)
jobs=${E2E_JOBS:-4}
if ((jobs > 1)) && ! command -v parallel >/dev/null; then
  echo "e2e: no GNU parallel (make setup installs it): one suite file at a time" >&2
  jobs=1
fi
# count REGEX FILE: how many lines of FILE match.
count() { grep -cE "$1" "$2" || true; }
# is_timed SUITE_FILE: whether the suite times something and so runs alone.
is_timed() {
  local timed
  for timed in "${TIMED_SUITES[@]}"; do
    [[ "$(basename "$1" .bats)" == "$timed" ]] && return 0
  done
  return 1
}

# wait_for_quiet: when `make check` runs other stages beside this one (scripts/stages.sh), waits
# until they have ended, so that the suites comparing latencies run on a quiet machine.
wait_for_quiet() {
  [[ -n "${E2E_QUIET_LOCK:-}" ]] || return 0
  if ! flock -n -x "$E2E_QUIET_LOCK" true; then
    echo "e2e: waiting for the stages beside this one to end before the timed suites" >&2
    flock -x "$E2E_QUIET_LOCK" true
  fi
}

# run_bats NAME TAP_FILE [BATS_ARGS...] -- SUITE...: the suites in two passes (above), their
# TAP output kept in TAP_FILE and counted.
run_bats() {
  local name=$1 tap=$2 status=0 suite
  shift 2
  local args=() free=() timed=()
  while (($#)) && [[ "$1" != -- ]]; do args+=("$1"); shift; done
  shift
  for suite in "$@"; do
    if is_timed "$suite"; then timed+=("$suite"); else free+=("$suite"); fi
  done
  echo "== e2e: $name" >&2
  : >"$tap"
  if ((${#free[@]})); then
    local parallel_args=()
    ((jobs > 1)) && parallel_args=(--jobs "$jobs" --no-parallelize-within-files)
    bats --formatter tap --timing "${parallel_args[@]}" "${args[@]}" "${free[@]}" | tee -a "$tap" || status=$?
  fi
  if ((${#timed[@]})); then
    wait_for_quiet
    bats --formatter tap --timing "${args[@]}" "${timed[@]}" | tee -a "$tap" || status=$?
  fi
  local ok skip
  ok=$(count '^ok [0-9]+ ' "$tap")
  skip=$(count '^ok [0-9]+ .* # skip' "$tap")
  passed=$((passed + ok - skip))
  # kwctl's skips are run again on the test host and counted there
  [[ "$name" == "every suite on kwctl"* ]] || skipped=$((skipped + skip))
  failed=$((failed + $(count '^not ok [0-9]+ ' "$tap")))
  return "$status"
}

# skipped_names TAP_FILE: the names of the tests TAP_FILE reports as skipped, one a line
# (without the ` in N ms` that --timing adds).
skipped_names() {
  sed -nE 's/^ok [0-9]+ (.*) # skip( .*)?$/\1/p' "$1" | sed -E 's/ in [0-9]+ms$//'
}

# as_filter: the names on stdin as one anchored bats --filter regular expression.
as_filter() {
  local names
  names=$(sed -E 's/[][\.^$*+?(){}|/]/\\&/g' | paste -sd '|')
  printf '^(%s)$' "$names"
}

# compile_policy: has the test host compile the policy once (it caches compiled modules), so
# that the suites that start at once do not each compile it (seconds of CPU apiece).
compile_policy() {
  "$POLICY_HOST" run --allow-context-aware -r "$e2e/../tests/fixtures/requests/configmap-create.json" "$POLICY_WASM" >/dev/null ||
    echo "e2e: the test host could not run the policy on a ConfigMap (the suites will say why)" >&2
}

status=0
# every suite but the leak check, which reads what every run recorded and so runs last
suites=()
for suite in "$e2e"/*.bats; do
  [[ "$suite" == */99-no-leak.bats ]] || suites+=("$suite")
done
if [[ -n "${KWCTL:-}" ]]; then
  [[ -x "$KWCTL" ]] || { echo "e2e: $KWCTL is not an executable kwctl" >&2; exit 1; }
  E2E_HOST=kwctl KWCTL="$KWCTL" run_bats "every suite on kwctl ($KWCTL)" "$work/kwctl.tap" -- "${suites[@]}" || status=$?
  skipped_names "$work/kwctl.tap" >"$work/host-only.txt"
  if [[ -s "$work/host-only.txt" ]]; then
    compile_policy
    E2E_HOST=test-host run_bats "on the test host, the $(wc -l <"$work/host-only.txt") tests kwctl skipped" \
      "$work/host.tap" --filter "$(as_filter <"$work/host-only.txt")" -- "${suites[@]}" || status=$?
  fi
else
  echo "e2e: no kwctl (KWCTL unset): every suite on the test host" >&2
  compile_policy
  E2E_HOST=test-host run_bats "every suite on the test host" "$work/host.tap" -- "${suites[@]}" || status=$?
fi
E2E_HOST=test-host run_bats "the leak check over every run" "$work/leak.tap" -- "$e2e/99-no-leak.bats" || status=$?
echo "e2e: $passed passed, $failed failed, $skipped skipped"
exit "$status"
