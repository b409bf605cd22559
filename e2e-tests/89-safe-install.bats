#!/usr/bin/env bats
# The shipped install (deploy/, docs/broker.md): the policy's settings read from
# deploy/policy-server.yaml (only the broker's host replaced; the key Secret is deploy/'s own
# name), every lookup through the lookup broker (`use: all`), the broker with deploy/'s
# time-outs and destination flags and without the tests' loopback allowance: only the suite's
# registries, by name (`--allow-registry localhost:PORT`), may be asked. On the stock
# policy-server when one is given ($POLICY_SERVER, else on PATH), on the test host otherwise
# (crates/policy-host, with the broker's caller credential as its docker config): both send
# the policy's lookups of the broker's host with that credential.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  load lib/broker
  [[ "$E2E_HOST" != kwctl ]] || return 0
  host_ready || return 0
  [[ -x "$(broker_bin)" ]] || { echo "no broker binary at $(broker_bin): make broker" >&2; return 1; }
  python3 -c 'import yaml' || { echo "python3 cannot import yaml (Debian: python3-yaml)" >&2; return 1; }

  registry_start anon
  push_image "$(build_image safe)" anon team/app:v1
  # a registry that accepts connections and never answers; a listener on loopback that logs
  # every connection, standing for an internal service an image names by address
  SAFE_SILENT=$(fault_proxy_start silent hang)
  SAFE_LISTENER=$(fault_proxy_start listener hang)
  # the images name the registries by name: the broker allows these two, nothing else on loopback
  SAFE_REG="localhost:${REG_ANON##*:}" SAFE_SILENT_REG="localhost:${SAFE_SILENT##*:}"
  export SAFE_SILENT SAFE_LISTENER SAFE_REG SAFE_SILENT_REG

  local cluster ns
  cluster=$(write_cluster_dir safe-install)
  {
    # team-a and team-b opted in; team-c did not (and has a pull secret); kube-system's label
    # is ignored; kubewarden and platform are protected (the broker's default and a flag)
    broker_namespace_yaml team-a
    broker_namespace_yaml team-b
    broker_namespace_yaml team-c -
    broker_namespace_yaml kube-system
    broker_namespace_yaml kubewarden
    broker_namespace_yaml platform -
    for ns in team-c kube-system kubewarden platform; do
      printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: default" "  namespace: $ns"
    done
    pull_secret_yaml team-c regcred "$SAFE_REG" someone some-password-4k2j
    # deploy/'s key Secret, by its own name
    broker_key_secret_yaml | sed 's/name: broker-key/name: resolvable-images-broker-key/'
  } | cluster_add "$cluster" 10-objects.yaml
  SAFE_CLUSTER=$cluster
  SAFE_KUBECONFIG=$(apiserver_serve "$cluster")
  local api_port sources
  api_port=$(cat "$(e2e_workdir)/registries/apiserver/port")
  sources=$(write_sources_yaml safe-upstream --insecure "$SAFE_REG" --insecure "$SAFE_SILENT_REG")
  local -a flags
  mapfile -t flags < <(deploy_broker_flags)
  broker_start broker --apiserver-port "$api_port" --sources "$sources" --no-loopback-allowance \
    --allow-registry "$SAFE_REG" --allow-registry "$SAFE_SILENT_REG" \
    --protected-namespace kubewarden --protected-namespace platform "${flags[@]}"

  SAFE_SETTINGS=$(deploy_settings "$BROKER_ADDR")
  SAFE_DOCKER=$(write_docker_config safe-caller "$BROKER_ADDR" "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD")
  SAFE_PS_SOURCES=$(write_sources_yaml safe-ps --insecure "$BROKER_ADDR")
  export SAFE_CLUSTER SAFE_KUBECONFIG SAFE_SETTINGS SAFE_DOCKER SAFE_PS_SOURCES
  if policy_server_bin >/dev/null 2>&1; then
    local policies
    policies="$(e2e_workdir)/safe-policies.yml"
    broker_policies "$policies" safe "$SAFE_SETTINGS"
    broker_policy_server_start ps "$policies" "$SAFE_DOCKER" "$SAFE_PS_SOURCES" "$SAFE_KUBECONFIG"
  fi
}

teardown_file() { load lib/common; scenario_teardown_file; }

