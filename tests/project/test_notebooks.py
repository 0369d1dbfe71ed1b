"""The notebooks under analyses/notebooks/: stored without outputs, executed top to bottom at CI
scale (nbclient, a per-cell timeout), and what they compute checked against the library.

The main-job and hub notebooks run on the embedded quick suite (the hub one through an offline
Hugging Face cache in Pythia's layout, ``HF_HUB_OFFLINE=1``); steps come from the computed points
of emergence, never from constants.
"""

from __future__ import annotations

import json
import re
from importlib import metadata

import nbformat

from conftest import NOTEBOOKS, STAND_IN_HUB_ID
from interp.core.provenance import source_digests
from interp.emergence import find_emergence, point_from_curve, scan_emergence
from interp.main_job.report import MainJobReport
from interp.report.notebook import library_copies
from interp.sources import LocalSuiteSource
from interp.tasks import RepetitionTask

EXPECTED = {"main_job", "hub_pythia", "synthetic", "first_hour"}


def _outputs(nb, kind: str) -> list[str]:
    """Every output of ``kind`` (``"text/html"``, ``"text/plain"`` or ``"stream"``) as text."""
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if kind == "stream" and out.output_type == "stream":
                found.append(out.text)
            elif kind != "stream" and kind in out.get("data", {}):
                found.append(out.data[kind])
    return found


def _check_offline_html(nb) -> str:
    """The notebook's HTML outputs as one string, after checking that none loads from a network."""
    html = "\n".join(_outputs(nb, "text/html"))
    # no script or stylesheet from a URL, no ES-module import from a CDN (circuitsvis's str() form)
    assert not re.search(r"<script[^>]*\bsrc=|<link[^>]*\bhref=[\"']https?:|from\s+[\"']https?://|unpkg\.com", html)
    assert not [e for c in nb.cells for e in c.get("outputs", []) if e.output_type == "error"]
    return html


def test_committed_notebooks_carry_no_outputs():
    found = {p.stem: p for p in NOTEBOOKS.glob("*.ipynb")}
    assert set(found) >= EXPECTED, f"missing notebooks: {EXPECTED - set(found)}"
    for name, path in found.items():
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, name
        dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
        assert not dirty, f"{path.name}: code cells {dirty} carry outputs; clear them before committing"


def test_main_job_notebook_runs_and_matches_the_library(notebook_runs, quick_suite):
    nb, out, _ = notebook_runs("main_job")
    html = _check_offline_html(nb)
    # each library once per notebook (issue 43, item 5): el.init_notebook() in the first cell
    # displays plotly.js and, on the first attention view, the circuitsvis bundle in one output;
    # no other output carries them (the export in test_report_browser draws every one)
    outputs = _outputs(nb, "text/html")
    assert library_copies(html, "plotly") == 1 and library_copies(html, "circuitsvis") == 1
    setup = next(c for c in nb.cells if c.cell_type == "code")  # the cell that calls el.init_notebook()
    first = [o.data["text/html"] for o in setup.outputs if "text/html" in o.get("data", {})]
    assert len(first) == 1 and library_copies(first[0], "plotly") == library_copies(first[0], "circuitsvis") == 1
    assert sum("plotly-graph-div" in one for one in outputs) >= 2
    assert "plotly-graph-div" in html and '<div id="circuits-vis-' in html
    report = MainJobReport.load(out / "results")
    runs, _ = quick_suite
    assert len(report.runs) == len(runs)
    batch = RepetitionTask().build(LocalSuiteSource(runs[0]).tokenizer())
    for run, folder in zip(report.runs, runs):
        source = LocalSuiteSource(folder)
        point = (scan_emergence if run.point.search == "scan" else find_emergence)(
            source, batch
        )  # as the notebook found it
        assert (run.point.pre_step, run.point.post_step, run.point.emerged) == (
            point.pre_step,
            point.post_step,
            point.emerged,
        )
        if run.heads is not None:
            n_layers, n_heads = run.delta.shape
            assert sorted(run.heads["rank"]) == list(range(1, n_layers * n_heads + 1))
            # the recorded weight digests are the checkpoints' own
            digests = report.provenance["checkpoints"][source.model_id]
            assert digests[f"step{point.post_step}"] == source.digest(point.post_step)
    provenance = report.provenance
    assert provenance["call"] == "interp.main_job.runner.run_study"
    assert provenance["packages"]["torch"] == metadata.version("torch")
    assert provenance["source"]["combined"] == source_digests()["combined"]
    assert provenance["settings"]["config"]["scan"] is False  # CI scale: bisection only
    # the readiness cell: the library's E and R on the first run, and its figure
    from interp.core.settings import StudyConfig
    from interp.readiness import readiness

    ready = readiness(LocalSuiteSource(runs[0]), batch, heads="auto", config=StudyConfig(n_boot=200))
    text = next(
        o["data"]["text/plain"]
        for c in nb.cells
        if c.cell_type == "code" and "ready.point_row()" in c.source
        for o in c.outputs
        if "data" in o
    )
    text = "".join(text) if isinstance(text, list) else text
    assert f"'emergence_step': {ready.emergence[1]}" in text and f"'readiness_step': {ready.ready[1]}" in text
    assert "capability vs ideal-pattern capability" in html


