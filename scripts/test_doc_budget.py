#!/usr/bin/env python3
"""Tests of doc-budget.py: what it counts, and that it fails above the budget."""

import importlib.util
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).with_name("doc-budget.py")
spec = importlib.util.spec_from_file_location("doc_budget", SCRIPT)
doc_budget = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc_budget)


def repo(files: dict) -> str:
    """A git repository in a temporary directory with FILES tracked; returns its path."""
    tmp = tempfile.mkdtemp()
    for name, text in files.items():
        (pathlib.Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
        (pathlib.Path(tmp) / name).write_text(text)
    subprocess.run(["git", "init", "-q", tmp], check=True)
    subprocess.run(["git", "-C", tmp, "add", "."], check=True)
    return tmp


def run(tmp, *args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=tmp, capture_output=True,
                          text=True)


class DocBudget(unittest.TestCase):
    def test_changelog_is_left_out_and_nested_pages_count(self):
        texts = {"README.md": b"one two\nthree", "CHANGELOG.md": b"a b c d e f",
                 "docs/CHANGELOG.md": b"x y", "docs/a.md": b"four", "a.rs": b"fn a() {}\n\n"}
        words, lines = doc_budget.counts(["README.md", "CHANGELOG.md", "docs/CHANGELOG.md",
                                          "docs/a.md"], ["a.rs"], read=texts.__getitem__)
        self.assertEqual((words, lines), (4, 2))

    def test_prints_the_figure_and_passes_at_the_budget(self):
        tmp = repo({"README.md": "w " * 7, "lib.rs": "\n" * 10})
        done = run(tmp)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("docs: 700 words per 1,000 lines of Rust (budget 700)", done.stdout)

    def test_fails_above_the_budget(self):
        tmp = repo({"README.md": "w " * 8, "lib.rs": "\n" * 10, "untracked.rs": ""})
        done = run(tmp)
        self.assertEqual(done.returncode, 1)
        self.assertIn("docs: 800 words per 1,000 lines of Rust (budget 700)", done.stdout)
        self.assertIn("over budget by 1 words", done.stderr)

    def test_untracked_files_do_not_count(self):
        tmp = repo({"README.md": "w", "lib.rs": "\n" * 10})
        (pathlib.Path(tmp) / "notes.md").write_text("w " * 100)
        self.assertIn("docs: 100 words", run(tmp).stdout)


if __name__ == "__main__":
    unittest.main()
