#!/usr/bin/env python3
"""Tests of commit-subjects.py on throw-away repositories."""

import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).with_name("commit-subjects.py")
ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.test",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.test"}


def check(subjects: list) -> subprocess.CompletedProcess:
    """Commits a base, then one empty commit per subject; checks those after the base."""
    with tempfile.TemporaryDirectory() as tmp:
        def git(*args):
            subprocess.run(["git", "-C", tmp, *args], check=True, env=ENV, capture_output=True)
        git("init", "-q")
        git("commit", "-q", "--allow-empty", "-m", "the base, whatever it says")
        base = subprocess.run(["git", "-C", tmp, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        for subject in subjects:
            git("commit", "-q", "--allow-empty", "-m", subject)
        return subprocess.run([sys.executable, str(SCRIPT), base], cwd=tmp,
                              capture_output=True, text=True)


class CommitSubjects(unittest.TestCase):
    def test_area_and_summary_within_72_pass(self):
        out = check(["lint: fail on tracked patches", "src/reference.rs, docs: own cases"])
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("the 2 commits after", out.stdout)

    def test_a_long_subject_fails_with_its_length(self):
        out = check(["docs: " + "x" * 70])
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("subject of 76 characters (at most 72)", out.stdout)

    def test_a_subject_without_an_area_fails(self):
        out = check(["Fixed the thing"])
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("is not `area: what changed`", out.stdout)

    def test_a_commit_that_only_logs_ci_fails(self):
        out = check(["CONTRIBUTING: CI at fceedde (852 s)"])
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("only logs a CI run", out.stdout)

    def test_a_base_missing_from_the_clone_is_said_and_passes(self):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["git", "-C", tmp, "init", "-q"], check=True)
            out = subprocess.run([sys.executable, str(SCRIPT), "0" * 40], cwd=tmp,
                                 capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("not in this clone", out.stdout)


if __name__ == "__main__":
    unittest.main()
