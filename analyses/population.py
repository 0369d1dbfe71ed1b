"""The population of seeds (issue 44): 24 seeds in each of five arms, trained, scanned and summed
up as survival statistics over seeds.

Spec: ``interp/data/suites/population.yaml`` (``emergence train-suite population --dry-run``
lists its 120 runs): 2-layer GPT-NeoX models on the embedded suite's data, d_model 64 with
n_heads ∈ {1, 2, 4, 8} (d_head 64 … 8) and d_model 128 with 4 heads; budgets of 4000 steps
(d_model 64) and 3000 steps (d_model 128), stated before training: a seed not emerged by its
arm's last checkpoint is censored there.

Each run is a unit: train it (the pinned pool, resumable), then evaluate the capability at every
checkpoint (the repetition task, 64 prompts, as ``emergence demo``) and keep that curve in
``docs/data/population/curves/<run>.csv`` (:data:`KEPT`). A kept curve is never recomputed, so a
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
import math
import re
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from interp.cli.options import description

ROOT = Path(__file__).resolve().parents[1]
NAME = "population"
#: Where the evaluated curves are kept (committed): one CSV per run.
KEPT = ROOT / "docs" / "data" / "population"
#: The task and prompts of each checkpoint's evaluation (those of ``emergence demo``).
N_PROMPTS = 64
TASK_SEED = 0
#: The point of emergence's rule (``emergence demo``'s) and the arm the others are compared with.
THRESHOLD, HOLD, REFERENCE = 0.5, 2, "neox-2l-64d-4h"  # = interp.population.tables.SPEC_REFERENCES["population"]
DOCS = ROOT / "docs" / "results.md"
#: The populations this entry trains: shipped suite spec -> (folder of its kept curves, prompts
#: per checkpoint). ``population-decoupled`` (issue 52) holds the rotary dimensions per head fixed;
#: ``population-heads-dhead`` (issue 52, item 1b) crosses {4, 8 heads} with {d_head 8, 16} (Phi models).
SPECS = {
    "population": (KEPT, N_PROMPTS),
    "population-decoupled": (ROOT / "docs" / "data" / "population-decoupled", 256),
    "population-8h-long": (ROOT / "docs" / "data" / "population-8h-long", 256),
    "population-heads-dhead": (ROOT / "docs" / "data" / "population-heads-dhead", 256),
}
BEGIN, END = "<!-- population:begin -->", "<!-- population:end -->"
#: The headline at the top of docs/results.md: the paper's claims 1 and 4 as population statistics.
HEADLINE = "<!-- population-headline:begin -->", "<!-- population-headline:end -->"


def curve_columns() -> list[str]:
    """Columns of a kept curve: one row per checkpoint of one run."""
    return ["arm", "run", "seed", "n_layers", "d_model", "n_heads", "d_head", "budget", "step", "accuracy", "p_answer"]


def evaluate_run(folder: Path, cfg, size, seed: int, n_prompts: int = N_PROMPTS) -> pd.DataFrame:
    """Capability at every checkpoint of one trained run: greedy accuracy and mean p(answer)
    (probability) on the repetition task (:class:`interp.tasks.RepetitionTask`, ``n_prompts``
    prompts, seed ``TASK_SEED``), one row per step (:data:`curve_columns`)."""
    from interp.emergence import full_scan
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    source = LocalSuiteSource(folder)
    try:
        batch = RepetitionTask(n_prompts=n_prompts, seed=TASK_SEED).build(source.tokenizer())
        table = full_scan(source, batch)
    finally:
        source.close()
    out = table[["step", "accuracy", "p_answer"]].copy()
    out.insert(0, "budget", cfg.steps_for(size))
    for i, (key, value) in enumerate(
        [
            ("arm", size.name),
            ("run", folder.name),
            ("seed", seed),
            ("n_layers", size.n_layers),
            ("d_model", size.d_model),
            ("n_heads", size.n_heads),
            ("d_head", size.d_head),
        ]
    ):
        out.insert(i, key, value)
    return out[curve_columns()]


def kept_curve(run: str, kept: Path = KEPT) -> Path:
    """The kept curve file of one run."""
    return kept / "curves" / f"{run}.csv"


def whole_curve(curve: pd.DataFrame) -> bool:
    """Whether a kept curve is whole: rows, no missing value in its columns, and its last
    checkpoint at the run's budget (a file cut short fails one of these)."""
    return (
        not curve.empty
        and bool(curve.notna().all().all())
        and float(curve["step"].max()) == float(curve["budget"].iloc[0])
    )


def read_kept_curves(kept: Path = KEPT, columns: list[str] | None = None) -> pd.DataFrame:
    """Every kept curve as one table (``columns``, default :func:`curve_columns`); an unreadable
    file, or one with other columns, is named and left out (it is redone by the next run of the
    entry, which removes it)."""
    from interp.core.io import read_kept_csv

    columns = curve_columns() if columns is None else columns
    frames = [
        read_kept_csv(path, columns, whole_curve, "is not a whole curve", "its run is evaluated again")
        for path in sorted((kept / "curves").glob("*.csv"))
    ]
    frames = [f for f in frames if f is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)


