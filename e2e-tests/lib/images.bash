# shellcheck shell=bash
# Test images built without Docker: OCI image layouts written by hand (tar layer, config,
# manifest, index.json, oci-layout, blobs named by sha256), pushed with skopeo to the local
# registries of registry.bash. Pushed digests are recorded in $E2E_WORK/digests.tsv.

# sha256_of FILE: the hex sha256 of FILE.
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# oci_add_blob LAYOUT FILE: moves FILE into LAYOUT/blobs/sha256/ under its digest and prints
# "sha256:HEX SIZE" for the descriptor that references it.
oci_add_blob() {
  local layout=$1 file=$2 hex size
  hex=$(sha256_of "$file")
  size=$(stat -c %s "$file")
  mkdir -p "$layout/blobs/sha256"
  mv "$file" "$layout/blobs/sha256/$hex"
  printf 'sha256:%s %s\n' "$hex" "$size"
}

# oci_build_manifest LAYOUT ARCH LABEL: one gzip layer holding /etc/e2e-image (text LABEL, so
# every image has its own digest), its config for linux/ARCH, and the image manifest; all
# blobs go into LAYOUT. Prints "sha256:HEX SIZE" of the manifest.
oci_build_manifest() {
  local layout=$1 arch=$2 label=$3 tmp diff_id layer config manifest
  tmp=$(mktemp -d "$layout/.build.XXXXXX")
  mkdir -p "$tmp/rootfs/etc"
  printf '%s %s\n' "$label" "$arch" >"$tmp/rootfs/etc/e2e-image"
  # Reproducible tar: fixed order, owner and time.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$tmp/rootfs" -cf "$tmp/layer.tar" .
  diff_id="sha256:$(sha256_of "$tmp/layer.tar")"
  gzip -n -c "$tmp/layer.tar" >"$tmp/layer.tar.gz"
  layer=$(oci_add_blob "$layout" "$tmp/layer.tar.gz")

  jq -cn --arg arch "$arch" --arg diff "$diff_id" '{
      architecture: $arch, os: "linux",
      config: {Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"], Cmd: ["/bin/true"]},
      rootfs: {type: "layers", diff_ids: [$diff]},
      history: [{created: "1970-01-01T00:00:00Z", created_by: "e2e-tests/lib/images.bash"}]
    }' >"$tmp/config.json"
  config=$(oci_add_blob "$layout" "$tmp/config.json")

  jq -cn --arg c "${config% *}" --argjson cs "${config#* }" --arg l "${layer% *}" --argjson ls "${layer#* }" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: {mediaType: "application/vnd.oci.image.config.v1+json", digest: $c, size: $cs},
      layers: [{mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: $l, size: $ls}]
    }' >"$tmp/manifest.json"
  manifest=$(oci_add_blob "$layout" "$tmp/manifest.json")
  rm -rf "$tmp"
  printf '%s\n' "$manifest"
}

# oci_write_layout LAYOUT MEDIATYPE DESCRIPTOR TAG: index.json pointing at one manifest or
# index blob under the name TAG (so `oci:LAYOUT:TAG` finds it), and the oci-layout marker.
oci_write_layout() {
  local layout=$1 media_type=$2 desc=$3 tag=$4
  printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  jq -cn --arg mt "$media_type" --arg d "${desc% *}" --argjson s "${desc#* }" --arg tag "$tag" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [{mediaType: $mt, digest: $d, size: $s,
                   annotations: {"org.opencontainers.image.ref.name": $tag}}]
    }' >"$layout/index.json"
}

# build_image LABEL [ARCH]: a single-platform image layout (linux/ARCH, default amd64);
# prints the skopeo source reference `oci:DIR:latest`.
build_image() {
  image_layout "$1-${2:-amd64}" _write_image "$1" "${2:-amd64}"
}

# build_multiarch_image LABEL: an image index for linux/amd64 and linux/arm64 (push it with
# `--all`); prints the skopeo source reference.
build_multiarch_image() {
  image_layout "$1-index" _write_multiarch_image "$1"
}

