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

from interp.population.robust import SPREAD
from interp.population.survival import ALL_ARMS

__all__ = [
    "arm_line", "checks_failed", "claim_lines", "contrast_line", "contrast_text", "cox_line", "findings", "fmt_p",
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


def _median_ci(row) -> str:
    if math.isnan(row["median_E"]):
        return "median not reached"
    return (
        f"median {fmt_steps(row['median_E'])} (95 % CI {fmt_steps(row['median_E_lo'])}–{fmt_steps(row['median_E_hi'])})"
    )


def _robust(result, key: str) -> str:
    """``"robust over the grid of rules"`` or ``"not robust over the grid of rules (...)"`` for a finding key."""
    table = result.robustness
    if not len(table):
        return "robustness over the rules not computed"
    rows = table[table["key"] == key]
    if not len(rows):
        return "not in the grid of rules"
    head, _, rest = str(rows.iloc[0]["verdict"]).partition(": ")
    return f"{head} over the grid of rules ({rest})"


def _verdict(direction: str, p: float, wanted: str) -> str:
    """reproduced / contradicted / not decidable: a significant effect in the stated direction, against it, or neither."""
    if not (isinstance(p, float) and math.isfinite(p)) or p >= 0.05 or not direction:
        return "not decidable"
    return "reproduced" if direction == wanted else "contradicted"


def claim_lines(result) -> list[str]:
    """The paper's claims 1 and 4 (Baherwani et al. 2026; shared/PAPER.md) answered by a
    population, in words computed from its tables. Each line starts with the claim, then says
    ``reproduced``, ``contradicted`` or ``not decidable`` against the paper's statement, at which
    operating point (threshold, hold), whether it is robust over the grid of rules
    (:mod:`interp.population.robust`), and, for a contrast between arms that differ in more than
    one factor, that it is confounded and with what.

    - Claim 1, seed ("at a fixed size a capability appears at very different steps depending on
      the seed"): reproduced where E spreads by at least ×:data:`SPREAD` (max / min over the
      emerged seeds) in every arm with two or more emerged seeds, contradicted where it does in none.
    - Claim 1, never ("or never"): reproduced where some arm mixes seeds that emerged with seeds
      that never did by the budget; not decidable otherwise (a budget bounds what "never" can show).
    - Claim 1, size ("larger models acquire it earlier"): per pair of arms with the same layers and
      heads, the larger ``d_model`` against the smaller: hazard ratio and log-rank p.
    - Claim 4, heads ("more heads help"): per ``d_model``, the hazard ratio per doubling of heads
      where the proportional-hazards and log-linearity checks hold, else each head count against
      the next fewer with its interval.

    Returns:
        Lines of text, each starting with the claim it answers ("Claim 1, seed:", "Claim 1,
        never:", "Claim 1, size:", "Claim 4, heads:"); a claim the population cannot speak to has
        no line.
    """
    from interp.population.robust import key_findings

    arms, runs, lines = result.arms.set_index("arm"), result.runs, []
    at = f"at threshold {result.threshold:g}, hold {result.hold}"
    found = {f["key"]: f for f in key_findings(runs, result.arms, result.tests, result.cox, result.contrasts)}
    spread, folds = [], []
    for arm in arms.index:
        E = runs.loc[(runs["arm"] == arm) & runs["emerged"], "E"]
        if len(E) >= 2:
            spread.append(f"{arm} {E.min():.0f}–{E.max():.0f} (×{E.max() / E.min():.2f}, {len(E)} seeds)")
            folds.append(E.max() / E.min())
    if spread:
        verdict = "reproduced" if min(folds) >= SPREAD else "contradicted" if max(folds) < SPREAD else "not decidable"
        lines.append(
            f"Claim 1, seed: {verdict} {at}, {_robust(result, 'seed')}: E spreads over the seeds of an arm "
            f"(×{SPREAD:g} or more reads as very different steps): " + "; ".join(spread) + " steps."
        )
    mixed = [arm for arm, row in arms.iterrows() if 0 < row["n_emerged"] < row["n_runs"]]
    silent = [arm for arm, row in arms.iterrows() if row["n_emerged"] == 0]
    if mixed:
        parts = [f"{a} ({arms.loc[a, 'n_never']} of {arms.loc[a, 'n_runs']} never)" for a in mixed]
        lines.append(
            f"Claim 1, never: reproduced {at}, {_robust(result, 'never')}: some seeds of a size never emerge by "
            "the budget: " + "; ".join(parts) + "."
        )
    else:
        what = f" ({', '.join(silent)} never emerged on any seed)" if silent else ""
        lines.append(
            f"Claim 1, never: not decidable {at}, {_robust(result, 'never')}: no arm mixes seeds that emerged "
            f"with seeds that never did{what}; whether a run emerges by the budget is set by its arm here, and a "
            "budget bounds what never can show."
        )
    for (n_layers, n_heads), group in arms.reset_index().groupby(["n_layers", "n_heads"]):
        group = group.sort_values("d_model")
        for small, large in zip(group.iloc[:-1].itertuples(), group.iloc[1:].itertuples()):
            key = f"size:{small.arm}:{large.arm}"
            if key not in found:
                continue
            f = found[key]
            a, b = arms.loc[large.arm], arms.loc[small.arm]
            from interp.population.shapes import pair_varies

            also = pair_varies(runs, large.arm, small.arm, "d_model")
            confounded = (
                f"; confounded: {also} {'vary' if ',' in also else 'varies'} with d_model (as in Pythia's larger sizes)"
                if also
                else ""
            )
            reading = {"earlier": "earlier", "later": "later"}.get(f["direction"], "no direction")
            lines.append(
                f"Claim 1, size: {_verdict(f['direction'], f['p'], 'earlier')} {at}, {_robust(result, key)}: "
                f"d_model {large.d_model} ({large.arm}) against {small.d_model} ({small.arm}), {n_layers} layers and "
                f"{n_heads} heads each: {_median_ci(a)} against {_median_ci(b)} steps, {reading}; hazard ratio of the "
                f"larger against the smaller {f['estimate']}{confounded}."
            )
    for row in result.cox.itertuples():
        if row.fit != ALL_ARMS or str(row.heads).count(",") < 1:
            continue
        lines.append(_heads_line(result, row, found, at))
    return lines


def _heads_line(result, row, found: dict, at: str) -> str:
    """Claim 4 for one (n_layers, d_model) group: per doubling where the model checks hold, else per arm."""
    key = f"cox:{row.n_layers}:{row.d_model}:all"
    also = row.also_varies if isinstance(row.also_varies, str) else ""
    confounded = (
        f" Confounded: {also} change with n_heads, so this is not a contrast of the head count alone." if also else ""
    )
    head = f"Claim 4, heads: at d_model {row.d_model} ({row.n_layers} layers, heads {row.heads})"
    determined = not (isinstance(row.note, str) and row.note)
    if determined and not checks_failed(row._asdict()):
        f = found[key]
        reading = {"earlier": "more heads emerge earlier", "later": "more heads emerge later"}.get(
            f["direction"], "no effect detected"
        )
        return (
            f"{head}: {_verdict(f['direction'], f['p'], 'earlier')} {at}, {_robust(result, key)}: the hazard of "
            f"emergence per doubling of heads is ×{row.hr_per_doubling:.2f} (95 % CI {row.hr_lo:.2f}–{row.hr_hi:.2f}, "
            f"{fmt_p(row.p)}): {reading}; model checks hold (proportional hazards {fmt_p(row.ph_p)}, log-linearity "
            f"{fmt_p(row.lr_p)})"
            + (
                f"; the ratio leans on n_heads={row.silent_heads}, where no run emerged"
                if isinstance(row.silent_heads, str) and row.silent_heads
                else ""
            )
            + f".{confounded}"
        )
    contrasts = result.contrasts[
        (result.contrasts["n_layers"] == row.n_layers) & (result.contrasts["d_model"] == row.d_model)
    ]
    keys = [f"contrast:{c.versus}:{c.arm}" for c in contrasts.itertuples()]
    held = _held(result, contrasts)
    pair_also = [c.also_varies if isinstance(c.also_varies, str) else "" for c in contrasts.itertuples()]
    if len(contrasts) and not any(pair_also):
        confounded = " Each contrast varies the head count alone."
    elif any(pair_also) and not all(pair_also):
        confounded = (
            " Confounded: "
            + "; ".join(
                f"{c.heads} heads{h} also varies {a}" for c, h, a in zip(contrasts.itertuples(), held, pair_also) if a
            )
            + "."
        )
    sig = [found[k]["direction"] for k in keys if k in found and found[k]["holds"]]
    verdict = (
        "reproduced"
        if sig and set(sig) == {"earlier"}
        else "contradicted"
        if sig and set(sig) == {"later"}
        else "not decidable"
    )
    why = []
    if determined and isinstance(row.ph_p, float) and row.ph_p < 0.05:
        why.append(f"proportional hazards rejected, {fmt_p(row.ph_p)}")
    if determined and isinstance(row.lr_p, float) and row.lr_p < 0.05:
        why.append(f"log-linearity in log2(heads) rejected against per-arm ratios, {fmt_p(row.lr_p)}")
    if not determined:
        why.append(f"the ratio per doubling is undetermined: {row.note}")
    parts = [
        f"{contrast_text(c._asdict(), h)}, {_robust(result, k)}" for c, k, h in zip(contrasts.itertuples(), keys, held)
    ]
    return (
        f"{head}: {verdict} {at} (the paper: more heads help); no single ratio per doubling is quoted "
        f"({'; '.join(why)}), each head count against the next fewer instead, above 1 = more heads emerge earlier: "
        + "; ".join(parts)
        + "."
        + confounded
    )


def _held(result, contrasts: pd.DataFrame) -> list[str]:
    """Per contrast, what it holds fixed where several contrasts share a head count (a design that
    crosses the head count with d_head): ``" at d_head 16"``, or the arms by name where d_head does
    not tell them apart; empty strings otherwise."""
    if not contrasts["heads"].duplicated().any():
        return [""] * len(contrasts)
    d_head = result.arms.set_index("arm")["d_head"]
    sizes = [int(d_head[c.arm]) for c in contrasts.itertuples()]
    if len(set(sizes)) == len(sizes):
        return [f" at d_head {d}" for d in sizes]
    return [f" ({c.arm} against {c.versus})" for c in contrasts.itertuples()]
