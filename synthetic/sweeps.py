"""Sweeps: a grid (plus explicit points) over any run-config field, times seeds, run in parallel.

A sweep spec is a YAML, TOML or JSON file, or the same mapping in Python::

    task: linear-map          # any config field not below is a fixed setting of every run
    steps: 100
    grid:                     # cartesian product over these fields
      S: [8]
      s: [1, 2]
    points:                   # optional: extra explicit points (merged over the fixed settings)
      - {S: 16, s: 3}
    seeds: [0, 1]             # every point runs once per seed (sets the ``seed`` field); or an int n = 0..n-1
    runner: synthetic.sweeps:train_runner   # optional: importable "module:attribute"
    name: my-sweep            # optional: label stored in every row

A run's identity (``run_id``) is a hash of its runner name and fully resolved config (defaults
filled in, seed included), so re-running a spec into the same folder runs only what is missing.
Runs go to an executor (in-process, joblib processes, or Ray) and finished runs land in a
:class:`synthetic.store.ResultsStore` (``DIR/results.parquet`` and friends).

The runner is pluggable: any callable ``config dict -> (summary dict, per-step metrics DataFrame)``
named by ``"module:attribute"``. An optional ``resolve(config) -> config`` attribute fills defaults,
validates field names and coerces types; :func:`resolve_dataclass_config` does that for a
dataclass, so a checkpoint-analysis job (models x seeds) can reuse the executors and the store.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import enum
import functools
import hashlib
import importlib
import io
import itertools
import json
import logging
import os
import platform
import subprocess
import sys
import time
import tomllib
import traceback
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import pandas as pd
import typer
import yaml
from tqdm.auto import tqdm

from interp.io import atomic_write_text
from synthetic.store import ResultsStore

DEFAULT_RUNNER = "synthetic.sweeps:train_runner"
SPEC_KEYS = ("grid", "points", "seeds", "runner", "name")
SEED_FIELD = "seed"
EXECUTORS = ("joblib", "ray")
# Columns the sweep adds to every row; a config field or summary key must not shadow them.
META_COLUMNS = (
    "run_id", "status", "error", "wall_time_s", "runner", "sweep", "config_json",
    "versions", "git_commit", "host", "started_at", "finished_at",
)
VERSIONED_PACKAGES = ("emergence-lens", "torch", "transformer-lens", "transformers", "numpy", "pandas")
CONSOLIDATE_EVERY_S = 2.0

logger = logging.getLogger(__name__)

RunnerLike = Callable[[dict], "tuple[dict, pd.DataFrame | None]"]


# ================================================================================================
# Spec
# ================================================================================================
@dataclass
class SweepSpec:
    """A sweep: fixed settings, a grid, explicit points and seeds (see the module docstring).

    Attributes:
        fixed: config field → value shared by every run.
        grid: config field → list of values; the runs are the cartesian product.
        points: explicit extra points, each a config field → value mapping.
        seeds: seeds (values of the ``seed`` field) each point runs with; None = the config's own.
        runner: importable ``"module:attribute"`` of the run function.
        name: label stored in every row.
    """

    fixed: dict[str, Any] = field(default_factory=dict)
    grid: dict[str, list] = field(default_factory=dict)
    points: list[dict[str, Any]] = field(default_factory=list)
    seeds: list[int] | None = None
    runner: str = DEFAULT_RUNNER
    name: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SweepSpec":
        """Build a spec from the file format (reserved keys ``grid points seeds runner name``).

        Raises:
            ValueError: a reserved key has the wrong shape (grid not a mapping of non-empty
                lists, points not a list of mappings, seeds not ints, ...).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"a sweep spec must be a mapping of field → value, got {type(data).__name__}")
        data = dict(data)
        grid = data.pop("grid", None) or {}
        if not isinstance(grid, Mapping):
            raise ValueError(f"grid must map field → list of values, got {grid!r}")
        grid = {str(k): _as_value_list(k, v) for k, v in grid.items()}
        points = data.pop("points", None) or []
        if not isinstance(points, list) or not all(isinstance(p, Mapping) for p in points):
            raise ValueError(f"points must be a list of field → value mappings, got {points!r}")
        seeds = _as_seeds(data.pop("seeds", None))
        runner = data.pop("runner", None) or DEFAULT_RUNNER
        if not isinstance(runner, str) or ":" not in runner:
            raise ValueError(f"runner must be an importable 'module:attribute' string, got {runner!r}")
        name = str(data.pop("name", "") or "")
        return cls(fixed=data, grid=grid, points=[dict(p) for p in points], seeds=seeds,
                   runner=runner, name=name)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "SweepSpec":
        """Read a spec from a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file.

        Raises:
            ValueError: unknown file extension, or a malformed spec (see :meth:`from_dict`).
            FileNotFoundError: ``path`` does not exist.
        """
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        suffix = path.suffix.lower()
        if suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix == ".json":
            data = json.loads(text)
        else:
            raise ValueError(f"sweep spec {path} has extension {suffix!r}; use .yaml, .yml, .toml or .json")
        spec = cls.from_dict(data or {})
        if not spec.name:
            spec.name = path.stem
        return spec

    def to_dict(self) -> dict[str, Any]:
        """The file format of this spec (inverse of :meth:`from_dict`)."""
        out: dict[str, Any] = dict(self.fixed)
        if self.grid:
            out["grid"] = {k: list(v) for k, v in self.grid.items()}
        if self.points:
            out["points"] = [dict(p) for p in self.points]
        if self.seeds is not None:
            out["seeds"] = list(self.seeds)
        out["runner"] = self.runner
        if self.name:
            out["name"] = self.name
        return out

    def points_unresolved(self) -> list[dict[str, Any]]:
        """Every run's config before defaults: (grid product ∪ points) × seeds, fixed settings below.

        Raises:
            ValueError: seeds are given both as ``seeds`` and as a ``seed`` field.
        """
        if self.seeds is not None:
            for where, keys in (("fixed settings", self.fixed), ("grid", self.grid),
                                *((f"points[{i}]", p) for i, p in enumerate(self.points))):
                if SEED_FIELD in keys:
                    raise ValueError(f"'{SEED_FIELD}' is set in {where} and in seeds; give seeds in one place")
        keys = list(self.grid)
        grid_points = [dict(zip(keys, vals)) for vals in itertools.product(*self.grid.values())] if keys else []
        base_points = grid_points + [dict(p) for p in self.points]
        if not base_points:
            base_points = [{}]
        seeds: list[int | None] = list(self.seeds) if self.seeds is not None else [None]
        configs = []
        for point, seed in itertools.product(base_points, seeds):
            config = {**self.fixed, **point}
            if seed is not None:
                config[SEED_FIELD] = seed
            configs.append(config)
        return configs