# image_layout KEY WRITER ARGS...: the layout WRITER (called as `WRITER LAYOUT ARGS...`) writes,
# as `oci:DIR:latest`. In $E2E_WORK/images/KEY; or, when E2E_IMAGE_CACHE names a directory
# (run.sh sets one for the whole run), written once there and shared by every suite: the
# layouts are reproducible (same label, same digest) and skopeo only reads them. A layout is
# written aside and renamed into place, so a suite never sees half of one.
image_layout() {
  local key=$1 writer=$2 layout tmp
  shift 2
  if [[ -z "${E2E_IMAGE_CACHE:-}" ]]; then
    layout="$(e2e_workdir)/images/$key"
    rm -rf "$layout"; mkdir -p "$layout"
    "$writer" "$layout" "$@" || return 1
  else
    layout="$E2E_IMAGE_CACHE/$key"
    if [[ ! -f "$layout/index.json" ]]; then
      mkdir -p "$E2E_IMAGE_CACHE"
      tmp=$(mktemp -d "$E2E_IMAGE_CACHE/.writing.XXXXXX")
      "$writer" "$tmp" "$@" || { rm -rf "$tmp"; return 1; }
      # another suite may have placed the same layout meanwhile: theirs is the same bytes
      mv -T "$tmp" "$layout" 2>/dev/null || rm -rf "$tmp"
    fi
  fi
  printf 'oci:%s:latest\n' "$layout"
}

_write_image() {
  local layout=$1 label=$2 arch=$3 desc
  desc=$(oci_build_manifest "$layout" "$arch" "$label") || return 1
  oci_write_layout "$layout" application/vnd.oci.image.manifest.v1+json "$desc" latest
}

_write_multiarch_image() {
  local layout=$1 label=$2 amd64 arm64 index
  amd64=$(oci_build_manifest "$layout" amd64 "$label") || return 1
  arm64=$(oci_build_manifest "$layout" arm64 "$label") || return 1
  jq -cn --arg a "${amd64% *}" --argjson asz "${amd64#* }" --arg b "${arm64% *}" --argjson bsz "${arm64#* }" '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [
        {mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $a, size: $asz,
         platform: {architecture: "amd64", os: "linux"}},
        {mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $b, size: $bsz,
         platform: {architecture: "arm64", os: "linux", variant: "v8"}}]
    }' >"$layout/image-index.json"
  index=$(oci_add_blob "$layout" "$layout/image-index.json")
  oci_write_layout "$layout" application/vnd.oci.image.index.v1+json "$index" latest
}

# skopeo_registry_flags NAME src|dest: the skopeo options to reach registry NAME (started by
# registry_start): no TLS verification for the HTTP ones, credentials for auth, the CA for tls.
skopeo_registry_flags() {
  local name=$1 side=$2 dir
  dir="$(e2e_workdir)/registries/$name"
  if [[ -f "$dir/tls/certs.d/ca.crt" ]]; then
    printf -- '--%s-cert-dir\n%s\n' "$side" "$dir/tls/certs.d"
  else
    printf -- '--%s-tls-verify=false\n' "$side"
  fi
  if [[ -f "$dir/htpasswd" ]]; then
    printf -- '--%s-creds\n%s\n' "$side" "$REG_AUTH_USER:$REG_AUTH_PASSWORD"
  fi
}

# registry_addr NAME: HOST:PORT of registry NAME (the value of REG_<NAME>).
registry_addr() {
  local var
  var="REG_$(tr '[:lower:]-' '[:upper:]_' <<<"$1")"
  printf '%s\n' "${!var:?registry $1 is not started}"
}

# push_image SOURCE NAME REPO:TAG [SKOPEO COPY OPTIONS...]: copies SOURCE (from build_image)
# to registry NAME as REPO:TAG, e.g. `--format v2s2` or `--all`, then records its digest.
# The signature policy is not the subject here: --insecure-policy.
push_image() {
  local src=$1 name=$2 repo_tag=$3 addr
  shift 3
  addr=$(registry_addr "$name")
  local -a flags
  mapfile -t flags < <(skopeo_registry_flags "$name" dest)
  skopeo --insecure-policy copy --quiet --retry-times 0 "${flags[@]}" "$@" \
    "$src" "docker://$addr/$repo_tag" >/dev/null
  record_digest "$name" "$repo_tag"
}

