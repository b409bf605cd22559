#!/usr/bin/env python3
"""The repository holds only what this project wrote (CONTRIBUTING.md, "Only our own code").

Fails, naming each file and line, on what another project wrote or what builds another
project's code:

- a tracked patch or diff (`*.patch`, `*.diff`), or Python bytecode (`*.pyc`, `__pycache__/`);
- a tracked binary: an ELF, Mach-O, PE or WebAssembly module (build output, never source);
- a line that reads the engine from a directory beside the clone instead of the user's install
  (Kubewarden's kwctl and policy-server come from KWCTL / POLICY_SERVER or PATH);
- a script, Makefile or workflow line that fetches another project's source, applies a patch
  to it, or compiles it from a checkout (`git clone`, `git am`, `git apply`, `patch -p1`,
  `cargo install --git`, `go build`, ...). Installing a released package by name through its
  registry's own client (apt-get, cargo install NAME, npm ci) is how a user installs a tool,
  and is not flagged.

Run from the repository's root (or pass it as the one argument); reads what git tracks.
"""

import pathlib
import re
import subprocess
import sys

GENERATED = re.compile(r"(\.(patch|diff|pyc|pyo)$)|(^|/)__pycache__/")

# Magic numbers of executable formats.
BINARY_MAGIC = {
    b"\x7fELF": "an ELF executable or library",
    b"\x00asm": "a WebAssembly module",
    b"\xcf\xfa\xed\xfe": "a Mach-O executable",
    b"\xfe\xed\xfa\xcf": "a Mach-O executable",
    b"MZ": "a Windows executable",
}

# The engine read from beside the clone: `../shared` followed by `/tools`. Written in two
# pieces so that this file does not flag itself.
OUTSIDE_ENGINE = re.compile(re.escape("shared" + "/tools"))

# Lines of scripts that bring in another project's source or build it.
BUILDS_OTHERS = [
    (re.compile(r"\bgit\s+(clone|am|apply|format-patch|submodule\s+add)\b"),
     "fetches or patches another project's source"),
    (re.compile(r"\bpatch\s+-p\d"), "applies a patch"),
    (re.compile(r"\bcargo\s+(install|build)\b[^\n#]*--(git|manifest-path\s+\.\.)"),
     "builds a crate from a checkout"),
    (re.compile(r"\bgo\s+(build|install|get)\b"), "builds Go code"),
]
SCRIPT = re.compile(r"(\.(sh|bash|bats|py|mk|ya?ml|cjs|js)$)|(^|/)(Makefile|Dockerfile)$|^\.ci/")


def tracked(root: pathlib.Path) -> list:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
    )
    return [p for p in out.stdout.decode().split("\0") if p]


def problems(root: pathlib.Path) -> list:
    found = []
    # The checker and its tests name what they look for.
    checker = pathlib.Path(__file__).resolve()
    own = {checker, checker.with_name("test_provenance.py")}
    for name in tracked(root):
        path = root / name
        if GENERATED.search(name):
            found.append(f"{name}: a patch, diff or bytecode file: not ours to track")
            continue
        if not path.is_file() or path.resolve() in own:
            continue
        data = path.read_bytes()
        kind = next((k for magic, k in BINARY_MAGIC.items() if data.startswith(magic)), None)
        if kind:
            found.append(f"{name}: {kind}: build output is never tracked")
            continue
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_ENGINE.search(line):
                found.append(
                    f"{name}:{number}: reads the engine from beside the clone; "
                    "take kwctl and policy-server from KWCTL / POLICY_SERVER or PATH"
                )
            if SCRIPT.search(name):
                for pattern, why in BUILDS_OTHERS:
                    if pattern.search(line):
                        found.append(f"{name}:{number}: {why}: {line.strip()}")
    return found


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    found = problems(root)
    for problem in found:
        print(problem)
    if found:
        print(f"provenance: {len(found)} problem(s): the repository holds only what it wrote")
        return 1
    print(f"provenance: {len(tracked(root))} tracked files, none another project's or its build")
    return 0


if __name__ == "__main__":
    sys.exit(main())
