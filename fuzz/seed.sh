#!/usr/bin/env bash
# Fills fuzz/corpus/<target>/ with seed inputs taken from the unit and end-to-end fixtures.
# Idempotent: each seed is stored under the hash of its content, next to whatever the fuzzer
# has already found. Needs jq. Run from anywhere: `bash fuzz/seed.sh`.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
corpus="$root/fuzz/corpus"
mkdir -p "$corpus"/{reference,docker_config,keyring,settings,validate,json_extent}

# seed TARGET: stores stdin as one seed of TARGET: staged under a unique name, then named
# by the hash of its content, every seed at once, at the end (a few processes per seed, not
# five: the script writes a thousand).
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
count=0
seed() {
  count=$((count + 1))
  cat >"$staging/$1.$BASHPID.$count"
}
# seed_text TARGET TEXT: TEXT as one seed of TARGET, without a process.
seed_text() {
  count=$((count + 1))
  printf '%s' "$2" >"$staging/$1.$BASHPID.$count"
}
# flush: moves the staged seeds into the corpus under their names.
flush() {
  local hash path name
  compgen -G "$staging/*.*" >/dev/null || return 0
  sha1sum "$staging"/*.* | while read -r hash path; do
    name=${path##*/}
    mv -f "$path" "$corpus/${name%%.*}/seed-${hash:0:16}"
  done
}

requests=("$root"/tests/fixtures/requests/*.json "$root"/e2e-tests/sessions/*.request.json)
scenarios=("$root"/e2e-tests/scenarios/*.json)

# reference: every image of the fixtures, and the strings of reference.rs's test tables.
sha="sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
{
  jq -r '.. | objects | .image? // empty | strings' "${requests[@]}"
  grep -o '"[^"]*"' "$root/src/vocabulary/reference/tests.rs" | sed 's/^"//; s/"$//' |
    grep -v '[{}]'
  printf '%s\n' "busybox@$sha" "ghcr.io/org/app:1.2@$sha" "[::1]:5000/team/app:v1@$sha" \
    "repo@sha512:$(printf 'a%.0s' {1..128})" "localhost:5000" "index.docker.io/busybox"
} | sort -u | while IFS= read -r image; do
  seed_text reference "$image"
done
flush # the sections below read the reference seeds from the corpus

# settings: the end-to-end scenarios and the settings of recorded sessions.
for file in "${scenarios[@]}"; do
  jq -c . "$file" | tr -d '\n' | seed settings
done
jq -c '.settings // empty' "${requests[@]}" | while IFS= read -r settings; do
  printf '%s' "$settings" | seed settings
done
printf '%s' '{"timeBudgetMs":1,"exemptImages":["docker.io/library/*","[a-z]?x*"],"exemptNamespaces":["kube-system"],"pullSecrets":{"consult":false,"credentialedLookups":true}}' |
  seed settings
printf '%s' 'null' | seed settings

# validate: each request as is (settings null), with each scenario's settings, and with the
# pull secrets and ServiceAccount of the fuzz target's cluster.
jq -s . "${scenarios[@]}" >"$staging/scenarios"
for request in "${requests[@]}"; do
  seed validate <"$request"
  # one line a seed: the request with each scenario's settings, then the two edits below
  jq -c --slurpfile s "$staging/scenarios" '($s[0][] as $settings | {settings: $settings, request: .request}),
    (.request as $r
    | ($r.object | if .spec.template then ["spec","template","spec"]
        elif .spec.jobTemplate then ["spec","jobTemplate","spec","template","spec"]
        else ["spec"] end) as $path
    | {settings: {pullSecrets: {credentialedLookups: true}},
       request: ($r | .object |= setpath($path + ["imagePullSecrets"];
         [{name: "regcred"}, {name: "legacy"}, {name: "broken"}, {name: "opaque"}, {name: "ghost"}]))},
      {settings: {actions: {unauthorized: "reject", uncoveredRegistry: "allow"}},
       request: ($r | .object |= setpath($path + ["serviceAccountName"]; "builder"))})' \
    "$request" | while IFS= read -r line; do seed_text validate "$line"$'\n'; done
done

# validate, image mode (an input not starting with `{`): images one a line.
images=$(for file in "$corpus"/reference/seed-*; do cat "$file"; echo; done)
printf '%s' "${images:0:4000}" | seed validate
printf '%s\n' registry.example.com/team/app:1.4.2 busybox:1.36 ghcr.io/org/private:1 \
  "registry.example.com/platform/migrate:2.1.0@$sha" NGINX "a/b:c@d" | seed validate

# docker_config: type byte (0 dockerconfigjson, 1 dockercfg), data byte (0 base64), mode byte
# (0: raw document, `$M` standing for a secret), then the document.
docker_config() { printf "$1"; printf '%s' "$2"; }
docker_config '\0\0\0' '{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}' | seed docker_config
docker_config '\0\0\0' '{"auths":{"https://u:$M@r.example/v2/":{"username":"u","password":"$M"}},"HttpHeaders":{"X":"$M"}}' | seed docker_config
docker_config '\0\0\0' '{"AUTHS":null,"auths":{"ghcr.io":{"auth":"$M"},"x":null}}' | seed docker_config
docker_config '\1\0\0' '{"https://index.docker.io/v1/":{"username":"$M","password":"$M","email":"e@x"}}' | seed docker_config
docker_config '\1\1\0' '{"*.example.com:5000/team":{"auth":"$M="}}' | seed docker_config
docker_config '\0\0\1' 'entries' | seed docker_config

# keyring: its input is structured (`arbitrary` reads entries and images from any bytes), so
# the image names of the reference seeds, a few joined together, give it keys and images
# shaped like the fixtures'.
for file in "$corpus"/reference/seed-*; do
  seed keyring <"$file"
done
printf '%s\n' "$images" | head -c 2000 | seed keyring
printf '\1\0\0\0registry.example.com\0\0\0\4user\1\1\1\0registry.example.com/team/app' | seed keyring

# json_extent: every scenario's settings and every request as they are, and a few texts that
# walk the scanner's edges (escapes, nesting, a value followed by more text); the first byte
# also cuts the input in two for the byte comparison.
for file in "${scenarios[@]}" "${requests[@]}"; do
  seed json_extent <"$file"
done
printf '%s' '["a\\", "\"", {"k": [[], {}]}, 1.5e3, null, "\u00e9"]' | seed json_extent
printf '%s' ' {"x": "}]"} trailing' | seed json_extent
printf '%s' 'abcdefghijklmnopabcdefghijklmnoq' | seed json_extent
flush
