#!/usr/bin/env python3
"""Tests of import-cycles.py on small crates written to a temporary directory."""

import pathlib
import subprocess
import sys
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).with_name("import-cycles.py")


def run(files: dict) -> subprocess.CompletedProcess:
    return run_crates({"src": files})


def run_crates(crates: dict, *options: str) -> subprocess.CompletedProcess:
    """Writes each crate's files under `<tmp>/<name>` and checks the folders in that order."""
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for crate, files in crates.items():
            src = pathlib.Path(tmp) / crate
            dirs.append(str(src))
            for name, text in files.items():
                (src / name).parent.mkdir(parents=True, exist_ok=True)
                (src / name).write_text(text)
        return subprocess.run(
            [sys.executable, str(SCRIPT), *options, *dirs], capture_output=True, text=True
        )


class ImportCycles(unittest.TestCase):
    def test_a_folder_over_the_entry_limit_fails_naming_it(self):
        files = {"main.rs": "mod a;\n", "a/mod.rs": "", "a/b.rs": "", "a/c.rs": ""}
        crowded = run_crates({"src": files}, "--max-entries", "2")
        self.assertEqual(crowded.returncode, 1, crowded.stdout)
        self.assertIn("/a/ holds 3 entries, over 2", crowded.stdout)
        self.assertEqual(run_crates({"src": files}, "--max-entries", "3").returncode, 0)

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


class TopLevelCycles(unittest.TestCase):
    def test_two_folders_reaching_each_other_through_different_files_fail(self):
        out = run({
            "lib.rs": "pub mod inputs;\npub mod steps;\n",
            "inputs/mod.rs": "pub mod read;\npub mod words;\n",
            "inputs/words.rs": "pub struct Word;\n",
            "inputs/read.rs": "use crate::steps::first::First;\npub fn read(_: First) {}\n",
            "steps/mod.rs": "pub mod first;\npub mod second;\n",
            "steps/first.rs": "pub struct First;\n",
            "steps/second.rs": "use crate::inputs::words::Word;\npub fn second(_: Word) {}\n",
        })
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("no cycle between the 7 files", out.stdout)
        self.assertIn("2 top-level entries reach each other: inputs/, steps/", out.stdout)
        self.assertIn("inputs/ -> steps/: inputs/read.rs -> steps/first.rs", out.stdout)
        self.assertIn("steps/ -> inputs/: steps/second.rs -> inputs/words.rs", out.stdout)

    def test_a_file_and_its_folder_of_children_are_one_entry(self):
        out = run({
            "lib.rs": "pub mod loops;\npub mod pool;\n",
            "loops.rs": "pub mod attempt;\npub struct Loop;\n",
            "loops/attempt.rs": "use crate::pool::Pool;\npub fn attempt(_: Pool) {}\n",
            "pool.rs": "pub struct Pool;\npub fn run(_: crate::loops::Loop) {}\n",
        })
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("2 top-level entries reach each other: loops/, pool.rs", out.stdout)
        self.assertIn("loops/ -> pool.rs: loops/attempt.rs -> pool.rs", out.stdout)

    def test_folders_that_depend_downward_pass_whatever_their_files_name_inside(self):
        out = run({
            "lib.rs": "pub mod low;\npub mod high;\npub mod top;\n",
            "low/mod.rs": "pub mod a;\npub mod b;\n",
            "low/a.rs": "pub struct A;\n",
            "low/b.rs": "use super::a::A;\npub struct B(pub A);\n",
            "high/mod.rs": "use crate::low::b::B;\npub fn high(_: B) {}\n",
            "top.rs": "pub fn top() { crate::high::high(crate::low::b::B(crate::low::a::A)); }\n",
        })
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("no cycle between the 4 top-level entries", out.stdout)

    def test_a_file_declared_for_tests_only_may_reach_back_up(self):
        out = run({
            "lib.rs": "pub mod low;\npub mod high;\n",
            "low/mod.rs": "pub struct Low;\n#[cfg(test)]\n#[path = \"checks.rs\"]\nmod checks;\n",
            "low/checks.rs": "use crate::high::High;\nfn uses(_: High) {}\n",
            "low/checks/more.rs": "use crate::high::High;\n",
            "high.rs": "pub struct High(pub crate::low::Low);\n",
        })
        self.assertEqual(out.returncode, 0, out.stdout)
        self.assertIn("no cycle between the 3 top-level entries", out.stdout)

    def test_every_folder_given_is_checked_and_one_cycle_fails_the_run(self):
        clean = {"lib.rs": "pub mod a;\n", "a.rs": "pub struct A;\n"}
        cyclic = {
            "main.rs": "mod a;\nmod b;\n",
            "a.rs": "pub struct A(pub crate::b::B);\n",
            "b/mod.rs": "pub struct B;\npub fn f(_: crate::a::A) {}\n",
        }
        out = run_crates({"one/src": clean, "two/src": cyclic})
        self.assertEqual(out.returncode, 1, out.stdout)
        self.assertIn("no cycle between the 2 top-level entries of", out.stdout)
        self.assertIn("one/src/", out.stdout)
        self.assertIn("2 top-level entries reach each other: a.rs, b/", out.stdout)
        self.assertIn("1 file", run_crates({"s": {"lib.rs": ""}}).stdout)


if __name__ == "__main__":
    unittest.main()
