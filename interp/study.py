"""The main job as a resumable sweep over (source, task) units, on this machine or a Ray cluster.

Each unit is one run analysed for one task (:func:`interp.pipeline.analyse_run`). A worker opens
its source by name, analyses it and sends back the unit's saved state (:mod:`interp.report.report_state`,
as a tar archive in memory, so that workers need no shared disk); the driver stores it in the
sweeps' resumable store (:class:`sweeps.store.ResultsStore`) under ``OUT/units/``::

    OUT/units/state/<unit_id>/   the unit's report state (written first)
    OUT/units/runs/<unit_id>.parquet  its row: the "done" marker (source, task, digests, timings)
    OUT/units/logs/<unit_id>.log      its log (stdout, stderr, traceback)

Every file is written atomically and a row only after its state, so a study killed with SIGKILL
and started again runs exactly the units without a row. A row or a state that cannot be read
(cut short by a partial copy or a full disk: :meth:`sweeps.store.ResultsStore.damaged`,
:func:`damaged_units`) makes its unit not done: it is named in one line and run again, and the
other units are left as they are. The report (tables, ``report.html``) is
then assembled from the store in the order of the names, whatever order units finished in, so
an interrupted and resumed study writes the same tables as an uninterrupted one.

Unit ids: ``<source slug>__<task>-<8 hex of sha256(source, task)>`` (the hash keeps two names
that slug alike apart). Units of several tasks per run merge into one store by this key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import re
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interp.core.devices import check_dtype

logger = logging.getLogger(__name__)

EXECUTORS = ("local", "joblib", "ray")
UNIT_RUNNER = "interp.study:run_unit"


@dataclass(frozen=True)
class Unit:
    """One unit of work: one run (a source name that names exactly one run) and one task."""

    unit_id: str
    source: str
    task: str


def unit_id(source: str, task: str) -> str:
    """The store key of (source, task): readable slug plus a hash of the exact names."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", source.strip("/")).strip("-")[-80:] or "source"
    digest = hashlib.sha256(f"{source}\0{task}".encode()).hexdigest()[:8]
    return f"{slug}__{re.sub(r'[^A-Za-z0-9._-]+', '-', task)}-{digest}"


def expand_sources(names: Sequence[str]) -> list[str]:
    """Source names with every embedded suite name expanded to its runs (``embedded-quick/<run>``),
    in order, without loading or training anything.

    Raises:
        ValueError: as :func:`interp.sources.check_source_name`.
    """
    from interp.sources.catalogue import is_embedded_name, resolve_embedded
    from interp.sources.door import check_source_name

    out: list[str] = []
    for name in names:
        check_source_name(name)
        if is_embedded_name(name) and "/" not in name:
            out += [f"{name}/{run}" for _, run in resolve_embedded(name)]
        else:
            out.append(name)
    return list(dict.fromkeys(out))


def plan_units(names: Sequence[str], tasks: Sequence[Any]) -> list[Unit]:
    """Every (source, task) unit, sources in the order given, then tasks in the order given."""
    return [Unit(unit_id(source, task.name), source, task.name) for source in expand_sources(names) for task in tasks]


def _task_config(task) -> dict:
    """A task as JSON-safe values (a task file's path as a string), rebuilt by :func:`_task_from_config`."""
    fields = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(task).items()}
    return {"name": task.name, "class": f"{type(task).__module__}:{type(task).__qualname__}", "fields": fields}


def _task_from_config(config: dict):
    from sweeps.runners import load_runner

    cls: Any = load_runner(config["class"])
    accepted = {f.name for f in dataclasses.fields(cls) if f.init}  # e.g. a task file's sha256 is derived
    return cls(**{k: v for k, v in config["fields"].items() if k in accepted})


def run_unit(config: dict) -> tuple[dict, pd.DataFrame | None]:
    """Worker side of one unit: open the source, analyse it, return its state as a tar archive.

    ``config``: ``source`` (one run's name), ``task`` (:func:`_task_config`), ``options``
    (keyword arguments of :func:`interp.pipeline.analyse_run`). Returns ``(summary, None)`` with
    summary ``state_tar`` (bytes), ``digests`` (JSON text: step -> weight sha256), ``model_id``.
    """
    from interp.pipeline import MainJobReport, _step_digests, analyse_run
    from interp.report.report_state import save_report_state
    from interp.sources.door import open_sources

    options = dict(config["options"])
    (source,) = open_sources([config["source"]], progress=False)
    try:
        run = analyse_run(source, task=_task_from_config(config["task"]), **options)
        digests = _step_digests(source, run)
    finally:
        source.close()
    with tempfile.TemporaryDirectory() as tmp:
        save_report_state(MainJobReport(runs=[run], threshold=options.get("threshold", 0.5)), Path(tmp) / "state")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(Path(tmp) / "state", arcname="state")
    return {
        "state_tar": buffer.getvalue(),
        "digests": json.dumps(digests, sort_keys=True),
        "model_id": run.model_id,
    }, None


