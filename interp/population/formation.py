"""The order circuits form in, per seed (issue 45, item 2).

Three events per run, each the first checkpoint where a quantity reaches its threshold and stays
there for the next ``hold`` checkpoints, by the one rule that dates the point of emergence
(:func:`interp.emergence.held_crossing`; a crossing with no room left to hold is no event), read off the run's kept head features (:mod:`interp.population.heads`):

- ``t_prev``: the previous-token head forms: the max previous-token score over layer-0 heads
  reaches :data:`PREV_THRESHOLD` (fraction of attention on key ``i - 1``);
- ``t_ind``: the induction head forms: the max prefix-matching score over layer-1 heads reaches
  :data:`IND_THRESHOLD` (fraction of attention on the token after the previous occurrence);
- ``E``: the capability crosses (the population's point of emergence: greedy accuracy 0.5, held).

An event that never happens within the run is placed after the run's last checkpoint (``inf``;
ranked last, tied with another missing one). Agreement across seeds: Kendall's W of the three
events' ranks within each seed (seeds as raters, events as items; Kendall & Babington Smith 1939,
with the tie correction), with a percentile bootstrap interval over seeds; W = 1 when every seed
orders the events alike, 0 when the orders share nothing. The share of seeds with the order
``t_prev < t_ind < E`` (strict; and ``<=``, ties at one checkpoint allowed) has a Wilson interval.

Candidates: per run, ``n_ind_heads_before_E`` = how many layer-1 heads reach the induction
threshold at a checkpoint before E (``<= pre_step``), against ``n_ind_heads_final`` at the last
checkpoint: several candidates that form and one that wins would show as counts above 1 before E.
Does the head that ends up carrying the capability form first? ``carrier`` is the layer-1 head
with the highest prefix-matching score at the run's last checkpoint (the head the forcing control
forces, ``analyses/forcing_control.py``); ``first_formed`` the layer-1 head(s) whose score reaches
the threshold, held, at the earliest checkpoint; ``carrier_first`` whether the carrier is among
them (NaN, left out of the share, where no layer-1 head forms or the run has a single layer-1
head: no contest).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from interp.core.terms import DEFAULT_HOLD, IND_THRESHOLD, PREV_THRESHOLD

__all__ = ["formation_order", "formation_summary", "kendalls_w"]
EVENTS = ("t_prev", "t_ind", "E")


def _held_first(steps: np.ndarray, values: np.ndarray, threshold: float, hold: int) -> float:
    """The step an event happens by the one rule (:func:`interp.emergence.held_crossing`, the rule
    of E); ``inf`` when it does not happen within the run (a single checkpoint: never)."""
    from interp.emergence import held_crossing

    if len(steps) < 2:
        return math.inf
    _, post = held_crossing(list(steps), list(values), threshold, hold)
    return math.inf if post is None else float(post)


def formation_order(
    population,
    heads: pd.DataFrame,
    prev_threshold: float = PREV_THRESHOLD,
    ind_threshold: float = IND_THRESHOLD,
    hold: int = DEFAULT_HOLD,
) -> pd.DataFrame:
    """Per run: the steps the previous-token head and the induction head form, and E.

    Args:
        population: a :class:`interp.population.PopulationResult` or its run table.
        heads: the runs' head features (:data:`interp.population.heads.FEATURE_COLUMNS`).
        prev_threshold, ind_threshold: score thresholds in (0, 1] (fractions of attention).
        hold: checkpoints after the first one that must stay at or above the threshold (>= 0).

    Returns:
        One row per run with head features: ``run``, ``arm``, ``seed``, ``t_prev``, ``t_ind``,
        ``E`` (steps; ``inf`` = never within the run), ``order`` (the events sorted, ``<`` or
        ``=`` between them), ``strict`` (``t_prev < t_ind < E``), ``weak`` (``<=``),
        ``n_ind_heads_before_E``, ``n_ind_heads_final``, ``carrier`` (``"L<layer>H<head>"``),
        ``first_formed`` (``"+"``-joined heads; ``""`` if none formed), ``carrier_first`` (bool, or
        NaN where no layer-1 head formed or there is only one).

    Raises:
        ValueError: a threshold outside (0, 1] or a negative hold.

    Source: scores of Olsson et al. 2022 ("In-context Learning and Induction Heads"); the order
    previous-token -> induction -> capability is their two-layer induction circuit.
    """
    for name, value in (("prev_threshold", prev_threshold), ("ind_threshold", ind_threshold)):
        if not 0.0 < value <= 1.0:
            raise ValueError(f"{name}={value!r} must be in (0, 1] (a fraction of attention)")
    if not isinstance(hold, int) or hold < 0:
        raise ValueError(f"hold={hold!r} must be an integer >= 0")
    runs = getattr(population, "runs", population)
    rows = []
    for _, run in runs.iterrows():
        table = heads[heads["run"] == run["run"]]
        if table.empty:
            continue
        l0, l1 = table[table["layer"] == 0], table[table["layer"] >= 1]
        prev = l0.groupby("step")["previous_token"].max().sort_index()
        ind = l1.groupby("step")["prefix_matching"].max().sort_index()
        t_prev = _held_first(prev.index.to_numpy(), prev.to_numpy(), prev_threshold, hold)
        t_ind = _held_first(ind.index.to_numpy(), ind.to_numpy(), ind_threshold, hold) if len(ind) else math.inf
        e = float(run["E"]) if run["emerged"] else math.inf
        before = l1[l1["step"] <= (run["pre_step"] if run["emerged"] else run["budget"])]
        passed = before[before["prefix_matching"] >= ind_threshold][["layer", "head"]].drop_duplicates()
        last = l1[l1["step"] == l1["step"].max()]
        carrier, first, carrier_first = _carrier_and_first(l1, last, ind_threshold, hold)
        times = {"t_prev": t_prev, "t_ind": t_ind, "E": e}
        ordered = sorted(EVENTS, key=lambda k: (times[k], EVENTS.index(k)))
        order = ordered[0]
        for a, b in itertools.pairwise(ordered):
            order += (" = " if times[a] == times[b] else " < ") + b
        rows.append(
            {
                "run": run["run"],
                "arm": run["arm"],
                "seed": int(run["seed"]),
                **times,
                "order": order,
                "strict": bool(t_prev < t_ind < e),
                "weak": bool(t_prev <= t_ind <= e and t_prev < math.inf),
                "n_ind_heads_before_E": len(passed),
                "n_ind_heads_final": int((last["prefix_matching"] >= ind_threshold).sum()),
                "carrier": carrier,
                "first_formed": "+".join(first),
                "carrier_first": carrier_first,
            }
        )
    return pd.DataFrame(rows)


def _carrier_and_first(l1: pd.DataFrame, last: pd.DataFrame, threshold: float, hold: int):
    """``(carrier, first-formed heads, carrier among them or NaN)`` of one run's layer-1 heads."""
    if last.empty:
        return "", [], math.nan
    top = last.sort_values("prefix_matching", ascending=False).iloc[0]
    carrier = f"L{int(top['layer'])}H{int(top['head'])}"
    formed = {}
    for (layer, head), table in l1.groupby(["layer", "head"]):
        table = table.sort_values("step")
        formed[f"L{layer}H{head}"] = _held_first(
            table["step"].to_numpy(), table["prefix_matching"].to_numpy(), threshold, hold
        )
    earliest = min(formed.values())
    if math.isinf(earliest):
        return carrier, [], math.nan
    first = sorted(name for name, t in formed.items() if t == earliest)
    # one layer-1 head: no contest between candidates, nothing to count
    return carrier, first, (carrier in first) if len(formed) > 1 else math.nan


