#!/usr/bin/env python3
"""Every package name Cargo.lock holds in more than one version is explained in
CONTRIBUTING.md's "Two versions of one package" (a list line starting with it in backticks), and
every name that list explains is still duplicated, so the list stays true both ways."""

import re
import sys
from collections import defaultdict
from pathlib import Path

SECTION = "## Two versions of one package"


def duplicated(lock: str) -> dict[str, list[str]]:
    versions = defaultdict(list)
    for name, version in re.findall(r'^name = "([^"]+)"\nversion = "([^"]+)"', lock, re.M):
        versions[name].append(version)
    return {name: v for name, v in versions.items() if len(v) > 1}


def explained(contributing: str) -> set[str]:
    if SECTION not in contributing:
        return set()
    section = contributing.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `([A-Za-z0-9_-]+)`", section, re.M))


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    dups = duplicated((root / "Cargo.lock").read_text())
    told = explained((root / "CONTRIBUTING.md").read_text())
    errors = [f"{n} ({', '.join(v)}) is not explained" for n, v in sorted(dups.items()) if n not in told]
    errors += [f"{n} is explained but no longer duplicated" for n in sorted(told - dups.keys())]
    for error in errors:
        print(f"lock-duplicates: {error} in CONTRIBUTING.md's '{SECTION}'", file=sys.stderr)
    if errors:
        return 1
    print(f"lock-duplicates: {len(dups)} names in more than one version, each explained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
