#!/usr/bin/env bats
# The lookup broker's (broker/, docs/broker.md) own lifecycle and listeners, with no policy
# server: lookups are sent to it directly with curl, as the policy server sends them. Proves
# that on SIGTERM (what the kubelet sends on a rollout) a lookup in flight is answered with its
# real status and the broker exits promptly with status 0, logging the drain; that for the
# grace period after it (--drain-grace-ms) /readyz answers 503 while new lookups are still
# answered; that once it drains /readyz answers 503 and the API port takes no new
# connection; that both ports drop a client that never finishes its headers; that
# --max-connections holds connections past the cap until one closes; that a TLS certificate
# renewed in its mount is served without a restart, and a broken one kept, logged, counted and
# shown on /readyz; and that a sealing key rotated in the mounted directory is taken without a
# restart, both keys accepted meanwhile. The registry is the htpasswd one behind a fault proxy
# adding 1 s to every request (lib/fault_proxy.py --mode delay), so a lookup is in flight for
# about 2 s: room for a test's checks on a busy machine (the suite runs beside others). Needs
# the broker binary (`make broker`; skipped, saying so, without it), docker-registry, skopeo,
# python3. Runs once, on the test
# host pass (skipped on kwctl's).

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  load lib/broker
  [[ -x "$(broker_bin)" && "$E2E_HOST" != kwctl ]] || return 0

  registry_start auth
  push_image "$(build_image private)" auth private/app:v1
  LC_SLOW=$(fault_proxy_start slow delay --delay-ms 1000 --upstream "$REG_AUTH")

  local cluster
  cluster=$(write_cluster_dir broker-lifecycle)
  {
    broker_namespace_yaml team-a
    pull_secret_yaml team-a regcred "$LC_SLOW" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
  } | cluster_add "$cluster" 10-secrets.yaml
  LC_KUBECONFIG=$(apiserver_serve "$cluster")
  LC_API_PORT=$(cat "$(e2e_workdir)/registries/apiserver/port")
  LC_SOURCES=$(write_sources_yaml broker-lifecycle --insecure "$LC_SLOW")
  # the lookup of private/app:v1 with team-a's pull secret, sealed as the policy seals it
  # (sealed for each test's broker host by lc_path)
  LC_BODY="team-a/s.regcred/d.${LC_SLOW/:/_}/private/app"
  export LC_SLOW LC_API_PORT LC_SOURCES LC_BODY LC_KUBECONFIG
}

teardown_file() { load lib/common; registry_stop_all; }

setup() { load lib/common; load lib/broker; require_broker; }

# lc_path: the manifest path of the lookup, sealed for the broker of this test.
lc_path() { printf '/v2/%s/manifests/v1\n' "$(broker_seal "$LC_BODY" v1)"; }

# lc_broker NAME [ARGS...]: a broker of its own for this test (the tests stop theirs), whose
# lookups outlast the slow registry's two delayed requests; sets LC_PID.
lc_broker() {
  local name=$1
  shift
  broker_start "$name" --apiserver-port "$LC_API_PORT" --sources "$LC_SOURCES" \
    --attempt-timeout-ms 4000 --lookup-timeout-ms 4500 "$@"
  LC_PID=$(cat "$(e2e_workdir)/registries/$name/pid")
}

# lookup: the HTTP status of the brokered lookup (000: no answer, e.g. refused).
lookup() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' -I "http://$BROKER_ADDR$(lc_path)" || true
}

# lookup_in_flight FILE: starts the lookup in the background, its status to FILE, and waits
# until the broker counts it in flight; sets LOOKUP_PID.
lookup_in_flight() {
  (lookup >"$1") 3>&- &
  LOOKUP_PID=$!
  wait_until 5 in_flight || _fail_with "the lookup never was in flight: $(cat "$BROKER_LOG")"
}

in_flight() {
  curl -sf --max-time 1 "http://$BROKER_METRICS/metrics" | grep -qx 'broker_lookups_in_flight 1'
}

millis() { date +%s%3N; }

# log_line MSG: the broker's JSON line with that msg.
log_line() { jq -c --arg m "$1" 'select(.msg == $m)' "$BROKER_LOG"; }

