"""Readiness (interp/readiness.py, `emergence readiness`): E and R under one rule with a bootstrap
interval over prompts, the per-checkpoint ideal-pattern capability equal to a plain hooked
forward to 1e-5 on every checkpoint, argument checks before anything loads, the files and the
page (opened in a headless browser)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from emergence_lens.cli import app
from interp.core.settings import StudyConfig
from interp.readiness import _bootstrap, crossing, parse_heads, parse_patterns, readiness

runner = CliRunner()
STEPS = [0, 1, 2, 4, 8, 16, 32, 64]


def test_crossing_uses_the_hold_rule():
    acc = [0.0, 0.6, 0.1, 0.2, 0.7, 0.8, 0.9, 0.9]  # a blip at step 1 is not a crossing (hold 2)
    assert crossing(STEPS, acc, 0.5, hold=2) == (4, 8)
    assert crossing(STEPS, acc, 0.5, hold=0) == (0, 1)


def test_bootstrap_interval_over_prompts():
    # 40 prompts; plain: prompt k solved from checkpoint index 5 on; ideal: from index 2 on, except
    # 30 % of prompts that only switch at index 5 too -> E = 16, R = 2, E - R = 14.
    n = 40
    plain = np.zeros((len(STEPS), n))
    plain[5:] = 1
    ideal = np.zeros((len(STEPS), n))
    ideal[2:, : int(0.7 * n)] = 1
    ideal[5:] = 1
    assert crossing(STEPS, plain.mean(1))[1] == 16 and crossing(STEPS, ideal.mean(1))[1] == 2
    (lo, hi), defined = _bootstrap(STEPS, plain, ideal, 0.5, 2, 500, 0)
    assert defined == 1.0 and lo == hi == 14.0  # no resample of 40 draws drops the 70 % below half
    # 50 % of prompts ready at index 2: resamples put R at 2 or 16, so the interval spans 0..14
    ideal2 = np.zeros((len(STEPS), n))
    ideal2[2:, : n // 2] = 1
    ideal2[5:] = 1
    (lo, hi), _ = _bootstrap(STEPS, plain, ideal2, 0.5, 2, 500, 0)
    assert lo == 0.0 and hi == 14.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("L1H0,X", "'X' is not a head"),
        ("L1H0,L1H0", "repeated"),
    ],
)
def test_parse_heads_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_heads(text)


def test_parse_patterns():
    assert parse_heads("L1H0,l0h2") == [(1, 0), (0, 2)]
    assert parse_patterns("induction,previous_token", 2) == ["induction", "previous_token"]
    with pytest.raises(ValueError, match="'inductio' is unknown; valid: auto, previous_token"):
        parse_patterns("inductio", 1)
    with pytest.raises(ValueError, match="3 names for 2 heads"):
        parse_patterns("induction,uniform,uniform", 2)


def _source(path):
    from interp.sources import open_sources

    (src,) = open_sources([str(path)])
    return src


def _hooked_curve(src, batch, heads):
    """Reference: per step, p(answer) and accuracy with hook_pattern overwritten (run_with_hooks)."""
    from interp.patching.ideal import ideal_pattern

    rows = []
    for step in src.available_steps():
        model = src.load(step).model
        hooks = []
        for (layer, head), name in heads.items():
            ideal = ideal_pattern(name, batch.tokens)

            def hook(act, hook, head=head, ideal=ideal):
                act = act.clone()
                act[:, head] = ideal
                return act

            hooks.append((f"blocks.{layer}.attn.hook_pattern", hook))
        with torch.no_grad():
            logits = model.run_with_hooks(batch.tokens, fwd_hooks=hooks)
        final = logits[torch.arange(len(batch.tokens)), batch.answer_pos].float()
        rows.append(
            (
                step,
                float((final.argmax(-1) == batch.answers).float().mean()),
                float(final.softmax(-1).gather(1, batch.answers[:, None]).mean()),
            )
        )
    return pd.DataFrame(rows, columns=["step", "ideal_accuracy", "ideal_p_answer"])


@pytest.mark.parametrize("method", ["fast", "reference"])
def test_readiness_equals_hooked_forward(tiny_local_suite, method):
    from interp.tasks import make_task

    torch.set_num_threads(1)
    src = _source(tiny_local_suite)
    batch = make_task("repetition", n_prompts=12, length=6, seed=0).build(src.tokenizer())
    result = readiness(
        src,
        batch,
        heads=[(0, 1), (1, 2)],
        patterns="previous_token,induction",
        config=StudyConfig(method=method, n_boot=50),
    )
    ref = _hooked_curve(src, batch, {(0, 1): "previous_token", (1, 2): "induction"})
    assert result.heads == {(0, 1): "previous_token", (1, 2): "induction"}
    np.testing.assert_allclose(result.curve["ideal_p_answer"], ref["ideal_p_answer"], atol=1e-5)
    np.testing.assert_allclose(result.curve["ideal_accuracy"], ref["ideal_accuracy"], atol=1e-5)
    # a real patch (random tiny weights: the effect is small)
    assert float((result.curve["ideal_p_answer"] - result.curve["p_answer"]).abs().max()) > 5e-6
    table = result.table()
    assert list(table["step"]) == [0, 100, 200] and set(table["heads"]) == {"L0H1=previous_token+L1H2=induction"}


def test_auto_heads_pick_the_top_scores(tiny_local_suite):
    from interp.scores import head_scores, repeated_random_tokens
    from interp.tasks import alnum_token_pool, make_task

    src = _source(tiny_local_suite)
    batch = make_task("repetition", n_prompts=8, length=6, seed=0).build(src.tokenizer())
    result = readiness(src, batch, config=StudyConfig(n_boot=10))
    # never emerges (random weights): the heads are picked at the last step
    model = src.load(200).model
    scores = head_scores(model, repeated_random_tokens(alnum_token_pool(src.tokenizer()), 16, 20), 20)
    ind = divmod(int(scores["prefix_matching"].argmax()), 4)
    assert result.heads[ind] == "induction" and len(result.heads) == 2
    assert result.emergence == (None, None) and result.e_minus_r is None


@pytest.mark.parametrize(
    "args, message",
    [
        (["--heads", "L1X0"], "--heads: 'L1X0' is not a head"),
        (["--patterns", "inductoin"], "--patterns: 'inductoin' is unknown"),
        (["--heads", "L1H0,L0H2", "--patterns", "induction,uniform,uniform"], "3 names for 2 heads"),
        (["--method", "exact"], "method='exact'; valid: fast, reference, attribution"),  # the settings' list
        (["--threshold", "0"], "threshold=0.0 must be in (0, 1]"),
        (["--heads", "L2H0", "--patterns", "induction"], "--heads: L2H0 is outside neox-2l-64d-seed1 (layers 0..1"),
    ],
)
def test_cli_refuses_bad_arguments_before_loading(args, message, monkeypatch):
    import interp.cli.heads as cli  # the module of the readiness command

    monkeypatch.setattr(cli, "open_named", lambda names: pytest.fail("opened a source before checking arguments"))
    result = runner.invoke(app, ["readiness", "embedded-quick/neox-2l-64d-seed1", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and result.output.count("\n") <= 1


def test_cli_head_out_of_range(tiny_local_suite):
    result = runner.invoke(app, ["readiness", str(tiny_local_suite), "--heads", "L5H0", "--patterns", "induction"])
    assert result.exit_code == 2 and "head (5, 0) out of range" in result.output


@pytest.mark.slow
def test_cli_writes_files_and_page(tiny_local_suite, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "readiness",
            str(tiny_local_suite),
            "--heads",
            "L0H1,L1H2",
            "--patterns",
            "previous_token,induction",
            "--n-prompts",
            "12",
            "--length",
            "6",
            "--n-boot",
            "20",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "readiness.csv")
    assert (
        list(table.columns)
        == ["model", "seed", "step", "accuracy", "p_answer", "ideal_accuracy", "ideal_p_answer", "heads"]
        and len(table) == 3
    )
    points = pd.read_csv(out / "readiness_points.csv")
    assert len(points) == 1 and points["hold"].iloc[0] == 2
    from interp.tasks import make_task

    src = _source(tiny_local_suite)
    batch = make_task("repetition", n_prompts=12, length=6, seed=0).build(src.tokenizer())
    ref = _hooked_curve(src, batch, {(0, 1): "previous_token", (1, 2): "induction"})
    np.testing.assert_allclose(table["ideal_p_answer"], ref["ideal_p_answer"], atol=1e-5)
    page = (out / "readiness.html").read_text()
    assert "capability vs ideal-pattern capability" in page and "E − R" not in page  # never emerges here


@pytest.mark.slow
def test_page_in_browser(tiny_local_suite, tmp_path):
    from browser import chromium_path, visit

    if chromium_path() is None:
        pytest.skip("headless Chromium not found (Debian package 'chromium')")
    out = tmp_path / "out"
    runner.invoke(
        app,
        [
            "readiness",
            str(tiny_local_suite),
            "--heads",
            "L1H2",
            "--patterns",
            "induction",
            "--n-prompts",
            "8",
            "--length",
            "6",
            "--n-boot",
            "10",
            "--out",
            str(out),
        ],
    )
    shots = {}
    for width in (1280, 800):
        shots[width] = tmp_path / f"readiness-{width}.png"
        result = visit(out / "readiness.html", shots[width], width=width)
        assert result.page_errors == [] and result.console_errors == [] and result.blocked == []
        (fig,) = result.state["figs"]
        assert result.ready and fig["svg"] and fig["traces"] >= 2 and fig["legend"] >= 2
    if os.environ.get("EMERGENCE_LENS_SCREENSHOTS"):
        import shutil

        for shot in shots.values():
            shutil.copy(shot, os.path.join(os.environ["EMERGENCE_LENS_SCREENSHOTS"], shot.name))


def test_report_section_of_a_run_with_readiness(tiny_local_suite):
    from types import SimpleNamespace

    from interp.report.display import Assets
    from interp.report.page import RUN_SECTIONS, ReportContext, readiness_section, run_html
    from interp.tasks import make_task

    src = _source(tiny_local_suite)
    batch = make_task("repetition", n_prompts=8, length=6, seed=0).build(src.tokenizer())
    result = readiness(src, batch, heads={(1, 2): "induction"}, config=StudyConfig(n_boot=10))
    run = SimpleNamespace(model="suite0", seed=0, readiness=result)
    ctx = ReportContext(assets=Assets())
    assert readiness_section in RUN_SECTIONS
    page = run_html(run, ctx)
    assert "Readiness: capability with ideal attention patterns" in page and "L1H2=induction" in page
    assert readiness_section(SimpleNamespace(model="m", seed=0), ctx) is None  # a run without it: no section


def test_figure_marks_e_and_r_on_the_step_axis():

    from interp.readiness import ReadinessResult, readiness_figure

    curve = pd.DataFrame(
        {
            "step": STEPS,
            "accuracy": [0] * 5 + [1] * 3,
            "p_answer": 0.5,
            "ideal_accuracy": [0, 0] + [1] * 6,
            "ideal_p_answer": 0.5,
        }
    )
    result = ReadinessResult("m", 0, {(1, 0): "induction"}, curve, (8, 16), (1, 2), 14, (14.0, 14.0), 1.0, 10, 0.5, 2)
    fig = readiness_figure(result)
    marks = {a.text: a.x for a in fig.layout.annotations}
    assert marks == {"E = step 16": 16, "R = step 2": 2}  # a linear step axis (issue 58, item 5)
    assert fig.layout.xaxis.type == "linear"
    assert sorted(s.x0 for s in fig.layout.shapes if s.x0 == s.x1 and s.type == "line") == [2, 16]
    assert len(fig.data) == 3