def _as_value_list(key: Any, value: Any) -> list:
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ValueError(f"grid.{key} must be a non-empty list of values, got {value!r}")
    return list(value)


def _as_seeds(seeds: Any) -> list[int] | None:
    if seeds is None:
        return None
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"seeds={seeds} must be a positive count or a list of ints")
        return list(range(seeds))
    if (isinstance(seeds, (list, tuple)) and seeds
            and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)):
        return list(seeds)
    raise ValueError(f"seeds must be a non-empty list of ints or a positive count, got {seeds!r}")


def load_spec(spec: "SweepSpec | Mapping[str, Any] | str | os.PathLike") -> SweepSpec:
    """Accept a :class:`SweepSpec`, a mapping in the file format, or a path to a spec file."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return SweepSpec.from_dict(spec)
    return SweepSpec.from_file(spec)


# ================================================================================================
# Config resolution and run identity
# ================================================================================================
def resolve_dataclass_config(cls: type, config: Mapping[str, Any]) -> dict[str, Any]:
    """Fill a flat config with ``cls``'s defaults, check field names and coerce values to field types.

    ``int`` fields accept integral floats; ``float`` fields accept ints and numeric strings
    (PyYAML reads ``1e-3`` as a string); ``Optional`` fields accept None. Other annotations
    are passed through. The dataclass itself is not constructed, so its own validation
    (``__post_init__``) runs inside the run, and a bad grid point becomes one failed run.

    Args:
        cls: a dataclass whose fields are the valid config fields.
        config: field → value.

    Returns:
        Every field of ``cls`` → value, in field order.

    Raises:
        ValueError: an unknown field (the message lists the valid ones), a value of the wrong
            type, or a required field left out.
    """
    fields = dataclasses.fields(cls)
    valid = [f.name for f in fields]
    unknown = sorted(set(config) - set(valid))
    if unknown:
        raise ValueError(f"unknown config field(s) {', '.join(unknown)} for {cls.__name__}; "
                         f"valid fields: {', '.join(valid)}")
    hints = typing.get_type_hints(cls)
    resolved: dict[str, Any] = {}
    for f in fields:
        if f.name in config:
            resolved[f.name] = _coerce(f.name, config[f.name], hints.get(f.name, Any))
        elif f.default is not dataclasses.MISSING:
            resolved[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            resolved[f.name] = f.default_factory()
        else:
            raise ValueError(f"config field {f.name!r} of {cls.__name__} has no default; set it in the spec")
    return resolved


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Coerce ``value`` to the simple type ``hint`` (int, float, str, bool, Optional of them)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        simple = [a for a in args if a is not type(None)]
        for arg in simple:  # first type that accepts the value wins
            try:
                return _coerce(name, value, arg)
            except ValueError:
                continue
        raise ValueError(f"{name}={value!r} is not a valid {hint}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ValueError(f"{name}={value!r} must be true or false")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ValueError(f"{name}={value!r} must be an integer")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise ValueError(f"{name}={value!r} must be a number")
    if hint is str:
        if isinstance(value, str):
            return value
        raise ValueError(f"{name}={value!r} must be a string")
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise ValueError(f"{name}={value!r} must be one of {list(typing.get_args(hint))}")
    return value


def run_id_of(config: Mapping[str, Any], runner: str) -> str:
    """Stable identity of a run: the first 16 hex digits of SHA-256 of its runner and resolved config.

    The JSON is canonical (sorted keys, no spaces; floats by ``repr``), so the id is the same
    across processes, machines and Python versions.
    """
    payload = json.dumps({"runner": runner, "config": config}, sort_keys=True,
                         separators=(",", ":"), default=_json_default)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"config value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")


# ================================================================================================
# Runners
# ================================================================================================
class TrainRunner:
    """The default runner: one :func:`synthetic.training.train` run per config (no files, no bar).

    ``resolve`` fills :class:`synthetic.training.TrainConfig` defaults; ``__call__`` returns the
    run's summary (final_loss, floor, plateau_length, steps_to_threshold, emerged, n_params,
    wall_time_s, ...) and per-step metrics.
    """

    @staticmethod
    def config_class() -> type:
        from synthetic.training import TrainConfig

        return TrainConfig

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """TrainConfig defaults filled in; raises ValueError on unknown fields or bad types."""
        return resolve_dataclass_config(self.config_class(), config)

    def __call__(self, config: Mapping[str, Any]) -> tuple[dict, pd.DataFrame]:
        from synthetic.training import TrainConfig, train

        result = train(TrainConfig(**config), out_dir=None, progress=False, wandb=False)
        # The summary echoes the config as a nested dict; the row already holds every field.
        summary = {k: v for k, v in result.summary.items() if k != "config"}
        return summary, result.metrics


train_runner = TrainRunner()


def load_runner(runner: "str | RunnerLike") -> RunnerLike:
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


def runner_name(runner: "str | RunnerLike") -> str:
    """The ``"module:qualname"`` name of a runner (the string itself for a string)."""
    if isinstance(runner, str):
        return runner
    module = getattr(runner, "__module__", None) or type(runner).__module__
    qualname = getattr(runner, "__qualname__", None) or type(runner).__qualname__
    return f"{module}:{qualname}"


def resolve_with(runner: RunnerLike, config: Mapping[str, Any]) -> dict[str, Any]:
    """The runner's ``resolve(config)`` if it has one, else the config with sorted keys."""
    resolve = getattr(runner, "resolve", None)
    if resolve is not None:
        return dict(resolve(config))
    return {k: config[k] for k in sorted(config)}


