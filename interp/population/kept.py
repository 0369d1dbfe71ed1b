"""The populations' kept data: where each population study keeps its runs (a checkout's
``docs/data/``, committed), and how they are written and read back (issue 70: what the entries
share lives here, and no entry imports another).

A kept file is never recomputed, so a fresh clone resumes where the last session stopped; an
unreadable or damaged file is named and removed (:func:`interp.core.io.read_kept_csv`), and the
next run of its entry does its run again. What is kept:

- a run's **capability curve** (:func:`curve_columns`: one row per checkpoint, greedy accuracy and
  mean p(answer) on the repetition task), in ``<folder>/curves/<run>.csv`` of its spec's folder
  (:data:`SPECS`), written by :func:`train_and_keep` (:func:`evaluate_run` at every checkpoint) and
  read by :func:`read_kept_curves`; the seed split's curves (:data:`SEED_SPLIT_KEPT`) carry the two
  seeds too (:func:`split_curve_columns`, :func:`read_kept_split_curves`);
- a run's **head features** per checkpoint (:func:`read_kept_heads`, ``docs/data/population/heads/``);
- claim 2's **mechanism rows** and records (:func:`read_kept_mechanism`, :data:`MECHANISM_KEPT`), its
  **largest-jump pairs** (:func:`read_kept_pairs`, :data:`PAIR_KEPT`) and their **head timelines**
  (:func:`read_kept_timelines`).

:func:`update_docs` replaces one marked block of docs/results.md, where the entries' numbers go.
The paths are a checkout's: an installed wheel carries no ``docs/``, and reading a folder that is
not there gives an empty table.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

__all__ = [
    "DATA",
    "DOCS",
    "MECHANISM_KEPT",
    "N_PROMPTS",
    "PAIR_KEPT",
    "POPULATION_KEPT",
    "SEED_SPLIT_128D_KEPT",
    "SEED_SPLIT_KEPT",
    "SPECS",
    "TASK_SEED",
    "blocks",
    "curve_columns",
    "evaluate_run",
    "keep_runs",
    "keep_spec",
    "kept_curve",
    "kept_heads",
    "kept_paths",
    "parse_seeds",
    "read_kept_curves",
    "read_kept_heads",
    "read_kept_mechanism",
    "read_kept_pairs",
    "read_kept_split_curves",
    "read_kept_timelines",
    "selected_seeds",
    "split_curve_columns",
    "train_and_keep",
    "update_docs",
    "whole_curve",
]

#: A checkout's kept data (committed) and its results page.
DATA = Path(__file__).resolve().parents[2] / "docs" / "data"
DOCS = DATA.parent / "results.md"
#: The population's kept curves (``interp/data/suites/population.yaml``) and its runs' head features.
POPULATION_KEPT = DATA / "population"
#: The task and prompts of each checkpoint's evaluation (those of ``emergence demo``).
N_PROMPTS = 64
TASK_SEED = 0
#: The populations trained to kept curves: shipped suite spec -> (folder of its kept curves, prompts
#: per checkpoint). ``population-decoupled`` (issue 52) holds the rotary dimensions per head fixed;
#: ``population-heads-dhead`` (issue 52, item 1b) crosses {4, 8 heads} with {d_head 8, 16} (Phi models).
SPECS = {
    "population": (POPULATION_KEPT, N_PROMPTS),
    "population-decoupled": (DATA / "population-decoupled", 256),
    "population-8h-long": (DATA / "population-8h-long", 256),
    "population-heads-dhead": (DATA / "population-heads-dhead", 256),
}
#: Claim 2 measured around E on every emerged seed (issue 53): ``<run>.csv`` rows, ``<run>.json`` record.
MECHANISM_KEPT = DATA / "population-mechanism"
#: Claim 2 at each seed's largest-jump pair (issue 65), and its head timelines in ``timeline/``.
PAIR_KEPT = DATA / "population-mechanism-pair"
#: The seed split's curves (issue 72): initialisation × data-order seeds.
SEED_SPLIT_KEPT = DATA / "population-seed-split"
#: The same grid on the population's d_model-128 4-head arm (issue 72 item 5).
SEED_SPLIT_128D_KEPT = DATA / "population-seed-split-128d"


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


def kept_curve(run: str, kept: Path = POPULATION_KEPT) -> Path:
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


def read_kept_curves(kept: Path = POPULATION_KEPT, columns: list[str] | None = None) -> pd.DataFrame:
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
    kept: Path = POPULATION_KEPT,
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
    return keep_runs(
        cfg, [[(size, seed, seed) for size, seed in block] for block in order], jobs, kept, n_prompts, train_only
    )


def keep_runs(
    cfg,
    order: list[list[tuple]],
    jobs: int | None,
    kept: Path,
    n_prompts: int,
    train_only: bool = False,
    split: bool = False,
) -> int:
    """The one loop that trains and keeps population runs: for each block of ``order`` (runs as
    ``(size, initialisation seed, data-order seed)``), train the runs whose curve is not kept in
    ``kept`` (``jobs`` at a time in the kernel-pinned pool, :func:`interp.sources.embedded.iter_suite`)
    and keep each one's curve (:func:`evaluate_run`, ``n_prompts`` prompts per checkpoint) atomically
    as it is evaluated; ``split``: the curve carries its two seeds (:func:`split_curve_columns`);
    ``train_only``: train, keep nothing. A damaged kept file is named and removed first, so that its
    run is redone. Returns how many curves were added; prints each run and each block's seconds."""
    from interp.core.io import atomic_to_csv
    from interp.sources.catalogue import run_name
    from interp.sources.embedded import iter_suite

    (read_kept_split_curves if split else read_kept_curves)(kept)
    added = 0
    for block in order:
        todo = {run_name(*run): run for run in block if not kept_curve(run_name(*run), kept).is_file()}
        if not todo:
            continue
        started = time.time()
        for run, folder in iter_suite(cfg, n_jobs=jobs, runs=list(todo)):
            if train_only:
                continue
            size, seed, data = todo[run]
            curve = evaluate_run(folder, cfg, size, seed, n_prompts)
            if split:
                curve["init_seed"], curve["data_order_seed"] = seed, data
                curve = curve[split_curve_columns()]
            kept_curve(run, kept).parent.mkdir(parents=True, exist_ok=True)
            atomic_to_csv(curve, kept_curve(run, kept))
            added += 1
            print(f"{run}: kept its curve ({len(curve)} checkpoints)", flush=True)
        print(f"block of {len(todo)} run(s) done in {time.time() - started:.0f} s", flush=True)
    return added


