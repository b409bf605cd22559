#!/usr/bin/env python3
"""Every crate that only runs while building (procedural macros, build scripts, code generators
and what they alone use) is unoptimised in the dev profile, and every crate Cargo.toml's
`[profile.dev.package.*]` names is still in the dependency graph.

Why: `[profile.dev.package."*"] opt-level = 1` takes precedence over Cargo's `build-override`,
so a build-only crate that Cargo.toml does not name is compiled optimised for nothing (syn: 16 s
of CPU instead of 3). A new macro dependency would otherwise slow every clean check silently.

Usage: python3 scripts/build-only-packages.py [--print], from the repository root (`make lint`).
With --print, writes the sections Cargo.toml should hold for the build-only crates.
"""
import subprocess
import sys
import tomllib


def packages(edges):
    """Names of the non-member packages `cargo tree` reaches over `edges` (host target)."""
    out = subprocess.run(
        ["cargo", "tree", "--workspace", "-e", edges, "--prefix", "none", "--format", "{p}"],
        capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        # members are printed with their path: "name v0.1.0 (/path)"
        if len(fields) >= 2 and not (len(fields) > 2 and fields[2].startswith("(/")):
            names.add(fields[0])
    return names


def main():
    everything = packages("normal,dev,build")
    at_run_time = packages("normal,dev,no-proc-macro")
    build_only = everything - at_run_time
    if "--print" in sys.argv:
        for name in sorted(build_only):
            print(f"[profile.dev.package.{name}]\nopt-level = 0\n")
        return 0
    with open("Cargo.toml", "rb") as manifest:
        overrides = tomllib.load(manifest)["profile"]["dev"]["package"]
    unoptimised = {name for name, settings in overrides.items() if settings.get("opt-level") == 0}
    problems = [f"{name}: only runs while building, but is optimised: add "
                f"[profile.dev.package.{name}] opt-level = 0 to Cargo.toml"
                for name in sorted(build_only - unoptimised)]
    problems += [f"{name}: [profile.dev.package.{name}] names a crate that is no longer a "
                 "dependency: remove it from Cargo.toml"
                 for name in sorted(set(overrides) - everything - {"*"})]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