# ================================================================================================
# Planning
# ================================================================================================
@dataclass
class RunTask:
    """One run to execute: its id, resolved config and runner (name, or a picklable callable)."""

    run_id: str
    config: dict[str, Any]
    runner: Any
    log_path: str | None = None


def plan_runs(spec: "SweepSpec | Mapping | str | os.PathLike",
              runner: "str | RunnerLike | None" = None) -> list[RunTask]:
    """Expand a spec into resolved, de-duplicated runs, in spec order.

    Args:
        spec: a spec, its mapping or its file.
        runner: overrides ``spec.runner`` (a name, or a callable for in-Python use).

    Raises:
        ValueError: malformed spec, unknown config field (valid ones listed), bad value type.
    """
    spec = load_spec(spec)
    runner = runner if runner is not None else spec.runner
    fn = load_runner(runner)
    name = runner_name(runner)
    tasks: dict[str, RunTask] = {}
    for raw in spec.points_unresolved():
        config = resolve_with(fn, raw)
        rid = run_id_of(config, name)
        tasks.setdefault(rid, RunTask(run_id=rid, config=config, runner=runner))
    return list(tasks.values())


# ================================================================================================
# Executing one run (inside a worker)
# ================================================================================================
@dataclass
class RunRecord:
    """What a worker sends back: status, summary, per-step metrics, log text and timings."""

    run_id: str
    status: str  # "ok" or "failed"
    error: str | None
    summary: dict[str, Any]
    metrics: pd.DataFrame | None
    log: str | None
    wall_time_s: float
    started_at: str
    finished_at: str
    host: str
    versions: dict[str, str]


