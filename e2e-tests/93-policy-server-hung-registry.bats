#!/usr/bin/env bats
# A registry that accepts connections and never answers (lib/registry.bash blackhole_start),
# on the real policy-server (lib/policy_server.bash; skipped, saying so, without one). With
# lookupRegistries the policy never asks it; without, the stock server's lookup waits for as
# long as the registry holds the connection. Its own server: the stock behaviour leaves the
# server's lookups stuck until the registry goes away, which must not reach 91-policy-server.
# Bounded: the webhook-side client gives up after PS_CLIENT_TIMEOUT (4 s here) and the server
# runs with --policy-timeout 2; the times measured are printed in the TAP stream (`# ...`
# lines) and recorded in docs/policy-server.md. What is asserted is the stock behaviour
# (measured on policy-server 1.36): no answer before the client gives up, and an unrelated
# lookup waiting too, until the registry lets go.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  load lib/policy_server
  [[ -z "$(ps_skip_reason)" && -f "$POLICY_WASM" ]] && ! on_kwctl || return 0
  registry_start anon
  push_image "$(build_image migrate-2.1.0)" anon platform/migrate:2.1.0
  push_image "$(build_image app-1.4.2)" anon team/app:1.4.2
  push_image "$(build_image busybox)" anon library/busybox:1.36
  push_image "$(build_image alpine)" anon library/alpine:3.20
  blackhole_start
  E2E_SOURCES=$(write_sources_yaml default --insecure "$REG_ANON" --insecure "$REG_BLACKHOLE")
  export E2E_SOURCES
  POLICY_REF="$REG_ANON/policies/resolvable-images:v0.1.0"
  ps_push_policy "$POLICY_WASM" "$POLICY_REF" >/dev/null
  jq -n --arg mod "registry://$POLICY_REF" --arg anon "$REG_ANON" '
    {"module": $mod, policyMode: "protect", allowedToMutate: false, hostCapabilities: ["*"],
     settings: {pullSecrets: {consult: false}}} as $policy
    | {"clusterwide-limited": ($policy | .settings.lookupRegistries = [$anon]),
       "clusterwide-open": $policy}' >"$BATS_FILE_TMPDIR/policies.yml"
  ps_start hung "$BATS_FILE_TMPDIR/policies.yml" --policy-timeout 2
  # blackhole_start's own readiness probe is a connection it accepted and keeps
  BLACKHOLE_BASELINE=$(accepted_connections "${REG_BLACKHOLE##*:}")
  export BLACKHOLE_BASELINE
}

teardown_file() {
  load lib/common
  load lib/policy_server
  ps_teardown_file
}

setup() {
  load lib/common
  load lib/policy_server
  require_policy_server
  ps_use hung
  PS_CLIENT_TIMEOUT=4
}

# accepted_connections PORT: how many connections the listener on 127.0.0.1:PORT has
# accepted and still holds (the black hole never closes one): sockets with that local port in
# any state but LISTEN, from /proc/net/tcp.
accepted_connections() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v p=":$hex" 'NR > 1 && substr($2, length($2) - 4) == p && $4 != "0A"' /proc/net/tcp | wc -l
}

# note MESSAGE: a measured figure, shown in the TAP stream (never asserted).
note() { echo "# $*" >&3; }

@test "lookupRegistries set: the hung registry is never asked, the request is answered with notLookedUp" {
  port=${REG_BLACKHOLE##*:}
  req=$(local_request pod-create.json "app=$REG_BLACKHOLE/team/app:1.4.2")
  run -0 ps_validate clusterwide-limited "$req"
  note "lookupRegistries, image on the hung registry: answered in $(ps_last_ms) ms"
  assert_allowed
  assert_warning_contains "container \"app\"" "not looked up: registry $REG_BLACKHOLE is not in lookupRegistries" "actions.notLookedUp"
  [ "$(accepted_connections "$port")" -eq "$BLACKHOLE_BASELINE" ] || _fail_with "the policy-server connected to the hung registry"
}

@test "lookupRegistries set: other requests are unaffected" {
  req=$(local_request pod-create.json "app=$REG_ANON/team/app:9.9.9")
  run -0 ps_validate clusterwide-limited "$req"
  note "lookupRegistries, missing tag on a healthy registry afterwards: answered in $(ps_last_ms) ms"
  assert_rejected
  assert_message_contains "container \"app\"" "not found on registry $REG_ANON"
  [ "$(accepted_connections "${REG_BLACKHOLE##*:}")" -eq "$BLACKHOLE_BASELINE" ]
}

@test "stock server without lookupRegistries: no answer before the webhook gives up, and every lookup waits until the registry lets go" {
  port=${REG_BLACKHOLE##*:}
  req=$(local_request pod-create.json "app=$REG_BLACKHOLE/team/app:1.4.2")
  run ps_post clusterwide-open "$req"
  [ "$status" -eq 28 ] || _fail_with "expected curl's time-out (28), got status $status"
  [ "$(ps_last_http)" = 000 ]
  note "no lookupRegistries, image on the hung registry: no answer; the client gave up after $(ps_last_ms) ms (--policy-timeout 2)"
  (($(accepted_connections "$port") > BLACKHOLE_BASELINE)) || _fail_with "the server never connected to the hung registry"

  # A request that never names the hung registry, to the policy that would not ask it, for an
  # image not looked up before (nothing cached): it waits too.
  other=$(local_request pod-create.json "app=$REG_ANON/library/alpine:3.20" sidecar.remove init-schema.remove)
  run ps_post clusterwide-limited "$other"
  [ "$status" -eq 28 ] || _fail_with "expected the unrelated request to wait too; status $status, HTTP $(ps_last_http)"
  note "no lookupRegistries, meanwhile an unrelated request on a healthy registry: no answer; the client gave up after $(ps_last_ms) ms"

  # Once the registry closes its connections, the server answers again.
  registry_stop blackhole
  PS_CLIENT_TIMEOUT=30 run -0 ps_validate clusterwide-limited "$other"
  note "after the hung registry closed its connections: answered in $(ps_last_ms) ms"
  assert_allowed
  # the evaluation that waited on the hung registry ran past --policy-timeout, noticed when
  # the host call returned
  wait_until 10 grep -q 'exceeded the allowed execution time\|execution deadline exceeded\|interrupted' "$PS_LOG" ||
    { tail -n 20 "$PS_LOG" >&2; false; }
}
