# shellcheck shell=bash
# Helpers for 90-features.bats (mirrors, required platforms, digest pinning, custom kinds):
# images for chosen platforms, the Argo Workflow request, and assertions on the parts of the
# AdmissionResponse the other suites do not look at (auditAnnotations, patchType/patch) and
# on recorded host sessions. Load it after lib/common.

# build_image_for LABEL ARCH: a single-platform image manifest (no index) for linux/ARCH, so
# its platform is only known from its config; prints the skopeo source reference.
build_image_for() {
  local label=$1 arch=$2 layout desc
  layout="$(e2e_workdir)/images/$label"
  rm -rf "$layout"; mkdir -p "$layout"
  desc=$(oci_build_manifest "$layout" "$arch" "$label")
  oci_write_layout "$layout" application/vnd.oci.image.manifest.v1+json "$desc" latest
  printf 'oci:%s:latest\n' "$layout"
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

# mirror_settings NAME PREFIX MIRROR [PULL-FROM-MIRROR]: settings with one registries rule
# (PREFIX mirrored by MIRROR), written at run time because both are free ports; prints the path.
mirror_settings() {
  local name=$1 prefix=$2 mirror=$3 pull=${4:-all}
  write_settings "$name" "$(jq -cn --arg p "$prefix" --arg m "$mirror" --arg pull "$pull" \
    '{registries: [{prefix: $p, mirrors: [{location: $m, pullFromMirror: $pull}]}]}')"
}

# response_patch: the JSONPatch of the response in $output, decoded (base64 -> JSON), or
# nothing when the response has no patch.
response_patch() {
  jq -r '.patch // empty' <<<"$output" | base64 -d
}

# assert_patch_is JSON: the response is a JSONPatch whose operations are exactly those of
# JSON (an array of {op, path, value}), in any order.
assert_patch_is() {
  [[ "$(jq -r '.patchType // ""' <<<"$output")" == JSONPatch ]] || _fail_with "expected patchType JSONPatch" || return 1
  local patch
  patch=$(response_patch) || _fail_with "the patch is not base64" || return 1
  jq -e -n --argjson got "$patch" --argjson want "$1" '($got | sort_by(.path)) == ($want | sort_by(.path))' >/dev/null ||
    _fail_with "patch differs; expected $(jq -c . <<<"$1"), got $patch"
}

# assert_no_patch: the response does not mutate (neither patchType nor patch).
assert_no_patch() {
  jq -e '(has("patch") | not) and (has("patchType") | not)' <<<"$output" >/dev/null ||
    _fail_with "expected no patch"
}

# assert_annotation_is KEY VALUE: auditAnnotations[KEY] is exactly VALUE.
assert_annotation_is() {
  [[ "$(jq -r --arg k "$1" '(.auditAnnotations // {})[$k] // ""' <<<"$output")" == "$2" ]] ||
    _fail_with "expected auditAnnotations[\"$1\"] = $2"
}

# assert_no_annotations: no audit annotation at all.
assert_no_annotations() {
  [[ "$(jq -c '.auditAnnotations // {}' <<<"$output")" == "{}" ]] || _fail_with "expected no auditAnnotations"
}

# session_requests FILE: one line per exchange of a recorded session (kwctl format),
# "Kind<TAB>image" for OCI requests, "Kind" for the others, in the order the policy asked.
session_requests() {
  awk '
    /^  request: \|/ { inreq = 1; next }
    inreq && /^    !/ { kind = substr($1, 2); next }
    inreq && /^    image: / { printf "%s\t%s\n", kind, $2; kind = ""; inreq = 0; next }
    inreq && /^  response:/ { if (kind != "") print kind; kind = ""; inreq = 0 }
  ' "$1"
}

# assert_session_asked FILE KIND IMAGE: the recorded session FILE has a KIND request
# (OciManifestDigest, OciManifest, OciManifestAndConfig) for exactly IMAGE.
assert_session_asked() {
  session_requests "$1" | grep -qxF "$2	$3" ||
    { printf 'session %s has no %s request for %s; it asked:\n' "$1" "$2" "$3" >&2; session_requests "$1" >&2; return 1; }
}

# assert_session_never_mentions FILE TEXT: no request of the recorded session FILE
# contains TEXT (e.g. a registry the policy must not have asked).
assert_session_never_mentions() {
  ! session_requests "$1" | grep -qF "$2" ||
    { printf 'session %s mentions %s:\n' "$1" "$2" >&2; session_requests "$1" >&2; return 1; }
}