def execute_run(task: RunTask) -> RunRecord:
    """Run one task with one torch thread, capturing its output; never raises on a run error.

    The log goes to ``task.log_path`` as it is written when the path is given (local
    executors), else it is returned in the record (Ray, where the worker may be another host).
    """
    started = _now()
    t0 = time.perf_counter()
    status, error, summary, metrics = "ok", None, {}, None
    buffer = io.StringIO()
    with contextlib.ExitStack() as stack:
        if task.log_path is not None:
            Path(task.log_path).parent.mkdir(parents=True, exist_ok=True)
            stream = stack.enter_context(open(task.log_path, "w", encoding="utf-8", buffering=1))
        else:
            stream = buffer
        stream.write(f"run {task.run_id} runner {runner_name(task.runner)} started {started}\n")
        stream.write(f"config {json.dumps(task.config, sort_keys=True, default=_json_default)}\n")
        stack.enter_context(_one_torch_thread())
        stack.enter_context(_capture(stream))
        try:
            fn = load_runner(task.runner)
            out = fn(dict(task.config))
            if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Mapping)):
                raise TypeError(f"runner returned {type(out).__name__}; expected (summary dict, metrics DataFrame)")
            summary = {str(k): _to_builtin(v) for k, v in out[0].items()}
            metrics = out[1] if isinstance(out[1], pd.DataFrame) else None
        except Exception as err:  # a failing run is data, not a crash of the sweep
            status, error = "failed", f"{type(err).__name__}: {err}".splitlines()[0][:2000]
            traceback.print_exc(file=stream)
        wall = time.perf_counter() - t0
        stream.write(f"{status} after {wall:.3f} s\n")
    return RunRecord(
        run_id=task.run_id, status=status, error=error, summary=summary, metrics=metrics,
        log=buffer.getvalue() if task.log_path is None else None, wall_time_s=wall,
        started_at=started, finished_at=_now(), host=platform.node(), versions=package_versions(),
    )


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread per run: N workers on N cores must not oversubscribe, and a fixed
    thread count keeps float reductions (hence losses) identical across executors."""
    if "torch" not in sys.modules:  # a fresh worker: make OpenMP start with one thread too
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
    except ImportError:  # a runner that does not use torch
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def _capture(stream: typing.TextIO) -> Iterator[None]:
    """Send stdout, stderr and root-logger records to ``stream`` for the duration of the run."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            yield
    finally:
        root.removeHandler(handler)


def _to_builtin(value: Any) -> Any:
    """numpy/torch scalars → Python scalars so rows are plain parquet columns."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    return value


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Python and key package versions of this process (``"absent"`` for a missing package)."""
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "absent"
    return versions


