#!/usr/bin/env bats
# The lookup broker with the node's image credential provider plugins
# (--image-credential-provider-config and --image-credential-provider-bin-dir, docs/broker.md):
# a real CredentialProviderConfig (a directory of two files) whose plugins are the tests' own (crates/test-credential-provider,
# speaking the kubelet's exec protocol), asked directly as the policy server asks the broker
# (sealed r4 names, the caller credential). A plugin that answers opens a private image with no
# pull secret; one that fails or hangs makes an answer uncertain (503), never absent (404);
# tokenAttributes plugins get a TokenRequest token (from the fake API server) for their
# audience and the ServiceAccount's annotations, and are not run without a required one;
# pull secrets and plugins are tried in the kubelet's order, either one opening the image; a
# plugin's answer is cached for its cacheDuration under its cacheKeyType. Plugins are shared
# fairly: a hung plugin is waited for once per HEAD-then-GET pair (its key silenced), another
# namespace's lookups go on while one namespace's run hangs, two concurrent lookups of one
# ServiceAccount run a cacheType Token plugin once; and a provider without tokenAttributes
# serves only the namespaces --provider-namespaces gives it (team-a, by its tier label; team-b
# is opted in but not given it). Real htpasswd docker-registry, images pushed with skopeo.
# Needs only the broker and the plugin binaries.

bats_require_minimum_version 1.5.0

# The broker's --lookup-timeout-ms: the time a hanging plugin's lookup is held to.
LOOKUP_TIMEOUT_MS=2500
# The audience the token plugin's tokenAttributes name, and its ServiceAccount annotations.
TOKEN_AUDIENCE=e2e-registry.example.test
ROLE_KEY=e2e.example.test/registry-role
TEAM_KEY=e2e.example.test/team
# The label of team-a that --provider-namespaces selects for the plugins without tokenAttributes.
TIER_LABEL=e2e.example.test/tier

# provider_bin: the tests' plugin binary (built with the broker, `make broker`).
provider_bin() {
  printf '%s\n' "${TEST_PROVIDER_BIN:-$REPO_ROOT/target/debug/test-credential-provider}"
}

# provider_yaml NAME MATCH-IMAGE [--tokens] [ARGS...]: one `providers` entry of the config: the
# plugin NAME (a copy of the tests' plugin in the bin directory) for images under MATCH-IMAGE,
# answering the registry's user (its password from the entry's env), recording its requests in
# $PROVIDER_RECORDS/NAME; --tokens adds tokenAttributes (--tokens-per-token: cacheType Token).
provider_yaml() {
  local name=$1 match=$2 tokens="" arg
  shift 2
  case "${1:-}" in
    --tokens) tokens=ServiceAccount; shift ;;
    --tokens-per-token) tokens=Token; shift ;;
  esac
  printf '%s\n' "  - name: $name" "    matchImages:" "      - \"$match\"" \
    "    defaultCacheDuration: \"0s\"" "    apiVersion: credentialprovider.kubelet.k8s.io/v1" \
    "    args:" "      - --record" "      - \"$PROVIDER_RECORDS/$name\"" \
    "      - --username" "      - \"$REG_AUTH_USER\""
  for arg in "$@"; do printf '      - "%s"\n' "$arg"; done
  printf '%s\n' "    env:" "      - name: TEST_PROVIDER_PASSWORD" "        value: \"$REG_AUTH_PASSWORD\""
  [[ -z "$tokens" ]] || printf '%s\n' "    tokenAttributes:" \
    "      serviceAccountTokenAudience: \"$TOKEN_AUDIENCE\"" "      requireServiceAccount: true" \
    "      requiredServiceAccountAnnotationKeys:" "        - \"$ROLE_KEY\"" \
    "      optionalServiceAccountAnnotationKeys:" "        - \"$TEAM_KEY\"" "      cacheType: $tokens"
}

