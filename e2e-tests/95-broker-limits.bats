#!/usr/bin/env bats
# The lookup broker (broker/) against registries a Pod author chose, asked directly as the
# policy server asks it (sealed r4 names, the caller credential): a registry that floods it
# (a 1 GiB manifest, a 1 GiB error body, a 1 GiB 401 body, a 1 GiB token answer, an endless
# header, a slow drip) keeps its memory bounded and gets its answer within the lookup time;
# one namespace's wrong credentials do not switch a registry off for another namespace; token
# realms, redirects and proxies cannot carry a lookup where the broker must not go; without the
# tests' loopback allowance a listener on 127.0.0.1 gets no connection; a namespace that did not
# opt in gets no Secret read and no registry asked; one namespace's silent registry leaves
# another's lookups of it at their normal time; a key directory that cannot be read turns
# /readyz 503. Real htpasswd docker-registry, the fake API server, lib/fault_proxy.py for the
# hostile registries, lib/per_user_registry.py for the silent one. Needs only the broker binary.

bats_require_minimum_version 1.5.0

# The broker's --lookup-timeout-ms: the time the tests hold every answer to.
LOOKUP_TIMEOUT_MS=1500

setup_file() {
  load lib/common
  load lib/broker
  load lib/per_user_registry
  [[ -x "$(broker_bin)" ]] || return 0
  [[ "$E2E_HOST" != kwctl ]] || return 0

  registry_start auth
  push_image "$(build_image private)" auth private/app:v1
  REG_SLOW=$(fault_proxy_start slow delay --upstream "$REG_AUTH" --delay-ms 150)
  HOSTILE_MANIFEST=$(fault_proxy_start h-manifest hostile --what manifest)
  HOSTILE_ERROR=$(fault_proxy_start h-error hostile --what error)
  HOSTILE_HEADER=$(fault_proxy_start h-header hostile --what header)
  HOSTILE_DRIP=$(fault_proxy_start h-drip hostile --what drip)
  # a 401 with a 1 GiB body, and a token realm (its own /token) answering a 1 GiB token
  HOSTILE_UNAUTHORIZED=$(fault_proxy_start h-unauthorized hostile --what unauthorized)
  HOSTILE_TOKEN=$(fault_proxy_start h-token hostile --what token)
  export HOSTILE_UNAUTHORIZED HOSTILE_TOKEN
  # the same registry under another name: a redirect there leaves the registry's host
  HOSTILE_REDIRECT=$(fault_proxy_start h-redirect hostile --what redirect --location "http://localhost:${REG_AUTH##*:}")
  HOSTILE_REALM=$(fault_proxy_start h-realm hostile --what realm --location "http://169.254.169.254/latest/token")
  # an HTTPS registry whose token realm is plain HTTP, and that realm, logging what it is asked
  generate_tls_ca "$(e2e_workdir)/hostile-tls"
  REALM_SERVER=$(fault_proxy_start realm-server status --status 200)
  HOSTILE_TLS_REALM=$(fault_proxy_start h-tls-realm hostile --what realm --location "http://$REALM_SERVER/token" \
    --cert "$(e2e_workdir)/hostile-tls/server.pem" --key "$(e2e_workdir)/hostile-tls/server.key")
  export REALM_SERVER HOSTILE_TLS_REALM
  # an HTTPS registry that redirects to plain HTTP on its own host and port (trusted through
  # its CA, not an insecure source: nothing may fall back to plain HTTP by configuration)
  HOSTILE_TLS_DOWNGRADE=$(fault_proxy_start h-tls-downgrade hostile --what redirect --location "http://127.0.0.1:{port}" \
    --cert "$(e2e_workdir)/hostile-tls/server.pem" --key "$(e2e_workdir)/hostile-tls/server.key")
  # token realms where the broker must not connect: carrier-grade NAT, IPv6 unique-local,
  # NAT64, the cluster's service range (--deny-destination below), and a realm that is no URL
  HOSTILE_REALM_CGNAT=$(fault_proxy_start h-realm-cgnat hostile --what realm --location "http://100.64.0.1/token")
  HOSTILE_REALM_ULA=$(fault_proxy_start h-realm-ula hostile --what realm --location "http://[fd00::1]/token")
  HOSTILE_REALM_NAT64=$(fault_proxy_start h-realm-nat64 hostile --what realm --location "http://[64:ff9b::1]/token")
  HOSTILE_REALM_CLUSTER=$(fault_proxy_start h-realm-cluster hostile --what realm --location "http://10.96.0.10/token")
  HOSTILE_REALM_BAD=$(fault_proxy_start h-realm-bad hostile --what realm --location "http://[not-an-address]/token")
  export HOSTILE_TLS_DOWNGRADE HOSTILE_REALM_CGNAT HOSTILE_REALM_ULA HOSTILE_REALM_NAT64 HOSTILE_REALM_CLUSTER HOSTILE_REALM_BAD
  export REG_SLOW HOSTILE_MANIFEST HOSTILE_ERROR HOSTILE_HEADER HOSTILE_DRIP HOSTILE_REDIRECT HOSTILE_REALM
  # a registry silent for one user (team-b's secret) and answering another (team-a's)
  per_user_registry_start silent --image slow/app:v1 erin=hang dave=sees:slow/app
  # a listener on loopback that logs every connection, and a registry whose token realm is it
  LOOP_LISTENER=$(fault_proxy_start loop-listener hang)
  REALM_ON_LOOPBACK=$(fault_proxy_start h-realm-loopback hostile --what realm --location "http://$LOOP_LISTENER/token")
  export LOOP_LISTENER REALM_ON_LOOPBACK
  # a registry whose 404 carries words of its own choosing, secret-looking
  REG_LURE=$(fault_proxy_start lure status --status 404 --error-code NAME_UNKNOWN \
    --error-message "token=e2e-Lure-Secret-3n7q" --error-detail "password=e2e-Lure-Secret-3n7q")
  # fifty registries that never answer: a tenant rotating made-up host names
  fault_proxy_start rotating hang --listeners 50 >/dev/null
  export REG_LURE

  local cluster i
  cluster=$(write_cluster_dir broker-limits)
  {
    pull_secret_yaml team-a regcred "$REG_SLOW" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    pull_secret_yaml team-a direct "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    for i in $(seq 1 12); do
      pull_secret_yaml team-b "wrong$i" "$REG_SLOW" "$REG_AUTH_USER" "wrong-$i-$REG_AUTH_PASSWORD"
    done
    pull_secret_yaml team-a tlsreg "$HOSTILE_TLS_REALM" robot "robot-Realm-Pw-4c8v"
    pull_secret_yaml team-a dave "$REG_SILENT" "$(pur_user dave)" "$(pur_password dave)"
    pull_secret_yaml team-b erin "$REG_SILENT" "$(pur_user erin)" "$(pur_password erin)"
    # team-a and team-b opted in; team-c did not; kube-system's label is ignored
    broker_namespace_yaml team-a
    broker_namespace_yaml team-b
    broker_namespace_yaml team-c -
    broker_namespace_yaml kube-system
    pull_secret_yaml team-c regcred "$REG_SLOW" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    pull_secret_yaml kube-system admin "$REG_SLOW" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    broker_key_secret_yaml
  } | cluster_add "$cluster" 10-secrets.yaml
  apiserver_serve "$cluster" >/dev/null
  local api_port sources
  api_port=$(cat "$(e2e_workdir)/registries/apiserver/port")
  sources=$(write_sources_yaml broker-limits --insecure "$REG_AUTH" --insecure "$REG_SLOW" \
    --insecure "$HOSTILE_MANIFEST" --insecure "$HOSTILE_ERROR" --insecure "$HOSTILE_HEADER" \
    --insecure "$HOSTILE_DRIP" --insecure "$HOSTILE_UNAUTHORIZED" --insecure "$HOSTILE_TOKEN" --insecure "$HOSTILE_REDIRECT" --insecure "$HOSTILE_REALM" \
    --insecure "$HOSTILE_TLS_REALM" --insecure "$HOSTILE_REALM_CGNAT" \
    --insecure "$HOSTILE_REALM_ULA" --insecure "$HOSTILE_REALM_NAT64" --insecure "$HOSTILE_REALM_CLUSTER" \
    --insecure "$HOSTILE_REALM_BAD" --insecure "$REG_SILENT" --insecure "$LOOP_LISTENER" --insecure "$REG_LURE" \
    --insecure "localhost:${LOOP_LISTENER##*:}" --insecure "localhost:${REALM_ON_LOOPBACK##*:}" \
    --ca "$HOSTILE_TLS_DOWNGRADE" "$(e2e_workdir)/hostile-tls/ca.pem")
  LIMITS_API_PORT=$api_port LIMITS_SOURCES=$sources
  export LIMITS_API_PORT LIMITS_SOURCES
  # every proxy variable names a port nothing listens on: a broker that used one would fail
  HTTP_PROXY="http://127.0.0.1:9" HTTPS_PROXY="http://127.0.0.1:9" ALL_PROXY="http://127.0.0.1:9" \
    http_proxy="http://127.0.0.1:9" https_proxy="http://127.0.0.1:9" \
    broker_start broker-limits --apiserver-port "$api_port" --sources "$sources" \
    --attempt-timeout-ms 1000 --lookup-timeout-ms "$LOOKUP_TIMEOUT_MS" --silent-backoff-seconds 60 \
    --deny-destination 10.96.0.0/12
}

