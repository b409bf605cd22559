# shellcheck shell=bash
# Admission requests and host/policy configuration for the e2e scenarios, derived from the
# unit fixtures in tests/fixtures/requests so both test levels share one source of truth.

# The jq helpers: the pod spec of any supported object, and per-container edits on it.
# shellcheck disable=SC2016 # jq program, not shell
_JQ_PODSPEC='
def podspec_path:
  if .kind == "Pod" then ["spec"]
  elif .kind == "CronJob" then ["spec", "jobTemplate", "spec", "template", "spec"]
  else ["spec", "template", "spec"] end;
# edit_container(name; f): applies f to the container called name in initContainers,
# containers and ephemeralContainers of the pod spec of this object.
def edit_container($name; f):
  if . == null then null else
  podspec_path as $p
  | setpath($p; getpath($p)
      | reduce ("initContainers", "containers", "ephemeralContainers") as $k (.;
          if has($k) then .[$k] |= map(if .name == $name then f else . end) else . end))
  end;
def container_names:
  if . == null then [] else
  podspec_path as $p | getpath($p) | [(.initContainers, .containers, .ephemeralContainers) // [] | .[].name] end;
'

# The edits of request_with_images, applied in order by one jq run: $ARGS.positional holds
# them four values each (which: both|object|oldObject, container name, op: image|pull|remove,
# value). A container found in none of the objects edited is an error, so a typo cannot turn a
# scenario into a test of nothing.
# shellcheck disable=SC2016 # jq program, not shell
_JQ_EDITS='
def targets($w): if $w == "both" then ["object", "oldObject"] else [$w] end;
def apply($op; $v):
  if $op == "image" then .image = $v elif $op == "pull" then .imagePullPolicy = $v else empty end;
reduce ($ARGS.positional | range(0; length; 4) as $i | .[$i:$i + 4]) as [$w, $n, $op, $v] (.;
  if [.request[targets($w)[]] | select(. != null) | container_names | index($n)] | any(. != null)
  then reduce targets($w)[] as $t (.; .request[$t] |= edit_container($n; apply($op; $v)))
  else error("no container \u0027\($n)\u0027 in the \($w)") end)
'

# request_with_images FIXTURE [EDIT...]: copies tests/fixtures/requests/FIXTURE to a new file
# in $E2E_WORK/requests and prints its path. Each EDIT changes one container, in both object
# and oldObject unless prefixed with `object:` or `oldObject:`:
#   NAME=IMAGE              sets the image
#   NAME.pull=POLICY        sets imagePullPolicy (Always|IfNotPresent|Never)
#   NAME.remove             removes the container
# e.g. request_with_images deployment-create.json app=127.0.0.1:5000/test/app:v1 sidecar.remove
request_with_images() {
  local fixture=$1 out edit which lhs
  shift
  [[ -f "$FIXTURES_DIR/$fixture" ]] || { echo "no fixture $fixture" >&2; return 1; }
  mkdir -p "$(e2e_workdir)/requests"
  out=$(mktemp "$(e2e_workdir)/requests/${fixture%.json}.XXXXXX")
  local -a edits=()
  for edit in "$@"; do
    which=both
    case "$edit" in
      object:* | oldObject:*) which=${edit%%:*}; edit=${edit#*:} ;;
    esac
    lhs=${edit%%=*}
    case "$edit" in
      *.pull=*) edits+=("$which" "${lhs%%.*}" pull "${edit#*=}") ;;
      *.remove) edits+=("$which" "${edit%.remove}" remove "") ;;
      *=*) edits+=("$which" "$lhs" image "${edit#*=}") ;;
      *) echo "request_with_images: cannot read edit '$edit'" >&2; rm -f "$out"; return 1 ;;
    esac
  done
  if ((${#edits[@]} == 0)); then
    cp "$FIXTURES_DIR/$fixture" "$out"
  elif ! jq "$_JQ_PODSPEC $_JQ_EDITS" "$FIXTURES_DIR/$fixture" --args "${edits[@]}" >"$out"; then
    echo "request_with_images: edits of $fixture failed (above)" >&2
    rm -f "$out"
    return 1
  fi
  printf '%s\n' "$out"
}

# request_in_namespace FILE NAMESPACE: moves the request (and its objects) to NAMESPACE, in place.
request_in_namespace() {
  local file=$1 ns=$2
  jq --arg ns "$ns" '.request.namespace = $ns
    | .request.object |= (if . == null then null else .metadata.namespace = $ns end)
    | .request.oldObject |= (if . == null then null else .metadata.namespace = $ns end)' "$file" >"$file.tmp"
  mv "$file.tmp" "$file"
}

# request_images FILE: "container<TAB>image<TAB>pullPolicy" for the object of FILE (debugging
# and sanity checks in tests).
request_images() {
  jq -r "$_JQ_PODSPEC"' .request.object | select(. != null) | getpath(podspec_path)
    | (.initContainers, .containers, .ephemeralContainers) // [] | .[] | [.name, .image, .imagePullPolicy] | @tsv' "$1"
}

# write_settings NAME JSON: writes policy settings to $E2E_WORK/settings/NAME.json and prints
# the path (for settings that depend on runtime ports; fixed ones live in e2e-tests/scenarios).
write_settings() {
  local dir
  dir="$(e2e_workdir)/settings"
  mkdir -p "$dir"
  jq . <<<"$2" >"$dir/$1.json"
  printf '%s\n' "$dir/$1.json"
}

# write_sources_yaml NAME [--insecure HOST:PORT]... [--ca HOST:PORT PEM]...: the host's
# sources.yaml (insecure_sources, source_authorities) in $E2E_WORK/sources/NAME.yaml.
write_sources_yaml() {
  local name=$1 dir file
  shift
  dir="$(e2e_workdir)/sources"
  mkdir -p "$dir"
  file="$dir/$name.yaml"
  local -a insecure=() cas=()
  while (($#)); do
    case "$1" in
      --insecure) insecure+=("$2"); shift 2 ;;
      --ca) cas+=("$2" "$3"); shift 3 ;;
      *) echo "write_sources_yaml: unknown option $1" >&2; return 1 ;;
    esac
  done
  {
    local h i
    if ((${#insecure[@]})); then
      echo "insecure_sources:"
      for h in "${insecure[@]}"; do printf '  - "%s"\n' "$h"; done
    else
      echo "insecure_sources: []"
    fi
    if ((${#cas[@]})); then
      echo "source_authorities:"
      for ((i = 0; i < ${#cas[@]}; i += 2)); do
        printf '  "%s":\n    - type: Path\n      path: "%s"\n' "${cas[i]}" "${cas[i + 1]}"
      done
    else
      echo "source_authorities: {}"
    fi
  } >"$file"
  printf '%s\n' "$file"
}

# write_docker_config NAME HOST:PORT USER PASSWORD: a directory with a Docker config.json
# holding Basic credentials for HOST:PORT (what --docker-config-json-path takes); prints it.
write_docker_config() {
  local dir
  dir="$(e2e_workdir)/docker-config/$1"
  mkdir -p "$dir"
  jq -n --arg h "$2" --arg a "$(printf '%s:%s' "$3" "$4" | base64 -w0)" '{auths: {($h): {auth: $a}}}' >"$dir/config.json"
  printf '%s\n' "$dir"
}

# write_cluster_dir NAME: a --cluster-dir standing for the cluster the requests come from:
# namespaces team-a and team-b, each with its `default` ServiceAccount (no imagePullSecrets),
# in $E2E_WORK/cluster/NAME; prints it. Add objects with cluster_add.
write_cluster_dir() {
  local dir ns
  dir="$(e2e_workdir)/cluster/$1"
  mkdir -p "$dir"
  for ns in team-a team-b; do
    printf '%s\n' "---" "apiVersion: v1" "kind: ServiceAccount" "metadata:" \
      "  name: default" "  namespace: $ns"
  done >"$dir/00-service-accounts.yaml"
  printf '%s\n' "$dir"
}

# cluster_add DIR FILE-NAME: writes the YAML on stdin as DIR/FILE-NAME (one more object file).
cluster_add() {
  cat >"$1/$2"
}

# pull_secret_yaml NAMESPACE NAME HOST:PORT USER PASSWORD: a kubernetes.io/dockerconfigjson
# Secret with Basic credentials for HOST:PORT, as `kubectl create secret docker-registry` makes.
pull_secret_yaml() {
  local config
  config=$(jq -cn --arg h "$3" --arg u "$4" --arg p "$5" \
    '{auths: {($h): {username: $u, password: $p, auth: ("\($u):\($p)" | @base64)}}}' | base64 -w0)
  printf '%s\n' "---" "apiVersion: v1" "kind: Secret" "metadata:" "  name: $2" "  namespace: $1" \
    "type: kubernetes.io/dockerconfigjson" "data:" "  .dockerconfigjson: $config"
}

# request_edit_pod_spec FILE JQ-EXPR: applies JQ-EXPR to the pod spec of the request's object
# (and oldObject), in place, e.g. '.imagePullSecrets = [{name: "regcred"}]'.
request_edit_pod_spec() {
  local file=$1 expr=$2
  jq "$_JQ_PODSPEC"' def edit: if . == null then null else podspec_path as $p | setpath($p; getpath($p) | '"$expr"') end;
    .request.object |= edit | .request.oldObject |= edit' "$file" >"$file.tmp"
  mv "$file.tmp" "$file"
}

# workflow_request IMAGE0 IMAGE1: e2e-tests/fixtures/workflow-create.json (an Argo Workflow
# CREATE) with the container images of templates[0] and templates[1] replaced; prints the
# path of the copy. Refuses images off loopback, like local_request.
workflow_request() {
  local out image
  mkdir -p "$(e2e_workdir)/requests"
  out=$(mktemp "$(e2e_workdir)/requests/workflow-create.XXXXXX")
  jq --arg a "$1" --arg b "$2" '
      .request.object.spec.templates[0].container.image = $a
    | .request.object.spec.templates[1].container.image = $b' \
    "$E2E_DIR/fixtures/workflow-create.json" >"$out"
  while IFS= read -r image; do
    case "$image" in
      127.0.0.1:*) ;;
      *) echo "workflow_request: non-loopback image $image" >&2; return 1 ;;
    esac
  done < <(jq -r '.request.object.spec.templates[].container.image // empty' "$out")
  printf '%s\n' "$out"
}

# cluster_with_nodes NAME: a --cluster-dir with the standard ServiceAccounts (write_cluster_dir)
# and the two Nodes of e2e-tests/cluster/nodes-amd64-arm64.yaml; prints it.
cluster_with_nodes() {
  local dir
  dir=$(write_cluster_dir "$1")
  cp "$E2E_DIR/cluster/nodes-amd64-arm64.yaml" "$dir/20-nodes.yaml"
  printf '%s\n' "$dir"
}
