"""Do the population's findings hang on bits? One arm of the population re-trained unpinned
(issue 44 item 4): the same spec, the same 24 seeds, trained under another CPU kernel level
(``EMERGENCE_LENS_UNPINNED=1 ATEN_CPU_CAPABILITY=default``: torch's portable kernels instead of the
pinned AVX2 set, MKL and oneDNN choosing their own), then compared with the pinned arm as a
population: how many seeds' points of emergence differ, whether the unpinned median E lies within
the pinned arm's 95 % interval, and a log-rank test between the two.

The kernels are set in this process's environment before torch is imported, so the training
workers inherit them; the suite's cache key names the level (``default``), so the unpinned runs
live in their own cache folder and never mix with the pinned ones. Curves are kept as the
population's are (``docs/data/population/unpinned/curves/<run>.csv``, committed; a kept curve is
never recomputed, so the entry resumes on any clone).

Runtime: 24 runs of 4000 steps at the portable kernel level, measured in the entry's log
(docs/results.md §4 states it).

Usage: ``python -m analyses.population_unpinned [--arm NAME] [--level default|avx2|avx512]
[--jobs N] [--finished-only] [--update-docs]``; ``emergence results --only population_unpinned``.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.kept import POPULATION_KEPT, read_kept_curves, train_and_keep, update_docs
from interp.population.reading import median_text
from interp.population.tables import SPEC_REFERENCES

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_unpinned"
KEPT = POPULATION_KEPT / "unpinned"
#: The arm re-trained: the population's reference arm (d_model 64, 4 heads).
ARM = SPEC_REFERENCES["population"]
LEVELS = ("default", "avx2", "avx512")
BEGIN, END = "<!-- population-unpinned:begin -->", "<!-- population-unpinned:end -->"


def arm_config(cfg, arm: str):
    """The population spec restricted to one arm (same seeds, budget and data settings)."""
    names = [size.name for size in cfg.sizes]
    if arm not in names:
        raise SystemExit(f"error: --arm={arm!r} is not an arm of the population; arms: {', '.join(names)}")
    return replace(cfg, sizes=tuple(size for size in cfg.sizes if size.name == arm))


def comparison(pinned: pd.DataFrame, unpinned: pd.DataFrame, arm: str, level: str):
    """The population result of the pinned arm and its unpinned copy (arm ``<arm>-unpinned-<level>``),
    and a table of the seeds both have: E pinned, E unpinned (steps), whether they differ, and
    ``checkpoints`` / ``checkpoints_differ``: the checkpoints both curves have and those where
    p(answer) is not equal (whether the bits differ at all)."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves

    label = f"{arm}-unpinned-{level}"
    unpinned = unpinned.assign(arm=label, run=unpinned["run"] + "-unpinned")
    both = pd.concat([pinned[pinned["arm"] == arm], unpinned], ignore_index=True)
    result = population_from_curves(both, StudyConfig(threshold=THRESHOLD, hold=HOLD), reference=arm, grid=False)
    runs = result.runs
    left = runs[runs["arm"] == arm].set_index("seed")
    right = runs[runs["arm"] == label].set_index("seed")
    seeds = sorted(set(left.index) & set(right.index))
    pairs = pd.DataFrame(
        {
            "seed": seeds,
            "E_pinned": [left.loc[s, "E"] for s in seeds],
            "E_unpinned": [right.loc[s, "E"] for s in seeds],
        }
    )
    pairs["differs"] = ~(
        (pairs["E_pinned"] == pairs["E_unpinned"]) | (pairs["E_pinned"].isna() & pairs["E_unpinned"].isna())
    )
    # do the bits differ at all? checkpoints both curves have, and those where p(answer) is not equal
    both_curves = pinned[pinned["arm"] == arm].merge(unpinned, on=["seed", "step"], suffixes=("_p", "_u"))
    counts = both_curves.assign(diff=both_curves["p_answer_p"] != both_curves["p_answer_u"]).groupby("seed")["diff"]
    pairs["checkpoints"] = [int(counts.size().get(s, 0)) for s in seeds]
    pairs["checkpoints_differ"] = [int(counts.sum().get(s, 0)) for s in seeds]
    return result, pairs, label


def _step(e: float) -> str:
    return "never" if e != e else f"{e:.0f}"


