"""The one training loop: nanoGPT's flat loop, shared by every trainer of the project.

Used by the embedded suite (:func:`interp.sources.embedded.train_run`, with the attention-bias forcing of
:mod:`interp.forcing` as a forward context), the synthetic tasks (:func:`synthetic.training.train`)
pre-pretraining (:func:`synthetic.pretraining.pretrain_model`) and the stacked ensemble
(:func:`synthetic.ensemble.train_ensemble`: its ``[E, ...]`` weights are no module, ``model=None``).

One step ``t`` (0-based; ``t`` optimizer updates done before it), as nanoGPT's ``train.py`` writes it::

    at_step(t)                  # the caller's callbacks: evaluate, checkpoint (weights + state)
    if t == stop: break
    batch = batch_at(t)         # a function of the step (or a generator saved with the state)
    lr = lr_at(t); set on every param group
    with forward_context(batch, t): loss = loss_fn(model, batch, t)   # forcing hooks live here
    zero_grad; loss.backward(); clip_grad_norm_(clip) if clip; optimizer.step()
    after_step(t, loss)         # progress, loss curve

The learning rate is a function of the step alone and the data order is either a function of the
step or a generator state saved beside the optimizer, so a run resumed at step ``A`` (the model
and optimizer loaded from a state written at ``A``) continues bit for bit as if it never stopped
(same kernels and thread count): ``tests/interp/core/test_train_loop.py``.

Resumable state (one format for every caller, :mod:`interp.core.training_state`): in a checkpoint folder
``optimizer.safetensors`` (AdamW's moments and step counts, plus extra tensors such as a batch
generator's state as ``extra.{name}``) and ``trainer_state.json`` (``step``, the param groups,
``trainer``: ``lr_next`` (the learning rate of the next update), ``threads`` and the caller's
scalars); the weights are written beside them by the caller (the embedded suite with
``save_pretrained``, the synthetic tasks with ``safetensors``), see :func:`save_state`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["load_state", "save_state", "train_loop", "warmup_constant"]


def warmup_constant(lr: float, warmup_steps: int) -> Callable[[int], float]:
    """The schedule of every trainer here: ``lr_at(t) = lr · min(1, (t + 1) / max(1, warmup_steps))``.

    Linear warm-up over ``warmup_steps`` updates (from ``lr / warmup_steps``), then constant ``lr``;
    ``warmup_steps = 0`` is constant ``lr`` (``lr · 1.0``, the same float). ``t`` is the 0-based
    update; the result is in the optimizer's units (per update).

    Raises:
        ValueError: ``warmup_steps < 0``.
    """
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps!r} is invalid: must be >= 0")
    scale = max(1, int(warmup_steps))
    return lambda t: lr * min(1.0, (t + 1) / scale)


def train_loop(
    model: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    *,
    start: int,
    stop: int,
    batch_at: Callable[[int], Any],
    loss_fn: Callable[[torch.nn.Module, Any, int], Tensor],
    lr_at: Callable[[int], float],
    clip: float | None = None,
    at_step: Callable[[int], None] | None = None,
    after_step: Callable[[int, Tensor], None] | None = None,
    forward_context: Callable[[Any, int], contextlib.AbstractContextManager] | None = None,
) -> None:
    """Train ``model`` from update ``start`` to ``stop`` (both in optimizer updates done).

    Args:
        model: the module being trained (its parameters are in ``optimizer``); left in train mode.
            None for parameters that are no module (the stacked ensemble's ``[E, ...]`` weights):
            ``loss_fn`` then gets None and reads them itself, clipping covers the optimizer's.
        optimizer: AdamW or any torch optimizer; its param groups' ``lr`` is set before each update.
        start: updates already done (0, or the step of the state resumed from).
        stop: the last step; ``at_step(stop)`` runs, no update follows.
        batch_at: the batch of update ``t`` (called once per update, in order).
        loss_fn: ``(model, batch, t) -> scalar loss`` (the forward pass), nats.
        lr_at: learning rate of update ``t`` (:func:`warmup_constant`).
        clip: max global gradient norm (``torch.nn.utils.clip_grad_norm_``); None: no clipping.
        at_step: called with ``t`` for every ``t`` in ``[start, stop]`` before update ``t``, the
            model holding the weights after ``t`` updates (evaluation, checkpoints, a bias
            schedule); the caller decides what ``t`` calls for (a resumed run's ``start`` was saved).
        after_step: called with ``(t, loss.detach())`` after update ``t``.
        forward_context: ``(batch, t) -> context manager`` entered around the training forward only
            (the embedded trainer's forcing hooks); None: no context.

    Raises:
        ValueError: ``stop < start``.
    """
    if stop < start:
        raise ValueError(f"stop_step={stop} is before the start step {start}")
    if model is not None:
        model.train()
    clipped = (
        list(model.parameters())
        if model is not None
        else [p for group in optimizer.param_groups for p in group["params"]]
    )
    for step in range(start, stop + 1):
        if at_step is not None:
            at_step(step)
        if step == stop:
            break
        batch = batch_at(step)
        lr = lr_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        with forward_context(batch, step) if forward_context is not None else contextlib.nullcontext():
            loss = loss_fn(model, batch, step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(clipped, clip)
        optimizer.step()
        if after_step is not None:
            after_step(step, loss.detach())


def save_state(
    folder: str | Path,
    optimizer: torch.optim.Optimizer,
    step: int,
    lr_next: float,
    extra: dict[str, Any] | None = None,
    tensors: dict[str, Tensor] | None = None,
) -> None:
    """Write the resumable state of a run after ``step`` updates into ``folder`` (the weights are the
    caller's: they sit beside it in the caller's layout).

    The trainer scalars always hold ``lr_next`` (learning rate of update ``step``) and ``threads``
    (torch's thread count: the bits may depend on it), plus ``extra``; ``tensors`` (a batch
    generator's state) go into the safetensors file. Format: :mod:`interp.core.training_state`.
    """
    from interp.core.training_state import save_training_state

    scalars = {"lr_next": lr_next, "threads": torch.get_num_threads(), **(extra or {})}
    save_training_state(folder, optimizer, step, extra=scalars, tensors=tensors)


def load_state(folder: str | Path, optimizer: torch.optim.Optimizer) -> tuple[int, dict[str, Any], dict[str, Tensor]]:
    """Restore ``optimizer`` from a state written by :func:`save_state`.

    Returns:
        ``(step, trainer scalars, extra tensors by name)``.

    Raises:
        interp.core.training_state.NotResumableError: no saved state in ``folder`` or an unknown format.
    """
    from interp.core.training_state import load_training_state

    meta, tensors = load_training_state(folder, optimizer)
    return int(meta["step"]), meta.get("trainer", {}), tensors
