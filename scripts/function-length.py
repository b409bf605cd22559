#!/usr/bin/env python3
"""No function of the project's Rust code is longer than MAX_LINES lines (its signature to its
closing brace, blank lines and comments included), tests excepted: a long function is several
steps that want names. Prints each offender as `path:line: name is N lines`; exits 1 if any.

Usage: python3 scripts/function-length.py [MAX_LINES] (default 80), from the repository root.
"""
import re
import subprocess
import sys

MAX_LINES = int(sys.argv[1]) if len(sys.argv) > 1 else 80
FN = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")


def rust_files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.rs"],
                         capture_output=True, text=True, check=True).stdout
    return [p for p in out.split() if "/target/" not in p]


def body_end(lines, start):
    """The index of the line closing the function that starts at `start` (braces counted
    outside strings, chars and comments); None for a declaration without a body."""
    depth, opened = 0, False
    for i in range(start, len(lines)):
        line = re.sub(r'"(\\.|[^"\\])*"', '""', lines[i])
        line = re.sub(r"'(\\.|[^'\\])'", "''", line)
        line = line.split("//", 1)[0]
        for ch in line:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return i
            elif ch == ";" and not opened and depth == 0:
                return None
    return None


def in_tests(path, lines, index):
    if "/tests/" in f"/{path}" or path.endswith("/tests.rs") or path.startswith("tests/"):
        return True
    # a `#[cfg(test)] mod` above the function, at a lower indentation
    for i in range(index, -1, -1):
        if re.match(r"^\s*mod tests\b", lines[i]) and i > 0 and "cfg(test)" in lines[i - 1]:
            return True
    return False


offenders = []
for path in rust_files():
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for index, line in enumerate(lines):
        match = FN.match(line)
        if not match or in_tests(path, lines, index):
            continue
        end = body_end(lines, index)
        if end is not None and end - index + 1 > MAX_LINES:
            offenders.append(f"{path}:{index + 1}: {match.group(8)} is {end - index + 1} lines")
for offender in offenders:
    print(offender)
if offenders:
    print(f"{len(offenders)} function(s) over {MAX_LINES} lines: split them into named steps",
          file=sys.stderr)
    sys.exit(1)
