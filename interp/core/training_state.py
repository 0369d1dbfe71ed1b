"""Resumable training state on disk: optimizer moments as safetensors, scalars as JSON, no pickle.

One checkpoint folder of a run trained by our own code holds, beside the model weights:

```
step{N}/optimizer.safetensors   every tensor of the optimizer's state ("state.{param index}.{name}")
step{N}/trainer_state.json      step, learning rate, param-group hyper-parameters, tensor shapes,
                                thread count, and whatever the trainer adds (its data cursor)
```

so that training continues from step ``N`` exactly as if it had never stopped: the data order is
derived from the step (or stored here as a generator state tensor), the learning-rate schedule is a
function of the step, and AdamW's moments and step counts come back bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.core.io import atomic_path, atomic_write_text

OPTIMIZER_FILE = "optimizer.safetensors"
STATE_FILE = "trainer_state.json"
#: Version of this layout (bumped when a field's meaning changes).
STATE_FORMAT = 1


class NotResumableError(ValueError):
    """A checkpoint cannot be trained further: it lacks the optimizer or trainer state (every
    hub checkpoint; a suite not written by this package's trainer), or was written by another
    trainer or state-format version.

    Fix: zoom and resume work on runs trained here only (``embedded/<run>`` or a folder written
    by ``emergence train-suite``); for a hub model use the checkpoints it has (``emergence
    bisect``), or re-train the run with the current code.
    """


def has_training_state(folder: str | Path) -> bool:
    """True when ``folder`` holds both :data:`OPTIMIZER_FILE` and :data:`STATE_FILE`."""
    folder = Path(folder)
    return (folder / OPTIMIZER_FILE).is_file() and (folder / STATE_FILE).is_file()


def save_training_state(
    folder: str | Path,
    optimizer: torch.optim.Optimizer,
    step: int,
    extra: dict[str, Any] | None = None,
    tensors: dict[str, Tensor] | None = None,
) -> None:
    """Write the optimizer's state and the trainer's scalars into ``folder`` (each file atomically).

    Args:
        folder: the checkpoint folder (created if missing).
        optimizer: any torch optimizer whose state holds tensors (AdamW: ``step``, ``exp_avg``,
            ``exp_avg_sq`` per parameter).
        step: optimizer updates done so far (steps).
        extra: JSON-serialisable scalars of the trainer (learning-rate schedule position, data
            cursor, thread count...), stored under ``"trainer"``.
        tensors: further tensors to keep (for example a ``torch.Generator`` state), stored as
            ``"extra.{name}"`` in the safetensors file.

    Raises:
        TypeError: a value of the optimizer's per-parameter state is not a tensor (names it).
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = optimizer.state_dict()
    flat: dict[str, Tensor] = {}
    shapes: dict[str, list[int]] = {}
    for index, values in state["state"].items():
        for name, value in values.items():
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"optimizer state {name!r} of parameter {index} is a {type(value).__name__}, not a tensor"
                )
            key = f"state.{index}.{name}"
            shapes[key] = list(value.shape)
            # safetensors wants contiguous tensors with at least one dimension
            flat[key] = value.detach().reshape(-1).contiguous().clone()
    for name, value in (tensors or {}).items():
        key = f"extra.{name}"
        shapes[key] = list(value.shape)
        flat[key] = value.detach().reshape(-1).contiguous().clone()
    meta = {
        "format": STATE_FORMAT,
        "step": int(step),
        "param_groups": state["param_groups"],
        "shapes": shapes,
        "trainer": extra or {},
    }
    with atomic_path(folder / OPTIMIZER_FILE, suffix=".safetensors") as tmp:
        save_file(flat, str(tmp))
    atomic_write_text(folder / STATE_FILE, json.dumps(meta, indent=1, sort_keys=True))


def read_training_state(folder: str | Path) -> dict[str, Any]:
    """The JSON half of a saved state: ``{"format", "step", "param_groups", "shapes", "trainer"}``.

    Raises:
        NotResumableError: ``folder`` has no saved training state.
    """
    folder = Path(folder)
    if not has_training_state(folder):
        raise NotResumableError(
            f"{folder} holds no training state ({OPTIMIZER_FILE} + {STATE_FILE}): it cannot be resumed"
        )
    return json.loads((folder / STATE_FILE).read_text())


def load_training_state(
    folder: str | Path, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """Restore ``optimizer`` from ``folder`` (written by :func:`save_training_state`).

    Returns:
        ``(meta, tensors)``: the JSON state (``meta["step"]``, ``meta["trainer"]``) and the extra
        tensors by name.

    Raises:
        NotResumableError: no saved state in ``folder``, or a format this code does not read.
    """
    from safetensors.torch import load_file

    meta = read_training_state(folder)
    if meta.get("format") != STATE_FORMAT:
        raise NotResumableError(
            f"{folder}: training-state format {meta.get('format')!r}; this code reads {STATE_FORMAT}"
        )
    flat = load_file(str(Path(folder) / OPTIMIZER_FILE))
    shaped = {key: value.reshape(meta["shapes"][key]) for key, value in flat.items()}
    state: dict[int, dict[str, Tensor]] = {}
    extra: dict[str, Tensor] = {}
    for key, value in shaped.items():
        kind, rest = key.split(".", 1)
        if kind == "extra":
            extra[rest] = value
        else:
            index, name = rest.split(".", 1)
            state.setdefault(int(index), {})[name] = value
    optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
    return meta, extra