teardown_file() { load lib/common; scenario_teardown_file; }

setup() { load lib/common; load lib/broker; load lib/per_user_registry; require_broker; }

# lookup METHOD NAMESPACE CREDENTIALS REGISTRY REPO TAG: asks the broker as the policy server
# does; prints "STATUS SECONDS" and leaves the body in $BATS_TEST_TMPDIR/body.
lookup() {
  local method=$1 body="$2/$3/d.${4/:/_}/$5"
  local -a head=()
  [[ "$method" == HEAD ]] && head=(-I)
  curl -s "${head[@]}" -o "$BATS_TEST_TMPDIR/body" -w '%{http_code} %{time_total}\n' --max-time 20 \
    -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$BROKER_ADDR/v2/$(broker_seal "$body" "$6")/manifests/$6"
}

# sealed_url NAMESPACE CREDENTIALS REGISTRY REPO TAG: the URL `lookup` asks.
sealed_url() {
  printf 'http://%s/v2/%s/manifests/%s\n' "$BROKER_ADDR" "$(broker_seal "$1/$2/d.${3/:/_}/$4" "$5")" "$5"
}

broker_pid() { cat "$(e2e_workdir)/registries/broker-limits/pid"; }

# last_lookup REGISTRY: the broker's last lookup line for REGISTRY.
last_lookup() {
  jq -c --arg r "$1" 'select(.msg == "lookup" and .registry == $r)' "$BROKER_LOG" | tail -n 1
}

