"""Checks of the population's models before they are quoted (issue 52, items 1 and 4).

- What else varies with the head count in each Cox fit (:func:`checked_cox`, through
  :mod:`interp.population.shapes`): a contrast that varies more than one factor is *confounded*.
- The proportional-hazards assumption of the Cox fit (:func:`ph_test`: Grambsch & Therneau's test
  on the scaled Schoenfeld residuals).
- Log-linearity of the hazard in ``log2(n_heads)`` (:func:`loglinear_lr_test`: a likelihood-ratio
  test against one hazard ratio per head count).
- Per-arm contrasts (:func:`head_contrasts`: each head count against the next fewer, a Cox fit
  and a log-rank test on the pair), which the findings quote instead of "per doubling" where either
  check fails.

Library: statsmodels (``PHReg`` and its ``schoenfeld_residuals``; ``survdiff``), scipy (chi2).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd

from interp.population.shapes import also_varies, pair_varies
from interp.population.survival import COX_COLUMNS, arm_order, cox_fit, cox_heads, logrank_tests

__all__ = [
    "CHECKED_COX_COLUMNS",
    "CONTRAST_COLUMNS",
    "PH_TRANSFORMS",
    "checked_cox",
    "head_contrasts",
    "loglinear_lr_test",
    "ph_test",
]

#: Columns of the checked Cox table (:func:`checked_cox`): the Cox table's, then what else varies
#: with the head count and the two model checks.
CHECKED_COX_COLUMNS = [
    *COX_COLUMNS, "also_varies", "silent_heads", "ph_chi2", "ph_p", "lr_chi2", "lr_df", "lr_p", "lr_note",
]  # fmt: skip

#: Columns of the per-arm contrast table (:func:`head_contrasts`), in order.
CONTRAST_COLUMNS = [
    "n_layers",
    "d_model",
    "arm",
    "versus",
    "heads",
    "also_varies",
    "n_runs",
    "n_emerged",
    "hr",
    "hr_lo",
    "hr_hi",
    "p",
    "logrank_p",
    "note",
    "caveat",
]


#: The time transforms of :func:`ph_test`.
PH_TRANSFORMS = ("rank", "km", "identity")


def ph_test(fit, duration: np.ndarray, emerged: np.ndarray, transform: str = "rank") -> tuple[float, float]:
    """Grambsch & Therneau's test of proportional hazards for a one-covariate Cox fit.

    The scaled Schoenfeld residuals ``r*_k = beta + d V r_k`` (``r_k`` statsmodels' Schoenfeld
    residual at event ``k``, ``d`` events, ``V`` the variance of ``beta``) would drift with time
    if the hazard ratio changed over training; the test regresses them on ``g(t_k)``, a transform
    of the event time: ``T = d V (sum_k (g_k - mean g) r_k)^2 / sum_k (g_k - mean g)^2``, chi2
    with 1 df.

    Args:
        fit: statsmodels ``PHRegResults`` of one covariate.
        duration: shape ``(n_runs,)``, steps; emerged: shape ``(n_runs,)``, booleans (the fit's data).
        transform: ``g``: ``"rank"`` (the rank of the event time, ties averaged; lifelines'
            default ``time_transform="rank"``), ``"km"`` (``1 - S(t-)``, the left-continuous
            Kaplan-Meier of the pooled runs; R ``cox.zph``'s default) or ``"identity"`` (steps).

    Returns:
        ``(chi2, p)``; NaN when there are fewer than 3 events or the event times do not vary.

    Raises:
        ValueError: an unknown ``transform``.

    Source: Grambsch & Therneau 1994, "Proportional hazards tests and diagnostics based on
    weighted residuals", Biometrika 81(3) (the approximation of R's ``cox.zph`` before survival 3.0).
    """
    from scipy.stats import chi2, rankdata

    if transform not in PH_TRANSFORMS:
        raise ValueError(f"transform={transform!r}: must be one of {', '.join(PH_TRANSFORMS)}")
    residuals = np.asarray(fit.schoenfeld_residuals, float)[:, 0]
    events = emerged.astype(bool) & np.isfinite(residuals)
    d = int(events.sum())
    times = duration[events].astype(float)
    if transform == "rank":
        g = rankdata(times)
    elif transform == "km":
        from statsmodels.duration.survfunc import SurvfuncRight

        sf = SurvfuncRight(duration.astype(float), emerged.astype(float))
        steps, surv = np.asarray(sf.surv_times, float), np.asarray(sf.surv_prob, float)
        left = np.searchsorted(steps, times, side="left")  # S just before t: the product over steps < t
        g = 1.0 - np.concatenate([[1.0], surv])[left]
    else:
        g = times
    g = g - g.mean()
    if d < 3 or not (g**2).sum() > 0:
        return math.nan, math.nan
    variance = float(np.asarray(fit.cov_params())[0, 0])
    stat = d * variance * float((g * residuals[events]).sum()) ** 2 / float((g**2).sum())
    return stat, float(chi2.sf(stat, 1))


def _loglike(duration, emerged, X) -> float:
    """The maximised Efron partial log-likelihood of ``X`` (NaN where it did not converge)."""
    from statsmodels.duration.hazard_regression import PHReg
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    if X.shape[1] == 0:  # no covariate: the partial likelihood at beta = 0
        model = PHReg(duration, np.zeros((len(duration), 1)), status=emerged.astype(float), ties="efron")
        return float(model.loglike(np.zeros(1)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = PHReg(duration, X, status=emerged.astype(float), ties="efron").fit()
    if any(issubclass(w.category, ConvergenceWarning) for w in caught) or not np.isfinite(fit.bse).all():
        return math.nan
    return float(fit.llf)


def loglinear_lr_test(rows: pd.DataFrame, loglike_linear: float) -> tuple[float, int, float, str]:
    """Likelihood-ratio test of a hazard log-linear in ``log2(n_heads)`` against one hazard ratio
    per head count, over one group of arms (the same ``n_layers`` and ``d_model``).

    An arm in which no run emerged has a per-arm ratio of 0 at the maximum (its coefficient runs to
    minus infinity, its runs leave every risk set): the per-arm model's supremum is then its fit
    without those runs, which is what is used, so the test stays exact.

    Args:
        rows: the group's run table; loglike_linear: the log-linear Cox fit's maximised partial
            log-likelihood over ``rows``.

    Returns:
        ``(chi2, df, p, note)``: ``df`` = head counts - 2; NaN with a note when there are fewer
        than 3 head counts (the two models are one) or a fit is undetermined.

    Source: Wilks 1938 (likelihood-ratio test of nested models), on Cox's partial likelihood.
    """
    from scipy.stats import chi2

    heads = sorted(rows["n_heads"].unique())
    df = len(heads) - 2
    if df < 1:
        return math.nan, 0, math.nan, f"{len(heads)} head count(s): log-linear and per-arm are one model"
    if not math.isfinite(loglike_linear):
        return math.nan, df, math.nan, "the log-linear fit is undetermined"
    live = rows[rows.groupby("n_heads")["emerged"].transform("any")]
    levels = sorted(live["n_heads"].unique())
    X = (
        np.column_stack([(live["n_heads"] == h).to_numpy(float) for h in levels[1:]])
        if len(levels) > 1
        else np.zeros((len(live), 0))
    )
    per_arm = _loglike(live["duration"].to_numpy(float), live["emerged"].to_numpy(bool), X)
    if not math.isfinite(per_arm):
        return math.nan, df, math.nan, "the per-arm fit is undetermined"
    stat = max(0.0, 2.0 * (per_arm - loglike_linear))
    silent = sorted(set(heads) - set(levels))
    note = (
        f"n_heads={', '.join(map(str, silent))}: no run emerged, its per-arm ratio is 0 (its runs leave the fit)"
        if silent
        else ""
    )
    return stat, df, float(chi2.sf(stat, df)), note


def model_checks(rows: pd.DataFrame) -> dict:
    """The checks of one group's log-linear Cox fit: ``ph_chi2``, ``ph_p`` (:func:`ph_test`),
    ``lr_chi2``, ``lr_df``, ``lr_p``, ``lr_note`` (:func:`loglinear_lr_test`)."""
    duration, emerged = rows["duration"].to_numpy(float), rows["emerged"].to_numpy(bool)
    row, fit = cox_fit(duration, emerged, np.log2(rows["n_heads"].to_numpy(float)), "heads")
    ph = ph_test(fit, duration, emerged) if fit is not None else (math.nan, math.nan)
    lr = loglinear_lr_test(rows, float(fit.llf) if fit is not None else math.nan)
    return {"ph_chi2": ph[0], "ph_p": ph[1], "lr_chi2": lr[0], "lr_df": lr[1], "lr_p": lr[2], "lr_note": lr[3]}


def checked_cox(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`interp.population.survival.cox_heads` with, per row, what else varies with the head
    count over its arms (``also_varies``: d_head, rotary dimensions per head), the head counts in
    which no run emerged (``silent_heads``: the fit's ratio leans on runs that only enter censored)
    and the checks of its
    log-linear model (:func:`model_checks`: the proportional-hazards test ``ph_chi2``, ``ph_p``;
    the likelihood-ratio test of log-linearity ``lr_chi2``, ``lr_df``, ``lr_p``, ``lr_note``).

    Returns:
        :data:`CHECKED_COX_COLUMNS`, one row per row of ``cox_heads``.
    """
    cox = cox_heads(runs)
    extra = []
    for row in cox.itertuples():
        group = runs[runs["arm"].isin(str(row.arms).split(", "))]
        silent = [str(h) for h, g in group.groupby("n_heads") if not g["emerged"].any()]
        extra.append(
            {"also_varies": also_varies(group, arm_order(group), "n_heads"), "silent_heads": ", ".join(silent)}
            | model_checks(group)
        )
    out = pd.concat([cox.reset_index(drop=True), pd.DataFrame(extra, index=range(len(cox)))], axis=1)
    return out.reindex(columns=CHECKED_COX_COLUMNS)


def _head_pairs(runs: pd.DataFrame, arms: list[str]) -> list[tuple[str, str]]:
    """``(fewer, more)`` arm pairs of consecutive head counts: each arm with more heads against the
    arm with the next fewer heads that differs from it in the head count alone
    (:func:`interp.population.shapes.differences`), else against the first such arm in ``arms``'
    order (the pair is then confounded, and :func:`head_contrasts` says so)."""
    from interp.population.shapes import differences

    heads = {a: int(runs.loc[runs["arm"] == a, "n_heads"].iloc[0]) for a in arms}
    counts = sorted(set(heads.values()))
    pairs = []
    for h_fewer, h_more in itertools.pairwise(counts):
        fewer = [a for a in arms if heads[a] == h_fewer]
        for more in (a for a in arms if heads[a] == h_more):
            alone = [a for a in fewer if [f for f, _, _ in differences(runs, more, a)] == ["n_heads"]]
            pairs.append(((alone or fewer)[0], more))
    return pairs


def head_contrasts(runs: pd.DataFrame) -> pd.DataFrame:
    """Each head count against the next fewer, within each (``n_layers``, ``d_model``) group: the
    hazard ratio of emergence of the arm with more heads against the other (a Cox fit on the pair,
    the covariate 1 for the arm with more heads; above 1: more heads emerge earlier), with its
    95 % Wald interval and p, the pair's log-rank p, and what else varies between the two. Where
    several arms share a head count (head count crossed with d_head), each arm is set against the
    arm with the next fewer heads that differs from it in the head count alone (:func:`_head_pairs`).

    A pair whose arm with more heads never emerged has no finite ratio (its estimate is 0): the
    row says so in ``note`` and keeps the log-rank p, the evidence that remains.

    Returns:
        :data:`CONTRAST_COLUMNS`; empty when no group has two head counts.

    Source: Cox 1972 with Efron 1977 ties and the log-rank test, through statsmodels
    (:func:`interp.population.survival.cox_fit`, :func:`~interp.population.survival.logrank_tests`).
    """
    out = []
    for (n_layers, d_model), rows in runs.groupby(["n_layers", "d_model"], sort=True):
        arms = arm_order(rows)
        heads = {a: int(rows.loc[rows["arm"] == a, "n_heads"].iloc[0]) for a in arms}
        for fewer, more in _head_pairs(rows, arms):
            pair = rows[rows["arm"].isin([fewer, more])]
            duration, emerged = pair["duration"].to_numpy(float), pair["emerged"].to_numpy(bool)
            x = (pair["arm"] == more).to_numpy(float)
            fit, _ = cox_fit(duration, emerged, x, "heads")
            logrank = logrank_tests(pair, reference=fewer).iloc[-1]
            note = fit["note"]
            for arm in (more, fewer):
                if not pair.loc[pair["arm"] == arm, "emerged"].any():
                    note = f"no run of {arm} emerged: the ratio is 0 on its estimate, its interval undetermined; the log-rank test is the evidence"
            out.append(
                {
                    "n_layers": int(n_layers),
                    "d_model": int(d_model),
                    "arm": more,
                    "versus": fewer,
                    "heads": f"{heads[fewer]} → {heads[more]}",
                    "also_varies": pair_varies(runs, more, fewer, "n_heads"),
                    "n_runs": len(pair),
                    "n_emerged": int(emerged.sum()),
                    "hr": fit["hr"],
                    "hr_lo": fit["hr_lo"],
                    "hr_hi": fit["hr_hi"],
                    "p": fit["p"],
                    "logrank_p": float(logrank["p"]),
                    "note": note,
                    "caveat": fit["caveat"],
                }
            )
    return pd.DataFrame(out, columns=CONTRAST_COLUMNS)


def interval_text(hr: float, lo: float, hi: float) -> str:
    """``×1.36 (95 % CI 0.73–2.56)``."""
    return f"×{hr:.2f} (95 % CI {lo:.2f}–{hi:.2f})"