setup() {
  load lib/common
  load lib/broker
  [[ "$E2E_HOST" != kwctl ]] || skip "runs once, with E2E_HOST=policy-host (on the stock policy-server when given)"
  require_host
  [[ -n "${SAFE_SETTINGS:-}" ]] || skip "setup_file did not run"
}

# evaluate REQUEST: the policy's answer with deploy/'s settings: on the stock policy-server when
# setup_file started one, else on the test host.
evaluate() {
  if [[ -n "${PS_PORT_ps:-}" ]]; then
    broker_validate ps safe "$1"
  else
    policy_run "$1" --settings-json "$SAFE_SETTINGS" --docker-config-json-path "$SAFE_DOCKER" \
      --sources-path "$SAFE_PS_SOURCES" --cluster-dir "$SAFE_CLUSTER" 2>/dev/null
  fi
}

# pod NAMESPACE IMAGE [SIDECAR-IMAGE] [SECRET...]: a Pod request in NAMESPACE (its app container
# running IMAGE, its sidecar SIDECAR-IMAGE or removed when `-`), with these imagePullSecrets.
pod() {
  local ns=$1 image=$2 sidecar=${3:--} req secrets
  shift 3 || shift $#
  if [[ "$sidecar" == - ]]; then
    req=$(request_with_images pod-create.json "app=$image" sidecar.remove init-schema.remove)
  else
    req=$(request_with_images pod-create.json "app=$image" "sidecar=$sidecar" init-schema.remove)
  fi
  request_in_namespace "$req" "$ns"
  secrets=$(printf '%s\n' "$@" | jq -R 'select(length > 0) | {name: .}' | jq -cs .)
  request_edit_pod_spec "$req" ".imagePullSecrets = $secrets"
  printf '%s\n' "$req"
}

# docs_wording WORDS: the policy's warning for a refused namespace as docs/broker.md's table
# gives it (`not checked: namespace NAMESPACE ...WORDS...`).
docs_wording() {
  grep -o '`not checked: namespace NAMESPACE [^`]*`' "$REPO_ROOT/docs/broker.md" | tr -d '`' | grep -F -- "$1" | head -n1
}

# connections NAME: how many connections the fault proxy NAME accepted.
connections() { grep -c "connection" "$(e2e_workdir)/registries/$1/proxy.log" || true; }

# connected_since NAME COUNT: the fault proxy NAME accepted more than COUNT connections.
connected_since() { (($(connections "$1") > $2)); }

@test "safe install: deploy/'s settings send every lookup through the broker" {
  [[ "$(jq -r '.lookupBroker.use' <<<"$SAFE_SETTINGS")" == all ]] || _fail_with "settings: $SAFE_SETTINGS"
  [[ "$(jq -r '.timeBudgetMs' <<<"$SAFE_SETTINGS")" =~ ^[0-9]+$ ]] || _fail_with "settings: $SAFE_SETTINGS"
  output=$(evaluate "$(pod team-b "$SAFE_REG/team/app:v1")")
  assert_allowed
  assert_warning_count 0
  broker_lookups_of team-b | jq -se 'length > 0 and all(.[]; .outcome == "found" and .credentials == "no pull secrets")' >/dev/null ||
    _fail_with "not looked up by the broker: $(broker_lookups_of team-b)"
}