# remote_digest NAME REPO:TAG: the digest of the manifest (or index) the registry serves for
# the tag: the sha256 of its raw bytes, which is what Docker-Content-Digest carries.
remote_digest() {
  local name=$1 repo_tag=$2 addr
  addr=$(registry_addr "$name")
  local -a flags
  mapfile -t flags < <(skopeo_registry_flags "$name" src)
  # skopeo inspect calls the source options --tls-verify/--cert-dir/--creds.
  flags=("${flags[@]/--src-/--}")
  printf 'sha256:%s\n' "$(skopeo inspect --raw --retry-times 0 "${flags[@]}" "docker://$addr/$repo_tag" | sha256sum | cut -d' ' -f1)"
}

# record_digest NAME REPO:TAG: appends "HOST:PORT/REPO:TAG<TAB>DIGEST" to $E2E_WORK/digests.tsv.
record_digest() {
  local name=$1 repo_tag=$2 digest
  digest=$(remote_digest "$name" "$repo_tag")
  printf '%s/%s\t%s\n' "$(registry_addr "$name")" "$repo_tag" "$digest" >>"$(e2e_workdir)/digests.tsv"
}

# digest_of HOST:PORT/REPO:TAG: the recorded digest of a pushed image.
digest_of() {
  local d
  d=$(awk -F'\t' -v r="$1" '$1 == r { d = $2 } END { print d }' "$(e2e_workdir)/digests.tsv")
  [[ -n "$d" ]] || { echo "digest_of: $1 was not pushed" >&2; return 1; }
  printf '%s\n' "$d"
}

# build_index_for LABEL ARCH...: an image index with one linux/ARCH manifest per ARCH (arm64
# gets variant v8, as Docker Hub's indexes have); push it with `--all`. build_multiarch_image
# always makes amd64+arm64; this one also makes the single-platform index that a registry
# serves for an image published for amd64 only.
build_index_for() {
  local label=$1 layout arch desc index
  shift
  layout="$(e2e_workdir)/images/$label"
  rm -rf "$layout"; mkdir -p "$layout"
  local -a entries=()
  for arch in "$@"; do
    desc=$(oci_build_manifest "$layout" "$arch" "$label")
    entries+=("$(jq -cn --arg d "${desc% *}" --argjson s "${desc#* }" --arg arch "$arch" '{
        mediaType: "application/vnd.oci.image.manifest.v1+json", digest: $d, size: $s,
        platform: ({architecture: $arch, os: "linux"}
                   + (if $arch == "arm64" then {variant: "v8"} else {} end))}')")
  done
  printf '%s\n' "${entries[@]}" | jq -cs '{
      schemaVersion: 2, mediaType: "application/vnd.oci.image.index.v1+json", manifests: .}' \
    >"$layout/image-index.json"
  index=$(oci_add_blob "$layout" "$layout/image-index.json")
  oci_write_layout "$layout" application/vnd.oci.image.index.v1+json "$index" latest
  printf 'oci:%s:latest\n' "$layout"
}

# tags_in_storage REGISTRY REPO TAG COUNT: COUNT more tags of REPO (TAG's last number
# counting up: 1.0.1, 1.0.2, ...) naming TAG's manifest, written into the registry's storage
# as docker-registry writes a tag: pushing 2,000 tags with skopeo takes minutes.
tags_in_storage() {
  local tags
  tags="$(e2e_workdir)/registries/$1/data/docker/registry/v2/repositories/$2/_manifests/tags"
  python3 - "$tags" "$3" "$4" <<'EOF'
import shutil, sys
tags, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
line = tag.rsplit(".", 1)[0]
for i in range(1, count + 1):
    shutil.copytree(f"{tags}/{tag}", f"{tags}/{line}.{i}")
EOF
}
