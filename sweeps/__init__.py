"""Sweeps of any run function: a spec (grid x points x seeds), executors (in-process, joblib
processes, Ray), and a resumable results store; nothing here knows what a run trains or measures.

Public API::

    SweepSpec, load_spec                    spec.py      the spec and its file formats
    resolve_dataclass_config, run_id_of     configs.py   defaults and types; a run's identity
    plan_runs, load_runner, RunTask         runners.py   "module:attribute" runners, planning
    execute_run, RunRecord, run_state_dir   execute.py   one run in a worker, captured; its state folder
    check_executor, EXECUTORS               executors.py joblib and Ray
    run_sweep, SweepOutcome, failure_lines  driver.py    the sweep driver
    ResultsStore, load_results, load_metrics store.py    one parquet row per finished run

A runner is any callable ``config dict -> (summary dict, per-step metrics DataFrame)``; the
synthetic-task training runner is :data:`synthetic.sweeps.train_runner`. Usage: docs/sweeps.md.
"""

from sweeps.configs import resolve_dataclass_config, run_id_of
from sweeps.driver import SweepOutcome, failure_lines, run_sweep
from sweeps.execute import run_state_dir
from sweeps.executors import EXECUTORS, check_executor
from sweeps.runners import RunTask, load_runner, plan_runs, resolve_with, runner_name
from sweeps.spec import SweepSpec, load_spec
from sweeps.store import ResultsStore, load_metrics, load_results

__all__ = [
    "EXECUTORS",
    "ResultsStore",
    "RunTask",
    "SweepOutcome",
    "SweepSpec",
    "check_executor",
    "failure_lines",
    "load_metrics",
    "load_results",
    "load_runner",
    "load_spec",
    "plan_runs",
    "resolve_dataclass_config",
    "resolve_with",
    "run_id_of",
    "run_state_dir",
    "run_sweep",
    "runner_name",
]
