#!/usr/bin/env bats
# Fault injection: a misbehaving registry, or a slow path to a real one, between the host and
# the registry (lib/fault_proxy.py, on a kernel-chosen 127.0.0.1 port). Every fault that is
# not a 404 from the registry must end as "registry unreachable" (a warning by default), never
# as "not found"; a slow registry must cost a warning, not the decision; a hung one must not
# hang the decision.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  host_ready || return 0
  registry_start anon
  local img
  img=$(build_image faults)
  push_image "$img" anon team/app:1.4.2
  # four distinct references for the time-budget scenario
  local t
  for t in b1 b2 b3 b4; do push_image "$img" anon "team/app:$t"; done
  E2E_CLUSTER=$(write_cluster_dir default)
  export E2E_CLUSTER
}

teardown_file() {
  load lib/common
  fault_stop_all
  registry_stop_all
}

setup() { load lib/common; require_host; }
teardown() { fault_stop_all; }

# fault_start MODE [fault_proxy.py OPTIONS...]: starts the fault proxy in MODE, waits until it
# listens, and exports FAULT_ADDR=127.0.0.1:PORT. Its pid is recorded for fault_stop_all; its
# log is $FAULT_LOG.
fault_start() {
  local mode=$1 dir n
  shift
  dir="$(e2e_workdir)/faults"
  mkdir -p "$dir"
  # a name of its own: port files of stopped proxies stay behind
  n="$(date +%s%N)-$mode"
  FAULT_LOG="$dir/$n.log"
  # 3>&- : bats waits for every process holding its fd 3; the proxy must not keep it.
  python3 "$E2E_DIR/lib/fault_proxy.py" --mode "$mode" --port-file "$dir/$n.port" "$@" \
    >/dev/null 2>"$FAULT_LOG" 3>&- &
  echo $! >"$dir/$n.pid"
  wait_until 10 test -s "$dir/$n.port" || { cat "$FAULT_LOG" >&2; return 1; }
  FAULT_ADDR="127.0.0.1:$(cat "$dir/$n.port")"
  export FAULT_ADDR FAULT_LOG
}

