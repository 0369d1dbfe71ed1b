"""The sweep driver: plan the runs of a spec, skip those already in the results store, send the
rest to an executor, and record each finished run (ok or failed) as it arrives."""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interp.core.io import atomic_write_text, config_json, remove_folder
from interp.core.progress import progress_bar, say
from interp.core.spec_file import dump_spec_text
from sweeps.execute import RunRecord, git_commit, group_state_dir, group_units
from sweeps.executors import RUN_EXECUTORS, check_executor, failed_record, started_marker, starts_of
from sweeps.runners import RunnerLike, RunTask, plan_runs, runner_name
from sweeps.spec import SweepSpec, load_spec
from sweeps.store import ResultsStore

# Columns the sweep adds to every row; a config field or summary key must not shadow them.
META_COLUMNS = (
    "run_id",
    "status",
    "error",
    "wall_time_s",
    "runner",
    "sweep",
    "config_json",
    "versions",
    "git_commit",
    "host",
    "started_at",
    "finished_at",
    "worker_kills",
)
#: A failed run whose worker was killed this many times (``worker_kills``) is not retried by
#: ``retry_failed``: it is skipped with its reason (it would kill its worker again).
KILLS_BEFORE_SKIP = 2
CONSOLIDATE_EVERY_S = 2.0

logger = logging.getLogger(__name__)


