"""The paper's capabilities on the embedded suite: capability curve and point of emergence of
every task the byte tokenizer allows, on every run, and whether they share heads and steps.

Baherwani et al. 2026 measure four capabilities on Pythia (string repetition, in-context
repetition, pattern completion, IOI). The embedded suite has a byte tokenizer, so IOI cannot be
measured here (its names are not single tokens: it needs a word-piece vocabulary; the task is
tested on a word-level tokenizer in tests/interp/tasks/test_task_library.py). For every other registered task
(:data:`interp.tasks.REGISTRY`, ``byte_tokenizer=True``) this runs the main job
(:func:`interp.main_job.runner.run_study`, one analysis per (run, task), full scans) and writes:

* ``report/``: the main job's tables and report.html (a section per task);
* ``capability.csv``: accuracy and p(answer) per (run, task, step);
* ``points.csv``: the point of emergence per (run, task);
* ``overlap.csv``: per run and pair of tasks (each against ``--reference``, default
  ``token-repetition``, the in-context repetition probe): both points, whether the post steps
  are equal, the step difference, each task's top ``--top-k`` heads by delta (the metric's per-head change), their overlap
  (shared heads / K) and the Spearman correlation of delta over all heads; and, threshold-free,
  the post step of each task's steepest rise in mean p(answer) between consecutive checkpoints
  (``steepest_post_step``), which compares tasks that do not cross the accuracy threshold. Same
  step and same heads answer "does pattern completion emerge with in-context repetition, through
  the same heads?".

``--update-docs`` replaces the block between ``<!-- capabilities:begin -->`` and
``<!-- capabilities:end -->`` in docs/results.md.

Usage: ``python -m analyses.capabilities [--suite embedded] [--out DIR] [--update-docs]``.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from interp.cli.options import description

NAME = "capabilities"
ROOT = Path(__file__).resolve().parents[1]
OUT = Path("results/analyses") / NAME
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- capabilities:begin -->", "<!-- capabilities:end -->"


def byte_tasks() -> list[str]:
    """Registered tasks the embedded byte tokenizer can run."""
    from interp.tasks import REGISTRY

    return [name for name, spec in REGISTRY.items() if spec.byte_tokenizer]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m analyses.{NAME}", description=description(__doc__))
    parser.add_argument("--suite", default="embedded", help="embedded | embedded-quick")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--tasks", default=",".join(byte_tasks()), help="comma-separated registered tasks")
    parser.add_argument("--reference", default="token-repetition", help="task every other is compared with")
    parser.add_argument("--n-prompts", type=int, default=64)
    parser.add_argument("--top-k", type=int, default=2, help="heads per task compared for overlap")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's capabilities block")
    parser.add_argument("--jobs", type=int, default=2, help="(accepted for the results registry; the job runs here)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(accepted for the results registry; unused)")
    args = parser.parse_args(argv)
    from interp.sources.catalogue import SUITES
    from interp.tasks import REGISTRY

    if args.suite not in SUITES:
        parser.error(f"--suite {args.suite!r}: choose one of {', '.join(SUITES)}")
    args.tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    bad = [t for t in args.tasks if t not in REGISTRY or not REGISTRY[t].byte_tokenizer]
    if bad:
        parser.error(f"--tasks {bad[0]!r}: choose among the byte-tokenizer tasks {', '.join(byte_tasks())}")
    if args.reference not in args.tasks:
        parser.error(f"--reference {args.reference!r} must be one of --tasks {', '.join(args.tasks)}")
    if args.top_k < 1:
        parser.error(f"--top-k {args.top_k} must be >= 1")
    return args


def steepest_rise(capability: pd.DataFrame) -> pd.DataFrame:
    """Per (model, seed, task): the post step of the largest increase in mean p(answer) between
    consecutive evaluated checkpoints (``steepest_post_step``, steps) and that increase
    (``steepest_rise``, probability)."""
    rows = []
    for (model, seed, task), curve in capability.groupby(["model", "seed", "task"], sort=False):
        curve = curve.sort_values("step")
        rise = curve["p_answer"].diff()
        best = rise.idxmax() if rise.notna().any() else None
        rows.append(
            {
                "model": model,
                "seed": seed,
                "task": task,
                "steepest_post_step": None if best is None else int(curve.loc[best, "step"]),
                "steepest_rise": None if best is None else float(rise.loc[best]),
            }
        )
    return pd.DataFrame(rows)


def overlap_table(
    points: pd.DataFrame, heads: pd.DataFrame, reference: str, top_k: int, capability: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Per run and task other than ``reference``: both points of emergence, same post step?,
    step difference (steps; task minus reference), top-K heads of each (by delta_p), overlap
    (shared / K) and Spearman correlation of delta_p over every head (NaN if either did not
    emerge between two checkpoints)."""
    rows = []
    for (model, seed), run_points in points.groupby(["model", "seed"], sort=False):
        ref = run_points[run_points["task"] == reference].iloc[0]
        run_heads = heads[(heads["model"] == model) & (heads["seed"] == seed)]

        def ranked(task: str) -> pd.DataFrame:
            return run_heads[run_heads["task"] == task].sort_values("rank")  # noqa: B023

        ref_heads = ranked(reference)
        for _, row in run_points[run_points["task"] != reference].iterrows():
            task_heads = ranked(row["task"])
            both = len(ref_heads) and len(task_heads)
            top_ref = [f"L{int(r.layer)}H{int(r.head)}" for r in ref_heads.head(top_k).itertuples()]
            top_task = [f"L{int(r.layer)}H{int(r.head)}" for r in task_heads.head(top_k).itertuples()]
            rho = float("nan")
            if both:
                merged = ref_heads.merge(task_heads, on=["layer", "head"], suffixes=("_ref", "_task"))
                rho = float(merged["delta_ref"].corr(merged["delta_task"], method="spearman"))
            same = (
                pd.notna(row["post_step"])
                and pd.notna(ref["post_step"])
                and int(row["post_step"]) == int(ref["post_step"])
            )
            rows.append(
                {
                    "model": model,
                    "seed": seed,
                    "task": row["task"],
                    "reference": reference,
                    "pre_step": row["pre_step"],
                    "post_step": row["post_step"],
                    "reference_pre_step": ref["pre_step"],
                    "reference_post_step": ref["post_step"],
                    "same_step": bool(same),
                    "step_difference": (
                        int(row["post_step"]) - int(ref["post_step"])
                        if pd.notna(row["post_step"]) and pd.notna(ref["post_step"])
                        else None
                    ),
                    "top_heads": " ".join(top_task) or None,
                    "reference_top_heads": " ".join(top_ref) or None,
                    "head_overlap": len(set(top_task) & set(top_ref)) / top_k if both else None,
                    "spearman_delta_p": rho,
                }
            )
    out = pd.DataFrame(rows)
    if capability is not None and len(out):
        steep = steepest_rise(capability)
        out = out.merge(steep, on=["model", "seed", "task"], how="left").merge(
            steep.rename(
                columns={
                    "task": "reference",
                    "steepest_post_step": "reference_steepest_post_step",
                    "steepest_rise": "reference_steepest_rise",
                }
            ),
            on=["model", "seed", "reference"],
            how="left",
        )
    return out


