"""Do the population's findings hang on the rule that dates E? (issue 52, item 3)

Each finding (:func:`key_findings`: the arms differ; an arm mixes seeds that emerged with seeds
that never did; the larger model emerges earlier; the hazard per doubling of heads; each head
count against the next fewer; the model checks) is recomputed over a grid of rules, accuracy
threshold x hold (:data:`THRESHOLDS` x :data:`HOLDS`), with a crossing that has no room left to
hold censored at the budget (:func:`interp.emergence.held_crossing`). Whether a finding is
robust over the grid (:func:`robustness`) is the judge's word
(:func:`interp.population.judge.robustness`): robust only where its direction and its significance
(p < :data:`ALPHA`) are the same in every cell of the grid; a finding significant nowhere is a
robust null; anything else is not robust, and the verdict names the cells that break it.
"""

from __future__ import annotations

import math

import pandas as pd

from interp.population.survival import ALL_ARMS, cox_fit, logrank_tests

__all__ = [
    "ALPHA",
    "GRID_COLUMNS",
    "HOLDS",
    "SPREAD",
    "THRESHOLDS",
    "grid_cells",
    "grid_table",
    "key_findings",
    "robustness",
]

#: Accuracy thresholds (fractions) and holds (checkpoints) of the grid.
THRESHOLDS = (0.4, 0.5, 0.6)
HOLDS = (1, 2, 3)
#: Significance level of a finding (two-sided p).
ALPHA = 0.05
#: A spread of E over seeds (max / min) at least this large reads as "very different steps" (claim 1).
SPREAD = 1.5
#: Columns of the grid (one row per finding and cell).
GRID_COLUMNS = ["key", "finding", "label", "kind", "threshold", "hold", "estimate", "direction", "p", "holds"]


def _fmt_p(p: float) -> str:
    if p is None or not math.isfinite(p):
        return "p —"
    return "p<0.001" if p < 0.001 else f"p={p:.2g}" if p < 0.1 else f"p={p:.2f}"


def _direction(hr: float) -> str:
    if not math.isfinite(hr) or hr == 1:
        return ""
    return "earlier" if hr > 1 else "later"


