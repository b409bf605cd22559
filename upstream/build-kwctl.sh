#!/usr/bin/env bash
# build-kwctl.sh SRC [OUT_DIR]
#
# Applies the patch series in upstream/kubewarden/ to a checkout of
# kubewarden/kubewarden-controller (the monorepo holding policy-evaluator, policy-server and
# kwctl) and builds kwctl from it with `cargo build --release -p kwctl`.
#
#   SRC      a git checkout of kubewarden/kubewarden-controller. The series is applied on a
#            branch `resolve-images` created at the base commit (BASE below); SRC's own
#            branches and the work tree's committed state are left alone, but uncommitted
#            changes to tracked files make the script stop.
#   OUT_DIR  where the stripped binary is copied (default /work/kwctl-patched): OUT_DIR/kwctl
#
# Time: a first build takes 12 minutes on two idle cores and up to 40 on a busy machine
# (wasmtime, cranelift, aws-lc-sys and ~700 crates); later builds after a change to the series
# take a few minutes. The build
# runs under `nice -n 10` so that it does not starve other work on the machine.
#
# Environment:
#   BASE                  base commit (default 3460bb719b3816ddf5eb958665282c9b9ce8ee29)
#   CARGO_TARGET_DIR      cargo's target directory (default SRC/target)
#   DOCKER_CREDENTIAL_SRC a checkout of the git dependency `docker_credential` at commit
#                         b3b60f5c8df32a439badc76d8610a88878c56597 (flavio/docker_credential,
#                         branch fix-handle-config-without-auth-field; the same commit is in
#                         keirlawson/docker_credential). Only needed where cargo cannot fetch
#                         git dependencies; it is passed to cargo as a `[patch]` with
#                         `--config`, nothing is written into SRC except cargo's Cargo.lock
#                         update of that one entry.
#   SKIP_APPLY=1          build SRC as it is (the series is already applied)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
patches_dir="$here/kubewarden"
SRC=${1:?usage: build-kwctl.sh SRC [OUT_DIR]}
OUT_DIR=${2:-/work/kwctl-patched}
BASE=${BASE:-3460bb719b3816ddf5eb958665282c9b9ce8ee29}
DOCKER_CREDENTIAL_COMMIT=b3b60f5c8df32a439badc76d8610a88878c56597

SRC=$(cd "$SRC" && pwd)
cd "$SRC"
git rev-parse --git-dir >/dev/null

if [[ "${SKIP_APPLY:-}" != 1 ]]; then
  if ! git diff --quiet -- . ':!Cargo.lock' || ! git diff --cached --quiet; then
    echo "build-kwctl.sh: $SRC has uncommitted changes; commit or stash them first" >&2
    exit 1
  fi
  git cat-file -e "$BASE^{commit}" 2>/dev/null || {
    echo "build-kwctl.sh: base commit $BASE is not in $SRC (fetch it first)" >&2
    exit 1
  }
  # Cargo.lock is rewritten by the docker_credential [patch]; it is not part of the series.
  git checkout -q -- Cargo.lock
  git checkout -q -B resolve-images "$BASE"
  shopt -s nullglob
  series=("$patches_dir"/*.patch)
  [[ ${#series[@]} -gt 0 ]] || { echo "build-kwctl.sh: no patches in $patches_dir" >&2; exit 1; }
  # A fixed identity, so that `git am` works on machines without a git identity.
  git -c user.name=build-kwctl -c user.email=build-kwctl@localhost am -q --3way "${series[@]}"
  echo "build-kwctl.sh: applied ${#series[@]} patches on $(git rev-parse --short "$BASE"):"
  git log --oneline "$BASE..HEAD"
fi

cargo_args=(build --release -p kwctl)
if [[ -n "${DOCKER_CREDENTIAL_SRC:-}" ]]; then
  dc=$(cd "$DOCKER_CREDENTIAL_SRC" && pwd)
  have=$(git -C "$dc" rev-parse HEAD 2>/dev/null || echo unknown)
  if [[ "$have" != "$DOCKER_CREDENTIAL_COMMIT" ]]; then
    echo "build-kwctl.sh: warning: $dc is at $have, upstream's Cargo.lock pins $DOCKER_CREDENTIAL_COMMIT" >&2
  fi
  cargo_args+=(--config "patch.'https://github.com/flavio/docker_credential.git'.docker_credential.path='$dc'")
fi

started=$(date +%s)
nice -n 10 cargo "${cargo_args[@]}"
elapsed=$(($(date +%s) - started))

target_dir=${CARGO_TARGET_DIR:-$SRC/target}
mkdir -p "$OUT_DIR"
cp "$target_dir/release/kwctl" "$OUT_DIR/kwctl.tmp"
strip "$OUT_DIR/kwctl.tmp" 2>/dev/null || true
mv "$OUT_DIR/kwctl.tmp" "$OUT_DIR/kwctl"
{
  echo "kwctl built from kubewarden/kubewarden-controller $(git rev-parse "$BASE")"
  echo "with the series of $patches_dir:"
  git log --format='  %s' --reverse "$BASE..HEAD"
  echo "build time: ${elapsed}s"
} >"$OUT_DIR/BUILD-INFO"
echo "build-kwctl.sh: $OUT_DIR/kwctl ($("$OUT_DIR/kwctl" --version 2>/dev/null | head -n1)), built in ${elapsed}s"