def blocks(cfg, seeds_per_block: int) -> list[list[tuple]]:
    """The runs as blocks of seeds: every arm's first ``seeds_per_block`` seeds, then the next ones."""
    seeds = list(cfg.seeds)
    return [
        [(size, seed) for seed in seeds[i : i + seeds_per_block] for size in cfg.sizes]
        for i in range(0, len(seeds), seeds_per_block)
    ]


def parse_seeds(text: str, valid: tuple[int, ...]) -> list[int]:
    """``"0-11"`` or ``"0,3,5-7"`` -> the seeds, in order, each once.

    Raises:
        ValueError: an item that is not a seed or ``a-b`` range of ``valid``, one line.
    """
    seeds: list[int] = []
    for item in filter(None, (v.strip() for v in text.split(","))):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
        if not match:
            seeds = []
            break
        lo, hi = int(match[1]), int(match[2] or match[1])
        if hi < lo or any(s not in valid for s in range(lo, hi + 1)):
            seeds = []
            break
        seeds += [s for s in range(lo, hi + 1) if s not in seeds]
    if not seeds:
        raise ValueError(f"--seeds {text!r} must be seeds or a-b ranges of {min(valid)}-{max(valid)}, e.g. 0-11")
    return seeds


def train_and_keep(
    cfg,
    jobs: int | None,
    seeds_per_block: int,
    kept: Path = KEPT,
    train_only: bool = False,
    n_prompts: int = N_PROMPTS,
    arms: tuple[str, ...] = (),
) -> int:
    """Train and evaluate every run whose curve is not kept, block by block; returns how many
    curves were added. ``jobs=0``: evaluate the runs the cache already holds, train none.
    ``arms``: only these sizes (names), in this order, each arm's seeds before the next arm's
    (default: every size, blocks of seeds across the arms)."""
    from interp.core.io import atomic_to_csv
    from interp.sources.catalogue import run_name
    from interp.sources.embedded import iter_suite

    read_kept_curves(kept)  # removes damaged files first, so that their runs are redone
    added = 0
    if jobs == 0:  # evaluate the runs already trained in the cache; train nothing
        from interp.sources.catalogue import suite_dir

        for size in cfg.sizes:
            for seed in cfg.seeds:
                run = run_name(size, seed)
                folder = suite_dir(cfg) / run
                if (folder / "suite.json").is_file() and not kept_curve(run, kept).is_file():
                    kept_curve(run, kept).parent.mkdir(parents=True, exist_ok=True)
                    atomic_to_csv(evaluate_run(folder, cfg, size, seed, n_prompts), kept_curve(run, kept))
                    added += 1
                    print(f"{run}: kept its curve", flush=True)
        return added
    by_name = {size.name: size for size in cfg.sizes}
    order = (
        [
            [(by_name[a], seed) for seed in cfg.seeds[i : i + seeds_per_block]]
            for a in arms
            for i in range(0, len(cfg.seeds), seeds_per_block)
        ]
        if arms
        else blocks(cfg, seeds_per_block)
    )
    for block in order:
        todo = {
            run_name(size, seed): (size, seed)
            for size, seed in block
            if not kept_curve(run_name(size, seed), kept).is_file()
        }
        if not todo:
            continue
        started = time.time()
        for run, folder in iter_suite(cfg, n_jobs=jobs, runs=list(todo)):
            if train_only:
                continue
            size, seed = todo[run]
            curve = evaluate_run(folder, cfg, size, seed, n_prompts)
            kept_curve(run, kept).parent.mkdir(parents=True, exist_ok=True)
            atomic_to_csv(curve, kept_curve(run, kept))
            added += 1
            print(f"{run}: kept its curve ({len(curve)} checkpoints)", flush=True)
        print(f"block of {len(todo)} runs done in {time.time() - started:.0f} s", flush=True)
    return added


