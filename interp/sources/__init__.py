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

The names in :data:`WHERE` are readable here too (``from interp.sources import HubSource``), each
from the one room that defines it, imported when first read (PEP 562): the rooms behind the door
import torch, and ``import interp.sources.catalogue`` (the command line's source names) must not.
Any other name is imported from its room.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each name this package offers, and the room (module of this package) that defines it.
WHERE = {
    "open_source": "door",
    "open_sources": "door",
    "ReadySources": "door",
    "check_source_name": "door",
    "check_one_run": "door",
    "CheckpointSource": "base",
    "HubSource": "hub",
    "LocalSuiteSource": "local",
    "CheckpointError": "loading",
    "CorruptCheckpointError": "loading",
    "HubUnavailableError": "loading",
    "TokenizerMismatchError": "loading",
    "PYTHIA_STEPS": "loading",
    "combine_digests": "loading",
    "make_byte_tokenizer": "loading",
    "quiet_hf_progress": "loading",
    "tokenizer_fingerprint": "loading",
    "upcast_softmax": "loading",
    "checkpoint_table": "checkpoint_integrity",
    "hazard_lines": "checkpoint_integrity",
    "is_hub_id": "catalogue",
    "is_pythia_id": "catalogue",
    "pythia_model_ids": "catalogue",
}


def __getattr__(name: str) -> Any:
    if name not in WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *WHERE])
