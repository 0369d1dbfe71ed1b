"""Forecast and formation order over the population of seeds (issue 45, items 1-2).

Reads the population's kept capability curves (``docs/data/population/curves``, kept by
``analyses/population.py``) and each run's head features (:mod:`interp.population.heads`),
which this entry computes once per trained run and keeps in ``docs/data/population/heads/<run>.csv``
(:func:`keep_head_features`: a kept file is never recomputed, so the entry resumes on any clone;
measured 15-35 s per run of 38-48 checkpoints under ``nice -n 19`` beside the population's
training on the 2-core machine, 100-200 s when its load average was 10-11; 2026-12-03). Then:

- :func:`interp.population.forecast.forecast` at the horizons :data:`HORIZONS` (each run's E / 2
  and the fixed steps 500 and 1000): leave-one-seed-out predictions against the arm-median baseline;
- :func:`interp.population.formation.formation_order` and ``formation_summary``: the steps the
  previous-token head, the induction head and the capability form, the share in that order,
  Kendall's W with its bootstrap interval, the induction-head candidates before E.

Runs whose checkpoints are gone (a fresh clone holds the kept curves, not the checkpoints):
``--train-missing [N]`` trains up to N of them again (all without N), kernel-pinned as the
population was, ``--jobs`` at a time, keeps their head features, checks each run's capability
curve against its kept one (``docs/data/population/retrained.csv``: identical or not, on what CPU
and Python) and removes the run folder (:func:`train_for_heads`); a stopped call resumes from
the kept head features. ``make results`` runs the entry with it.

Writes to ``--out``: ``forecast_<horizon>.csv`` (per run), ``forecast_arms.csv`` (per horizon x
arm), ``formation.csv`` (per run), ``formation_summary.csv``, ``insight.html``, ``insight.md``
(the docs block); ``--update-docs`` replaces docs/results.md's block between
``population-insight:begin`` / ``:end`` (``python -m analyses.population_insight --update-docs``).

Runtime: the head features of each run once (~30 s each on 2 idle-ish cores: ~1 h for the 120
runs; up to ~4 h on a loaded machine), then well under a minute for the statistics.

Usage: ``python -m analyses.population_insight [--out DIR] [--curves DIR] [--update-docs]``
(``--curves``: the folder holding ``curves/``, default ``docs/data/population``).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.kept import POPULATION_KEPT, evaluate_run, kept_heads, read_kept_curves, read_kept_heads

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_insight"
KEPT = POPULATION_KEPT
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- population-insight:begin -->", "<!-- population-insight:end -->"
#: Forecast horizons: each run's E / 2, and a fixed early step (steps).
HORIZONS = ("half", 500, 1000)


def keep_head_features(folders, kept: Path = KEPT, echo=print) -> dict[str, float]:
    """Compute and keep the head features of every finished run folder (``suite.json`` present)
    that has none kept; returns seconds per run computed now (a kept file is never recomputed)."""
    from interp.core.io import atomic_to_csv
    from interp.population.heads import run_head_features
    from interp.sources.local import finished_run

    seconds = {}
    for folder in map(Path, folders):
        path = kept_heads(folder.name, kept)
        if path.is_file() or not finished_run(folder):  # a damaged run folder is named and removed
            continue
        started = time.perf_counter()
        table = run_head_features(folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_to_csv(table.round(6), path)  # 6 decimals: ~40 % less disk, far below the scores' noise
        seconds[folder.name] = time.perf_counter() - started
        echo(
            f"{folder.name}: kept its head features ({table['step'].nunique()} checkpoints, {seconds[folder.name]:.1f} s)"
        )
    return seconds


#: Tolerance on p(answer) (probability) when a retrained run's curve is compared with its kept one.
TOLERANCE = 1e-5
#: Columns of ``retrained.csv``: the check of each run trained again for its head features.
RETRAINED_COLUMNS = [
    "run", "checkpoints", "identical", "max_abs_diff_accuracy", "max_abs_diff_p_answer", "cpu_model", "python",
    "torch", "pins_applied", "train_seconds",
]  # fmt: skip


def train_for_heads(
    cfg,
    curves: pd.DataFrame,
    jobs: int,
    kept: Path = KEPT,
    limit: int | None = None,
    keep_runs: bool = False,
    echo=print,
) -> pd.DataFrame:
    """Train again the population's runs whose curve is kept but whose head features are not (a
    fresh clone: the kept curves came without the checkpoints), keep their head features, and
    check each retrained run against its kept curve.

    The runs are trained as the population's were (:func:`interp.sources.embedded.iter_suite`,
    kernel-pinned, ``jobs`` at a time, seed by seed across the arms so that every arm grows
    alike), so each run's capability curve should equal its kept one exactly, on any x86-64 CPU
    with AVX2 and any supported Python; one row per run says whether it did (``identical``, and
    the largest ``|Δ p(answer)|``) and on what it was trained, appended to ``kept/retrained.csv``
    as each run finishes. The run folder is removed afterwards (``keep_runs=False``: its
    checkpoints are ~26-72 MB; the head features are what the analyses read), so a stopped call
    resumes from the kept head features on any clone. ``limit``: at most this many runs now.

    Raises:
        ValueError: ``jobs < 1`` or a negative ``limit`` (before anything trains).
    """
    from interp.core.io import atomic_to_csv, remove_folder
    from interp.sources.catalogue import run_name
    from interp.sources.embedded import iter_suite

    if jobs < 1 or (limit is not None and limit < 0):
        raise ValueError(f"jobs={jobs} must be >= 1 and limit={limit} >= 0 (or None: every run)")
    names = {run_name(size, seed): (size, seed) for seed in cfg.seeds for size in cfg.sizes}
    kept_runs = set(curves["run"])
    todo = [r for r in names if r in kept_runs and not kept_heads(r, kept).is_file()]
    todo = todo[:limit] if limit is not None else todo
    record = kept / "retrained.csv"
    done = read_retrained(record, echo)
    for i in range(0, len(todo), jobs):
        for run, folder in iter_suite(cfg, n_jobs=jobs, runs=todo[i : i + jobs]):
            size, seed = names[run]
            curve = evaluate_run(folder, cfg, size, seed)
            both = curve.merge(curves[curves["run"] == run], on="step", suffixes=("", "_kept"))
            identical = len(both) == len(curve) and bool(
                (both["accuracy"] == both["accuracy_kept"]).all() and (both["p_answer"] == both["p_answer_kept"]).all()
            )
            keep_head_features([folder], kept, echo)
            meta = json.loads((folder / "suite.json").read_text())
            env = meta.get("environment", {})
            row = {
                "run": run,
                "checkpoints": len(curve),
                "identical": identical,
                "max_abs_diff_accuracy": float((both["accuracy"] - both["accuracy_kept"]).abs().max()),
                "max_abs_diff_p_answer": float((both["p_answer"] - both["p_answer_kept"]).abs().max()),
                "cpu_model": env.get("cpu_model"),
                "python": env.get("python"),
                "torch": env.get("packages", {}).get("torch"),
                "pins_applied": env.get("kernel_pins", {}).get("applied"),
                "train_seconds": meta.get("train_seconds"),
            }
            done = pd.concat([done[done["run"] != run], pd.DataFrame([row])], ignore_index=True)
            atomic_to_csv(done[RETRAINED_COLUMNS], record)
            echo(
                f"{run}: trained again, curve {'identical to' if identical else 'not bit-identical to'} the kept one "
                f"(largest |Δ accuracy| {row['max_abs_diff_accuracy']:.3g}, |Δ p(answer)| "
                f"{row['max_abs_diff_p_answer']:.3g})"
            )
            if not keep_runs:
                remove_folder(folder)  # renamed first: a kill mid-removal leaves no half-emptied run
    return done


def read_retrained(record: Path, echo=print) -> pd.DataFrame:
    """The record of :func:`train_for_heads` (:data:`RETRAINED_COLUMNS`; empty when there is none);
    a damaged one is named and started again (the runs it listed keep their head features)."""
    from interp.core.io import read_kept_csv

    table = read_kept_csv(record, RETRAINED_COLUMNS, None, "lacks columns", "it is started again", echo)
    return pd.DataFrame(columns=RETRAINED_COLUMNS) if table is None else table


def analyse(population, heads: pd.DataFrame, horizons=HORIZONS, n_boot: int = 2000) -> dict:
    """The forecast at each horizon and the formation order of the runs with head features."""
    from interp.population.forecast import forecast
    from interp.population.formation import formation_order, formation_summary

    runs = population.runs[population.runs["run"].isin(set(heads["run"]))]
    forecasts = {str(h): forecast(runs, heads, horizon=h) for h in horizons}
    order = formation_order(runs, heads)
    return {"runs": runs, "forecasts": forecasts, "order": order, "summary": formation_summary(order, n_boot=n_boot)}


def _md(df: pd.DataFrame) -> str:
    def cell(v):
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + " --- |" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def retrained_line(retrained: pd.DataFrame) -> str:
    """One line on the runs trained again for their head features (:func:`train_for_heads`)."""
    if retrained is None or retrained.empty:
        return ""
    same = retrained["identical"].astype(str).str.lower() == "true"
    close = (retrained["max_abs_diff_accuracy"] == 0) & (retrained["max_abs_diff_p_answer"] <= TOLERANCE)
    where = ", ".join(
        f"{cpu} (Python {py}, torch {torch})"
        for (cpu, py, torch), _ in retrained.groupby(["cpu_model", "python", "torch"], dropna=False)
    )
    text = (
        f"{len(retrained)} of these runs were trained again for their head features (the kept curves came "
        f"without checkpoints), on {where}: the capability curve equals the kept one at every checkpoint "
        f"(accuracy exactly, p(answer) to {TOLERANCE:g}) on {int(close.sum())} of {len(retrained)}, bit for bit on "
        f"{int(same.sum())} (the evaluation runs in the calling process, not kernel-pinned, so its last bits may "
        f"follow the CPU; largest |Δ p(answer)| {retrained['max_abs_diff_p_answer'].max():.2g})"
    )
    if (~close).any():
        text += f"; differing: {', '.join(retrained.loc[~close, 'run'])}"
    seconds = pd.to_numeric(retrained["train_seconds"], errors="coerce").dropna()
    if len(seconds):
        text += f"; training time per run median {seconds.median():.0f} s"
    return text + "."


def docs_block(result: dict, n_planned: int, seconds: float, retrained: pd.DataFrame | None = None) -> str:
    """docs/results.md's block: runs used, the forecast per horizon and arm, the formation order,
    and the check of the runs trained again for their head features (``retrained``)."""
    from interp.core.terms import IND_THRESHOLD, PREV_THRESHOLD
    from interp.population.insight_page import formation_table, insight_findings

    runs = result["runs"]
    lines = [
        (
            f"Runs with head features and a kept curve: {len(runs)} of the spec's {n_planned} "
            f"({int(runs['emerged'].sum())} emerged). Runtime of this call: {seconds / 60:.1f} min."
            + (f" {retrained_line(retrained)}" if retrained is not None and len(retrained) else "")
        ),
        "",
        *[f"- {line}" for line in insight_findings(result["forecasts"], result["summary"])],
        "",
        (
            "**Forecast** (two parts, leave-one-seed-out: the probability of emerging by the budget, a penalised "
            "logistic regression, and log2 E given it, a ridge; a run below 0.5 is predicted never. Scores: Harrell's "
            "concordance C with censored runs included, and the goal: median |log2(pred/E)| over emerged runs at "
            "most half the arm's Kaplan–Meier-median baseline's, on every arm):"
        ),
        "",
    ]
    for horizon, fc in result["forecasts"].items():
        lines += [f"Horizon `{horizon}`:", "", _md(fc.arms)]
        lines += [f"- {line}" for line in fc.lines()]
        lines.append("")
    s = result["summary"]
    lines += [
        (
            f"**Formation order** (previous-token head: max layer-0 previous-token score >= {PREV_THRESHOLD}; induction "
            f"head: max layer-1 prefix-matching score >= {IND_THRESHOLD}; capability: E; each held for 2 checkpoints):"
        ),
        "",
        _md(formation_table(s).map(lambda v: v.replace("\u00a0", " ").replace("\u2060", ""))),  # plain spaces
        (
            "Strict order: runs with t_prev < t_ind < E; with ties: with <= (two events at one checkpoint, 100 steps "
            "apart at most); shares with Wilson's 95 % interval, Kendall's W with a 95 % bootstrap interval over runs; "
            "induction candidates: layer-1 heads past the induction threshold at a checkpoint before E; final head "
            "formed first: runs whose final top prefix-matching head was the first (or tied first) to form, of the "
            "runs with two or more layer-1 heads where one formed (formation_summary.csv has every column)."
        ),
        "",
    ]
    return "\n".join(lines)


def update_docs(block: str, docs: Path = DOCS) -> None:
    """Replace (or append) docs/results.md's population-insight block."""
    from interp.core.io import atomic_write_text

    text = docs.read_text()
    if BEGIN not in text:
        text += f"\n### Forecast and formation order over seeds\n\n{BEGIN}\n{END}\n"
    text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{block}{END}", text, flags=re.S)
    atomic_write_text(docs, text)