def key_findings(
    runs: pd.DataFrame, arms: pd.DataFrame, tests: pd.DataFrame, cox: pd.DataFrame, contrasts
) -> list[dict]:
    """The population's findings as records, from its tables at one rule.

    Returns:
        One dict per finding with ``key`` (stable across rules), ``finding`` (words), ``kind``
        (``"effect"``: a direction and a p; ``"fact"``: true or false; ``"check"``: a model check,
        ``holds`` when its assumption is not rejected), ``estimate`` (text), ``direction``
        (``"earlier"``, ``"later"`` or ``""``: the arm with more heads, or the larger model, against
        the other), ``p`` and ``holds`` (an effect: significant at :data:`ALPHA`).
    """
    out = []
    glob = tests[tests["test"] == "global"]
    if len(glob) and glob.iloc[0]["df"] >= 1:
        p = float(glob.iloc[0]["p"])
        out.append(
            {"key": "global", "finding": "the arms differ (log-rank, all arms)", "label": "arms differ (log-rank)", "kind": "effect",
             "estimate": _fmt_p(p), "direction": "", "p": p, "holds": bool(p < ALPHA)}
        )  # fmt: skip
    short = short_names(list(arms["arm"]))
    folds = {}
    for arm, E in runs[runs["emerged"]].groupby("arm", sort=False)["E"]:
        if len(E) >= 2:
            folds[arm] = float(E.max() / E.min())
    if folds:
        out.append(
            {
                "key": "seed",
                "finding": f"claim 1, seed: E spreads by ×{SPREAD:g} or more over the seeds of every arm",
                "label": f"claim 1 seed: spread ≥ ×{SPREAD:g} in every arm (min–max)",
                "kind": "fact",
                "estimate": f"×{min(folds.values()):.2f}–×{max(folds.values()):.2f}",
                "direction": "",
                "p": math.nan,
                "holds": bool(min(folds.values()) >= SPREAD),
            }
        )
    mixed = arms[(arms["n_emerged"] > 0) & (arms["n_emerged"] < arms["n_runs"])]
    out.append(
        {
            "key": "never",
            "finding": "claim 1, never: some arm mixes seeds that emerged with seeds that never did",
            "label": "claim 1 never: an arm mixes emerged and never",
            "kind": "fact",
            "estimate": "; ".join(f"{short[r.arm]} {r.n_never}/{r.n_runs} never" for r in mixed.itertuples())
            or "no arm",
            "direction": "",
            "p": math.nan,
            "holds": bool(len(mixed)),
        }
    )
    for (n_layers, n_heads), group in arms.groupby(["n_layers", "n_heads"]):
        group = group.sort_values("d_model")
        for small, large in zip(group.iloc[:-1].itertuples(), group.iloc[1:].itertuples()):
            if small.d_model == large.d_model:
                continue
            pair = runs[runs["arm"].isin([small.arm, large.arm])]
            fit, _ = cox_fit(
                pair["duration"].to_numpy(float),
                pair["emerged"].to_numpy(bool),
                (pair["arm"] == large.arm).to_numpy(float),
                "d_model",
            )
            p = float(logrank_tests(pair, reference=small.arm).iloc[-1]["p"])
            direction = _direction(fit["hr"]) or _separated(runs, large.arm, small.arm)
            out.append(
                {
                    "key": f"size:{small.arm}:{large.arm}",
                    "finding": f"claim 1, size: d_model {large.d_model} against {small.d_model} "
                    f"({n_layers} layers, {n_heads} heads): hazard ratio, log-rank p",
                    "label": f"claim 1 size: d_model {large.d_model} vs {small.d_model}",
                    "kind": "effect",
                    "estimate": _ratio_text(fit["hr"], direction, f"log-rank {_fmt_p(p)}"),
                    "direction": direction,
                    "p": p,
                    "holds": bool(p < ALPHA),
                }
            )
    for row in cox.itertuples():
        if str(row.heads).count(",") < 1:
            continue
        key = f"cox:{row.n_layers}:{row.d_model}:{'all' if row.fit == ALL_ARMS else 'without'}"
        label = "all arms" if row.fit == ALL_ARMS else row.fit
        short_fit = str(row.fit).split(" (")[0]
        determined = not (isinstance(row.note, str) and row.note)
        out.append(
            {
                "key": key,
                "finding": f"claim 4, heads: hazard ratio per doubling of heads, d_model {row.d_model} ({label})",
                "label": f"claim 4: per doubling, d_model {row.d_model}"
                + ("" if row.fit == ALL_ARMS else f" ({short_fit})"),
                "kind": "effect",
                "estimate": f"×{row.hr_per_doubling:.2f}, {_fmt_p(row.p)}" if determined else "undetermined",
                "direction": _direction(row.hr_per_doubling) if determined else "",
                "p": float(row.p) if determined else math.nan,
                "holds": bool(determined and row.p < ALPHA),
            }
        )
        for check, what, p in (
            ("ph", "proportional hazards (Grambsch–Therneau)", row.ph_p),
            ("lr", "log-linearity in log2(heads) (LR against per-arm ratios)", row.lr_p),
        ):
            if math.isfinite(p):
                out.append(
                    {"key": f"{check}:{key}", "finding": f"model check, d_model {row.d_model} ({label}): {what}",
                     "label": f"check: {'proportional hazards' if check == 'ph' else 'log-linearity'}, d_model {row.d_model}"
                     + ("" if row.fit == ALL_ARMS else f" ({short_fit})"),
                     "kind": "check", "estimate": _fmt_p(p), "direction": "", "p": float(p), "holds": bool(p >= ALPHA)}
                )  # fmt: skip
    shared = contrasts.groupby(["heads", "d_model"])["arm"].transform("count").gt(1) if len(contrasts) else []
    for row, twin in zip(contrasts.itertuples(), shared):
        finite = math.isfinite(row.hr)
        p = float(row.p) if finite else float(row.logrank_p)
        direction = _direction(row.hr) if finite else _separated(runs, row.arm, row.versus)
        out.append(
            {
                "key": f"contrast:{row.versus}:{row.arm}",
                "finding": f"claim 4, heads {row.heads} at d_model {row.d_model}: hazard ratio (log-rank p where "
                "the ratio is undetermined)",
                "label": f"claim 4: heads {row.heads}, d_model {row.d_model}"
                + (f", {row.arm} vs {row.versus}" if twin else ""),  # head count crossed with d_head
                "kind": "effect",
                "estimate": _ratio_text(row.hr, direction, _fmt_p(p) if finite else f"log-rank {_fmt_p(p)}"),
                "direction": direction,
                "p": p,
                "holds": bool(math.isfinite(p) and p < ALPHA),
            }
        )
    return out