def docs_block(result, pairs: pd.DataFrame, arm: str, label: str, n_planned: int, runtime: str = "") -> str:
    """docs/results.md's block: the two arms side by side and the verdict in words."""
    arms = result.arms.set_index("arm")
    test = result.tests[(result.tests["test"] == "vs reference") & (result.tests["arm"] == label)]
    p = float(test["p"].iloc[0]) if len(test) else float("nan")
    a, b = arms.loc[arm], arms.loc[label]
    inside = b.median_E == b.median_E and a.median_E_lo <= b.median_E <= a.median_E_hi
    n_unpinned = int(b.n_runs)
    lines = [
        f"Unpinned runs evaluated: {n_unpinned} of {n_planned}; seeds compared with their pinned twin: {len(pairs)}."
        + (f" {runtime}" if runtime else ""),
        "",
        f"- Per-seed points of emergence differ on {int(pairs['differs'].sum())} of {len(pairs)} seeds"
        + (
            " ("
            + ", ".join(
                f"seed {r.seed}: {_step(r.E_pinned)} → {_step(r.E_unpinned)}"
                for r in pairs[pairs["differs"]].itertuples()
            )
            + ")."
            if pairs["differs"].any()
            else "."
        ),
        (
            f"- The bits differ: p(answer) differs at {int(pairs['checkpoints_differ'].sum())} of "
            f"{int(pairs['checkpoints'].sum())} checkpoints, on {int((pairs['checkpoints_differ'] > 0).sum())} of "
            f"{len(pairs)} seeds."
            if pairs["checkpoints_differ"].sum()
            else "- The capability curves are equal at every checkpoint: these runs did not differ in their bits "
            "(were the kernels really unpinned?)."
        ),
        f"- Median E unpinned {median_text(b)} against pinned {median_text(a)}: "
        + ("inside the pinned arm's 95 % interval." if inside else "**outside** the pinned arm's 95 % interval."),
        f"- Log-rank test, unpinned against pinned: p = {p:.2f}"
        + (
            " (the test does not separate the two)."
            if p == p and p >= 0.05
            else " (the two differ at the 5 % level)."
            if p == p
            else " (undetermined)."
        ),
        "",
        "| arm | kernels | runs | emerged | median E (95 % CI), steps | never emerged by the budget (95 % CI) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, kernels in ((arm, "pinned AVX2"), (label, label.rsplit("-", 1)[-1] + ", unpinned")):
        row = arms.loc[name]
        lines.append(
            f"| {name} | {kernels} | {int(row.n_runs)} | {int(row.n_emerged)} | {median_text(row)} | "
            f"{row.share_never_emerged:.2f} ({row.share_never_lo:.2f}–{row.share_never_hi:.2f}) |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m analyses.population_unpinned", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--arm", default=ARM, help=f"the arm re-trained (default {ARM})")
    parser.add_argument(
        "--level", default="default", help="ATEN_CPU_CAPABILITY of the training workers: " + ", ".join(LEVELS)
    )
    parser.add_argument(
        "--jobs", type=int, default=None, help="training worker processes (default: the CPU count; 0: train none)"
    )
    parser.add_argument("--finished-only", action="store_true", help="statistics of the kept curves; train nothing")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's unpinned block")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored: the runs live in the suite's cache)")
    args = parser.parse_args(argv)
    if args.level not in LEVELS:
        raise SystemExit(f"error: --level={args.level!r} is not a kernel level; valid: {', '.join(LEVELS)}")
    # Before torch is imported anywhere: the training workers inherit these (interp.core.kernel_pins).
    os.environ["EMERGENCE_LENS_UNPINNED"] = "1"
    os.environ["ATEN_CPU_CAPABILITY"] = args.level
    from interp.sources.catalogue import load_suite_spec

    cfg = arm_config(load_suite_spec("population"), args.arm)
    started = time.time()
    trained = 0 if args.finished_only else train_and_keep(cfg, args.jobs, 2, kept=KEPT)
    unpinned = read_kept_curves(KEPT)
    pinned = read_kept_curves()
    print(
        f"{unpinned['run'].nunique() if len(unpinned) else 0} of {len(cfg.run_names())} unpinned runs kept; "
        f"{time.time() - started:.0f} s",
        flush=True,
    )
    if unpinned.empty or pinned[pinned["arm"] == args.arm].empty:
        return
    result, pairs, label = comparison(pinned, unpinned, args.arm, args.level)
    result.save(args.out)
    from interp.core.io import atomic_to_csv

    atomic_to_csv(pairs, args.out / "pairs.csv")
    # (statistics of kept curves only: no runtime worth stating; docs/results.md states the training's)
    runtime = (
        f"Runtime of this call: {(time.time() - started) / 60:.1f} min, {trained} run(s) trained in it."
        if trained
        else ""
    )
    block = docs_block(result, pairs, args.arm, label, len(cfg.run_names()), runtime)
    print(block)
    if args.update_docs:
        update_docs(block, (BEGIN, END))


if __name__ == "__main__":
    main()
