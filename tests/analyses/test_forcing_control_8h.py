"""analyses.forcing_control_8h: the 8-head seeds forced for 8000 steps and read against the plain
continuation (issue 52, item 2). Fast tier: hand-made curves and tables, no training."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analyses import forcing_control_8h as entry
from interp.population import forced as control
from interp.population import kept as pop

ARM = "neox-2l-64d-8h"
Z = 1.959963984540054


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval written out (Wilson 1927), to check the library's."""
    centre = (k + Z**2 / 2) / (n + Z**2)
    half = Z / (n + Z**2) * math.sqrt(k * (n - k) / n + Z**2 / 4)
    return centre - half, centre + half


def _curve(run: str, budget: int, e: int | None, seconds: float | None = None) -> pd.DataFrame:
    """A kept curve of ``run`` to ``budget`` (checkpoints every 100): accuracy 0.1, then 0.9 from
    step ``e`` on (never when None)."""
    from interp.population.kept import curve_columns

    steps = list(range(0, budget + 1, 100))
    acc = [0.9 if e is not None and s >= e else 0.1 for s in steps]
    seed = int(run.rsplit("seed", 1)[1])
    frame = pd.DataFrame(
        {"arm": ARM, "run": run, "seed": seed, "n_layers": 2, "d_model": 64, "n_heads": 8, "d_head": 8}
        | {"budget": budget, "step": steps, "accuracy": acc, "p_answer": acc}
    )[curve_columns()]
    if seconds is not None:
        frame["train_seconds"] = seconds
    return frame


def _readout(f: int, c: int, p: int, long: int, n: int = 12, n_long: int | None = None) -> pd.DataFrame:
    """The shares table from hand-made forced and plain tables: ``f``/``c`` of ``n`` forced runs
    emerged (true/control, E 3000 + 100 i), ``p`` plain runs by 8000 and ``long`` by 12000."""
    n_long = n if n_long is None else n_long
    forced = pd.DataFrame(
        [
            {"run": f"r{i}", "condition": cond, "E_forced": 3000.0 + 100 * i if i < k else np.nan}
            for cond, k in (("true", f), ("control", c))
            for i in range(n)
        ]
    )
    plain = pd.DataFrame(
        {
            "run": [f"r{i}" for i in range(n_long)],
            "E_by_budget": [5000.0 + 100 * i if i < p else np.nan for i in range(n_long)],
            "long_budget": 12000,
            "E_long": [5000.0 + 500 * i if i < long else np.nan for i in range(n_long)],
        }
    )
    return entry.shares(forced, plain, 8000)


def test_shares_give_the_wilson_interval_and_e_of_each_group():
    table = _readout(f=10, c=3, p=0, long=2).set_index("group")
    assert table.index.tolist() == list(entry.GROUPS)
    assert table["by_step"].tolist() == [8000, 8000, 8000, 12000]
    assert table["runs"].tolist() == [12, 12, 12, 12] and table["emerged"].tolist() == [10, 3, 0, 2]
    for group, k in (("true", 10), ("control", 3), ("plain_long", 2)):
        lo, hi = _wilson(k, 12)
        assert table.loc[group, "share"] == pytest.approx(k / 12, abs=1e-12)
        assert table.loc[group, "share_lo"] == pytest.approx(lo, abs=1e-9)
        assert table.loc[group, "share_hi"] == pytest.approx(hi, abs=1e-9)
    assert table.loc["true", "share_lo"] == pytest.approx(0.5519, abs=1e-4)  # 10/12: 0.552-0.953
    assert table.loc["plain", "share_lo"] == 0.0 and table.loc["plain", "share_hi"] == pytest.approx(0.2425, abs=1e-4)
    assert table.loc["true", ["E_min", "E_median", "E_max"]].tolist() == [3000.0, 3450.0, 3900.0]
    assert table.loc["plain_long", ["E_min", "E_max"]].tolist() == [5000.0, 5500.0]
    assert np.isnan(table.loc["plain", "E_median"])