def short_names(arms: list[str]) -> dict[str, str]:
    """Arm names without the prefix all share (``neox-2l-64d-1h`` -> ``64d-1h`` beside
    ``neox-2l-128d-4h``), for compact cells; a lone arm keeps its name."""
    parts = [a.split("-") for a in arms]
    shared = 0
    while len(arms) > 1 and all(len(p) > shared + 1 and p[shared] == parts[0][shared] for p in parts):
        shared += 1
    prefix = "-".join(parts[0][:shared]) + "-" if shared else ""
    return {a: a[len(prefix) :] or a for a in arms}


def _separated(runs: pd.DataFrame, arm: str, versus: str) -> str:
    """Direction of a pair whose ratio is not finite: ``"earlier"`` when every run of the pair that
    emerged was of ``arm`` among those at risk (:func:`interp.population.survival.monotone_direction`),
    ``"later"`` when every one was of ``versus``; ``""`` otherwise."""
    from interp.population.survival import monotone_direction

    pair = runs[runs["arm"].isin([arm, versus])]
    if not pair["emerged"].any():
        return ""
    sign = monotone_direction(
        pair["duration"].to_numpy(float), pair["emerged"].to_numpy(bool), (pair["arm"] == arm).to_numpy(float)
    )
    return {1: "earlier", -1: "later"}.get(sign, "")


def _ratio_text(hr: float, direction: str, p: str) -> str:
    if math.isfinite(hr):
        return f"×{hr:.2f}, {p}"
    return {"earlier": f"HR ∞ (no overlap), {p}", "later": f"HR 0 (no overlap), {p}"}.get(direction, f"HR —, {p}")


def grid_table(
    curves: pd.DataFrame, reference: str | None, statistics, thresholds=THRESHOLDS, holds=HOLDS
) -> pd.DataFrame:
    """:func:`key_findings` in every cell of the grid (:data:`GRID_COLUMNS`), from a checked
    capability table (:func:`interp.population.tables.check_curves`).

    Args:
        curves: the checked capability table; reference: the reference arm (or None).
        statistics: ``(curves, threshold, hold, reference) -> {"runs", "arms", "tests", "cox",
            "contrasts"}`` (:func:`interp.population.tables.statistics`, passed in so that this
            module does not import the one that imports it).
        thresholds, holds: the grid (fractions; checkpoints).
    """
    rows = []
    for threshold in thresholds:
        for hold in holds:
            cell = statistics(curves, threshold, hold, reference)
            for f in key_findings(cell["runs"], cell["arms"], cell["tests"], cell["cox"], cell["contrasts"]):
                rows.append(f | {"threshold": float(threshold), "hold": int(hold)})
    return pd.DataFrame(rows, columns=GRID_COLUMNS)


