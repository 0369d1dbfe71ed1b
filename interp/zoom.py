"""Zoom into a run trained by our own trainer: denser checkpoints between two stored steps.

A run of the embedded suite stores, at each checkpoint, everything needed to continue training
exactly (weights, AdamW state, step; the data order and learning rate are functions of the step).
:func:`zoom` re-trains ``pre -> post`` from ``pre``'s saved state with the same trainer and the
same torch thread count that wrote the run, saving every ``every`` steps, and checks that the
re-trained weights at ``post`` equal the stored ones (max |difference| <= ``tolerance``, exact by
default). Only then are the new steps moved into the overlay ``RUN/zoom/step{N}/`` (each folder
renamed into place, then ``RUN/zoom/zoom.json`` rewritten), so the run's base schedule, which
``make demo`` and the analyses read, never changes. ``LocalSuiteSource(run, include_zoom=True)``
opts in to the overlay.

A run that keeps the optimizer state of its last checkpoint only (``keep_optimizer: last``, the
population of seeds) is re-trained from the nearest stored step before ``pre`` that can be
resumed, else from step 0 (the initial weights and optimizer are a function of the seed):
:func:`zoom_plan` says what that costs before it starts. Every stored step the re-training passes
is checked against the kept one (bit for bit by default), and gets the optimizer state it lacked
(``keep_states``, ~2x its weights on disk), so the next zoom nearby starts there.

The dense search built on it (the point of emergence to one step) is :mod:`interp.dense`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from interp.core.io import atomic_write_text
from interp.core.objects import fields_html
from interp.core.training_state import NotResumableError, has_training_state
from interp.sources.local import ZOOM_DIR, overlay_steps

ZOOM_INDEX = "zoom.json"


class ZoomMismatchError(ValueError):
    """Re-training ``pre -> post`` did not reproduce the stored ``post`` weights within the
    tolerance (default 0: bit for bit), so the new steps would not lie on the stored trajectory;
    nothing is written. Usually another thread count, CPU instruction set or library version
    than the run was trained with.

    Fix: re-train with the run's recorded thread count (the default) on an x86-64 CPU with AVX2
    and the versions of ``constraints.txt`` (docs/embedded.md, "Zoom"), or accept a small
    difference with ``tolerance=`` (``--tolerance``).
    """


@dataclass
class ZoomResult:
    """What one :func:`zoom` call did.

    Attributes:
        run: the run folder.
        pre, post: the interval re-trained (steps).
        every: spacing of the new checkpoints (steps).
        new_steps: steps written to the overlay by this call (steps already stored are skipped).
        max_abs_diff: max |re-trained - stored| over every weight at ``post`` (0.0 = bit for bit).
        tolerance: the largest accepted ``max_abs_diff``.
        trained_steps: optimizer steps re-trained (``post - pre``, or 0 when every step of the
            grid was already stored).
        threads: torch threads used (the run's recorded count).
        seconds: wall time of the call.
        resumed_from: the step re-training started from (``pre``, or an earlier resumable step:
            :func:`zoom_plan`); ``trained_steps`` counts from it.
        checked_steps: the stored steps whose re-trained weights were compared (``post`` and
            every stored step passed on the way); ``max_abs_diff`` is over all of them.
    """

    run: Path
    pre: int
    post: int
    every: int
    new_steps: list[int]
    max_abs_diff: float
    tolerance: float
    trained_steps: int
    threads: int
    seconds: float
    resumed_from: int | None = None
    checked_steps: list[int] = field(default_factory=list)

    _repr_html_ = fields_html

    def as_row(self) -> dict[str, Any]:
        """The fields as one table row (``run`` as text, step lists comma-joined): ``zooms.csv``."""
        row = asdict(self)
        row["run"] = str(self.run)
        row["new_steps"] = ",".join(map(str, self.new_steps))
        row["checked_steps"] = ",".join(map(str, self.checked_steps))
        return row


@dataclass
class ZoomPlan:
    """What :func:`zoom` will re-train, known before it starts.

    Attributes:
        run: the run folder.
        pre, post: the interval asked for (steps).
        start: the step re-training starts from: ``pre`` when its optimizer state is kept, else the
            nearest earlier stored step whose state is, else 0 (from the seed's initial state).
        steps: optimizer steps to re-train (``post - start``).
        seconds_per_step: the run's own training time per step (``train_seconds`` of its
            ``suite.json`` over its last step; None when not recorded).
        seconds: estimate of the re-training time (``steps * seconds_per_step``; None when not
            known); a loaded machine takes longer.
    """

    run: Path
    pre: int
    post: int
    start: int
    steps: int
    seconds_per_step: float | None
    seconds: float | None

    _repr_html_ = fields_html

    def line(self) -> str:
        """The plan in one line, as ``emergence zoom`` prints it before it starts."""
        where = (
            f"from step {self.start} (step {self.pre} keeps no optimizer state; nearest resumable step before it)"
            if self.start != self.pre
            else f"from step {self.pre}"
        )
        cost = "" if self.seconds is None else f", about {self.seconds:.0f} s at the run's own training speed"
        return f"{self.run.name}: re-training {self.steps} steps {where} to step {self.post}{cost}"


def resume_step(run: str | Path, pre: int) -> int:
    """The latest stored step at or before ``pre`` whose optimizer state is kept, else 0 (step 0
    is always resumable: the initial weights and optimizer state are a function of the seed)."""
    run = Path(run)
    for step in sorted((s for s in stored_steps(run) if s <= pre), reverse=True):
        if has_training_state(step_folder(run, step)):
            return step
    return 0


def zoom_plan(source, pre: int, post: int) -> ZoomPlan:
    """What re-training ``pre -> post`` of a run costs, before it starts (:class:`ZoomPlan`).

    Raises:
        NotResumableError, ValueError: as :func:`zoom` (before anything trains).
    """
    run = run_folder(source)
    pre, post = int(pre), int(post)
    if pre >= post:
        raise ValueError(f"--pre {pre} must be before --post {post}")
    step_folder(run, pre), step_folder(run, post)
    meta = _metadata(run)
    start = resume_step(run, pre)
    last = max(int(s) for s in meta.get("steps", [0]) or [0])
    per_step = float(meta["train_seconds"]) / last if meta.get("train_seconds") and last else None
    return ZoomPlan(
        run, pre, post, start, post - start, per_step, None if per_step is None else per_step * (post - start)
    )


def run_folder(source) -> Path:
    """The folder of a resumable run: a path, or a :class:`LocalSuiteSource` over one.

    Raises:
        NotResumableError: a hub source, or a folder that was not written by this package's
            trainer (no ``suite.json`` with its config, or checkpoints without optimizer state).
        ValueError: a path that is not an existing folder.
    """
    from interp.sources.base import CheckpointSource
    from interp.sources.local import LocalSuiteSource

    if isinstance(source, LocalSuiteSource):
        root = source.root
    elif isinstance(source, CheckpointSource):
        raise NotResumableError(
            f"{source.model_id}: {type(source).__name__} checkpoints carry no optimizer state; zoom needs a run "
            "trained by emergence-lens (an embedded run or a suite folder written by `emergence train-suite`)"
        )
    else:
        root = Path(source).expanduser()
    if not root.is_dir():
        raise ValueError(f"run folder {str(root)!r} does not exist")
    meta = _metadata(root)
    if not meta.get("resumable") or "config" not in meta:
        raise NotResumableError(
            f"{root}: not a run written by emergence-lens's trainer with resumable checkpoints "
            "(suite.json lacks 'resumable'); zoom cannot re-train it"
        )
    return root


def _metadata(root: Path) -> dict:
    path = root / "suite.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def run_settings(run: Path):
    """``(SuiteConfig, ModelSize, seed, threads)`` recorded in a run's ``suite.json``.

    Raises:
        NotResumableError: the run was written by another trainer version.
    """
    from interp.sources import catalogue

    meta = _metadata(run)
    values = dict(meta["config"])
    if values.get("trainer_version") != catalogue.TRAINER_VERSION:
        raise NotResumableError(
            f"{run}: trained by trainer version {values.get('trainer_version')}; "
            f"this code re-trains version {catalogue.TRAINER_VERSION} only"
        )
    values["sizes"] = tuple(catalogue.ModelSize(**s) for s in values["sizes"])
    values["seeds"] = tuple(values["seeds"])
    values["data_order_seeds"] = tuple(values.get("data_order_seeds", ()))
    values["size_steps"] = tuple(tuple(x) for x in values.get("size_steps", ()))
    cfg = catalogue.SuiteConfig(**values)
    return cfg, catalogue.ModelSize(**meta["size"]), int(meta["seed"]), int(meta.get("threads", cfg.threads))


def _trained_pinned(run: Path) -> bool:
    """Whether the run's ``suite.json`` says it was trained with the kernel pins
    (:mod:`interp.core.kernel_pins`): then it is re-trained in a pinned process."""
    return bool(_metadata(run).get("environment", {}).get("kernel_pins", {}).get("applied"))


def stored_steps(run: str | Path) -> list[int]:
    """Base steps (``suite.json``) and overlay steps of a run, sorted."""
    base = _metadata(Path(run)).get("steps", [])
    return sorted({int(s) for s in base} | set(overlay_steps(run)))


def step_folder(run: Path, step: int) -> Path:
    """The checkpoint folder of ``step``: the base ``RUN/step{N}`` or the overlay's.

    Raises:
        ValueError: the step is stored in neither (the message lists the nearest stored steps).
    """
    from interp.sources.loading import nearest_steps

    for folder in (run / f"step{step}", run / ZOOM_DIR / f"step{step}"):
        if folder.is_dir():
            return folder
    raise ValueError(
        f"step {step} is not stored in {run}; nearest stored steps: {nearest_steps(step, stored_steps(run))}"
    )


def default_every(pre: int, post: int) -> int:
    """Spacing (steps) giving at least 10 new checkpoints strictly inside ``(pre, post)``: the
    largest of 1, 2, 5, 10, 20, 50, ... that does (1 when none does)."""
    candidates = [m * 10**e for e in range(12) for m in (1, 2, 5)]
    return max((c for c in candidates if len(range(pre + c, post, c)) >= 10), default=1)


def _max_abs_diff(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    left, right = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    if left.keys() != right.keys():
        return math.inf
    return max((float((left[k] - right[k]).abs().max()) if left[k].numel() else 0.0) for k in left)


def zoom(
    source,
    pre: int,
    post: int,
    every: int | None = None,
    tolerance: float = 0.0,
    threads: int | None = None,
    steps: Sequence[int] | None = None,
    keep_states: bool = True,
    echo: Callable[[str], Any] | None = None,
) -> ZoomResult:
    """Re-train ``pre -> post`` of a resumable run and store checkpoints every ``every`` steps.

    When ``pre`` keeps no optimizer state (``keep_optimizer: last``), re-training starts from the
    nearest earlier step that does, else from step 0 (:func:`zoom_plan`; ``echo`` gets its line
    before training starts), and every stored step passed is compared too.

    Args:
        source: a run folder or a :class:`interp.sources.LocalSuiteSource` over one.
        pre, post: stored steps (base or overlay), ``pre < post``.
        every: spacing of the new checkpoints in steps (default :func:`default_every`: at least
            10 new checkpoints in the interval).
        tolerance: largest accepted max |difference| between the re-trained and the stored
            weights at ``post`` (default 0.0: bit for bit, which holds at the recorded thread count
            on any x86-64 CPU with AVX2 for a run trained with the kernel pins, re-trained here in a
            pinned process; for an unpinned run, on the machine that trained it; see docs/embedded.md).
        threads: torch threads to re-train with (default: the run's recorded count; another
            count may change the weights).
        steps: store exactly these steps (strictly between ``pre`` and ``post``) instead of a
            regular grid; ``every`` is then ignored.
        keep_states: write the re-trained optimizer state beside each stored step passed that
            lacked it (once its weights matched), so that later zooms start there.
        echo: called with :meth:`ZoomPlan.line` before re-training starts (e.g. ``print``).

    Returns:
        :class:`ZoomResult` (the overlay holds the new steps when this returns).

    Raises:
        NotResumableError: the source cannot be resumed (hub, foreign suite, other trainer).
        ValueError: ``pre >= post``, a step not stored, ``every < 1`` or ``tolerance < 0``.
        ZoomMismatchError: the re-trained ``post`` differs from the stored one by more than
            ``tolerance`` (nothing is written).
    """
    from interp.sources import embedded

    started = time.perf_counter()
    run = run_folder(source)
    pre, post = int(pre), int(post)
    if pre >= post:
        raise ValueError(f"--pre {pre} must be before --post {post}")
    if every is not None and every < 1:
        raise ValueError(f"every={every}: the spacing of new checkpoints must be >= 1 step")
    if tolerance < 0:
        raise ValueError(f"tolerance={tolerance}: must be >= 0")
    step_folder(run, pre), step_folder(run, post)  # both stored: else the nearest stored steps are named
    cfg, size, seed, recorded_threads = run_settings(run)
    data_order_seed = _metadata(run).get("data_order_seed")  # absent before the two seeds were set apart: the seed
    if steps is not None:
        grid = sorted({int(s) for s in steps})
        outside = [s for s in grid if not pre < s < post]
        if outside or not grid:
            raise ValueError(f"steps {outside or grid}: need at least one step strictly between {pre} and {post}")
        every = min(b - a for a, b in zip([pre] + grid, grid + [post]))
    else:
        every = default_every(pre, post) if every is None else int(every)
        grid = list(range(pre + every, post, every))
    have = set(stored_steps(run))
    wanted = [s for s in grid if s not in have]
    overlay = run / ZOOM_DIR
    if not wanted:
        return ZoomResult(run, pre, post, every, [], 0.0, tolerance, 0, recorded_threads, time.perf_counter() - started)
    plan = zoom_plan(run, pre, post)
    start = plan.start
    start_folder = step_folder(run, start) if has_training_state(step_folder(run, start)) else None
    passed = sorted(s for s in have if start < s < post)  # stored steps re-trained on the way: checked too
    if echo is not None:
        echo(plan.line())
    overlay.mkdir(exist_ok=True)
    tmp = overlay / f".tmp-{os.getpid()}-{pre}-{post}"
    shutil.rmtree(tmp, ignore_errors=True)
    n_threads = recorded_threads if threads is None else int(threads)
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        if _trained_pinned(run):  # the same kernels as the stored steps: a pinned process
            from interp.core import kernel_pins

            losses = kernel_pins.run_pinned(
                embedded.train_run,
                size,
                seed,
                cfg,
                tmp,
                threads=n_threads,
                what=f"zoom re-training of {run.name} {start}..{post}",
                resume_from=start_folder,
                stop_step=post,
                save_steps=wanted + passed + [post],
                data_order_seed=data_order_seed,
            )
        else:  # a run trained before the pins (or unpinned): this process's kernels, as it was
            losses = embedded.train_run(
                size,
                seed,
                cfg,
                tmp,
                resume_from=start_folder,
                stop_step=post,
                save_steps=wanted + passed + [post],
                data_order_seed=data_order_seed,
            )
        checked = passed + [post]
        diffs = {s: _max_abs_diff(tmp / f"step{s}", step_folder(run, s)) for s in checked}
        diff = max(diffs.values())
        if not diff <= tolerance:
            worst = max(diffs, key=lambda s: diffs[s])
            raise ZoomMismatchError(
                f"re-trained step {worst} differs from the stored one by max |diff| {diff:.3g} > tolerance "
                f"{tolerance:g} (threads {n_threads}, recorded {recorded_threads}); the new steps were not stored"
            )
        for step in wanted:  # each rename is atomic; a step another process stored first is kept
            target = overlay / f"step{step}"
            if not target.exists():
                os.replace(tmp / f"step{step}", target)
        if keep_states:
            _keep_states(run, tmp, checked)
        _record(overlay, pre, post, every, wanted, diff, n_threads, losses, start)
    finally:
        torch.set_num_threads(previous_threads)
        shutil.rmtree(tmp, ignore_errors=True)
    return ZoomResult(
        run, pre, post, every, wanted, diff, tolerance, post - start, n_threads, time.perf_counter() - started,
        start, checked,
    )  # fmt: skip


def _keep_states(run: Path, tmp: Path, steps: Sequence[int]) -> None:
    """Move the re-trained optimizer state of each stored step of ``steps`` that lacks one beside
    its weights (each file renamed into place: atomic; the weights were checked equal first)."""
    from interp.core.training_state import OPTIMIZER_FILE, STATE_FILE

    for step in steps:
        folder = step_folder(run, step)
        if has_training_state(folder):
            continue
        for name in (STATE_FILE, OPTIMIZER_FILE):  # the optimizer file last: it makes the step resumable
            os.replace(tmp / f"step{step}" / name, folder / name)


def store_steps(source, steps: Sequence[int], tolerance: float = 0.0) -> list[ZoomResult]:
    """Make every step of ``steps`` available in the run (base or overlay), re-training only the
    stored intervals that contain missing ones (one :func:`zoom` per interval).

    Raises:
        ValueError: a step before the first or after the last stored step.
        NotResumableError, ZoomMismatchError: as :func:`zoom`.
    """
    run = run_folder(source)
    have = stored_steps(run)
    missing = sorted({int(s) for s in steps} - set(have))
    bad = [s for s in missing if not have[0] < s < have[-1]]
    if bad:
        raise ValueError(f"steps {bad} lie outside the run's stored range {have[0]}..{have[-1]}")
    groups: dict[tuple[int, int], list[int]] = {}
    for step in missing:
        below = max(h for h in have if h < step)
        above = min(h for h in have if h > step)
        groups.setdefault((below, above), []).append(step)
    return [zoom(run, pre, post, steps=inside, tolerance=tolerance) for (pre, post), inside in sorted(groups.items())]


def _record(
    overlay: Path,
    pre: int,
    post: int,
    every: int,
    steps: list[int],
    diff: float,
    threads: int,
    losses: pd.DataFrame,
    start: int,
) -> None:
    """Append one zoom to ``zoom.json`` (rewritten atomically)."""
    index = overlay / ZOOM_INDEX
    entries = json.loads(index.read_text()) if index.is_file() else []
    entries.append(
        {
            "pre": pre,
            "post": post,
            "resumed_from": start,
            "every": every,
            "steps": steps,
            "max_abs_diff": diff,
            "threads": threads,
            "loss_mean": float(losses["loss"].mean()) if len(losses) else None,
        }
    )
    atomic_write_text(index, json.dumps(entries, indent=1))