# realm_refused REGISTRY REALM: a lookup on REGISTRY, whose token realm is REALM, is a 503
# (never the registry's refusal), the broker's log naming REALM as refused by policy, which
# it decides before any connection: in far less than the 1 s connect time-out (an address
# with no route would take all of it).
realm_refused() {
  run -0 lookup HEAD team-a n "$1" app v1
  echo "$output"
  [[ "$output" == "503 "* ]] || _fail_with "answered $output"
  ! grep -q "DENIED" "$BATS_TEST_TMPDIR/body" || _fail_with "the registry's refusal: $(cat "$BATS_TEST_TMPDIR/body")"
  local line
  line=$(last_lookup "$1")
  echo "$line"
  jq -e --arg realm "$2" '.reason | contains("destination refused by policy: " + $realm)' <<<"$line" >/dev/null ||
    _fail_with "no refusal of $2 in the broker's log"
  jq -e '.ms < 500' <<<"$line" >/dev/null || _fail_with "took as long as a connection would"
}

@test "broker limits: proxy variables are ignored, the lookup goes to the registry itself" {
  run -0 lookup GET team-a s.direct "$REG_AUTH" private/app v1
  [[ "$output" == "200 "* ]] || { echo "$output"; cat "$BATS_TEST_TMPDIR/body"; false; }
  jq -e '.schemaVersion == 2' "$BATS_TEST_TMPDIR/body"
}

