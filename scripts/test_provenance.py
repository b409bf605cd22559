#!/usr/bin/env python3
"""Tests of provenance.py on small git repositories written to a temporary directory."""

import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).with_name("provenance.py")


def check(files: dict) -> subprocess.CompletedProcess:
    """Runs provenance.py on a new repository that tracks `files` (name -> str or bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        for name, content in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        subprocess.run(["git", "-C", str(root), "add", "-f", "."], check=True)
        return subprocess.run(
            [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True
        )


CLEAN = {"README.md": "# a policy\n", "src/lib.rs": "//! ours\n"}


class Provenance(unittest.TestCase):
    def test_a_clean_tree_passes(self):
        out = check(CLEAN)
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("2 tracked files", out.stdout)

    def test_a_tracked_patch_fails(self):
        out = check({**CLEAN, "fixes/0001-fix.patch": "diff --git a/x b/x\n"})
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("fixes/0001-fix.patch: a patch, diff or bytecode file", out.stdout)

    def test_tracked_bytecode_fails(self):
        out = check({**CLEAN, "e2e/lib/__pycache__/helper.cpython-311.pyc": b"\xa7\r\r\n"})
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("helper.cpython-311.pyc", out.stdout)

    def test_tracked_binaries_fail(self):
        out = check({**CLEAN, "tools/kw": b"\x7fELF\x02\x01\x01", "policy.bin": b"\x00asm\x01"})
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("tools/kw: an ELF executable", out.stdout)
        self.assertIn("policy.bin: a WebAssembly module", out.stdout)

    def test_the_engine_read_from_beside_the_clone_fails_naming_the_line(self):
        line = 'KWCTL="../shared' + '/tools/kwctl"\n'
        out = check({**CLEAN, "ci/run.sh": "#!/bin/sh\n" + line})
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("ci/run.sh:2: reads the engine from beside the clone", out.stdout)

    def test_scripts_that_fetch_patch_or_build_another_project_fail(self):
        out = check({
            **CLEAN,
            "build.sh": "git clone https://example.test/engine.git\ncd engine && git am ../*.patch\n",
            "Makefile": "engine:\n\tcargo install --git https://example.test/engine kwctl\n",
            "tools.sh": "go build ./cmd/scanner\n",
        })
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("build.sh:1: fetches or patches another project's source", out.stdout)
        self.assertIn("build.sh:2: fetches or patches", out.stdout)
        self.assertIn("Makefile:2: builds a crate from a checkout", out.stdout)
        self.assertIn("tools.sh:1: builds Go code", out.stdout)

    def test_installing_released_packages_by_name_passes(self):
        out = check({
            **CLEAN,
            "setup.sh": "apt-get install -y skopeo\ncargo install cargo-fuzz --locked\nnpm ci\n",
        })
        self.assertEqual(out.returncode, 0, out.stdout)

    def test_prose_may_name_the_commands(self):
        out = check({**CLEAN, "docs/notes.md": "Never `git clone` the engine here.\n"})
        self.assertEqual(out.returncode, 0, out.stdout)


if __name__ == "__main__":
    unittest.main()
