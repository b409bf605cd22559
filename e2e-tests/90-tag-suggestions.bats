#!/usr/bin/env bats
# "Did you mean": a rejection through the lookup broker names the tags the repository has that
# are nearest the one asked (docs/broker.md). Runs on the stock policy-server when one is given
# ($POLICY_SERVER, else on PATH), on the test host otherwise (both ask HEAD, then GET for a
# 404's body), with the real broker, against real registries (docker-registry) and the
# per-user fake for a listing refused (403), one that hangs and one holding names that are not
# tags.

bats_require_minimum_version 1.5.0

# The broker's time-outs in this suite: a listing is bounded as an attempt is.
ATTEMPT_MS=1500
LOOKUP_MS=4000

setup_file() {
  load lib/common
  load lib/per_user_registry
  load lib/broker
  [[ "$E2E_HOST" != kwctl ]] || return 0
  host_ready || return 0
  [[ -x "$(broker_bin)" ]] || return 0

  registry_start anon
  registry_start auth
  registry_start auth auth2
  local image
  image=$(build_image suggestions)
  push_image "$image" anon team/app:v1.2.3
  push_image "$image" anon team/app:v1.2.31
  push_image "$image" anon library/nginx:1.25.5
  push_image "$image" anon library/nginx:1.25-alpine
  push_image "$image" anon big/app:1.0.0
  tags_in_storage anon big/app 1.0.0 1999
  push_image "$image" auth private/app:v2.0.1
  push_image "$image" auth shared/app:1.0.1
  push_image "$image" auth2 shared/app:1.0.2
  # alice reads team/app's manifests but may not list its tags; bob's listing hangs; carol's
  # holds names no reference can carry
  local config
  config="$(e2e_workdir)/pur-config.json"
  jq -n --arg a "$(pur_user alice)" --arg ap "$(pur_password alice)" \
    --arg b "$(pur_user bob)" --arg bp "$(pur_password bob)" \
    --arg c "$(pur_user carol)" --arg cp "$(pur_password carol)" '{
      images: ["team/app:v1.2.3", "slow/app:v1.2.3", "odd/app:v1.2.3"],
      users: {
        ($a): {password: $ap, sees: ["team/app"], tags: 403},
        ($b): {password: $bp, sees: ["slow/app"], tags: "hang"},
        ($c): {password: $cp, sees: ["odd/app"], extra_tags: ["-v1.2.31", "v1.2.3x!", "v1.2.30/../x"]}},
      anonymous: {sees: [], otherwise: 401}}' >"$config"
  per_user_registry_start_config pur "$config"

  SUGGEST_CLUSTER=$(write_cluster_dir suggestions)
  {
    pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    pull_secret_yaml team-b regcred2 "$REG_AUTH2" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    local user
    for user in alice bob carol; do
      pull_secret_yaml team-a "pur-$user" "$REG_PUR" "$(pur_user "$user")" "$(pur_password "$user")"
    done
    broker_namespace_yaml team-a
    broker_namespace_yaml team-b
    broker_key_secret_yaml
  } | cluster_add "$SUGGEST_CLUSTER" 10-secrets.yaml
  local kubeconfig
  kubeconfig=$(apiserver_serve "$SUGGEST_CLUSTER")
  broker_start broker --apiserver-port "$(cat "$(e2e_workdir)/registries/apiserver/port")" \
    --sources "$(write_sources_yaml upstream --insecure "$REG_ANON" --insecure "$REG_AUTH" \
      --insecure "$REG_AUTH2" --insecure "$REG_PUR")" \
    --attempt-timeout-ms "$ATTEMPT_MS" --lookup-timeout-ms "$LOOKUP_MS"
  SUGGEST_CALLER=$(write_docker_config caller "$BROKER_ADDR" "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD")
  SUGGEST_SOURCES=$(write_sources_yaml host --insecure "$BROKER_ADDR" --insecure "$REG_ANON")
  SUGGEST_SETTINGS=$(jq -cn --arg b "$BROKER_ADDR" --argjson k "$BROKER_KEY_SECRET" \
    '{lookupBroker: {host: $b, use: "all", keySecret: $k}, timeBudgetMs: 8000}')
  SUGGEST_ENGINE=test-host
  if policy_server_bin >/dev/null 2>&1; then
    local policies
    policies="$(e2e_workdir)/suggest-policies.yml"
    broker_policies "$policies" suggest "$SUGGEST_SETTINGS" direct '{"timeBudgetMs": 8000}'
    broker_policy_server_start ps "$policies" "$SUGGEST_CALLER" "$SUGGEST_SOURCES" "$kubeconfig"
    SUGGEST_ENGINE=policy-server
  fi
  export SUGGEST_CLUSTER SUGGEST_CALLER SUGGEST_SOURCES SUGGEST_SETTINGS SUGGEST_ENGINE
}