def write(result: dict, out: Path) -> None:
    """The tables and ``insight.html`` into ``out``."""
    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.population.insight_page import insight_page

    arms = []
    for horizon, fc in result["forecasts"].items():
        atomic_to_csv(fc.predictions, out / f"forecast_{horizon}.csv")
        arms.append(fc.arms.assign(horizon=horizon))
    atomic_to_csv(pd.concat(arms, ignore_index=True), out / "forecast_arms.csv")
    atomic_to_csv(result["order"], out / "formation.csv")
    atomic_to_csv(result["summary"], out / "formation_summary.csv")
    atomic_write_text(
        out / "insight.html",
        insight_page(
            result["forecasts"],
            result["order"],
            result["summary"],
            "Events dated by the rule of E (held for 2 checkpoints; a crossing with no room left to hold is no event); "
            "in each run's row the three events sit at their own heights (previous-token above, induction in the "
            "middle, E below), so events at one step never hide each other; a missing marker: the event did not "
            "happen within the run.",
        ),
    )


def main(argv=None) -> None:
    from interp.core.io import atomic_write_text
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves
    from interp.sources.catalogue import load_suite_spec, suite_dir

    parser = argparse.ArgumentParser(prog="python -m analyses.population_insight", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--curves", type=Path, default=KEPT, help="folder holding the kept curves/ (default: docs')")
    parser.add_argument("--no-compute", action="store_true", help="use the kept head features only")
    parser.add_argument(
        "--train-missing",
        type=int,
        nargs="?",
        const=-1,
        default=None,
        metavar="N",
        help="train again (pinned) up to N population runs (all without N) whose head features are not kept",
    )
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument("--jobs", type=int, default=2, help="training workers of --train-missing")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored)")
    args = parser.parse_args(argv)
    started = time.time()
    cfg = load_suite_spec("population")
    if args.jobs < 1 or (args.train_missing is not None and args.train_missing < -1):
        raise SystemExit(f"error: --jobs {args.jobs} must be >= 1 and --train-missing N >= 0")
    if not args.no_compute and suite_dir(cfg).is_dir():
        folders = sorted(p for p in suite_dir(cfg).iterdir() if not p.name.startswith("."))
        keep_head_features(folders)
    curves = read_kept_curves(args.curves)
    if args.train_missing is not None and not args.no_compute:
        limit = None if args.train_missing == -1 else args.train_missing
        train_for_heads(cfg, curves, args.jobs, limit=limit)
    heads = read_kept_heads()
    if curves.empty or heads.empty:
        raise SystemExit("error: no kept curves or head features yet (train the population first)")
    population = population_from_curves(curves, StudyConfig(threshold=THRESHOLD, hold=HOLD), grid=False)
    result = analyse(population, heads)
    write(result, args.out)
    retrained = read_retrained(KEPT / "retrained.csv")
    block = docs_block(result, len(cfg.run_names()), time.time() - started, retrained)
    atomic_write_text(args.out / "insight.md", block)
    print(block)
    if args.update_docs:
        update_docs(block)


if __name__ == "__main__":
    main()
