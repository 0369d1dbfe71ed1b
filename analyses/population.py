"""The population of seeds (issue 44): 24 seeds in each of five arms, trained, scanned and summed
up as survival statistics over seeds.

Spec: ``interp/data/suites/population.yaml`` (``emergence train-suite population --dry-run``
lists its 120 runs): 2-layer GPT-NeoX models on the embedded suite's data, d_model 64 with
n_heads ∈ {1, 2, 4, 8} (d_head 64 … 8) and d_model 128 with 4 heads; budgets of 4000 steps
(d_model 64) and 3000 steps (d_model 128), stated before training: a seed not emerged by its
arm's last checkpoint is censored there.

Each run is a unit: train it (the pinned pool, resumable), then evaluate the capability at every
checkpoint (the repetition task, 64 prompts, as ``emergence demo``) and keep that curve in
``docs/data/population/curves/<run>.csv`` (:data:`interp.population.kept.POPULATION_KEPT`). A kept curve is never recomputed, so a
fresh clone with the kept curves resumes where the last session stopped: only the runs without a
curve are trained. Runs are trained in blocks of seeds (every arm's seeds 0-1, then 2-3, …), so
that a stopped entry leaves every arm with about as many seeds.

The statistics (:func:`interp.population.population_from_curves`: point of emergence per run from
the full scan, threshold 0.5 held for 2 checkpoints as ``emergence demo``; Kaplan–Meier per arm,
median E with its interval, the share never emerged, log-rank against the 4-head d_model-64 arm,
the hazard ratio per doubling of heads) are computed over the kept curves and written to
``OUT`` (tables, ``population.html``); ``--update-docs`` rewrites docs/results.md's population block.

Usage: ``python -m analyses.population [--spec SPEC] [--arms A,B] [--seeds 0-11] [--out DIR] [--jobs N]
[--seeds-per-block K] [--finished-only] [--train-only] [--update-docs]``; ``emergence results --only
population`` runs it. ``--seeds`` trains a part of each arm, so that two processes (or machines)
with disjoint seeds share an arm; the curves land in the same folder either way.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.kept import (
    SPECS,
    curve_columns,
    keep_spec,
    read_kept_curves,
    read_kept_mechanism,
    selected_seeds,
    update_docs,
)
from interp.population.reading import at_budget, population_block, summarise

ROOT = Path(__file__).resolve().parents[1]
NAME = "population"
BEGIN, END = "<!-- population:begin -->", "<!-- population:end -->"
#: The headline at the top of docs/results.md: the paper's claims 1 and 4 as population statistics.
HEADLINE = "<!-- population-headline:begin -->", "<!-- population-headline:end -->"


def decoupled_status() -> tuple[int, int]:
    """``(kept, planned)`` runs of the decoupled arms (``population-decoupled``: rotary dimensions
    per head fixed at 8), read from their kept curves."""
    from interp.sources.catalogue import load_suite_spec

    kept, _ = SPECS["population-decoupled"]
    curves = read_kept_curves(kept) if (kept / "curves").is_dir() else pd.DataFrame(columns=curve_columns())
    return (curves["run"].nunique() if len(curves) else 0), len(load_suite_spec("population-decoupled").run_names())


def headline_block(result, n_planned: int, decoupled: tuple[int, int] | None = None, decoupled_result=None) -> str:
    """docs/results.md's headline: the paper's claims 1 and 4 answered by the population
    (``result.claims``: :func:`interp.population.statistics.claim_results`), computed from ``result``'s
    tables; then, while the decoupled arms (``decoupled`` = runs kept, planned) are not complete,
    the plain statement that claim 4's contrast is confounded; once they are, their own claim
    lines, 1 and 4 (``decoupled_result``: their :class:`~interp.population.tables.PopulationResult`)."""
    head = (
        f"**The population of seeds** (section 4; {len(result.runs)} of {n_planned} runs evaluated, "
        f"{result.arms['n_emerged'].sum()} emerged). The paper's claims 1 and 4 as statistics over seeds, each "
        f"with the judge's word at the operating point (threshold {result.threshold:g}, hold "
        f'{result.hold}) and over the grid of rules (docs/population.md, "The judge"; section 4):'
    )
    lines = [head, ""] + [f"- {line}" for line in result.claims]
    confounded = result.cox[result.cox["also_varies"].fillna("").astype(str) != ""]
    if decoupled is not None and decoupled[0] < decoupled[1] and len(confounded):
        row = confounded.iloc[0]
        group = result.arms[result.arms["d_model"] == row.d_model]
        most = group.loc[group["n_heads"].idxmax()]
        frequencies = int(most["rotary_dims"]) // 2
        lines.append(
            f"- **Claim 4's contrast is confounded.** At d_model {row.d_model} the head count moves with "
            f"{row.also_varies}: the {most['n_heads']}-head arm has {frequencies} rotary "
            f"frequenc{'y' if frequencies == 1 else 'ies'} per head. "
            f"The decoupled arms (rotary dims per head fixed at 8, `population-decoupled`) have {decoupled[0]} of "
            f"{decoupled[1]} runs kept; until they are complete, nothing here separates the head count from the "
            "positional code, and the contradiction of claim 4 is not a finding about heads."
        )
    if decoupled_result is not None:
        lines += [
            f"- Decoupled arms (rotary dims per head fixed at 8, `population-decoupled`, {len(decoupled_result.runs)} "
            f"runs): {line}"
            for line in decoupled_result.claims
        ]
    return "\n".join(lines) + "\n"


#: docs/results.md's block of the 8-head continuation (issue 52, item 2: is "never" the budget?).
LONG_MARKERS = ("<!-- population-8h-long:begin -->", "<!-- population-8h-long:end -->")
#: The steps at which the continuation is read: the population's budget, twice and three times it.
LONG_CUTS = (4000, 8000, 12000)


def long_summary(curves: pd.DataFrame) -> dict:
    """The 8-head continuation read from its kept curves (one or more runs): per cut of
    :data:`LONG_CUTS` a row (``cut``, ``runs``, ``emerged``, ``share``, ``lo``, ``hi``: the 95 %
    Wilson interval, ``E``: the emerged runs' E in steps, ``best``: each run's best greedy accuracy
    by then) at threshold :data:`THRESHOLD`, hold :data:`HOLD` (a crossing with no room left to
    hold is censored); ``grid``: runs emerged by the last cut per cell ``"threshold/hold"`` of the
    rule grid; ``verdict``: the judge's verdict on claim 1's "never" over the continuation
    (:func:`interp.population.verdicts.claim_verdicts`, label ``"Claim 1, never"``: ``ceiling``
    where the runs that never emerged level off just under the threshold)."""
    from interp.core.settings import StudyConfig
    from interp.population.robust import HOLDS, THRESHOLDS
    from interp.population.survival import share_interval
    from interp.population.tables import population_from_curves
    from interp.population.verdicts import claim_verdicts

    rows = []
    for cut in LONG_CUTS:
        part = at_budget(curves, cut)
        runs = population_from_curves(part, StudyConfig(threshold=THRESHOLD, hold=HOLD), grid=False).runs
        k = int(runs["emerged"].sum())
        share, lo, hi = share_interval(k, len(runs))
        rows.append(
            dict(
                cut=cut,
                runs=len(runs),
                emerged=k,
                share=share,
                lo=lo,
                hi=hi,
                E=runs.loc[runs["emerged"], "E"],
                best=part.groupby("run")["accuracy"].max(),
            )
        )
    grid = {}
    for threshold, hold in ((t, h) for t in THRESHOLDS for h in HOLDS):
        runs = population_from_curves(curves, StudyConfig(threshold=threshold, hold=hold), grid=False).runs
        grid[f"{threshold}/{hold}"] = int(runs["emerged"].sum())
    result = population_from_curves(curves, StudyConfig(threshold=THRESHOLD, hold=HOLD), grid=False)
    (verdict,) = [v for v in claim_verdicts(result) if v.label == "Claim 1, never"]
    return dict(rows=rows, grid=grid, verdict=verdict)


def _long_numbers(summary: dict) -> str:
    """The continuation's numbers at the operating point in words (no verdict word): runs emerged
    by the last cut with the share's Wilson interval and their E, and the runs' best accuracy by
    the first and the last cut."""
    last, first = summary["rows"][-1], summary["rows"][0]
    n, k, lo, hi, e = last["runs"], last["emerged"], last["lo"], last["hi"], last["E"]
    at = f" at E {e.min():.0f}–{e.max():.0f}" if k > 1 else f" at E {e.min():.0f}" if k else ""
    touched = int((last["best"] >= THRESHOLD).sum()) - k
    return (
        f"{k} of {n} plain runs emerged by {LONG_CUTS[-1]} (95 % Wilson {lo:.2f}–{hi:.2f}){at}; their best accuracy, "
        f"median {first['best'].median():.2f} by {LONG_CUTS[0]}, is {last['best'].median():.2f} by {LONG_CUTS[-1]}, "
        f"and {touched} more reach accuracy {THRESHOLD} at some checkpoint without holding it for {HOLD}"
    )


def long_block(curves: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's block of the 8-head continuation (``population-8h-long``: the population's
    8-head arm trained on to 12000 steps), from its kept curves (:func:`long_summary`): per cut of
    :data:`LONG_CUTS`, the runs emerged by then with the share's 95 % Wilson interval, their E
    (steps) and each run's best greedy accuracy by then (a fraction, no rule); the runs emerged by
    12000 over the rule grid; then the judge's verdict on claim 1's "never" over the continuation
    (:func:`interp.population.verdicts.claim_line`: its word, robustness over the rule grid and
    what would decide it) and the numbers behind it."""
    from interp.population.verdicts import claim_line

    n_runs = curves["run"].nunique() if len(curves) else 0
    done = "all" if n_runs == n_planned else "the rest not trained yet" if n_runs else "none trained yet"
    lines = [
        (
            f"Runs evaluated: {n_runs} of the spec's {n_planned} ({done}; "
            f"{SPECS['population-8h-long'][1]} prompts per checkpoint; budget {LONG_CUTS[-1]} steps, 3 × the population's; "
            f"point of emergence at accuracy {THRESHOLD} held {HOLD})."
        ),
        "",
    ]
    if not n_runs:
        return "\n".join(lines) + "\n"
    summary = long_summary(curves)
    lines += [
        "| by step | runs | emerged | share (95 % Wilson) | E min–max (median), steps | best accuracy min–max (median) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in summary["rows"]:
        e, best = row["E"], row["best"]
        e_text = "—" if not len(e) else f"{e.min():.0f}–{e.max():.0f} ({e.median():.0f})"
        lines.append(
            f"| {row['cut']} | {row['runs']} | {row['emerged']} | {row['share']:.2f} ({row['lo']:.2f}–{row['hi']:.2f}) | "
            f"{e_text} | {best.min():.2f}–{best.max():.2f} ({best.median():.2f}) |"
        )
    grid = ", ".join(f"{cell}: {k}" for cell, k in summary["grid"].items())
    lines += ["", f"Emerged by {LONG_CUTS[-1]} over the rule grid (threshold/hold: runs): {grid}.", ""]
    lines.append(f"- {claim_line(summary['verdict'], f'at threshold {THRESHOLD}, hold {HOLD}')}")
    lines.append(f"- The numbers at threshold {THRESHOLD}, hold {HOLD}: {_long_numbers(summary)}.")
    return "\n".join(lines) + "\n"


#: docs/results.md's headline line of the continuation (under the population's headline).
LONG_HEADLINE = ("<!-- population-8h-long-headline:begin -->", "<!-- population-8h-long-headline:end -->")


def long_headline(curves: pd.DataFrame, n_planned: int) -> str:
    """The continuation's line in docs/results.md's headline: claim 1's "never" tested past the
    budget, the judge's verdict (:func:`long_summary`'s ``verdict``, worded by
    :func:`interp.population.verdicts.claim_line` beside the paper's statement) and the numbers
    behind it; empty while no run is kept."""
    from interp.population.verdicts import claim_line

    n_runs = curves["run"].nunique() if len(curves) else 0
    if not n_runs:
        return ""
    summary = long_summary(curves)
    so_far = "" if n_runs == n_planned else f"; {n_planned - n_runs} runs not trained yet, so not a finding"
    return (
        f'- **Claim 1, "never", past the budget** (`population-8h-long`: the population\'s 8-head seeds, same '
        f"initialisation and data order, trained on to {LONG_CUTS[-1]} steps = 3 × its budget; {n_runs} of "
        f"{n_planned} runs{so_far}): {claim_line(summary['verdict'], f'at threshold {THRESHOLD}, hold {HOLD}')} "
        f"The numbers: {_long_numbers(summary)}.\n"
    )


def main(argv=None) -> None:
    """Train and keep the runs of ``--spec`` not kept yet, then their statistics (module docstring)."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import default_reference, population_from_curves
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog="python -m analyses.population", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="training worker processes (default: the CPU count; 0: evaluate the runs already trained, train none)",
    )
    parser.add_argument("--seeds-per-block", type=int, default=2)
    parser.add_argument(
        "--seeds",
        default="",
        help="train only these seeds of each arm: a-b ranges or a list, e.g. 0-11 (default: all; two processes "
        "with disjoint seeds can share an arm)",
    )
    parser.add_argument(
        "--spec",
        choices=sorted(SPECS),
        default="population",
        help="which population: the shipped suite spec; its curves are kept in docs/data/<spec>/",
    )
    parser.add_argument(
        "--arms", default="", help="comma-separated size names to train, in this order, arm by arm (default: all)"
    )
    parser.add_argument("--finished-only", action="store_true", help="statistics of the kept curves; train nothing")
    parser.add_argument("--train-only", action="store_true", help="train the runs; evaluate nothing")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's population block")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored: the runs live in the suite's cache)")
    args = parser.parse_args(argv)
    if args.seeds_per_block < 1:
        raise SystemExit(f"error: --seeds-per-block={args.seeds_per_block} must be >= 1")
    arms = tuple(a for a in args.arms.split(",") if a)
    try:
        seeds = selected_seeds(load_suite_spec(args.spec), args.spec, args.seeds, arms)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    cfg, curves = keep_spec(
        args.spec, args.jobs, args.seeds_per_block, seeds, arms, args.finished_only, args.train_only
    )
    n_runs = curves["run"].nunique() if len(curves) else 0
    if args.update_docs and args.spec == "population-8h-long" and not args.train_only:
        update_docs(long_block(curves, len(cfg.run_names())), LONG_MARKERS)
        update_docs(long_headline(curves, len(cfg.run_names())), LONG_HEADLINE)
    if n_runs == 0 or args.train_only:
        return
    # claim 2 over the population's seeds (issue 53), as far as it is measured
    mechanism = read_kept_mechanism()[0] if args.spec == "population" else None
    result = summarise(curves, args.out, mechanism)
    if args.update_docs and args.spec not in ("population", "population-8h-long"):
        print(f"note: --update-docs rewrites the population's blocks only; {args.spec}'s are written by its own entry")
    elif args.update_docs and args.spec == "population":  # the continuation wrote its own block above
        update_docs(
            population_block(
                result, len(cfg.run_names()), "the rest not trained yet" if n_runs < len(cfg.run_names()) else "all"
            ),
            (BEGIN, END),
        )
        kept_runs, planned = decoupled_status()
        decoupled = None
        if kept_runs and kept_runs == planned:  # complete: its own claim lines join the headline
            curves_d = read_kept_curves(SPECS["population-decoupled"][0])
            decoupled = population_from_curves(
                curves_d,
                StudyConfig(threshold=THRESHOLD, hold=HOLD),
                reference=default_reference(curves_d["arm"].unique()),
            )
        update_docs(headline_block(result, len(cfg.run_names()), (kept_runs, planned), decoupled), HEADLINE)


if __name__ == "__main__":
    main()