def _units(n: int = 12):
    from interp.population.kept import read_kept_heads

    cfg = entry.forced_config(8000)
    return control.plan([(cfg.sizes[0], s) for s in range(n)], read_kept_heads(), [(0.25, 500)], 250, Path("s"))


def _judged(true_e, control_e, plain_curve, n: int = 12):
    """The entry's judged contrasts on hand-made curves: ``true_e(seed)``, ``control_e(seed)``: E of
    each forced run (None: never); ``plain_curve(seed)``: the plain continuation's curve."""
    units = _units(n)
    curves = {
        f"{u['run']}/{u['folder'].name}": _curve(
            u["run"], 8000, (true_e if u["condition"] == "true" else control_e)(u["seed"])
        )
        for u in units
    }
    long = pd.concat([plain_curve(s) for s in range(n)])
    runs = [f"{ARM}-seed{s}" for s in range(n)]
    table = entry.arm_curves(units, curves, long, runs, 8000)
    return table, {j.label: j for j in entry.judged_contrasts(table, 8000)}


def test_the_forced_arms_are_paired_by_seed_and_judged():
    """Every true-forced run emerges at 3000, no control run and no plain run does (the plain runs
    creep to 0.45 from step 5000): forced true against either is earlier in each of the 12 strata
    (seeds): O - E = 1/2, variance 1/4 each, chi2 = 12, in every cell of the rule grid; the judge
    says reproduced, robust, with the test's own direction."""
    from scipy.stats import chi2

    creep = lambda s: _curve(f"{ARM}-seed{s}", 12000, 5000).assign(  # noqa: E731
        accuracy=lambda c: c["accuracy"].clip(upper=0.45)
    )
    table, found = _judged(lambda s: 3000, lambda s: None, creep)
    assert sorted(set(table["arm"])) == ["control", "plain", "true"] and table["step"].max() == 8000
    assert table.groupby("arm")["run"].nunique().tolist() == [12, 12, 12]
    assert set(table.loc[table["arm"] == "plain", "run"]) == {f"plain-seed{s}" for s in range(12)}
    assert list(found) == [label for _, _, label in entry.CONTRASTS]
    for j in found.values():
        assert (j.verdict.word, j.verdict.robust, j.verdict.side) == ("reproduced", "robust", "earlier")
        assert j.evidence.test == "log-rank stratified by seed"
        at = j.evidence.cell()
        assert at.p == pytest.approx(chi2.sf(12, 1), rel=1e-6) and at.sign == 1
    plain = found["forced toward the true pattern against plain"]
    assert "plain: 12 of 12 runs never emerged, their level 0.45–0.45" in plain.verdict.reason  # a ceiling, named


def test_a_null_on_a_ceiling_is_called_ceiling_and_a_balanced_null_a_robust_null():
    """The plain runs level off at 0.4 (under the threshold 0.5, flat) and only seed 0's true-forced
    run emerges: stratified p = 0.32, not significant, and the plain arm sits on a ceiling: the
    judge says ceiling, not "not decidable". The control runs emerge at the steps of the true-forced
    runs with their neighbours' seeds (seed 0 at seed 1's step and back), so each arm's steps are
    the same and in each pair of seeds one is earlier, one later: O - E = 0, a robust null."""
    flat = lambda s: _curve(f"{ARM}-seed{s}", 12000, None).assign(accuracy=0.4)  # noqa: E731
    _, found = _judged(lambda s: 3000 if s == 0 else None, lambda s: None, flat)
    plain = found["forced toward the true pattern against plain"].verdict
    assert plain.word == "ceiling" and "log-rank stratified by seed p = 0.32" in plain.reason
    assert "plain: 12 of 12 runs never emerged, their level 0.40–0.40 (median 0.40, below the threshold 0.5)" in (
        plain.reason
    )
    _, found = _judged(lambda s: 3000 + 100 * s, lambda s: 3000 + 100 * (s ^ 1), flat)
    other = found["forced toward the true pattern against the offset control"].verdict
    assert (other.word, other.robust) == ("not decidable", "robust null") and "p = 1.00" in other.reason


