# shellcheck shell=bash
# Helpers of 45-certainty.bats ("certain means certain"): tags deleted from a
# registry, a registry listening on [::1], a web server that is not a registry, a hung
# endpoint, Nodes that list cached images, Pods with owners, and what a recorded session asked.
# Load it after lib/common. Every process started here keeps its pid in
# $E2E_WORK/registries/NAME/pid, so registry_stop_all (scenario_teardown_file) stops it along
# with the registries.

# vanish_image NAME REPO:TAG: pushes an image of its own (its own digest) to registry NAME as
# REPO:TAG, then deletes it by digest as a retention policy does, and checks that the registry
# now answers 404: a tag that existed and is gone.
vanish_image() {
  local name=$1 repo_tag=$2 addr code
  addr=$(registry_addr "$name")
  push_image "$(build_image "vanished-${repo_tag//[:\/]/-}")" "$name" "$repo_tag" || return 1
  local -a flags
  mapfile -t flags < <(skopeo_registry_flags "$name" src)
  flags=("${flags[@]/--src-/--}")
  skopeo delete --retry-times 0 "${flags[@]}" "docker://$addr/$repo_tag" || return 1
  code=$(curl -s --noproxy '*' --max-time 5 -o /dev/null -w '%{http_code}' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' "http://$addr/v2/${repo_tag%:*}/manifests/${repo_tag##*:}")
  [[ "$code" == 404 ]] || { echo "vanish_image: $addr/$repo_tag still answers $code" >&2; return 1; }
}

# certainty_pod IMAGE...: a Pod `web` in team-a (pod-create.json) whose containers c0, c1, …
# run IMAGEs (no init containers, pull policy left to the kubelet's default); prints its path.
# Refuses images off loopback unless E2E_ALLOW_IMAGES lists them.
certainty_pod() {
  local req images
  req=$(request_with_images pod-create.json sidecar.remove) || return 1
  images=$(printf '%s\n' "$@" | jq -R . | jq -sc .)
  request_edit_pod_spec "$req" "del(.initContainers) | .containers = ($images | to_entries | map({name: \"c\\(.key)\", image: .value}))"
  assert_loopback_only "$req" || return 1
  printf '%s\n' "$req"
}

# request_edit FILE JQ-EXPR: applies JQ-EXPR to the whole request file, in place.
request_edit() {
  jq "$2" "$1" >"$1.tmp" && mv "$1.tmp" "$1"
}

# owned_by FILE API-VERSION KIND: gives the object of FILE (object and oldObject) a controller
# owner, as a ReplicaSet, Job, Deployment or CronJob controller writes it.
owned_by() {
  jq --arg v "$2" --arg k "$3" '
    def own: if . == null then null else .metadata.ownerReferences = [{apiVersion: $v, kind: $k,
      name: "web-7d4b9", uid: "6a1f0c2e-1111-4c5e-8f60-718293a4b5c6", controller: true, blockOwnerDeletion: true}] end;
    .request.object |= own | .request.oldObject |= own' "$1" >"$1.tmp" && mv "$1.tmp" "$1"
}

# node_yaml NAME IMAGE...: a Node named NAME whose status.images lists each IMAGE (one entry
# per image, with the names a kubelet reports: the reference as pulled), as YAML on stdout.
node_yaml() {
  local name=$1 image
  shift
  printf '%s\n' "---" "apiVersion: v1" "kind: Node" "metadata:" "  name: $name" "  labels:" \
    "    kubernetes.io/arch: amd64" "    kubernetes.io/os: linux" "    kubernetes.io/hostname: $name" \
    "status:" "  nodeInfo:" "    architecture: amd64" "    operatingSystem: linux"
  if (($# == 0)); then
    printf '%s\n' "  images: []"
    return
  fi
  printf '%s\n' "  images:"
  for image in "$@"; do
    printf '%s\n' "    - names:" "        - $image" "      sizeBytes: 7340032"
  done
}

# session_kinds FILE: the request kinds of a recorded session, one per exchange (nothing when
# the host recorded no file because nothing was asked).
session_kinds() {
  [[ -s "$1" ]] || return 0
  session_requests "$1" | cut -f1
}

# assert_session_lookups FILE N: the session asked oci/v1/manifest_digest exactly N times.
assert_session_lookups() {
  local n
  n=$(session_kinds "$1" | grep -c '^OciManifestDigest$' || true)
  [[ "$n" == "$2" ]] || { printf 'expected %s manifest_digest lookup(s) in %s, got %s:\n' "$2" "$1" "$n" >&2; session_requests "$1" >&2; return 1; }
}

# assert_session_empty FILE: no host call at all was recorded.
assert_session_empty() {
  [[ -z "$(session_kinds "$1")" ]] || { printf 'expected no host call in %s:\n' "$1" >&2; session_requests "$1" >&2; return 1; }
}

# _helper_dir NAME: the directory of helper process NAME, next to the registries; a process
# still running under that name is stopped first, so no pid is ever lost.
_helper_dir() {
  local dir
  registry_stop "$1"
  dir="$(e2e_workdir)/registries/$1"
  mkdir -p "$dir"
  printf '%s\n' "$dir"
}

# free_port6: an unused port on [::1], chosen by the kernel.
free_port6() {
  python3 -c 'import socket; s = socket.socket(socket.AF_INET6); s.bind(("::1", 0)); print(s.getsockname()[1]); s.close()'
}

# ipv6_answers ADDR: /v2/ on http://ADDR answers 200 (curl -g: ADDR has brackets).
ipv6_answers() {
  [[ "$(curl -g -s --noproxy '*' --max-time 2 -o /dev/null -w '%{http_code}' "http://$1/v2/" || true)" == 200 ]]
}

# ipv6_registry_start NAME REPO:TAG...: an anonymous docker-registry listening on [::1] only
# (http.addr "[::1]:PORT"), holding an image of its own under each REPO:TAG; exports
# REG_<NAME>=[::1]:PORT. Its access log ($dir/registry.log) records every request.
# skopeo 1.9 (containers/image) refuses bracketed IPv6 references ("invalid reference
# format"), so the images are pushed while the same storage is served on 127.0.0.1, and the
# registry is then restarted on [::1].
ipv6_registry_start() {
  local name=$1 dir port pid repo_tag attempt var
  shift
  dir=$(_helper_dir "$name")
  mkdir -p "$dir/data"
  for attempt in 1 2 3; do
    port=$(free_port)
    write_registry_config "$dir" "$port" anon
    docker-registry serve "$dir/config.yml" >"$dir/registry-v4.log" 2>&1 3>&- &
    pid=$!
    echo "$pid" >"$dir/pid"
    wait_until 15 registry_serving_or_dead "$pid" "127.0.0.1:$port" http "" || true
    registry_answers "127.0.0.1:$port" http && break
    registry_kill "$pid"
    ((attempt < 3)) || { echo "ipv6_registry_start: no IPv4 instance to push with" >&2; return 1; }
  done
  for repo_tag in "$@"; do
    skopeo --insecure-policy copy --quiet --retry-times 0 --dest-tls-verify=false \
      "$(build_image "v6-${repo_tag//[:\/]/-}")" "docker://127.0.0.1:$port/$repo_tag" >/dev/null || return 1
  done
  registry_kill "$pid"
  for attempt in 1 2 3; do
    port=$(free_port6)
    write_registry_config "$dir" "$port" anon
    sed -i -e "s/^  addr: 127.0.0.1:$port\$/  addr: \"[::1]:$port\"/" -e 's/^    disabled: true$/    disabled: false/' "$dir/config.yml"
    docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1 3>&- &
    pid=$!
    echo "$pid" >"$dir/pid"
    wait_until 15 ipv6_answers "[::1]:$port" && kill -0 "$pid" 2>/dev/null && break
    registry_kill "$pid"
    ((attempt < 3)) || { echo "ipv6_registry_start: no registry on [::1]" >&2; tail -n 5 "$dir/registry.log" >&2; return 1; }
  done
  var="REG_$(tr '[:lower:]-' '[:upper:]_' <<<"$name")"
  printf -v "$var" '%s' "[::1]:$port"
  export "${var?}"
}

# WEB_SECRET: the recognisable text of the internal page (it must never reach a user).
WEB_SECRET="internal-admin-console-e2e-7Kq2"
export WEB_SECRET

# web_start NAME STATUS: a plain HTTP server on 127.0.0.1 that is no registry: it answers
# every request (also /v2/) with STATUS and an HTML page naming $WEB_SECRET, as an internal
# admin console would; exports WEB_<NAME>=127.0.0.1:PORT and WEB_<NAME>_BYTES (the page's
# size). Requests are logged to $dir/web.log.
web_start() {
  local name=$1 status=$2 dir var
  dir=$(_helper_dir "$name")
  rm -f "$dir/port"
  printf '<!doctype html>\n<html><head><title>Admin console</title></head><body><h1>%s</h1><p>users: alice, bob; api key 0xfeedbeef</p></body></html>\n' \
    "$WEB_SECRET" >"$dir/page.html"
  python3 - "$status" "$dir/page.html" "$dir/port" >"$dir/web.log" 2>&1 3>&- <<'EOF' &
import os, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
status, page, port_file = int(sys.argv[1]), open(sys.argv[2], "rb").read(), sys.argv[3]
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self):
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(page)
    do_GET = do_HEAD = do_POST = do_PUT = reply
    def log_message(self, fmt, *args):
        print(fmt % args, file=sys.stderr, flush=True)
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
with open(port_file + ".tmp", "w") as f:
    f.write(f"{server.server_address[1]}\n")
os.replace(port_file + ".tmp", port_file)
server.serve_forever()
EOF
  echo $! >"$dir/pid"
  wait_until 10 test -s "$dir/port" || { cat "$dir/web.log" >&2; return 1; }
  var="WEB_$(tr '[:lower:]-' '[:upper:]_' <<<"$name")"
  printf -v "$var" '%s' "127.0.0.1:$(cat "$dir/port")"
  printf -v "${var}_BYTES" '%s' "$(stat -c %s "$dir/page.html")"
  export "${var?}" "${var}_BYTES"
}

# hang_start NAME: an endpoint that accepts connections, reads, and never answers
# (lib/fault_proxy.py --mode hang, which logs each connection to $dir/hang.log); exports
# REG_<NAME>=127.0.0.1:PORT.
hang_start() {
  local name=$1 dir var
  dir=$(_helper_dir "$name")
  rm -f "$dir/port"
  python3 "$E2E_DIR/lib/fault_proxy.py" --mode hang --port-file "$dir/port" >/dev/null 2>"$dir/hang.log" 3>&- &
  echo $! >"$dir/pid"
  wait_until 10 test -s "$dir/port" || { cat "$dir/hang.log" >&2; return 1; }
  var="REG_$(tr '[:lower:]-' '[:upper:]_' <<<"$name")"
  printf -v "$var" '%s' "127.0.0.1:$(cat "$dir/port")"
  export "${var?}"
}

# hang_connections NAME: how many connections the hung endpoint NAME accepted.
hang_connections() {
  grep -c 'connection held' "$(e2e_workdir)/registries/$1/hang.log" || true
}

# millis: wall clock in milliseconds.
millis() { date +%s%3N; }
