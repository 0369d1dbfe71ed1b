"""The findings of a population in words, computed from its tables (never typed by hand).

One line per arm (runs emerged by the budget, the median point of emergence with its interval,
the share never emerged with its interval), one for the global log-rank test, one per arm against
the reference, one per Cox group (the hazard ratio per doubling of heads). A statistic that the
data leave undetermined is said so in words ("median not reached: no more than half emerged"),
never printed as NaN.
"""

from __future__ import annotations

import math

import pandas as pd

from interp.population.survival import ALL_ARMS

__all__ = [
    "arm_line", "checks_failed", "contrast_line", "contrast_text", "cox_line", "findings", "fmt_p",
    "fmt_pct", "fmt_steps", "test_line",
]  # fmt: skip


def fmt_steps(value: float) -> str:
    """A step count as digits (``2300``); ``inf`` -> "not reached"; NaN -> "undetermined"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "undetermined"
    if math.isinf(value):
        return "not reached"
    return f"{value:.0f}"


def fmt_p(p: float) -> str:
    """A p-value as text: ``p = 0.002``, ``p = 0.055``, ``p = 0.31``, ``p < 0.001``; NaN -> "p undetermined"."""
    if p is None or math.isnan(p):
        return "p undetermined"
    # two significant digits below 0.1, so 0.055 is not printed as "0.05"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


def fmt_pct(x: float) -> str:
    """A share (probability) as a whole percentage: ``0.583`` -> ``"58 %"``."""
    return f"{100 * x:.0f} %"


def arm_line(row: pd.Series) -> str:
    """One arm in words: ``"d64-h4: 17 of 24 seeds emerged by step 4000; median E 2300 steps (95 % CI
    1900–2800); never emerged: 29 % (95 % CI 15–49 %)"``."""
    head = f"{row['arm']}: {row['n_emerged']} of {row['n_runs']} seeds emerged by step {row['budget']}"
    if row["n_emerged"] == 0:
        median = "median not reached: no seed emerged"
    elif math.isnan(row["median_E"]):
        median = "median not reached: no more than half emerged"
    else:
        lo, hi = fmt_steps(row["median_E_lo"]), fmt_steps(row["median_E_hi"])
        median = f"median E {fmt_steps(row['median_E'])} steps (95 % CI {lo}–{hi})"
    never = (
        f"never emerged: {fmt_pct(row['share_never_emerged'])} "
        f"(95 % CI {fmt_pct(row['share_never_lo'])}–{fmt_pct(row['share_never_hi'])})"
    )
    return f"{head}; {median}; {never}"


def test_line(row: pd.Series) -> str:
    """A log-rank row in words: ``"log-rank test across 3 arms: χ² = 12.3 (2 df), p = 0.002"``."""
    if row["test"] == "global":
        what = f"log-rank test across {row['df'] + 1} arm{'s' if row['df'] else ''} ({row['arms']})"
    else:
        what = f"log-rank test {row['arm']} vs {row['reference']}"
    if isinstance(row["note"], str) and row["note"]:
        return f"{what}: undetermined ({row['note']})" + _confounded(row)
    return f"{what}: χ² = {row['chi2']:.2f} ({row['df']} df), {fmt_p(row['p'])}" + _confounded(row)


def _confounded(row) -> str:
    """``"; confounded: d_head 64 vs 16 … vary with n_heads"`` for a contrast that varies more than one factor."""
    also = row.get("also_varies", "") if hasattr(row, "get") else getattr(row, "also_varies", "")
    compared = row.get("compared", "") if hasattr(row, "get") else getattr(row, "compared", "")
    if not isinstance(also, str) or not also:
        return ""
    return f"; confounded: {also} {'vary' if ',' in also else 'varies'} with {compared or 'the compared factor'}"


