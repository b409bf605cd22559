#!/usr/bin/env bats
# Smoke test of the e2e infrastructure itself: the three registry flavours start, test images
# built without Docker push and are visible to skopeo, and nothing is left running.

bats_require_minimum_version 1.5.0

setup_file() {
  load lib/common
  on_kwctl && return 0
  registry_start anon
  registry_start auth
  registry_start tls
  local single multi
  single=$(build_image smoke-single)
  multi=$(build_multiarch_image smoke-multi)
  push_image "$single" anon test/app:v1
  push_image "$single" anon test/app:v2s2 --format v2s2
  push_image "$multi" anon test/multi:v1 --all
  push_image "$single" anon team/sub/app:1.0
  push_image "$single" auth private/app:v1
  push_image "$single" tls secure/app:v1
}

teardown_file() {
  load lib/common
  registry_stop_all
  local left
  left=$(registry_pids)
  [[ -z "$left" ]] || { echo "registries still running: $left" >&2; return 1; }
}

setup() {
  load lib/common
  # No host is involved here: the kwctl pass has nothing to add.
  if on_kwctl; then skip "infrastructure only, checked in the test-host pass"; fi
}

# http_status URL [CURL OPTIONS...]: the HTTP status of a HEAD with the manifest media types.
http_status() {
  local url=$1
  shift
  curl -s --noproxy '*' -o /dev/null -w '%{http_code}' -I "$@" \
    -H 'Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json' \
    "$url"
}

