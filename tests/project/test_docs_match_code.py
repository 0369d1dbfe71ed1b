"""The maps a contributor reads match the code (issue 70, item 5): ``EXPORTS`` names the module that
defines each name, docs/developing.md's layout map and ``interp.population``'s docstring name every
module there is, and docs/extending.md's example of adding a task runs as written on a tiny local
suite (no trained suite needed) and does what the page says.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _defines(module: str, name: str) -> bool:
    """``name`` is defined in ``module``'s source (a top-level def, class or assignment) or is a
    submodule of it: not imported there from elsewhere."""
    base = ROOT / module.replace(".", "/")
    if (base / name / "__init__.py").exists() or (base / f"{name}.py").exists():
        return True
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def test_exports_name_the_defining_module():
    from emergence_lens import EXPORTS

    wrong = sorted(f"{name}: {module}" for name, module in EXPORTS.items() if not _defines(module, name))
    assert not wrong, f"EXPORTS names a module that does not define (only imports) these names: {wrong}"
    assert _defines("interp.evaluator", "StepEvaluator") and not _defines("interp.emergence", "StepEvaluator")


def test_exports_resolve_to_the_objects_of_their_modules():
    import importlib

    import emergence_lens as el

    for name in ("StepEvaluator", "patch_values", "rank_neurons", "TASKS"):
        module = importlib.import_module(el.EXPORTS[name])
        assert getattr(el, name) is getattr(module, name)


def _layout_block() -> str:
    text = (ROOT / "docs" / "developing.md").read_text(encoding="utf-8")
    return re.search(r"## Layout\n.*?```\n(.*?)```", text, re.S).group(1)


def test_developing_layout_names_every_module():
    """Every module of interp, sweeps, synthetic and emergence_lens (analyses' entries are one line:
    ``<name>.py``) and every folder of modules is named in the layout map; every file it names exists."""
    block = _layout_block()
    named = set(re.findall(r"(\w+\.py)\b", block))
    folders = set(re.findall(r"(\w+)/", block))
    missing = []
    for package in ("interp", "sweeps", "synthetic", "emergence_lens"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "__init__.py" and path.name not in named:
                missing.append(str(path.relative_to(ROOT)))
            if path.parent.name not in folders:
                missing.append(f"{path.parent.relative_to(ROOT)}/")
    assert not missing, f"docs/developing.md's layout does not name: {sorted(set(missing))}"
    on_disk = {
        p.name
        for package in ("interp", "sweeps", "synthetic", "emergence_lens", "analyses")
        for p in (ROOT / package).rglob("*.py")
    }
    assert named <= on_disk, f"the layout names files that do not exist: {sorted(named - on_disk)}"


def test_population_docstring_maps_every_module():
    import interp.population

    doc = interp.population.__doc__ or ""
    mapped = set(re.findall(r":mod:`interp\.population\.(\w+)`", doc))
    on_disk = {p.stem for p in (ROOT / "interp" / "population").glob("*.py")} - {"__init__"}
    assert mapped == on_disk, (
        f"interp.population's map: missing {sorted(on_disk - mapped)}, stale {sorted(mapped - on_disk)}"
    )


def _block_under(page: Path, heading: str) -> str:
    text = page.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_extending_md_adds_a_task_as_written(tiny_local_suite, monkeypatch):
    """docs/extending.md's "A task" block, unchanged, on a tiny local suite: the task is registered,
    offered by ``el.make_task`` / ``el.task_table`` and scored; the page's description of where the
    spec goes in the package is true (each built-in task module calls ``register_task`` at its foot)."""
    import emergence_lens as el
    from interp.sources import LocalSuiteSource
    from interp.tasks import registry

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    page = ROOT / "docs" / "extending.md"
    code = _block_under(page, "A task")
    src = LocalSuiteSource(tiny_local_suite)
    namespace = {"el": el, "src": src, "pre": src.load(100).model}
    saved = dict(registry.REGISTRY)
    try:
        exec(compile(code, f"{page.name}: A task", "exec"), namespace)
        spec = registry.REGISTRY["counting"]
        assert spec.cls is namespace["CountingTask"] and spec.default_metric == "p"
        assert registry.metric_for("counting") == "p"
        with pytest.raises(ValueError, match="already"):
            registry.register_task(spec)
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(saved)
        src.close()
    assert "counting" not in registry.REGISTRY
    # what the page says about the package: no REGISTRY literal; the task module registers its spec
    prose = page.read_text(encoding="utf-8").split("\n## A task\n", 1)[1].split("\n## ", 1)[0]
    assert "REGISTRY` literal" not in prose
    registry_src = (ROOT / "interp" / "tasks" / "registry.py").read_text(encoding="utf-8")
    assert re.search(r"^REGISTRY: dict\[str, TaskSpec\] = \{\}$", registry_src, re.M)
    for module in ("repetition", "pattern", "ioi"):
        assert "\nregister_task(\n    TaskSpec(" in (ROOT / "interp" / "tasks" / f"{module}.py").read_text(
            encoding="utf-8"
        )