def test_the_headline_line_gives_the_judges_words_beside_the_paper():
    table = _readout(12, 0, 0, 0)
    _, found = _judged(lambda s: 3000, lambda s: None, lambda s: _curve(f"{ARM}-seed{s}", 12000, None))
    judged = list(found.values())
    line = entry.headline_line(table, judged, "0.25:500")
    assert line.startswith(
        "- **The 8-head arm, forced** (`forcing_control_8h`: 12 seeds forced toward the true pattern and 12 toward "
        "the offset control, β:N 0.25:500, 8000 steps; the paper's claim 3: a bias toward the true pattern removes "
        "the plateau): at threshold 0.5, hold 2, forced toward the true pattern against plain (cut at 8000 steps): "
        "emerged 12/12 against 0/12, Kaplan-Meier median E 3000 steps against not reached: **reproduced**, robust "
        "(log-rank stratified by seed p < 0.001, earlier"
    )
    assert line.endswith("; plain seeds emerged by 12000 steps: 0 of 12.\n")
    for old in ("search", "capacity", "long plateau"):
        assert old not in line
    short = _readout(6, 0, 0, 0, n=6)
    assert "; 6 of the 12 true-forced runs and 6 of the 12 plain continuations kept, so not a finding yet)" in (
        entry.headline_line(short, judged, "0.25:500")
    )
    none = table.copy()
    none.loc[none["group"].isin(["true", "control"]), ["runs", "emerged"]] = 0  # no forced run kept yet
    assert entry.headline_line(none, [], "0.25:500") == ""


def test_the_docs_block_gives_the_calls_runtime_only_where_it_trained_and_the_runs_training_time():
    table = _readout(12, 0, 0, 0)
    kept = entry.docs_block("cmd --finished-only", table, [], 0, 1.0, train_seconds=[300.0, np.nan, 400.0, 342.0])
    assert kept.splitlines()[:2] == [
        "Command: `cmd --finished-only`; no run trained by this call (the kept ones only).",
        "Training time of one forced run (as the runs were trained): median 342 s over 3 runs.",
    ]
    assert "- No contrast has both its arms kept yet." in kept
    ran = entry.docs_block("cmd", table, [], 4, 1500.0)
    assert ran.splitlines()[:2] == ["Command: `cmd`; 4 forced runs trained by this call; runtime 25.0 min.", ""]


def test_paired_tests_count_the_discordant_seeds_and_give_the_exact_p():
    """Seeds 0-5 emerge forced toward the true pattern, seed 0 also plain, no control run emerges:
    true against plain has 5 discordant seeds all one way (p = 2 / 2**5 = 0.0625), against the
    control 6 (p = 2 / 2**6 = 0.03125); a seed only one group has is left out."""
    forced = pd.DataFrame(
        [
            {"run": f"r{i}", "condition": c, "emerged": c == "true" and i < 6}
            for c in ("true", "control")
            for i in range(8)
        ]
    )
    plain = pd.DataFrame({"run": [f"r{i}" for i in range(9)], "emerged_by_budget": [i == 0 for i in range(9)]})
    tests = entry.paired_tests(forced, plain)
    assert [(t["second"], t["seeds"], t["a"], t["b"]) for t in tests] == [("plain", 8, 5, 0), ("control", 8, 6, 0)]
    assert tests[0]["p"] == pytest.approx(0.0625, abs=1e-12) and tests[1]["p"] == pytest.approx(0.03125, abs=1e-12)
    assert entry.paired_line(tests).endswith(
        "true against plain: 5 of 8 seeds emerged true-forced only, 0 plain only, p = 0.0625; true against control: 6 of 8 "
        "seeds emerged true-forced only, 0 control only, p = 0.0312"
    )
    none = entry.paired_tests(forced.assign(emerged=False), plain.assign(emerged_by_budget=False))
    assert [t["p"] for t in none] == [1.0, 1.0]