setup_file() {
  load lib/common
  load lib/broker
  [[ -x "$(broker_bin)" && -x "$(provider_bin)" ]] || return 0
  [[ "$E2E_HOST" != kwctl ]] || return 0

  registry_start auth
  local image repo
  image=$(build_image provided)
  for repo in works fails hangs tokens cached-image cached-registry shared token-once; do
    push_image "$image" auth "$repo/app:v1"
  done
  push_image "$image" auth cached-image/other:v1
  push_image "$image" auth cached-registry/other:v1

  PROVIDER_RECORDS="$(e2e_workdir)/provider-records"
  local bin config name
  bin="$(e2e_workdir)/provider-bin"
  mkdir -p "$PROVIDER_RECORDS" "$bin"
  for name in works fails hangs tokens cached-image cached-registry shared token-once; do
    cp "$(provider_bin)" "$bin/$name"
    : >"$PROVIDER_RECORDS/$name"
  done
  # a directory of two config files, as a 1.34 kubelet reads one (lexical order, merged)
  config="$(e2e_workdir)/credential-providers.d"
  mkdir -p "$config"
  local header=("apiVersion: kubelet.config.k8s.io/v1" "kind: CredentialProviderConfig" "providers:")
  {
    printf '%s\n' "${header[@]}"
    provider_yaml works "$REG_AUTH/works"
    provider_yaml fails "$REG_AUTH/fails" --fail
    provider_yaml hangs "$REG_AUTH/hangs" --hang
  } >"$config/10-plain.yaml"
  {
    printf '%s\n' "${header[@]}"
    provider_yaml tokens "$REG_AUTH/tokens" --tokens
    provider_yaml cached-image "$REG_AUTH/cached-image" --cache-key-type Image --cache-duration 5m
    provider_yaml cached-registry "$REG_AUTH/cached-registry" --cache-key-type Registry --cache-duration 5m
    # one provider for both namespaces' images, hanging for those naming "slow"
    provider_yaml shared "$REG_AUTH/shared" --slow-image slow
    # every run takes a second, so that two concurrent lookups overlap
    provider_yaml token-once "$REG_AUTH/token-once" --tokens-per-token --slow-image "" --slow-ms 1000
  } >"$config/20-cached.yml"
  printf 'not a config\n' >"$config/README.md"

  local cluster
  cluster=$(write_cluster_dir broker-providers)
  {
    pull_secret_yaml team-a regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    pull_secret_yaml team-a wrong "$REG_AUTH" "$REG_AUTH_USER" "wrong-$REG_AUTH_PASSWORD"
    pull_secret_yaml team-b regcred "$REG_AUTH" "$REG_AUTH_USER" "$REG_AUTH_PASSWORD"
    # builder has the annotation the token plugin requires and the optional one; plain has
    # neither, and the pull secret; bare has neither and no pull secret
    printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: builder" \
      "  namespace: team-a" "  uid: 0b8f6c1e-e2e0-4b7a-9d3c-builder00001" "  annotations:" \
      "    $ROLE_KEY: puller" "    $TEAM_KEY: blue" "    e2e.example.test/unrelated: not-asked"
    printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: plain" \
      "  namespace: team-a" "  annotations:" "    $TEAM_KEY: green" "imagePullSecrets:" "  - name: regcred"
    printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" "  name: bare" \
      "  namespace: team-a"
    broker_namespace_yaml team-a
    printf '%s\n' "    $TIER_LABEL: gold"
    broker_token_binding_yaml team-a
    broker_namespace_yaml team-b
    broker_key_secret_yaml
  } | cluster_add "$cluster" 10-secrets.yaml
  apiserver_serve "$cluster" >/dev/null
  local api_port sources
  api_port=$(cat "$(e2e_workdir)/registries/apiserver/port")
  sources=$(write_sources_yaml broker-providers --insecure "$REG_AUTH")
  broker_start broker-providers --apiserver-port "$api_port" --sources "$sources" \
    --attempt-timeout-ms 1000 --lookup-timeout-ms "$LOOKUP_TIMEOUT_MS" \
    --image-credential-provider-config "$config" --image-credential-provider-bin-dir "$bin" \
    --provider-namespaces "works=$TIER_LABEL=gold;fails=$TIER_LABEL=gold;hangs=$TIER_LABEL=gold" \
    --provider-namespaces "cached-image=$TIER_LABEL=gold;cached-registry=$TIER_LABEL=gold;shared="
  export PROVIDER_RECORDS

  # the policy's end, on the stock policy-server when there is one: `use: all` routes every
  # image of a pod to the broker, a private one with no pull secret included
  if policy_server_bin >/dev/null && [[ -f "$POLICY_WASM" ]]; then
    local policies
    policies="$(e2e_workdir)/broker-providers-policies.yml"
    # `use: credentialed` routes only what needs the node's credentials: with the nodes'
    # providers in credentialProviders, an image a provider covers, pull secret or not
    local providers
    providers=$(jq -cn --arg m "$REG_AUTH/works" '{apiVersion: "kubelet.config.k8s.io/v1",
      kind: "CredentialProviderConfig", providers: [{name: "works", matchImages: [$m],
      defaultCacheDuration: "0s", apiVersion: "credentialprovider.kubelet.k8s.io/v1"}]}')
    broker_policies "$policies" \
      all "{\"lookupBroker\": {\"host\": \"$BROKER_ADDR\", \"use\": \"all\", \"keySecret\": $BROKER_KEY_SECRET}, \"timeBudgetMs\": 3000}" \
      credentialed "{\"lookupBroker\": {\"host\": \"$BROKER_ADDR\", \"use\": \"credentialed\", \"keySecret\": $BROKER_KEY_SECRET}, \"timeBudgetMs\": 3000, \"credentialProviders\": $providers}" \
      unconfigured "{\"lookupBroker\": {\"host\": \"$BROKER_ADDR\", \"use\": \"credentialed\", \"keySecret\": $BROKER_KEY_SECRET}, \"timeBudgetMs\": 3000}"
    broker_policy_server_start ps "$policies" \
      "$(write_docker_config broker-caller "$BROKER_ADDR" "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD")" \
      "$(write_sources_yaml broker-providers-ps --insecure "$REG_AUTH" --insecure "$BROKER_ADDR")" \
      "$(e2e_workdir)/registries/apiserver/kubeconfig"
  fi
}