teardown_file() { load lib/common; registry_stop_all; }

setup() {
  load lib/common
  load lib/per_user_registry
  load lib/broker
  require_host
  require_broker
}

# suggest_run IMAGE [SECRET] [NAMESPACE]: the policy's answer to a Pod in NAMESPACE (default
# team-a) running IMAGE with the pull secret SECRET, through the broker.
suggest_run() {
  local req
  req=$(request_with_images pod-create.json "app=$1" sidecar.remove init-schema.remove)
  [[ -z "${2:-}" ]] || request_edit_pod_spec "$req" ".imagePullSecrets = [{name: \"$2\"}]"
  [[ -z "${3:-}" ]] || request_in_namespace "$req" "$3"
  decide "$req" suggest
}

# decide REQUEST POLICY: the answer of the policy with the broker (`suggest`) or without it
# (`direct`), on the policy-server when one runs, else on the test host.
decide() {
  if [[ "$SUGGEST_ENGINE" == policy-server ]]; then
    broker_validate ps "$2" "$1"
  elif [[ "$2" == suggest ]]; then
    policy_run "$1" --settings-json "$SUGGEST_SETTINGS" --cluster-dir "$SUGGEST_CLUSTER" \
      --docker-config-json-path "$SUGGEST_CALLER" --sources-path "$SUGGEST_SOURCES"
  else
    policy_run "$1" --settings-json '{"timeBudgetMs": 8000}' --cluster-dir "$SUGGEST_CLUSTER" \
      --sources-path "$SUGGEST_SOURCES"
  fi
}

# broker_get_of REPOSITORY TAG: the broker's log line of the last GET of REPOSITORY:TAG.
broker_get_of() {
  jq -c --arg r "$1" --arg t "$2" \
    'select(.msg == "lookup" and .method == "GET" and .repository == $r and .reference == $t)' \
    "$BROKER_LOG" | tail -n 1
}

@test "suggestions: app:v1.2.30 names v1.2.31 and v1.2.3" {
  run -0 --separate-stderr suggest_run "$REG_ANON/team/app:v1.2.30"
  assert_rejected
  assert_message_contains "not found on registry $REG_ANON (did you mean v1.2.31 or v1.2.3?)"
  assert_message_lacks "nearest tags"
}

@test "suggestions: nginx:1.25 names 1.25.5 and 1.25-alpine" {
  run -0 --separate-stderr suggest_run "$REG_ANON/library/nginx:1.25"
  assert_rejected
  assert_message_contains "(did you mean 1.25.5 or 1.25-alpine?)"
}

@test "suggestions: a private repository through the namespace's pull secret" {
  run -0 --separate-stderr suggest_run "$REG_AUTH/private/app:v2.0" regcred
  assert_rejected
  assert_message_contains "not found on registry $REG_AUTH (did you mean v2.0.1?)"
}

@test "suggestions: a credential refused the listing (403) gets the rejection without them" {
  run -0 --separate-stderr suggest_run "$REG_PUR/team/app:v1.2.30" pur-alice
  assert_rejected
  assert_message_contains "not found on registry $REG_PUR"
  assert_message_lacks "did you mean" "v1.2.3?"
  per_user_registry_log pur | grep -q "^$(pur_user alice) GET /v2/team/app/tags/list -> 403" ||
    _fail_with "the listing was never asked: $(per_user_registry_log pur)"
}

