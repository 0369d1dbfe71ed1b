"""What the tests import is declared (issue 42, item 7): every third-party module a test file
imports belongs to a distribution named in pyproject.toml's dependencies or its ``dev`` extra, so
that ``pip install -e .[dev]`` on a clean machine is enough to run them (not whatever torch or
transformers happen to pull in)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"interp", "synthetic", "sweeps", "analyses", "emergence_lens", "tests", "benchmarks"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    specs = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    return {_normalise(re.match(r"[A-Za-z0-9_.\-]+", spec).group(0)) for spec in specs}


def _imported_by_tests() -> dict[str, str]:
    """Top-level module -> the first test file importing it (the tests' helpers and the benchmark
    scripts some tests import left out)."""
    local = {p.stem for folder in ("tests", "benchmarks") for p in (ROOT / folder).rglob("*.py")}
    out: dict[str, str] = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in FIRST_PARTY or top in local or top == "__future__":
                    continue
                out.setdefault(top, path.name)
    return out


def test_every_module_the_tests_import_is_declared():
    distributions = importlib.metadata.packages_distributions()
    declared = _declared()
    missing = []
    for module, where in sorted(_imported_by_tests().items()):
        names = {_normalise(d) for d in distributions.get(module, [module])}
        if not names & declared:
            missing.append(f"{module} ({where}; distribution {', '.join(sorted(names))})")
    assert not missing, f"imported by the tests but not in pyproject's dependencies or dev extra: {missing}"
    assert {"networkx", "filelock", "numpy"} <= declared  # the ones that came only through torch before