@test "broker limits: a flooding registry gets its answer within the lookup time, the broker stays under 64 MiB" {
  local -a FLOODING=("$HOSTILE_MANIFEST" "$HOSTILE_ERROR" "$HOSTILE_HEADER" "$HOSTILE_DRIP"
    "$HOSTILE_UNAUTHORIZED" "$HOSTILE_TOKEN")
  local registry i status took ms expected
  for registry in "${FLOODING[@]}"; do
    for i in 1 2 3 4; do
      lookup GET team-a n "$registry" "app$i" v1 >"$BATS_TEST_TMPDIR/answer-${registry##*:}-$i" &
    done
  done
  wait
  for registry in "${FLOODING[@]}"; do
    for i in 1 2 3 4; do
      read -r status took <"$BATS_TEST_TMPDIR/answer-${registry##*:}-$i"
      ms=$(jq -r --arg r "$registry" --arg repo "app$i" \
        'select(.msg == "lookup" and .registry == $r and .repository == $repo) | .ms' "$BROKER_LOG" | tail -n 1)
      echo "$registry app$i: $status in ${took}s, ${ms} ms by the broker's log"
      # the broker's own time is its lookup time (--lookup-timeout-ms 1500) and a little to
      # answer; the client's adds the connection and the answer's way back
      [[ -n "$ms" ]] && ((ms <= LOOKUP_TIMEOUT_MS + 250)) ||
        _fail_with "$registry app$i: the broker took ${ms:-no log line} ms for a ${LOOKUP_TIMEOUT_MS} ms lookup time"
      awk -v t="$took" -v limit="$LOOKUP_TIMEOUT_MS" 'BEGIN { exit !(t * 1000 <= limit + 1000) }' ||
        _fail_with "$registry app$i: answered in ${took}s for a ${LOOKUP_TIMEOUT_MS} ms lookup time"
      case "$registry" in
        # a 404 is the registry's own answer, whatever body it drowns it in
        "$HOSTILE_ERROR") expected=404 ;;
        # so is a 401 to the pod's (here: no) credentials: refused, the body unread past its cap
        "$HOSTILE_UNAUTHORIZED") expected=403 ;;
        *) expected=503 ;;
      esac
      [[ "$status" == "$expected" ]] || _fail_with "$registry app$i: $status, not $expected: $(last_lookup "$registry")"
    done
  done
  grep -F "larger than 4096 KiB" "$BROKER_LOG" | grep -qF "$HOSTILE_MANIFEST"
  last_lookup "$HOSTILE_TOKEN" | grep -qF "a token answer from http://$HOSTILE_TOKEN/token" ||
    _fail_with "the huge token answer was not the reason: $(last_lookup "$HOSTILE_TOKEN")"
  last_lookup "$HOSTILE_TOKEN" | grep -qF "larger than 1024 KiB, more than is read"
  # the 401's body was left unread: the broker closed the connection on the flood
  grep -q "client gave up" "$(e2e_workdir)/registries/h-unauthorized/proxy.log" ||
    _fail_with "the 401's body was read to its end: $(cat "$(e2e_workdir)/registries/h-unauthorized/proxy.log")"
  local peak
  peak=$(awk '/^VmHWM:/ { print $2 }' "/proc/$(broker_pid)/status")
  echo "peak RSS: $peak kB"
  ((peak < 64 * 1024))
}

@test "broker limits: a drip that outlasts the attempt marks that registry silent, and only it" {
  run -0 lookup HEAD team-a n "$HOSTILE_DRIP" other v1
  [[ "$output" == "503 "* ]]
  run -0 lookup HEAD team-a s.direct "$REG_AUTH" private/app v1
  [[ "$output" == "200 "* ]]
}

