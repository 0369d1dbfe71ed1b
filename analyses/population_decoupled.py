"""Head count with the positional code fixed (issue 52, item 1a): is the population's "more heads
emerge later" a property of heads, or of the rotary dimensions each head keeps?

In the population (``interp/data/suites/population.yaml``, docs/results.md §4) the d_model-64
arms with 1, 2, 4 and 8 heads also halve d_head (64 … 8) and, under Pythia's 25 % rotary share,
the rotary dimensions per head (16, 8, 4, 2): three factors vary together. The decoupled
population (``interp/data/suites/population-decoupled.yaml``) keeps 8 rotary dimensions in every
head (d_head still varies: GPT-NeoX ties it to d_model / n_heads), with budgets stated before
training (4000 steps; 8000 for 8 heads), evaluated on 256 prompts per checkpoint.

Two readings, from the kept curves (``docs/data/population-decoupled/curves``, beside the
population's ``docs/data/population/curves``):

- **One factor: rotary dimensions per head.** At 1, 4 and 8 heads the decoupled arm and the
  population's arm differ only in the rotary dimensions per head (same n_heads, d_head, data,
  seeds and trainer; the prompts of the evaluation differ, 256 against 64). Both are censored at
  the population's budget (4000 steps) for the contrast: emerged counts, log-rank test.
- **Head count at fixed rotary dimensions.** The decoupled arms against each other: head count
  and d_head still vary together, so that contrast is called confounded (with d_head).

Each contrast is recomputed over the rule's grid (threshold 0.4/0.5/0.6 x hold 1/2/3) and
called robust only where its direction and significance (log-rank p < 0.05) hold at every point.

Usage: ``python -m analyses.population_decoupled [--train] [--jobs N] [--update-docs]``
(``emergence results --only population_decoupled`` trains the missing runs first, arm by arm:
8 heads, then 4, 1, 2).
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analyses import description
from analyses import population as pop
from interp.population.robust import HOLDS, THRESHOLDS

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_decoupled"
SPEC = "population-decoupled"
KEPT, N_PROMPTS = pop.SPECS[SPEC]
#: The arms trained first: the one whose answer decides the artefact question (8 heads), then 4, 1, 2.
ARM_ORDER = "neox-2l-64d-8h-r8,neox-2l-64d-4h-r8,neox-2l-64d-1h-r8,neox-2l-64d-2h-r8"
#: (population arm, decoupled arm): same n_heads and d_head, rotary dimensions per head differ.
PAIRS = (
    ("neox-2l-64d-8h", "neox-2l-64d-8h-r8"),
    ("neox-2l-64d-4h", "neox-2l-64d-4h-r8"),
    ("neox-2l-64d-1h", "neox-2l-64d-1h-r8"),
)
COMMON_BUDGET = 4000

#: The rule grid (threshold x hold) every contrast is recomputed over: the population's own.
GRID = [(t, h) for t in THRESHOLDS for h in HOLDS]
BEGIN, END = "<!-- population-decoupled:begin -->", "<!-- population-decoupled:end -->"
#: docs/results.md's headline line of the one-factor contrasts, right after the population's headline.
HEADLINE = "<!-- population-decoupled-headline:begin -->", "<!-- population-decoupled-headline:end -->"


def rotary_dims(arm: str, d_head: int) -> int:
    """Rotary dimensions per head of an arm: ``-r{R}`` in its name, else Pythia's 25 % of d_head."""
    match = re.search(r"-r(\d+)$", arm)
    return int(match.group(1)) if match else int(d_head * 0.25)


def contrast(curves: pd.DataFrame, a: str, b: str, threshold: float, hold: int) -> dict:
    """Emergence of arm ``b`` against arm ``a``: runs, emerged, median E of each (steps), the
    log-rank p of equal hazards (NaN with a note when undetermined) and the hazard ratio of ``b``
    against ``a`` (``hr``, ``hr_lo``, ``hr_hi``: a Cox fit on the pair, above 1 = ``b`` emerges
    earlier; NaN with ``hr_note`` when undetermined, as when one arm has no event).

    Source: Cox 1972 with Efron ties (:func:`interp.population.survival.cox_fit`), the log-rank test
    (:func:`interp.population.survival.logrank_tests`)."""
    from interp.core.settings import StudyConfig
    from interp.population.survival import cox_fit, monotone_direction
    from interp.population.tables import population_from_curves

    config = StudyConfig(threshold=threshold, hold=hold)
    result = population_from_curves(curves[curves["arm"].isin([a, b])], config, reference=a, grid=False)
    arms = result.arms.set_index("arm")
    test = result.tests[result.tests["test"] == "vs reference"].iloc[0]
    duration, emerged = result.runs["duration"].to_numpy(float), result.runs["emerged"].to_numpy(bool)
    x = (result.runs["arm"] == b).to_numpy(float)
    fit, _ = cox_fit(duration, emerged, x, "arm")
    apart = monotone_direction(duration, emerged, x) if fit["note"] else 0
    hr_note = (
        f"while both arms had runs at risk every run that emerged was of {b if apart > 0 else a}: the partial "
        "likelihood has no maximum, the hazard ratio is not estimable"
        if apart
        else str(fit["note"])
    )
    return {
        "arm_a": a,
        "arm_b": b,
        "threshold": threshold,
        "hold": hold,
        "n_a": int(arms.loc[a, "n_runs"]),
        "emerged_a": int(arms.loc[a, "n_emerged"]),
        "n_b": int(arms.loc[b, "n_runs"]),
        "emerged_b": int(arms.loc[b, "n_emerged"]),
        "median_a": float(arms.loc[a, "median_E"]),
        "median_b": float(arms.loc[b, "median_E"]),
        "p": float(test["p"]),
        "note": str(test["note"]),
        "hr": float(fit["hr"]),
        "hr_lo": float(fit["hr_lo"]),
        "hr_hi": float(fit["hr_hi"]),
        "hr_note": hr_note,
    }


