"""Forced runs of a population (the pattern-bottleneck test, issue 44's forcing and its
control): a run of a shipped population trained again with a bias on chosen heads' attention
patterns (:class:`interp.forcing.Forcing`), its capability curve evaluated exactly as the
population's (:func:`interp.population.kept.evaluate_run`) and kept, so a stopped entry resumes.

What the forcing entries share (issue 70: no entry imports another): the runs named on the command
line (:func:`select_runs`), the heads forced (:func:`chosen_heads`), the plan of units over a grid
of cells (β, N) (:func:`parse_cells`, :func:`plan`), training (:func:`train_forced`,
:func:`train_missing`), the kept curves (:func:`forced_curve`, :func:`read_forced`,
:func:`keep_forced_curve`), a curve's point of emergence (:func:`crossing_of`) and a mean with its
95 % t-interval (:func:`mean_interval`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd

from interp.core.io import atomic_to_csv, atomic_write_text
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

__all__ = [
    "DEFAULT_CELLS",
    "PATTERNS",
    "chosen_heads",
    "crossing_of",
    "forced_curve",
    "forcing_of",
    "keep_forced_curve",
    "mean_interval",
    "parse_cells",
    "plan",
    "read_forced",
    "select_runs",
    "train_forced",
    "train_missing",
]

#: two-sided 95 % t quantiles by degrees of freedom (1..30)
T95 = [
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
]

#: The patterns of each condition: (layer-0 head, layer-1 head).
PATTERNS = {"true": ("previous_token", "induction"), "control": ("offset_3", "induction_offset_3")}
#: The grid's cells ``β:N`` (β in nats per unit of log(pattern + ε), N in steps at full β): the
#: true forcing of §3 (β 1, N 500), a shorter one (N 250) and a weaker one (β 0.25).
DEFAULT_CELLS = "1:500,1:250,0.25:500"


def train_forced(size, seed: int, cfg, forcing, final: Path) -> Path:
    """Train one forced run into ``final`` (a temporary sibling renamed at the end); a local suite."""
    import torch

    from interp.sources import embedded, environment, make_byte_tokenizer

    if (final / "suite.json").exists():
        return final
    torch.set_num_threads(cfg.threads)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    make_byte_tokenizer().save_pretrained(tmp / "tokenizer")
    started = time.time()
    losses = embedded.train_run(size, seed, cfg, tmp, forcing=forcing)
    atomic_to_csv(losses, tmp / embedded.LOSS_FILE)
    meta = {
        "model_id": f"forced/{final.parent.name}/{final.name}",
        "size": dataclasses.asdict(size),
        "seed": seed,
        "steps": list(cfg.checkpoint_steps_for(size)),
        "config": dataclasses.asdict(cfg),
        "forcing": forcing.as_dict(),
        "train_seconds": round(time.time() - started, 1),
        "environment": environment.environment(cfg),
        "resumable": True,
    }
    atomic_write_text(tmp / "suite.json", json.dumps(meta, indent=2))
    if final.exists():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, final)
    return final


def select_runs(cfg, runs: str | None) -> list[tuple]:
    """``[(size, seed), ...]`` of the suite named by ``--runs`` (model or run names), in suite order.

    Raises:
        ValueError: a name that is neither a model nor a run of the suite (the valid ones named).
    """
    from interp.sources.catalogue import run_name

    every = [(size, seed) for size in cfg.sizes for seed in cfg.seeds]
    if runs is None:
        return every
    wanted = [name.strip() for name in runs.split(",") if name.strip()]
    valid = {size.name for size in cfg.sizes} | {run_name(size, seed) for size, seed in every}
    bad = [name for name in wanted if name not in valid]
    if bad or not wanted:
        raise ValueError(
            f"--runs {runs!r}: {', '.join(bad) or 'no name'} not in this suite; valid: {', '.join(sorted(valid))}"
        )
    return [(size, seed) for size, seed in every if size.name in wanted or run_name(size, seed) in wanted]


def crossing_of(curve: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD, hold: int = DEFAULT_HOLD) -> tuple:
    """The point of emergence of a saved curve (the rule of :func:`interp.readiness.crossing`)."""
    from interp.readiness import crossing

    return crossing(curve["step"], curve["accuracy"], threshold, hold)


def mean_interval(values) -> tuple[float, float, float]:
    """``(mean, lo, hi)``: 95 % t-interval over the values (NaN where fewer than 2)."""
    x = np.asarray([v for v in values if v is not None and not pd.isna(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    if len(x) < 2:
        return float(x.mean()), math.nan, math.nan
    t = T95[min(len(x) - 1, len(T95)) - 1]
    half = t * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean()), float(x.mean() - half), float(x.mean() + half)


def chosen_heads(heads: pd.DataFrame, run: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """``((0, h0), (1, h1))``: the run's layer-0 head with the highest previous-token score and its
    layer-1 head with the highest prefix-matching score, at its last checkpoint.

    Raises:
        ValueError: no head features of ``run``.
    """
    table = heads[heads["run"] == run]
    if table.empty:
        raise ValueError(f"no head features of run {run!r} (keep them first: python -m analyses.population_insight)")
    last = table[table["step"] == table["step"].max()]
    l0 = last[last["layer"] == 0].sort_values("previous_token", ascending=False).iloc[0]
    l1 = last[last["layer"] == 1].sort_values("prefix_matching", ascending=False).iloc[0]
    return (0, int(l0["head"])), (1, int(l1["head"]))


def forcing_of(condition: str, prev: tuple[int, int], ind: tuple[int, int], beta: float, steps: int, anneal: int):
    """The :class:`interp.forcing.Forcing` of a condition (:data:`PATTERNS`).

    Raises:
        ValueError: an unknown condition (the valid ones named), or a bad beta / steps (Forcing's).
    """
    from interp.forcing import Forcing

    if condition not in PATTERNS:
        raise ValueError(f"condition {condition!r} is unknown; valid: {', '.join(PATTERNS)}")
    p0, p1 = PATTERNS[condition]
    return Forcing(((*prev, p0), (*ind, p1)), beta=beta, steps=steps, anneal_steps=anneal)


def plan(selected, heads: pd.DataFrame, cells, anneal: int, root: Path) -> list[dict]:
    """One unit per (run, cell ``(β, N)`` of ``cells``, condition): ``run``, ``size``, ``seed``,
    ``condition``, ``beta``, ``force_steps``, ``forcing``, ``folder``."""
    from interp.sources.catalogue import run_name

    units = []
    for size, seed in selected:
        run = run_name(size, seed)
        prev, ind = chosen_heads(heads, run)
        for beta, n in cells:
            for condition in PATTERNS:
                units.append(
                    {
                        "run": run,
                        "size": size,
                        "seed": seed,
                        "condition": condition,
                        "beta": float(beta),
                        "force_steps": int(n),
                        "forcing": forcing_of(condition, prev, ind, beta, n, anneal),
                        "folder": root / run / f"{condition}-b{beta:g}-n{n}",
                    }
                )
    return units


def parse_cells(text: str) -> list[tuple[float, int]]:
    """``"1:500,0.25:500"`` -> ``[(1.0, 500), (0.25, 500)]``, in the given order, each once.

    Raises:
        ValueError: an item that is not ``β:N`` with β >= 0 (nats) and N >= 1 (steps), one line.
    """
    cells = []
    for item in filter(None, (v.strip() for v in text.split(","))):
        beta, _, n = item.partition(":")
        try:
            cell = (float(beta), int(n))
        except ValueError:
            cell = (-1.0, 0)
        if not (math.isfinite(cell[0]) and cell[0] >= 0) or cell[1] < 1:
            cells = []
            break
        cells += [cell] if cell not in cells else []
    if not cells:
        raise ValueError(
            f"--cells {text!r} must be comma-separated β:N pairs (β >= 0 nats, N >= 1 steps), e.g. {DEFAULT_CELLS}"
        )
    return cells


def forced_curve(unit: dict, kept: Path) -> Path:
    """The kept capability curve of one forced run:
    ``kept/runs/<run>-<condition>-b<β>-n<N>-a<anneal>.csv``."""
    return kept / "runs" / f"{unit['run']}-{unit['folder'].name}-a{unit['forcing'].anneal_steps}.csv"


def read_forced(unit: dict, kept: Path, echo=print) -> pd.DataFrame | None:
    """The kept curve of one forced run, or None when there is none; a damaged one (unreadable,
    or not a whole curve: :func:`interp.population.kept.whole_curve`, with ``train_seconds``) is named,
    removed and None returned, so that its run is trained and evaluated again."""
    from interp.core.io import read_kept_csv
    from interp.population.kept import curve_columns, whole_curve

    return read_kept_csv(
        forced_curve(unit, kept),
        [*curve_columns(), "train_seconds"],
        whole_curve,
        "is not a whole curve",
        "its run is trained and evaluated again",
        echo,
    )


def train_missing(units: list[dict], cfg, jobs: int, kept: Path, echo=print, n_prompts: int | None = None) -> int:
    """Train every unit whose curve is not kept and evaluate it as soon as it finishes (its curve
    kept at once, with the run's ``train_seconds``), in a pool of pinned workers; returns how many
    were trained. A unit whose curve is kept is never trained again, so the entry resumes on any
    clone; one whose run folder is complete here is only evaluated. ``n_prompts``: prompts per
    checkpoint of the evaluation (default: the population's, :func:`keep_forced_curve`)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from interp.core.kernel_pins import pinned_context

    missing = [u for u in units if read_forced(u, kept, echo) is None]
    if not missing:
        return 0
    started = time.time()
    with ProcessPoolExecutor(min(jobs, len(missing)), mp_context=pinned_context(cfg.threads)) as pool:
        futures = {pool.submit(train_forced, u["size"], u["seed"], cfg, u["forcing"], u["folder"]): u for u in missing}
        for future in as_completed(futures):
            keep_forced_curve(futures[future], cfg, kept, n_prompts)
            echo(f"trained and evaluated {future.result()} ({time.time() - started:.0f} s)")
    return len(missing)


def keep_forced_curve(unit: dict, cfg, kept: Path, n_prompts: int | None = None) -> pd.DataFrame:
    """Evaluate one trained forced run exactly as the population's runs
    (:func:`interp.population.kept.evaluate_run`; ``n_prompts`` prompts per checkpoint, default the
    population's 64) and keep its curve (``train_seconds`` added)."""
    from interp.population.kept import N_PROMPTS, evaluate_run

    curve = evaluate_run(unit["folder"], cfg, unit["size"], unit["seed"], n_prompts or N_PROMPTS)
    meta = json.loads((unit["folder"] / "suite.json").read_text())
    curve["train_seconds"] = meta.get("train_seconds")
    atomic_to_csv(curve, forced_curve(unit, kept))
    return curve