def _store_state(root: Path, uid: str, archive: bytes) -> Path:
    """Unpack a unit's state into ``root/state/<uid>`` atomically (temporary folder, then rename)."""
    final = root / "state" / uid
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{uid}.", dir=final.parent))
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        tar.extractall(tmp, filter="data")
    if final.exists():
        shutil.rmtree(final)
    (tmp / "state").rename(final)
    shutil.rmtree(tmp, ignore_errors=True)
    return final


def _state_problem(folder: Path) -> str | None:
    """What keeps a unit's stored state from loading, or None when it loads."""
    from interp.pipeline import RunAnalysis
    from interp.report.report_state import load_report_state

    if not (folder / "report.json").is_file():
        return "missing"
    try:
        load_report_state(folder, RunAnalysis)
    except Exception as error:  # any reason a saved state does not load: the unit is redone
        text = str(error).strip()
        return f"unreadable ({text.splitlines()[0] if text else type(error).__name__})"
    return None


def damaged_units(units: Sequence[Unit], out_dir: str | Path) -> dict[str, str]:
    """Units whose row or state in ``OUT/units`` cannot be read: ``{unit_id: one line}`` naming the
    file and saying it is run again. A unit with a readable row and a missing state counts too.

    Returns:
        ``{"neox__repetition-1a2b3c4d": "OUT/units/runs/neox__....parquet is unreadable (Parquet
        magic bytes not found in footer...); unit ... is counted as not done and will be run again"}``.
    """
    from sweeps.store import ResultsStore

    store = ResultsStore(Path(out_dir) / "units")
    wanted = {u.unit_id for u in units}
    lines = {
        uid: f"{store.root}/{what}; unit {uid} is counted as not done and will be run again"
        for uid, what in store.damaged().items()
        if uid in wanted
    }
    done = store.done_ids() & wanted
    for uid in sorted(done):
        problem = _state_problem(store.root / "state" / uid)
        if problem is not None:
            lines[uid] = (
                f"{store.root}/state/{uid} is {problem}; unit {uid} is counted as not done and will be run again"
            )
    return dict(sorted(lines.items()))


def _done_units(units: Sequence[Unit], out_dir: str | Path) -> set[str]:
    """Units with a readable row and state (:func:`damaged_units` names the others)."""
    from sweeps.store import ResultsStore

    done = ResultsStore(Path(out_dir) / "units").done_ids() & {u.unit_id for u in units}
    damaged = damaged_units(units, out_dir)
    for line in damaged.values():
        logger.warning(line)
    return done - set(damaged)


def study_status(units: Sequence[Unit], out_dir: str | Path) -> pd.DataFrame:
    """One row per unit: unit_id, source, task, done (its row and state in ``OUT/units`` read;
    :func:`damaged_units` names those that do not)."""
    done = _done_units(units, out_dir)
    return pd.DataFrame(
        [{"unit_id": u.unit_id, "source": u.source, "task": u.task, "done": u.unit_id in done} for u in units],
        columns=["unit_id", "source", "task", "done"],
    )


def check_study_options(executor: str, jobs: int, dtype: str) -> None:
    """Raise a one-line ValueError for a bad executor (or its package missing), jobs or dtype.

    Raises:
        ValueError: ``executor`` not in ``EXECUTORS`` (or, from ``sweeps.executors.check_executor``,
            its package not installed), ``jobs`` not a positive ``int``, or ``dtype`` not in
            :data:`interp.core.devices.DTYPES`.
    """
    from sweeps.executors import check_executor

    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r}; valid executors: {', '.join(EXECUTORS)}")
    if executor != "local":
        check_executor(executor)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be a positive integer")
    check_dtype(dtype)