@test "broker limits: 12 wrong credentials of one namespace do not make another's lookup on that registry fail" {
  local creds="s.wrong1" i
  for i in $(seq 2 12); do creds+="__wrong$i"; done
  run -0 lookup HEAD team-b "$creds" "$REG_SLOW" private/app v1
  echo "team-b: $output"
  # 12 tries at 150 ms do not fit in 1.5 s: no definitive answer, and not the registry's fault
  [[ "$output" == "503 "* ]]
  jq -c 'select(.msg == "lookup" and .namespace == "team-b")' "$BROKER_LOG" | tail -n 1 | tee /dev/stderr |
    jq -e '.outcome == "unreachable"'
  run -0 lookup HEAD team-a s.regcred "$REG_SLOW" private/app v1
  echo "team-a: $output"
  [[ "$output" == "200 "* ]]
}

@test "broker limits: a token realm on a refused address is an error, never the registry's refusal" {
  run -0 lookup HEAD team-a n "$HOSTILE_REALM" app v1
  echo "$output"
  [[ "$output" == "503 "* ]]
  ! grep -q "DENIED" "$BATS_TEST_TMPDIR/body"
  grep -F "$HOSTILE_REALM" "$BROKER_LOG" | tail -n 1 | grep -qF "destination refused by policy: http://169.254.169.254"
}

@test "broker limits: a redirect to another host is not followed" {
  run -0 lookup GET team-a n "$HOSTILE_REDIRECT" private/app v1
  echo "$output"
  [[ "$output" == "503 "* ]]
  grep -F "$HOSTILE_REDIRECT" "$BROKER_LOG" | tail -n 1 | grep -qF "redirect to another host or from HTTPS to HTTP refused"
  grep -q "GET /v2/private/app/manifests/v1" "$(e2e_workdir)/registries/h-redirect/proxy.log"
}

@test "broker limits: no credential goes to a plain-HTTP token realm of an HTTPS registry" {
  local realm_log
  realm_log="$(e2e_workdir)/registries/realm-server/proxy.log"
  run -0 lookup HEAD team-a s.tlsreg "$HOSTILE_TLS_REALM" app v1
  echo "$output"
  [[ "$output" == "503 "* ]]
  grep -F "$HOSTILE_TLS_REALM" "$BROKER_LOG" | tail -n 1 | grep -qF "credentials are not sent in clear"
  ! grep -q "GET /token" "$realm_log" || _fail_with "the realm was asked with the credential: $(cat "$realm_log")"
  # without a credential nothing secret would go: the realm is asked
  run -0 lookup HEAD team-a n "$HOSTILE_TLS_REALM" app v1
  grep -q "GET /token" "$realm_log"
}

@test "broker limits: an HTTPS registry's redirect to plain HTTP on its own host and port is not followed" {
  run -0 lookup GET team-a n "$HOSTILE_TLS_DOWNGRADE" private/app v1
  echo "$output"
  [[ "$output" == "503 "* ]]
  last_lookup "$HOSTILE_TLS_DOWNGRADE" | grep -qF "redirect to another host or from HTTPS to HTTP refused" ||
    _fail_with "no refused redirect: $(last_lookup "$HOSTILE_TLS_DOWNGRADE")"
  local log
  log="$(e2e_workdir)/registries/h-tls-downgrade/proxy.log"
  cat "$log"
  # asked once over TLS; a plain-HTTP request on its TLS port would fail its handshake
  grep -q "GET /v2/private/app/manifests/v1" "$log"
  ! grep -q "client gave up" "$log" || _fail_with "the redirect target was connected to"
}

@test "broker limits: a token realm in carrier-grade NAT (100.64.0.0/10) is refused without a connection" {
  realm_refused "$HOSTILE_REALM_CGNAT" "http://100.64.0.1/token"
}

@test "broker limits: a token realm in IPv6 unique-local space ([fd00::1]) is refused without a connection" {
  realm_refused "$HOSTILE_REALM_ULA" "http://[fd00::1]/token"
}

