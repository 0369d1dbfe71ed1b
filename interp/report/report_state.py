"""Save a main-job report's runs to a folder and read them back (``MainJobReport.save`` / ``load``).

Layout (no pickle: JSON, parquet and safetensors only)::

    state/report.json               {"format": 1, "title", "threshold", "hold", "runs": [<run folder>, ...],
                                     "settings": {...} (a main-job unit's whole StudyConfig)}
    state/<i>-<model>-seed<seed>/
        run.json                    scalar fields, and for each field the kind it was saved as
        <field>.parquet             every DataFrame field (curve, heads, topk, and any added later)
        point.json, point_evaluations.parquet   the point of emergence
        tensors.safetensors         every tensor field (delta_p, example_patterns)

The run's attributes are walked generically (``vars(run)``: its dataclass fields and any attribute
set on it later), so a field added to the run's class later is saved and loaded without touching
this module, as long as it is a DataFrame, a tensor, a point of emergence or JSON-serialisable.
A point of emergence is recognised by its shape (a dataclass with an ``evaluations`` table, as
``interp.emergence.EmergencePoint``) and rebuilt as the class the run's class declares for that
field: the report floor never imports the analyses above it.
Fields a saved run lacks keep their defaults; saved values that are not fields of the class come
back as plain attributes.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from interp.core.io import atomic_path, atomic_to_parquet, atomic_write_text

FORMAT = 1


def _run_folder(index: int, run) -> str:
    task = getattr(run, "task", None)
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{index:02d}-{run.model}-seed{run.seed}" + (f"-{task}" if task else ""))


def _is_point(value) -> bool:
    """A point of emergence (``interp.emergence.EmergencePoint``): a dataclass instance with an
    ``evaluations`` DataFrame."""
    return (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and isinstance(getattr(value, "evaluations", None), pd.DataFrame)
    )


def _declared_class(run_class, name: str) -> type:
    """The dataclass ``run_class`` declares its field ``name`` as (``point: EmergencePoint`` ->
    ``EmergencePoint``; ``X | None`` -> ``X``).

    Raises:
        TypeError: the field is not declared as a dataclass (one line naming the declaration).
    """
    hint = typing.get_type_hints(run_class).get(name)
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    raise TypeError(
        f"{run_class.__name__}.{name} is declared as {hint!r}; a saved point of emergence loads into a dataclass field"
    )


def _save_point(point, folder: Path) -> dict[str, Path]:
    scalars = {f.name: getattr(point, f.name) for f in dataclasses.fields(point) if f.name != "evaluations"}
    scalars["excluded_steps"] = {str(k): v for k, v in point.excluded_steps.items()}
    return {
        "point.json": atomic_write_text(folder / "point.json", json.dumps(scalars, indent=2)),
        "point_evaluations.parquet": atomic_to_parquet(point.evaluations, folder / "point_evaluations.parquet"),
    }


def _load_point(folder: Path, point_class: type):
    scalars = json.loads((folder / "point.json").read_text())
    scalars["excluded_steps"] = {int(k): int(v) for k, v in scalars.get("excluded_steps", {}).items()}
    names = {f.name for f in dataclasses.fields(point_class)}
    return point_class(
        **{k: v for k, v in scalars.items() if k in names},
        evaluations=pd.read_parquet(folder / "point_evaluations.parquet"),
    )


def save_run(run, folder: Path) -> dict[str, Path]:
    """Write one run's fields into ``folder`` (layout in the module docstring)."""
    from safetensors.torch import save_file

    written, scalars, kinds, tensors = {}, {}, {}, {}
    # Dataclass fields and attributes set on the run later (vars() holds both).
    for name, value in vars(run).items():
        if name.startswith("_"):
            continue
        if isinstance(value, pd.DataFrame):
            kinds[name] = "dataframe"
            written[f"{name}.parquet"] = atomic_to_parquet(value, folder / f"{name}.parquet")
        elif isinstance(value, torch.Tensor):
            kinds[name] = "tensor"
            tensors[name] = value.detach().cpu().contiguous()
        elif _is_point(value):
            kinds[name] = "point"
            written.update(_save_point(value, folder))
        else:
            if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
                value = value.item()
            json.dumps(value)  # raises TypeError naming the type: a field this module cannot save
            kinds[name] = "json"
            scalars[name] = value
    if tensors:
        with atomic_path(folder / "tensors.safetensors", suffix=".safetensors") as tmp:
            save_file(tensors, str(tmp))
        written["tensors.safetensors"] = folder / "tensors.safetensors"
    written["run.json"] = atomic_write_text(
        folder / "run.json", json.dumps({"kinds": kinds, "values": scalars}, indent=2)
    )
    return {f"{folder.name}/{k}": v for k, v in written.items()}


def load_run(folder: Path, run_class):
    """Rebuild a run of ``run_class`` from ``folder`` (see :func:`save_run`)."""
    from safetensors.torch import load_file

    meta = json.loads((folder / "run.json").read_text())
    tensors = load_file(str(folder / "tensors.safetensors")) if (folder / "tensors.safetensors").is_file() else {}
    names = {f.name for f in dataclasses.fields(run_class)}
    values: dict[str, Any] = {}
    for name, kind in meta["kinds"].items():
        if kind == "dataframe":
            values[name] = pd.read_parquet(folder / f"{name}.parquet")
        elif kind == "tensor":
            values[name] = tensors[name]
        elif kind == "point":
            values[name] = _load_point(folder, _declared_class(run_class, name))
        else:
            values[name] = meta["values"][name]
    run = run_class(**{k: v for k, v in values.items() if k in names})
    for name, value in values.items():  # attributes that are not fields of the class
        if name not in names:
            setattr(run, name, value)
    return run


def save_report_state(report, folder: Path, settings: dict[str, Any] | None = None) -> dict[str, Path]:
    """Write every run of ``report`` and ``report.json`` into ``folder``; ``settings`` (the whole
    settings object the runs were computed with, as JSON-safe values) goes into ``report.json``
    when given."""
    folder = Path(folder)
    written, names = {}, []
    for i, run in enumerate(report.runs):
        name = _run_folder(i, run)
        names.append(name)
        written.update({f"state/{k}": v for k, v in save_run(run, folder / name).items()})
    index = {
        "format": FORMAT,
        "title": report.title,
        "threshold": report.threshold,
        "hold": getattr(report, "hold", None),
        "runs": names,
    }
    if settings is not None:
        index["settings"] = settings
    written["state/report.json"] = atomic_write_text(folder / "report.json", json.dumps(index, indent=2))
    return written


def load_report_state(folder: Path, run_class) -> tuple[list, dict]:
    """Read ``folder/report.json`` and every run it lists; returns (runs, the index dict).

    Raises:
        ValueError: no ``report.json`` in ``folder``, or a format this version cannot read.
    """
    index_file = Path(folder) / "report.json"
    if not index_file.is_file():
        raise ValueError(
            f"{str(folder.parent)!r} holds no saved report (expected {index_file}); "
            f"write one with MainJobReport.save(folder)"
        )
    index = json.loads(index_file.read_text())
    if index.get("format") != FORMAT:
        raise ValueError(f"{index_file}: report format {index.get('format')!r}; this version reads format {FORMAT}")
    return [load_run(Path(folder) / name, run_class) for name in index["runs"]], index
