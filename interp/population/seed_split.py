"""Claim 1's split of the seed (issue 72), read for the judge: which part of the seed
(initialisation or data order) the spread of a run's point of emergence goes with, over the kept
initialisation × data-order grid of ``population-seed-split``
(:func:`interp.population.kept.read_kept_split_curves`): the variance components
(:func:`components`) and the judge's verdict (:func:`judged`), at the settings' operating point
(threshold and hold of :class:`interp.core.settings.StudyConfig`). The statistic, with claim 1's headline line, is
:func:`interp.population.statistics.seed_split_result`.
"""

from __future__ import annotations

import pandas as pd

from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

__all__ = ["SPEC", "SPLIT", "components", "judged"]

#: The shipped suite spec of the grid.
SPEC = "population-seed-split"
#: The per-run quantities split (:data:`interp.population.variance.QUANTITIES`).
SPLIT = ("log_E", "level", "auc")


def components(curves: pd.DataFrame, n_boot: int = 2000, n_perm: int = 2000) -> dict:
    """Variance components (:func:`interp.population.variance.variance_components`) of each
    quantity of :data:`SPLIT` over the complete grid of kept runs, at the population's operating
    point (threshold and hold: the settings' defaults, :data:`interp.core.terms.DEFAULT_THRESHOLD` and
    :data:`interp.core.terms.DEFAULT_HOLD`);
    ``{"runs": the per-run table, quantity: VarianceComponents}``.

    Raises:
        ValueError: the grid is not complete (:func:`interp.population.variance.seed_grid`).
    """
    from interp.population.variance import run_quantities, variance_components

    runs = run_quantities(curves, DEFAULT_THRESHOLD, DEFAULT_HOLD)
    out: dict = {"runs": runs}
    for quantity in SPLIT:
        out[quantity] = variance_components(
            runs, quantity, censored="censored" if quantity == "log_E" else None, n_boot=n_boot, n_perm=n_perm
        )
    return out


def judged(found: dict):
    """The judge's verdict on claim 1 from the split of log E (:func:`interp.population.judge.judge_components`):
    robust where the permutation and the F tests read the same."""
    from interp.population.judge import ALPHA, judge_components

    rows = found["log_E"].table.set_index("component")
    init, data = rows.index[0], rows.index[1]
    agree = all((rows.loc[c, "p_perm"] < ALPHA) == (rows.loc[c, "p_f"] < ALPHA) for c in (init, data))
    return judge_components(
        "Claim 1, which part of the seed", float(rows.loc[init, "p_perm"]), float(rows.loc[data, "p_perm"]), agree
    )