def test_hub_notebook_runs_offline_on_a_pythia_layout_cache(notebook_runs):
    nb, out, facts = notebook_runs("hub_pythia")
    _check_offline_html(nb)
    printed = "".join(_outputs(nb, "stream"))
    assert f"{STAND_IN_HUB_ID}: {len(facts['steps'])} checkpoints (hub cache, offline)" in printed
    report = MainJobReport.load(out / "results")
    (run,) = report.runs
    steps = facts["steps"]
    # the notebook's CI scale uses hold 0: the stand-in's cached steps end at its crossing
    pre, post, emerged = point_from_curve(steps, [facts["accuracy"][s] for s in steps], hold=0)
    assert emerged and (run.point.pre_step, run.point.post_step) == (pre, post)
    assert run.heads is not None and run.heads["delta"].notna().all()
    source = LocalSuiteSource(facts["run"])
    # hub blobs are named by their sha256: the digests equal the embedded run's weight digests
    assert report.provenance["checkpoints"][STAND_IN_HUB_ID][f"step{post}"] == source.digest(post)


def test_synthetic_notebook_shows_the_bias_shortening_the_plateau(notebook_runs):
    nb, _, _ = notebook_runs("synthetic")
    html = _check_offline_html(nb)
    assert html.count("plotly-graph-div") >= 8  # two runs' figures, loss, staircase, entropy, alignment
    summaries = json.loads(_outputs(nb, "stream")[-1])
    plain, biased = summaries["no bias"], summaries["bias β = 3"]
    assert biased["emerged"] and biased["final_loss"] < plain["final_loss"]
    assert plain["steps_to_threshold"] is None or biased["steps_to_threshold"] < plain["steps_to_threshold"]
    # alignment measured with the bias off: the biased model learned the true pattern itself
    assert biased["bare_alignment_max"] > plain["bare_alignment_max"]


def _stream(cell) -> str:
    """A cell's standard output as Jupyter shows it (consecutive streams merged, "\\r" applied)."""
    text = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def test_first_hour_notebook_is_small_shows_progress_and_reuses_its_answers(notebook_runs, quick_suite):
    """Issue 58: the ten-cell notebook of the public API saves under 6 MB with one copy of each
    library, draws progress on standard output in every slow cell, answers its repeated questions
    from kept evaluations, and works on the run whose jump is measurable."""
    nb, out, _ = notebook_runs("first_hour")
    html = _check_offline_html(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert len(code) == 10
    size = (out / "first_hour.ipynb").stat().st_size
    print(f"first_hour.ipynb saved: {size} bytes")
    assert size < 6_000_000, f"{size / 1e6:.2f} MB"
    # every library once, in the first cell's output (report, run, point, ranking, head view,
    # scrubber and population displays carry none)
    first = "".join(o.get("data", {}).get("text/html", "") for o in code[0].outputs)
    for name in ("plotly", "circuitsvis", "scrubber"):
        assert library_copies(html, name) == library_copies(first, name) == 1, name
    shown = ["".join(o.get("data", {}).get("text/html", "") for o in c.outputs) for c in code]
    assert "Findings" in shown[2] and "el-run-analysis" in shown[3] and "point of emergence" in shown[4]
    assert "el-head-ranking" in shown[5] and 'id="circuits-vis-' in shown[6] and "class='el-scrub'" in shown[7]
    assert "emergence over seeds" in shown[8] and sum("plotly-graph-div" in h for h in shown) >= 6
    # progress on standard output, never standard error, in every slow cell; standard error holds at
    # most the data's own caveat, a crossing with no room to hold (issue 67: said, not hidden)
    errs = [o["text"] for c in code for o in c.outputs if o.output_type == "stream" and o.name == "stderr"]
    assert all("fewer than the hold of" in e and "RuntimeWarning" in e for e in errs), errs
    runs, _ = quick_suite
    n = len(LocalSuiteSource(runs[0]).searchable_steps())
    assert "units: 100%" in _stream(code[2]) and f"{2 * n} checkpoints" in _stream(code[2])
    # the repeated questions: the scan and the population loaded nothing, and said so
    assert f"{n}/{n}" in _stream(code[4]) and f"{n} kept" in _stream(code[4])
    assert _stream(code[8]).count(f"{n} kept") == 2
    # the scrubber: the study's scan kept every step's patterns and head scores (issue 67 item 7)
    assert "100%" in _stream(code[7]) and f"{n} kept" in _stream(code[7])
    # the worked run is one whose jump stands above its noise, and the findings name its heads
    report = MainJobReport.load(out / "results")
    summary = report.summary()
    measurable = summary[summary["emerged"] & (summary["jump_too_small"] == False)]  # noqa: E712
    assert len(measurable), "the quick suite has a run whose jump is measurable"
    seed = int(measurable["seed"].iloc[0])
    assert f"seed {seed} · " in shown[3] and f"seed {seed}:" in shown[3]
    heads = next(line for line in report.findings() if line.startswith("Heads"))
    top = report.heads[report.heads["seed"] == seed].sort_values("rank").iloc[0]
    assert f"L{int(top['layer'])}H{int(top['head'])} (Δ" in heads
    # the scrubber opens at the post step of its point of emergence
    spec = json.loads(
        re.search(r"<script type='application/json' class='el-scrub-data'>(.*?)</script>", shown[7]).group(1)
    )
    assert spec["steps"][spec["start"]] == spec["post"] == int(measurable["post_step"].iloc[0])