@test "broker lifecycle: a direct lookup of an existing image behind the slow registry answers 200" {
  lc_broker lc-plain
  run -0 lookup
  [[ "$output" == 200 ]] || _fail_with "the lookup answered $output: $(cat "$BROKER_LOG")"
  registry_stop lc-plain
}

@test "broker lifecycle: SIGTERM during a lookup: it is answered 200, the broker exits 0 within 5 s, logging the drain" {
  # a short grace period, so that the lookup is still in flight when the drain starts
  lc_broker lc-term --drain-grace-ms 200
  lookup_in_flight "$BATS_TEST_TMPDIR/code"
  local sent took status=0
  sent=$(millis)
  kill -TERM "$LC_PID"
  wait "$LC_PID" || status=$?
  took=$(($(millis) - sent))
  wait "$LOOKUP_PID" || true
  echo "# exited $took ms after SIGTERM, status $status" >&3
  [[ "$(cat "$BATS_TEST_TMPDIR/code")" == 200 ]] ||
    _fail_with "the lookup in flight answered $(cat "$BATS_TEST_TMPDIR/code"): $(cat "$BROKER_LOG")"
  ((status == 0)) || _fail_with "exit status $status: $(cat "$(e2e_workdir)/registries/lc-term/broker.err")"
  ((took < 5000)) || _fail_with "exited $took ms after SIGTERM"
  log_line draining | jq -e '.connections == 1' >/dev/null || _fail_with "no draining line for one connection: $(cat "$BROKER_LOG")"
  log_line stopped | jq -e '.unfinished == 0' >/dev/null || _fail_with "no stopped line with nothing cut: $(cat "$BROKER_LOG")"
  jq -se 'any(.[]; .msg == "lookup" and .outcome == "found")' "$BROKER_LOG" >/dev/null || _fail_with "no found lookup logged"
  rm -f "$(e2e_workdir)/registries/lc-term/pid"
}

@test "broker lifecycle: while draining, /readyz answers 503 and the API port takes no new connection" {
  lc_broker lc-drain --drain-grace-ms 200
  run -0 curl -s -o /dev/null -w '%{http_code}' "http://$BROKER_METRICS/readyz"
  [[ "$output" == 200 ]] || _fail_with "not ready before the signal: $output"
  lookup_in_flight "$BATS_TEST_TMPDIR/code"
  kill -TERM "$LC_PID"
  wait_until 2 grep -qs '"msg":"draining"' "$BROKER_LOG" || _fail_with "no draining line: $(cat "$BROKER_LOG")"
  local ready api
  ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$BROKER_METRICS/readyz" || true)
  api=$(lookup)
  # both asked while the first lookup was still being answered
  kill -0 "$LC_PID" 2>/dev/null || _fail_with "the broker had exited before the checks: $(cat "$BROKER_LOG")"
  wait "$LOOKUP_PID" || true
  [[ "$ready" == 503 ]] || _fail_with "/readyz answered $ready while draining"
  [[ "$api" == 000 ]] || _fail_with "a new lookup while draining got $api"
  [[ "$(cat "$BATS_TEST_TMPDIR/code")" == 200 ]] || _fail_with "the lookup in flight answered $(cat "$BATS_TEST_TMPDIR/code")"
  local status=0
  wait "$LC_PID" || status=$?
  ((status == 0)) || _fail_with "exit status $status"
  rm -f "$(e2e_workdir)/registries/lc-drain/pid"
}

# closed_after ADDRESS: sends a request line and half a header to ADDRESS and prints how many
# ms pass until the server closes the connection (-1: still open after 8 s).
closed_after() {
  python3 -c '
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=8)
s.sendall(b"GET /readyz HTTP/1.1\r\nHost: bro")
start = time.monotonic()
try:
    while s.recv(4096):
        pass
    print(int((time.monotonic() - start) * 1000))
except socket.timeout:
    print(-1)
except OSError:
    print(int((time.monotonic() - start) * 1000))
' "$1"
}

