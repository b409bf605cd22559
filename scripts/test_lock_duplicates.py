#!/usr/bin/env python3
"""Tests of lock-duplicates.py's reading of Cargo.lock and of CONTRIBUTING.md's list."""

import importlib.util
import pathlib
import unittest

SPEC = importlib.util.spec_from_file_location(
    "lock_duplicates", pathlib.Path(__file__).with_name("lock-duplicates.py")
)
lock_duplicates = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lock_duplicates)

LOCK = """[[package]]
name = "sha2"
version = "0.10.9"

[[package]]
name = "sha2"
version = "0.11.1"

[[package]]
name = "serde"
version = "1.0.229"
"""


class LockDuplicates(unittest.TestCase):
    def test_only_names_in_two_versions_are_duplicated(self):
        self.assertEqual(lock_duplicates.duplicated(LOCK), {"sha2": ["0.10.9", "0.11.1"]})

    def test_a_list_line_explains_the_name_it_starts_with_only(self):
        text = "# C\n\n## Two versions of one package\n\n- `sha2` 0.10 (ours, `hmac`'s) and 0.11.\n\n## Next\n- `serde` 1\n"
        self.assertEqual(lock_duplicates.explained(text), {"sha2"})

    def test_without_the_section_nothing_is_explained(self):
        self.assertEqual(lock_duplicates.explained("- `sha2` 0.10\n"), set())


if __name__ == "__main__":
    unittest.main()
