"""The paper's claims 1 and 4 judged on one population (:func:`claim_verdicts`), and in words
(:func:`claim_line`): every word from :mod:`interp.population.judge`, every number from the
contrasts read by :func:`interp.population.contrast.contrast_evidence`.

- Claim 1, seed ("at a fixed size a capability appears at very different steps depending on the
  seed"): a fact read in every cell of the rule grid: E spreads by ×:data:`SPREAD` or more over
  the emerged seeds of every arm with two or more.
- Claim 1, never ("or never"): a fact: some arm mixes seeds that emerged with seeds that never
  did by the budget; where none does and an arm sits on a ceiling below the threshold, the word
  is ``ceiling``.
- Claim 1, size ("larger models acquire it earlier"): per pair of arms with the same layers and
  heads, the larger ``d_model`` against the smaller.
- Claim 4, heads ("more heads help"): per (layers, ``d_model``) group, each head count against
  the next fewer (:func:`interp.population.checks.head_contrasts`'s pairs), judged together
  (:func:`interp.population.judge.judge_claim`).
"""

from __future__ import annotations

import pandas as pd

from interp.core.settings import StudyConfig
from interp.population.judge import FactEvidence, Verdict, judge, judge_claim, judge_fact

__all__ = ["PAPER", "SPREAD", "claim_line", "claim_verdicts", "one_factor_pairs"]

#: A spread of E over seeds (max / min) at least this large reads as "very different steps" (claim 1).
SPREAD = 1.5
#: The paper's statement of each claim the population answers (shared/PAPER.md).
PAPER = {
    "Claim 1, seed": "E depends on the seed",
    "Claim 1, never": "or never",
    "Claim 1, size": "larger models emerge earlier",
    "Claim 2": "a few heads' patterns recover most of the jump",
    "Claim 4, heads": "more heads help",
    "Claim 4, head size": "larger heads help, up to a minimum",
}


def _spread_holds(runs: pd.DataFrame) -> tuple[bool, str]:
    folds = {}
    for arm, E in runs[runs["emerged"]].groupby("arm", sort=False)["E"]:
        if len(E) >= 2:
            folds[arm] = (float(E.min()), float(E.max()), len(E))
    if not folds:
        return False, ""
    text = "; ".join(f"{a} {lo:.0f}–{hi:.0f} (×{hi / lo:.2f}, {n} seeds)" for a, (lo, hi, n) in folds.items())
    return min(hi / lo for lo, hi, _ in folds.values()) >= SPREAD, text


def _fact_cells(result, what) -> tuple[dict[str, bool], str]:
    from interp.population.contrast import GRID
    from interp.population.tables import check_curves, runs_from_curves

    table = check_curves(result.curves)
    holds, detail = {}, ""
    cells = list(GRID)
    if (result.threshold, result.hold) not in cells:  # an operating point off the grid is read too
        cells.append((result.threshold, result.hold))
    for t, h in cells:
        yes, text = what(runs_from_curves(table, t, h))
        holds[f"{t:g}/{h}"] = yes
        if (t, h) == (result.threshold, result.hold):
            detail = text
    return holds, detail


def _mixed(runs: pd.DataFrame) -> tuple[bool, str]:
    parts = []
    for arm, rows in runs.groupby("arm", sort=False):
        k = int(rows["emerged"].sum())
        if 0 < k < len(rows):
            parts.append(f"{arm} {len(rows) - k} of {len(rows)} never")
    return bool(parts), "; ".join(parts)


