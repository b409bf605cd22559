# shellcheck shell=bash
# A registry that answers per user (lib/per_user_registry.py, python3, stdlib only, 127.0.0.1):
# what one pull secret sees, another gets 404 / 401 / 500 / no answer for. Load it with
# `load lib/per_user_registry` after lib/common.
#
#   per_user_registry_start pur --image team/app:v1 alice=sees:team/app bob=404 carol=401
#   # -> REG_PUR=127.0.0.1:PORT; alice gets team/app:v1 (200, a real OCI manifest), bob a 404
#   #    NAME_UNKNOWN, carol a 401; anonymous requests a 401 with a Basic challenge.
#   pull_secret_yaml team-a first "$REG_PUR" "$(pur_user carol)" "$(pur_password carol)"
#   per_user_registry_digest pur team/app:v1     # sha256:...
#   per_user_registry_users pur                  # who asked, in order: "carol", "alice"...
#
# USER=RULE, USER one of PUR_FIXTURE_USERS (fixed credentials, so 99-no-leak scans them all):
#   sees:REPO[:TAG][,REPO[:TAG]...]  sees these (a repository: every tag), 404 NAME_UNKNOWN
#                                    for other repositories
#   404 | 401 | 403 | 429 | 5xx      what every manifest request of this user gets (a tag missing
#                                    from a repository the user sees is always 404 MANIFEST_UNKNOWN)
#   hang                             the request is read and never answered
# per_user_registry_start_config NAME CONFIG.json takes the python script's own JSON instead
# (see its header). Both are stopped by registry_stop NAME / registry_stop_all.

# The fixture users. Their credentials are fixed (and fake), so that the secret scan of
# 99-no-leak.bats can look for every one of them.
PUR_FIXTURE_USERS=(alice bob carol dave erin)

# pur_user USER / pur_password USER: the fixture user's registry credentials.
pur_user() { printf 'e2e-pur-%s-8w3n' "$1"; }
pur_password() { printf 'e2e-Pur-%s-Pw-4j7c' "$1"; }

# pur_credentials: "user password" of every fixture user, one a line.
pur_credentials() {
  local user
  for user in "${PUR_FIXTURE_USERS[@]}"; do
    printf '%s %s\n' "$(pur_user "$user")" "$(pur_password "$user")"
  done
}

# per_user_registry_start NAME [--image REPO:TAG]... USER=RULE...: writes the JSON config and
# starts the fake (per_user_registry_start_config).
per_user_registry_start() {
  local name=$1; shift
  local dir images='[]' users='{}' arg user rule fixture known sees
  dir="$(e2e_workdir)/registries/$name"
  mkdir -p "$dir"
  while (($#)); do
    arg=$1; shift
    if [[ "$arg" == --image ]]; then
      images=$(jq -c --arg i "$1" '. + [$i]' <<<"$images"); shift
      continue
    fi
    user=${arg%%=*} rule=${arg#*=}
    known=false
    for fixture in "${PUR_FIXTURE_USERS[@]}"; do [[ "$fixture" == "$user" ]] && known=true; done
    if ! $known || [[ "$arg" != *=* ]]; then
      echo "per_user_registry_start: '$arg' is not USER=RULE with USER in: ${PUR_FIXTURE_USERS[*]}" >&2
      return 1
    fi
    if [[ "$rule" == sees:* ]]; then
      sees=$(jq -cR 'split(",")' <<<"${rule#sees:}")
      users=$(jq -c --arg u "$(pur_user "$user")" --arg p "$(pur_password "$user")" --argjson s "$sees" \
        '. + {($u): {password: $p, sees: $s, otherwise: 404}}' <<<"$users")
    elif [[ "$rule" == hang || "$rule" =~ ^(401|403|404|429|5[0-9][0-9])$ ]]; then
      users=$(jq -c --arg u "$(pur_user "$user")" --arg p "$(pur_password "$user")" --arg o "$rule" \
        '. + {($u): {password: $p, sees: [], otherwise: ($o | tonumber? // .)}}' <<<"$users")
    else
      echo "per_user_registry_start: unknown rule '$rule' for $user" >&2
      return 1
    fi
  done
  jq -n --argjson images "$images" --argjson users "$users" \
    '{images: $images, users: $users, anonymous: {sees: [], otherwise: 401}}' >"$dir/config.json"
  per_user_registry_start_config "$name" "$dir/config.json"
}

# per_user_registry_start_config NAME CONFIG.json: starts the fake with that configuration,
# waits until it listens and exports REG_<NAME>=127.0.0.1:PORT. Its request log is
# $(e2e_workdir)/registries/NAME/requests.log.
per_user_registry_start_config() {
  local name=$1 config=$2 dir var
  dir="$(e2e_workdir)/registries/$name"
  mkdir -p "$dir"
  rm -f "$dir/port" "$dir/digests.json"
  : >"$dir/requests.log"
  # 3>&- : bats waits for every process holding its fd 3; the server must not keep it.
  python3 "$E2E_DIR/lib/per_user_registry.py" --config "$config" --port-file "$dir/port" \
    --digests-file "$dir/digests.json" --log-file "$dir/requests.log" >"$dir/server.log" 2>&1 3>&- &
  echo $! >"$dir/pid"
  wait_until 10 test -s "$dir/port" || {
    cat "$dir/server.log" >&2
    registry_stop "$name"
    return 1
  }
  var="REG_$(tr '[:lower:]-' '[:upper:]_' <<<"$name")"
  printf -v "$var" '%s' "127.0.0.1:$(cat "$dir/port")"
  export "${var?}"
}

# per_user_registry_digest NAME REPO:TAG: the digest the fake serves for that image.
per_user_registry_digest() {
  jq -er --arg i "$2" '.[$i]' "$(e2e_workdir)/registries/$1/digests.json"
}

# per_user_registry_log NAME: the fake's request log ("USER METHOD PATH -> STATUS [CODE]").
per_user_registry_log() { cat "$(e2e_workdir)/registries/$1/requests.log"; }

# per_user_registry_users NAME: the fixture user (or "anonymous", "unknown") of each manifest
# request, in order, consecutive repeats folded: who was asked, in which order.
per_user_registry_users() {
  local line who user previous=""
  while IFS= read -r line; do
    [[ "$line" == *" /v2/"*"/manifests/"* ]] || continue
    who=${line%% *}
    for user in "${PUR_FIXTURE_USERS[@]}"; do
      [[ "$who" == "$(pur_user "$user")" ]] && who=$user
    done
    [[ "$who" == "$previous" ]] || printf '%s\n' "$who"
    previous=$who
  done <"$(e2e_workdir)/registries/$1/requests.log"
}
