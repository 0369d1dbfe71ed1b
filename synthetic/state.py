"""A synthetic run's resumable state on disk, kept whole or not at all, and a run resumed from
a checkpoint (issue 54: split out of :mod:`synthetic.training`, which writes the state every
``state_every`` steps, as :mod:`synthetic.ensemble` does for its members)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from interp.core.io import atomic_write_text, remove_folder, to_jsonable

#: The metrics rows of a kept state (:func:`keep_state`), beside its checkpoint files.
STATE_ROWS = "rows.json"


def keep_state(state_dir: str | Path, save: Callable[[Path], object], rows: list) -> Path:
    """Replace ``state_dir/state/`` by a new resumable state: ``save(folder)`` writes the
    checkpoint files into a fresh folder, then the metrics rows so far go beside them
    (:data:`STATE_ROWS`, JSON) and the folder takes the old one's place. A kill at any moment
    leaves the old state, the new one, or (in a window of one rename) none, never half of one."""
    import shutil

    root = Path(state_dir)
    root.mkdir(parents=True, exist_ok=True)
    new, old, final = root / ".state.new", root / ".state.old", root / "state"
    shutil.rmtree(new, ignore_errors=True)
    if final.exists():  # else .state.old may be the only whole state (a kill between the renames)
        shutil.rmtree(old, ignore_errors=True)
    save(new)
    atomic_write_text(new / STATE_ROWS, json.dumps(rows, default=to_jsonable))
    if final.exists():
        os.replace(final, old)
    os.replace(new, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def drop_state(state_dir: str | Path | None) -> None:
    """Remove ``state_dir`` and the state :func:`keep_state` kept there (the run's result is
    safe: nothing is left to resume). Renamed first, so a kill half-way through the removal
    leaves no half state under its name."""
    if state_dir is not None:
        remove_folder(state_dir)


def find_state(state_dir: str | Path | None) -> Path | None:
    """The resumable state kept in ``state_dir`` by :func:`keep_state`, or None (no folder, or
    none complete; a state left by a kill between the two renames is found too)."""
    if state_dir is None:
        return None
    root = Path(state_dir)
    for folder in (root / "state", root / ".state.old"):
        if (folder / STATE_ROWS).is_file():
            return folder
    return None


def resume_checkpoint(
    folder: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    config: Any,
    device: torch.device,
) -> int:
    """Load weights, optimizer and generator state saved by :func:`synthetic.training.save_checkpoint`;
    return its step. ``config``: the run's :class:`synthetic.training.TrainConfig` (a dataclass; not
    imported here, so that this module stays below the trainer).

    Raises:
        ValueError: the checkpoint's config differs from ``config`` (other than ``steps``), or it
            holds no optimizer state.
    """
    from safetensors.torch import load_model

    from interp.core.train_loop import load_state

    saved = json.loads((folder / "config.json").read_text())
    differs = {k: v for k, v in saved["config"].items() if k != "steps" and asdict(config).get(k) != v}
    if differs:
        raise ValueError(f"resume_from={str(folder)!r} was trained with other settings: {sorted(differs)}")
    load_model(model, str(folder / "model.safetensors"), device=str(device))
    _, _, tensors = load_state(folder, optimizer)
    if "train_generator" not in tensors:
        raise ValueError(f"resume_from={str(folder)!r} holds no training-batch generator state")
    generator.set_state(tensors["train_generator"])
    return int(saved["step"])
