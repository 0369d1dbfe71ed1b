"""Checkpoint sources behind one door: :func:`open_source` (one run: a hub id, a local suite
folder or an embedded run) and :func:`open_sources` (several names, suites expanded), both in
:mod:`interp.sources.door`.

Rooms: :mod:`~interp.sources.loading` (errors, tokenizer and digest helpers, memory release),
:mod:`~interp.sources.base` (:class:`CheckpointSource`), :mod:`~interp.sources.hub`
(:class:`HubSource`), :mod:`~interp.sources.local` (:class:`LocalSuiteSource`, the zoom overlay),
:mod:`~interp.sources.embedded` (the embedded suite's trainer) with
:mod:`~interp.sources.environment` (what decides its weights), :mod:`~interp.sources.catalogue`
(suite configs, run names), :mod:`~interp.sources.families` (model families, the Pythia ids),
:mod:`~interp.sources.checkpoint_integrity` (the hazards table), :mod:`~interp.sources.weight_swap`.

Every public name of those modules is readable here (``from interp.sources import HubSource``),
imported on first use (PEP 562) so that ``import interp.sources.catalogue`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Where a name read from this package is looked up, in order (the old ``interp.sources``
#: and ``interp.sources`` names all resolve here).
_ROOMS = ("door", "base", "loading", "hub", "local", "checkpoint_integrity", "catalogue", "families")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    for room in _ROOMS:
        module = importlib.import_module(f"{__name__}.{room}")
        if name in vars(module):
            return vars(module)[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
