# shellcheck shell=bash
# The world the scenarios run against: registries and images named after the unit fixtures'
# images, so `local_request` can turn any fixture into a request that only touches loopback.

# scenario_setup_file: for bats `setup_file`. Starts the anonymous, auth and TLS registries,
# pushes the standard images, picks a port where nothing listens (REG_DOWN), writes the
# host's sources.yaml (E2E_SOURCES) and the cluster's objects (E2E_CLUSTER). Does nothing when the host is not built.
scenario_setup_file() {
  host_ready || return 0
  registry_start anon
  registry_start auth
  registry_start tls
  REG_DOWN="127.0.0.1:$(unused_port)"
  export REG_DOWN

  # the fixtures' images, moved to the local registry; each built on its own so each has its
  # own digest (a pinning patch that wrote one image's digest into another's field would show)
  push_image "$(build_image migrate-2.1.0)" anon platform/migrate:2.1.0
  push_image "$(build_image app-1.4.2)" anon team/app:1.4.2
  push_image "$(build_image app-1.5.0)" anon team/app:1.5.0
  push_image "$(build_image busybox)" anon library/busybox:1.36
  push_image "$(build_image alpine)" anon library/alpine:3.20
  # formats and layouts
  push_image "$(build_multiarch_image multi)" anon test/multi:v1 --all
  push_image "$(build_image v2s2)" anon test/app:v2s2 --format v2s2
  push_image "$(build_image nested)" anon team/sub/app:1.0
  push_image "$(build_image deep)" anon a/b/c/d/app:1.0
  push_image "$(build_image arm-only arm64)" anon test/arm:v1
  # private and TLS-only images
  push_image "$(build_image private)" auth private/app:v1
  push_image "$(build_image secure)" tls secure/app:v1

  E2E_SOURCES=$(write_sources_yaml default --insecure "$REG_ANON" --insecure "$REG_AUTH" --insecure "$REG_DOWN")
  E2E_CLUSTER=$(write_cluster_dir default)
  export E2E_SOURCES E2E_CLUSTER
}

# scenario_teardown_file: for bats `teardown_file`; fails if a registry survived.
scenario_teardown_file() {
  registry_stop_all
  local left
  left=$(registry_pids)
  [[ -z "$left" ]] || { echo "registries still running: $left" >&2; return 1; }
}

# local_request FIXTURE [EDIT...]: like request_with_images, but first points every container
# of the fixture at the same image on the local anonymous registry (registry.example.com/x ->
# $REG_ANON/x, busybox:1.36 -> $REG_ANON/library/busybox:1.36, ...), then applies EDITs. Then
# refuses a request that would make the host contact anything but loopback.
local_request() {
  local fixture=$1 file
  shift
  file=$(request_with_images "$fixture" \
    "init-schema=$REG_ANON/platform/migrate:2.1.0" \
    "app=$REG_ANON/team/app:1.4.2" \
    "sidecar=$REG_ANON/library/busybox:1.36") || return 1
  if jq -e '.request.object.spec.ephemeralContainers' "$file" >/dev/null; then
    request_with_images_in_place "$file" "object:debugger=$REG_ANON/library/alpine:3.20" || return 1
  fi
  request_with_images_in_place "$file" "$@" || return 1
  assert_loopback_only "$file" || return 1
  printf '%s\n' "$file"
}

# request_with_images_in_place FILE [EDIT...]: applies request_with_images' edits to FILE.
request_with_images_in_place() {
  local file=$1 edited
  shift
  (($#)) || return 0
  edited=$(FIXTURES_DIR=$(dirname "$file") request_with_images "$(basename "$file")" "$@") || return 1
  mv "$edited" "$file"
}

# assert_loopback_only FILE [IMAGE...]: every image (and image volume reference) in FILE is
# on 127.0.0.1 or localhost, or
# is one of the IMAGEs given (invalid references the policy must refuse before any lookup).
# The guard that keeps these tests off the network.
assert_loopback_only() {
  local file=$1 image
  shift
  while IFS= read -r image; do
    case "$image" in
      127.0.0.1:* | localhost:* | localhost/*) ;;
      *)
        local allowed="" a
        for a in "$@" ${E2E_ALLOW_IMAGES:-}; do [[ "$image" == "$a" ]] && allowed=1; done
        [[ -n "$allowed" ]] || { echo "request $file names a non-loopback image: $image" >&2; return 1; }
        ;;
    esac
  done < <(jq -r "$_JQ_PODSPEC"' [.request.object, .request.oldObject] | .[] | select(. != null)
      | getpath(podspec_path) | ((.initContainers, .containers, .ephemeralContainers) // [] | .[].image),
        ((.volumes // [])[] | .image.reference? // empty)' "$file")
}