# fault_stop_all: stops every fault proxy of this file (teardown); fails if one survives.
fault_stop_all() {
  local pidfile pid
  for pidfile in "$(e2e_workdir)"/faults/*.pid; do
    [[ -e "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    wait_until 5 registry_gone "$pid" || kill -9 "$pid" 2>/dev/null || true
    rm -f "$pidfile"
  done
}

# fault_request IMAGE...: a Pod in team-a whose containers c0, c1, … use IMAGEs (no init
# containers), refused if any image is not on loopback.
fault_request() {
  local req images
  req=$(request_with_images pod-create.json sidecar.remove)
  images=$(printf '%s\n' "$@" | jq -R . | jq -sc .)
  request_edit_pod_spec "$req" "del(.initContainers) | .containers = ($images | to_entries | map({name: \"c\\(.key)\", image: .value}))"
  assert_loopback_only "$req" || return 1
  printf '%s\n' "$req"
}

# run_policy_via_fault REQUEST [HOST OPTIONS...]: policy_run with the fault endpoint marked
# insecure (plain HTTP allowed, as for the test registries), unless --sources-path is given.
run_policy_via_fault() {
  local req=$1 sources
  shift
  sources=$(write_sources_yaml "fault-$RANDOM" --insecure "$FAULT_ADDR")
  E2E_SOURCES=$sources policy_run "$req" "$@"
}

# assert_unreachable_warning IMAGE WORDS...: admitted, one warning for IMAGE saying the
# registry was unreachable (plus WORDS), and nothing anywhere says "not found".
assert_unreachable_warning() {
  local image=$1
  shift
  assert_allowed
  assert_no_message
  assert_warning_count 1
  assert_warning_contains "container \"c0\"" "$image" "registry unreachable on registry $FAULT_ADDR" \
    "actions.unreachable" "$@"
  [[ "$output" != *"not found"* ]] || _fail_with "a fault was reported as 'not found'"
}

# millis: wall clock in milliseconds.
millis() { date +%s%3N; }

@test "proxy with a small delay: the image is found, nothing to report" {
  fault_start delay --upstream "$REG_ANON" --delay-ms 200
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_allowed
  assert_no_message
  assert_warning_count 0
  grep -q connection "$FAULT_LOG" || _fail_with "the proxy was not used"
}

@test "proxy with a small delay: a missing tag is still 'not found' (the registry said 404)" {
  fault_start delay --upstream "$REG_ANON" --delay-ms 200
  req=$(fault_request "$FAULT_ADDR/team/app:9.9.9")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_rejected
  assert_message_contains "container \"c0\"" "$FAULT_ADDR/team/app:9.9.9" "not found on registry $FAULT_ADDR" \
    "manifest unknown"
}

@test "status 500: admitted with a 'registry unreachable' warning quoting the status" {
  fault_start status --status 500
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "code: 500"
}

@test "status 503: admitted with a 'registry unreachable' warning quoting the status" {
  fault_start status --status 503
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "code: 503"
}

@test "status 503 with actions.unreachable=reject: rejected as unreachable, never as absent" {
  fault_start status --status 503
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req" --settings-path "$SCENARIOS_DIR/reject-unreachable.json"
  assert_rejected
  assert_message_contains "container \"c0\"" "registry unreachable on registry $FAULT_ADDR" \
    "Hint: $FAULT_ADDR could not be asked"
  assert_message_lacks "not found"
}

@test "status 429 with Retry-After: admitted with a 'registry unreachable' warning" {
  fault_start status --status 429 --retry-after 30
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2"
  grep -q '"HEAD /v2/team/app/manifests/1.4.2 HTTP/1.1" 429' "$FAULT_LOG" ||
    _fail_with "the registry was not asked for the manifest"
}

@test "non-JSON error body (an HTML 502 page): admitted with a 'registry unreachable' warning" {
  fault_start html --status 502
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "code: 502"
}

@test "connection reset: admitted with a 'registry unreachable' warning naming the reset" {
  fault_start reset
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "reset"
}

@test "hung registry with --oci-timeout-secs 3: the decision arrives, 'registry unreachable'" {
  skip_on_kwctl "--oci-timeout-secs: kwctl has no time-out for OCI lookups; a registry that never answers hangs it"
  fault_start hang
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  start=$(millis)
  run -0 --separate-stderr run_policy_via_fault "$req" --oci-timeout-secs 3
  elapsed=$(($(millis) - start))
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "timed out"
  # the host's 3 s time-out, plus start-up; far from the default 10 s
  ((elapsed < 9000)) || _fail_with "the decision took ${elapsed} ms"
}

@test "a 200 that is not a manifest: the registry has the tag, so nothing is rejected" {
  fault_start notmanifest
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  # oci/v1/manifest_digest only hashes what the registry serves: a 200 is "it exists".
  assert_allowed
  assert_no_message
  [[ "$output" != *"not found"* ]] || _fail_with "a 200 was reported as 'not found'"
}

@test "a 200 that is not a manifest, credentialed lookups: never 'not found'" {
  skip_on_kwctl "oci/v1/resolve_images (--enable-resolve-images) is a proposed capability only the test host offers"
  fault_start notmanifest
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req" --enable-resolve-images \
    --settings-path "$SCENARIOS_DIR/credentialed-lookups.json"
  assert_allowed
  assert_no_message
  [[ "$output" != *"not found"* ]] || _fail_with "a 200 was reported as 'not found'"
}

@test "status 503, credentialed lookups (resolve_images): 'registry unreachable' as well" {
  skip_on_kwctl "oci/v1/resolve_images (--enable-resolve-images) is a proposed capability only the test host offers"
  fault_start status --status 503
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req" --enable-resolve-images \
    --settings-path "$SCENARIOS_DIR/credentialed-lookups.json"
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2"
}

@test "TLS certificate for another name: admitted with a 'registry unreachable' warning" {
  local dir
  dir="$(e2e_workdir)/wrong-name-tls"
  mkdir -p "$dir"
  # A CA the host trusts, and a server certificate it signed for wrong.example only.
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 2 -keyout "$dir/ca.key" -out "$dir/ca.pem" \
    -subj "/CN=faults e2e CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$dir/server.key" -out "$dir/server.csr" \
    -subj "/CN=wrong.example" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" "subjectAltName=DNS:wrong.example" >"$dir/server.ext"
  openssl x509 -req -sha256 -days 2 -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -CAcreateserial -extfile "$dir/server.ext" -out "$dir/server.pem" 2>/dev/null
  fault_start tls --cert "$dir/server.pem" --key "$dir/server.key"
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  # Not insecure: only verified HTTPS is tried, with the CA above.
  sources=$(write_sources_yaml wrong-name --ca "$FAULT_ADDR" "$dir/ca.pem")
  run -0 --separate-stderr policy_run "$req" --sources-path "$sources"
  # the root cause (NotValidForName) is past the 256-character cut of a warning
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "invalid peer certificate"
}

@test "time budget: 4 images behind a 700 ms proxy, timeBudgetMs 1000: decided in time, 'not checked in time'" {
  fault_start delay --upstream "$REG_ANON" --delay-ms 700
  req=$(fault_request "$FAULT_ADDR/team/app:b1" "$FAULT_ADDR/team/app:b2" "$FAULT_ADDR/team/app:b3" "$FAULT_ADDR/team/app:b4")
  settings=$(write_settings budget '{"timeBudgetMs": 1000}')
  start=$(millis)
  run -0 --separate-stderr run_policy_via_fault "$req" --settings-path "$settings"
  elapsed=$(($(millis) - start))
  assert_allowed
  assert_no_message
  # The first lookup(s) started within the budget were answered; the rest were not started.
  assert_warning_contains "$FAULT_ADDR/team/app:b4" "registry unreachable" "not checked in time" "timeBudgetMs"
  [[ "$output" != *"not found"* ]] || _fail_with "an unchecked image was reported as 'not found'"
  unchecked=$(jq '[.warnings[] | select(contains("not checked in time"))] | length' <<<"$output")
  ((unchecked >= 1 && unchecked <= 3)) || _fail_with "expected 1 to 3 unchecked images, got $unchecked"
  # budget (1 s) + one lookup (a few delayed requests) + start-up: loosely under 5 s
  echo "# decided in ${elapsed} ms, $unchecked image(s) not checked" >&3
  ((elapsed < 5000)) || _fail_with "the decision took ${elapsed} ms"
}

@test "status 503 whose body quotes 'manifest unknown' (a mirror relaying upstream): unreachable, not absent" {
  # The status decides before the body it quotes (src/host/error.rs, classify_lookup).
  fault_start status --status 503 --error-code MANIFEST_UNKNOWN --error-message "manifest unknown"
  req=$(fault_request "$FAULT_ADDR/team/app:1.4.2")
  run -0 --separate-stderr run_policy_via_fault "$req"
  # The registry did not answer 404: the pull may well succeed once it recovers.
  assert_allowed
  assert_unreachable_warning "$FAULT_ADDR/team/app:1.4.2" "code: 503"
}