# bare_pod_request TAG: an admission request for a Pod of team-a running works/app:TAG with no
# pull secret and the ServiceAccount "bare" (which has none): only a plugin can open it.
bare_pod_request() {
  local req
  req=$(request_with_images pod-create.json "app=$REG_AUTH/works/app:$1" sidecar.remove init-schema.remove)
  request_in_namespace "$req" team-a
  request_edit_pod_spec "$req" '.imagePullSecrets = [] | .serviceAccountName = "bare"'
  printf '%s\n' "$req"
}

teardown_file() { load lib/common; scenario_teardown_file; }

setup() {
  load lib/common
  load lib/broker
  require_broker
  [[ -x "$(provider_bin)" ]] || skip "no plugin binary at $(provider_bin): make broker"
}

# lookup CREDENTIALS REPO TAG: a GET (a HEAD with LOOKUP_HEAD=1) of REPO:TAG on the registry
# for a pod of $LOOKUP_NAMESPACE (team-a by default) through the broker, as the policy server
# asks it; prints "STATUS SECONDS", the body in $BATS_TEST_TMPDIR/body (kept in
# $BATS_TEST_TMPDIR/answers too, for the secret scan).
lookup() {
  local body="${LOOKUP_NAMESPACE:-team-a}/$1/d.${REG_AUTH/:/_}/$2"
  local -a head=()
  [[ -z "${LOOKUP_HEAD:-}" ]] || head=(-I)
  curl -s "${head[@]}" -o "$BATS_TEST_TMPDIR/body" -w '%{http_code} %{time_total}\n' --max-time 20 \
    -u "$BROKER_CALLER_USER:$BROKER_CALLER_PASSWORD" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "http://$BROKER_ADDR/v2/$(broker_seal "$body" "$3")/manifests/$3"
  cat "$BATS_TEST_TMPDIR/body" >>"$BATS_TEST_TMPDIR/answers"
}

# last_lookup REPO: the broker's last lookup line for REPO.
last_lookup() {
  jq -c --arg r "$1" 'select(.msg == "lookup" and .repository == $r)' "$BROKER_LOG" | tail -n 1
}

