#!/usr/bin/env bats
# Secrets are secrets: after every other suite has run (through `make e2e-tests`, which sets
# E2E_TRANSCRIPT_DIR and empties it first), scan everything the host printed in the whole run,
# and every recorded session, for the credentials the fixtures use.

load lib/common

# credentials: every form in which the auth registry's credentials could leak.
credentials() {
  printf '%s\n' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
  printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0
  echo
  printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0 | tr -d '='
  echo
  printf '%s' "$REG_AUTH_PASSWORD" | base64 -w0
  echo
}

@test "no username, password or base64 auth appears in any output, warning, log, annotation or session" {
  [[ -n "${E2E_TRANSCRIPT_DIR:-}" ]] || skip "run through 'make e2e-tests', which records every host output"
  local transcript="$E2E_TRANSCRIPT_DIR/policy-run.log"
  [[ -s "$transcript" ]] || { echo "no host output was recorded in $transcript" >&2; return 1; }
  # The scan must see the scenarios that handle credentials, or it proves nothing.
  grep -q "pull secret" "$transcript" || { echo "the transcript has no pull secret scenario" >&2; return 1; }
  local files=("$transcript" "$E2E_DIR"/sessions/*.yml)
  local secret leaks=0
  while IFS= read -r secret; do
    [[ -n "$secret" ]] || continue
    if grep -F -l -- "$secret" "${files[@]}"; then
      echo "a credential (${#secret} characters) appears in the files above" >&2
      leaks=$((leaks + 1))
    fi
  done < <(credentials)
  ((leaks == 0))
}
