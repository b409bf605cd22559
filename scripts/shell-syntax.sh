#!/usr/bin/env bash
# Parses every shell file of the repository without running it, so that a quoting slip (an
# apostrophe in a comment inside a single-quoted jq program) fails in seconds, not after the
# forty minutes of e2e suites that precede the broken file. Bats files are first translated
# by bats' own preprocessor, as `bats` does before running them.
set -euo pipefail
cd "$(dirname "$0")/.."
preprocess=""
for p in /usr/libexec/bats-core/bats-preprocess /usr/lib/bats-core/bats-preprocess \
  "$(dirname "$(readlink -f "$(command -v bats 2>/dev/null || echo /nonexistent)")")/../libexec/bats-core/bats-preprocess"; do
  [[ -x "$p" ]] && { preprocess="$p"; break; }
done
status=0
tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
while IFS= read -r f; do
  case "$f" in
    *.bats)
      if [[ -z "$preprocess" ]]; then
        echo "shell-syntax: bats-preprocess not found, $f not parsed" >&2
        status=1
        continue
      fi
      "$preprocess" "$f" >"$tmp"
      if ! out="$(bash -n "$tmp" 2>&1)"; then
        echo "${out//$tmp/$f (after bats-preprocess)}" >&2
        status=1
      fi ;;
    *) bash -n "$f" || status=1 ;;
  esac
done < <(git ls-files '*.sh' '*.bash' '*.bats' .ci/run .ci/setup)
# e2e suites run in the order of their numbers: one number, one suite.
dups="$(git ls-files 'e2e-tests/[0-9]*.bats' | sed -E 's,.*/([0-9]+)-.*,\1,' | sort | uniq -d)"
if [[ -n "$dups" ]]; then
  echo "shell-syntax: e2e suite numbers used twice: $dups" >&2
  status=1
fi
[[ $status -eq 0 ]] && echo "shell-syntax: every shell and bats file parses"
exit $status