@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did.

    Attributes:
        out_dir: the sweep folder.
        results: one row per run of this spec (finished now or before), sorted by run_id.
        n_planned: runs in the spec (after de-duplication).
        n_skipped: runs that already had a row.
        n_ran: runs executed now.
        n_failed: runs of this spec whose row says failed.
    """

    out_dir: Path
    results: pd.DataFrame
    n_planned: int
    n_skipped: int
    n_ran: int
    n_failed: int


def run_sweep(
    spec: SweepSpec | Mapping[str, Any] | str | os.PathLike,
    out_dir: str | os.PathLike,
    jobs: int = 1,
    executor: str = "joblib",
    ray_address: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    runner: str | RunnerLike | None = None,
    default_runner: str | None = None,
    force: bool = False,
    ensemble: int = 1,
) -> SweepOutcome:
    """Run every missing run of a sweep and record each in ``out_dir``'s results store.

    Args:
        spec: a :class:`SweepSpec`, its mapping, or a YAML/TOML/JSON file.
        out_dir: the sweep folder (created); rows in ``out_dir/results.parquet``.
        jobs: worker processes (joblib) or CPUs for a local Ray; 1 = in this process.
        executor: ``"joblib"`` (processes on this machine) or ``"ray"``.
        ray_address: an existing Ray cluster (e.g. ``"ray://head:10001"`` or ``"auto"``);
            None = start a local Ray with ``jobs`` CPUs. Remote workers must have this package.
        retry_failed: also re-run runs recorded as failed.
        progress: the runs done of the total on standard error
            (:func:`interp.core.progress.progress_bar`: a bar in a terminal, plain lines every 30 s
            where standard error is not one), with a line saying how many runs a resumed sweep
            found already done; False: silent.
        runner: overrides the spec's runner (a name, or a callable; a callable is pickled to
            joblib workers and cannot reach a remote Ray cluster unless importable there).
        default_runner: the runner when neither ``runner`` nor the spec names one.
        force: start over: a sweep folder that holds another spec is emptied first.

    One sweep per folder: a folder holding another spec (``spec.yaml``; compared by
    :func:`spec_digest`) is refused unless ``force``; the same spec resumes.
        ensemble: at most this many runs that the runner can train together (its
            ``group_key`` / ``run_group``: for the synthetic trainer, grid points that differ only
            in seed, data_seed, s or n_rules; :func:`synthetic.ensemble.train_ensemble`) go to a
            worker as one unit; 1 = every run alone. Rows have the same columns either way;
            values agree to float rounding (see synthetic/ensemble.py).

    Returns:
        A :class:`SweepOutcome`.

    Raises:
        ValueError: bad spec (unknown field, bad type, no runner), ``jobs < 1``, an unknown
            executor or one whose package is missing, ``out_dir`` an existing file, ``out_dir``
            a sweep folder of another spec (without ``force``). All are checked before anything
            is written.
    """
    # Everything is checked before the folder, the spec copy or the progress bar appear.
    check_executor(executor)
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be a positive integer")
    if not isinstance(ensemble, int) or ensemble < 1:
        raise ValueError(f"ensemble={ensemble!r} must be a positive integer (1 = every run alone)")
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise ValueError(f"sweep folder {str(out_dir)!r} exists and is not a folder")
    spec = load_spec(spec)
    tasks = plan_runs(spec, runner, default_runner=default_runner)
    if spec.runner is None and runner is None:
        spec.runner = default_runner
    store = ResultsStore(out_dir)
    if check_spec_folder(store.root, spec, force):
        _empty_sweep_folder(store.root)
    store.root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(store.root / "spec.yaml", dump_spec_text(spec.to_dict()))
    from interp.core.provenance import make_provenance, write_provenance

    write_provenance(
        store.root,
        make_provenance(
            "sweeps.run_sweep",
            {
                "spec": spec.to_dict(),
                "jobs": jobs,
                "executor": executor,
                "retry_failed": retry_failed,
                "ensemble": ensemble,
            },
        ),
    )

    for line in store.damaged_lines():  # cut short: not done, run again (the file is replaced)
        logger.warning(line)
    done = store.done_ids()
    prior = store.results([t.run_id for t in tasks if t.run_id in done]) if done else pd.DataFrame()
    kills = worker_kills(prior)
    if retry_failed and not prior.empty:
        failed = prior.loc[prior["status"] != "ok"]
        for row in failed.itertuples():
            if kills.get(row.run_id, 0) >= KILLS_BEFORE_SKIP:  # it would kill its worker again
                warnings.warn(
                    f"run {row.run_id} skipped: it killed its worker twice ({row.error}); its row stays failed "
                    f"(log: {store.log_path(row.run_id)})",
                    RuntimeWarning,
                    stacklevel=2,
                )
            else:
                done.discard(row.run_id)
    todo = [t for t in tasks if t.run_id not in done]
    # joblib workers share this filesystem and write their log live; Ray workers may be on
    # other hosts, so they send the log back with the result and the driver writes it.
    for t in todo:
        t.log_path = str(store.log_path(t.run_id)) if executor == "joblib" else None
        t.state_dir = str(store.root / "partial" / t.run_id) if executor == "joblib" else None

    commit = git_commit()
    sweep_name = spec.name
    if executor == "joblib" and jobs == 1:  # in this process: a run that killed it twice is not run a third time
        for t in [t for t in todo if starts_of(t) >= KILLS_BEFORE_SKIP]:
            todo.remove(t)
            why = (
                f"the sweep's process died {starts_of(t)} times while this run ran (killed by a signal: out of memory?)"
            )
            row = build_row(t, failed_record(t, why, f"{why}\n", killed=True), commit, sweep_name)
            row["worker_kills"] = starts_of(t)
            store.write_run(row)
            marker = started_marker(t)
            if marker is not None:
                marker.unlink()
            warnings.warn(
                f"run {t.run_id} skipped: {why}; recorded failed (log: {store.log_path(t.run_id)})",
                RuntimeWarning,
                stacklevel=2,
            )
    n_ran = n_failed_now = 0
    last_consolidated = time.monotonic()
    # the house's progress (interp.core.progress): a bar in a terminal or a kernel, plain lines
    # every 30 s where standard error is neither; runs already in the store count in the
    # position, not in the rate, and a resumed sweep says so
    desc = sweep_name or "sweep"  # (a disabled tqdm bar keeps no desc)
    bar = progress_bar(len(tasks), desc, unit="run", enabled=progress, initial=len(tasks) - len(todo))
    if not todo:
        say(bar, f"{desc}: all {len(tasks)} runs already in {store.root}; nothing to run")
    elif len(todo) < len(tasks):
        say(bar, f"{desc}: continuing: {len(tasks) - len(todo)} of {len(tasks)} runs already in {store.root}")
    by_id = {t.run_id: t for t in todo}
    units = group_units(todo, ensemble)
    # the state folders of unfinished runs (STORE/partial/): each goes once its runs' rows are written
    state_of = {t.run_id: [t.state_dir] for t in todo if t.state_dir is not None}
    waiting: dict[str, set[str]] = {}
    for unit in units:
        folder = group_state_dir(unit) if len(unit) > 1 else None
        if folder is not None:
            waiting[folder] = {t.run_id for t in unit}
            for t in unit:
                state_of[t.run_id].append(folder)
    try:
        if todo:
            for record in RUN_EXECUTORS[executor](units, jobs, ray_address):
                task = by_id[record.run_id]
                if record.log is not None:
                    store.write_log(record.run_id, record.log)
                row = build_row(task, record, commit, sweep_name)
                if record.killed:  # counted across resumes: a run that kills its worker twice is skipped
                    row["worker_kills"] = kills.get(record.run_id, 0) + 1
                store.write_run(row, record.metrics)
                marker = started_marker(task)
                if marker is not None and marker.exists():
                    marker.unlink()
                for folder in state_of.get(record.run_id, []):
                    members = waiting.get(folder)
                    if members is not None:  # a group's folder: when the last of its rows is written
                        members.discard(record.run_id)
                        if members:
                            continue
                    remove_folder(folder)  # renamed first: a kill mid-removal leaves no half state
                n_ran += 1
                bar.update(1)
                if record.status != "ok":
                    n_failed_now += 1
                    bar.set_postfix_str(f"{n_failed_now} failed")
                    logger.warning(
                        "run %s failed: %s (log: %s)", record.run_id, record.error, store.log_path(record.run_id)
                    )
                if time.monotonic() - last_consolidated > CONSOLIDATE_EVERY_S:
                    store.consolidate()
                    last_consolidated = time.monotonic()
    finally:
        bar.close()
        store.consolidate()
    results = store.results([t.run_id for t in tasks])
    n_failed = int((results["status"] != "ok").sum()) if not results.empty else 0
    return SweepOutcome(
        out_dir=store.root,
        results=results,
        n_planned=len(tasks),
        n_skipped=len(tasks) - len(todo),
        n_ran=n_ran,
        n_failed=n_failed,
    )


def worker_kills(results: pd.DataFrame) -> dict[str, int]:
    """``{run_id: times its worker was killed under it}`` of a results table (``worker_kills``)."""
    if results.empty or "worker_kills" not in results.columns:
        return {}
    killed = results.dropna(subset=["worker_kills"])
    return {str(r): int(n) for r, n in zip(killed["run_id"], killed["worker_kills"])}


def spec_digest(spec: SweepSpec) -> str:
    """SHA-256 (hex) of a spec's canonical JSON, its ``name`` left out (a renamed copy of the
    same grid is the same sweep)."""
    import hashlib

    content = {k: v for k, v in spec.to_dict().items() if k != "name"}
    return hashlib.sha256(config_json(content).encode()).hexdigest()


def check_spec_folder(root: str | os.PathLike, spec: SweepSpec, force: bool = False) -> bool:
    """One sweep per folder: whether ``root`` holds another spec's sweep (its ``spec.yaml``
    differs from ``spec`` by :func:`spec_digest`) that ``force`` will delete.

    Returns:
        False for a new folder, a folder without ``spec.yaml`` or the same spec; True for
        another spec with ``force``.

    Raises:
        ValueError: another spec without ``force``; the one line names both (name, digest).
    """
    held = Path(root) / "spec.yaml"
    if not held.is_file():
        return False
    old = SweepSpec.from_file(held)
    old_digest, new_digest = spec_digest(old), spec_digest(spec)
    if old_digest == new_digest:
        return False
    if not force:
        raise ValueError(
            f"sweep folder {str(root)!r} holds spec {old.name or '(unnamed)'!r} (digest "
            f"{old_digest[:12]}); this spec {spec.name or '(unnamed)'!r} (digest {new_digest[:12]}) "
            "differs: resume with the same spec, use another --out, or --force to start over "
            "(deletes the folder's runs)"
        )
    return True


def _empty_sweep_folder(root: Path) -> None:
    import shutil

    for child in Path(root).iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def build_row(task: RunTask, record: RunRecord, commit: str | None, sweep_name: str = "") -> dict[str, Any]:
    """One results row: run_id, status, error, the config fields, the summary, then metadata.

    A summary key equal to a config field or a metadata column is stored as ``summary_<key>``;
    a value that is not a scalar (list, dict) is stored as JSON text.

    Raises:
        ValueError: a config field has the name of a metadata column (``META_COLUMNS``).
    """
    row: dict[str, Any] = {"run_id": task.run_id, "status": record.status, "error": record.error}
    for key, value in task.config.items():
        if key in META_COLUMNS:
            raise ValueError(f"config field {key!r} clashes with a results column; rename it")
        row[key] = _flat(value)
    for key, value in record.summary.items():
        row[f"summary_{key}" if key in row or key in META_COLUMNS else key] = _flat(value)
    # The summary's own wall time (training only) is kept; this one covers the whole run.
    row["wall_time_s"] = record.wall_time_s
    row.update(
        runner=runner_name(task.runner),
        sweep=sweep_name,
        config_json=config_json(task.config),
        versions=json.dumps(record.versions, sort_keys=True),
        git_commit=commit,
        host=record.host,
        started_at=record.started_at,
        finished_at=record.finished_at,
    )
    return row


def _flat(value: Any) -> Any:
    """Scalars stay; anything else (list, dict, object) becomes JSON text, so every row is a
    flat record whose columns keep one type across runs."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def failure_lines(results: pd.DataFrame) -> list[str]:
    """``"<run_id>: <error>"`` per failed run of a results table (empty when all are ok)."""
    if results.empty or "status" not in results.columns:
        return []
    failed = results[results["status"] != "ok"]
    return [f"{row.run_id}: {row.error}" for row in failed.itertuples()]
