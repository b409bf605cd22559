#!/usr/bin/env bash
# Seeds the corpora, builds every fuzz target and runs each for SECONDS (default 30), one after
# the other. cargo-fuzz passes nightly -Z flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain
# accept them. No sanitizer (the policy has no unsafe code, and a panic is what is looked
# for), the workspace's dev profile (its dependencies optimised, debug assertions on so that
# integer overflows panic too; the release profile's fat LTO would only slow the build). Each
# run's full log is fuzz/artifacts/<target>.log; a crash stops here, its input in
# fuzz/artifacts/<target>/. Installs cargo-fuzz first when it is missing: only fuzzing needs
# it, so `.ci/setup` (and `make demo`) does not.
#
# Usage: bash fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail

fuzz=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
seconds=${1:-30}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(reference docker_config keyring settings validate json_extent)
# Its own target directory: RUSTC_BOOTSTRAP re-runs the build scripts that probe for nightly
# features (proc-macro2, anyhow, …), which would otherwise invalidate the workspace's
# target/debug for the next `cargo build` or `cargo test`.
flags=(--sanitizer none --dev --features libfuzzer --target-dir "$(cd "$fuzz/.." && pwd)/target/fuzz")
export RUSTC_BOOTSTRAP=1

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
bash "$fuzz/seed.sh"
cd "$fuzz"
cargo fuzz build "${flags[@]}"
mkdir -p artifacts
for target in "${targets[@]}"; do
  log="artifacts/$target.log"
  echo "== fuzz $target for ${seconds}s (log: fuzz/$log)" >&2
  if cargo fuzz run "${flags[@]}" "$target" -- \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1 >"$log" 2>&1; then
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" >&2 || true
  else
    grep -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)|NEW_FUNC|Uses: ' "$log" | tail -n 40 >&2
    echo "fuzz $target FAILED: the input is in fuzz/artifacts/$target/; see CONTRIBUTING.md, Fuzzing" >&2
    exit 1
  fi
done
