"""A two-arm contrast, judged and put in words: the analyses entries (head count against head
size, the rotary-dims contrasts, the forcing control) word no verdict themselves;
each contrast is read by :func:`interp.population.contrast.contrast_evidence` and judged by
:func:`interp.population.judge.judge`, and its line (:func:`contrast_line`) prints the judge's
word, robustness and reason beside the emerged counts and Kaplan-Meier medians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD
from interp.population.contrast_stats import PairContrast
from interp.population.judge import Evidence, Verdict

__all__ = ["Judged", "contrast_line", "judged", "median_text"]


@dataclass(frozen=True)
class Judged:
    """One contrast, arm ``b`` against arm ``a``, judged.

    Attributes:
        a, b: the arms (b is compared with a); label: the contrast in words; budget: the step
            both arms are cut at (steps).
        verdict: the judge's :class:`interp.population.judge.Verdict` (its ``side``: ``"earlier"``
            or ``"later"`` where the test is significant at the operating point, b against a).
        evidence: what the judge read (:class:`interp.population.judge.Evidence`).
        pc: every number of the pair (:class:`interp.population.contrast_stats.PairContrast`;
            its ``arm_a`` is ``b``, its ``arm_b`` is ``a``).
    """

    a: str
    b: str
    label: str
    budget: int
    verdict: Verdict
    evidence: Evidence
    pc: PairContrast


def judged(
    curves: pd.DataFrame,
    b: str,
    a: str,
    label: str,
    wanted: int = 1,
    also_varies: str = "",
    budget: int | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    hold: int = DEFAULT_HOLD,
) -> Judged:
    """Arm ``b`` against arm ``a`` of ``curves``, judged at the operating point (``threshold``,
    ``hold``; default the settings', :class:`interp.core.settings.StudyConfig`) and over the rule grid.

    Args:
        curves: capability table holding both arms (:data:`interp.population.tables.CURVE_COLUMNS`).
        b, a: the arms (b against a); label: the contrast in words.
        wanted: the direction of the claim tested for b against a (+1: b emerges earlier).
        also_varies: what else differs between the arms (``""``: one factor): the judge then says
            ``confounded``, never reproduced or contradicted.
        budget: cut both arms at this step (steps; default: the smaller of their budgets).

    Raises:
        ValueError: an arm missing from ``curves``, or a bad table.
    """
    from interp.core.settings import StudyConfig
    from interp.population.contrast import contrast_evidence
    from interp.population.judge import judge

    if budget is None:
        pair = curves[curves["arm"].isin([a, b])]
        budget = int(pair.groupby("arm")["budget"].max().min()) if len(pair) else 0
    evidence, pc = contrast_evidence(
        curves, b, a, label, wanted, also_varies, StudyConfig(threshold=threshold, hold=hold), budget
    )
    return Judged(a, b, label, int(budget), judge(evidence), evidence, pc)


def median_text(median: float) -> str:
    """A Kaplan-Meier median E (steps, midpoint convention) as text, ``"1400 steps"``; NaN (the
    median is never reached) -> ``"not reached"``."""
    return "not reached" if not math.isfinite(median) else f"{median:.0f} steps"


def contrast_line(j: Judged) -> str:
    """One contrast in words: ``"8 heads against 4, d_head 16 (cut at 4000 steps): emerged 20/24
    against 22/24, Kaplan-Meier median E 2100 steps against 1100 steps: not decidable, robust null
    (log-rank stratified by seed p = 0.34; HR ×0.80 (95 % CI ...))"``; the word, robustness and
    reason are the judge's (:class:`interp.population.judge.Verdict`), the medians are read at the
    midpoint where S sits at exactly 0.5 (:func:`interp.population.survival.km_median`)."""
    pc, v = j.pc, j.verdict
    robust = f", {v.robust}" if v.robust else ""
    return (
        f"{j.label} (cut at {j.budget} steps): emerged {pc.emerged_a}/{pc.n_a} against {pc.emerged_b}/{pc.n_b}, "
        f"Kaplan-Meier median E {median_text(pc.median_a)} against {median_text(pc.median_b)}: "
        f"**{v.word}**{robust} ({v.reason})"
    )
