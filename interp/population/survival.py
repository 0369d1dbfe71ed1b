"""Survival statistics of the point of emergence over a population of seeds.

Emergence is a censored event (docs: "Findings are statistics over seeds"): each run of an arm
(one model shape, many seeds) either emerges at its point of emergence ``E`` (the post step,
training steps) or is still below the threshold at its step budget, where it is *censored*: it
is counted as "not emerged by the budget", never dropped. A run table (one row per run, built
by :func:`interp.population.tables.runs_from_curves`) carries ``arm``, ``n_heads``, ``d_model``,
``n_layers``, ``emerged`` and ``duration`` (``E`` for an emerged run, the budget for a censored
one); everything here reads those columns.

Library: statsmodels (``statsmodels.duration``: :class:`~statsmodels.duration.survfunc.SurvfuncRight`
for Kaplan-Meier with Greenwood standard errors and the Brookmeyer-Crowley median interval,
:func:`~statsmodels.duration.survfunc.survdiff` for the log-rank test,
:class:`~statsmodels.duration.hazard_regression.PHReg` for the Cox model). It was chosen over
lifelines because lifelines 0.30.3 requires pandas < 3 and the project pins pandas 3.1.1;
statsmodels 0.15.0 (with scipy 1.17.1 and patsy 1.0.3) installs beside pandas 3.1.1 and numpy
2.4.6 and is maintained, with these estimators documented and tested upstream. Nothing below
re-derives an estimator; the one formula written here is the log-log transform of the pointwise
Kaplan-Meier interval (statsmodels gives the Greenwood standard error, not the interval), and
the share never emerged uses statsmodels's Wilson interval.

Degenerate populations (one arm, every run censored, one head count) give NaN statistics with a
``note`` saying why, never an exception.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

#: Two-sided 95 % normal quantile.
Z95 = 1.959963984540054

#: Columns of the Kaplan-Meier table (:func:`kaplan_meier`), in order.
KM_COLUMNS = [
    "arm",
    "step",
    "n_at_risk",
    "n_events",
    "survival",
    "survival_se",
    "survival_lo",
    "survival_hi",
]
#: Columns of the per-arm table (:func:`arm_table`), in order.
ARM_COLUMNS = [
    "arm",
    "n_layers",
    "d_model",
    "n_heads",
    "d_head",
    "rotary_dims",
    "compared",
    "also_varies",
    "budget",
    "n_runs",
    "n_emerged",
    "n_never",
    "share_never_emerged",
    "share_never_lo",
    "share_never_hi",
    "median_E",
    "median_E_lo",
    "median_E_hi",
]
#: Columns of the log-rank table (:func:`logrank_tests`), in order.
TEST_COLUMNS = [
    "test", "arm", "reference", "arms", "compared", "also_varies", "n_runs", "n_emerged", "chi2", "df", "p", "note",
]  # fmt: skip
#: The ``fit`` of a Cox row fitted over every arm of its group.
ALL_ARMS = "all arms"
#: Columns of the Cox table (:func:`cox_heads`), in order.
COX_COLUMNS = [
    "n_layers",
    "d_model",
    "fit",
    "arms",
    "heads",
    "n_runs",
    "n_emerged",
    "coef_log2_heads",
    "se",
    "hr_per_doubling",
    "hr_lo",
    "hr_hi",
    "p",
    "note",
    "caveat",
]


def arm_order(runs: pd.DataFrame) -> list[str]:
    """The arms sorted by shape (``n_layers``, ``d_model``, ``n_heads``), then name: the order of
    every table and figure; the first is the default reference of the pairwise log-rank tests."""
    shapes = runs.groupby("arm", sort=False)[["n_layers", "d_model", "n_heads"]].first().reset_index()
    shapes = shapes.sort_values(["n_layers", "d_model", "n_heads", "arm"], kind="stable")
    return [str(a) for a in shapes["arm"]]


def share_interval(k: int, n: int) -> tuple[float, float, float]:
    """A share ``k / n`` (probability) with its 95 % Wilson score interval.

    Returns:
        ``(share, lo, hi)``; NaN for ``n == 0``.

    Source: Wilson 1927 ("Probable inference, the law of succession, and statistical inference"),
    through ``statsmodels.stats.proportion.proportion_confint(method="wilson")``.
    """
    if n <= 0:
        return math.nan, math.nan, math.nan
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return k / n, max(0.0, float(lo)), min(1.0, float(hi))  # rounding puts k = 0 at 2.8e-17, not 0


def _survfunc(rows: pd.DataFrame):
    from statsmodels.duration.survfunc import SurvfuncRight

    return SurvfuncRight(rows["duration"].to_numpy(float), rows["emerged"].to_numpy(float))


def kaplan_meier(runs: pd.DataFrame) -> pd.DataFrame:
    """The Kaplan-Meier curve of each arm: the probability of *not yet* having emerged, per step.

    Args:
        runs: the run table (``arm``, ``duration`` in steps, ``emerged`` bool, shape columns).

    Returns:
        :data:`KM_COLUMNS`: per arm a row at step 0 (survival 1, every run at risk) and one per
        step at which some run emerged: runs at risk just before it, runs that emerged at it, the
        survival estimate (probability) with its Greenwood standard error and a pointwise 95 %
        interval. An arm in which no run emerged has the step-0 row only.

    Source: Kaplan & Meier 1958 (product-limit estimator); Greenwood 1926 (variance), through
    ``statsmodels.duration.survfunc.SurvfuncRight``; the interval is the log-log transform
    ``S ** exp(±z · se / (S · log S))`` (Kalbfleisch & Prentice 1980, section 1.3; the default of
    R's ``survival::survfit`` ``conf.type="log-log"``), which stays inside [0, 1].
    """
    frames = []
    for arm in arm_order(runs):
        rows = runs[runs["arm"] == arm]
        sf = _survfunc(rows)
        s = np.asarray(sf.surv_prob, float)
        se = np.asarray(sf.surv_prob_se, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            half = Z95 * se / (s * np.log(s))
            lo, hi = s ** np.exp(-half), s ** np.exp(half)
        lo = np.where(s <= 0, 0.0, np.where(s >= 1, 1.0, lo))
        hi = np.where(s <= 0, 0.0, np.where(s >= 1, 1.0, hi))
        start = pd.DataFrame(
            [{"arm": arm, "step": 0, "n_at_risk": len(rows), "n_events": 0}],
        ).assign(survival=1.0, survival_se=0.0, survival_lo=1.0, survival_hi=1.0)
        body = pd.DataFrame(
            {
                "arm": arm,
                "step": np.asarray(sf.surv_times).astype("int64"),
                "n_at_risk": np.asarray(sf.n_risk).astype("int64"),
                "n_events": np.asarray(sf.n_events).astype("int64"),
                "survival": s,
                "survival_se": se,
                "survival_lo": lo,
                "survival_hi": hi,
            }
        )
        # a run that emerged at step 0 (already at the first checkpoint) puts step 0 in the body itself
        frames.append(body if (body["step"] == 0).any() else pd.concat([start, body], ignore_index=True))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=KM_COLUMNS)
    return out[KM_COLUMNS].astype({"step": "int64", "n_at_risk": "int64", "n_events": "int64"})


#: Tolerance (probability) within which a Kaplan-Meier survival counts as exactly 0.5
#: (:func:`km_median`): statsmodels' product gives 0.49999999999999994 or 0.5000000000000001 where
#: the exact value is 1/2 (12 of 24 runs emerged), which no other rounding comes close to.
MEDIAN_TOL = 1e-9
#: The conventions of :func:`km_median`.
MEDIAN_CONVENTIONS = ("midpoint", "strict")


def km_median(
    duration: np.ndarray, emerged: np.ndarray, tol: float = MEDIAN_TOL, convention: str = "midpoint"
) -> float:
    """The median of a Kaplan-Meier curve (steps), with a tolerance on the comparison with 0.5.

    Convention ``"midpoint"`` (the default; R ``survival::quantile.survfit``'s, the textbook
    "usual midpoint rule used for medians"): the first event step at which the survival ``S`` is
    below ``0.5 - tol``; but where ``S`` sits at 0.5 (within ``tol``) from an event step ``t1``
    until the next event step ``t2``, the median is the midpoint ``(t1 + t2) / 2``. When no event
    follows ``t1`` (the curve ends on the flat: half the runs never emerged by their budget) the
    median is not reached (NaN), as the project has always said: where the flat ends is unknown.
    Here R departs: it takes ``t2`` = the last step followed (``xmax``), a number set by the
    budget, not by the runs. Convention ``"strict"``: the first event step at which
    ``S < 0.5 - tol`` (the flat's end; statsmodels' ``SurvfuncRight.quantile`` and SAS PROC
    LIFETEST compare without a tolerance, so their answer on a flat depends on the last bit of a
    float product). R compares with ``tolerance = sqrt(.Machine$double.eps)`` (1.5e-8); the
    rounding of a product of tens of risk-set fractions is about 1e-16, far inside 1e-9.

    Args:
        duration: shape ``(n_runs,)``, steps to E (emerged) or to censoring.
        emerged: shape ``(n_runs,)``, booleans (True: emerged at ``duration``).
        tol: in [0, 0.01), probability.
        convention: ``"midpoint"`` or ``"strict"``.

    Returns:
        The median in steps (a float; a midpoint may fall between checkpoints); NaN when ``S``
        never goes below 0.5 after reaching it (no more than half emerged by the last step followed).

    Raises:
        ValueError: a bad ``convention`` or ``tol``; ``duration`` and ``emerged`` of different
            lengths; no run.

    Source: Kaplan & Meier 1958 (product-limit estimator, through
    ``statsmodels.duration.survfunc.SurvfuncRight``); the midpoint rule of R ``survival``
    (Therneau, ``quantile.survfit``, ``findq``).
    """
    if convention not in MEDIAN_CONVENTIONS:
        raise ValueError(f"convention={convention!r}: must be one of {', '.join(MEDIAN_CONVENTIONS)}")
    if not 0.0 <= tol < 0.01:
        raise ValueError(f"tol={tol!r}: must be in [0, 0.01) (a probability tolerance)")
    duration, emerged = np.asarray(duration, float), np.asarray(emerged, bool)
    if duration.shape != emerged.shape or duration.ndim != 1 or len(duration) == 0:
        raise ValueError(
            f"duration {duration.shape} and emerged {emerged.shape} must be one-dimensional, of one length >= 1"
        )
    if not emerged.any():
        return math.nan
    from statsmodels.duration.survfunc import SurvfuncRight

    sf = SurvfuncRight(duration, emerged.astype(float))
    times, surv = np.asarray(sf.surv_times, float), np.asarray(sf.surv_prob, float)
    below = np.flatnonzero(surv < 0.5 - tol)
    if convention == "midpoint":
        flat = np.flatnonzero(np.abs(surv - 0.5) <= tol)
        if len(flat):
            j = int(flat[0])
            return float((times[j] + times[j + 1]) / 2) if j + 1 < len(times) else math.nan
    return float(times[below[0]]) if len(below) else math.nan


def median_interval(rows: pd.DataFrame) -> tuple[float, float, float]:
    """The median point of emergence of one arm with its 95 % interval (steps).

    Returns:
        ``(median, lo, hi)``: the median by :func:`km_median` (midpoint convention: where the
        Kaplan-Meier survival sits at exactly 0.5, within :data:`MEDIAN_TOL`, over ``[t1, t2)``,
        the median is ``(t1 + t2) / 2``; else the first step where it is below 0.5; NaN when it
        never goes below 0.5: no more than half emerged by the budget); the interval by inverting a
        test of ``S(t) = 0.5`` on the complementary log-log scale, whose limits are event steps
        and whose ``hi`` is ``inf`` when the upper bound is not reached by the budget (NaN when no
        run emerged). The interval compares ``|g(S) - g(0.5)| / se_g`` with 1.96, so a rounding of
        ``S`` by 1e-16 moves it by about 1e-15 and cannot move a limit: no tolerance is needed
        there. The median lies in ``[lo, hi]`` (asserted).

    Source: Kaplan & Meier 1958; R ``survival``'s midpoint rule (:func:`km_median`);
    Brookmeyer & Crowley 1982 ("A confidence interval for the median survival time"), through
    ``SurvfuncRight.quantile_ci(0.5)`` (``transform="cloglog"``).
    """
    if not rows["emerged"].any():
        return math.nan, math.nan, math.nan
    duration, emerged = rows["duration"].to_numpy(float), rows["emerged"].to_numpy(bool)
    median = km_median(duration, emerged)
    sf = _survfunc(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = sf.quantile_ci(0.5)
    lo, hi = float(lo), float(hi)
    assert not math.isfinite(median) or not math.isfinite(lo) or lo <= median <= hi, (median, lo, hi)
    return median, lo, hi


def arm_table(runs: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """One row per arm: its shape, budget, runs, runs emerged, the share never emerged by the
    budget with its 95 % Wilson interval, and the median point of emergence with its 95 %
    interval (:func:`median_interval`).

    ``budget`` is the arm's largest run budget (steps). The share never emerged is the share of
    runs censored (every run is followed to its budget, so no run is lost before it).
    ``rotary_dims`` is the arm's rotary dimensions per head
    (:func:`interp.population.shapes.rotary_dims`); ``compared`` the first shape factor in which
    the arm differs from ``reference`` (default: the first arm; ``"reference"`` on its own row)
    and ``also_varies`` what else differs (``"d_head 64 vs 16, rotary dims per head 16 vs 4"``;
    empty: the contrast with the reference varies one thing, else it is confounded).

    Returns:
        :data:`ARM_COLUMNS`, arms in :func:`arm_order`.

    Source: Wilson 1927 (share interval); Kaplan & Meier 1958 and Brookmeyer & Crowley 1982
    (median and its interval), through statsmodels.
    """
    from interp.population.shapes import differences, pair_varies, rotary_dims

    rows = []
    order = arm_order(runs)
    reference = reference if reference in order else (order[0] if order else None)
    for arm in order:
        group = runs[runs["arm"] == arm]
        n, k = len(group), int(group["emerged"].sum())
        diff = differences(runs, arm, reference) if arm != reference else []
        share, lo, hi = share_interval(n - k, n)
        median, m_lo, m_hi = median_interval(group)
        first = group.iloc[0]
        rows.append(
            {
                "arm": arm,
                "n_layers": int(first["n_layers"]),
                "d_model": int(first["d_model"]),
                "n_heads": int(first["n_heads"]),
                "d_head": int(first["d_head"]),
                "rotary_dims": rotary_dims(arm, int(first["d_head"])),
                "compared": "reference" if arm == reference else (diff[0][0] if diff else "nothing"),
                "also_varies": pair_varies(runs, arm, reference, diff[0][0]) if diff else "",
                "budget": int(group["budget"].max()),
                "n_runs": n,
                "n_emerged": k,
                "n_never": n - k,
                "share_never_emerged": share,
                "share_never_lo": lo,
                "share_never_hi": hi,
                "median_E": median,
                "median_E_lo": m_lo,
                "median_E_hi": m_hi,
            }
        )
    return pd.DataFrame(rows, columns=ARM_COLUMNS)


def _logrank(rows: pd.DataFrame) -> tuple[float, int, float, str]:
    """(chi2, df, p, note) of the log-rank test across the arms in ``rows``."""
    from statsmodels.duration.survfunc import survdiff

    arms = rows["arm"].unique()
    df = len(arms) - 1
    if df < 1:
        return math.nan, 0, math.nan, "one arm: nothing to compare"
    if not rows["emerged"].any():
        return math.nan, df, math.nan, "no run emerged in these arms: the test is undetermined"
    try:
        chi2, p = survdiff(rows["duration"].to_numpy(float), rows["emerged"].to_numpy(float), rows["arm"].to_numpy())
    except np.linalg.LinAlgError:  # a singular variance: no information to compare
        return math.nan, df, math.nan, "singular variance: the test is undetermined"
    return float(chi2), df, float(p), ""


def logrank_tests(runs: pd.DataFrame, reference: str | None = None) -> pd.DataFrame:
    """Log-rank tests of equal emergence hazards: one global test over every arm, then each arm
    against ``reference``.

    Args:
        runs: the run table.
        reference: the arm the pairwise tests compare with (default: the first of :func:`arm_order`).

    Returns:
        :data:`TEST_COLUMNS`: ``test`` is ``"global"`` (``arm`` empty, ``arms`` every arm) or
        ``"vs reference"`` (``compared``: the first shape factor in which the pair differs,
        ``also_varies``: what else differs, :mod:`interp.population.shapes`; empty for global); ``chi2`` with ``df`` = arms - 1 degrees of freedom and its p-value;
        NaN with a ``note`` when undetermined (one arm, no run emerged).

    Raises:
        ValueError: ``reference`` is not an arm of ``runs`` (names the arms).

    Source: Mantel 1966 and Peto & Peto 1972 (log-rank test), through
    ``statsmodels.duration.survfunc.survdiff``.
    """
    order = arm_order(runs)
    if reference is None:
        reference = order[0] if order else ""
    elif reference not in order:
        raise ValueError(f"reference arm {reference!r} is not in the table; arms: {', '.join(order)}")
    out = []

    from interp.population.shapes import differences, pair_varies

    def row(test: str, arm: str, rows: pd.DataFrame) -> None:
        chi2, df, p, note = _logrank(rows)
        diff = differences(runs, arm, reference) if test != "global" else []
        out.append(
            {
                "test": test,
                "arm": arm,
                "reference": reference if test != "global" else "",
                "arms": ", ".join(a for a in order if a in set(rows["arm"])),
                "compared": diff[0][0] if diff else "",
                "also_varies": pair_varies(runs, arm, reference, diff[0][0]) if diff else "",
                "n_runs": len(rows),
                "n_emerged": int(rows["emerged"].sum()),
                "chi2": chi2,
                "df": df,
                "p": p,
                "note": note,
            }
        )

    row("global", "", runs)
    for arm in order:
        if arm != reference:
            row("vs reference", arm, runs[runs["arm"].isin([arm, reference])])
    return pd.DataFrame(out, columns=TEST_COLUMNS)


def monotone_direction(duration: np.ndarray, emerged: np.ndarray, x: np.ndarray) -> int:
    """Whether Cox's partial likelihood of one covariate has no maximum: ``+1`` when every run
    that emerged had the largest ``x`` of the runs still at risk at its step (the likelihood
    keeps growing as the coefficient grows), ``-1`` when every one had the smallest, ``0`` when
    a finite maximum exists (some event is neither, so the likelihood falls off both ways).

    Args:
        duration: shape ``(n_runs,)``, steps to E or to censoring.
        emerged: shape ``(n_runs,)``, booleans (True: emerged at ``duration``).
        x: shape ``(n_runs,)``, the covariate (here ``log2(n_heads)``).

    Source: the condition for monotone likelihood in the Cox model (Bryson & Johnson 1981,
    "The incidence of monotone likelihood in the Cox model", Technometrics 23(4)).
    """
    top = bottom = True
    for i in np.flatnonzero(emerged):
        at_risk = x[duration >= duration[i]]
        top &= bool(x[i] >= at_risk.max())
        bottom &= bool(x[i] <= at_risk.min())
    return 1 if top else -1 if bottom else 0


def tied_events(duration: np.ndarray, emerged: np.ndarray) -> tuple[str, str]:
    """Whether the events of a Cox fit all fall on one step: ``(note, caveat)``.

    ``note`` (the ratio is undetermined) when every run at risk at that step emerged at it: the
    partial likelihood then compares nothing (every ordering of the tied events is one risk set
    emptied at once), and Efron's approximation alone makes an interval (HR 1.00, 0.20–4.95 on
    two arms of 2), as the log-rank test's singular variance says. ``caveat`` (the ratio is
    quoted, with this warning) when the events fall on one step but some runs at risk did not
    emerge there: the fit's information rests on that single tied event time. Both empty
    otherwise.

    Args:
        duration: shape ``(n_runs,)``, steps to E or to censoring.
        emerged: shape ``(n_runs,)``, booleans.

    Source: Efron 1977 (ties in the partial likelihood); issue 56, item 4.
    """
    times = np.unique(duration[emerged])
    if len(times) != 1:
        return "", ""
    t = float(times[0])
    at_risk = duration >= t
    if emerged[at_risk].all():
        note = (
            f"every run at risk emerged at the same step ({t:.0f}): a single tied event time holds all the "
            "information, the hazard ratio is undetermined (as the log-rank test)"
        )
        return note, ""
    return "", f"every event fell on step {t:.0f}: the fit's information rests on a single tied event time"


def cox_fit(duration: np.ndarray, emerged: np.ndarray, x: np.ndarray, what: str = "x"):
    """Cox fit of one covariate: ``(row, fit)`` where ``row`` has ``coef``, ``se``, ``hr``,
    ``hr_lo``, ``hr_hi`` (95 % Wald), ``p`` (Wald), ``note`` (why undetermined; the numbers are
    NaN) and ``caveat`` (a warning on a quoted ratio), and ``fit`` is statsmodels' result (None
    when undetermined).

    Args:
        duration: shape ``(n_runs,)``, steps; emerged: shape ``(n_runs,)``, booleans;
        x: shape ``(n_runs,)``, the covariate; what: its name in notes (``"heads"``).

    Undetermined (never an exception): no run emerged, no variation in ``x``, every event tied at
    one step with every run at risk (:func:`tied_events`), a partial likelihood without a maximum
    (:func:`monotone_direction`), a fit that did not converge.

    Source: Cox 1972 with Efron 1977 ties, through ``statsmodels.duration.hazard_regression.PHReg``.
    """
    from statsmodels.duration.hazard_regression import PHReg
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    nan = dict.fromkeys(("coef", "se", "hr", "hr_lo", "hr_hi", "p"), math.nan) | {"caveat": ""}
    if len(np.unique(x)) < 2:
        return nan | {"note": f"one value of {what}: no variation to fit"}, None
    if not emerged.any():
        return nan | {"note": "no run emerged: the hazard ratio is undetermined"}, None
    note, caveat = tied_events(duration, emerged)
    if note:
        return nan | {"note": note}, None
    direction = monotone_direction(duration, emerged, x)
    if direction:
        return nan | {
            "note": f"every run that emerged had the {'most' if direction > 0 else 'fewest'} {what} of those still "
            "at risk: the partial likelihood has no maximum, the hazard ratio is not estimable"
        }, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fit = PHReg(duration, x[:, None], status=emerged.astype(float), ties="efron").fit()
        except np.linalg.LinAlgError:  # a singular information matrix: near-separation, no finite maximum
            return nan | {
                "note": "the Cox fit's information matrix is singular (the arms are nearly separated): "
                "the hazard ratio is undetermined"
            }, None
    coef, se = float(fit.params[0]), float(fit.bse[0])
    if any(issubclass(w.category, ConvergenceWarning) for w in caught) or not math.isfinite(se):
        return nan | {"note": "the Cox fit did not converge: the hazard ratio is undetermined"}, None
    row = {
        "coef": coef,
        "se": se,
        "hr": math.exp(coef),
        "hr_lo": math.exp(coef - Z95 * se),
        "hr_hi": math.exp(coef + Z95 * se),
        "p": float(fit.pvalues[0]),
        "note": "",
        "caveat": caveat,
    }
    return row, fit


def _cox_fit(rows: pd.DataFrame) -> dict:
    """Cox fit of ``log2(n_heads)`` on one group of arms: coefficient, se, HR with 95 % interval, p, note, caveat."""
    heads = sorted(rows["n_heads"].unique())
    x = np.log2(rows["n_heads"].to_numpy(float))
    duration, emerged = rows["duration"].to_numpy(float), rows["emerged"].to_numpy(bool)
    row, _ = cox_fit(duration, emerged, x, "heads")
    note = row["note"]
    if len(heads) < 2:
        note = f"one head count ({heads[0]}): no variation to fit"
    elif note.startswith("every run that emerged had the"):
        silent = [h for h in heads if not rows.loc[rows["n_heads"] == h, "emerged"].any()]
        if silent:
            note = note.replace(
                " of those still at risk:",
                f" of those still at risk; no run with n_heads={', '.join(str(h) for h in silent)} emerged:",
            )
    return {
        "coef_log2_heads": row["coef"],
        "se": row["se"],
        "hr_per_doubling": row["hr"],
        "hr_lo": row["hr_lo"],
        "hr_hi": row["hr_hi"],
        "p": row["p"],
        "note": note,
        "caveat": row["caveat"],
    }


def cox_heads(runs: pd.DataFrame) -> pd.DataFrame:
    """The hazard of emergence per doubling of heads: a Cox model with ``log2(n_heads)`` as the
    only covariate, fitted separately over each group of arms that share ``n_layers`` and
    ``d_model`` (so only the head count varies; ``d_head = d_model / n_heads`` moves with it).

    Returns:
        :data:`COX_COLUMNS`, one row per (``n_layers``, ``d_model``) group fitted over all its
        arms (``fit`` = :data:`ALL_ARMS`): its arms and head counts, runs and runs emerged, the
        coefficient of ``log2(n_heads)`` and its standard error, the hazard ratio per doubling of
        heads ``exp(coef)`` with its 95 % Wald interval and Wald p-value; NaN with a ``note`` when
        undetermined (one head count, no run emerged, or a partial likelihood without a maximum:
        :func:`monotone_direction`). An arm in which no run emerged is fitted (its censored runs
        stay at risk, which is information), and when one exists a second row refits the group
        without it, so a reader sees how much the log-linear trend leans on that arm. ``caveat``
        warns of a fit resting on one tied event time (:func:`tied_events`). What else varies and
        the model checks: :func:`interp.population.checks.checked_cox`.

    Source: Cox 1972 (proportional hazards, partial likelihood) with Efron's 1977 handling of tied
    steps (every run emerges on a checkpoint step, so ties are the rule), through
    ``statsmodels.duration.hazard_regression.PHReg(ties="efron")``.
    """
    out = []
    for (n_layers, d_model), rows in runs.groupby(["n_layers", "d_model"], sort=True):
        fits = [(ALL_ARMS, rows)]
        silent = [h for h, g in rows.groupby("n_heads") if not g["emerged"].any()]
        kept = rows[~rows["n_heads"].isin(silent)]
        if silent and kept["n_heads"].nunique() >= 2:
            fits.append((f"without n_heads={', '.join(str(h) for h in silent)} (no run emerged)", kept))
        for fit, group in fits:
            out.append(
                {
                    "n_layers": int(n_layers),
                    "d_model": int(d_model),
                    "fit": fit,
                    "arms": ", ".join(arm_order(group)),
                    "heads": ", ".join(str(h) for h in sorted(group["n_heads"].unique())),
                    "n_runs": len(group),
                    "n_emerged": int(group["emerged"].sum()),
                }
                | _cox_fit(group)
            )
    return pd.DataFrame(out, columns=COX_COLUMNS)