@test "safe install: a silent host and a private address leave another namespace's lookups unharmed" {
  local silent_req private_req silent_out good_body silent_line good_lines before i
  silent_req=$(pod team-a "$SAFE_SILENT_REG/slow/app:v1")
  silent_out="$BATS_TEST_TMPDIR/silent.json"
  before=$(connections silent)
  # team-a's silent lookup, in flight while team-b looks up
  evaluate "$silent_req" >"$silent_out" 3>&- &
  local silent_pid=$!
  wait_until 20 connected_since silent "$before" || _fail_with "the silent host was never asked"
  # team-b, straight at the broker while team-a's lookup waits on the silent host: five
  # lookups, one after another, each answered by the registry
  good_body="team-b/n/d.${SAFE_REG/:/_}/team/app"
  for i in 1 2 3 4 5; do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -I -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
      "http://$BROKER_ADDR/v2/$(broker_seal "$good_body" v1)/manifests/v1")" == 200 ]] || _fail_with "team-b lookup $i failed"
  done
  # ...all answered before team-a's silent lookup ended: none of them queued behind it
  silent_line=$(grep -n '"namespace":"team-a"' "$BROKER_LOG" | grep -F "$SAFE_SILENT_REG" | head -n1 | cut -d: -f1)
  good_lines=$(grep -n '"namespace":"team-b"' "$BROKER_LOG" | tail -n 5 | cut -d: -f1 | tr '\n' ' ')
  echo "team-b lines: $good_lines; team-a's silent lookup line: ${silent_line:-not yet logged}"
  for i in $good_lines; do
    [[ -z "$silent_line" || "$i" -lt "$silent_line" ]] || _fail_with "team-b's lookup waited for the silent host"
  done
  # the policy's answers for team-b, during the same test: found, and a typo rejected
  output=$(evaluate "$(pod team-b "$SAFE_REG/team/app:v1")")
  assert_allowed
  assert_warning_count 0
  output=$(evaluate "$(pod team-b "$SAFE_REG/team/app:v9")")
  assert_rejected
  assert_message_contains "$SAFE_REG/team/app:v9"
  # images naming an internal service by address: refused by the broker, connected to by no one
  private_req=$(pod team-a "127.0.0.1:${SAFE_LISTENER##*:}/x/app:v1" "10.0.3.7:10250/x/app:v1")
  output=$(evaluate "$private_req")
  assert_allowed
  [[ "$(connections listener)" == 0 ]] || _fail_with "the listener on 127.0.0.1 was connected to"
  jq -se --arg l "127.0.0.1:${SAFE_LISTENER##*:}" '[.[] | select(.msg == "lookup" and (.registry == $l or .registry == "10.0.3.7:10250"))]
    | length >= 2 and all(.[]; .outcome == "refusedDestination")' "$BROKER_LOG" >/dev/null ||
    _fail_with "not refused by the broker: $(grep -E '10\.0\.3\.7|127\.0\.0\.1:' "$BROKER_LOG")"
  # team-a's silent image: admitted, with a warning, never a denial
  wait "$silent_pid" || true
  output=$(cat "$silent_out")
  assert_allowed
  assert_warning_contains "app" "registry unreachable" "through the lookup broker"
}

@test "safe install: a namespace that did not opt in still gets its typo rejected" {
  local apilog before
  apilog="$(e2e_workdir)/registries/apiserver/apiserver.log"
  before=$(wc -l <"$apilog")
  output=$(evaluate "$(pod team-c "$SAFE_REG/team/app:v9")")
  assert_rejected
  assert_message_contains "$SAFE_REG/team/app:v9" "not found"
  broker_lookups_of team-c | jq -se 'length > 0 and all(.[]; .outcome == "notFound" and .credentials == "no pull secrets")' >/dev/null ||
    _fail_with "team-c's lookup: $(broker_lookups_of team-c)"
  # the broker read nothing of team-c: neither its Namespace nor a Secret
  ! tail -n +"$((before + 1))" "$apilog" | grep -q "/namespaces/team-c" ||
    _fail_with "the broker read team-c: $(tail -n +"$((before + 1))" "$apilog")"
  output=$(evaluate "$(pod team-c "$SAFE_REG/team/app:v1")")
  assert_allowed
  assert_warning_count 0
}

@test "safe install: a namespace that did not opt in gets docs/broker.md's warning for a credentialed lookup" {
  local wording
  wording=$(docs_wording "has not opted in")
  [[ -n "$wording" ]] || _fail_with "docs/broker.md gives no wording for a namespace that did not opt in"
  output=$(evaluate "$(pod team-c "$SAFE_REG/team/app:v9" - regcred)")
  assert_allowed
  assert_warning_contains "app" "${wording//NAMESPACE/team-c}"
}

@test "safe install: kube-system and the protected namespaces get docs/broker.md's warning, even for an anonymous image" {
  local wording ns
  wording=$(docs_wording "is never served")
  [[ -n "$wording" ]] || _fail_with "docs/broker.md gives no wording for a protected namespace"
  # kube-system (labelled, ignored), kubewarden (the default --protected-namespace), platform
  for ns in kube-system kubewarden platform; do
    output=$(evaluate "$(pod "$ns" "$SAFE_REG/team/app:v9")")
    assert_allowed
    assert_warning_contains "app" "${wording//NAMESPACE/$ns}"
  done
}
