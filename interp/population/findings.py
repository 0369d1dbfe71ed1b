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

__all__ = ["arm_line", "claim_lines", "cox_line", "findings", "fmt_p", "fmt_pct", "fmt_steps", "test_line"]


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
        return f"{what}: undetermined ({row['note']})"
    return f"{what}: χ² = {row['chi2']:.2f} ({row['df']} df), {fmt_p(row['p'])}"


def cox_line(row: pd.Series) -> str:
    """A Cox row in words: ``"2 layers, d_model 64 (heads 4, 8): per doubling of heads the hazard of
    emergence is ×1.8 (95 % CI 1.3–2.5, p = 0.002): more heads emerge earlier"``."""
    what = f"{row['n_layers']} layers, d_model {row['d_model']} (heads {row['heads']})"
    if row["fit"] != ALL_ARMS:
        what += f", {row['fit']}"
    if isinstance(row["note"], str) and row["note"]:
        return f"{what}: hazard ratio per doubling of heads undetermined ({row['note']})"
    hr, lo, hi = row["hr_per_doubling"], row["hr_lo"], row["hr_hi"]
    if lo > 1:
        reading = "more heads emerge earlier"
    elif hi < 1:
        reading = "more heads emerge later"
    else:
        reading = "the interval includes 1: no effect of the head count detected"
    return (
        f"{what}: per doubling of heads the hazard of emergence is ×{hr:.2f} "
        f"(95 % CI {lo:.2f}–{hi:.2f}, {fmt_p(row['p'])}): {reading}"
    )


def findings(result) -> list[str]:
    """The findings of a :class:`interp.population.tables.PopulationResult` in words, in the order
    the page shows them: arms, the global log-rank test, each arm against the reference, Cox."""
    lines = [arm_line(row) for _, row in result.arms.iterrows()]
    lines += [test_line(row) for _, row in result.tests.iterrows()]
    lines += [cox_line(row) for _, row in result.cox.iterrows()]
    return lines


def _median_ci(row) -> str:
    if math.isnan(row["median_E"]):
        return "median not reached"
    return (
        f"median {fmt_steps(row['median_E'])} (95 % CI {fmt_steps(row['median_E_lo'])}–{fmt_steps(row['median_E_hi'])})"
    )


def claim_lines(result) -> list[str]:
    """The paper's claims 1 and 4 (Baherwani et al. 2026; shared/PAPER.md) answered by a
    population, in words computed from its tables: how far E spreads over the seeds of one arm
    (the fold max/min over emerged seeds), whether an arm mixes seeds that emerged with seeds that
    never did, whether the larger model (the same layers and heads, larger ``d_model``) emerges
    earlier (medians with intervals, log-rank test of the pair), and whether more heads at a fixed
    width emerge earlier (the Cox hazard ratio per doubling of heads, fitted over all arms).

    Returns:
        Lines of text, each starting with the claim it answers ("Claim 1, seed:", "Claim 1,
        never:", "Claim 1, size:", "Claim 4, heads:"); a claim the population cannot speak to
        (one arm, no pair of sizes) has no line.
    """
    from interp.population.survival import logrank_tests

    arms, runs, lines = result.arms.set_index("arm"), result.runs, []
    spread = []
    for arm in arms.index:
        E = runs.loc[(runs["arm"] == arm) & runs["emerged"], "E"]
        if len(E) >= 2:
            spread.append(f"{arm} {E.min():.0f}–{E.max():.0f} (×{E.max() / E.min():.2f}, {len(E)} seeds)")
    if spread:
        lines.append("Claim 1, seed: at a fixed size E spreads over the seeds: " + "; ".join(spread) + " steps.")
    mixed = [arm for arm, row in arms.iterrows() if 0 < row["n_emerged"] < row["n_runs"]]
    silent = [arm for arm, row in arms.iterrows() if row["n_emerged"] == 0]
    if mixed:
        parts = [f"{a} ({arms.loc[a, 'n_never']} of {arms.loc[a, 'n_runs']} never)" for a in mixed]
        lines.append("Claim 1, never: some seeds of a size never emerge by the budget: " + "; ".join(parts) + ".")
    else:
        what = f" ({', '.join(silent)} never emerged on any seed)" if silent else ""
        lines.append(
            "Claim 1, never: no arm mixes seeds that emerged with seeds that never did: whether a run "
            f"emerges by the budget is set by its arm here, not by its seed{what}."
        )
    for (n_layers, n_heads), group in arms.reset_index().groupby(["n_layers", "n_heads"]):
        group = group.sort_values("d_model")
        for small, large in zip(group.iloc[:-1].itertuples(), group.iloc[1:].itertuples()):
            test = logrank_tests(runs[runs["arm"].isin([small.arm, large.arm])]).iloc[0]
            a, b = arms.loc[large.arm], arms.loc[small.arm]
            earlier = (
                "earlier"
                if a["median_E_hi"] < b["median_E_lo"]
                else "later"
                if a["median_E_lo"] > b["median_E_hi"]
                else "with overlapping intervals"
            )
            lines.append(
                f"Claim 1, size: d_model {large.d_model} ({large.arm}) against {small.d_model} ({small.arm}), "
                f"{n_layers} layers and {n_heads} heads each: {_median_ci(a)} against {_median_ci(b)} steps, "
                f"{earlier}; log-rank {fmt_p(test['p'])}."
            )
    for row in result.cox.itertuples():
        if row.fit != ALL_ARMS or (isinstance(row.note, str) and row.note):
            continue
        reading = (
            "more heads emerge earlier"
            if row.hr_lo > 1
            else "more heads emerge later"
            if row.hr_hi < 1
            else "no effect detected"
        )
        d_head = arms.loc[arms["d_model"] == row.d_model, "d_head"]
        lines.append(
            f"Claim 4, heads: at d_model {row.d_model} ({row.n_layers} layers, heads {row.heads}, d_head "
            f"{d_head.min()}–{d_head.max()}), the hazard of "
            f"emergence per doubling of heads (a halving of d_head at this width) is ×{row.hr_per_doubling:.2f} (95 % CI {row.hr_lo:.2f}–{row.hr_hi:.2f}, "
            f"{fmt_p(row.p)}): {reading}."
        )
    return lines