@test "suggestions: 2,000 tags listed within the lookup's deadline" {
  run -0 --separate-stderr suggest_run "$REG_ANON/big/app:1.0.19999"
  assert_rejected
  assert_message_contains "(did you mean 1.0.1999, 1.0.1998 or 1.0.1997?)"
  local line
  line=$(broker_get_of big/app 1.0.19999)
  [[ "$(jq '.suggestedTags' <<<"$line")" == 3 ]] || _fail_with "broker: $line"
  (($(jq '.ms' <<<"$line") < LOOKUP_MS)) || _fail_with "past the lookup's deadline: $line"
}

@test "suggestions: a registry that hangs on the listing gets the rejection on time, without them" {
  run -0 --separate-stderr suggest_run "$REG_PUR/slow/app:v1.2.30" pur-bob
  assert_rejected
  assert_message_contains "not found on registry $REG_PUR"
  assert_message_lacks "did you mean"
  local line
  line=$(broker_get_of slow/app v1.2.30)
  [[ "$(jq -r '.outcome' <<<"$line")" == notFound ]] || _fail_with "broker: $line"
  (($(jq '.ms' <<<"$line") < LOOKUP_MS)) || _fail_with "past the lookup's deadline: $line"
}

@test "suggestions: a name that is not a tag is never repeated, and a repository is listed once" {
  run -0 --separate-stderr suggest_run "$REG_PUR/odd/app:v1.2.30" pur-carol
  assert_rejected
  assert_message_contains "(did you mean v1.2.3?)"
  assert_message_lacks "-v1.2.31" "v1.2.3x!" "../x"
  # a second Pod with the same typo: HEAD and GET again, the listing from the cache
  run -0 --separate-stderr suggest_run "$REG_PUR/odd/app:v1.2.30" pur-carol
  assert_message_contains "(did you mean v1.2.3?)"
  local lists
  lists=$(per_user_registry_log pur | grep -c " GET /v2/odd/app/tags/list ")
  [[ "$lists" == 1 ]] || _fail_with "listed $lists times: $(per_user_registry_log pur)"
  [[ "$(per_user_registry_log pur | grep -c " HEAD /v2/odd/app/manifests/v1.2.30 ")" -ge 2 ]] ||
    _fail_with "not asked HEAD then GET twice: $(per_user_registry_log pur)"
}

@test "suggestions: two namespaces, two secrets, one repository name on two registries never leak" {
  run -0 --separate-stderr suggest_run "$REG_AUTH/shared/app:1.0" regcred team-a
  assert_message_contains "(did you mean 1.0.1?)"
  assert_message_lacks "1.0.2"
  run -0 --separate-stderr suggest_run "$REG_AUTH2/shared/app:1.0" regcred2 team-b
  assert_message_contains "(did you mean 1.0.2?)"
  assert_message_lacks "1.0.1"
  # team-b has no secret for the first registry: refused, and team-a's listing stays team-a's
  run -0 --separate-stderr suggest_run "$REG_AUTH/shared/app:1.0" regcred2 team-b
  [[ "$output" != *1.0.1* ]] || _fail_with "team-a's tag in team-b's answer"
  assert_warning_contains "not authorized on registry $REG_AUTH"
}

@test "suggestions: a dryRun Deployment gets the same message" {
  local req dry
  req=$(request_with_images deployment-create.json "app=$REG_ANON/team/app:v1.2.30" sidecar.remove init-schema.remove)
  dry="$req.dry"
  jq '.request.dryRun = true' "$req" >"$dry"
  run -0 --separate-stderr decide "$req" suggest
  assert_rejected
  assert_message_contains "(did you mean v1.2.31 or v1.2.3?)"
  local plain=$output
  run -0 --separate-stderr decide "$dry" suggest
  assert_rejected
  [[ "$(response_summary "$output")" == "$(response_summary "$plain")" ]] ||
    _fail_with "dryRun changed the answer: $(response_summary "$plain")"
}

@test "suggestions: without the broker the message is unchanged" {
  run -0 --separate-stderr decide \
    "$(request_with_images pod-create.json "app=$REG_ANON/team/app:v1.2.30" sidecar.remove init-schema.remove)" direct
  assert_rejected
  assert_message_contains "not found on registry $REG_ANON: "
  assert_message_lacks "did you mean"
}