def test_plain_and_forced_emergence_are_cut_at_the_budget_with_room_to_hold():
    long = pd.concat(
        [
            _curve(f"{ARM}-seed0", 12000, 7900),  # crosses at 7900: no room to hold by 8000, emerged by 12000
            _curve(f"{ARM}-seed1", 12000, 7700),  # 7700 held at 7800 and 7900: emerged by 8000
            _curve(f"{ARM}-seed2", 12000, None),
        ]
    )
    plain = entry.plain_table(long, [f"{ARM}-seed{s}" for s in (0, 1, 2, 3)], 8000)
    assert plain["run"].tolist() == [f"{ARM}-seed{s}" for s in (0, 1, 2)]  # seed 3 not kept: left out
    assert plain["E_by_budget"].fillna(-1).tolist() == [-1, 7700, -1]
    assert plain["E_long"].fillna(-1).tolist() == [7900, 7700, -1]
    assert plain["emerged_long"].tolist() == [True, True, False] and plain["long_budget"].tolist() == [12000] * 3
    unit = {"run": f"{ARM}-seed0", "folder": Path("x/true-b0.25-n500"), "condition": "true", "beta": 0.25}
    unit |= {"force_steps": 500, "forcing": control.forcing_of("true", (0, 2), (1, 4), 0.25, 500, 250)}
    forced = entry.forced_table([unit], {f"{ARM}-seed0/true-b0.25-n500": _curve(unit["run"], 8000, 1200, 4.5)}, 8000)
    assert forced.iloc[0][["E_forced", "emerged", "train_seconds"]].tolist() == [1200.0, True, 4.5]
    assert forced.iloc[0]["heads"] == "L0H2=previous_token+L1H4=induction"


def test_forced_config_is_the_long_spec_cut_to_the_budget_with_the_populations_weights():
    from interp.sources.catalogue import load_suite_spec
    from interp.sources.embedded import _RUN_SELECTION

    cfg = entry.forced_config(8000)
    population = load_suite_spec("population")
    assert [s.name for s in cfg.sizes] == [ARM] and cfg.steps == 8000 and cfg.steps_for(cfg.sizes[0]) == 8000
    assert cfg.checkpoint_steps_for(cfg.sizes[0])[-2:] == (7900, 8000) and cfg.seeds == tuple(range(24))
    assert cfg.sizes[0] in population.sizes  # the same shape, rotary dims included
    weights = lambda c: {k: v for k, v in dataclasses.asdict(c).items() if k not in _RUN_SELECTION}  # noqa: E731
    assert weights(cfg) == weights(population)
    for bad in (8050, 0, 12100):
        with pytest.raises(ValueError, match=rf"^--budget {bad} must be a multiple of 100 steps from 100 to 12000"):
            entry.forced_config(bad)