@test "broker limits: a token realm in NAT64 space ([64:ff9b::1]) is refused without a connection" {
  realm_refused "$HOSTILE_REALM_NAT64" "http://[64:ff9b::1]/token"
}

@test "broker limits: a token realm in a --deny-destination range (the cluster's services) is refused without a connection" {
  realm_refused "$HOSTILE_REALM_CLUSTER" "http://10.96.0.10/token"
}

@test "broker limits: a token realm that is no URL is refused" {
  realm_refused "$HOSTILE_REALM_BAD" "http://[not-an-address]/token"
}

@test "broker limits: a namespace that did not opt in, or a protected one, gets no Secret read and no registry asked" {
  local apilog proxylog api_before proxy_before ns
  apilog="$(e2e_workdir)/registries/apiserver/apiserver.log"
  proxylog="$(e2e_workdir)/registries/slow/proxy.log"
  api_before=$(wc -l <"$apilog")
  proxy_before=$(grep -c "connection" "$proxylog" || true)
  run -0 lookup GET team-c s.regcred "$REG_SLOW" private/app v1
  [[ "$output" == "403 "* ]] || _fail_with "team-c: $output"
  grep -qF "namespace not enabled for the lookup broker: namespace team-c has not opted in" "$BATS_TEST_TMPDIR/body" ||
    _fail_with "$(cat "$BATS_TEST_TMPDIR/body")"
  # whatever their labels, and for a ServiceAccount too
  for ns in kube-system kubewarden; do
    run -0 lookup GET "$ns" a.default "$REG_SLOW" private/app v1
    [[ "$output" == "403 "* ]] || _fail_with "$ns: $output"
    grep -qF "namespace $ns is never served by the lookup broker" "$BATS_TEST_TMPDIR/body" ||
      _fail_with "$(cat "$BATS_TEST_TMPDIR/body")"
  done
  local reads
  reads=$(tail -n +"$((api_before + 1))" "$apilog")
  echo "API server requests: $reads"
  # team-c's Namespace was read (its label decides), nothing in it; the protected ones not even that
  grep -q "GET /api/v1/namespaces/team-c " <<<"$reads" || _fail_with "team-c's Namespace was not read"
  ! grep -qE "/namespaces/team-c/|/namespaces/(kube-system|kubewarden)[/ ]" <<<"$reads" ||
    _fail_with "the broker read for a namespace it does not serve"
  [[ "$(grep -c "connection" "$proxylog" || true)" == "$proxy_before" ]] || _fail_with "the registry was asked"
  jq -se '[.[] | select(.msg == "lookup" and (.namespace == "team-c" or .namespace == "kube-system" or .namespace == "kubewarden"))]
    | length == 3 and all(.[]; .outcome == "namespaceNotEnabled" and .status == 403)' "$BROKER_LOG" >/dev/null ||
    _fail_with "not logged as namespaceNotEnabled: $(grep -E 'team-c|kube-system' "$BROKER_LOG")"
  curl -sf "http://$BROKER_METRICS/metrics" | grep -qx 'broker_lookups_total{outcome="namespaceNotEnabled"} 3'
}

@test "broker limits: one namespace's silent registry leaves another's lookups of it at their normal time" {
  local i status took
  # more lookups of team-b than a registry's 8 slots, each left unanswered for the attempt's 1 s
  for i in $(seq 1 10); do
    lookup HEAD team-b s.erin "$REG_SILENT" "slow/app$i" v1 >"$BATS_TEST_TMPDIR/silent-$i" &
  done
  sleep 0.3
  run -0 lookup HEAD team-a s.dave "$REG_SILENT" slow/app v1
  echo "team-a while team-b waits: $output"
  read -r status took <<<"$output"
  [[ "$status" == 200 ]] || _fail_with "team-a got $status"
  # well under the 1 s a registry slot would free up in, were team-b holding all of them
  awk -v t="$took" 'BEGIN { exit !(t < 0.7) }' || _fail_with "team-a waited ${took}s behind team-b"
  wait
  cat "$BATS_TEST_TMPDIR"/silent-*
  grep -q "^503 " "$BATS_TEST_TMPDIR/silent-1"
  # team-b's lookups of the registry now fail at once, team-a's are still made
  run -0 lookup GET team-b s.erin "$REG_SILENT" slow/app v1
  [[ "$output" == "503 "* ]] && grep -qF "time out in the last 60 s" "$BATS_TEST_TMPDIR/body" ||
    _fail_with "team-b: $output $(cat "$BATS_TEST_TMPDIR/body")"
  run -0 lookup HEAD team-a s.dave "$REG_SILENT" slow/app v1
  read -r status took <<<"$output"
  [[ "$status" == 200 ]] && awk -v t="$took" 'BEGIN { exit !(t < 0.7) }' || _fail_with "team-a after: $output"
}

