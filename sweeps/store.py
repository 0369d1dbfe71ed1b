"""Results store of a sweep (any runner): one parquet row per finished run, its per-step metrics and its log.

Layout under a sweep folder ``DIR``::

    DIR/runs/<run_id>.parquet     one row per finished run (ok or failed): the source of truth
    DIR/metrics/<run_id>.parquet  per-step metrics of that run, with a ``run_id`` column
    DIR/logs/<run_id>.log         the run's stdout, stderr, logging and traceback
    DIR/results.parquet           every row in one file, rebuilt from ``runs/`` after each run
    DIR/spec.yaml                 the sweep's spec (one per folder, see run_sweep)

Every file is written to a hidden temporary file in the same folder and then ``os.replace``d, so
a process killed with SIGKILL leaves either the whole file or none of it. A run's metrics are
written before its row, and a row's presence means "done": a killed sweep is resumed by running
exactly the runs that have no row. ``results.parquet`` is a single file rather than a dataset
folder because a pyarrow dataset takes its schema from one file and silently drops or fails on
columns whose type differs in another (a failed run has nulls where a finished run has numbers);
concatenating with ``promote_options="permissive"`` unifies them.

A file can still be cut short by what no atomic write prevents: a partial copy of the folder, a
full disk under another tool, a file system that lost its tail. Such a row (or the metrics file
of its run) is **damaged**: :meth:`ResultsStore.damaged` names each with what pyarrow said, the
run counts as not done (:meth:`ResultsStore.done_ids`), so a resumed sweep or study runs it again
and replaces the file; reads skip it meanwhile, and nothing else in the store is touched.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from interp.core.io import atomic_path, atomic_to_parquet, atomic_write_bytes, atomic_write_text

RESULTS_FILE = "results.parquet"


def parquet_problem(path: Path, whole: bool = False) -> str | None:
    """What pyarrow says about reading a parquet file (``"Parquet magic bytes not found in
    footer..."``), or None when it reads: its footer and schema, or every row with ``whole``."""
    try:
        if whole:
            pq.read_table(path)
        else:
            pq.read_metadata(path)
    except (OSError, pa.ArrowException, ValueError) as error:
        return _first_line(error)
    return None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _numeric(type_name: str) -> bool:
    """Whether an arrow type name is a number type that arrow's permissive merge unifies."""
    return type_name.startswith(("int", "uint", "float", "double", "halffloat"))


def _as_text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column's values as text (``1200`` -> ``"1200"``; nulls stay null)."""
    import pyarrow.compute as pc

    try:
        return pc.cast(column, pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):  # nested values: their JSON text
        import json

        return pa.chunked_array(
            [pa.array([None if v is None else json.dumps(v, default=str) for v in column.to_pylist()], pa.string())]
        )


def _damaged_line(root: Path, run_id: str, what: str) -> str:
    return f"{root}/{what}; run {run_id} is counted as not done and will be run again"


class ResultsStore:
    """The files of one sweep folder (see the module docstring for the layout).

    Args:
        root: the sweep folder; created on first write.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.runs_dir = self.root / "runs"
        self.metrics_dir = self.root / "metrics"
        self.logs_dir = self.root / "logs"
        self.results_path = self.root / RESULTS_FILE
        self._warned: set[str] = set()  # columns whose two types were named once already

    # -- paths -------------------------------------------------------------------------------
    def row_path(self, run_id: str) -> Path:
        """Path of the row file of ``run_id``."""
        return self.runs_dir / f"{run_id}.parquet"

    def metrics_path(self, run_id: str) -> Path:
        """Path of the per-step metrics file of ``run_id``."""
        return self.metrics_dir / f"{run_id}.parquet"

    def log_path(self, run_id: str) -> Path:
        """Path of the log file of ``run_id``."""
        return self.logs_dir / f"{run_id}.log"

    # -- writes ------------------------------------------------------------------------------
    def write_run(self, row: dict[str, Any], metrics: pd.DataFrame | None = None) -> Path:
        """Record one finished run: its metrics first, then its row (the "done" marker).

        Args:
            row: flat mapping of column → scalar (or list); must hold ``run_id``.
            metrics: per-step metrics (one row per evaluation step), or None.

        Returns:
            The row file's path.

        Raises:
            ValueError: ``row`` has no ``run_id``.
        """
        run_id = row.get("run_id")
        if not run_id:
            raise ValueError(f"a results row needs a non-empty 'run_id', got {run_id!r}")
        if metrics is not None and len(metrics):
            metrics = metrics.reset_index(drop=True).drop(columns=["run_id"], errors="ignore")
            metrics.insert(0, "run_id", run_id)
            atomic_to_parquet(metrics, self.metrics_path(run_id))
        table = pa.Table.from_pylist([row])
        path = self.row_path(run_id)
        with atomic_path(path, suffix=".parquet") as tmp:
            pq.write_table(table, tmp)
        return path

    def write_log(self, run_id: str, text: str) -> Path:
        """Write (replace) the log of ``run_id`` atomically."""
        return atomic_write_text(self.log_path(run_id), text)

    def copy_finished_from(self, other: ResultsStore | str | os.PathLike) -> list[str]:
        """Copy into this store every run that finished without error in ``other`` and has no
        row here (its metrics, log and row, in that order, each atomically: a kill leaves each
        run whole or absent). Failed runs and runs this store already holds are left alone, so
        a copied run is never trained again and a run recorded here is never replaced.

        This is how a long sweep outlives the disk it ran on: its finished runs are kept in a
        committed folder and copied back into a fresh store before the sweep resumes
        (``emergence results --paper-scale``: docs/data/paper-scale/<entry>/store).
        ``results.parquet`` is rebuilt when anything was copied.

        Returns:
            The run ids copied, sorted (empty when ``other`` does not exist).
        """
        source = other if isinstance(other, ResultsStore) else ResultsStore(other)
        if source.root.resolve() == self.root.resolve():
            return []
        done_here = self.done_ids()
        wanted = [p.stem for p in source.row_files() if p.stem not in done_here]
        if not wanted:
            return []
        ok = source.results(wanted)
        copied = sorted(ok.loc[ok["status"] == "ok", "run_id"]) if "status" in ok else []
        for run_id in copied:
            for src, dst in (
                (source.metrics_path(run_id), self.metrics_path(run_id)),
                (source.log_path(run_id), self.log_path(run_id)),
                (source.row_path(run_id), self.row_path(run_id)),  # the row last: it means "done"
            ):
                if src.is_file():
                    atomic_write_bytes(dst, src.read_bytes())
        self.consolidate()
        return copied

    # -- reads -------------------------------------------------------------------------------
    def row_files(self) -> list[Path]:
        """Finished-run row files, sorted by name (hidden temporaries excluded)."""
        if not self.runs_dir.is_dir():
            return []
        return sorted(p for p in self.runs_dir.glob("*.parquet") if not p.name.startswith("."))

    def _read_rows(self, files: list[Path]) -> tuple[dict[str, pa.Table], dict[str, str]]:
        """The row tables of ``files`` that read, and ``{run_id: what is wrong}`` for the others
        (a row, or its run's metrics file, that pyarrow cannot read)."""
        tables, damaged = {}, {}
        for path in files:
            try:
                table = pq.read_table(path)
            except (OSError, pa.ArrowException, ValueError) as error:
                damaged[path.stem] = f"runs/{path.name} is unreadable ({_first_line(error)})"
                continue
            metrics = self.metrics_path(path.stem)
            problem = parquet_problem(metrics) if metrics.is_file() else None
            if problem is not None:
                damaged[path.stem] = f"metrics/{metrics.name} is unreadable ({problem})"
                continue
            tables[path.stem] = table
        return tables, damaged

    def damaged(self) -> dict[str, str]:
        """Runs whose row, or whose metrics file, cannot be read (cut short, overwritten):
        ``{run_id: "runs/<run_id>.parquet is unreadable (<what pyarrow said>)"}``, sorted.

        Such a run is not done (:meth:`done_ids`): running the sweep or study again redoes it
        and replaces the file. Checked again on every call.
        """
        return self._read_rows(self.row_files())[1]

    def damaged_lines(self) -> list[str]:
        """One line per damaged run (:meth:`damaged`), naming the file and saying it is redone."""
        return [_damaged_line(self.root, run_id, what) for run_id, what in self.damaged().items()]

    def done_ids(self) -> set[str]:
        """Run ids that have a readable row (finished, ok or failed) and, when their run wrote
        metrics, a readable metrics file; a damaged run (:meth:`damaged`) is not done, so the
        next run of the sweep or study redoes it."""
        return set(self._read_rows(self.row_files())[0])

    def rows_table(self, run_ids: Iterable[str] | None = None) -> pa.Table | None:
        """All rows (or those of ``run_ids``) as one arrow table with a unified schema, or None;
        damaged runs (:meth:`damaged`) are left out."""
        files = self.row_files()
        if run_ids is not None:
            wanted = set(run_ids)
            files = [p for p in files if p.stem in wanted]
        tables = self._read_rows(files)[0]
        if not tables:
            return None
        return self._merge(tables)

    def _merge(self, tables: dict[str, pa.Table]) -> pa.Table:
        """One table from ``{run_id: table}`` (schemas unified, ``promote_options="permissive"``).

        A column whose runs hold values of types that do not unify (a runner that reports
        ``"never"`` for one run and ``1200`` for another: arrow's "Unable to merge: Field E has
        incompatible types: string vs int64") is kept as text in every run, with one
        ``RuntimeWarning`` per column and store naming the runs of each type; numbers of two
        widths (int64 and double) unify as arrow does.
        """
        try:
            return pa.concat_tables(list(tables.values()), promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            pass
        kinds: dict[str, dict[str, list[str]]] = {}
        for run_id, table in tables.items():
            for field in table.schema:
                if not pa.types.is_null(field.type):
                    kinds.setdefault(field.name, {}).setdefault(str(field.type), []).append(run_id)
        as_text = {
            name: by_type
            for name, by_type in kinds.items()
            if len(by_type) > 1 and not all(_numeric(t) for t in by_type)
        }
        for name, by_type in sorted(as_text.items()):
            if name in self._warned:
                continue
            self._warned.add(name)
            parts = "; ".join(f"{t}: runs {', '.join(sorted(ids))}" for t, ids in sorted(by_type.items()))
            count = {2: "two", 3: "three"}.get(len(by_type), str(len(by_type)))
            warnings.warn(
                f"results column {name!r} holds values of {count} types ({parts}); kept as text",
                RuntimeWarning,
                stacklevel=3,
            )
        fixed = []
        for table in tables.values():
            for name in as_text:
                if name in table.column_names:
                    i = table.column_names.index(name)
                    table = table.set_column(i, name, _as_text(table.column(name)))
            fixed.append(table)
        return pa.concat_tables(fixed, promote_options="permissive")

    def results(self, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """All rows (or those of ``run_ids``) as a DataFrame, one row per run, sorted by run_id.

        Reads ``runs/`` (always current), not ``results.parquet`` (rebuilt periodically).
        """
        table = self.rows_table(run_ids)
        if table is None:
            return pd.DataFrame()
        return table.to_pandas().sort_values("run_id", ignore_index=True)

    def metrics(self, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
        """Per-step metrics of all runs (or of ``run_ids``), concatenated, with a ``run_id`` column;
        unreadable metrics files are left out."""
        if not self.metrics_dir.is_dir():
            return pd.DataFrame()
        files = sorted(
            p for p in self.metrics_dir.glob("*.parquet") if not p.name.startswith(".") and parquet_problem(p) is None
        )
        if run_ids is not None:
            wanted = set(run_ids)
            files = [p for p in files if p.stem in wanted]
        if not files:
            return pd.DataFrame()
        return self._merge({p.stem: pq.read_table(p) for p in files}).to_pandas()

    def consolidate(self) -> Path | None:
        """Rebuild ``results.parquet`` from ``runs/`` atomically; returns its path (None if no runs)."""
        table = self.rows_table()
        if table is None:
            return None
        table = table.sort_by("run_id")
        with atomic_path(self.results_path, suffix=".parquet") as tmp:
            pq.write_table(table, tmp)
        return self.results_path


def load_results(sweep_dir: str | os.PathLike) -> pd.DataFrame:
    """One row per finished run of the sweep in ``sweep_dir`` (config columns, summary, metadata).

    Raises:
        FileNotFoundError: ``sweep_dir`` holds no finished run.
    """
    df = ResultsStore(sweep_dir).results()
    if df.empty:
        raise FileNotFoundError(f"no finished run under {sweep_dir!s}/runs; run a sweep into it first")
    return df


def load_metrics(sweep_dir: str | os.PathLike, run_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Per-step metrics (``run_id`` column plus the runner's columns, e.g. step, loss) of a sweep."""
    return ResultsStore(sweep_dir).metrics(run_ids)