def selected_seeds(cfg, spec: str, seeds: str = "", arms: tuple[str, ...] = ()) -> tuple[int, ...]:
    """The seeds of ``cfg`` (the suite spec ``spec``, loaded) that ``seeds`` names (``"0-11"``,
    :func:`parse_seeds`; ``""``: all of them), once ``arms`` are checked to be sizes of the spec.

    Raises:
        ValueError: an arm that is not a size of ``spec`` (listing the sizes), or a bad ``seeds``; one line.
    """
    valid = [size.name for size in cfg.sizes]
    bad = [a for a in arms if a not in valid]
    if bad:
        raise ValueError(f"--arms {bad[0]!r} is not a size of {spec}; valid: {', '.join(valid)}")
    return tuple(parse_seeds(seeds, cfg.seeds)) if seeds else cfg.seeds


def keep_spec(
    spec: str,
    jobs: int | None = None,
    seeds_per_block: int = 2,
    seeds: tuple[int, ...] | None = None,
    arms: tuple[str, ...] = (),
    finished_only: bool = False,
    train_only: bool = False,
):
    """Train and keep the runs of the shipped population ``spec`` (a key of :data:`SPECS`) whose
    curve is not kept yet (:func:`train_and_keep`: ``seeds`` of each arm, default all; ``arms`` in
    this order; nothing with ``finished_only``), then read every kept curve and say how many of the
    spec's runs are kept and the seconds it took. Returns ``(cfg, curves)``: the spec's
    :class:`~interp.sources.catalogue.SuiteConfig` and :func:`read_kept_curves`'s table.

    Raises:
        KeyError: ``spec`` is not one of :data:`SPECS`.
    """
    from interp.sources.catalogue import load_suite_spec

    kept, n_prompts = SPECS[spec]
    cfg = load_suite_spec(spec)
    started = time.time()
    if not finished_only:
        chosen = cfg.seeds if seeds is None else seeds
        train_and_keep(replace(cfg, seeds=chosen), jobs, seeds_per_block, kept, train_only, n_prompts, arms)
    curves = read_kept_curves(kept)
    n_runs = curves["run"].nunique() if len(curves) else 0
    print(f"{n_runs} of {len(cfg.run_names())} runs kept; {time.time() - started:.0f} s", flush=True)
    return cfg, curves


def split_curve_columns() -> list[str]:
    """Columns of a kept curve here: the population's (:func:`curve_columns`;
    ``seed`` is the initialisation seed) plus ``init_seed`` and ``data_order_seed``."""
    return [*curve_columns(), "init_seed", "data_order_seed"]


def read_kept_split_curves(kept: Path = SEED_SPLIT_KEPT) -> pd.DataFrame:
    """Every kept curve (:func:`split_curve_columns`); a damaged file is named and removed."""
    if not (kept / "curves").is_dir():
        return pd.DataFrame(columns=split_curve_columns())
    return read_kept_curves(kept, split_curve_columns())


def kept_heads(run: str, kept: Path = POPULATION_KEPT) -> Path:
    """The kept head-feature file of one run."""
    return kept / "heads" / f"{run}.csv"


