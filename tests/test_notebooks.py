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
from interp.sources import LocalSuiteSource
from interp.tasks import RepetitionTask

EXPECTED = {"main_job", "hub_pythia", "synthetic"}


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
    assert html.count("Copyright 2012-20") == 1 and html.count("window.CircuitsVis = CircuitsVis") == 1
    setup = next(c for c in nb.cells if c.cell_type == "code")  # the cell that calls el.init_notebook()
    first = [o.data["text/html"] for o in setup.outputs if "text/html" in o.get("data", {})]
    assert len(first) == 1 and "Copyright 2012-20" in first[0] and "window.CircuitsVis = CircuitsVis" in first[0]
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
    from interp.readiness import readiness

    ready = readiness(LocalSuiteSource(runs[0]), batch, heads="auto", n_boot=200)
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
    pre, post, emerged = point_from_curve(steps, [facts["accuracy"][s] for s in steps])
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
