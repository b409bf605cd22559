#!/usr/bin/env bash
# `make check`: runs each make target given, in order, timing each; stops at the first that
# fails. Prints the time of every stage run, and the total, at the end either way.
#
# A stage written `MAIN+SIDE...` runs the SIDE targets beside MAIN: stages that leave most of
# a core idle (tests waiting on registries and time-outs) share the machine instead of taking
# turns. MAIN's output streams; each SIDE's goes to target/check/SIDE.log and is printed when
# MAIN ends. The sides hold a shared lock on the file E2E_QUIET_LOCK names while they run;
# e2e-tests/run.sh takes it exclusively before the suites that compare latencies, so those
# still run on a machine nothing else of the check is using.
#
# Usage: bash scripts/stages.sh STAGE...
set -uo pipefail

declare -a names=() seconds=()
status=0
report() {
  local i total=0
  echo
  echo "make check: time per stage"
  for i in "${!names[@]}"; do
    printf '  %-24s %4d s\n' "${names[$i]}" "${seconds[$i]}"
    [[ "${names[$i]}" == "  "* ]] || total=$((total + seconds[i]))
  done
  printf '  %-24s %4d s (%d min %d s)\n' total "$total" $((total / 60)) $((total % 60))
}
trap report EXIT

logs=target/check
# run_stage STAGE: MAIN, with its SIDE targets beside it; the status of the first that failed.
run_stage() {
  local main=${1%%+*} side pid code i result=0 started=$SECONDS
  local -a sides=() pids=() beside=() took=()
  [[ "$1" == *+* ]] && IFS=+ read -r -a sides <<<"${1#*+}"
  mkdir -p "$logs"
  local lock=$logs/quiet.lock
  for side in "${sides[@]}"; do
    echo "== make $side (beside $main, output in $logs/$side.log)" >&2
    (
      begun=$SECONDS
      flock -s "$lock" make --no-print-directory "$side" >"$logs/$side.log" 2>&1
      code=$?
      echo "$((SECONDS - begun))" >"$logs/$side.seconds"
      exit "$code"
    ) &
    pids+=($!)
  done
  echo "== make $main" >&2
  E2E_QUIET_LOCK=$(realpath "$lock") make --no-print-directory "$main" || result=$?
  for i in "${!sides[@]}"; do
    side=${sides[$i]} pid=${pids[$i]}
    wait "$pid"
    code=$?
    echo "== make $side (beside $main): exit $code" >&2
    cat "$logs/$side.log"
    beside+=("  beside: $side") took+=("$(cat "$logs/$side.seconds" 2>/dev/null || echo 0)")
    ((result == 0 && code != 0)) && result=$code
  done
  names+=("$main" "${beside[@]}") seconds+=($((SECONDS - started)) "${took[@]}")
  return "$result"
}

for stage in "$@"; do
  run_stage "$stage"
  status=$?
  if ((status != 0)); then
    echo "make check: stage $stage FAILED (exit $status)" >&2
    exit "$status"
  fi
done
