"""Runners and run planning: a runner is any callable ``config dict -> (summary dict, per-step
metrics DataFrame)`` named by ``"module:attribute"``; an optional ``resolve(config) -> config``
attribute fills defaults, validates field names and coerces types
(:func:`sweeps.configs.resolve_dataclass_config` does that for a dataclass).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interp.core.spec_file import check_name
from sweeps.configs import run_id_of
from sweeps.spec import SweepSpec, load_spec

if TYPE_CHECKING:
    import pandas as pd

RunnerLike = Callable[[dict], "tuple[dict, pd.DataFrame | None]"]


def load_runner(runner: str | RunnerLike) -> RunnerLike:
    """Import ``"module:attribute"`` (dotted attributes allowed), or return a callable as is.

    Raises:
        ValueError: the name is malformed, the module or attribute does not exist, or it is
            not callable.
    """
    if callable(runner):
        return runner
    if not isinstance(runner, str) or ":" not in runner:
        raise ValueError(f"runner must be 'module:attribute', got {runner!r}")
    module_name, attr = runner.split(":", 1)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"runner {runner!r} cannot be imported: {err}") from err
    if not callable(obj):
        raise ValueError(f"runner {runner!r} is a {type(obj).__name__}, not a callable")
    return obj


def runner_name(runner: str | RunnerLike) -> str:
    """The ``"module:qualname"`` name of a runner (the string itself for a string)."""
    if isinstance(runner, str):
        return runner
    module = getattr(runner, "__module__", None) or type(runner).__module__
    qualname = getattr(runner, "__qualname__", None) or type(runner).__qualname__
    return f"{module}:{qualname}"


def resolve_with(runner: RunnerLike, config: Mapping[str, Any]) -> dict[str, Any]:
    """The runner's ``resolve(config)`` if it has one, else the config with sorted keys.

    Raises:
        SpecError: (no ``resolve``) a field name outside ASCII ``[A-Za-z0-9._-]``.
    """
    resolve = getattr(runner, "resolve", None)
    if resolve is not None:
        return dict(resolve(config))
    for key in config:  # no field list to compare with: the names are at least ASCII
        check_name("sweep spec: config field", key)
    return {k: config[k] for k in sorted(config)}


# ================================================================================================
# Planning
# ================================================================================================
@dataclass
class RunTask:
    """One run to execute: its id, resolved config and runner (name, or a picklable callable).

    ``log_path``: where its log is written as it runs; ``state_dir``: a folder where the runner
    may keep a resumable state of the unfinished run (:func:`sweeps.execute.run_state_dir`).
    Both are set by the driver for local workers, None elsewhere."""

    run_id: str
    config: dict[str, Any]
    runner: Any
    log_path: str | None = None
    state_dir: str | None = None


def plan_runs(
    spec: SweepSpec | Mapping | str | os.PathLike,
    runner: str | RunnerLike | None = None,
    default_runner: str | None = None,
) -> list[RunTask]:
    """Expand a spec into resolved, de-duplicated runs, in spec order.

    Args:
        spec: a spec, its mapping or its file.
        runner: overrides ``spec.runner`` (a name, or a callable for in-Python use).
        default_runner: the runner when neither ``runner`` nor the spec names one.

    Raises:
        ValueError: malformed spec, no runner named, unknown config field (valid ones listed),
            bad value type.
    """
    spec = load_spec(spec)
    runner = runner if runner is not None else (spec.runner or default_runner)
    if runner is None:
        raise ValueError("the sweep spec names no runner: add 'runner: module:attribute' to it")
    fn = load_runner(runner)
    name = runner_name(runner)
    tasks: dict[str, RunTask] = {}
    for raw in spec.points_unresolved():
        config = resolve_with(fn, raw)
        rid = run_id_of(config, name)
        tasks.setdefault(rid, RunTask(run_id=rid, config=config, runner=runner))
    return list(tasks.values())
