#!/usr/bin/env bash
# check-commit.sh: build, lint and unit-test the crates the commit at HEAD touches, in a
# checkout of kubewarden/kubewarden-controller. Made for
#
#   git rebase --exec /path/to/upstream/check-commit.sh 3460bb71
#
# so that every commit of a series is checked on its own, as upstream's CI would see it.
#
#   cargo build  -p policy-evaluator -p policy-fetcher -p policy-server -p kwctl
#   cargo clippy -p <same> -- -D warnings  (upstream CI's `make -C crates/<crate> lint`)
#   cargo test   -p <each crate HEAD touches> --lib (kwctl: --bins)
#
# Tests that need the internet (a policy from ghcr.io, Sigstore's TUF root) are skipped by
# name, listed in SKIP below; there is none other. Environment: DOCKER_CREDENTIAL_SRC as in
# build.sh (a checkout of the git dependency, for machines that cannot fetch git sources);
# CHECK_LOG, a file each step's outcome is appended to.
set -euo pipefail

SKIP=(--skip policy_downloader::tests::verify_success --skip policy_downloader::tests::verify_error)
crates=(policy-evaluator policy-fetcher policy-server kwctl)
log=${CHECK_LOG:-/dev/null}

config=()
if [[ -n "${DOCKER_CREDENTIAL_SRC:-}" ]]; then
  # cargo rewrites Cargo.lock for the [patch]; restore it so that the rebase can go on
  trap 'git checkout -q -- Cargo.lock' EXIT
  config=(--config "patch.'https://github.com/flavio/docker_credential.git'.docker_credential.path='$(cd "$DOCKER_CREDENTIAL_SRC" && pwd)'")
fi
pkgs=()
for c in "${crates[@]}"; do pkgs+=(-p "$c"); done

commit=$(git log -1 --format='%h %s')
step() {
  local name=$1 started=$SECONDS
  shift
  if nice -n 10 "$@"; then
    echo "$commit | $name | ok | $((SECONDS - started)) s" >>"$log"
  else
    echo "$commit | $name | FAILED | $((SECONDS - started)) s" >>"$log"
    return 1
  fi
}

step "cargo fmt --all -- --check" cargo fmt --all -- --check
step "cargo build ${pkgs[*]}" cargo build "${config[@]}" "${pkgs[@]}"
step "cargo clippy ${pkgs[*]} -- -D warnings" \
  cargo clippy "${config[@]}" "${pkgs[@]}" -- -D warnings
touched=$(git diff --name-only HEAD^ HEAD -- crates | cut -d/ -f2 | sort -u)
for c in $touched; do
  case $c in
    kwctl) step "cargo test -p kwctl --bins" cargo test "${config[@]}" -p kwctl --bins -- "${SKIP[@]}" ;;
    policy-evaluator | policy-fetcher | policy-server)
      step "cargo test -p $c --lib" cargo test "${config[@]}" -p "$c" --lib -- "${SKIP[@]}" ;;
  esac
done