def best_accuracy(curves: pd.DataFrame, a: str, b: str) -> dict:
    """Each run's best greedy accuracy (a fraction) in arms ``a`` and ``b``: range, median, how many
    of ``b``'s runs exceed every run of ``a``, and the two-sided Mann–Whitney U p (scipy) of equal
    distributions. A statement that needs no threshold or hold."""
    from scipy.stats import mannwhitneyu

    best = curves.groupby(["arm", "run"])["accuracy"].max()
    xa, xb = best.loc[a].to_numpy(), best.loc[b].to_numpy()
    return {
        "n_a": len(xa),
        "n_b": len(xb),
        "lo_a": float(xa.min()),
        "hi_a": float(xa.max()),
        "med_a": float(np.median(xa)),
        "lo_b": float(xb.min()),
        "hi_b": float(xb.max()),
        "med_b": float(np.median(xb)),
        "above": int((xb > xa.max()).sum()),
        "p": float(mannwhitneyu(xb, xa, alternative="two-sided").pvalue),
    }


def direction(row: dict) -> int:
    """+1: arm b emerges more (share emerged higher), -1: less, 0: the same share."""
    share_a, share_b = row["emerged_a"] / row["n_a"], row["emerged_b"] / row["n_b"]
    return (share_b > share_a) - (share_b < share_a)


def grid_table(curves: pd.DataFrame, pairs) -> pd.DataFrame:
    """Every contrast of ``pairs`` at every (threshold, hold) of :data:`GRID`."""
    return pd.DataFrame([contrast(curves, a, b, t, h) for a, b in pairs for t, h in GRID])


def robust(rows: pd.DataFrame) -> bool:
    """Direction and significance (p < 0.05) the same at every grid point."""
    dirs = {direction(r) for r in rows.to_dict("records")}
    sig = {bool(r["p"] < 0.05) for r in rows.to_dict("records") if not math.isnan(r["p"])}
    return len(dirs) == 1 and len(sig) == 1 and not rows["p"].isna().any()


def grid_word(rows: pd.DataFrame) -> str:
    """How a contrast fares over the rule grid, in words."""
    if not robust(rows):
        return f"NOT robust: direction or significance changes over the {len(rows)} points of the rule grid"
    if bool((rows["p"] < 0.05).all()):
        return f"robust: the same direction with p < 0.05 at all {len(rows)} points of the rule grid"
    return f"no difference at any of the {len(rows)} points of the rule grid"


def steps_text(e: float) -> str:
    """A median E in steps as text, ``"1300 steps"``; NaN (the median is never reached) -> "not reached"."""
    return "not reached" if math.isnan(e) else f"{e:.0f} steps"


def p_text(p: float) -> str:
    """A p-value as text with its size kept: ``"1.0e-05"`` below 0.001, else ``"0.011"``; NaN -> "undetermined"."""
    return "undetermined" if math.isnan(p) else (f"{p:.1e}" if p < 1e-3 else f"{p:.3f}")


