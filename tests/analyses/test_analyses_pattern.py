"""The two `make results` entries of issue 25 at CI scale: analyses/readiness.py on the quick
suite (equal to the library's readiness, resumed from its saved runs) and analyses/forcing.py on a
tiny suite (forced runs trained once, then resumed without training; docs block written)."""

from __future__ import annotations

import os
import re

import pandas as pd
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def test_readiness_entry_matches_the_library_and_resumes(quick_suite, tmp_path, capsys, monkeypatch):
    from analyses import readiness as entry
    from interp.core.settings import StudyConfig
    from interp.readiness import readiness
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    runs, _ = quick_suite
    docs = tmp_path / "results.md"
    docs.write_text("# Results\n\n<!-- readiness:begin -->\nold\n<!-- readiness:end -->\n\nafter\n")
    monkeypatch.setattr(entry, "DOCS", docs)
    args = [
        "--suite",
        *map(str, runs),
        "--prompts",
        "32",
        "--n-boot",
        "50",
        "--out",
        str(tmp_path / "out"),
        "--update-docs",
    ]
    entry.main(args)
    points = pd.read_csv(tmp_path / "out" / "readiness_points.csv")
    assert len(points) == len(runs)
    source = LocalSuiteSource(runs[0])
    ref = readiness(source, RepetitionTask(n_prompts=32).build(source.tokenizer()), config=StudyConfig(n_boot=50))
    row = points.iloc[0]
    assert row["heads"] == ref.heads_label
    assert (None if pd.isna(row["readiness_step"]) else int(row["readiness_step"])) == ref.ready[1]
    curve = pd.read_csv(tmp_path / "out" / "readiness.csv")
    first = curve[curve["seed"] == ref.seed]
    assert first["ideal_p_answer"].to_numpy() == pytest.approx(ref.curve["ideal_p_answer"].to_numpy(), abs=1e-6)
    text = docs.read_text()
    assert "\nold\n" not in text and text.endswith("after\n") and "Command: `python -m analyses.readiness" in text
    assert capsys.readouterr().out.strip().endswith(f"readiness_runs: {len(runs)}")
    import interp.readiness as lib

    monkeypatch.setattr(lib, "readiness", lambda *a, **k: pytest.fail("recomputed a saved run"))
    entry.main(args[:-1])
    assert pd.read_csv(tmp_path / "out" / "readiness_points.csv").equals(points)


