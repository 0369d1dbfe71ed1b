"""A sweep spec: fixed settings, a grid, explicit points and seeds, read from YAML, TOML or JSON.

A sweep spec is a file or the same mapping in Python::

    task: linear-map          # any config field not below is a fixed setting of every run
    steps: 100
    grid:                     # cartesian product over these fields
      S: [8]
      s: [1, 2]
    points:                   # optional: extra explicit points (merged over the fixed settings)
      - {S: 16, s: 3}
    seeds: [0, 1]             # every point runs once per seed (sets the ``seed`` field); or an int n = 0..n-1
    runner: synthetic.sweeps:train_runner   # importable "module:attribute" (the command's default if left out)
    name: my-sweep            # optional: label stored in every row
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp.core.spec_file import parse_spec_text as read_spec_text

SPEC_KEYS = ("grid", "points", "seeds", "runner", "name")
SEED_FIELD = "seed"


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
    runner: str | None = None
    name: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepSpec:
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
        runner = data.pop("runner", None)
        if runner is not None and (not isinstance(runner, str) or ":" not in runner):
            raise ValueError(f"runner must be an importable 'module:attribute' string, got {runner!r}")
        name = str(data.pop("name", "") or "")
        return cls(fixed=data, grid=grid, points=[dict(p) for p in points], seeds=seeds, runner=runner, name=name)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> SweepSpec:
        """Read a spec from a ``.yaml``/``.yml``, ``.toml`` or ``.json`` file.

        Raises:
            ValueError: unknown file extension, or a malformed spec (see :meth:`from_dict`).
            FileNotFoundError: ``path`` does not exist.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix not in (".yaml", ".yml", ".toml", ".json"):
            raise ValueError(f"sweep spec {path} has extension {suffix!r}; use .yaml, .yml, .toml or .json")
        spec = cls.from_dict(parse_spec_text(path.read_text(encoding="utf-8"), suffix, path) or {})
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
        if self.runner is not None:
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
            for where, keys in (
                ("fixed settings", self.fixed),
                ("grid", self.grid),
                *((f"points[{i}]", p) for i, p in enumerate(self.points)),
            ):
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
    if (
        isinstance(seeds, (list, tuple))
        and seeds
        and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        return list(seeds)
    raise ValueError(f"seeds must be a non-empty list of ints or a positive count, got {seeds!r}")


def load_spec(spec: SweepSpec | Mapping[str, Any] | str | os.PathLike) -> SweepSpec:
    """Accept a :class:`SweepSpec`, a mapping in the file format, or a path to a spec file."""
    if isinstance(spec, SweepSpec):
        return spec
    if isinstance(spec, Mapping):
        return SweepSpec.from_dict(spec)
    return SweepSpec.from_file(spec)


def parse_spec_text(text: str, suffix: str, path: str | os.PathLike = "<spec>") -> Any:
    """Parse a spec file's text by its extension (``.yaml``/``.yml``, ``.toml``, ``.json``): the
    reader suite specs use too (:func:`interp.core.spec_file.parse_spec_text`: YAML 1.2, so ``1e-3``
    is a float and ``off`` the text "off"; a leading zero such as ``010`` is refused).

    Raises:
        SpecError: a syntax error, as one line naming the file, line and column (1-based), or a
            number written with a leading zero, a date, a key given twice.
    """
    return read_spec_text(text, suffix, path, "sweep spec")
