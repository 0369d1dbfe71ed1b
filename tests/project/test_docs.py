"""The docs run: every ```python block of README.md and docs/*.md executes here, at CI scale, and
every module path the docs name exists (issues 21 and 22).

How a page's blocks run: in order, in one namespace per page (a later block uses what an
earlier one made, as a reader's session would), with the current folder a temporary one (so
``results/...`` paths land there), and with only ``RUN``, ``PRE`` and ``POST`` given (a quick-suite
run folder copied to the temporary folder and its point of emergence). Each block imports what
it uses.

What is substituted to run at CI scale (the only differences from the text a reader sees; a key
that no page contains fails the test, so the map cannot rot):
"""

from __future__ import annotations

import importlib
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

#: page -> [(text in the page, text run instead)]: hub checkpoints -> the quick-suite run and its
#: point of emergence; long trainings -> short ones.
SUBSTITUTIONS: dict[str, list[tuple[str, str]]] = {
    "README.md": [('"EleutherAI/pythia-160m-seed4"', "RUN")],
    "guide.md": [
        ('"EleutherAI/pythia-160m-seed4"', "RUN"),
        ('"~/runs/my-suite"', "RUN"),
        ('"embedded/neox-2l-128d-seed2"', "RUN"),
        ("src.load(31000)", "src.load(POST)"),
        ("pre_step=30000, post_step=31000", "pre_step=PRE, post_step=POST"),
        ("pre=1800, post=1900, every=10", "pre=PRE, post=POST, every=50"),
        ("resolution=1)", "resolution=50, n_prompts=128)"),
        # readiness patches and evaluates each checkpoint twice (as trained, ideal patterns): the
        # first step and the ones from 200 before the point on (6 of the quick suite's 32) show
        # the call and its E and R; all 32 took 5.7 min of the page's ~14 min under load
        (
            'el.readiness(src, batch, heads="auto")',
            'el.readiness(src, batch, heads="auto", steps=[s for s in src.available_steps() if s == 0 or s >= PRE - 200])',
        ),
    ],
    "sweeps.md": [
        ("load_results(DIR), load_metrics(DIR)", ('load_results("results/lm-small"), load_metrics("results/lm-small")'))
    ],
    "synthetic.md": [("steps=10_000", "steps=200")],
    "concepts.md": [('"embedded-quick/neox-2l-64d-seed1"', "RUN")],
    "extending.md": [('"embedded-quick/neox-2l-64d-seed1"', "RUN")],
}
#: page -> files written into the temporary folder before its blocks run (from the page's own text).
FIXTURE_FILES = {"sweeps.md": "sweep.yaml"}

#: A block a test cannot run (needs the network or hours) is marked on the line above its fence:
#: ``<!-- docs-test: no-run: <reason> -->``. The marked blocks are counted and listed below.
NO_RUN = re.compile(r"<!-- docs-test: no-run: (.+?) -->\s*\n\s*```python")
MAX_NO_RUN = 2

_BLOCK = re.compile(r"^([ \t]*)```python\n(.*?)^\1```", re.S | re.M)


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """``(line, code, no-run reason or None)`` of every ```python block (indented ones dedented)."""
    blocks = []
    for match in _BLOCK.finditer(text):
        indent = match.group(1)
        code = "\n".join(
            line[len(indent) :] if line.startswith(indent) else line for line in match.group(2).splitlines()
        )
        before = text[: match.start()].rstrip().splitlines()[-1:] or [""]
        reason = re.fullmatch(r"\s*<!-- docs-test: no-run: (.+?) -->\s*", before[0])
        blocks.append((text[: match.start()].count("\n") + 1, code, reason.group(1) if reason else None))
    return blocks


def test_substitutions_and_markers_are_few_and_current():
    names = {page.name for page in PAGES}
    marked = []
    for page in PAGES:
        text = page.read_text()
        for old, _ in SUBSTITUTIONS.get(page.name, []):
            assert old in text, f"{page.name}: the substitution {old!r} no longer matches the page"
        marked += [f"{page.name}:{line}: {reason}" for line, _, reason in python_blocks(text) if reason]
    assert set(SUBSTITUTIONS) <= names
    print("blocks not run:", marked)
    assert len(marked) <= MAX_NO_RUN, marked


#: docs_run takes seconds, the pages' blocks minutes: the blocks run on both pytest-xdist workers
#: (conftest.shared_work_group).
SPREAD_OVER_WORKERS = True