def git_commit(path: str | os.PathLike | None = None) -> str | None:
    """``HEAD`` of the git checkout holding ``path`` (default: this package), ``+dirty`` if it has
    uncommitted changes, or None outside a checkout or without git."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


# ================================================================================================
# Executors: each yields RunRecords as runs finish, in any order
# ================================================================================================
def _execute_serial(tasks: Sequence[RunTask], jobs: int, address: str | None) -> Iterator[RunRecord]:
    for task in tasks:
        yield execute_run(task)


def _execute_joblib(tasks: Sequence[RunTask], jobs: int, address: str | None) -> Iterator[RunRecord]:
    if jobs == 1:  # in-process: no worker start-up, same single-thread arithmetic
        yield from _execute_serial(tasks, jobs, address)
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    yield from parallel(delayed(execute_run)(task) for task in tasks)


def _execute_ray(tasks: Sequence[RunTask], jobs: int, address: str | None) -> Iterator[RunRecord]:
    try:
        import ray
    except ImportError as err:
        raise ValueError("executor 'ray' needs Ray: pip install 'emergence-lens[ray]'") from err
    started_here = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            _start_local_ray(ray, jobs)
        started_here = True
    remote = ray.remote(num_cpus=1, max_retries=0)(execute_run)
    pending = {remote.remote(task): task for task in tasks}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                task = pending.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as err:  # worker died (OOM kill, segfault): record and go on
                    yield _crashed_record(task, err)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def _start_local_ray(ray: Any, num_cpus: int, attempts: int = 3) -> None:
    """``ray.init`` a local Ray with ``num_cpus`` CPUs, retrying a start-up timeout: Ray gives
    its raylet a fixed 30 s to register, which a heavily loaded machine can exceed."""
    for attempt in range(1, attempts + 1):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception as err:
            if "timed out during startup" not in str(err) or attempt == attempts:
                raise
            logger.warning("local Ray start-up timed out (attempt %d of %d); retrying", attempt, attempts)
            ray.shutdown()


def _crashed_record(task: RunTask, err: BaseException) -> RunRecord:
    now = _now()
    message = f"{type(err).__name__}: {err}".splitlines()[0][:2000]
    return RunRecord(run_id=task.run_id, status="failed", error=message, summary={}, metrics=None,
                     log=f"worker crashed: {message}\n", wall_time_s=float("nan"), started_at=now,
                     finished_at=now, host="", versions={})


_EXECUTORS: dict[str, Callable[[Sequence[RunTask], int, str | None], Iterator[RunRecord]]] = {
    "joblib": _execute_joblib,
    "ray": _execute_ray,
}


# ================================================================================================
# The sweep driver
# ================================================================================================
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
    spec: "SweepSpec | Mapping[str, Any] | str | os.PathLike",
    out_dir: str | os.PathLike,
    jobs: int = 1,
    executor: str = "joblib",
    ray_address: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    runner: "str | RunnerLike | None" = None,
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
        progress: show a runs-done / total bar with ETA on stderr.
        runner: overrides the spec's runner (a name, or a callable; a callable is pickled to
            joblib workers and cannot reach a remote Ray cluster unless importable there).

    Returns:
        A :class:`SweepOutcome`.

    Raises:
        ValueError: bad spec (unknown field, bad type), ``jobs < 1`` or unknown executor.
    """
    if executor not in _EXECUTORS:
        raise ValueError(f"executor={executor!r}; valid executors: {', '.join(EXECUTORS)}")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be a positive integer")
    spec = load_spec(spec)
    tasks = plan_runs(spec, runner)
    store = ResultsStore(out_dir)
    store.root.mkdir(parents=True, exist_ok=True)
    atomic_write_text(store.root / "spec.yaml", yaml.safe_dump(spec.to_dict(), sort_keys=False))
    from interp.provenance import make_provenance, write_provenance

    write_provenance(store.root, make_provenance("synthetic.sweeps.run_sweep", {
        "spec": spec.to_dict(), "jobs": jobs, "executor": executor, "retry_failed": retry_failed}))

    done = store.done_ids()
    if retry_failed and done:
        prior = store.results([t.run_id for t in tasks if t.run_id in done])
        if not prior.empty:
            done -= set(prior.loc[prior["status"] != "ok", "run_id"])
    todo = [t for t in tasks if t.run_id not in done]
    # joblib workers share this filesystem and write their log live; Ray workers may be on
    # other hosts, so they send the log back with the result and the driver writes it.
    for t in todo:
        t.log_path = str(store.log_path(t.run_id)) if executor == "joblib" else None

    commit = git_commit()
    sweep_name = spec.name
    n_ran = n_failed_now = 0
    last_consolidated = time.monotonic()
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), unit="run", desc=sweep_name or "sweep",
               disable=not progress, dynamic_ncols=True)
    by_id = {t.run_id: t for t in todo}
    try:
        if todo:
            for record in _EXECUTORS[executor](todo, jobs, ray_address):
                task = by_id[record.run_id]
                if record.log is not None:
                    store.write_log(record.run_id, record.log)
                row = build_row(task, record, commit, sweep_name)
                store.write_run(row, record.metrics)
                n_ran += 1
                bar.update(1)
                if record.status != "ok":
                    n_failed_now += 1
                    bar.set_postfix(failed=n_failed_now)
                    logger.warning("run %s failed: %s (log: %s)", record.run_id, record.error,
                                   store.log_path(record.run_id))
                if time.monotonic() - last_consolidated > CONSOLIDATE_EVERY_S:
                    store.consolidate()
                    last_consolidated = time.monotonic()
    finally:
        bar.close()
        store.consolidate()
    results = store.results([t.run_id for t in tasks])
    n_failed = int((results["status"] != "ok").sum()) if not results.empty else 0
    return SweepOutcome(out_dir=store.root, results=results, n_planned=len(tasks),
                        n_skipped=len(tasks) - len(todo), n_ran=n_ran, n_failed=n_failed)