def headline_line(dec: pd.DataFrame, popc: pd.DataFrame, n_seeds: int) -> str | None:
    """docs/results.md's headline line for the one-factor contrasts (rotary dimensions per head),
    computed from the kept curves: for each pair of :data:`PAIRS` whose decoupled arm holds all
    ``n_seeds`` seeds, both arms cut at :data:`COMMON_BUDGET` steps: emerged counts with the log-rank
    p at the operating point and whether that holds over the rule grid, then each run's best
    accuracy (no rule: Mann–Whitney U). ``None`` while no decoupled arm of a pair is complete.

    Then how many pairs have the arm with more rotary dimensions emerge first (the earlier median
    E, a median not reached counting as later than any step; at equal medians, more runs emerged)
    and how many are robust over the grid. The closing reading is the pair of the population's
    largest head count (8: one rotary frequency per head), once that pair is in: where every run
    with 8 rotary dimensions has a higher best accuracy than every run with 2 (and p < 0.05), part
    of the 8-head cliff is the positional code's; otherwise the one-factor contrast does not show it."""
    if not len(dec) or not len(popc):
        return None
    both = pd.concat([pop.at_budget(popc, COMMON_BUDGET), pop.at_budget(dec, COMMON_BUDGET)], ignore_index=True)
    complete = {arm for arm, runs in dec.groupby("arm")["run"].nunique().items() if runs >= n_seeds}
    pairs = [(a, b) for a, b in PAIRS if b in complete and a in set(popc["arm"])]
    if not pairs:
        return None
    most = max(int(popc.loc[popc["arm"] == a, "n_heads"].iloc[0]) for a, _ in PAIRS if a in set(popc["arm"]))
    parts, cliff, faster, firm = [], None, 0, 0
    for a, b in pairs:
        rows = grid_table(both, [(a, b)])
        main = rows[(rows["threshold"] == pop.THRESHOLD) & (rows["hold"] == pop.HOLD)].iloc[0]
        best = best_accuracy(both, a, b)
        first = both[both["arm"] == a].iloc[0]
        n_heads, d_head = int(first["n_heads"]), int(first["d_head"])
        ra, rb = rotary_dims(a, d_head), rotary_dims(b, d_head)
        if best["p"] < 0.05:
            effect = f"{rb} rotary dims reach " + (
                "higher accuracy"
                if best["med_b"] > best["med_a"]
                else f"lower accuracy (though the {pop.N_PROMPTS}-prompt arm's maximum is the one biased upward)"
            )
        else:
            effect = "no difference in best accuracy"
        over = "robust over the grid of rules" if robust(rows) else "not robust over the grid of rules"
        # the arm with more rotary dims per head emerged first: the earlier median E (not reached
        # counts as later than any step), else, at equal medians, more runs emerged
        e_more, e_less = (main["median_b"], main["median_a"]) if rb > ra else (main["median_a"], main["median_b"])
        n_more, n_less = (main["emerged_b"], main["emerged_a"]) if rb > ra else (main["emerged_a"], main["emerged_b"])
        e_more, e_less = (math.inf if math.isnan(e) else e for e in (e_more, e_less))
        faster += e_more < e_less or (e_more == e_less and n_more > n_less)
        firm += robust(rows) and bool((rows["p"] < 0.05).all())
        parts.append(
            f"{n_heads} head{'s' if n_heads > 1 else ''} (d_head {d_head}), {rb} rotary dims against {ra}: emerged by "
            f"{COMMON_BUDGET} in {main['emerged_b']}/{main['n_b']} against {main['emerged_a']}/{main['n_a']}, median E "
            f"{steps_text(main['median_b'])} against {steps_text(main['median_a'])} (log-rank p "
            f"{p_text(main['p'])} at threshold {pop.THRESHOLD}, hold {pop.HOLD}; {over}); best accuracy median "
            f"{best['med_b']:.2f} against {best['med_a']:.2f}, {best['above']} of {best['n_b']} runs above every run "
            f"with {ra} (Mann–Whitney p {p_text(best['p'])}): {effect}"
        )
        if n_heads == most:
            separated = best["p"] < 0.05 and best["above"] == best["n_b"]
            cliff = (
                f"part of the population's {n_heads}-head cliff is its positional code ({ra} rotary dims per head: "
                f'{ra // 2} rotation frequenc{"y" if ra // 2 == 1 else "ies"}), so that arm\'s "never" does not '
                "measure the head count alone"
                if separated
                else f"this contrast does not show the population's {n_heads}-head arm held back by its positional code"
            )
    head = (
        "- **Rotary dimensions per head, one factor** (the decoupled arms against the population's: same n_heads, "
        f"d_head, seeds and data, both cut at {COMMON_BUDGET} steps; evaluation prompts {N_PROMPTS} against "
        f"{pop.N_PROMPTS}): "
    )
    overall = (
        f"More rotary dimensions per head emerged first (earlier median E, or more runs emerged) in {faster} of "
        f"{len(pairs)} pair{'s' if len(pairs) > 1 else ''} at threshold {pop.THRESHOLD}, hold {pop.HOLD}; "
        f"{firm} of {len(pairs)} robust over the grid of rules"
    )
    return head + "; ".join(parts) + f". {overall}" + (f". Reading: {cliff}." if cliff else ".")


