#!/usr/bin/env python3
"""artifacthub-pkg.yml embeds questions-ui.yml verbatim (annotation kubewarden/questions-ui),
as `kwctl scaffold artifacthub` writes it. A question added without regenerating the package
file leaves Artifact Hub's form behind, and the CI machine has no kwctl to regenerate it: this
checks the embedded copy (`--check`, in `make lint`), or rewrites just that annotation in place,
leaving every other field as kwctl wrote it.
"""

import sys

PACKAGE = "artifacthub-pkg.yml"
QUESTIONS = "questions-ui.yml"
HEADER = "  kubewarden/questions-ui: |\n"
INDENT = "    "


def split(package):
    """The package file's lines before the embedded block, the block, and the lines after."""
    lines = package.splitlines(keepends=True)
    try:
        start = lines.index(HEADER) + 1
    except ValueError:
        sys.exit(f"{PACKAGE}: no `{HEADER.strip()}` annotation")
    end = start
    while end < len(lines) and (lines[end].startswith(INDENT) or lines[end] == "\n"):
        end += 1
    return lines[:start], lines[start:end], lines[end:]


def embedded(questions):
    """questions-ui.yml as the block scalar holds it."""
    return [INDENT + line if line != "\n" else line for line in questions.splitlines(keepends=True)]


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] not in ([], ["--check"]):
        sys.exit("usage: artifacthub-questions.py [--check]")
    with open(PACKAGE, encoding="utf-8") as f:
        before, block, after = split(f.read())
    with open(QUESTIONS, encoding="utf-8") as f:
        wanted = embedded(f.read())
    if block == wanted:
        print(f"artifacthub-questions: {PACKAGE} embeds {QUESTIONS} as it is")
        return 0
    if check:
        print(
            f"artifacthub-questions: {PACKAGE}'s kubewarden/questions-ui differs from {QUESTIONS}: "
            "run `make artifacthub` (kwctl) or `python3 scripts/artifacthub-questions.py`",
            file=sys.stderr,
        )
        return 1
    with open(PACKAGE, "w", encoding="utf-8") as f:
        f.writelines(before + wanted + after)
    print(f"artifacthub-questions: {PACKAGE} now embeds {QUESTIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
