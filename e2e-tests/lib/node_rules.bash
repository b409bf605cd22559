# shellcheck shell=bash
# Helpers of 86-node-rules.bats (the node's exact rules): indexes with variants,
# entries without a platform and attestation entries; a registry whose log names the user of
# every request; Node fixtures. Load it after lib/common.

# nr_build_manifest LAYOUT OS ARCH VARIANT LABEL: like oci_build_manifest, for any OS, ARCH
# and VARIANT (empty for none), which its config carries as an image builder writes them.
# Prints "sha256:HEX SIZE" of the manifest.
nr_build_manifest() {
  local layout=$1 os=$2 arch=$3 variant=$4 label=$5 tmp diff_id layer config
  tmp=$(mktemp -d "$layout/.build.XXXXXX")
  mkdir -p "$tmp/rootfs/etc"
  printf '%s %s/%s/%s\n' "$label" "$os" "$arch" "$variant" >"$tmp/rootfs/etc/e2e-image"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$tmp/rootfs" -cf "$tmp/layer.tar" .
  diff_id="sha256:$(sha256_of "$tmp/layer.tar")"
  gzip -n -c "$tmp/layer.tar" >"$tmp/layer.tar.gz"
  layer=$(oci_add_blob "$layout" "$tmp/layer.tar.gz")
  jq -cn --arg os "$os" --arg arch "$arch" --arg variant "$variant" --arg diff "$diff_id" '{
      architecture: $arch, os: $os,
      config: {Cmd: ["/bin/true"]},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created: "1970-01-01T00:00:00Z", created_by: "e2e-tests/lib/node_rules.bash"}]
    } + (if $variant == "" then {} else {variant: $variant} end)' >"$tmp/config.json"
  config=$(oci_add_blob "$layout" "$tmp/config.json")
  jq -cn --arg c "${config% *}" --argjson cs "${config#* }" --arg l "${layer% *}" --argjson ls "${layer#* }" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $l, size: $ls}]
    }' >"$tmp/manifest.json"
  oci_add_blob "$layout" "$tmp/manifest.json"
  rm -rf "$tmp"
}

