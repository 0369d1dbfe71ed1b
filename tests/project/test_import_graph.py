"""The import graph of the whole repository, drawn from the code with ``ast`` (issues 21, 70).

Every package is read (:data:`PACKAGES`: interp, sweeps, synthetic, emergence_lens, analyses,
benchmarks, tools). Edges: every ``import`` / ``from ... import`` in a module, at module level and
inside functions (both run); imports under ``if TYPE_CHECKING:`` are left out (they never run).

Floors, lowest first: ``interp.core`` (0) < ``sweeps`` (1: the run-and-store machinery reads the
ground floor only; the suites and the main job schedule their units on it) < ``interp.sources`` (2)
< ``interp.patching`` (3) < ``interp.report`` (4) < the top floor ``interp.*`` (5) <
``interp.population`` (6: populations of seeds read the point of emergence, the tasks, the sources
and the command-line helpers; nothing in ``interp`` reads them) < ``synthetic`` (7) < the entries
``emergence_lens``, ``analyses``, ``benchmarks``, ``tools`` (8). A module imports from its own floor
or below. :data:`NOT_YET` lists the edges that still break a rule (what is left); the test fails
when one of them is gone (delete it from the list) or a new one appears. The runnable entries
(every ``analyses`` module; the package's door holds no entry) import none of each other, at module
level or inside a function (issue 70): what two entries share lives in the library. Every module
opens with a docstring that says what it is, and one past :data:`LONG_LINES` lines says in a line
starting "One concept:" what its one concept is and why it is not split (docs/developing.md, One
concept per module).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[2]
#: Every package of the repository: the graph reads them all.
PACKAGES = ("interp", "sweeps", "synthetic", "emergence_lens", "analyses", "benchmarks", "tools")
FLOORS = {
    "interp.core": 0,
    "sweeps": 1,
    "interp.sources": 2,
    "interp.patching": 3,
    "interp.report": 4,
    "interp.population": 6,
    "synthetic": 7,
    "emergence_lens": 8,
    "analyses": 8,
    "benchmarks": 8,
    "tools": 8,
}
TOP = 5  # every other interp module
#: Past this many lines a module's docstring says what its one concept is and why it stays whole,
#: in a line starting "One concept:" (docs/developing.md, One concept per module).
LONG_LINES = 800

#: Edges (importer, imported) that still go up a floor or close a circle: each is work left.
NOT_YET: set[tuple[str, str]] = {
    # the population's tables read its findings and its page back (function-level imports)
    ("interp.population.tables", "interp.population.findings"),
    ("interp.population.tables", "interp.population.page"),
    # ... and its verdicts and answer table, which read contrasts through the tables' run table
    ("interp.population.tables", "interp.population.verdicts"),
    ("interp.population.tables", "interp.population.answer"),
    # ... and the headline lines of its claims and claim 2, which are statistics' results
    ("interp.population.tables", "interp.population.statistics"),
    # the models package's __init__ and the transformer module read each other
    ("synthetic.models.transformer", "synthetic.models"),
}


def modules() -> dict[str, Path]:
    out = {}
    for path in (p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            yield from (n for child in node.orelse for n in _imports_in(child))
            continue
        yield from _imports_in(node)


def _imports_in(node: ast.AST):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _imports(node)


def graph() -> nx.DiGraph:
    mods = modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for target in targets:
                while target and target not in mods and "." in target:
                    target = target.rpartition(".")[0]
                if target in mods and target != name:
                    g.add_edge(name, target)
    return g


def floor(module: str) -> int:
    return next((f for prefix, f in FLOORS.items() if module == prefix or module.startswith(prefix + ".")), TOP)


def test_the_graph_reads_every_package():
    """Every package with Python modules at the top of the repository is read, each module of it."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")} | {
        p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py")) and p.name not in ("tests", "docs")
    }
    assert found <= set(PACKAGES), f"packages the import graph does not read: {sorted(found - set(PACKAGES))}"
    g = graph()
    read = {name.split(".")[0] for name in g.nodes}
    assert read == set(PACKAGES), sorted(set(PACKAGES) ^ read)
    on_disk = sum(1 for package in PACKAGES for _ in (ROOT / package).rglob("*.py"))
    assert g.number_of_nodes() == on_disk
    # edges across packages are drawn too: the suites schedule units on sweeps, the entries read interp
    assert g.has_edge("interp.sources.suites", "sweeps.executors") and g.has_edge("emergence_lens.cli", "interp.cli")


def test_no_import_circle():
    g = graph()
    g.remove_edges_from(NOT_YET)
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not cycles, f"import circles: {cycles}"


def test_no_upward_import():
    up = {(a, b) for a, b in graph().edges if floor(b) > floor(a)}
    assert up - NOT_YET == set(), f"upward imports (floors {FLOORS}, top {TOP}): {sorted(up - NOT_YET)}"


def entry_edges(g: nx.DiGraph) -> set[tuple[str, str]]:
    """The edges from one runnable entry (an ``analyses`` module other than the package) to another."""
    return {(a, b) for a, b in g.edges if a.startswith("analyses.") and b.startswith("analyses.")}


def test_no_entry_imports_another():
    """Function-level imports count: ``forcing_control`` reading ``forcing`` inside ``main`` is an edge."""
    g = graph()
    assert not entry_edges(g), (
        f"entries importing another entry (move what they share to the library): {sorted(entry_edges(g))}"
    )
    # the graph does see imports inside functions: the population entry reads its spec inside main
    assert g.has_edge("analyses.population", "interp.sources.catalogue")


