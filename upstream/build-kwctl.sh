#!/usr/bin/env bash
# build-kwctl.sh SRC [OUT_DIR]
#
# Kept for the scripts and documents that name it: builds kwctl alone from the series
# upstream/oci-lookups/ then upstream/kubewarden/ (the capability series, built on the first),
# as `build.sh -b kwctl SRC OUT_DIR` does; OUT_DIR defaults to /work/kwctl-patched as before.
# See build.sh for SRC, the environment (BASE, CARGO_TARGET_DIR, DOCKER_CREDENTIAL_SRC,
# SKIP_APPLY) and the build time.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=${1:?usage: build-kwctl.sh SRC [OUT_DIR]}
exec "$here/build.sh" -s oci-lookups -s kubewarden -b kwctl "$SRC" "${2:-/work/kwctl-patched}"
