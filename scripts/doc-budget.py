#!/usr/bin/env python3
"""The markdown stays within a budget of words per 1,000 lines of Rust (issue 57: kube keeps
85, ripgrep 328; explanation that belongs to an API lives in rustdoc, which is Rust).

Counts every tracked `*.md` file except CHANGELOG.md (a record of changes, not documentation)
against every tracked `*.rs` file. bench/results/*.md count: no script writes them (the bench
scripts print figures to the terminal; the pages are prose written by hand around those
figures), so they are documentation a reader keeps up like any other page. Words are
whitespace-separated tokens, as `wc -w` counts them; lines are `wc -l` lines.

Prints `docs: N words per 1,000 lines of Rust (budget B)`; exits 1 above the budget.
Usage: python3 scripts/doc-budget.py [BUDGET] (default 700), from the repository root.
"""
import pathlib
import subprocess
import sys

BUDGET = 700
EXCLUDED = {"CHANGELOG.md"}


def tracked(pattern):
    out = subprocess.run(["git", "ls-files", "-z", pattern], capture_output=True, check=True).stdout
    return [p for p in out.decode().split("\0") if p]


def counts(md_files, rs_files, read=lambda p: pathlib.Path(p).read_bytes()):
    """(words of markdown, lines of Rust) over the files given, CHANGELOG.md left out."""
    words = sum(len(read(p).split()) for p in md_files if pathlib.PurePath(p).name not in EXCLUDED)
    lines = sum(read(p).count(b"\n") for p in rs_files)
    return words, lines


def per_thousand(words, lines):
    return round(words * 1000 / lines) if lines else 0


def main(argv):
    budget = int(argv[1]) if len(argv) > 1 else BUDGET
    words, lines = counts(tracked("*.md"), tracked("*.rs"))
    figure = per_thousand(words, lines)
    print(f"docs: {figure} words per 1,000 lines of Rust (budget {budget}): "
          f"{words} words of markdown, {lines} lines of Rust")
    if figure > budget:
        print(f"docs: over budget by {words - budget * lines // 1000} words", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