def test_plan_forces_each_8_head_seed_on_its_own_kept_heads():
    from interp.population.kept import read_kept_heads

    cfg = entry.forced_config(8000)
    seeds = pop.parse_seeds("0-11", cfg.seeds)
    assert seeds == list(range(12)) and pop.parse_seeds("3, 1-2,3", cfg.seeds) == [3, 1, 2]
    units = control.plan([(cfg.sizes[0], s) for s in seeds], read_kept_heads(), [(0.25, 500)], 250, Path("sweep"))
    assert len(units) == 24 and [u["condition"] for u in units[:2]] == ["true", "control"]
    raw = pd.read_csv(entry.ROOT / "docs" / "data" / "population" / "heads" / f"{ARM}-seed0.csv")
    last = raw[raw["step"] == raw["step"].max()]
    h0 = int(last[last["layer"] == 0].set_index("head")["previous_token"].idxmax())
    h1 = int(last[last["layer"] == 1].set_index("head")["prefix_matching"].idxmax())
    assert units[0]["run"] == f"{ARM}-seed0" and units[0]["folder"] == Path(f"sweep/{ARM}-seed0/true-b0.25-n500")
    assert units[0]["forcing"].heads == ((0, h0, "previous_token"), (1, h1, "induction"))
    assert units[1]["forcing"].heads == ((0, h0, "offset_3"), (1, h1, "induction_offset_3"))
    f = units[1]["forcing"]
    assert (f.beta, f.steps, f.anneal_steps) == (0.25, 500, 250)
    assert {u["forcing"].heads[0][1] for u in units} <= set(range(8))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cells", "1:500,0.25:500"], "--cells '1:500,0.25:500' must be one β:N cell here"),
        (["--cells", "x"], "--cells 'x' must be comma-separated β:N pairs"),
        (["--budget", "8050"], "--budget 8050 must be a multiple of 100 steps from 100 to 12000"),
        (["--budget", "16000"], "--budget 16000 must be a multiple of 100 steps from 100 to 12000"),
        (["--seeds", "0-30"], "--seeds '0-30' must be seeds or a-b ranges of 0-23, e.g. 0-11"),
        (["--seeds", "5-2"], "--seeds '5-2' must be seeds or a-b ranges of 0-23"),
        (["--seeds", "a"], "--seeds 'a' must be seeds or a-b ranges of 0-23"),
        (["--jobs", "0"], "--jobs 0 must be >= 1 and --anneal-steps 250 >= 0"),
    ],
)
def test_bad_options_are_refused_in_one_line_before_anything_loads(argv, message, tmp_path):
    with pytest.raises(SystemExit, match="^error: " + re.escape(message)) as stop:
        entry.main([*argv, "--out", str(tmp_path / "out"), "--kept", str(tmp_path / "kept")])
    assert "\n" not in str(stop.value.code)
    assert not (tmp_path / "out").exists() and not (tmp_path / "kept").exists()


def test_finished_only_reads_the_kept_forced_runs_against_the_plain_continuation(tmp_path, monkeypatch):
    from interp.population import kept as population
    from interp.population.kept import read_kept_heads

    with pytest.raises(SystemExit, match=r"^error: no forced run of this command is kept in .*runs yet"):
        entry.main(["--finished-only", "--kept", str(tmp_path / "kept"), "--out", str(tmp_path / "out")])
    cfg = entry.forced_config(8000)
    sweep = tmp_path / "sweep"
    units = control.plan([(cfg.sizes[0], s) for s in (0, 1)], read_kept_heads(), [(0.25, 500)], 250, sweep)
    for u in units:  # true runs emerge (1200, 1300), controls never; written as the entry keeps them
        e = 1200 + 100 * u["seed"] if u["condition"] == "true" else None
        path = control.forced_curve(u, tmp_path / "kept")
        path.parent.mkdir(parents=True, exist_ok=True)
        _curve(u["run"], 8000, e, 300.0).to_csv(path, index=False)
    long = tmp_path / "long"
    (long / "curves").mkdir(parents=True)
    _curve(f"{ARM}-seed0", 12000, 9000).to_csv(long / "curves" / f"{ARM}-seed0.csv", index=False)
    _curve(f"{ARM}-seed1", 12000, None).to_csv(long / "curves" / f"{ARM}-seed1.csv", index=False)
    monkeypatch.setitem(population.SPECS, entry.LONG_SPEC, (long, 256))
    out = tmp_path / "out"
    argv = ["--seeds", "0-1", "--finished-only", "--kept", str(tmp_path / "kept"), "--out", str(out)]
    entry.main([*argv, "--sweep-dir", str(sweep)])
    shares = pd.read_csv(out / "forcing_control_8h_shares.csv").set_index("group")
    assert shares["emerged"].tolist() == [2, 0, 0, 1] and shares["runs"].tolist() == [2, 2, 2, 2]
    assert shares.loc["true", ["E_min", "E_max"]].tolist() == [1200.0, 1300.0]
    assert shares.loc["plain_long", "E_min"] == 9000.0 and shares.loc["plain_long", "by_step"] == 12000
    block = (out / "forcing_control_8h.md").read_text()
    assert "| forced, true pattern | 8000 | 2 | 2 | 1.00 (0.34–1.00) | 1200–1300 (1250) |" in block
    # 2 seeds: each true-forced run emerges, its plain twin not by 8000: chi2 = 2, p = 0.16, in every cell
    assert (
        "Judged at threshold 0.5, hold 2 (interp.population.judge: the words, and robustness over the rule grid "
        "threshold 0.4, 0.5, 0.6 × hold 1, 2, 3; the paper's claim 3 wants the true-forced runs earlier); 2 of the 12 "
        "true-forced runs and 2 of the 12 plain continuations kept, so not a finding yet:"
    ) in block
    assert (
        "- forced toward the true pattern against plain (cut at 8000 steps): emerged 2/2 against 0/2, Kaplan-Meier "
        "median E 1250 steps against not reached: **not decidable**, robust null (log-rank stratified by seed p = 0.16"
    ) in block
    docs = tmp_path / "results.md"
    docs.write_text(f"a\n{entry.BEGIN}\nold\n{entry.END}\nb\n")
    entry.update_docs(block, docs)
    assert docs.read_text() == f"a\n{entry.BEGIN}\n{block}{entry.END}\nb\n"
    assert entry.BEGIN in entry.DOCS.read_text() and entry.END in entry.DOCS.read_text()