@test "broker lifecycle: right after SIGTERM, a new lookup is still answered while /readyz answers 503 (--drain-grace-ms, default 3 s); the broker exits within 5 s" {
  lc_broker lc-grace --drain-grace-ms default
  local sent took status=0 ready api
  sent=$(millis)
  kill -TERM "$LC_PID"
  wait_until 2 grep -qs '"msg":"terminating"' "$BROKER_LOG" || _fail_with "no terminating line: $(cat "$BROKER_LOG")"
  ready=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://$BROKER_METRICS/readyz" || true)
  # what a policy server still routed to this pod by the Service sends: about 2 s through
  # the slow registry, all of it within the grace period
  api=$(lookup)
  echo "# readyz $ready, the lookup sent after SIGTERM $api, $(($(millis) - sent)) ms after it" >&3
  wait "$LC_PID" || status=$?
  took=$(($(millis) - sent))
  echo "# exited $took ms after SIGTERM, status $status" >&3
  [[ "$ready" == 503 ]] || _fail_with "/readyz answered $ready in the grace period"
  [[ "$api" == 200 ]] || _fail_with "a lookup sent in the grace period got $api: $(cat "$BROKER_LOG")"
  ((status == 0)) || _fail_with "exit status $status"
  log_line terminating | jq -e '.graceMs == 3000' >/dev/null || _fail_with "no terminating line with the default grace"
  # the lookup was over when the grace period ended: nothing left to drain
  log_line draining | jq -e '.connections == 0' >/dev/null || _fail_with "a connection left at the drain: $(cat "$BROKER_LOG")"
  ((took >= 3000)) || _fail_with "exited $took ms after SIGTERM, before its grace period ended"
  ((took < 5000)) || _fail_with "exited $took ms after SIGTERM"
  rm -f "$(e2e_workdir)/registries/lc-grace/pid"
}

@test "broker lifecycle: both ports drop a client that never finishes its headers (--header-timeout-ms)" {
  lc_broker lc-headers --header-timeout-ms 1000
  local port ms
  for port in "$BROKER_METRICS" "$BROKER_ADDR"; do
    ms=$(closed_after "$port")
    echo "# $port closed a half-sent request after $ms ms" >&3
    ((ms >= 800 && ms <= 3000)) || _fail_with "$port closed the half-sent request after $ms ms (-1: never), not at about 1000"
  done
  # a whole request is still served
  run -0 curl -sf "http://$BROKER_METRICS/readyz"
  registry_stop lc-headers
}

@test "broker lifecycle: past --max-connections a connection waits until one closes" {
  lc_broker lc-cap --max-connections 1
  local fd code
  # one connection that sends nothing holds the only place (for the header time-out)
  exec {fd}<>"/dev/tcp/${BROKER_ADDR%:*}/${BROKER_ADDR#*:}"
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$BROKER_ADDR/v2/" || true)
  exec {fd}>&-
  [[ "$code" == 000 ]] || _fail_with "served past the cap: $code"
  served() { [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "http://$BROKER_ADDR/v2/" || true)" != 000 ]]; }
  wait_until 3 served || _fail_with "not served once the place was free"
  registry_stop lc-cap
}

@test "broker lifecycle: over TLS, a renewed certificate is served without a restart" {
  local dir
  dir="$(e2e_workdir)/tls-renewal"
  generate_tls_ca "$dir/first"
  generate_tls_ca "$dir/second"
  mkdir -p "$dir/mount"
  cp "$dir/first/server.pem" "$dir/mount/tls.crt"
  cp "$dir/first/server.key" "$dir/mount/tls.key"
  lc_broker lc-tls --tls-cert "$dir/mount/tls.crt" --tls-key "$dir/mount/tls.key" --reload-seconds 1
  # the status of GET /v2/ over TLS trusting CA $1 (000: the handshake failed)
  v2() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$1" \
      -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" "https://$BROKER_ADDR/v2/" || true
  }
  [[ "$(v2 "$dir/first/ca.pem")" == 200 ]] || _fail_with "the first certificate is not served"
  [[ "$(v2 "$dir/second/ca.pem")" == 000 ]] || _fail_with "a certificate of the second CA before the renewal"
  # the renewal, as the kubelet writes a renewed Secret into the mount
  cp "$dir/second/server.pem" "$dir/mount/tls.crt"
  cp "$dir/second/server.key" "$dir/mount/tls.key"
  served_with() { [[ "$(v2 "$1")" == 200 ]]; }
  wait_until 15 served_with "$dir/second/ca.pem" || _fail_with "the renewed certificate is not served"
  [[ "$(v2 "$dir/first/ca.pem")" == 000 ]] || _fail_with "the old certificate is still served"
  registry_stop lc-tls
}

