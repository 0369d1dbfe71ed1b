"""Every skip in tests/ is listed with its trigger in tests/QUARANTINE.md (issue 70, item 6).

A *skip site* is a call of ``pytest.skip``, ``pytest.xfail`` or ``pytest.importorskip``, or a
``pytest.mark.skip`` / ``skipif`` / ``xfail`` mark (as a decorator, a ``pytestmark`` or a named
mark such as ``needs_pins = pytest.mark.skipif(...)``), found with ``ast`` in every test file of
the tree (``tests/**/*.py``). Each is keyed by its file (relative to tests/) and the name around it:
the test function it sits in or decorates, or the module-level name it is assigned to. The test
fails when a site is missing from the list (add a row: what triggers it, and what it costs) or a
row names a site that is gone (delete the row).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
QUARANTINE = TESTS / "QUARANTINE.md"
CALLS = {"skip": "skip", "xfail": "xfail", "importorskip": "importorskip"}
MARKS = {"skip": "skip", "skipif": "skipif", "xfail": "xfail"}


def _kind(node: ast.AST) -> str | None:
    """``pytest.skip(...)`` -> "skip"; ``pytest.mark.skipif`` (called or not) -> "skipif"; else None."""
    target = node.func if isinstance(node, ast.Call) else node
    if not isinstance(target, ast.Attribute):
        return None
    base = target.value
    if isinstance(node, ast.Call) and isinstance(base, ast.Name) and base.id == "pytest" and target.attr in CALLS:
        return CALLS[target.attr]
    is_mark = isinstance(base, ast.Attribute) and base.attr == "mark" and isinstance(base.value, ast.Name)
    if is_mark and base.value.id == "pytest" and target.attr in MARKS:
        return MARKS[target.attr]
    return None


def skip_sites(root: Path = TESTS) -> set[tuple[str, str, str]]:
    """``(file, name, kind)`` of every skip site under ``root`` (see the module docstring)."""
    sites: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, rel: str, name: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = node.name if name == "<module>" else f"{name}.{node.name}"
            for deco in node.decorator_list:  # a mark on a test belongs to that test
                visit(deco, rel, inner)
            for stmt in node.body:
                visit(stmt, rel, inner)
            return
        if name == "<module>" and isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            name = ", ".join(t.id for t in targets if isinstance(t, ast.Name)) or name
        kind = _kind(node)  # a mark is its attribute (pytest.mark.skipif), a call its call (pytest.skip())
        if kind:
            sites.add((rel, name, kind))
        for child in ast.iter_child_nodes(node):
            visit(child, rel, name)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), path.relative_to(root).as_posix(), "<module>")
    return sites


def listed() -> dict[tuple[str, str, str], str]:
    """The rows of tests/QUARANTINE.md's table: ``(file, name, kind) -> trigger``."""
    rows = {}
    for line in QUARANTINE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not line.lstrip().startswith("|") or cells[0] in ("file", "") or set(cells[0]) <= {"-"}:
            continue
        file, name, kind, trigger = (re.sub(r"^`|`$", "", c) for c in cells)
        rows[(file, name, kind)] = trigger
    return rows


def test_every_skip_is_in_the_quarantine_list():
    sites, rows = skip_sites(), listed()
    missing = sorted(sites - set(rows))
    assert not missing, (
        "skips not listed in tests/QUARANTINE.md (add a row `| file | name | kind | trigger |`): "
        + "; ".join(" | ".join(site) for site in missing)
    )
    gone = sorted(set(rows) - sites)
    assert not gone, f"rows of tests/QUARANTINE.md whose skip is gone (delete them): {gone}"
    empty = sorted(key for key, trigger in rows.items() if len(trigger) < 20)
    assert not empty, f"rows without a trigger (what makes it skip, in words): {empty}"


def test_the_scanner_finds_each_form_of_skip(tmp_path):
    """A decorator mark, a named mark, a module ``pytestmark``, a call in a test and in a fixture
    method, and an import skip are each found once, under the name around them; a test without
    one is not."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_toy.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.skipif(True, reason='r')\n"
        "needs_x = pytest.mark.skipif(False, reason='x')\n"
        "@pytest.mark.xfail(reason='known')\n"
        "def test_a():\n    pass\n"
        "@needs_x\n"
        "def test_b():\n    pytest.skip('no x')\n"
        "class TestC:\n    def test_d(self):\n        ray = pytest.importorskip('ray')\n"
        "def test_plain():\n    assert True\n"
    )
    assert skip_sites(tmp_path) == {
        ("sub/test_toy.py", "pytestmark", "skipif"),
        ("sub/test_toy.py", "needs_x", "skipif"),
        ("sub/test_toy.py", "test_a", "xfail"),
        ("sub/test_toy.py", "test_b", "skip"),
        ("sub/test_toy.py", "TestC.test_d", "importorskip"),
    }
