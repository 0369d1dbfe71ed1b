"""The tests tree mirrors the packages (issue 70, item 6; docs/developing.md, Tests).

A module's tests sit at its package's path under tests/ (``interp/patching/kinds.py`` ->
``tests/interp/patching/``); ``tests/project/`` holds the tests of the repository as a whole (the
docs, the notebooks, the wheel, the import graph, the test tree's own machinery). Pytest imports
each test file under its bare name (its default "prepend" import mode, no ``__init__.py`` files),
so a test file's name is unique in the tree, and a test that uses another test file's helpers
imports it by its full name (``from tests.interp.patching.test_patching_targets import boot``):
the bare name resolves only once pytest has collected that folder.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
#: The folder of tests that belong to no one package.
PROJECT = "project"


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_folder_mirrors_a_package_folder():
    """Each folder holding test files is tests/project/ or a folder of Python modules at the same
    path in the repository; tests/ itself holds only the shared helpers."""
    wrong = []
    for folder in sorted({path.parent for path in _test_files()}):
        rel = folder.relative_to(TESTS)
        if rel.parts == (PROJECT,):
            continue
        if not rel.parts or not any((ROOT / rel).glob("*.py")):
            wrong.append(rel.as_posix() or ".")
    assert not wrong, f"test folders that mirror no package folder (move the files, docs/developing.md, Tests): {wrong}"


def test_test_file_names_are_unique_in_the_tree():
    counts = Counter(path.name for path in _test_files())
    twice = sorted(name for name, n in counts.items() if n > 1)
    assert not twice, f"test file names used in two folders (pytest imports each under its bare name): {twice}"


def test_tests_import_other_test_files_by_full_name():
    """``from test_x import ...`` works only after pytest collected test_x's folder; the full name
    ``tests.<folder>.test_x`` works from any test, run alone or with the rest."""
    bare = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            bare += [f"{path.relative_to(TESTS).as_posix()}: {name}" for name in names if name.startswith("test_")]
    assert not bare, f"test files imported by their bare name (import tests.<folder>.<name> instead): {bare}"
