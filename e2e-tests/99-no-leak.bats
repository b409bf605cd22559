#!/usr/bin/env bats
# Secrets are secrets: after every other suite has run (through `make e2e-tests`, which sets
# E2E_TRANSCRIPT_DIR and empties it first), scan everything the host printed in the whole run,
# every session it recorded (policy_run keeps them) and the committed sessions, for the
# credentials the fixtures use (the auth registry's and the per-user registry's users); and the
# pull secrets in the recorded sessions, decoded.

load lib/common
load lib/per_user_registry

# credentials: every form in which the fixtures' credentials could leak: the auth registry's,
# and every fixture user's of the per-user registry (lib/per_user_registry.bash).
credentials() {
  local user password
  while read -r user password; do
    printf '%s\n' "$user" "$password"
    printf '%s:%s' "$user" "$password" | base64 -w0
    echo
    printf '%s:%s' "$user" "$password" | base64 -w0 | tr -d '='
    echo
    printf '%s' "$password" | base64 -w0
    echo
  done < <(printf '%s %s\n' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"; pur_credentials)
}

# no_credential_in FILE...: fails, naming the files, when any form of a credential is in them.
no_credential_in() {
  local secret leaks=0
  while IFS= read -r secret; do
    [[ -n "$secret" ]] || continue
    if grep -F -l -- "$secret" "$@"; then
      echo "a credential (${#secret} characters) appears in the files above" >&2
      leaks=$((leaks + 1))
    fi
  done < <(credentials)
  ((leaks == 0))
}

@test "no username, password or base64 auth appears in any output, warning, log, annotation or session" {
  [[ -n "${E2E_TRANSCRIPT_DIR:-}" ]] || skip "run through 'make e2e-tests', which records every host output"
  local transcript="$E2E_TRANSCRIPT_DIR/policy-run.log"
  [[ -s "$transcript" ]] || { echo "no host output was recorded in $transcript" >&2; return 1; }
  # The scan must see the scenarios that handle credentials, or it proves nothing.
  grep -q "pull secret" "$transcript" || { echo "the transcript has no pull secret scenario" >&2; return 1; }
  no_credential_in "$transcript" "$E2E_DIR"/sessions/*.yml
}

# decoded_pull_secrets FILE: the Docker config of every pull secret in the sessions of FILE,
# decoded from base64, one a line (a credential inside is base64 twice over in the session).
decoded_pull_secrets() {
  grep -oE '\.docker(configjson|cfg)[\\"]*:[\\" ]*[A-Za-z0-9+/=]{8,}' "$1" |
    grep -oE '[A-Za-z0-9+/=]{8,}$' |
    while IFS= read -r encoded; do
      printf '%s' "$encoded" | base64 -d 2>/dev/null || true
      echo
    done
}

@test "the pull secrets of recorded sessions keep their registries and lose their credentials" {
  [[ -n "${E2E_TRANSCRIPT_DIR:-}" ]] || skip "run through 'make e2e-tests', which keeps every recorded session"
  local sessions="$E2E_TRANSCRIPT_DIR/redacting-sessions.log" decoded
  [[ -s "$sessions" ]] || { echo "no session was recorded by a host that redacts" >&2; return 1; }
  decoded="$BATS_TEST_TMPDIR/pull-secrets.txt"
  decoded_pull_secrets "$sessions" >"$decoded"
  # The scan must see pull secrets, or it proves nothing.
  grep -qF '"auths"' "$decoded" || { echo "no recorded session holds a pull secret" >&2; return 1; }
  grep -qF '<redacted>' "$decoded" || { echo "no recorded pull secret is redacted" >&2; return 1; }
  no_credential_in "$decoded"
}