@pytest.mark.slow
def test_forcing_entry_trains_then_resumes(tmp_path, capsys, monkeypatch):
    from analyses import forcing as entry

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    docs = tmp_path / "results.md"
    docs.write_text("# Results\n")
    monkeypatch.setattr(entry, "DOCS", docs)
    args = [
        "--suite",
        "embedded-quick",
        "--steps",
        "16",
        "--checkpoint-every",
        "8",
        "--force-steps",
        "4",
        "--anneal-steps",
        "4",
        "--prompts",
        "8",
        "--jobs",
        "2",
        "--out",
        str(tmp_path / "out"),
        "--sweep-dir",
        str(tmp_path / "sweep"),
        "--update-docs",
    ]
    entry.main(args)
    out = capsys.readouterr().out
    assert "forced runs: 6 (6 trained now)" in out and out.strip().endswith("forcing_runs: 8")
    table = pd.read_csv(tmp_path / "out" / "forcing.csv")
    assert sorted(table["condition"].unique()) == ["both", "ind", "plain", "prev"]
    # the plain rows are the suite's own runs; the forced ones differ from them (the bias trained them)
    assert (table[table["condition"] == "plain"]["loss_change"] == 0).all()
    assert (table[table["condition"] != "plain"]["loss_change"] != 0).all()
    loss = pd.read_csv(next((tmp_path / "sweep").glob("*/neox-2l-64d-seed1/both")) / "loss.csv")
    row = table[(table["seed"] == 1) & (table["condition"] == "both")].iloc[0]
    assert row["final_loss"] == pytest.approx(loss["loss"].tail(100).mean(), rel=1e-12)
    assert "<!-- forcing:begin -->" in docs.read_text() and "Per condition" in docs.read_text()
    assert "On this suite, finding the pattern" in docs.read_text()  # the answer block, readiness not run here
    entry.main(args[:-1])
    assert "forced runs: 6 (0 trained now)" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / "out" / "forcing.csv").equals(table)
    # a subset of runs (what a partial run reports): only its rows, and the block says so
    entry.main(args[:-1] + ["--runs", "neox-2l-64d-seed2", "--out", str(tmp_path / "subset")])
    assert "forced runs: 3 (0 trained now)" in capsys.readouterr().out
    subset = pd.read_csv(tmp_path / "subset" / "forcing.csv")
    assert subset.equals(table[table["seed"] == 2].reset_index(drop=True))
    assert "**Runs: neox-2l-64d-seed2 only**" in (tmp_path / "subset" / "forcing.md").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--prev-head", "L1H0"], "--prev-head 'L1H0': expected a layer-0 head"),
        (["--suite", "nope"], "--suite 'nope' is unknown"),
        (["--beta", "-1"], "beta=-1.0 must be a finite number >= 0"),
        (["--runs", "neox-2l-64d-seed9"], "--runs 'neox-2l-64d-seed9': neox-2l-64d-seed9 not in this suite; valid: "),
    ],
)
def test_forcing_entry_refuses_bad_arguments_before_training(args, message, monkeypatch):
    from analyses import forcing as entry
    from interp.sources import embedded

    monkeypatch.setattr(embedded, "ensure_suite", lambda *a, **k: pytest.fail("trained before checking arguments"))
    with pytest.raises(ValueError, match=re.escape(message)):
        entry.main(args)


def _shift(mean, lo, hi, within=6, not_worse=None):
    return pd.DataFrame(
        [
            {
                "condition": "both",
                "forcing": "",
                "runs": 6,
                "runs_with_shift": 6,
                "mean_shift": mean,
                "shift_lo": lo,
                "shift_hi": hi,
                "earlier": 5,
                "later": 1,
                "same": 0,
                "mean_loss_change": 0.001,
                "runs_within_1pct": within,
                "runs_not_worse_1pct": within if not_worse is None else not_worse,
            }
        ]
    )


def _ready(e_minus_r_lo):
    return pd.DataFrame({"readiness_step": [100.0] * len(e_minus_r_lo), "e_minus_r_lo": e_minus_r_lo})


@pytest.mark.parametrize(
    "ready, shift, verdict",
    [
        (_ready([50, 100, 20, 0, 30, 10]), _shift(-300, -500, -100), "**is the bottleneck**"),
        (_ready([50, 100, 20, 0, 30, 10]), _shift(-30, -200, 100), "**is partly the bottleneck**"),
        (_ready([0, 0, -10, 0, 30, 10]), _shift(-300, -500, -100), "**is partly the bottleneck**"),
        (_ready([0, 0, -10, 0, 30, 10]), _shift(-300, -500, -100, within=2), "**is not the bottleneck**"),
        (None, _shift(float("nan"), float("nan"), float("nan")), "**is not the bottleneck**"),
        # a forced run that ends with a lower loss (it emerged earlier and trained longer past its
        # plateau) does not count against forcing; one more than 1 % worse does
        (
            _ready([0, 0, -10, 0, 30, 10]),
            _shift(-300, -500, -100, within=0, not_worse=6),
            "**is partly the bottleneck**",
        ),
        (_ready([0, 0, -10, 0, 30, 10]), _shift(-300, -500, -100, within=0, not_worse=2), "**is not the bottleneck**"),
    ],
)
def test_answer_follows_its_rule(ready, shift, verdict):
    from analyses.forcing import answer

    text = answer(ready, shift)
    assert verdict in text and text.count("\n") == 1
