"""One two-arm contrast read for the judge: the test in every cell of the rule grid, the pair's
proportional-hazards test, Kaplan-Meier crossings, shares at fixed steps, restricted mean times,
and whether an arm sits on a ceiling below the threshold (:func:`contrast_evidence`).

Every contrast of every population (the arms of a spec, the one-factor cross, the rotary-fixed
arms, the forcing control) is read through here, so each verdict word (:mod:`interp.population.judge`)
rests on the same statistics:

- the test of record is the log-rank test stratified by seed where the two arms share their seeds
  (same data order: :func:`interp.sources.embedded.batch_at`), else the plain log-rank test; its
  direction is the sign of observed minus expected emergences in arm b, never a median;
- the hazard ratio (Cox, Efron ties) is quoted only where proportional hazards are not rejected
  for the pair and the curves do not cross; otherwise the shares emerged at fixed steps and the
  restricted mean time to E speak (:func:`interp.population.contrast_stats.pair_contrast`);
- a *ceiling*: at least half of an arm's runs never emerge, the median of their levels (mean
  accuracy over their last 10 % of steps) is below the threshold by at most :data:`NEAR`, and it
  rose by less than :data:`FLAT` over the last 10 % of the budget against the 10 % before (a
  flat level further below the threshold is a plateau, not a ceiling).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from interp.core.settings import StudyConfig
from interp.population.judge import Cell, Evidence

__all__ = ["FLAT", "GRID", "NEAR", "ceiling_text", "contrast_evidence", "o_minus_e"]

#: The rule grid (threshold, hold) every contrast is read over (interp.population.robust's).
GRID = tuple((t, h) for t in (0.4, 0.5, 0.6) for h in (1, 2, 3))
#: A rise in an arm's median level (accuracy, a fraction) below this over the last tenth of the
#: budget reads as flat, not a delay.
FLAT = 0.02
#: A flat level within this of the threshold (accuracy, a fraction) is a ceiling near it; a flat
#: level further below is a plateau the budget cut short (the paper's loss plateau), not a ceiling.
NEAR = 0.25


def o_minus_e(duration, emerged, in_b, strata=None) -> float:
    """Observed minus expected emergences in arm b under equal hazards (the log-rank test's
    numerator; summed over strata when given): positive where arm b emerges earlier.

    Args:
        duration: ``(n_runs,)`` steps; emerged: ``(n_runs,)`` bool; in_b: ``(n_runs,)`` bool;
        strata: ``(n_runs,)`` labels (e.g. the seed) or None.

    Source: Mantel 1966 (the log-rank statistic's O - E).
    """
    duration, emerged, in_b = (np.asarray(x) for x in (duration, emerged, in_b))
    strata = np.zeros(len(duration)) if strata is None else np.asarray(strata)
    total = 0.0
    for s in np.unique(strata):
        d, e, b = duration[strata == s], emerged[strata == s].astype(bool), in_b[strata == s].astype(bool)
        for t in np.unique(d[e]):
            at_risk = d >= t
            events = e & (d == t)
            n, n_b = at_risk.sum(), (at_risk & b).sum()
            total += (events & b).sum() - events.sum() * n_b / n
    return float(total)


def _paired(ra: pd.DataFrame, rb: pd.DataFrame) -> bool:
    """The two arms share their seeds one run each (a paired design)."""
    return (
        "seed" in ra
        and "seed" in rb
        and not ra["seed"].duplicated().any()
        and not rb["seed"].duplicated().any()
        and set(ra["seed"]) == set(rb["seed"])
    )


def _cell(runs: pd.DataFrame, a: str, b: str, threshold: float, hold: int, paired: bool) -> Cell:
    from statsmodels.duration.survfunc import survdiff

    from interp.population.contrast_stats import stratified_logrank

    ra, rb = runs[runs["arm"] == a], runs[runs["arm"] == b]
    both = pd.concat([ra, rb])
    in_b = (both["arm"] == b).to_numpy()
    duration, emerged = both["duration"].to_numpy(float), both["emerged"].to_numpy(bool)
    if not emerged.any():
        return Cell(threshold, hold, math.nan, 0)
    if paired:
        p = stratified_logrank(rb, ra, on="seed").p
        oe = o_minus_e(duration, emerged, in_b, both["seed"].to_numpy())
        if not math.isfinite(p) and abs(oe) < 1e-12:  # every pair tied: no variance and no difference
            p = 1.0
    else:
        _, p = survdiff(duration, emerged.astype(float), in_b.astype(int))
        oe = o_minus_e(duration, emerged, in_b)
    return Cell(threshold, hold, float(p), int(np.sign(round(oe, 12))))


def ceiling_text(curves: pd.DataFrame, runs: pd.DataFrame, threshold: float) -> str:
    """Where an arm's runs sit on a ceiling below ``threshold``, in words (``""`` where none does).

    Args:
        curves: the checked capability table of the arms (``arm``, ``run``, ``step``, ``accuracy``).
        runs: their run table at the operating point (``arm``, ``run``, ``emerged``).
        threshold: the greedy-accuracy threshold (fraction).

    Returns:
        ``"neox-2l-64d-8h: 20 of 24 runs never emerged, their level 0.25–0.47 (median 0.38), +0.01
        over the last tenth of the budget"`` per arm on a ceiling, joined by ``"; "``.
    """
    from interp.population.contrast_stats import run_level

    parts = []
    for arm, arm_runs in runs.groupby("arm", sort=False):
        never = arm_runs[~arm_runs["emerged"]]
        if len(never) * 2 < len(arm_runs) or not len(never):
            continue
        levels, rises = [], []
        for run in never["run"]:
            curve = curves[curves["run"] == run].sort_values("step")
            last = curve["step"].max()
            levels.append(run_level(curve))
            before = curve[(curve["step"] >= 0.8 * last) & (curve["step"] < 0.9 * last)]["accuracy"]
            rises.append(levels[-1] - float(before.mean()) if len(before) else math.nan)
        level, rise = float(np.median(levels)), float(np.nanmedian(rises)) if not np.isnan(rises).all() else math.nan
        if threshold - NEAR <= level < threshold and math.isfinite(rise) and rise < FLAT:
            parts.append(
                f"{arm}: {len(never)} of {len(arm_runs)} runs never emerged, their level {min(levels):.2f}–"
                f"{max(levels):.2f} (median {level:.2f}, below the threshold {threshold:g}), {rise:+.2f} over the last "
                "tenth of the budget"
            )
    return "; ".join(parts)


def _crossing_text(pc) -> str:
    if not pc.crossings:
        return ""
    steps = ", ".join(f"{c.step:.0f}" for c in pc.crossings)
    first = pc.crossings[0]
    return f"the curves cross at step {steps}: {first.ahead_before} ahead before, {first.ahead_after} after"


def _detail(pc) -> str:
    shares = "; ".join(
        f"by {s.step:.0f}: {s.k_a}/{s.n_a} against {s.k_b}/{s.n_b} (difference {s.diff:+.2f}, 95 % "
        f"{s.diff_lo:+.2f}–{s.diff_hi:+.2f})"
        for s in pc.shares
    )
    r = pc.rmst
    return (
        f"emerged {shares}; restricted mean time to E up to {r.a.tau:.0f} steps {r.a.rmst:.0f} against {r.b.rmst:.0f} "
        f"(difference {r.diff:+.0f}, 95 % {r.diff_lo:+.0f}–{r.diff_hi:+.0f})"
    )


def contrast_evidence(
    curves: pd.DataFrame,
    b: str,
    a: str,
    label: str,
    wanted: int = 1,
    also_varies: str = "",
    config: StudyConfig = StudyConfig(),
    budget: int | None = None,
):
    """Everything the judge reads of arm ``b`` against arm ``a``, and the pair's statistics.

    Args:
        curves: capability table (:data:`interp.population.tables.CURVE_COLUMNS`) holding both arms.
        b, a: the arm compared and the arm it is compared with (b against a).
        label: the contrast in words.
        wanted: the paper's direction for b against a (+1: b emerges earlier).
        also_varies: what else differs between the arms (``""``: one factor).
        config: the operating point (``threshold``, ``hold``).
        budget: cut both arms at this step (steps; default the smaller of the two arms' budgets, so
            that both are followed equally long).

    Returns:
        ``(Evidence, PairContrast)``: the judge's input (:class:`interp.population.judge.Evidence`)
        and every number of the pair at the operating point
        (:class:`interp.population.contrast_stats.PairContrast`, b as its ``arm_a``).

    Raises:
        ValueError: an arm missing from ``curves``, or a bad table.
    """
    from interp.population.contrast_stats import add_run_measures, pair_contrast
    from interp.population.shapes import derived_varies
    from interp.population.tables import check_curves, runs_from_curves

    missing = [arm for arm in (a, b) if arm not in set(curves["arm"])]
    if missing:
        raise ValueError(f"contrast_evidence: arm {missing[0]!r} not in the curves; arms: {sorted(set(curves['arm']))}")
    pair = curves[curves["arm"].isin([a, b])]
    if budget is None:
        budget = int(pair.groupby("arm")["budget"].max().min())
    table = check_curves(pair[pair["step"] <= budget], budget=budget)
    cells, operating_runs = [], None
    paired = None
    for t, h in GRID:
        runs = runs_from_curves(table, t, h)
        if paired is None:
            paired = _paired(runs[runs["arm"] == a], runs[runs["arm"] == b])
        cells.append(_cell(runs, a, b, t, h, paired))
        if (t, h) == (config.threshold, config.hold):
            operating_runs = runs
    if operating_runs is None:  # an operating point off the grid
        operating_runs = runs_from_curves(table, config.threshold, config.hold)
        cells.append(_cell(operating_runs, a, b, config.threshold, config.hold, bool(paired)))
    runs = add_run_measures(operating_runs, table)
    pc = pair_contrast(runs[runs["arm"] == b], runs[runs["arm"] == a], paired_on="seed" if paired else None)
    crossing = _crossing_text(pc)
    ph_rejected = math.isfinite(pc.ph.p) and pc.ph.p < 0.05
    hr_ok = not ph_rejected and not pc.hr_note  # curves that swap order within noise keep their ratio
    evidence = Evidence(
        label=label,
        cells=tuple(cells),
        operating=(config.threshold, config.hold),
        wanted=wanted,
        hr=pc.hr if hr_ok else math.nan,
        hr_lo=pc.hr_lo if hr_ok else math.nan,
        hr_hi=pc.hr_hi if hr_ok else math.nan,
        ph_p=pc.ph.p,
        crossing=crossing,
        also_varies=also_varies,
        named=derived_varies(table, b, a),
        ceiling=ceiling_text(table, operating_runs, config.threshold),
        test="log-rank stratified by seed" if paired else "log-rank",
        detail=_detail(pc),
    )
    return evidence, pc