def build_row(task: RunTask, record: RunRecord, commit: str | None, sweep_name: str = "") -> dict[str, Any]:
    """One results row: run_id, status, error, the config fields, the summary, then metadata.

    A summary key equal to a config field or a metadata column is stored as ``summary_<key>``;
    a value that is not a scalar (list, dict) is stored as JSON text.
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
        runner=runner_name(task.runner), sweep=sweep_name,
        config_json=json.dumps(task.config, sort_keys=True, default=_json_default),
        versions=json.dumps(record.versions, sort_keys=True), git_commit=commit, host=record.host,
        started_at=record.started_at, finished_at=record.finished_at,
    )
    return row


def _flat(value: Any) -> Any:
    """Scalars stay; anything else (list, dict, object) becomes JSON text, so every row is a
    flat record whose columns keep one type across runs."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, sort_keys=True, default=str)


# ================================================================================================
# CLI: `emergence sweep SPEC --out DIR [--jobs N] [--executor {joblib,ray}]`
# ================================================================================================
class Executor(str, enum.Enum):
    joblib = "joblib"
    ray = "ray"


app = typer.Typer(add_completion=False, help="Run a sweep spec (grid × seeds) into a results store.")


@app.command("sweep")
def sweep_command(
    spec: Path = typer.Argument(..., exists=True, dir_okay=False, help="Sweep spec (.yaml, .toml or .json)."),
    out: Path = typer.Option(..., "--out", "-o", help="Sweep folder; rows land in OUT/results.parquet."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Parallel runs (processes or Ray CPUs)."),
    executor: Executor = typer.Option(Executor.joblib, "--executor", help="joblib (this machine) or ray."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Existing Ray cluster; default local."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Re-run runs recorded as failed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the runs and what is missing; run nothing."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar with ETA."),
) -> None:
    """Run every missing run of SPEC (re-running resumes an interrupted sweep)."""
    try:
        if dry_run:
            tasks = plan_runs(spec)
            done = ResultsStore(out).done_ids()
            for t in tasks:
                mark = "done" if t.run_id in done else "todo"
                typer.echo(f"{t.run_id} {mark} {json.dumps(t.config, sort_keys=True, default=_json_default)}")
            typer.echo(f"{len(tasks)} runs, {sum(t.run_id not in done for t in tasks)} to run")
            return
        outcome = run_sweep(spec, out, jobs=jobs, executor=executor.value, ray_address=ray_address,
                            retry_failed=retry_failed, progress=progress)
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(f"{outcome.n_planned} runs: {outcome.n_ran} ran, {outcome.n_skipped} already done, "
               f"{outcome.n_failed} failed; rows in {outcome.out_dir / 'results.parquet'}")


if __name__ == "__main__":
    # Import the module under its real name so pickled tasks refer to synthetic.sweeps, not __main__.
    from synthetic.sweeps import app as _app

    _app()