# nr_build_index LABEL ENTRY...: an OCI image index in $E2E_WORK/images/LABEL, one manifest
# per ENTRY, in order; push it with `--all`. ENTRY is
#   os/arch[/variant]      an entry whose descriptor has that `platform`
#   -os/arch[/variant]     an entry without `platform`: only its config says it
#   attestation            a BuildKit attestation manifest (platform unknown/unknown) for the
#                          entry before it
# Prints the skopeo source reference. $E2E_WORK/images/LABEL/entries.tsv lists
# "ENTRY<TAB>DIGEST" for each entry.
nr_build_index() {
  local label=$1 layout entry spec os arch variant desc index previous="" with_platform
  shift
  layout="$(e2e_workdir)/images/$label"
  rm -rf "$layout"; mkdir -p "$layout"
  local -a descriptors=()
  for entry in "$@"; do
    spec=${entry#-}
    with_platform=true
    [[ "$entry" == -* ]] && with_platform=false
    if [[ "$entry" == attestation ]]; then
      desc=$(nr_build_manifest "$layout" unknown unknown "" "$label-attestation")
      descriptors+=("$(jq -cn --arg d "${desc% *}" --argjson s "${desc#* }" --arg subject "${previous% *}" '{
          mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s,
          platform: {architecture: "unknown", os: "unknown"},
          annotations: {"vnd.docker.reference.digest": $subject,
                        "vnd.docker.reference.type": "attestation-manifest"}}')")
    else
      IFS=/ read -r os arch variant <<<"$spec"
      desc=$(nr_build_manifest "$layout" "$os" "$arch" "${variant:-}" "$label")
      descriptors+=("$(jq -cn --arg d "${desc% *}" --argjson s "${desc#* }" \
        --arg os "$os" --arg arch "$arch" --arg variant "${variant:-}" --argjson p "$with_platform" '{
          mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s}
          + (if $p then {platform: ({architecture: $arch, os: $os}
                + (if $variant == "" then {} else {variant: $variant} end))} else {} end)')")
      previous=$desc
    fi
    printf '%s\t%s\n' "$entry" "${desc% *}" >>"$layout/entries.tsv"
  done
  printf '%s\n' "${descriptors[@]}" | jq -cs '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: .}' \
    >"$layout/image-index.json"
  index=$(oci_add_blob "$layout" "$layout/image-index.json")
  oci_write_layout "$layout" application/vnd.oci.image.index.v1+json "$index" latest
  printf 'oci:%s:latest\n' "$layout"
}

# nr_entry_digest LABEL ENTRY: the manifest digest of ENTRY in the index built as LABEL.
nr_entry_digest() {
  awk -F'\t' -v e="$2" '$1 == e { print $2; exit }' "$(e2e_workdir)/images/$1/entries.tsv"
}

# nr_push_by_digest SOURCE NAME REPO: pushes SOURCE (a single manifest from build_image) to
# registry NAME as REPO@DIGEST, with no tag, as a registry that has the digest but not the tag;
# prints the digest.
nr_push_by_digest() {
  local src=$1 name=$2 repo=$3 layout digest addr
  layout=${src#oci:}; layout=${layout%:*}
  digest=$(jq -r '.manifests[0].digest' "$layout/index.json")
  addr=$(registry_addr "$name")
  local -a flags
  mapfile -t flags < <(skopeo_registry_flags "$name" dest)
  skopeo --insecure-policy copy --quiet --retry-times 0 "${flags[@]}" \
    "$src" "docker://$addr/$repo@$digest" >/dev/null || return 1
  printf '%s\n' "$digest"
}

# nr_registry_start_logged FLAVOUR NAME: registry_start FLAVOUR NAME, then the same registry
# restarted on its port with `log.level: info`, so that its log has one line per request,
# with `auth.user.name=…` for the authenticated ones (docker-registry's own record of who
# asked). The log is $E2E_WORK/registries/NAME/registry.log.
nr_registry_start_logged() {
  local flavour=$1 name=$2 dir addr pid
  registry_start "$flavour" "$name" || return 1
  dir="$(e2e_workdir)/registries/$name"
  addr=$(registry_addr "$name")
  registry_kill "$(cat "$dir/pid")"
  sed -i 's/^  level: error$/  level: info/' "$dir/config.yml"
  grep -qx '  level: info' "$dir/config.yml" || { echo "nr_registry_start_logged: no log level in config" >&2; return 1; }
  docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 3>&- &
  pid=$!
  echo "$pid" >"$dir/pid"
  wait_until 15 registry_serving_or_dead "$pid" "$addr" http "" || true
  registry_answers "$addr" http || { echo "nr_registry_start_logged: $name did not restart on $addr" >&2; tail -n 5 "$dir/registry.log" >&2; return 1; }
}

# nr_log_mark NAME: the number of lines in registry NAME's log so far (for nr_log_since).
nr_log_mark() { wc -l <"$(e2e_workdir)/registries/$1/registry.log"; }

# nr_log_since NAME MARK REPO: the log lines of registry NAME after line MARK about REPO
# (requests for /v2/REPO/…).
nr_log_since() {
  tail -n "+$(($2 + 1))" "$(e2e_workdir)/registries/$1/registry.log" | grep -E "http\.request\.uri=\"?/v2/$3/" || true
}

# nr_users_seen NAME MARK REPO: the distinct users registry NAME's log names for requests about
# REPO after line MARK, one a line (nothing when every request was anonymous).
nr_users_seen() {
  nr_log_since "$@" | grep -o 'auth\.user\.name=[^ ]*' | sed 's/^auth\.user\.name=//; s/^"//; s/"$//' | sort -u
}

# nr_cluster NAME NODE-FILE...: a --cluster-dir with the standard ServiceAccounts
# (write_cluster_dir) and the Node files of e2e-tests/cluster/ named; prints it.
nr_cluster() {
  local dir file i=20
  dir=$(write_cluster_dir "$1")
  shift
  rm -f "$dir"/2*-nodes-*.yaml
  for file in "$@"; do
    cp "$E2E_DIR/cluster/$file" "$dir/$i-$file"
    i=$((i + 1))
  done
  printf '%s\n' "$dir"
}

# nr_no_secret_leak: neither the response nor the host's stderr holds the auth registries'
# password or base64 credentials (99-no-leak.bats scans the whole run's transcripts too).
nr_no_secret_leak() {
  local encoded
  encoded=$(printf '%s:%s' "$REG_AUTH_USER" "$REG_AUTH_PASSWORD" | base64 -w0)
  local s
  for s in "$REG_AUTH_PASSWORD" "$encoded" "${encoded%%=*}"; do
    [[ "$output" != *"$s"* && "${stderr:-}" != *"$s"* ]] || _fail_with "a credential leaked (${#s} characters)" || return 1
  done
}

# nr_session_credentials FILE IMAGE: how many credentials the policy gave the host for the
# lookup of IMAGE in the oci/v1/resolve_images requests of the recorded session FILE (the
# session holds them as `<redacted>`); nothing when IMAGE was not looked up there.
nr_session_credentials() {
  awk -v image="$2" '
    /^    !/ { resolve = ($1 == "!OciResolveImages") }
    resolve && /^    - image: / { if (counting) print n; counting = ($3 == image); n = 0; next }
    counting && /^      - / { n++ }
    counting && !/^      / { print n; counting = 0 }
  ' "$1"
}
