"""Is it the pattern? Forcing the true pattern against a wrong pattern of the same sparsity
(issue 45, item 3), on the population's runs and on the heads each run ends up using.

The forcing result (``analyses/forcing.py``, docs/results.md §3) biases fixed heads (L0H0, L1H0)
toward the true patterns and E moves earlier; any sparse bias might do that. Here, per run of the
population (default: the reference arm ``neox-2l-64d-4h``, seeds 0-11) and per cell ``β:N`` of a
small grid (``--cells``; default :data:`DEFAULT_CELLS`) of bias strength β (nats per unit of
``log(pattern + ε)``) and forcing length N (steps at full β; then a linear anneal over
``--anneal-steps``), two forced runs from the plain run's initialisation and data order
(:func:`interp.sources.embedded.train_run` ``forcing=``):

- ``true``: the layer-0 head with the highest previous-token score at the run's last checkpoint
  biased toward the ``previous_token`` pattern, and the layer-1 head with the highest
  prefix-matching score there toward ``induction`` (:func:`interp.population.forced.chosen_heads`, from the kept head
  features ``docs/data/population/heads/<run>.csv``);
- ``control``: the same heads, the same β and N, toward ``offset_3`` (key ``i - 3``) and
  ``induction_offset_3`` (two keys past the induction key): one key per row, as sparse as the
  true patterns, wrong for the task (:mod:`interp.patching.ideal`).

E of a forced run: its capability at every checkpoint without the bias, evaluated exactly as the
population's (``analyses.population.evaluate_run``: 64 repetition prompts, greedy accuracy 0.5
held for 2 checkpoints); ``shift = E_forced − E_plain`` (steps) against the plain run's E from
its kept curve. Per grid cell: the mean shift of each condition with its 95 % t-interval over
runs, and the paired difference ``shift_true − shift_control`` per run with its interval; the
goal (issue 45) is that difference's interval below 0 on >= 12 seeds.

Resumable: each forced run is trained into ``--sweep-dir/<tag>/<run>/<condition>-b<β>-n<N>/``
(a temporary folder renamed when complete: ``analyses.forcing.train_forced``), evaluated as soon
as it finishes, and its curve kept in ``--kept/runs/`` (``docs/data/forcing_control/runs/``,
committed); a second call, on this clone or any other, trains and evaluates only what is missing
(a damaged kept curve is named and redone).

Writes to ``--out``: ``forcing_control.csv`` (per forced run), ``forcing_control_summary.csv``
(per cell), ``forcing_control.md`` (the docs block: :func:`headline`, then :func:`verdict` per
cell) and ``forcing_control.html`` (:func:`interp.population.control_page.control_page`: the same
lines, each seed's true and control shift as a pair, the per-cell table).

Runtime, measured on the 2-core machine (2026-12-03): a plain d_model-64 population run of 4000
steps trains in 190-225 s on an idle core (``train_seconds`` of the population's runs; 1350 s
when the machine is loaded); 200 steps of ``neox-2l-64d-4h`` seed 0 took 160 s plain, 99 s with
the true forcing and 95 s with the control at ``nice -n 19`` under a load average of 10-11, so
the bias adds no cost above that noise. One forced run: ~3.5 min of an idle core (~45 min at
``nice -n 19`` on the loaded machine). One grid cell (12 seeds x 2 conditions = 24 runs, 2
workers, plus ~20 s of evaluation per run) is ~50 min of 2 idle cores; the default's three cells
~2.5 h.

Usage: ``python -m analyses.forcing_control [--runs NAMES] [--cells 1:500,1:250,0.25:500]
[--anneal-steps 250] [--jobs 2] [--finished-only] [--update-docs]``.
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from interp.cli.options import description
from interp.core.io import atomic_to_csv, atomic_write_text
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.forced import (
    DEFAULT_CELLS,
    PATTERNS,
    crossing_of,
    keep_forced_curve,
    mean_interval,
    parse_cells,
    plan,
    read_forced,
    select_runs,
    train_missing,
)
from interp.population.kept import POPULATION_KEPT as POPULATION
from interp.population.kept import read_kept_curves, read_kept_heads

ROOT = Path(__file__).resolve().parents[1]
NAME = "forcing_control"
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- forcing-control:begin -->", "<!-- forcing-control:end -->"
DEFAULT_RUNS = ",".join(f"neox-2l-64d-4h-seed{s}" for s in range(12))
COLUMNS = [
    "run", "condition", "beta", "force_steps", "heads", "E_plain", "E_forced", "forced_censored", "shift",
    "train_seconds",
]  # fmt: skip
#: Where the forced runs' curves are kept (committed, so the entry resumes on any clone).
KEPT = ROOT / "docs" / "data" / "forcing_control"


def cells_line(asked: list[dict], done: list[dict]) -> str:
    """The (β, N) cells of the asked grid with fewer forced runs than asked (with ``--finished-only``,
    the ones not kept), in words; "" when every cell is whole."""
    from collections import Counter

    have = Counter((u["beta"], u["force_steps"]) for u in done)
    want = Counter((u["beta"], u["force_steps"]) for u in asked)
    short = [f"β={b:g}, N={n} ({have[b, n]} of {k} forced runs kept)" for (b, n), k in want.items() if have[b, n] < k]
    return (
        f"Cells of the grid not complete: {'; '.join(short)}; a line below counts its cell's runs kept."
        if short
        else ""
    )


def evaluate(units: list[dict], cfg, plain_e: dict[str, float | None], kept: Path) -> pd.DataFrame:
    """One row per unit (:data:`COLUMNS`): E of the forced run (from its kept curve, evaluated
    first where missing) and its shift against the plain run's E (steps; NaN where the plain run
    did not emerge). A forced run not emerged by the budget (``forced_censored``) has ``E_forced``
    NaN and the shift's lower bound ``budget - E_plain``: a control that never emerges counts as at
    least that late, so the paired difference true - control is then an upper bound (conservative
    for the goal)."""

    rows = []
    for u in units:
        curve = read_forced(u, kept)
        if curve is None:
            curve = keep_forced_curve(u, cfg, kept)
        post = crossing_of(curve)[1]
        budget = cfg.steps_for(u["size"])
        censored = post is None or post > budget
        e_forced = np.nan if censored else float(post)
        e_plain = plain_e.get(u["run"])
        e_plain = np.nan if e_plain is None else float(e_plain)
        rows.append(
            {
                "run": u["run"],
                "condition": u["condition"],
                "beta": u["beta"],
                "force_steps": u["force_steps"],
                "heads": "+".join(f"L{l}H{h}={p}" for l, h, p in u["forcing"].heads),
                "E_plain": e_plain,
                "E_forced": e_forced,
                "forced_censored": censored,
                # a forced run not emerged by the budget: shift >= budget - E_plain (that lower bound)
                "shift": (budget if censored else e_forced) - e_plain,
                "train_seconds": curve["train_seconds"].iloc[0],
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def summarise(table: pd.DataFrame) -> pd.DataFrame:
    """Per (β, N): runs, mean shift of ``true`` and ``control`` with 95 % t-intervals, the paired
    difference true − control with its interval, the range of E of the true-forced runs
    (``true_E_min``, ``true_E_max``, steps) and ``goal_met`` (its upper end < 0 on >= 12 runs)."""

    rows = []
    for (beta, n), cell in table.groupby(["beta", "force_steps"], sort=True):
        wide = cell.pivot(index="run", columns="condition", values="shift")
        row = {"beta": beta, "force_steps": n, "runs": len(wide)}
        for condition in PATTERNS:
            values = wide[condition] if condition in wide else pd.Series(dtype=float)
            m, lo, hi = mean_interval(values.dropna())
            row.update(
                {
                    f"{condition}_n": int(values.notna().sum()),
                    condition: m,
                    f"{condition}_lo": lo,
                    f"{condition}_hi": hi,
                }
            )
        diff = (wide.get("true", np.nan) - wide.get("control", np.nan)).dropna()
        m, lo, hi = mean_interval(diff)
        row.update({"paired_n": len(diff), "difference": m, "difference_lo": lo, "difference_hi": hi})
        for condition in PATTERNS:
            row[f"{condition}_censored"] = int(cell.loc[cell["condition"] == condition, "forced_censored"].sum())
        e_true = cell.loc[cell["condition"] == "true", "E_forced"].dropna()
        row["true_E_min"] = float(e_true.min()) if len(e_true) else np.nan
        row["true_E_max"] = float(e_true.max()) if len(e_true) else np.nan
        row["goal_met"] = bool(len(diff) >= 12 and hi == hi and hi < 0)
        rows.append(row)
    return pd.DataFrame(rows)


def _ci(lo: float, hi: float) -> str:
    return "" if lo != lo else f" (95 % {lo:.0f} to {hi:.0f})"


def headline(summary: pd.DataFrame) -> str:
    """The answer over the grid in one line: the cells where the goal is met, and whether the
    control by itself moved E (its mean shift's interval excluding 0) in any cell."""
    met = [f"β={r.beta:g}, N={r.force_steps}" for r in summary.itertuples() if r.goal_met]
    moved = [
        f"β={r.beta:g}, N={r.force_steps} ({r.control:+.0f} steps)"
        for r in summary.itertuples()
        if r.control_lo == r.control_lo and (r.control_lo > 0 or r.control_hi < 0)
    ]
    return (
        f"Goal met in {len(met)} of {len(summary)} cells of the grid"
        + (f" ({'; '.join(met)})" if met else "")
        + ": the true pattern's shift of E below the control's, the paired interval below 0 on >= 12 seeds. "
        + (
            f"The control by itself moved E in {len(moved)} cell(s): {'; '.join(moved)}."
            if moved
            else "The control by itself did not move E: its mean shift's interval contains 0 in every cell."
        )
    )


def verdict(summary: pd.DataFrame) -> list[str]:
    """One plain line per grid cell."""
    lines = []
    for r in summary.itertuples():
        if r.paired_n == 0:
            lines.append(f"β={r.beta:g}, N={r.force_steps}: no run with E in the plain, true and control runs.")
            continue
        interval = (
            "" if r.difference_lo != r.difference_lo else f" (95 % {r.difference_lo:.0f} to {r.difference_hi:.0f})"
        )
        if r.paired_n < 2:
            word = "differs from the control on the one run measured (no interval from one run)"
        elif r.difference_hi == r.difference_hi and r.difference_hi < 0:
            word = "moves E earlier than the control"
        elif r.difference_lo == r.difference_lo and r.difference_lo > 0:
            word = "moves E LATER than the control"
        else:
            word = "is not told apart from the control"
        lines.append(
            f"β={r.beta:g}, N={r.force_steps}: the true pattern {word}: shift true − control {r.difference:.0f} "
            f"steps{interval} over {r.paired_n} runs; mean shift true {r.true:.0f}{_ci(r.true_lo, r.true_hi)}, control "
            f"{r.control:.0f}{_ci(r.control_lo, r.control_hi)} steps "
            f"(forced runs not emerged by the budget, counted at the budget: true {r.true_censored}, control "
            f"{r.control_censored}); the true-forced runs cross at "
            + (
                f"step {r.true_E_min:.0f}"
                if r.true_E_min == r.true_E_max
                else f"steps {r.true_E_min:.0f}–{r.true_E_max:.0f}"
            )
            + ("" if r.goal_met else " (goal needs the interval below 0 on >= 12 runs: not met)")
            + "."
        )
    return lines


def update_docs(block: str, docs: Path = DOCS) -> None:
    """Replace (or append) docs/results.md's forcing-control block."""
    text = docs.read_text()
    if BEGIN not in text:
        text += f"\n### Is it the pattern? Forcing against a wrong pattern of the same sparsity\n\n{BEGIN}\n{END}\n"
    text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{block}{END}", text, flags=re.S)
    atomic_write_text(docs, text)


def main(argv=None) -> None:
    from interp.core.settings import StudyConfig
    from interp.population.control_page import control_page
    from interp.population.tables import population_from_curves
    from interp.sources import environment
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog="python -m analyses.forcing_control", description=description(__doc__))
    parser.add_argument("--runs", default=DEFAULT_RUNS, help="comma-separated run or arm names of the population")
    parser.add_argument(
        "--cells", default=DEFAULT_CELLS, help="comma-separated β:N (β: nats per unit of log(pattern + eps); N: steps)"
    )
    parser.add_argument("--anneal-steps", type=int, default=250)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--curves", type=Path, default=POPULATION, help="folder holding the kept curves/")
    parser.add_argument("--sweep-dir", type=Path, default=ROOT / "results" / "sweeps" / NAME)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--kept", type=Path, default=KEPT, help="folder of the forced runs' kept curves (runs/)")
    parser.add_argument("--finished-only", action="store_true", help="the forced runs already kept; train nothing")
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    try:  # bad input: one line naming it, before anything loads
        cells = parse_cells(args.cells)
        if args.jobs < 1 or args.anneal_steps < 0:
            raise ValueError(f"--jobs {args.jobs} must be >= 1 and --anneal-steps {args.anneal_steps} >= 0")
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    cfg = load_suite_spec("population")
    selected = select_runs(cfg, args.runs)
    started = time.time()
    curves = read_kept_curves(args.curves)
    plain = (
        population_from_curves(curves, StudyConfig(threshold=THRESHOLD, hold=HOLD), grid=False).runs
        if len(curves)
        else pd.DataFrame()
    )
    plain_e = {r.run: (r.E if r.emerged else None) for r in plain.itertuples()}
    tag = f"{cfg.digest()}-{environment.environment_key(cfg)}-a{args.anneal_steps}"
    units = plan(selected, read_kept_heads(), cells, args.anneal_steps, args.sweep_dir / tag)
    asked = units
    if args.finished_only:
        units = [u for u in units if read_forced(u, args.kept) is not None]
        if not units:
            raise SystemExit(f"error: no forced run of this command is kept in {args.kept / 'runs'} yet")
    trained = 0 if args.finished_only else train_missing(units, cfg, args.jobs, args.kept)
    table = evaluate(units, cfg, plain_e, args.kept)
    summary = summarise(table)
    seconds = time.time() - started
    trained_s = table["train_seconds"].dropna().tolist()
    findings = [headline(summary), *verdict(summary)]  # the docs block's lines and the page's, once
    block = "\n".join(
        [
            (
                "Command: `python -m analyses.forcing_control"
                + ("" if args.runs == DEFAULT_RUNS else f" --runs {args.runs}")
                + f" --cells {','.join(f'{b:g}:{n}' for b, n in cells)} --anneal-steps {args.anneal_steps}"
                + (" --finished-only" if args.finished_only else "")
                + f"`; {table['run'].nunique()} runs, {len(units)} forced runs ({trained} trained by this call"
                + ("; the kept ones only" if args.finished_only else "")
                + (f"); runtime {seconds / 60:.1f} min." if trained else ").")
            ),
            f"Training time of one forced run (as the runs were trained): median {np.median(trained_s):.0f} s."
            if trained_s
            else "",
            *filter(None, [cells_line(asked, units)]),
            "",
            *[f"- {line}" for line in findings],
            "",
        ]
    )
    atomic_to_csv(table, args.out / "forcing_control.csv")
    atomic_to_csv(summary, args.out / "forcing_control_summary.csv")
    atomic_write_text(args.out / "forcing_control.md", block)
    caption = (
        f"{table['run'].nunique()} runs of the population, each forced on its own heads (its strongest previous-token "
        f"head in layer 0 and prefix-matching head in layer 1 at its last checkpoint); β·log(pattern + ε) added to "
        f"their attention scores for N steps, then annealed to 0 over {args.anneal_steps} steps; E measured without "
        "the bias, as the population's. Open markers: forced runs that never emerged, counted at the budget."
    )
    atomic_write_text(args.out / "forcing_control.html", control_page(table, summary, findings, caption))
    print(block)
    if args.update_docs:
        update_docs(block)


if __name__ == "__main__":
    main()
