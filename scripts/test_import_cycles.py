#!/usr/bin/env python3
"""Tests of import-cycles.py on small crates written to a temporary directory."""

import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).with_name("import-cycles.py")


def run(files: dict) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "src"
        for name, text in files.items():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(text)
        return subprocess.run(
            [sys.executable, str(SCRIPT), str(src)], capture_output=True, text=True
        )


class ImportCycles(unittest.TestCase):
    def test_a_cycle_through_a_group_import_fails_naming_both_files(self):
        out = run({
            "lib.rs": "pub mod a;\npub mod b;\n",
            "a.rs": "use crate::{b::{B, C as D}};\npub struct A;\n",
            "b.rs": "pub struct B; pub struct C;\nfn f() { let _ = crate::a::A; }\n",
        })
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("2 files reach each other: a.rs, b.rs", out.stdout)

    def test_super_paths_in_a_directory_module_count(self):
        out = run({
            "lib.rs": "pub mod c;\n",
            "c/mod.rs": "mod x;\nmod y;\n",
            "c/x.rs": "use super::y::Y;\npub struct X;\n",
            "c/y.rs": "pub struct Y;\nfn g(_: super::x::X) {}\n",
        })
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("c/x.rs, c/y.rs", out.stdout)

    def test_test_code_comments_and_strings_do_not_count(self):
        out = run({
            "lib.rs": "pub mod a;\npub mod b;\n",
            "a.rs": "use crate::b::B;\npub struct A;\n",
            "b.rs": (
                "pub struct B;\n// crate::a::A\nconst S: &str = \"crate::a::A\";\n"
                "#[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n"
            ),
        })
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("no cycle between the 3 files", out.stdout)


if __name__ == "__main__":
    unittest.main()
