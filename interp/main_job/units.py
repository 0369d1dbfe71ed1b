"""The main job's units of work and their resumable store: one unit is one run analysed for one
task (:func:`interp.main_job.runner.analyse_run`); :func:`interp.main_job.runner.run_study` stores each
finished unit's report state (:mod:`interp.report.report_state`) in the sweeps' store
(:class:`sweeps.store.ResultsStore`) under ``OUT/units/``, whichever executor computed it::

    OUT/units/state/<unit_id>/   the unit's report state (written first)
    OUT/units/runs/<unit_id>.parquet  its row: the "done" marker (source, task, digests, timings)
    OUT/units/logs/<unit_id>.log      its log

Every file is written atomically and a row only after its state, so a study killed with SIGKILL
and started again runs exactly the units without a row. A row or a state that cannot be read
(cut short by a partial copy or a full disk: :meth:`sweeps.store.ResultsStore.damaged`,
:func:`damaged_units`) makes its unit not done: it is named in one line and run again, and the
other units are left as they are. The report (tables, ``report.html``) is then assembled from
the store in the order of the names, whatever order units finished in, so an interrupted and
resumed study writes the same tables as an uninterrupted one.

Unit ids: ``<source slug>__<task>-<8 hex of sha256(source, task)>`` (a folder's slug is its own
name, not its whole path; the hash keeps two names that slug alike apart). Messages name a unit
as the user named its run (:func:`unit_label`), not by its id. Units of several tasks per run merge into one store by this key.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interp.core.io import remove_folder
from interp.core.settings import StudyConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Unit:
    """One unit of work: one run (a source name that names exactly one run) and one task."""

    unit_id: str
    source: str
    task: str


def unit_id(source: str, task: str) -> str:
    """The store key of (source, task): a readable slug plus a hash of the exact names.

    The slug of a folder on disk is its own name (``/data/runs/neox-seed3`` -> ``neox-seed3``),
    not a slug of the whole path; of any other name (``embedded-quick/neox-2l-64d-seed1``, a hub
    id) the name. The hash of the exact names keeps two folders of one name apart.
    """
    name = source.rstrip("/") or source
    if os.path.isabs(name) or name.startswith(("./", "../", "~")) or os.path.exists(name):
        name = os.path.basename(name) or name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[-80:] or "source"
    digest = hashlib.sha256(f"{source}\0{task}".encode()).hexdigest()[:8]
    return f"{slug}__{re.sub(r'[^A-Za-z0-9._-]+', '-', task)}-{digest}"


def unit_label(unit: Unit) -> str:
    """How messages name a unit: the run as the user named it and the task, ``"/data/runs/neox-seed3, task repetition"``."""
    return f"{unit.source}, task {unit.task}"


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


def store_unit(root: Path, uid: str, run, config: StudyConfig) -> Path:
    """Save one unit's analysis as its report state in ``root/state/<uid>`` atomically (written
    into a temporary folder beside it, then renamed); returns the folder.

    The state's ``report.json`` carries the whole settings object the unit was computed with
    (``settings``: :meth:`StudyConfig.as_dict`; :func:`unit_settings` reads it back), and the
    report's threshold and hold are that object's.

    Args:
        root: the units' store (``OUT/units``).
        uid: the unit's id (:func:`unit_id`).
        run: the unit's :class:`interp.main_job.report.RunAnalysis` (the same object whichever
            executor computed it: joblib and Ray send it back pickled).
        config: the settings the unit was computed with.
    """
    from interp.main_job.report import MainJobReport
    from interp.report.report_state import save_report_state

    final = root / "state" / uid
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{uid}.", dir=final.parent))
    report = MainJobReport(runs=[run], threshold=config.threshold, hold=config.hold)
    save_report_state(report, tmp / "state", settings=config.as_dict())
    remove_folder(final)  # renamed first: a kill mid-removal never leaves half a state under its name
    (tmp / "state").rename(final)
    shutil.rmtree(tmp, ignore_errors=True)
    return final


def unit_settings(root: str | Path, uid: str) -> StudyConfig | None:
    """The settings a stored unit was computed with (:func:`store_unit`), or None for a state
    stored before units carried them.

    Args:
        root: the units' store (``OUT/units``).
        uid: the unit's id.

    Raises:
        ValueError: the unit has no stored state (``report.json``), or its settings are not a
            valid :class:`StudyConfig` (a field this version does not know: one line naming it).
    """
    import json

    index = Path(root) / "state" / uid / "report.json"
    if not index.is_file():
        raise ValueError(f"unit {uid!r} has no stored state ({index} is missing); run the study first")
    settings = json.loads(index.read_text()).get("settings")
    return None if settings is None else StudyConfig.from_dict(settings)


def _state_problem(folder: Path) -> str | None:
    """What keeps a unit's stored state from loading, or None when it loads."""
    from interp.main_job.report import RunAnalysis
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
        magic bytes not found in footer...); the unit /data/neox, task repetition is counted as not
        done and will be run again"}``.
    """
    from sweeps.store import ResultsStore

    store = ResultsStore(Path(out_dir) / "units")
    wanted = {u.unit_id: u for u in units}
    lines = {
        uid: f"{store.root}/{what}; the unit {unit_label(wanted[uid])} is counted as not done and will be run again"
        for uid, what in store.damaged().items()
        if uid in wanted
    }
    done = store.done_ids() & set(wanted)
    for uid in sorted(done):
        problem = _state_problem(store.root / "state" / uid)
        if problem is not None:
            lines[uid] = (
                f"{store.root}/state/{uid} is {problem}; the unit {unit_label(wanted[uid])} is counted as not done "
                "and will be run again"
            )
    return dict(sorted(lines.items()))


def done_units(units: Sequence[Unit], out_dir: str | Path) -> set[str]:
    """Units with a readable row and state (:func:`damaged_units` names the others; this prints
    nothing, so that whoever shows those lines shows each once)."""
    from sweeps.store import ResultsStore

    done = ResultsStore(Path(out_dir) / "units").done_ids() & {u.unit_id for u in units}
    return done - set(damaged_units(units, out_dir))


def study_status(units: Sequence[Unit], out_dir: str | Path) -> pd.DataFrame:
    """One row per unit: unit_id, source, task, done (its row and state in ``OUT/units`` read;
    :func:`damaged_units` names those that do not)."""
    done = done_units(units, out_dir)
    return pd.DataFrame(
        [{"unit_id": u.unit_id, "source": u.source, "task": u.task, "done": u.unit_id in done} for u in units],
        columns=["unit_id", "source", "task", "done"],
    )


__all__ = [
    "Unit",
    "damaged_units",
    "expand_sources",
    "plan_units",
    "store_unit",
    "study_status",
    "unit_id",
    "unit_label",
    "unit_settings",
]