@test "broker lifecycle: a certificate reload that fails is logged, counted and turns /readyz 503 until one succeeds" {
  local dir
  dir="$(e2e_workdir)/tls-broken"
  generate_tls_ca "$dir/ca"
  mkdir -p "$dir/mount"
  cp "$dir/ca/server.pem" "$dir/mount/tls.crt"
  cp "$dir/ca/server.key" "$dir/mount/tls.key"
  lc_broker lc-tls-broken --tls-cert "$dir/mount/tls.crt" --tls-key "$dir/mount/tls.key" \
    --reload-seconds 1 --reload-failure-seconds 1
  v2() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert "$dir/ca/ca.pem" \
      -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" "https://$BROKER_ADDR/v2/" || true
  }
  broker_readyz 200 || _fail_with "not ready at start"
  # a mount left broken (a key that is no key): the pair held is kept, and said to be failing
  printf 'e2e-not-a-key-8p3z' >"$dir/mount/tls.key"
  broker_reload_fails certificate "$dir/mount/tls.key" e2e-not-a-key-8p3z
  [[ "$(v2)" == 200 ]] || _fail_with "the certificate held is no longer served"
  cp "$dir/ca/server.key" "$dir/mount/tls.key"
  wait_until 10 broker_readyz 200 || _fail_with "not ready again after a good reading"
  registry_stop lc-tls-broken
}

@test "broker lifecycle: without --apiserver, the kubeconfig says where the API server is" {
  broker_start lc-kubeconfig --kubeconfig "$LC_KUBECONFIG" --sources "$LC_SOURCES" \
    --attempt-timeout-ms 4000 --lookup-timeout-ms 4500
  [[ "$(lookup)" == 200 ]] || _fail_with "no lookup with the kubeconfig's API server: $(tail -n 3 "$BROKER_LOG")"
  registry_stop lc-kubeconfig
}

@test "broker lifecycle: a key rotation without a restart: both keys meanwhile, the old one refused once removed" {
  local next="e2e-Broker-Next-Sealing-Key-5h8d-0123456789abcdef" keys
  # docs/broker.md, "Rotating the key": the new key beside the old one (added before the start,
  # which saves a reload period: keys.rs's tests show a key added later is read)...
  keys="$(e2e_workdir)/registries/lc-rotate/keys"
  mkdir -p "$keys"
  printf '%s\n' "$next" >"$keys/next"
  lc_broker lc-rotate --reload-seconds 1
  # the status of a name sealed with key $1 for a lookup the broker refuses once the seal
  # holds (its own host: 400, and no registry asked), so that only the seal decides 401
  sealed_with() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
      "http://$BROKER_ADDR/v2/$(broker_seal "team-a/n/d.${BROKER_ADDR/:/_}/app" v1 "$1")/manifests/v1" || true
  }
  accepted() { [[ "$(sealed_with "$1")" == 400 ]]; }
  refused() { [[ "$(sealed_with "$1")" == 401 ]]; }
  accepted "$BROKER_KEY" || _fail_with "the old key's name: $(sealed_with "$BROKER_KEY")"
  accepted "$next" || _fail_with "the new key's name: $(sealed_with "$next")"
  refused "another-key-of-at-least-32-bytes-xyz" || _fail_with "a key the broker never held is accepted"
  # ...then the old one removed: its names refused within a reload period (1 s here)
  rm "$keys/key"
  wait_until 15 refused "$BROKER_KEY" || _fail_with "the removed key is still accepted"
  accepted "$next" || _fail_with "the new key is refused once alone"
  registry_stop lc-rotate
}