# expect_status STATUS: the lookup's answer ($output) has STATUS.
expect_status() {
  [[ "$output" == "$1 "* ]] || _fail_with "answered $output, not $1: $(cat "$BATS_TEST_TMPDIR/body"); $(cat "$BROKER_LOG")"
}

# records NAME: how many requests plugin NAME received.
records() { wc -l <"$PROVIDER_RECORDS/$1"; }

# no_secret_leaked: neither the plugin's password nor any token the plugins received is in
# the broker's log or its answers.
no_secret_leaked() {
  local token
  ! grep -qF -- "$REG_AUTH_PASSWORD" "$BROKER_LOG" "$BATS_TEST_TMPDIR/answers" ||
    _fail_with "the registry password is in the broker's log or an answer"
  while read -r token; do
    [[ -n "$token" ]] || continue
    ! grep -qF -- "$token" "$BROKER_LOG" "$BATS_TEST_TMPDIR/answers" ||
      _fail_with "a minted token is in the broker's log or an answer"
  done < <(jq -r '.serviceAccountToken // empty' "$PROVIDER_RECORDS"/*)
}

@test "broker providers: a private image is found with the plugin's credentials, no pull secret" {
  run -0 lookup n works/app v1
  expect_status 200
  jq -e '.schemaVersion == 2' "$BATS_TEST_TMPDIR/body"
  [[ "$(records works)" -ge 1 ]]
  jq -e --arg r "$REG_AUTH" '.image == "\($r)/works/app" and (has("serviceAccountToken") | not)' \
    <(tail -n 1 "$PROVIDER_RECORDS/works")
  last_lookup works/app | jq -e '.outcome == "found"'
  no_secret_leaked
}

@test "broker providers: a config directory of two files runs the plugins of both" {
  run -0 lookup n works/app v1
  expect_status 200
  run -0 lookup a.builder tokens/app v1
  expect_status 200
  # plugins answer with a cacheDuration of 0: each lookup ran its file's plugin
  [[ "$(records works)" -ge 1 && "$(records tokens)" -ge 1 ]]
}

@test "broker providers: a missing tag there is absent, a 404" {
  run -0 lookup n works/app v9
  expect_status 404
  last_lookup works/app | jq -e '.outcome != "found"'
  no_secret_leaked
}

@test "broker providers: a failing plugin leaves the answer uncertain (503), never absent" {
  local before
  before=$(records fails)
  run -0 lookup n fails/app v1
  expect_status 503
  last_lookup fails/app | jq -e '.reason | contains("credential provider fails")'
  # its key is silenced for team-a: answered at once, the plugin not run again
  run -0 lookup n fails/app v9
  expect_status 503
  (($(records fails) == before + 1)) || _fail_with "the plugin ran $(($(records fails) - before)) times"
  last_lookup fails/app | jq -e '.reason | contains("not run again yet")'
  no_secret_leaked
}

@test "broker providers: a hanging plugin gives a 503 within the lookup time" {
  run -0 lookup n hangs/app v9
  echo "$output"
  expect_status 503
  local took
  took=${output#* }
  # the lookup time, and a second for the connection and the answer's way back
  awk -v t="$took" -v limit="$LOOKUP_TIMEOUT_MS" 'BEGIN { exit !(t * 1000 <= limit + 1000) }' ||
    _fail_with "answered in ${took}s for a ${LOOKUP_TIMEOUT_MS} ms lookup time"
  [[ "$(records hangs)" -ge 1 ]]
  # the plugin was killed when the lookup gave up on it
  sleep 0.5
  ! pgrep -f "$(e2e_workdir)/provider-bin/hangs" >/dev/null || _fail_with "the hanging plugin is still running"
}

@test "broker providers: a tokenAttributes plugin gets a token for its audience and the annotations" {
  local api_log="$(e2e_workdir)/registries/apiserver/apiserver.log" before
  before=$(records tokens)
  run -0 lookup a.builder tokens/app v1
  expect_status 200
  (($(records tokens) == before + 1)) || _fail_with "the plugin ran $(($(records tokens) - before)) times"
  local request claims
  request=$(tail -n 1 "$PROVIDER_RECORDS/tokens")
  claims=$(jq -r '.serviceAccountToken | split(".")[1]' <<<"$request" | tr '_-' '/+' |
    awk '{ while (length($0) % 4) $0 = $0 "="; print }' | base64 -d)
  echo "$claims"
  jq -e --arg a "$TOKEN_AUDIENCE" '.aud == [$a] and .sub == "system:serviceaccount:team-a:builder"' <<<"$claims"
  # bound to the namespace's binding Secret: deleting it revokes the token (the fake API server
  # refuses an unbound TokenRequest, so a broker minting unbound tokens fails here)
  jq -e '."kubernetes.io".secret.name == "resolvable-images-broker-token-binding"' <<<"$claims"
  jq -e --arg role "$ROLE_KEY" --arg team "$TEAM_KEY" \
    '.serviceAccountAnnotations == {($role): "puller", ($team): "blue"}' <<<"$request"
  grep -qF "TokenRequest team-a/builder audiences=[\"$TOKEN_AUDIENCE\"] bound=Secret/resolvable-images-broker-token-binding" "$api_log" ||
    _fail_with "no bound TokenRequest for the audience in the API server's log: $(cat "$api_log")"
  no_secret_leaked
}

@test "broker providers: without a required annotation the token plugin is not run" {
  local before
  before=$(records tokens)
  # plain lacks the required annotation: its pull secret decides (found)
  run -0 lookup a.plain tokens/app v1
  expect_status 200
  # bare lacks it too and has no secret: anonymous, which the registry refuses
  run -0 lookup a.bare tokens/app v1
  expect_status 403
  (($(records tokens) == before)) || _fail_with "the plugin ran: $(tail -n 1 "$PROVIDER_RECORDS/tokens")"
  no_secret_leaked
}

@test "broker providers: a token plugin without a ServiceAccount to ask for is uncertain" {
  # a lookup naming pull secrets, not the pod's ServiceAccount: the kubelet would run the
  # plugin with a token the broker cannot mint, so its answer is not certain
  run -0 lookup n tokens/app v9
  expect_status 503
}

@test "broker providers: a wrong pull secret then a working plugin: found" {
  run -0 lookup s.wrong works/app v1
  expect_status 200
  run -0 lookup s.wrong works/app v9
  expect_status 404
  no_secret_leaked
}

@test "broker providers: a working pull secret then a failing plugin: found" {
  run -0 lookup s.regcred fails/app v1
  expect_status 200
  # the tag missing for the secret, the plugin failing: not certain
  run -0 lookup s.regcred fails/app v9
  [[ "$output" != "404 "* ]] || _fail_with "a failing plugin's lookup was absent"
  no_secret_leaked
}

@test "broker providers: an Image-keyed answer is reused for that image only, within cacheDuration" {
  local before
  before=$(records cached-image)
  run -0 lookup n cached-image/app v1
  expect_status 200
  run -0 lookup n cached-image/app v9
  expect_status 404
  (($(records cached-image) == before + 1)) || _fail_with "the plugin ran $(($(records cached-image) - before)) times for one image"
  run -0 lookup n cached-image/other v1
  expect_status 200
  (($(records cached-image) == before + 2)) || _fail_with "another image reused the Image-keyed answer"
}

@test "broker providers: a Registry-keyed answer is reused for every image of the registry" {
  local before
  before=$(records cached-registry)
  run -0 lookup n cached-registry/app v1
  expect_status 200
  run -0 lookup n cached-registry/other v1
  expect_status 200
  (($(records cached-registry) == before + 1)) || _fail_with "the plugin ran $(($(records cached-registry) - before)) times for one registry"
}

# records_above NAME COUNT: plugin NAME received more than COUNT requests.
records_above() { (($(records "$1") > $2)); }

@test "broker providers: a hung plugin is waited for once per HEAD-then-GET pair" {
  local before
  before=$(records hangs)
  LOOKUP_HEAD=1 run -0 lookup n hangs/pair v1
  expect_status 503
  # the GET of the pair: the key is silenced for team-a, the plugin not run again
  run -0 lookup n hangs/pair v1
  expect_status 503
  (($(records hangs) == before + 1)) || _fail_with "the plugin ran $(($(records hangs) - before)) times"
  last_lookup hangs/pair | jq -e --argjson limit "$LOOKUP_TIMEOUT_MS" \
    '(.reason | contains("not run again yet")) and .ms < $limit'
  no_secret_leaked
}

@test "broker providers: another namespace's lookups go on while one namespace's run hangs" {
  local before slow
  before=$(records shared)
  # one provider for both: team-a's image hangs it until the lookup time
  LOOKUP_NAMESPACE=team-a lookup n shared/slow-app v1 >"$BATS_TEST_TMPDIR/slow" &
  slow=$!
  wait_until 10 records_above shared "$before" || _fail_with "the slow run never started"
  LOOKUP_NAMESPACE=team-b run -0 lookup n shared/app v1
  expect_status 200
  LOOKUP_NAMESPACE=team-b run -0 lookup n shared/app v1
  expect_status 200
  # answered while team-a's run still hangs: not queued behind it
  kill -0 "$slow" 2>/dev/null || _fail_with "team-a's lookup ended first: $(cat "$BATS_TEST_TMPDIR/slow")"
  wait "$slow"
  [[ "$(cat "$BATS_TEST_TMPDIR/slow")" == "503 "* ]] || _fail_with "team-a's lookup: $(cat "$BATS_TEST_TMPDIR/slow")"
  no_secret_leaked
}

@test "broker providers: two concurrent lookups of one ServiceAccount run a cacheType Token plugin once" {
  local before first second
  before=$(records token-once)
  lookup a.builder token-once/app v1 >"$BATS_TEST_TMPDIR/first" &
  first=$!
  lookup a.builder token-once/app v1 >"$BATS_TEST_TMPDIR/second" &
  second=$!
  wait "$first"
  wait "$second"
  [[ "$(cat "$BATS_TEST_TMPDIR/first")" == "200 "* && "$(cat "$BATS_TEST_TMPDIR/second")" == "200 "* ]] ||
    _fail_with "answered $(cat "$BATS_TEST_TMPDIR/first") and $(cat "$BATS_TEST_TMPDIR/second")"
  (($(records token-once) == before + 1)) || _fail_with "the plugin ran $(($(records token-once) - before)) times"
  jq -e '.serviceAccountToken | length > 0' <(tail -n 1 "$PROVIDER_RECORDS/token-once")
  no_secret_leaked
}

@test "broker providers: a provider limited to team-a is not run for team-b, whose answer is uncertain" {
  local before
  before=$(records works)
  LOOKUP_NAMESPACE=team-b run -0 lookup n works/app v1
  expect_status 503
  LOOKUP_NAMESPACE=team-b run -0 lookup n works/app v9
  expect_status 503
  # the pull secret's definitive 404, and the provider the node would run not run: uncertain
  LOOKUP_NAMESPACE=team-b run -0 lookup s.regcred works/app v9
  expect_status 503
  LOOKUP_NAMESPACE=team-b run -0 lookup s.regcred works/app v1
  expect_status 200
  (($(records works) == before)) || _fail_with "the plugin ran for team-b: $(tail -n 1 "$PROVIDER_RECORDS/works")"
  jq -se '[.[] | select(.msg == "lookup" and .repository == "works/app" and .namespace == "team-b")]
    | (.[:3] | all(.reason | contains("not run for namespace team-b")))
      and (.[2].attempts | fromjson | index("notFound") != null)' "$BROKER_LOG" ||
    _fail_with "team-b's lookups: $(grep team-b "$BROKER_LOG")"
  run -0 lookup n works/app v1
  expect_status 200
  (($(records works) == before + 1)) || _fail_with "the plugin did not run for team-a"
  no_secret_leaked
}

# hanging_plugin_settings: the policy's settings of deploy/policy-server.yaml, its broker host and
# key Secret replaced by this suite's, and the nodes' provider `hangs` in credentialProviders, as
# a user running plugins pastes them.
hanging_plugin_settings() {
  local providers
  providers=$(jq -cn --arg m "$REG_AUTH/hangs" '{apiVersion: "kubelet.config.k8s.io/v1",
    kind: "CredentialProviderConfig", providers: [{name: "hangs", matchImages: [$m],
    defaultCacheDuration: "0s", apiVersion: "credentialprovider.kubelet.k8s.io/v1"}]}')
  deploy_settings "$BROKER_ADDR" | jq -c --argjson key "$BROKER_KEY_SECRET" --argjson providers "$providers" \
    '.lookupBroker.keySecret = $key | .credentialProviders = $providers'
}

# deploy_flag NAME: the value of the broker's --NAME in deploy/broker.yaml (a time-out).
deploy_flag() { deploy_broker_flags | sed -n "s/^--$1=//p" | head -n 1; }

# deploy_broker_start NAME: a second broker NAME, run with deploy/broker.yaml's time-outs and the
# suite's plugins (hangs for team-a); sets DEPLOY_EVAL_S, the evaluation time-out deploy/ sets
# (else the policy server's default, 2 s).
deploy_broker_start() {
  local lookup_ms attempt_ms
  DEPLOY_EVAL_S=$(deploy_policy_spec | jq '.timeoutEvalSeconds // 2')
  lookup_ms=$(deploy_flag lookup-timeout-ms)
  attempt_ms=$(deploy_flag attempt-timeout-ms)
  [[ -n "$lookup_ms" && -n "$attempt_ms" ]] || _fail_with "no time-outs in deploy/broker.yaml"
  broker_start "$1" --apiserver-port "$(cat "$(e2e_workdir)/registries/apiserver/port")" \
    --sources "$(write_sources_yaml broker-providers --insecure "$REG_AUTH")" \
    --attempt-timeout-ms "$attempt_ms" --lookup-timeout-ms "$lookup_ms" \
    --image-credential-provider-config "$(e2e_workdir)/credential-providers.d" \
    --image-credential-provider-bin-dir "$(e2e_workdir)/provider-bin" \
    --provider-namespaces "hangs=$TIER_LABEL=gold"
}

# hung_pod_request REPO: bare_pod_request's Pod running REPO:v1, which the plugin hangs for.
hung_pod_request() {
  local req
  req=$(bare_pod_request v1)
  jq --arg i "$REG_AUTH/$1:v1" '.request.object.spec.containers[0].image = $i' "$req" >"$req.tmp"
  mv "$req.tmp" "$req"
  printf '%s\n' "$req"
}

# expect_one_run_per_pair REPO BEFORE LOOKUPS: the broker was asked LOOKUPS times (a HEAD, then
# a GET when the client asks one after a 503) and the plugin run once since BEFORE: the GET
# answered at once, and the lookups' time in the broker within DEPLOY_EVAL_S.
expect_one_run_per_pair() {
  (($(records hangs) == $2 + 1)) || _fail_with "the plugin ran $(($(records hangs) - $2)) times"
  jq -se --arg repo "$1" --argjson n "$3" --argjson limit "$((DEPLOY_EVAL_S * 1000))" '
    [.[] | select(.msg == "lookup" and .repository == $repo)] as $pair
    | ($pair | length) == $n and ($pair | map(.status) | all(. == 503))
      and ($pair[1:] | all(.reason | contains("not run again yet"))) and ($pair | map(.ms) | add) < $limit' \
    "$BROKER_LOG" || _fail_with "the broker's lookups: $(grep -F "$1" "$BROKER_LOG")"
}

@test "broker providers: on the test host, a plugin that never answers: admitted with a warning within the evaluation time-out" {
  skip_on_kwctl "the test host's own registry client asks the broker"
  require_host
  deploy_broker_start broker-providers-deploy
  local before req
  before=$(records hangs)
  req=$(hung_pod_request hangs/host-pair)
  run --separate-stderr policy_run "$req" --settings-json "$(hanging_plugin_settings)" \
    --cluster-dir "$(e2e_workdir)/cluster/broker-providers" \
    --docker-config-json-path "$(write_docker_config broker-caller-host "$BROKER_ADDR" "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD")" \
    --sources-path "$(write_sources_yaml broker-providers-host --insecure "$REG_AUTH" --insecure "$BROKER_ADDR")"
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "$REG_AUTH/hangs/host-pair:v1"
  expect_one_run_per_pair hangs/host-pair "$before" 2
  no_secret_leaked
}

@test "broker providers: on the policy-server, a plugin that never answers: admitted with a warning within the evaluation time-out" {
  policy_server_bin >/dev/null ||
    skip "no policy-server (set POLICY_SERVER, or put policy-server on PATH): the test host case above runs instead"
  deploy_broker_start broker-providers-deploy-ps
  local policies="$(e2e_workdir)/broker-providers-deploy-policies.yml" before req
  broker_policies "$policies" deploy "$(hanging_plugin_settings)"
  jq --argjson t "$DEPLOY_EVAL_S" '.deploy.timeoutEvalSeconds = $t' "$policies" >"$policies.tmp"
  mv "$policies.tmp" "$policies"
  broker_policy_server_start ps-deploy "$policies" \
    "$(write_docker_config broker-caller-deploy "$BROKER_ADDR" "$BROKER_CALLER_USER" "$BROKER_CALLER_PASSWORD")" \
    "$(write_sources_yaml broker-providers-ps-deploy --insecure "$REG_AUTH" --insecure "$BROKER_ADDR")" \
    "$(e2e_workdir)/registries/apiserver/kubeconfig"
  before=$(records hangs)
  req=$(hung_pod_request hangs/ps-pair)
  output=$(broker_validate ps-deploy deploy "$req")
  # never a 500 ("Policy execution interrupted") nor a denial
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "$REG_AUTH/hangs/ps-pair:v1"
  local asked
  asked=$(jq -s '[.[] | select(.msg == "lookup" and .repository == "hangs/ps-pair")] | length' "$BROKER_LOG")
  ((asked == 1 || asked == 2)) || _fail_with "the broker was asked $asked times"
  expect_one_run_per_pair hangs/ps-pair "$before" "$asked"
  no_secret_leaked
}

@test "broker providers: the policy on the policy-server finds a pod's private image through a plugin" {
  policy_server_bin >/dev/null ||
    skip "no policy-server (set POLICY_SERVER, or put policy-server on PATH): the policy's end needs the real one"
  local req
  # no pull secret anywhere: only the plugin's credential opens the image
  req=$(bare_pod_request v1)
  output=$(broker_validate ps all "$req")
  assert_allowed
  assert_warning_count 0
  broker_lookups_of team-a | jq -se 'any(.[]; .repository == "works/app" and .outcome == "found")' >/dev/null ||
    _fail_with "the broker did not find it: $(cat "$BROKER_LOG")"
  # a missing tag there is denied as absent, naming the real registry
  req=$(bare_pod_request v9)
  output=$(broker_validate ps all "$req")
  assert_rejected
  assert_message_contains "$REG_AUTH/works/app:v9"
  [[ "$output" != *"$BROKER_ADDR"* && "$output" != *"r4/"* ]] || _fail_with "the broker leaked into a message"
  [[ "$output" != *"$REG_AUTH_PASSWORD"* ]] || _fail_with "the registry password is in the answer"
}

@test "broker providers: with credentialProviders, use: credentialed sends a provider's image to the broker" {
  policy_server_bin >/dev/null ||
    skip "no policy-server (set POLICY_SERVER, or put policy-server on PATH): the policy's end needs the real one"
  local req
  # no pull secret: without the providers in its settings the policy looks it up itself,
  # anonymously, and can only warn; with them, the broker's plugin opens it
  req=$(bare_pod_request v1)
  output=$(broker_validate ps unconfigured "$req")
  assert_allowed
  assert_warning_count 1
  assert_warning_contains "$REG_AUTH/works/app:v1"
  output=$(broker_validate ps credentialed "$req")
  assert_allowed
  assert_warning_count 0
  # a missing tag behind the provider: the broker's 404 with the plugin's credential is certain
  req=$(bare_pod_request v9)
  output=$(broker_validate ps credentialed "$req")
  assert_rejected
  assert_message_contains "container \"app\"" "$REG_AUTH/works/app:v9"
  broker_lookups_of team-a | jq -se 'any(.[]; .repository == "works/app" and .reference == "v9" and .outcome == "notFound")' >/dev/null ||
    _fail_with "the broker did not look v9 up: $(cat "$BROKER_LOG")"
  [[ "$output" != *"$BROKER_ADDR"* && "$output" != *"r4/"* ]] || _fail_with "the broker leaked into a message"
}