def _cells(rows: pd.DataFrame, all_cells: list[tuple[float, int]]):
    """The judge's cells (:class:`interp.population.judge.Cell`) of one finding over the grid: an
    effect's p and direction (+1 earlier, -1 later, 0 for a test without a direction, as the
    global test); a fact or a check as p 0 where it holds, 1 where not; a cell
    the finding is missing from as undetermined (p NaN)."""
    from interp.population.judge import Cell

    by = {(float(r.threshold), int(r.hold)): r for r in rows.itertuples()}
    out = []
    for t, h in all_cells:
        r = by.get((t, h))
        if r is None:
            out.append(Cell(t, h, math.nan, 0))
        elif r.kind == "effect":
            p = float(r.p) if r.p is not None and math.isfinite(float(r.p)) else math.nan
            out.append(Cell(t, h, p, -1 if r.direction == "later" else 1 if r.direction == "earlier" else 0))
        else:
            out.append(Cell(t, h, 0.0 if r.holds else 1.0, 1))
    return tuple(out)


def robustness(grid: pd.DataFrame) -> pd.DataFrame:
    """One row per finding of the grid: ``key``, ``finding``, ``kind``, ``cells`` (how many cells
    determine it), ``robust`` (bool: ``robust`` or ``robust null``) and ``verdict`` (words).

    The word is the judge's (:func:`interp.population.judge.robustness`, from the finding's p and
    direction in each cell): an effect is ``robust`` where every cell is significant (p <
    :data:`ALPHA`) in the same direction, a ``robust null`` where no cell is, else ``not robust``
    (the cells that break it named); a fact or a check is ``robust`` where it holds (a check: its
    assumption is not rejected) in every cell, a ``robust null`` where in none. A cell that cannot
    determine the finding makes it not robust.
    """
    from interp.population.judge import robustness as judged

    out = []
    all_cells = sorted({(float(t), int(h)) for t, h in grid[["threshold", "hold"]].itertuples(index=False)})
    for key, rows in grid.groupby("key", sort=False):
        first = rows.iloc[0]
        word, broken = judged(_cells(rows, all_cells))
        if first["kind"] == "effect":
            sig = rows[rows["holds"]]
            direction = next(iter(set(sig["direction"])), "") or "significant"
            explain = {
                "robust": f"{direction} in every cell (p < {ALPHA:g})",
                "robust null": f"not significant in any cell (p ≥ {ALPHA:g})",
            }.get(word, broken)
        else:
            yes = "holds" if first["kind"] == "fact" else "not rejected"
            no = "false" if first["kind"] == "fact" else "rejected"
            explain = {"robust": f"{yes} in every cell", "robust null": f"{no} in every cell"}.get(
                word,
                broken.replace("earlier at", f"{yes} at").replace("not significant at", f"{no} at"),
            )
        out.append(
            {"key": key, "finding": first["finding"], "kind": first["kind"], "cells": len(rows),
             "robust": word in ("robust", "robust null"), "verdict": f"{word}: {explain}"}
        )  # fmt: skip
    return pd.DataFrame(out, columns=["key", "finding", "kind", "cells", "robust", "verdict"])


def grid_cells(grid: pd.DataFrame) -> pd.DataFrame:
    """The grid as a compact table: one row per finding (its short label), one column per cell
    (``"0.4/1"``: threshold / hold) holding its estimate, then the verdict (:func:`robustness`).

    Args:
        grid: :func:`grid_table`'s long table (:data:`GRID_COLUMNS`).

    Returns:
        ``DataFrame`` with columns ``finding``, one per cell (``"—"`` where a finding has no
        estimate there), ``verdict``."""
    verdicts = robustness(grid).set_index("key")
    cells = grid[["threshold", "hold"]].drop_duplicates().sort_values(["threshold", "hold"])
    names = [f"{t:g}/{h}" for t, h in cells.itertuples(index=False)]
    rows = []
    for key, rows_ in grid.groupby("key", sort=False):
        by_cell = {f"{r.threshold:g}/{r.hold}": r.estimate for r in rows_.itertuples()}
        rows.append(
            {"finding": rows_.iloc[0]["label"], **{n: by_cell.get(n, "—") for n in names},
             "verdict": verdicts.loc[key, "verdict"]}
        )  # fmt: skip
    return pd.DataFrame(rows, columns=["finding", *names, "verdict"])