@test "anonymous registry serves /v2/ on loopback" {
  [[ "$REG_ANON" =~ ^127\.0\.0\.1:[0-9]+$ ]]
  [ "$(http_status "http://$REG_ANON/v2/")" = 200 ]
}

@test "single-platform image is pushed as an OCI manifest and its digest recorded" {
  run -0 skopeo inspect --raw --tls-verify=false "docker://$REG_ANON/test/app:v1"
  [ "$(jq -r .mediaType <<<"$output")" = application/vnd.oci.image.manifest.v1+json ]
  run -0 skopeo inspect --tls-verify=false --format '{{.Digest}} {{.Os}}/{{.Architecture}}' "docker://$REG_ANON/test/app:v1"
  [ "$output" = "$(digest_of "$REG_ANON/test/app:v1") linux/amd64" ]
  # The registry announces the same digest on HEAD, as the host will see it.
  run -0 curl -sI "http://$REG_ANON/v2/test/app/manifests/v1" -H 'Accept: application/vnd.oci.image.manifest.v1+json'
  [[ "$output" == *"Docker-Content-Digest: $(digest_of "$REG_ANON/test/app:v1")"* ]]
}

@test "multi-platform index holds linux/amd64 and linux/arm64" {
  run -0 skopeo inspect --raw --tls-verify=false "docker://$REG_ANON/test/multi:v1"
  [ "$(jq -r .mediaType <<<"$output")" = application/vnd.oci.image.index.v1+json ]
  [ "$(jq -c '[.manifests[].platform | .os + "/" + .architecture]' <<<"$output")" = '["linux/amd64","linux/arm64"]' ]
  # the recorded digest is the index's (what manifest_digest returns), as the registry says
  run -0 curl -sI "http://$REG_ANON/v2/test/multi/manifests/v1" -H 'Accept: application/vnd.oci.image.index.v1+json'
  [[ "$output" == *"Docker-Content-Digest: $(digest_of "$REG_ANON/test/multi:v1")"* ]]
  run -0 skopeo inspect --raw --tls-verify=false "docker://$REG_ANON/test/multi:v1"
  # every platform manifest was pushed too
  local d
  for d in $(jq -r '.manifests[].digest' <<<"$output"); do
    [ "$(http_status "http://$REG_ANON/v2/test/multi/manifests/$d")" = 200 ]
  done
}

@test "Docker schema 2 manifest is pushed with --format v2s2" {
  run -0 skopeo inspect --raw --tls-verify=false "docker://$REG_ANON/test/app:v2s2"
  [ "$(jq -r .mediaType <<<"$output")" = application/vnd.docker.distribution.manifest.v2+json ]
  [ "$(digest_of "$REG_ANON/test/app:v2s2")" != "$(digest_of "$REG_ANON/test/app:v1")" ]
}

@test "nested repository tag is pushed" {
  run -0 skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$REG_ANON/team/sub/app:1.0"
  [ "$output" = "$(digest_of "$REG_ANON/team/sub/app:1.0")" ]
}

@test "missing tag and missing repository answer 404" {
  [ "$(http_status "http://$REG_ANON/v2/test/app/manifests/does-not-exist")" = 404 ]
  [ "$(http_status "http://$REG_ANON/v2/test/nothing-here/manifests/v1")" = 404 ]
  run -0 curl -s "http://$REG_ANON/v2/test/app/manifests/does-not-exist"
  [[ "$output" == *MANIFEST_UNKNOWN* ]]
}

@test "auth registry rejects anonymous requests with 401 and accepts the htpasswd user" {
  [ "$(http_status "http://$REG_AUTH/v2/private/app/manifests/v1")" = 401 ]
  run -0 curl -sI "http://$REG_AUTH/v2/"
  [[ "$output" == *'Www-Authenticate: Basic realm="e2e-realm"'* ]]
  run ! skopeo inspect --raw --tls-verify=false --no-creds "docker://$REG_AUTH/private/app:v1"
  [[ "$output" == *"unauthorized"* || "$output" == *"401"* ]]
  [ "$(http_status "http://$REG_AUTH/v2/private/app/manifests/v1" -u "$REG_AUTH_USER:wrong")" = 401 ]
  [ "$(http_status "http://$REG_AUTH/v2/private/app/manifests/v1" -u "$REG_AUTH_USER:$REG_AUTH_PASSWORD")" = 200 ]
  run -0 skopeo inspect --format '{{.Digest}}' --tls-verify=false --creds "$REG_AUTH_USER:$REG_AUTH_PASSWORD" "docker://$REG_AUTH/private/app:v1"
  [ "$output" = "$(digest_of "$REG_AUTH/private/app:v1")" ]
}

@test "TLS registry is trusted with its CA only" {
  [ -f "$REG_TLS_CA" ]
  run -0 openssl x509 -in "$(dirname "$REG_TLS_CA")/server.pem" -noout -ext subjectAltName
  [[ "$output" == *"IP Address:127.0.0.1"* && "$output" == *"DNS:localhost"* ]]
  [ "$(http_status "https://$REG_TLS/v2/secure/app/manifests/v1" --cacert "$REG_TLS_CA")" = 200 ]
  [ "$(http_status "https://localhost:${REG_TLS#*:}/v2/secure/app/manifests/v1" --cacert "$REG_TLS_CA")" = 200 ]
  # without the CA the certificate is not trusted (curl exit 60)
  run -60 curl -s -o /dev/null "https://$REG_TLS/v2/"
  run -0 skopeo inspect --format '{{.Digest}}' --cert-dir "$REG_TLS_CERT_DIR" "docker://$REG_TLS/secure/app:v1"
  [ "$output" = "$(digest_of "$REG_TLS/secure/app:v1")" ]
}

@test "a stopped registry leaves no process and no listener" {
  registry_start anon extra
  local port=${REG_EXTRA#*:} pid
  pid=$(cat "$(e2e_workdir)/registries/extra/pid")
  kill -0 "$pid"
  registry_stop extra
  run ! kill -0 "$pid"
  run curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/v2/"
  [ "$status" -eq 7 ] # connection refused
  [ -z "$(registry_pids | grep -x "$pid" || true)" ]
}

@test "kwctl's offline trust configuration is made once, whoever asks for it at the same time" {
  # suites run two at a time share kwctl's HOME: their first runs ask together
  local home
  home=$(mktemp -d "$(e2e_workdir)/kwctl-home.XXXXXX")
  for i in 1 2 3 4 5 6; do
    (E2E_KWCTL_HOME="$home" kwctl_trust_config >"$home/asked-$i" 2>&1 || echo failed >>"$home/asked-$i") &
  done
  wait
  for i in 1 2 3 4 5 6; do
    [ "$(cat "$home/asked-$i")" = "$home/sigstore/trust-config.json" ]
  done
  [ "$(jq -r .mediaType "$home/sigstore/trust-config.json")" = "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json" ]
  # nothing half-made is left beside it
  [ "$(ls "$home/sigstore")" = trust-config.json ]
}
