#!/usr/bin/env bash
# build.sh [-s SERIES]... [-b BINARY]... SRC [OUT_DIR]
#
# Applies patch series of upstream/ to a checkout of kubewarden/kubewarden-controller (the
# monorepo holding policy-evaluator, policy-server and kwctl) and builds kwctl and
# policy-server from it with `cargo build --release`.
#
#   -s SERIES  a directory of upstream/ holding `git format-patch` files (oci-lookups,
#              kubewarden, ...), applied in the order given. Default: the series listed in
#              SERIES (below): oci-lookups, then kubewarden, which is built on it.
#              `-s none` builds the base commit as it is (the stock build).
#   -b BINARY  kwctl or policy-server; default both.
#   SRC        a git checkout of kubewarden/kubewarden-controller. The series are applied on
#              a branch `upstream-series` created at the base commit (BASE below); SRC's other
#              branches and the committed state of its work tree are left alone, but
#              uncommitted changes to tracked files make the script stop.
#   OUT_DIR    where the stripped binaries go (default /work/build/out): OUT_DIR/kwctl,
#              OUT_DIR/policy-server, and OUT_DIR/BUILD-INFO saying what they were built from.
#
# Time: a first build takes 12 minutes on two idle cores and up to 40 on a busy machine
# (wasmtime, cranelift, aws-lc-sys and ~700 crates); later builds after a change to a series
# take a few minutes. The build runs under `nice -n 10`.
#
# Environment:
#   BASE                  base commit (default 3460bb719b3816ddf5eb958665282c9b9ce8ee29)
#   SERIES                default series, space-separated (default "oci-lookups kubewarden")
#   CARGO_TARGET_DIR      cargo's target directory (default SRC/target)
#   DOCKER_CREDENTIAL_SRC a checkout of the git dependency `docker_credential` at commit
#                         b3b60f5c8df32a439badc76d8610a88878c56597 (flavio/docker_credential,
#                         branch fix-handle-config-without-auth-field; the same commit is in
#                         keirlawson/docker_credential). Only needed where cargo cannot fetch
#                         git dependencies; it is passed to cargo as a `[patch]` with
#                         `--config`, nothing is written into SRC except cargo's Cargo.lock
#                         update of that one entry.
#   SKIP_APPLY=1          build SRC as it is (the series are already applied)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BASE=${BASE:-3460bb719b3816ddf5eb958665282c9b9ce8ee29}
DOCKER_CREDENTIAL_COMMIT=b3b60f5c8df32a439badc76d8610a88878c56597
usage="usage: build.sh [-s SERIES]... [-b kwctl|policy-server]... SRC [OUT_DIR]"

series=()
binaries=()
while getopts 's:b:h' opt; do
  case $opt in
    s) series+=("$OPTARG") ;;
    b)
      case $OPTARG in
        kwctl | policy-server) binaries+=("$OPTARG") ;;
        *) echo "build.sh: unknown binary $OPTARG" >&2; exit 2 ;;
      esac
      ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
SRC=${1:?$usage}
OUT_DIR=${2:-/work/build/out}
[[ ${#series[@]} -gt 0 ]] || read -r -a series <<<"${SERIES:-oci-lookups kubewarden}"
[[ ${#binaries[@]} -gt 0 ]] || binaries=(kwctl policy-server)
if [[ ${#series[@]} -eq 1 && ${series[0]} == none ]]; then
  series=()
fi

patches=()
for s in "${series[@]}"; do
  dir=$here/$s
  [[ -d "$dir" ]] || { echo "build.sh: no series $dir" >&2; exit 2; }
  shopt -s nullglob
  files=("$dir"/*.patch)
  shopt -u nullglob
  [[ ${#files[@]} -gt 0 ]] || { echo "build.sh: no patches in $dir" >&2; exit 2; }
  patches+=("${files[@]}")
done

SRC=$(cd "$SRC" && pwd)
cd "$SRC"
git rev-parse --git-dir >/dev/null

if [[ "${SKIP_APPLY:-}" != 1 ]]; then
  if ! git diff --quiet -- . ':!Cargo.lock' || ! git diff --cached --quiet; then
    echo "build.sh: $SRC has uncommitted changes; commit or stash them first" >&2
    exit 1
  fi
  git cat-file -e "$BASE^{commit}" 2>/dev/null || {
    echo "build.sh: base commit $BASE is not in $SRC (fetch it first)" >&2
    exit 1
  }
  # Cargo.lock is rewritten by the docker_credential [patch]; it is not part of any series.
  git checkout -q -- Cargo.lock
  git checkout -q -B upstream-series "$BASE"
  if [[ ${#patches[@]} -gt 0 ]]; then
    # A fixed identity, so that `git am` works on machines without a git identity.
    git -c user.name=build.sh -c user.email=build.sh@localhost am -q --3way "${patches[@]}"
  fi
  echo "build.sh: applied ${#patches[@]} patches (${series[*]:-none}) on $(git rev-parse --short "$BASE"):"
  git log --oneline "$BASE..HEAD"
fi

cargo_args=(build --release)
for b in "${binaries[@]}"; do cargo_args+=(-p "$b"); done
if [[ -n "${DOCKER_CREDENTIAL_SRC:-}" ]]; then
  dc=$(cd "$DOCKER_CREDENTIAL_SRC" && pwd)
  have=$(git -C "$dc" rev-parse HEAD 2>/dev/null || echo unknown)
  if [[ "$have" != "$DOCKER_CREDENTIAL_COMMIT" ]]; then
    echo "build.sh: warning: $dc is at $have, upstream's Cargo.lock pins $DOCKER_CREDENTIAL_COMMIT" >&2
  fi
  cargo_args+=(--config "patch.'https://github.com/flavio/docker_credential.git'.docker_credential.path='$dc'")
fi

started=$(date +%s)
nice -n 10 cargo "${cargo_args[@]}"
elapsed=$(($(date +%s) - started))

target_dir=${CARGO_TARGET_DIR:-$SRC/target}
mkdir -p "$OUT_DIR"
for b in "${binaries[@]}"; do
  cp "$target_dir/release/$b" "$OUT_DIR/$b.tmp"
  strip "$OUT_DIR/$b.tmp" 2>/dev/null || true
  mv "$OUT_DIR/$b.tmp" "$OUT_DIR/$b"
done
{
  echo "${binaries[*]} built from kubewarden/kubewarden-controller $(git rev-parse "$BASE")"
  echo "with the series ${series[*]:-none} of $here:"
  git log --format='  %s' --reverse "$BASE..HEAD"
  echo "build time: ${elapsed}s"
} >"$OUT_DIR/BUILD-INFO"
for b in "${binaries[@]}"; do
  echo "build.sh: $OUT_DIR/$b ($("$OUT_DIR/$b" --version 2>/dev/null | head -n1))"
done
echo "build.sh: built in ${elapsed}s"