def markdown(points: pd.DataFrame, overlap: pd.DataFrame, settings: str) -> str:
    """The docs block: points per (run, task), then the comparison with the reference task."""
    lines = [settings, "", "| run | task | emerged | pre → post |", "| --- | --- | --- | --- |"]
    fmt = lambda v: "—" if pd.isna(v) else str(int(v))  # noqa: E731
    for _, r in points.iterrows():
        lines.append(
            f"| {r['model']} seed {r['seed']} | {r['task']} | {'yes' if r['emerged'] else 'no'} | "
            f"{fmt(r['pre_step'])} → {fmt(r['post_step'])} |"
        )
    lines += [
        "",
        (
            "| run | task | vs | same post step | Δ steps | top heads | reference's top heads | overlap | "
            "Spearman ρ (Δp) | steepest rise of p (task / reference) |"
        ),
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    num = lambda v, f: "—" if v is None or pd.isna(v) else format(v, f)  # noqa: E731
    text = lambda v: "—" if v is None or pd.isna(v) or v == "" else str(v)  # noqa: E731
    for _, r in overlap.iterrows():
        steep = (
            f"{num(r.get('steepest_post_step'), '.0f')} (+{num(r.get('steepest_rise'), '.3f')}) / "
            f"{num(r.get('reference_steepest_post_step'), '.0f')} (+{num(r.get('reference_steepest_rise'), '.3f')})"
        )
        lines.append(
            f"| {r['model']} seed {r['seed']} | {r['task']} | {r['reference']} | "
            f"{'yes' if r['same_step'] else 'no'} | {num(r['step_difference'], '.0f')} | {text(r['top_heads'])} | "
            f"{text(r['reference_top_heads'])} | {num(r['head_overlap'], '.2f')} | "
            f"{num(r['spearman_delta_p'], '.2f')} | {steep} |"
        )
    lines += [
        "",
        (
            "Not measured here: IOI (Wang et al. 2022) needs names that are single tokens, i.e. a "
            "word-piece vocabulary; the embedded suite's byte tokenizer has one token per byte, so "
            "`--task ioi` is refused on it (the task is tested on a word-level tokenizer built by "
            "tests/interp/tasks/test_task_library.py)."
        ),
    ]
    return "\n".join(lines) + "\n"


def update_docs(block: str) -> None:
    from interp.core.io import atomic_write_text

    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} block to replace")
    atomic_write_text(
        DOCS, re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{block}{END}", text, flags=re.S)
    )


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    args = parse_args(argv)
    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.core.settings import StudyConfig
    from interp.main_job.report import EMERGENCE_COLUMNS
    from interp.main_job.runner import run_study
    from interp.tasks import make_task

    started = time.perf_counter()
    tasks = [make_task(name, n_prompts=args.n_prompts, seed=0) for name in args.tasks]
    report = run_study(
        [args.suite],
        tasks,
        StudyConfig(scan=True),
        out_dir=args.out / "report",
        title=f"emergence-lens: capabilities on {args.suite}",
        progress=False,
    )
    capability = report.emergence[EMERGENCE_COLUMNS]
    points = report.points
    overlap = overlap_table(points, report.heads, args.reference, args.top_k, capability)
    atomic_to_csv(capability, args.out / "capability.csv")
    atomic_to_csv(points, args.out / "points.csv")
    atomic_to_csv(overlap, args.out / "overlap.csv")
    settings = (
        f"Command: `python -m analyses.{NAME} --suite {args.suite} --tasks {','.join(args.tasks)} "
        f"--reference {args.reference} --n-prompts {args.n_prompts} --top-k {args.top_k}`; every task's "
        "default metric; point of emergence: greedy accuracy 0.5, full scan."
    )
    block = markdown(points, overlap, settings)
    atomic_write_text(args.out / f"{NAME}.md", block)
    if args.update_docs:
        update_docs(block)
    print(block)
    print(f"runtime: {time.perf_counter() - started:.0f} s; outputs in {args.out} ({len(points)} (run, task) pairs)")
    return overlap


if __name__ == "__main__":
    main()