@pytest.fixture(scope="module")
def docs_run(quick_suite, tmp_path_factory):
    """A quick-suite run that emerged, copied (zoom writes into its folder), and its point."""
    from interp.emergence import find_emergence
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    runs, _ = quick_suite
    for folder in runs:
        source = LocalSuiteSource(folder)
        point = find_emergence(source, RepetitionTask().build(source.tokenizer()))
        source.close()
        if point.emerged and point.pre_step is not None:
            copy = tmp_path_factory.mktemp("docs-run") / folder.name
            shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("zoom"))
            return {"RUN": str(copy), "PRE": point.pre_step, "POST": point.post_step}
    pytest.fail("no quick-suite run emerged between two checkpoints")


def _fixture_file(page: Path, name: str) -> str:
    """The first ```yaml block of ``page`` at CI scale (the sweep spec of docs/sweeps.md)."""
    text = re.search(r"```yaml\n(.*?)```", page.read_text(), re.S).group(1)
    return text.replace("steps: 300", "steps: 30").replace("warmup_steps: 20", "warmup_steps: 5")


@pytest.mark.parametrize("page", [p for p in PAGES if "```python" in p.read_text()], ids=lambda p: p.name)
def test_every_python_block_runs(page, docs_run, quick_suite, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # A block that names an embedded run (guide.md's `scrubber("embedded-quick/...")`) finds the
    # quick suite the session trained, as a reader's cache holds it; without this it trained the
    # suite a second time into ~/.cache on a clean checkout (minutes of `make test`).
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(quick_suite[1]))
    if page.name in FIXTURE_FILES:
        (tmp_path / FIXTURE_FILES[page.name]).write_text(_fixture_file(page, FIXTURE_FILES[page.name]))
    from interp.core import metrics
    from interp.patching import kinds
    from interp.report import page as visualisation
    from interp.tasks import registry as task_registry

    # a page may register a metric, a task or a patch kind, or add a report section (docs/extending.md)
    registries = (metrics.METRICS, task_registry.REGISTRY, kinds.KIND_TABLE)
    saved = [dict(r) for r in registries], list(visualisation.RUN_SECTIONS), list(visualisation.PAGE_SECTIONS)
    try:
        _run_blocks(page, dict(docs_run))
    finally:
        for registry, before in zip(registries, saved[0]):
            registry.clear()
            registry.update(before)
        visualisation.RUN_SECTIONS[:] = saved[1]
        visualisation.PAGE_SECTIONS[:] = saved[2]


def _run_blocks(page: Path, namespace: dict) -> None:
    for line, code, reason in python_blocks(page.read_text()):
        if reason:
            continue
        for old, new in SUBSTITUTIONS.get(page.name, []):
            code = code.replace(old, new)
        try:
            exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        except Exception as err:  # name the block a reader would look at
            raise AssertionError(
                f"{page.relative_to(ROOT)} block at line {line} fails: {type(err).__name__}: {err}"
            ) from err


# --------------------------------------------------------------------------- module paths named in the docs

_FILE = re.compile(
    r"(?<![\w/.~-])((?:interp|synthetic|sweeps|analyses|benchmarks|emergence_lens|tests|docs)"
    r"(?:/[\w.-]+)*/[\w-]+\.(?:py|md|ipynb|yaml|toml)|(?:interp|synthetic|sweeps|analyses|benchmarks|"
    r"emergence_lens)/(?:[\w-]+/)+)"
)
_DOTTED = re.compile(r"(?<![\w/.-])((?:interp|synthetic|sweeps|emergence_lens)(?:\.[A-Za-z_]\w*)+)")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


_FENCE = re.compile(r"^```[a-z]*\n(.*?)^```", re.S | re.M)
_BARE = re.compile(r"(?<![\w/.-])([a-z_][\w]*\.py)\b")
CODE_FOLDERS = ("interp", "synthetic", "sweeps", "analyses", "benchmarks", "emergence_lens", "tests")


def test_every_module_path_named_in_the_docs_exists():
    """Paths (``interp/ranking.py``), dotted names (``interp.patching.patch_values``) and, in
    layout and flow listings, bare file names (``ranking.py``) must name code that exists."""
    files = {p.name for folder in CODE_FOLDERS for p in (ROOT / folder).rglob("*.py")}
    missing = []
    for page in PAGES:
        text = page.read_text()
        for block in _FENCE.findall(text):
            if block.lstrip().startswith(("import ", "from ", "$", "emergence ", "make ")):
                continue
            missing += [
                f"{page.name}: {name} (in a listing)" for name in sorted(set(_BARE.findall(block))) if name not in files
            ]
        for path in sorted(set(_FILE.findall(text))):
            if not (ROOT / path).exists():
                missing.append(f"{page.name}: {path}")
        for dotted in sorted(set(_DOTTED.findall(text))):
            dotted = dotted.rstrip(".")
            if dotted.endswith((".py", ".md", ".csv", ".json", ".html", ".parquet")):
                continue
            if not _resolves(dotted):
                missing.append(f"{page.name}: {dotted}")
    assert not missing, "named in the docs but not in the code:\n" + "\n".join(missing)