def claim_verdicts(result) -> list[Verdict]:
    """The judge's verdict on each of the paper's claims 1 and 4 that the population speaks to.

    Args:
        result: a :class:`interp.population.tables.PopulationResult` (its curves, arms and
            contrasts; its threshold and hold are the operating point).

    Returns:
        Verdicts labelled ``"Claim 1, seed"``, ``"Claim 1, never"``, ``"Claim 1, size (...)"``,
        ``"Claim 4, heads (...)"``; a claim's contrasts are its verdict's ``parts``.
    """
    from interp.population.contrast import ceiling_text, contrast_evidence
    from interp.population.shapes import architecture, pair_varies
    from interp.population.tables import check_curves

    config = StudyConfig(threshold=result.threshold, hold=result.hold)
    operating = f"{result.threshold:g}/{result.hold}"
    out = []
    holds, detail = _fact_cells(result, _spread_holds)
    if detail:
        out.append(
            judge_fact(
                FactEvidence(
                    "Claim 1, seed", holds, operating, f"E spreads ×{SPREAD:g} or more over an arm's seeds: {detail}"
                )
            )
        )
    holds, detail = _fact_cells(result, _mixed)
    ceiling = ceiling_text(check_curves(result.curves), result.runs, result.threshold)
    mixed = (
        f"mixed arms: {detail}" if detail else "no arm mixes seeds that emerged with seeds that never did by the budget"
    )
    never = judge_fact(FactEvidence("Claim 1, never", holds, operating, mixed, ceiling=ceiling))
    if never.word == "not decidable":
        never = Verdict(never.word, never.robust, never.label, never.reason, "a longer budget")
    out.append(never)
    arms = result.arms
    for (_, n_heads), group in arms.groupby(["n_layers", "n_heads"]):
        group = group.sort_values("d_model")
        for small, large in zip(group.iloc[:-1].itertuples(), group.iloc[1:].itertuples()):
            if small.d_model == large.d_model:
                continue
            evidence, _ = contrast_evidence(
                result.curves, large.arm, small.arm,
                f"Claim 1, size (d_model {large.d_model} vs {small.d_model}, {n_heads} heads)",
                wanted=+1, also_varies=pair_varies(result.runs, large.arm, small.arm, "d_model"), config=config,
            )  # fmt: skip
            out.append(judge(evidence))
    contrasts = result.contrasts
    for (n_layers, d_model), rows in contrasts.groupby(["n_layers", "d_model"], sort=True) if len(contrasts) else []:
        held = _held(result, rows)
        parts = []
        for row, h in zip(rows.itertuples(), held):
            evidence, _ = contrast_evidence(
                result.curves, row.arm, row.versus, f"{row.heads} heads{h}", wanted=+1,
                also_varies=row.also_varies if isinstance(row.also_varies, str) else "", config=config,
            )  # fmt: skip
            parts.append(judge(evidence))
        heads = ", ".join(str(int(x)) for x in sorted(arms[arms["d_model"] == d_model]["n_heads"].unique()))
        arch = "/".join(
            sorted(({architecture(a) for a in rows["arm"]} | {architecture(a) for a in rows["versus"]}) - {""})
        )
        where = f"{arch}, " if arch else ""
        out.append(judge_claim(f"Claim 4, heads ({where}d_model {d_model}, {n_layers} layers, heads {heads})", parts))
    sizes = one_factor_pairs(result.runs, "d_head")
    if sizes:
        parts = []
        shape = result.arms.set_index("arm")
        for small, large in sizes:
            evidence, _ = contrast_evidence(
                result.curves, large, small,
                f"d_head {shape.loc[large, 'd_head']} against {shape.loc[small, 'd_head']} at {shape.loc[large, 'n_heads']} heads",
                wanted=+1, config=config,
            )  # fmt: skip
            parts.append(judge(evidence))
        arch = "/".join(sorted({architecture(a) for pair in sizes for a in pair} - {""}))
        claim = judge_claim(f"Claim 4, head size ({arch + ': ' if arch else ''}does a larger head help?)", parts)
        out.append(
            Verdict(
                claim.word,
                claim.robust,
                claim.label,
                claim.reason,
                "; ".join(x for x in (claim.decide, "more than two head sizes (where the help stops)") if x),
                claim.parts,
            )
        )
    return out


def one_factor_pairs(runs: pd.DataFrame, factor: str) -> list[tuple[str, str]]:
    """Every pair of arms (smaller, larger ``factor``) that differ in ``factor`` alone among the
    design factors (:data:`interp.population.shapes.FACTORS`), in the runs' arm order."""
    from interp.population.shapes import differences

    arms = list(dict.fromkeys(runs["arm"]))
    out = []
    for i, a in enumerate(arms):
        for b in arms[i + 1 :]:
            diff = differences(runs, a, b)
            if [f for f, _, _ in diff] == [factor]:
                _, va, vb = diff[0]
                out.append((a, b) if va < vb else (b, a))
    return out


def _held(result, contrasts: pd.DataFrame) -> list[str]:
    """Per contrast, what it holds fixed where several contrasts share a head count (a design that
    crosses the head count with d_head): ``" at d_head 16"``; empty strings otherwise."""
    if not contrasts["heads"].duplicated().any():
        return [""] * len(contrasts)
    d_head = result.arms.set_index("arm")["d_head"]
    sizes = [int(d_head[c.arm]) for c in contrasts.itertuples()]
    if len(set(sizes)) == len(sizes):
        return [f" at d_head {d}" for d in sizes]
    return [f" ({c.arm} against {c.versus})" for c in contrasts.itertuples()]


def claim_line(v: Verdict, operating: str = "") -> str:
    """One claim in words: ``"Claim 4, heads (…): non-monotone, robust at threshold 0.5, hold 2
    (3 one-factor contrasts: …) — the paper: more heads help. 1 → 2 heads: reproduced, robust
    (…); …"``."""
    base = v.label.split(" (")[0]
    paper = PAPER.get(base, "")
    robust = f", {v.robust}" if v.robust else ""
    at = f" {operating}" if operating else ""
    line = f"{v.label}: {v.word}{robust}{at}" + (f" ({v.reason})" if v.reason else "")
    line += f"; the paper: {paper}." if paper else "."
    if v.parts:
        line += " " + "; ".join(p.text() for p in v.parts) + "."
    if v.decide:
        line += f" What would decide it: {v.decide}."
    return line
