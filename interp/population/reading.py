"""The population studies' shared reading of kept curves, in numbers and words: a common budget
for arms trained to different ones (:func:`at_budget`), an arm's Kaplan–Meier median as text
(:func:`median_text`), the statistics of a population's kept curves saved (:func:`summarise`), two arms' best accuracy compared without a rule (:func:`best_accuracy`) and a
p-value as text (:func:`p_text`). The entries (the population, its decoupled arms, head count
against head size, the unpinned check) read them here (issue 70: no entry imports another).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["at_budget", "best_accuracy", "median_text", "p_text", "population_block", "summarise"]


def at_budget(curves: pd.DataFrame, budget: int) -> pd.DataFrame:
    """The curves cut at ``budget`` steps, every run's budget set to it (a run not emerged by then
    is censored there: a common budget for arms trained to different ones)."""
    cut = curves[curves["step"] <= budget].copy()
    cut["budget"] = budget
    return cut


def median_text(row) -> str:
    """An arm's Kaplan–Meier median E with its interval as text, ``"1450 (1300–1650)"`` (steps);
    an unbounded end is ``…``; a median the curve never reaches is "not reached".

    ``row``: a row of :attr:`interp.population.PopulationResult.arms` (``median_E``,
    ``median_E_lo``, ``median_E_hi``)."""
    if row.median_E != row.median_E:
        return "not reached"
    lo = f"{row.median_E_lo:.0f}" if math.isfinite(row.median_E_lo) else "…"
    hi = f"{row.median_E_hi:.0f}" if math.isfinite(row.median_E_hi) else "…"
    return f"{row.median_E:.0f} ({lo}–{hi})"


def best_accuracy(curves: pd.DataFrame, a: str, b: str) -> dict:
    """Each run's best greedy accuracy (a fraction) in arms ``a`` and ``b``: range, median, how many
    of ``b``'s runs exceed every run of ``a``, and the two-sided Mann–Whitney U p (scipy) of equal
    distributions. A statement that needs no threshold or hold."""
    from scipy.stats import mannwhitneyu

    best = curves.groupby(["arm", "run"])["accuracy"].max()
    xa, xb = best.loc[a].to_numpy(), best.loc[b].to_numpy()
    return {
        "n_a": len(xa),
        "n_b": len(xb),
        "lo_a": float(xa.min()),
        "hi_a": float(xa.max()),
        "med_a": float(np.median(xa)),
        "lo_b": float(xb.min()),
        "hi_b": float(xb.max()),
        "med_b": float(np.median(xb)),
        "above": int((xb > xa.max()).sum()),
        "p": float(mannwhitneyu(xb, xa, alternative="two-sided").pvalue),
    }


def p_text(p: float) -> str:
    """A p-value as text with its size kept: ``"1.0e-05"`` below 0.001, else ``"0.011"``; NaN -> "undetermined"."""
    return "undetermined" if math.isnan(p) else (f"{p:.1e}" if p < 1e-3 else f"{p:.3f}")


def summarise(curves: pd.DataFrame, out, mechanism: pd.DataFrame | None = None, echo=print):
    """The statistics of a population's kept curves (:func:`interp.population.population_from_curves`
    at the settings' operating point, :class:`interp.core.settings.StudyConfig`, against the arm its
    docs compare with, :func:`interp.population.tables.default_reference`), with claim 2's rows of
    its arms where ``mechanism`` holds some (:meth:`~interp.population.tables.PopulationResult.with_mechanism`),
    saved to ``out`` (tables, ``population.html``) and its findings echoed one a line. Returns the
    :class:`~interp.population.tables.PopulationResult`."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import default_reference, population_from_curves

    reference = default_reference(curves["arm"].unique())
    result = population_from_curves(curves, StudyConfig(), reference=reference)
    if mechanism is not None:
        rows = mechanism[mechanism["arm"].isin(result.arms["arm"])]  # other studies' arms are kept beside them
        if len(rows):
            result = result.with_mechanism(rows)
    result.save(out)
    for line in result.findings:
        echo(line)
    return result


def population_block(result, n_planned: int, elapsed_note: str) -> str:
    """A population's block of docs/results.md: how many of the spec's ``n_planned`` runs are
    evaluated (``elapsed_note`` says what of the rest), the findings in words, the arm table (median
    E with its interval, :func:`median_text`; the share never emerged) and the rule grid, from
    ``result`` (a :class:`~interp.population.tables.PopulationResult`)."""
    arms = result.arms
    lines = [f"Runs evaluated: {len(result.runs)} of the spec's {n_planned} ({elapsed_note}).", ""]
    lines += [f"- {line}" for line in result.findings]
    lines += [
        "",
        (
            f"| arm | n_heads | d_head | rotary dims per head | against {result.reference}: also varies | runs | "
            "emerged | median E (95 % CI), steps | never emerged by the budget (95 % CI) |"
        ),
    ]
    lines += ["| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in arms.itertuples():
        also = "(reference)" if row.compared == "reference" else f"{row.compared}; {row.also_varies or 'nothing else'}"
        lines.append(
            f"| {row.arm} | {row.n_heads} | {row.d_head} | {row.rotary_dims} | {also} | {row.n_runs} | {row.n_emerged} | "
            f"{median_text(row)} | {row.share_never_emerged:.2f} ({row.share_never_lo:.2f}–{row.share_never_hi:.2f}) |"
        )
    if len(result.grid):
        from interp.population.statistics import grid_result

        grid = grid_result(result).cells
        lines += [
            "",
            (
                "**Does it hang on the rule?** Each finding recomputed with E dated at accuracy threshold 0.4, 0.5 or "
                "0.6 held for 1, 2 or 3 checkpoints (columns: threshold/hold; a crossing with no room left to hold is "
                "censored at the budget); robust only where direction and significance (p < 0.05) hold in every cell:"
            ),
            "",
            "| " + " | ".join(grid.columns) + " |",
            "|" + " --- |" * len(grid.columns),
        ]
        lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in grid.itertuples(index=False)]
    return "\n".join(lines) + "\n"
