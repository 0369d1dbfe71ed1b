"""Claim 2 on the time axis: when a seed's top heads start to matter, relative to its point of emergence.

For each seed of the largest-jump pair's population (:mod:`interp.population.claim2_pair`) the
run is trained again to the pair's post step anyway; on those checkpoints
:func:`interp.timeline.head_timeline` patches every head's attention pattern from each checkpoint
into the one before it (``pairs="consecutive"``, every head exact). The seed's **top heads** are
the two heads that the pair's own ranking names (``heads`` of the ``top-2 patterns`` row).

A top head's **onset** is the first consecutive pair where its effect reaches
:data:`interp.report.timeline_page.ONSET_FRACTION` of its peak with the peak's sign and its 95 %
interval excludes 0 (:func:`interp.report.timeline_page.head_onsets`); the seed's onset is the
earlier of its two top heads', dated at that pair's later checkpoint (``post_step``: by then the
pattern has changed). The **lead** is ``E - onset`` (steps): 0 means the pattern's effect appears
in the same checkpoint interval as the capability's crossing, positive that it appears earlier.

Per arm, :func:`lead_summary` counts seeds whose onset lies within one checkpoint spacing of E
(``at E``: the paper's "coincides", at the suite's resolution), more than one spacing before E
(``leads``) or after (``lags``), with Wilson 95 % intervals, and gives the median lead with a
percentile-bootstrap 95 % interval over seeds. :func:`lead_verdict` asks the judge
(:func:`interp.population.judge.judge_share`) whether most seeds' onsets coincide with E, and
reads the same at onset fractions 0.25 and 0.75 for robustness.

Source: Baherwani et al. 2026, claim 2 ("the jump ... coincides with a few heads abruptly learning
a task-relevant attention pattern"); Wilson 1927; percentile bootstrap (Efron & Tibshirani 1993).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "FRACTIONS",
    "LEAD_COLUMNS",
    "TIMELINE_KEPT_COLUMNS",
    "keep_timeline",
    "lead_summary",
    "lead_table",
    "lead_verdict",
    "top_heads",
]

#: The columns kept per run (one row per consecutive pair and head).
TIMELINE_KEPT_COLUMNS = ["step", "post_step", "layer", "head", "delta", "lo", "hi", "how", "accuracy", "value_pre"]
#: One row per seed: :func:`lead_table`.
LEAD_COLUMNS = ["arm", "run", "seed", "E", "heads", "onset_step", "lead", "where"]
#: The onset fractions read: the operating one first (the timeline page's), then the grid.
FRACTIONS = (0.5, 0.25, 0.75)


def top_heads(heads: str) -> list[tuple[int, int]]:
    """``"L1H2 L0H3"`` -> ``[(1, 2), (0, 3)]`` (layer, head).

    Raises:
        ValueError: a name not of the form ``L<layer>H<head>`` (named).
    """
    out = []
    for name in str(heads).split():
        layer, sep, head = name.removeprefix("L").partition("H")
        if not (name.startswith("L") and sep and layer.isdigit() and head.isdigit()):
            raise ValueError(f"head {name!r} is not of the form L<layer>H<head>, e.g. L1H2")
        out.append((int(layer), int(head)))
    return out


def _onset(timeline: pd.DataFrame, heads: list[tuple[int, int]], fraction: float) -> float:
    """The earliest onset (the onset pair's ``post_step``) over ``heads``; NaN when none has one."""
    from interp.report.timeline_page import head_onsets

    onsets = []
    for layer, head in heads:
        rows = timeline[(timeline["layer"] == layer) & (timeline["head"] == head)]
        if not len(rows):
            continue
        found = head_onsets(rows, n=1, fraction=fraction)
        if len(found) and math.isfinite(found["onset_step"].iloc[0]):
            step = found["onset_step"].iloc[0]
            onsets.append(float(rows.loc[rows["step"] == step, "post_step"].iloc[0]))
    return min(onsets) if onsets else math.nan


def lead_table(
    timelines: dict[str, pd.DataFrame],
    pair_rows: pd.DataFrame,
    runs: pd.DataFrame,
    spacing: int,
    fraction: float = FRACTIONS[0],
) -> pd.DataFrame:
    """One row per seed with a kept timeline: its top heads' onset and lead.

    Args:
        timelines: run name -> its kept timeline (:data:`TIMELINE_KEPT_COLUMNS`; ``delta`` etc. in
            probability).
        pair_rows: the largest-jump pair's rows (:data:`interp.population.claim2_pair.PAIR_COLUMNS`);
            the ``top-2 patterns`` row of metric ``p`` names each run's top heads.
        runs: the point of emergence per run (``run``, ``E`` in steps, NaN when censored:
            :func:`interp.population.tables.runs_from_curves`).
        spacing: the checkpoint spacing (steps) that decides ``at E``.
        fraction: the onset fraction of the peak (in (0, 1]).

    Returns:
        :data:`LEAD_COLUMNS`: ``onset_step`` and ``lead`` = ``E - onset_step`` in steps (NaN where
        either is missing); ``where`` is ``at E`` (``|lead| <= spacing``), ``leads``, ``lags``,
        ``no onset`` or ``no E``.

    Raises:
        ValueError: ``spacing`` < 1 or ``fraction`` outside (0, 1].
    """
    if spacing < 1:
        raise ValueError(f"spacing={spacing!r} must be a checkpoint spacing >= 1 step")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r} must be in (0, 1] (a share of the head's peak effect)")
    top = pair_rows[(pair_rows["metric"] == "p") & (pair_rows["component"] == "top-2 patterns")].set_index("run")
    e_of = runs.set_index("run")["E"]
    rows = []
    for run, timeline in sorted(timelines.items()):
        if run not in top.index:
            continue
        heads = str(top.loc[run, "heads"])
        onset = _onset(timeline, top_heads(heads), fraction)
        e = float(e_of.get(run, math.nan))
        lead = e - onset if math.isfinite(e) and math.isfinite(onset) else math.nan
        if not math.isfinite(e):
            where = "no E"
        elif not math.isfinite(onset):
            where = "no onset"
        elif abs(lead) <= spacing:
            where = "at E"
        else:
            where = "leads" if lead > 0 else "lags"
        rows.append(
            {
                "arm": top.loc[run, "arm"],
                "run": run,
                "seed": int(top.loc[run, "seed"]),
                "E": e,
                "heads": heads,
                "onset_step": onset,
                "lead": lead,
                "where": where,
            }
        )
    return pd.DataFrame(rows, columns=LEAD_COLUMNS)


def _median_interval(values: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, float]:
    if not len(values):
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    boots = np.median(rng.choice(values, size=(n_boot, len(values)), replace=True), axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return float(np.median(values)), float(lo), float(hi)


def lead_summary(leads: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per arm: how many seeds' top heads start to matter at E, before it or after it.

    Args:
        leads: :func:`lead_table`'s rows.
        n_boot: bootstrap resamples of the median lead; seed: their random seed.

    Returns:
        One row per arm: ``seeds``, ``dated`` (seeds with both an onset and an E), ``at_E``,
        ``leads``, ``lags``, ``no_onset``, ``no_E`` (counts), ``at_E_lo``/``at_E_hi`` (Wilson 95 %
        of ``at_E / dated``), ``median_lead``, ``median_lo``, ``median_hi`` (steps; percentile
        bootstrap over the dated seeds).
    """
    from statsmodels.stats.proportion import proportion_confint

    rows = []
    for arm, group in leads.groupby("arm", sort=False):
        counts = group["where"].value_counts()
        dated = group[np.isfinite(group["lead"].astype(float))]
        at_e = int(counts.get("at E", 0))
        lo, hi = (
            proportion_confint(at_e, len(dated), alpha=0.05, method="wilson") if len(dated) else (math.nan, math.nan)
        )
        median, m_lo, m_hi = _median_interval(dated["lead"].to_numpy(float), n_boot, seed)
        rows.append(
            {
                "arm": arm,
                "seeds": len(group),
                "dated": len(dated),
                "at_E": at_e,
                "leads": int(counts.get("leads", 0)),
                "lags": int(counts.get("lags", 0)),
                "no_onset": int(counts.get("no onset", 0)),
                "no_E": int(counts.get("no E", 0)),
                "at_E_lo": lo,
                "at_E_hi": hi,
                "median_lead": median,
                "median_lo": m_lo,
                "median_hi": m_hi,
            }
        )
    return pd.DataFrame(rows)


def lead_verdict(by_fraction: dict[float, pd.DataFrame], arm: str):
    """The judge's word on "the top heads' effect starts at E" for one arm: most dated seeds at E
    (within one checkpoint spacing) against most not, by Wilson 95 % intervals
    (:func:`interp.population.judge.judge_share`) at the operating onset fraction; ``robust``
    where the other fractions of :data:`FRACTIONS` give the same word.

    Args:
        by_fraction: onset fraction -> :func:`lead_table` rows at that fraction (the operating
            fraction, ``FRACTIONS[0]``, must be among them).
        arm: the arm judged.

    Returns:
        :class:`interp.population.judge.Verdict`.

    Raises:
        ValueError: the operating fraction missing, or no dated seed of ``arm``.
    """
    from dataclasses import replace

    from interp.population.judge import ShareEvidence, judge_share

    if FRACTIONS[0] not in by_fraction:
        raise ValueError(f"the operating onset fraction {FRACTIONS[0]} is missing (have {sorted(by_fraction)})")

    def evidence(fraction: float) -> ShareEvidence:
        rows = by_fraction[fraction]
        rows = rows[(rows["arm"] == arm) & np.isfinite(rows["lead"].astype(float))]
        at_e = int((rows["where"] == "at E").sum())
        n, off = len(rows), len(rows) - at_e
        return ShareEvidence(
            f"{arm}, top heads' onset at E (±1 checkpoint)", at_e, off, n, at_e, off, sides=("at E", "not at E")
        )

    operating = evidence(FRACTIONS[0])
    if not operating.n:
        raise ValueError(f"arm {arm!r} has no seed with both an onset and an E")
    verdict = judge_share(operating)
    others = {f: judge_share(evidence(f)).word for f in by_fraction if f != FRACTIONS[0] and evidence(f).n}
    differ = [f"{f:g}: {w}" for f, w in others.items() if w != verdict.word]
    robust = "robust" if not differ else "not robust"
    grid = ", ".join(f"{f:g}" for f in sorted(by_fraction))
    reason = f"{verdict.reason}; onset fractions {grid}" + (f"; differs at {'; '.join(differ)}" if differ else "")
    return replace(verdict, robust=robust, reason=reason)


def keep_timeline(source, run: str, kept: Path, n_prompts: int = 256, n_boot: int = 1000) -> Path:
    """One run's head timeline on its checkpoints up to the pair's post step (consecutive pairs,
    every head exact, the pair's prompts: repetition task seed 1), kept atomically as
    ``kept/timeline/<run>.csv`` (:data:`interp.population.claim2_timeline.TIMELINE_KEPT_COLUMNS`)."""
    import warnings
    from dataclasses import replace

    from interp.core.io import atomic_to_csv
    from interp.core.settings import TIMELINE_CONFIG
    from interp.tasks import RepetitionTask
    from interp.timeline import head_timeline

    config = replace(TIMELINE_CONFIG, method="fast", scores=False, n_boot=n_boot)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the timeline's own E warning: E here is the kept curve's
        found = head_timeline(source, RepetitionTask(n_prompts=n_prompts, seed=1), config, progress=False)
    path = kept / "timeline" / f"{run}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_to_csv(found.table[TIMELINE_KEPT_COLUMNS], path)
