#!/usr/bin/env python3
"""Commit subjects a reviewer can read (CONTRIBUTING.md, "Commits").

Every commit after BASE (the first argument; the Makefile's COMMIT_BASE) must have a subject
of the form `area: what changed`, at most 72 characters, and a subject that does not merely
log a CI run. Merge commits are exempt. A clone without BASE (a shallow one) is told so and
passes: there is nothing to compare against.
"""

import re
import subprocess
import sys

LIMIT = 72
# `area: what`, where the area is a path, a crate or a topic, several joined by commas.
SUBJECT = re.compile(r"^[A-Za-z0-9][\w./*-]*(, ?[\w./*-]+)*: \S")
CI_LOG = re.compile(r"^[^:]*: CI (at|run|passed|took)\b", re.IGNORECASE)


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def problems(base: str) -> list:
    log = git("log", "--no-merges", "--format=%h%x00%s", f"{base}..HEAD")
    if log.returncode != 0:
        raise RuntimeError(log.stderr.strip())
    found = []
    for line in log.stdout.splitlines():
        sha, subject = line.split("\0", 1)
        if len(subject) > LIMIT:
            found.append(f"{sha}: subject of {len(subject)} characters (at most {LIMIT})")
        if not SUBJECT.match(subject):
            found.append(f"{sha}: subject is not `area: what changed`: {subject[:60]}")
        if CI_LOG.match(subject):
            found.append(f"{sha}: a commit that only logs a CI run: {subject[:60]}")
    return found


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: commit-subjects.py BASE", file=sys.stderr)
        return 2
    base = sys.argv[1]
    if git("cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
        print(f"commit-subjects: {base} is not in this clone (shallow?): nothing checked")
        return 0
    try:
        found = problems(base)
    except RuntimeError as err:
        print(f"commit-subjects: git log failed: {err}", file=sys.stderr)
        return 1
    for problem in found:
        print(problem)
    count = len(git("rev-list", "--no-merges", f"{base}..HEAD").stdout.split())
    if found:
        print(f"commit-subjects: {len(found)} problem(s) in the {count} commits after {base}")
        return 1
    print(f"commit-subjects: the {count} commits after {base[:12]} read `area: what changed`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