@pytest.mark.slow
def test_a_toy_forced_pair_is_trained_evaluated_on_the_asked_prompts_and_read(tmp_path, monkeypatch):
    """CI-sized: the entry's training path (forcing_control.train_missing with the entry's prompt
    count) on a 2-layer model of 24 steps, then its readout."""
    from interp.population import kept as population
    from interp.sources import catalogue

    cfg = dataclasses.replace(
        catalogue.QUICK, steps=24, size_steps=(), checkpoint_every=8, seeds=(1,), warmup_steps=4, batch_size=4
    )
    size = catalogue.SMALL
    run = f"{size.name}-seed1"
    heads = pd.DataFrame(  # the kept features' shape: layer-0 head 1 and layer-1 head 0 score highest at the end
        [
            {"run": run, "step": 24, "layer": layer, "head": head}
            | {"previous_token": 0.9 if (layer, head) == (0, 1) else 0.1, "prefix_matching": 0.8 if head == 0 else 0.2}
            for layer in (0, 1)
            for head in range(size.n_heads)
        ]
    )
    units = control.plan([(size, 1)], heads, [(0.25, 8)], 4, tmp_path / "sweep")
    asked = []
    real = population.evaluate_run
    monkeypatch.setattr(population, "evaluate_run", lambda *a: asked.append(a[-1]) or real(*a))
    kept = tmp_path / "kept"
    assert control.train_missing(units, cfg, jobs=1, kept=kept, echo=lambda s: None, n_prompts=8) == 2
    assert asked == [8, 8]
    curves = {f"{u['run']}/{u['folder'].name}": control.read_forced(u, kept) for u in units}
    forced = entry.forced_table(units, curves, 24)
    assert forced["heads"].tolist() == [
        "L0H1=previous_token+L1H0=induction",
        "L0H1=offset_3+L1H0=induction_offset_3",
    ]
    assert (forced["train_seconds"] > 0).all() and forced["budget"].tolist() == [24, 24]
    for u, row in zip(units, forced.itertuples(), strict=True):  # E as the population's rule reads the curve
        assert (row.E_forced == row.E_forced) == row.emerged
        curve = curves[f"{u['run']}/{u['folder'].name}"]
        assert curve["step"].max() == 24 and ((curve["accuracy"] * 8).round(6) % 1 == 0).all()