def run_study(
    names: Sequence[str],
    out_dir: str | Path,
    tasks: Sequence[Any] | None = None,
    executor: str = "local",
    jobs: int = 1,
    address: str | None = None,
    progress: bool = True,
    title: str = "emergence-lens report",
    **options: Any,
):
    """The main job over ``names`` as resumable units; returns the assembled
    :class:`interp.pipeline.MainJobReport` (also saved to ``out_dir``).

    Args:
        names: source names (as for ``emergence run``); suite names expand to their runs.
        out_dir: the output folder: the report's tables there, the units' store in ``units/``.
        tasks: capability tasks (default: one :class:`interp.tasks.RepetitionTask`).
        executor: ``local`` (this process), ``joblib`` (``jobs`` processes) or ``ray`` (a local
            Ray with ``jobs`` CPUs, or the cluster at ``address``).
        options: keyword arguments of :func:`interp.pipeline.analyse_run` (threshold, scan,
            method, prescreen_top_n, device, metric, decompose, scores, prescreen_steps, dtype, hold).

    Raises:
        ValueError: a bad name, executor, jobs or dtype (before anything runs).
        RuntimeError: some units failed (their logs named); the others are stored, and running
            the study again retries only the failed and missing units.
    """
    from tqdm.auto import tqdm

    from interp.core.provenance import make_provenance
    from interp.pipeline import MainJobReport, RunAnalysis
    from interp.report.report_state import load_report_state
    from interp.tasks import RepetitionTask
    from sweeps.executors import RUN_EXECUTORS, _execute_serial
    from sweeps.runners import RunTask
    from sweeps.store import ResultsStore

    check_study_options(executor, jobs, options.get("dtype", "float32"))
    tasks = list(tasks) if tasks else [RepetitionTask()]
    units = plan_units(names, tasks)
    task_by_name = {t.name: t for t in tasks}
    store = ResultsStore(Path(out_dir) / "units")
    done = _done_units(units, out_dir)
    todo = [
        RunTask(
            run_id=u.unit_id,
            runner=UNIT_RUNNER,
            config={"source": u.source, "task": _task_config(task_by_name[u.task]), "options": options},
        )
        for u in units
        if u.unit_id not in done
    ]
    by_id = {u.unit_id: u for u in units}
    failures: list[str] = []
    if todo:
        store.root.mkdir(parents=True, exist_ok=True)
        run = _execute_serial if executor == "local" else RUN_EXECUTORS[executor]
        bar = tqdm(total=len(units), initial=len(units) - len(todo), unit="unit", desc="units", disable=not progress)
        try:
            for record in run(
                [[task] for task in todo], jobs, address
            ):  # one unit of work per (source, task): a RunRecord
                unit = by_id[record.run_id]
                if record.log is not None:
                    store.write_log(record.run_id, record.log)
                if record.status != "ok":
                    failures.append(f"{unit.source} ({unit.task}): {record.error}")
                    logger.warning("unit %s failed: %s", record.run_id, record.error)
                    continue
                _store_state(store.root, record.run_id, record.summary["state_tar"])
                store.write_run(
                    {
                        "run_id": record.run_id,
                        "status": "ok",
                        "source": unit.source,
                        "task": unit.task,
                        "model_id": record.summary["model_id"],
                        "digests": record.summary["digests"],
                        "wall_time_s": record.wall_time_s,
                        "host": record.host,
                        "started_at": record.started_at,
                        "finished_at": record.finished_at,
                    }
                )
                bar.update(1)
        finally:
            bar.close()
    if failures:
        raise RuntimeError(
            f"{len(failures)} of {len(units)} units failed (logs in {store.logs_dir}); "
            f"run again to retry them: {failures[0]}"
        )
    rows = store.results([u.unit_id for u in units]).set_index("run_id")
    runs, digests = [], {}
    for u in units:
        unit_runs, _ = load_report_state(store.root / "state" / u.unit_id, RunAnalysis)
        runs += unit_runs
        digests[rows.loc[u.unit_id, "model_id"]] = json.loads(rows.loc[u.unit_id, "digests"])
    threshold = options.get("threshold", 0.5)
    settings = {
        "sources": list(names),
        "units": [u.unit_id for u in units],
        "tasks": tasks,
        **{k: v for k, v in options.items() if k != "metric" or isinstance(v, str)},
    }
    from interp.emergence import DEFAULT_HOLD

    report = MainJobReport(
        runs=runs,
        threshold=threshold,
        hold=options.get("hold", DEFAULT_HOLD),
        title=title,
        provenance=make_provenance("interp.study.run_study", settings, digests),
    )
    report.save(out_dir)
    return report


__all__ = [
    "EXECUTORS",
    "Unit",
    "check_study_options",
    "damaged_units",
    "expand_sources",
    "plan_units",
    "run_study",
    "run_unit",
    "study_status",
    "unit_id",
]