def kendalls_w(times: np.ndarray) -> float:
    """Kendall's W of ``times`` ``[raters, items]`` (ranks within each row, ties averaged, with the
    tie correction); NaN for fewer than 2 raters or items, or when every rater ties everything."""
    from scipy.stats import rankdata

    times = np.asarray(times, dtype=float)
    m, n = times.shape
    if m < 2 or n < 2:
        return math.nan
    ranks = np.vstack([rankdata(row) for row in times])
    totals = ranks.sum(axis=0)
    s = float(((totals - totals.mean()) ** 2).sum())
    ties = sum(float((c**3 - c).sum()) for c in (np.unique(row, return_counts=True)[1] for row in times))
    denominator = m**2 * (n**3 - n) - m * ties
    return s * 12 / denominator if denominator > 0 else math.nan


def formation_summary(order: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per arm and over all runs: runs, the share strictly and weakly in the order previous-token
    -> induction -> capability (Wilson 95 % intervals), Kendall's W with a 95 % percentile bootstrap
    interval over runs (``n_boot`` resamples), the median count of layer-1 heads past the
    induction threshold before E, the runs with two or more such candidates
    (``multi_candidates``), and how often the carrier formed first (``carrier_first`` of
    ``carrier_runs``, the runs with two or more layer-1 heads where one formed, with its Wilson
    95 % interval).

    Raises:
        ValueError: ``n_boot < 1``.
    """
    from interp.population.survival import share_interval

    if n_boot < 1:
        raise ValueError(f"n_boot={n_boot} must be >= 1")
    rng = np.random.default_rng(seed)
    groups = [*order.groupby("arm", sort=False), ("all", order)]
    rows = []
    for arm, rows_ in groups:
        times = rows_[list(EVENTS)].to_numpy(float)
        times = np.where(np.isinf(times), 1e12, times)  # never: after every checkpoint, tied with another never
        w = kendalls_w(times)
        boot = (
            [kendalls_w(times[rng.integers(0, len(times), len(times))]) for _ in range(n_boot)]
            if len(times) > 1
            else []
        )
        boot = [b for b in boot if b == b]
        k_s, k_w = int(rows_["strict"].sum()), int(rows_["weak"].sum())
        s, s_lo, s_hi = share_interval(k_s, len(rows_))
        v, v_lo, v_hi = share_interval(k_w, len(rows_))
        known = rows_["carrier_first"].dropna().astype(bool)
        n_c, k_c = len(known), int(known.sum())
        c, c_lo, c_hi = share_interval(k_c, n_c)
        rows.append(
            {
                "arm": arm,
                "runs": len(rows_),
                "strict": k_s,
                "share_strict": s,
                "share_strict_lo": s_lo,
                "share_strict_hi": s_hi,
                "weak": k_w,
                "share_weak": v,
                "share_weak_lo": v_lo,
                "share_weak_hi": v_hi,
                "kendall_w": w,
                "kendall_w_lo": float(np.percentile(boot, 2.5)) if boot else math.nan,
                "kendall_w_hi": float(np.percentile(boot, 97.5)) if boot else math.nan,
                "median_ind_heads_before_E": float(rows_["n_ind_heads_before_E"].median()),
                "max_ind_heads_before_E": int(rows_["n_ind_heads_before_E"].max()),
                "multi_candidates": int((rows_["n_ind_heads_before_E"] >= 2).sum()),
                "carrier_runs": n_c,
                "carrier_first": k_c,
                "share_carrier_first": c,
                "share_carrier_first_lo": c_lo,
                "share_carrier_first_hi": c_hi,
            }
        )
    return pd.DataFrame(rows)