@test "broker limits: without the tests' loopback allowance a listener on 127.0.0.1 gets no connection, from an image or a token realm" {
  local listener_log realm_log
  listener_log="$(e2e_workdir)/registries/loop-listener/proxy.log"
  realm_log="$(e2e_workdir)/registries/h-realm-loopback/proxy.log"
  # the realm's registry allowed by name, whatever it resolves to; nothing else on loopback
  broker_start broker-strict --apiserver-port "$LIMITS_API_PORT" --sources "$LIMITS_SOURCES" --no-loopback-allowance \
    --allow-registry "localhost:${REALM_ON_LOOPBACK##*:}" --attempt-timeout-ms 1000 --lookup-timeout-ms 1500
  local registry
  for registry in "$LOOP_LISTENER" "localhost:${LOOP_LISTENER##*:}"; do
    run -0 lookup GET team-a n "$registry" app v1
    [[ "$output" == "400 "* ]] && grep -q UNSUPPORTED "$BATS_TEST_TMPDIR/body" || _fail_with "$registry: $output"
  done
  run -0 lookup GET team-a n "localhost:${REALM_ON_LOOPBACK##*:}" app v1
  echo "$output: $(cat "$BATS_TEST_TMPDIR/body")"
  [[ "$output" == "503 "* ]] || _fail_with "the realm on loopback: $output"
  grep -qF "UNAVAILABLE" "$BATS_TEST_TMPDIR/body" && grep -qF "refused destination" "$BATS_TEST_TMPDIR/body" ||
    _fail_with "no classified refusal"
  # the caller learns the class, never the address or port (the operator's log has them)
  ! grep -qE "127\.0\.0\.1|${LOOP_LISTENER##*:}" "$BATS_TEST_TMPDIR/body" || _fail_with "the answer names the destination"
  last_lookup "localhost:${REALM_ON_LOOPBACK##*:}" | grep -qF "destination refused by policy: http://$LOOP_LISTENER/token"
  # the registry allowed by name was asked; the listener was never connected to
  grep -q "GET /v2/app/manifests/v1" "$realm_log" || _fail_with "the allowed registry was not asked: $(cat "$realm_log")"
  [[ "$(grep -c "connection" "$listener_log" || true)" == 0 ]] || _fail_with "the listener was connected to: $(cat "$listener_log")"
  registry_stop broker-strict
}

@test "broker limits: a key directory that cannot be read any more turns /readyz 503 until it can" {
  local keys
  broker_start broker-reload --apiserver-port "$LIMITS_API_PORT" --sources "$LIMITS_SOURCES" \
    --reload-seconds 1 --reload-failure-seconds 1
  keys="$(e2e_workdir)/registries/broker-reload/keys"
  broker_readyz 200 || _fail_with "not ready at start"
  # a file that is no key (too short): the whole reading fails, the old keys are kept
  printf 'e2e-not-a-key-7h2x' >"$keys/broken"
  broker_reload_fails keys "$keys/broken" e2e-not-a-key-7h2x
  # lookups go on with the keys held
  run -0 lookup HEAD team-a s.direct "$REG_AUTH" private/app v1
  [[ "$output" == "200 "* ]] || _fail_with "$output"
  rm "$keys/broken"
  wait_until 10 broker_readyz 200 || _fail_with "not ready again after a good reading"
  registry_stop broker-reload
}