def test_not_yet_list_is_current():
    g = graph()
    gone = {e for e in NOT_YET if not g.has_edge(*e)}
    assert not gone, f"fixed, delete from NOT_YET: {sorted(gone)}"


#: The report floor, lowest first: a report module imports only report modules before it in this
#: list (figures and the scrubber's script are leaves; display holds the page and the HTML views;
#: the scrubber's page and the report's sections sit on it).
REPORT_ORDER = (
    "interp.report.findings",
    "interp.report.scrub_script",
    "interp.report.step_axis",
    "interp.report.figures",
    "interp.report.loss_axes",
    "interp.report.report_state",
    "interp.report.display",
    "interp.report.head_view",
    "interp.report.scrubber",
    "interp.report.page",
    "interp.report.notebook",
    "interp.report.timeline_page",
)


def test_report_floor_keeps_its_order():
    report = {m for m in modules() if floor(m) == FLOORS["interp.report"]}
    assert report == set(REPORT_ORDER), f"report modules not in REPORT_ORDER: {sorted(report ^ set(REPORT_ORDER))}"
    rank = {m: i for i, m in enumerate(REPORT_ORDER)}
    wrong = sorted((a, b) for a, b in graph().edges if a in rank and b in rank and rank[b] >= rank[a])
    assert not wrong, f"report modules importing one at or above them in REPORT_ORDER: {wrong}"


def test_every_module_opens_with_its_concept():
    """A module's docstring opens with one line saying what it is: the concept a contributor looks
    for (docs/developing.md, One concept per module)."""
    missing = []
    for name, path in sorted(modules().items()):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if not doc.strip():
            missing.append(name)
    assert not missing, f"modules without a docstring naming their concept: {missing}"


def test_long_modules_name_their_one_concept():
    """A module past :data:`LONG_LINES` says in its docstring what its one concept is and why it is
    not split (a line starting "One concept:"); a module that holds two concepts is split instead."""
    long = []
    for name, path in sorted(modules().items()):
        text = path.read_text(encoding="utf-8")
        if text.count("\n") <= LONG_LINES:
            continue
        doc = ast.get_docstring(ast.parse(text)) or ""
        if not any(line.startswith("One concept:") for line in doc.splitlines()):
            long.append(f"{name} ({text.count(chr(10))} lines)")
    assert not long, f"modules over {LONG_LINES} lines without a line 'One concept: ...' in their docstring: {long}"


#: One prompt's way from the task to the ranked head: the modules whose functions run between
#: building a ``TaskBatch`` (``CapabilityTask.build``) and returning a ``HeadRanking``
#: (``rank_heads_between``): the task builds the batch (a ``TaskBatch``, defined on the ground
#: floor), the source loads the two checkpoints, the engine patches every head, ranking sorts them.
PROMPT_PATH = (
    "interp.tasks",
    "interp.core.task_batch",
    "interp.sources.base",
    "interp.patching.engine",
    "interp.ranking",
)


def test_prompt_path_is_short_and_drawn_from_the_graph():
    g = graph()
    g.remove_edges_from(NOT_YET)  # the graph the rooms intend (NOT_YET's edges are going)
    assert len(PROMPT_PATH) <= 5 and len(set(PROMPT_PATH)) == len(PROMPT_PATH)
    ranking, engine = "interp.ranking", "interp.patching.engine"
    # ranking reaches the engine (through the patching package's door) and the task's batch
    assert nx.has_path(g, ranking, engine) and g.has_edge(ranking, "interp.tasks")
    # the task builds the batch and the engine takes it, from the ground floor; the engine never
    # needs the source module (a bridge is passed in) nor the tasks
    assert g.has_edge("interp.tasks", "interp.core.task_batch") and g.has_edge(engine, "interp.core.task_batch")
    assert not nx.has_path(g, engine, "interp.sources.base") and not nx.has_path(g, engine, "interp.tasks")
    # the task module knows nothing of patching or ranking: the way is one direction
    assert not nx.has_path(g, "interp.tasks", engine) and not nx.has_path(g, "interp.tasks", ranking)


#: The way from the command line to a ranked head (docs/developing.md, "One prompt's way"): each
#: module calls the next; the settings travel beside it as one StudyConfig.
COMMAND_LINE_WAY = (
    "interp.cli.main_job",
    "interp.main_job.runner",
    "interp.tasks",
    "interp.emergence",
    "interp.ranking",
    "interp.patching",
)


def test_the_way_from_the_command_line_is_six_modules_each_once():
    g = graph()
    assert len(COMMAND_LINE_WAY) <= 6 and len(set(COMMAND_LINE_WAY)) == len(COMMAND_LINE_WAY)
    cli, runner = COMMAND_LINE_WAY[:2]
    assert g.has_edge(cli, runner) and g.has_edge(cli, "interp.core.settings")  # flags -> one StudyConfig
    for step in COMMAND_LINE_WAY[2:5]:  # analyse_run builds the batch, finds the point, ranks the heads
        assert g.has_edge(runner, step), step
    assert g.has_edge("interp.ranking", "interp.patching") and g.has_edge("interp.ranking", "interp.core.settings")
    # the settings module is a leaf of the main job's room: it reads the ground floor only, and the
    # room's __init__ imports nothing, so that the ranking can read the settings without a circle
    assert all(target.startswith("interp.core") for target in g.successors("interp.core.settings"))
    assert not list(g.successors("interp.main_job"))