def read_kept_heads(kept: Path = POPULATION_KEPT) -> pd.DataFrame:
    """Every kept head-feature table as one (:data:`interp.population.heads.FEATURE_COLUMNS`); a
    damaged file (unreadable, missing values, a checkpoint cut short) is named and removed."""
    from interp.core.io import read_kept_csv
    from interp.population.heads import FEATURE_COLUMNS

    # a damaged file is named and removed: the next call with the run's checkpoints computes it again
    frames = [
        read_kept_csv(path, FEATURE_COLUMNS, _whole_heads, then="its head features are computed again")
        for path in sorted((kept / "heads").glob("*.csv"))
    ]
    frames = [f for f in frames if f is not None]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=FEATURE_COLUMNS)


def _whole_heads(frame: pd.DataFrame) -> bool:
    """Rows, no missing value, and every checkpoint with the same (layer, head) rows."""
    if frame.empty or not bool(frame.notna().all().all()):
        return False
    return frame.groupby("step").size().nunique() == 1


def kept_paths(run: str, kept: Path = MECHANISM_KEPT) -> tuple[Path, Path]:
    """The kept rows (``.csv``) and record (``.json``) of one run."""
    return kept / f"{run}.csv", kept / f"{run}.json"


def read_kept_mechanism(kept: Path = MECHANISM_KEPT, echo=print) -> tuple[pd.DataFrame, list[dict]]:
    """Every kept run of claim 2 around E (:data:`MECHANISM_KEPT`): its rows (:data:`interp.population.mechanism.ROW_COLUMNS`) and records.
    A run whose record is unreadable or whose rows are missing or damaged is named and both files
    removed (the next call measures it again)."""
    from interp.core.io import read_kept_csv
    from interp.population.mechanism import ROW_COLUMNS

    frames, records = [], []
    for record_path in sorted(kept.glob("*.json")):
        rows_path = record_path.with_suffix(".csv")
        try:
            record = json.loads(record_path.read_text())
            bad = None if record.get("run") == record_path.stem else "names another run"
        except (OSError, ValueError) as error:
            record, bad = None, f"cannot be read ({error})"
        rows = None
        if bad is None:
            if record.get("crossing") is False:  # no held crossing on 512 prompts: no rows, by design
                rows = pd.DataFrame(columns=ROW_COLUMNS)
            else:
                rows = read_kept_csv(rows_path, ROW_COLUMNS, lambda f: len(f) > 0, then="its run is measured again")
                bad = None if rows is not None else "has no whole rows file beside it"
        if bad is not None:
            echo(f"warning: {record_path} {bad}; its run is measured again")
            record_path.unlink(missing_ok=True)
            rows_path.unlink(missing_ok=True)
            continue
        frames.append(rows)
        records.append(record)
    frames = [f for f in frames if len(f)]
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=ROW_COLUMNS)), records


def read_kept_pairs(kept: Path = PAIR_KEPT, echo=print) -> tuple[pd.DataFrame, list[dict]]:
    """Every kept largest-jump-pair run: its rows and records (a damaged pair of files is named,
    removed and measured again)."""
    from interp.core.io import read_kept_csv
    from interp.population.claim2_pair import PAIR_COLUMNS

    frames, records = [], []
    for record_path in sorted(kept.glob("*.json")):
        try:
            record = json.loads(record_path.read_text())
            rows = read_kept_csv(
                record_path.with_suffix(".csv"), PAIR_COLUMNS, lambda f: len(f) > 0, then="its run is measured again"
            )
            bad = None if rows is not None and record.get("run") == record_path.stem else "has no whole rows beside it"
        except (OSError, ValueError) as error:
            rows, bad = None, f"cannot be read ({error})"
        if bad is not None:
            echo(f"warning: {record_path} {bad}; its run is measured again")
            record_path.unlink(missing_ok=True)
            record_path.with_suffix(".csv").unlink(missing_ok=True)
            continue
        frames.append(rows)
        records.append(record)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=PAIR_COLUMNS)), records


def read_kept_timelines(kept: Path = PAIR_KEPT, echo=print) -> dict[str, pd.DataFrame]:
    """Every kept head timeline (run name -> table); a damaged file is named and removed (the
    next ``--pair largest-jump --timeline`` call computes it again)."""
    from interp.core.io import read_kept_csv
    from interp.population.claim2_timeline import TIMELINE_KEPT_COLUMNS

    found = {}
    for path in sorted((kept / "timeline").glob("*.csv")):
        table = read_kept_csv(path, TIMELINE_KEPT_COLUMNS, lambda f: len(f) > 0, then="its timeline is computed again")
        if table is None:
            path.unlink(missing_ok=True)
            continue
        found[path.stem] = table
    return found


def update_docs(block: str, markers: tuple[str, str], docs: Path | None = None) -> None:
    """Replace the block of ``docs`` (default :data:`DOCS`, docs/results.md, read at the call) between ``markers`` (begin, end) with
    ``block``, atomically (:func:`interp.core.io.replace_block`).

    Raises:
        SystemExit: ``docs`` has no such block, one line naming the file and the markers (the
            callers are the entries' ``--update-docs``).
    """
    from interp.core.io import replace_block

    try:
        replace_block(DOCS if docs is None else docs, block, markers)
    except ValueError as error:
        raise SystemExit(str(error)) from None