@test "broker limits: a registry's 404 reaches the caller as its code in the broker's words, never the registry's" {
  run -0 lookup GET team-a n "$REG_LURE" app v1
  echo "$output: $(cat "$BATS_TEST_TMPDIR/body")"
  [[ "$output" == "404 "* ]] || _fail_with "answered $output"
  jq -e '.errors == [{"code": "NAME_UNKNOWN", "message": "repository name not known to registry", "detail": null}]' \
    "$BATS_TEST_TMPDIR/body" >/dev/null || _fail_with "not the broker's own words"
  ! grep -q "e2e-Lure" "$BATS_TEST_TMPDIR/body" || _fail_with "the registry's words reached the caller"
}

@test "broker limits: fifty rotating host names of one namespace do not hold the slots another namespace needs" {
  local -a ports urls pids
  local i status took
  # 8 slots in all, 4 of them for one namespace (half, the default); a silent registry holds
  # a slot 3 s, far longer than team-a's lookup may take
  broker_start broker-fair --apiserver-port "$LIMITS_API_PORT" --sources "$LIMITS_SOURCES" \
    --connect-timeout-ms 3000 --attempt-timeout-ms 3000 --lookup-timeout-ms 3500 \
    --silent-backoff-seconds 60 --max-concurrent 8
  mapfile -t ports <"$(e2e_workdir)/registries/rotating/port.all"
  ((${#ports[@]} == 50)) || _fail_with "${#ports[@]} silent registries"
  # each a registry of its own, each within its registry's share: sealed first, sent at once
  for i in "${!ports[@]}"; do urls[i]=$(sealed_url team-b n "127.0.0.1:${ports[i]}" app v1); done
  for i in "${!urls[@]}"; do
    curl -s -I -o /dev/null -w '%{http_code}\n' --max-time 20 -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
      "${urls[i]}" >"$BATS_TEST_TMPDIR/rotating-$i" &
    pids+=($!)
  done
  all_in_flight() { curl -sf --max-time 1 "http://$BROKER_METRICS/metrics" | grep -qx 'broker_lookups_in_flight 50'; }
  wait_until 10 all_in_flight || _fail_with "team-b's lookups never were all in flight"
  run -0 lookup HEAD team-a s.direct "$REG_AUTH" private/app v1
  echo "team-a beside team-b's fifty: $output"
  read -r status took <<<"$output"
  [[ "$status" == 200 ]] || _fail_with "team-a got $status"
  # well under the 3 s a slot would free up in, were team-b holding all of them
  awk -v t="$took" 'BEGIN { exit !(t < 0.7) }' || _fail_with "team-a waited ${took}s behind team-b"
  wait "${pids[@]}"
  [[ "$(cat "$BATS_TEST_TMPDIR"/rotating-* | sort -u)" == 503 ]] || _fail_with "team-b: $(cat "$BATS_TEST_TMPDIR"/rotating-* | sort | uniq -c)"
  # team-b has 4 silent registries now (--max-silent-registries): another made-up name is
  # answered at once, without a time-out; team-a's lookups are still made
  run -0 lookup HEAD team-b n "localhost:${ports[0]}" app v1
  read -r status took <<<"$output"
  [[ "$status" == 503 ]] && awk -v t="$took" 'BEGIN { exit !(t < 0.5) }' ||
    _fail_with "a new name of team-b: $output; $(broker_lookups_of team-b | jq -c '[.outcome, .ms, .reason]' | sort | uniq -c)"
  run -0 lookup GET team-b n "localhost:${ports[1]}" app v1
  grep -qF "too many silent registries for this namespace" "$BATS_TEST_TMPDIR/body" || _fail_with "$(cat "$BATS_TEST_TMPDIR/body")"
  run -0 lookup HEAD team-a s.direct "$REG_AUTH" private/app v1
  [[ "$output" == "200 "* ]] || _fail_with "team-a after: $output"
  registry_stop broker-fair
}
