#!/usr/bin/env bash
# `make check`: runs each make target given, in order, timing each; stops at the first that
# fails. Prints the time of every stage run, and the total, at the end either way.
#
# Usage: bash scripts/stages.sh TARGET...
set -uo pipefail

declare -a names=() seconds=()
status=0
report() {
  local i total=0
  echo
  echo "make check: time per stage"
  for i in "${!names[@]}"; do
    printf '  %-14s %4d s\n' "${names[$i]}" "${seconds[$i]}"
    total=$((total + seconds[i]))
  done
  printf '  %-14s %4d s (%d min %d s)\n' total "$total" $((total / 60)) $((total % 60))
}
trap report EXIT
for stage in "$@"; do
  started=$SECONDS
  echo "== make $stage" >&2
  make --no-print-directory "$stage"
  status=$?
  names+=("$stage")
  seconds+=($((SECONDS - started)))
  if ((status != 0)); then
    echo "make check: stage $stage FAILED (exit $status)" >&2
    exit "$status"
  fi
done
