"""Run a reproduction's configs through the sweep engine (resumable, joblib or Ray).

``python analyses/<name>.py --sweep-dir DIR [--executor ray]`` sends the script's runs through
:func:`synthetic.sweeps.run_sweep` as explicit points: every finished run lands in DIR's results
store, a killed reproduction resumes where it stopped, and the same runs can go to a Ray
cluster. The reproduction then reads each run's summary and per-step metrics back from the store,
so its table is computed from exactly what the store holds.
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence

import pandas as pd

from sweeps import SweepSpec, load_runner, resolve_with, run_id_of, run_sweep, runner_name
from sweeps import load_metrics, load_results
from synthetic.sweeps import DEFAULT_RUNNER


def _summary_of(row: pd.Series) -> dict[str, Any]:
    """The runner's summary from a results row (``summary_<key>`` columns restored to ``<key>``)."""
    summary = {}
    for key, value in row.items():
        if key.startswith("summary_"):
            key = key[len("summary_"):]
        elif f"summary_{key}" in row.index:
            continue  # the summary's own value wins over the config field of the same name
        if isinstance(value, str) and value[:1] in "[{":
            try:
                value = json.loads(value)
            except ValueError:
                pass
        summary[key] = None if (not isinstance(value, (list, dict)) and pd.isna(value)) else value
    return summary


def run_configs_through_sweep(configs: Sequence[dict[str, Any]], sweep_dir: str | os.PathLike,
                              jobs: int = 2, executor: str = "joblib", name: str = "",
                              ray_address: str | None = None) -> list[tuple[dict, pd.DataFrame]]:
    """Train every config as a point of one sweep into ``sweep_dir``; runs already there are reused.

    Returns:
        ``(summary, metrics)`` per config, in input order, as
        :func:`analyses._common.run_configs` returns them.

    Raises:
        RuntimeError: a run failed (its error and log path are named).
    """
    spec = SweepSpec(points=[dict(c) for c in configs], name=name, runner=DEFAULT_RUNNER)
    run_sweep(spec, sweep_dir, jobs=jobs, executor=executor, ray_address=ray_address)
    rows = load_results(sweep_dir).set_index("run_id")
    runner = load_runner(spec.runner)
    out = []
    for config in configs:  # one entry per config, duplicates included, in input order
        run_id = run_id_of(resolve_with(runner, dict(config)), runner_name(spec.runner))
        row = rows.loc[run_id]
        if row["status"] != "ok":
            raise RuntimeError(f"run {run_id} failed: {row['error']} (log: {sweep_dir}/logs/{run_id}.log)")
        metrics = load_metrics(sweep_dir, [run_id]).drop(columns="run_id").reset_index(drop=True)
        out.append((_summary_of(row), metrics))
    return out