def cox_line(row: pd.Series) -> str:
    """A Cox row in words: ``"2 layers, d_model 64 (heads 4, 8): per doubling of heads the hazard of
    emergence is ×1.8 (95 % CI 1.3–2.5, p = 0.002): more heads emerge earlier"``."""
    what = f"{row['n_layers']} layers, d_model {row['d_model']} (heads {row['heads']})"
    if row["fit"] != ALL_ARMS:
        what += f", {row['fit']}"
    also = row.get("also_varies", "")
    confounded = f"; confounded: {also} vary with n_heads" if isinstance(also, str) and also else ""
    if isinstance(row["note"], str) and row["note"]:
        return f"{what}: hazard ratio per doubling of heads undetermined ({row['note']}){confounded}"
    hr, lo, hi = row["hr_per_doubling"], row["hr_lo"], row["hr_hi"]
    if lo > 1:
        reading = "more heads emerge earlier"
    elif hi < 1:
        reading = "more heads emerge later"
    else:
        reading = "the interval includes 1: no effect of the head count detected"
    caveat = f" ({row['caveat']})" if isinstance(row.get("caveat"), str) and row.get("caveat") else ""
    silent = row.get("silent_heads", "")
    if isinstance(silent, str) and silent:
        caveat += (
            f"; this ratio leans on n_heads={silent}, where no run emerged (its runs enter censored at the budget)"
        )
    return (
        f"{what}: per doubling of heads the hazard of emergence is ×{hr:.2f} "
        f"(95 % CI {lo:.2f}–{hi:.2f}, {fmt_p(row['p'])}): {reading}{caveat}{confounded}{_checks(row)}"
    )


def _checks(row) -> str:
    """The model checks of a Cox row in words: ``"; model checks: proportional hazards p = 0.51
    (not rejected), log-linearity p < 0.001 (rejected: quote the per-arm contrasts)"``."""
    parts = []
    ph, lr = row.get("ph_p", math.nan), row.get("lr_p", math.nan)
    if isinstance(ph, float) and math.isfinite(ph):
        parts.append(f"proportional hazards {fmt_p(ph)} ({'rejected' if ph < 0.05 else 'not rejected'})")
    if isinstance(lr, float) and math.isfinite(lr):
        parts.append(
            f"log-linearity in log2(heads) against per-arm ratios {fmt_p(lr)} ({'rejected' if lr < 0.05 else 'not rejected'})"
        )
    if not parts:
        return ""
    failed = (isinstance(ph, float) and ph < 0.05) or (isinstance(lr, float) and lr < 0.05)
    return (
        "; model checks: "
        + ", ".join(parts)
        + (": quote the per-arm contrasts, not a ratio per doubling" if failed else "")
    )


def checks_failed(row) -> bool:
    """Whether a Cox row's proportional-hazards or log-linearity test rejects (p < 0.05)."""
    return any(isinstance(v, float) and v < 0.05 for v in (row.get("ph_p", math.nan), row.get("lr_p", math.nan)))


def contrast_text(row, held: str = "") -> str:
    """A per-arm contrast: ``"1 → 2 heads ×1.36 (95 % CI 0.73–2.56, p = 0.34; log-rank p = 0.44)"``;
    a pair with no finite ratio says why and keeps its log-rank p. ``held``: what the pair holds
    fixed where several pairs share a head count (``" at d_head 16"``), else empty."""
    head = f"{row['heads']} heads{held}"
    if isinstance(row["note"], str) and row["note"]:
        return f"{head}: hazard ratio undetermined ({row['note']}; log-rank {fmt_p(row['logrank_p'])})"
    caveat = f"; {row['caveat']}" if isinstance(row["caveat"], str) and row["caveat"] else ""
    return (
        f"{head} ×{row['hr']:.2f} (95 % CI {row['hr_lo']:.2f}–{row['hr_hi']:.2f}, {fmt_p(row['p'])}; "
        f"log-rank {fmt_p(row['logrank_p'])}{caveat})"
    )


def contrast_line(row) -> str:
    """A per-arm contrast row in words, with what else varies between the two arms."""
    what = f"{row['n_layers']} layers, d_model {row['d_model']}, {row['arm']} against {row['versus']}"
    also = row["also_varies"]
    confounded = f"; confounded: {also} {'vary' if ',' in also else 'varies'} with n_heads" if also else ""
    return f"{what}: {contrast_text(row)}{confounded}"


def findings(result) -> list[str]:
    """The findings of a :class:`interp.population.tables.PopulationResult` in words, in the order
    the page shows them: arms, the global log-rank test, each arm against the reference, Cox."""
    lines = [arm_line(row) for _, row in result.arms.iterrows()]
    lines += [test_line(row) for _, row in result.tests.iterrows()]
    lines += [cox_line(row) for _, row in result.cox.iterrows()]
    lines += [contrast_line(row) for _, row in result.contrasts.iterrows()]
    return lines