def docs_block(dec: pd.DataFrame, popc: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's block of the decoupled population, computed from the kept curves."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves

    n_runs = dec["run"].nunique() if len(dec) else 0
    lines = [
        (
            f"Runs evaluated: {n_runs} of the spec's {n_planned} "
            f"({'all' if n_runs == n_planned else 'the rest not trained yet'}; {N_PROMPTS} prompts per checkpoint; "
            f"point of emergence at accuracy {pop.THRESHOLD} held {pop.HOLD})."
        ),
        "",
    ]
    if n_runs:
        result = population_from_curves(dec, StudyConfig(threshold=pop.THRESHOLD, hold=pop.HOLD))
        lines += [
            (
                "| arm | n_heads | d_head | rotary dims per head | budget | runs | emerged | median E (95 % CI), steps "
                "| also varies with n_heads |"
            ),
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in result.arms.itertuples():
            lines.append(
                f"| {row.arm} | {row.n_heads} | {row.d_head} | {rotary_dims(row.arm, row.d_head)} | {row.budget} | "
                f"{row.n_runs} | {row.n_emerged} | {pop.median_text(row)} | d_head |"
            )
        lines.append("")
    both = pd.concat([pop.at_budget(popc, COMMON_BUDGET), pop.at_budget(dec, COMMON_BUDGET)], ignore_index=True)
    pairs = [(a, b) for a, b in PAIRS if a in set(both["arm"]) and b in set(both["arm"])]
    if pairs:
        grid = grid_table(both, pairs)
        lines.append(
            f"One factor, the rotary dimensions per head (same n_heads, d_head, seeds and data; both censored at "
            f"{COMMON_BUDGET} steps; evaluation prompts {N_PROMPTS} against {pop.N_PROMPTS}, in the order of each line):"
        )
        lines.append("")
        for a, b in pairs:
            rows = grid[(grid["arm_a"] == a) & (grid["arm_b"] == b)]
            main = rows[(rows["threshold"] == pop.THRESHOLD) & (rows["hold"] == pop.HOLD)].iloc[0]
            ps = rows["p"].dropna()
            span = f"p {p_text(ps.min())}–{p_text(ps.max())} over the grid" if len(ps) else "p undetermined"
            lines.append(
                f"- {b} ({rotary_dims(b, 0)} rotary dims) against {a} "
                f"({rotary_dims(a, int(popc.loc[popc['arm'] == a, 'd_head'].iloc[0]))}): emerged by {COMMON_BUDGET} in "
                f"{main['emerged_b']}/{main['n_b']} against {main['emerged_a']}/{main['n_a']} runs, log-rank p "
                f"{p_text(main['p'])} at threshold {pop.THRESHOLD}, hold {pop.HOLD}; {span}; "
                f"{grid_word(rows)}."
            )
        lines.append("")
        lines.append(
            f"Without the rule (no threshold, no hold): each run's best greedy accuracy over its checkpoints up to "
            f"{COMMON_BUDGET} steps, and a two-sided Mann–Whitney U test of the two arms' best accuracies (the "
            f"64-prompt arm's maximum is the noisier one, which favours it):"
        )
        lines.append("")
        for a, b in pairs:
            best = best_accuracy(both, a, b)
            lines.append(
                f"- {b} against {a}: best accuracy {best['lo_b']:.2f}–{best['hi_b']:.2f} (median {best['med_b']:.2f}, "
                f"{best['n_b']} runs) against {best['lo_a']:.2f}–{best['hi_a']:.2f} (median {best['med_a']:.2f}, "
                f"{best['n_a']} runs); {best['above']} of {best['n_b']} runs above every run of {a}; Mann–Whitney "
                f"p {p_text(best['p'])}."
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog="python -m analyses.population_decoupled", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--jobs", type=int, default=None, help="training worker processes (default: the CPU count)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored: the runs live in the suite's cache)")
    parser.add_argument("--finished-only", action="store_true", help="the kept curves only; train nothing")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's decoupled block")
    args = parser.parse_args(argv)
    if not args.finished_only:
        jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
        pop.main(["--spec", SPEC, "--arms", ARM_ORDER, "--out", str(args.out / "arms"), *jobs])
    dec, popc = pop.read_kept_curves(KEPT), pop.read_kept_curves(pop.KEPT)
    block = docs_block(dec, popc, len(load_suite_spec(SPEC).run_names()))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.md").write_text(block)
    print(block)
    if args.update_docs:
        pop.update_docs(block, (BEGIN, END))
        line = headline_line(dec, popc, len(load_suite_spec(SPEC).seeds))
        pop.update_docs(
            (
                line
                or f"- The one-factor contrast of the rotary dimensions per head joins here once a decoupled arm is "
                f"complete ({NAME})."
            )
            + "\n",
            HEADLINE,
        )


if __name__ == "__main__":
    main()