def docs_block(result, n_planned: int, elapsed_note: str) -> str:
    """docs/results.md's population block: the findings in words and the arm table, from ``result``."""
    arms = result.arms
    lines = [f"Runs evaluated: {len(result.runs)} of the spec's {n_planned} ({elapsed_note}).", ""]
    lines += [f"- {line}" for line in result.findings]
    lines += [
        "",
        (
            f"| arm | n_heads | d_head | rotary dims per head | against {result.reference}: also varies | runs | "
            "emerged | median E (95 % CI), steps | never emerged by the budget (95 % CI) |"
        ),
    ]
    lines += ["| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in arms.itertuples():
        also = "(reference)" if row.compared == "reference" else f"{row.compared}; {row.also_varies or 'nothing else'}"
        lines.append(
            f"| {row.arm} | {row.n_heads} | {row.d_head} | {row.rotary_dims} | {also} | {row.n_runs} | {row.n_emerged} | "
            f"{median_text(row)} | {row.share_never_emerged:.2f} ({row.share_never_lo:.2f}–{row.share_never_hi:.2f}) |"
        )
    if len(result.grid):
        from interp.population.robust import wide

        grid = wide(result.grid)
        lines += [
            "",
            (
                "**Does it hang on the rule?** Each finding recomputed with E dated at accuracy threshold 0.4, 0.5 or "
                "0.6 held for 1, 2 or 3 checkpoints (columns: threshold/hold; a crossing with no room left to hold is "
                "censored at the budget); robust only where direction and significance (p < 0.05) hold in every cell:"
            ),
            "",
            "| " + " | ".join(grid.columns) + " |",
            "|" + " --- |" * len(grid.columns),
        ]
        lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in grid.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def median_text(row) -> str:
    """An arm's Kaplan–Meier median E with its interval as text, ``"1450 (1300–1650)"`` (steps);
    an unbounded end is ``…``; a median the curve never reaches is "not reached".

    ``row``: a row of :attr:`interp.population.PopulationResult.arms` (``median_E``,
    ``median_E_lo``, ``median_E_hi``)."""
    if row.median_E != row.median_E:
        return "not reached"
    lo = f"{row.median_E_lo:.0f}" if math.isfinite(row.median_E_lo) else "…"
    hi = f"{row.median_E_hi:.0f}" if math.isfinite(row.median_E_hi) else "…"
    return f"{row.median_E:.0f} ({lo}–{hi})"


def decoupled_status() -> tuple[int, int]:
    """``(kept, planned)`` runs of the decoupled arms (``population-decoupled``: rotary dimensions
    per head fixed at 8), read from their kept curves."""
    from interp.sources.catalogue import load_suite_spec

    kept, _ = SPECS["population-decoupled"]
    curves = read_kept_curves(kept) if (kept / "curves").is_dir() else pd.DataFrame(columns=curve_columns())
    return (curves["run"].nunique() if len(curves) else 0), len(load_suite_spec("population-decoupled").run_names())


def headline_block(result, n_planned: int, decoupled: tuple[int, int] | None = None, decoupled_result=None) -> str:
    """docs/results.md's headline: the paper's claims 1 and 4 answered by the population
    (``result.claims``: :func:`interp.population.findings.claim_lines`), computed from ``result``'s
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


def at_budget(curves: pd.DataFrame, budget: int) -> pd.DataFrame:
    """The curves cut at ``budget`` steps, every run's budget set to it (a run not emerged by then
    is censored there: a common budget for arms trained to different ones)."""
    cut = curves[curves["step"] <= budget].copy()
    cut["budget"] = budget
    return cut


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


def update_docs(block: str, markers: tuple[str, str] = (BEGIN, END)) -> None:
    """Replace docs/results.md's block between ``markers`` (default: the population block)."""
    begin, end = markers
    text = DOCS.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{DOCS} has no {begin} ... {end} block to replace")
    from interp.core.io import atomic_write_text

    atomic_write_text(
        DOCS, re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda m: f"{begin}\n{block}{end}", text, flags=re.S)
    )


def main(argv=None) -> None:
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
    cfg = load_suite_spec(args.spec)
    arms = tuple(a for a in args.arms.split(",") if a)
    valid = [size.name for size in cfg.sizes]
    bad = [a for a in arms if a not in valid]
    if bad:
        raise SystemExit(f"error: --arms {bad[0]!r} is not a size of {args.spec}; valid: {', '.join(valid)}")
    try:
        seeds = tuple(parse_seeds(args.seeds, cfg.seeds)) if args.seeds else cfg.seeds
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    kept, n_prompts = SPECS[args.spec]
    started = time.time()
    if not args.finished_only:
        train_and_keep(
            replace(cfg, seeds=seeds), args.jobs, args.seeds_per_block, kept, args.train_only, n_prompts, arms
        )
    curves = read_kept_curves(kept)
    n_runs = curves["run"].nunique() if len(curves) else 0
    print(f"{n_runs} of {len(cfg.run_names())} runs kept; {time.time() - started:.0f} s", flush=True)
    if args.update_docs and args.spec == "population-8h-long" and not args.train_only:
        update_docs(long_block(curves, len(cfg.run_names())), LONG_MARKERS)
        update_docs(long_headline(curves, len(cfg.run_names())), LONG_HEADLINE)
    if n_runs == 0 or args.train_only:
        return
    reference = default_reference(curves["arm"].unique())
    result = population_from_curves(curves, StudyConfig(threshold=THRESHOLD, hold=HOLD), reference=reference)
    if args.spec == "population":  # claim 2 over these seeds (issue 53), as far as it is measured
        from analyses.population_mechanism import read_kept as read_mechanism

        rows, _ = read_mechanism()
        rows = rows[rows["arm"].isin(result.arms["arm"])]  # the decoupling work's arms are kept beside them
        if len(rows):
            result = result.with_mechanism(rows)
    result.save(args.out)
    for line in result.findings:
        print(line)
    if args.update_docs and args.spec not in ("population", "population-8h-long"):
        print(f"note: --update-docs rewrites the population's blocks only; {args.spec}'s are written by its own entry")
    elif args.update_docs and args.spec == "population":  # the continuation wrote its own block above
        update_docs(
            docs_block(
                result, len(cfg.run_names()), "the rest not trained yet" if n_runs < len(cfg.run_names()) else "all"
            )
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
