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

:func:`dense_point` locates the point of emergence to a given resolution: it zooms recursively into
the bracketing interval, evaluates every checkpoint with more prompts (512 by default) and applies
the noise rule of :func:`interp.emergence.held_crossing` (the crossing must hold for the next
``hold`` checkpoints).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.core.io import atomic_write_text
from interp.core.objects import fields_html, results_equal, short_repr
from interp.core.training_state import NotResumableError, has_training_state
from interp.emergence import DEFAULT_HOLD, check_hold, held_crossing
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

    _repr_html_ = fields_html

    def as_row(self) -> dict[str, Any]:
        """The fields as one table row (``run`` as text, ``new_steps`` comma-joined): ``zooms.csv``."""
        row = asdict(self)
        row["run"] = str(self.run)
        row["new_steps"] = ",".join(map(str, self.new_steps))
        return row


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
    from interp.sources import embedded

    meta = _metadata(run)
    values = dict(meta["config"])
    if values.get("trainer_version") != embedded.TRAINER_VERSION:
        raise NotResumableError(
            f"{run}: trained by trainer version {values.get('trainer_version')}; "
            f"this code re-trains version {embedded.TRAINER_VERSION} only"
        )
    values["sizes"] = tuple(embedded.ModelSize(**s) for s in values["sizes"])
    values["seeds"] = tuple(values["seeds"])
    values["size_steps"] = tuple(tuple(x) for x in values.get("size_steps", ()))
    cfg = embedded.SuiteConfig(**values)
    return cfg, embedded.ModelSize(**meta["size"]), int(meta["seed"]), int(meta.get("threads", cfg.threads))


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
) -> ZoomResult:
    """Re-train ``pre -> post`` of a resumable run and store checkpoints every ``every`` steps.

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
    start_folder, end_folder = step_folder(run, pre), step_folder(run, post)
    if not has_training_state(start_folder):
        raise NotResumableError(f"{start_folder} holds no optimizer state: it cannot be resumed")
    cfg, size, seed, recorded_threads = run_settings(run)
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
                what=f"zoom re-training of {run.name} {pre}..{post}",
                resume_from=start_folder,
                stop_step=post,
                save_steps=wanted + [post],
            )
        else:  # a run trained before the pins (or unpinned): this process's kernels, as it was
            losses = embedded.train_run(
                size, seed, cfg, tmp, resume_from=start_folder, stop_step=post, save_steps=wanted + [post]
            )
        diff = _max_abs_diff(tmp / f"step{post}", end_folder)
        if not diff <= tolerance:
            raise ZoomMismatchError(
                f"re-trained step {post} differs from the stored one by max |diff| {diff:.3g} > tolerance "
                f"{tolerance:g} (threads {n_threads}, recorded {recorded_threads}); the new steps were not stored"
            )
        for step in wanted:  # each rename is atomic; a step another process stored first is kept
            target = overlay / f"step{step}"
            if not target.exists():
                os.replace(tmp / f"step{step}", target)
        _record(overlay, pre, post, every, wanted, diff, n_threads, losses)
    finally:
        torch.set_num_threads(previous_threads)
        shutil.rmtree(tmp, ignore_errors=True)
    return ZoomResult(
        run, pre, post, every, wanted, diff, tolerance, post - pre, n_threads, time.perf_counter() - started
    )


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
    overlay: Path, pre: int, post: int, every: int, steps: list[int], diff: float, threads: int, losses: pd.DataFrame
) -> None:
    """Append one zoom to ``zoom.json`` (rewritten atomically)."""
    index = overlay / ZOOM_INDEX
    entries = json.loads(index.read_text()) if index.is_file() else []
    entries.append(
        {
            "pre": pre,
            "post": post,
            "every": every,
            "steps": steps,
            "max_abs_diff": diff,
            "threads": threads,
            "loss_mean": float(losses["loss"].mean()) if len(losses) else None,
        }
    )
    atomic_write_text(index, json.dumps(entries, indent=1))


# --- dense search ------------------------------------------------------------------------------


@dataclass
class DensePoint:
    """The point of emergence of one run located to ``resolution`` steps by :func:`dense_point`.

    Attributes:
        model_id: the run.
        pre_step, post_step: consecutive checkpoints ``resolution`` steps apart (or fewer, at the
            end of the search) around the crossing; ``None`` when no crossing holds.
        resolution: the spacing asked for (steps).
        threshold, hold, n_prompts: the noise rule (see :func:`interp.emergence.held_crossing`).
        accuracy_pre, accuracy_post: greedy accuracy (fraction) at pre and post.
        p_pre, p_post: mean p(answer) (probability) at pre and post.
        jump: ``p_post - p_pre`` (probability).
        jump_se: standard error of ``jump`` over prompts (paired per-prompt differences).
        jump_too_small: ``jump < min_jump_se * jump_se``: a share of this jump would divide by noise.
        retrained_steps: optimizer steps re-trained by the zooms of this search.
        zooms: the zoom calls made.
        evaluations: ``step``, ``accuracy``, ``p_answer``, ``overlay`` (True for zoomed steps).
    """

    model_id: str
    pre_step: int | None
    post_step: int | None
    resolution: int
    threshold: float
    hold: int
    n_prompts: int
    accuracy_pre: float | None = None
    accuracy_post: float | None = None
    p_pre: float | None = None
    p_post: float | None = None
    jump: float | None = None
    jump_se: float | None = None
    jump_too_small: bool = True
    retrained_steps: int = 0
    zooms: list[ZoomResult] = field(default_factory=list)
    evaluations: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    __eq__ = results_equal
    __repr__ = short_repr
    _repr_html_ = fields_html

    def as_row(self) -> dict[str, Any]:
        """One row for a table (without the zooms and evaluations)."""
        return {k: v for k, v in asdict(self).items() if k not in ("zooms", "evaluations")}


class DenseEvaluator:
    """Per-prompt scores of a run's stored checkpoints (base and overlay), each step once.

    Loads each step's ``save_pretrained`` weights into one Hugging Face model (no bridge: plain
    logits are all the capability needs; bridge logits equal them: tests/test_checkpoints.py checks it).
    """

    def __init__(self, run: Path, batch, device: str = "cpu"):
        from transformers import AutoModelForCausalLM  # GPT-NeoX, or Phi for a size with its own d_head

        from interp.sources.loading import quiet_hf_progress

        self.run, self.batch, self.device = run, batch, device
        with quiet_hf_progress():
            model = AutoModelForCausalLM.from_pretrained(step_folder(run, stored_steps(run)[0]), dtype=torch.float32)
        self.model = model.to(device).eval()
        self.correct: dict[int, np.ndarray] = {}
        self.p_answer: dict[int, np.ndarray] = {}

    @torch.inference_mode()
    def __call__(self, step: int) -> tuple[float, float]:
        """``(accuracy, mean p(answer))`` of ``step`` (fraction, probability), evaluated once and kept.

        Raises:
            ValueError: the step's saved weights lack some of the model's tensors.
        """
        from safetensors.torch import load_file

        from interp.core.metrics import METRICS, answer_logits

        if step not in self.correct:
            weights = load_file(str(step_folder(self.run, step) / "model.safetensors"), device=str(self.device))
            # saved names may differ from the module's (transformers renames lm_head on save)
            missing, _ = self.model.load_state_dict(_rename_for(self.model, weights), strict=False)
            if missing:
                raise ValueError(f"step {step} of {self.run}: weights missing for {missing[:3]}")
            correct, p_answer = [], []
            for start in range(0, len(self.batch), 128):
                chunk = self.batch.tokens[start : start + 128].to(self.device)
                sub = type(self.batch)(
                    chunk, self.batch.answers[start : start + 128], self.batch.answer_pos[start : start + 128]
                )
                final = answer_logits(self.model(chunk).logits, sub)
                correct.append(METRICS["accuracy"](final, sub).bool().cpu().numpy())
                p_answer.append(METRICS["p"](final, sub).cpu().numpy())
            self.correct[step] = np.concatenate(correct)
            self.p_answer[step] = np.concatenate(p_answer)
        return float(self.correct[step].mean()), float(self.p_answer[step].mean())

    def table(self) -> pd.DataFrame:
        """One row per evaluated step: ``step``, ``accuracy`` (fraction), ``p_answer`` (mean
        probability), ``overlay`` (the step is a zoom's, not the base schedule's)."""
        overlay = set(overlay_steps(self.run))
        rows = [
            {
                "step": s,
                "accuracy": float(self.correct[s].mean()),
                "p_answer": float(self.p_answer[s].mean()),
                "overlay": s in overlay,
            }
            for s in sorted(self.correct)
        ]
        return pd.DataFrame(rows, columns=["step", "accuracy", "p_answer", "overlay"])


def _rename_for(model: torch.nn.Module, weights: dict) -> dict:
    """Map saved tensor names onto ``model``'s (``embed_out`` <-> ``lm_head``)."""
    own = set(model.state_dict())
    out = {}
    for name, value in weights.items():
        if name not in own:
            for a, b in (("embed_out", "lm_head"), ("lm_head", "embed_out")):
                if name.startswith(a) and name.replace(a, b, 1) in own:
                    name = name.replace(a, b, 1)
        out[name] = value
    return out


def dense_point(
    source,
    resolution: int = 1,
    threshold: float = 0.5,
    n_prompts: int = 512,
    hold: int = DEFAULT_HOLD,
    min_jump_se: float = 3.0,
    tolerance: float = 0.0,
    task_seed: int = 0,
    length: int = 10,
    device: str = "cpu",
    max_rounds: int = 12,
) -> DensePoint:
    """Locate a run's point of emergence to ``resolution`` steps by recursive zooming.

    1. Evaluate the base schedule's checkpoints on ``n_prompts`` repetition prompts and find the
       crossing by :func:`interp.emergence.held_crossing` (the toolkit's one rule: the first
       checkpoint at or above ``threshold`` whose next ``hold`` checkpoints stay there).
    2. While the bracketing checkpoints are more than ``resolution`` steps apart, :func:`zoom`
       into them with spacing ``max(resolution, ceil(gap / 10))``, add the new grid to the curve
       and apply the rule again. Overlay steps stored by other calls are not on the curve, so
       the result depends on the base schedule and ``resolution`` only.

    Args:
        source: a resumable run (folder or LocalSuiteSource).
        resolution: wanted spacing of pre and post (steps, >= 1).
        threshold: greedy-accuracy threshold (fraction; 0.5 as in the base search).
        n_prompts: repetition prompts (more than the base search's 64: at 10-step spacing
            accuracy on 64 prompts moves by ~0.06 between neighbouring checkpoints).
        hold: checkpoints after the crossing that must stay at or above the threshold.
        min_jump_se: the jump is flagged as too small when below this many standard errors.
        tolerance: passed to :func:`zoom`.
        task_seed, length: the repetition prompts' seed and digit-string length (tokens;
            :class:`interp.tasks.RepetitionTask`).
        device: where the checkpoints are evaluated (re-training uses the run's own settings).
        max_rounds: most zoom rounds (each narrows the bracket about tenfold).

    Returns:
        :class:`DensePoint`.

    Raises:
        NotResumableError: the source cannot be resumed.
        ValueError: ``resolution < 1``, ``hold < 0`` or ``n_prompts < 1``.
        ZoomMismatchError: a zoom did not reproduce its stored end point.
    """
    from interp.sources.local import LocalSuiteSource
    from interp.tasks import RepetitionTask

    if resolution < 1:
        raise ValueError(f"resolution={resolution}: must be >= 1 step")
    check_hold(hold)
    run = run_folder(source)
    model_id = _metadata(run).get("model_id", run.name)
    batch = RepetitionTask(n_prompts=n_prompts, length=length, seed=task_seed).build(LocalSuiteSource(run).tokenizer())
    evaluator = DenseEvaluator(run, batch, device=device)
    zooms: list[ZoomResult] = []
    result = DensePoint(model_id, None, None, resolution, threshold, hold, n_prompts)

    def crossing(steps: list[int]) -> tuple[int | None, int | None]:
        accuracy = [evaluator(s)[0] for s in steps]
        return held_crossing(steps, accuracy, threshold=threshold, hold=hold)

    # The curve of each round is the previous round's outside the bracket plus the new grid inside
    # it: the result depends on the base schedule and the resolution only, not on overlay steps
    # that other calls stored.
    curve = sorted(int(s) for s in _metadata(run)["steps"])
    pre, post = crossing(curve)
    for _ in range(max_rounds):
        if pre is None or post is None or post - pre <= resolution:
            break
        every = max(resolution, math.ceil((post - pre) / 10))
        zooms.append(zoom(run, pre, post, every=every, tolerance=tolerance))
        curve = sorted(set(curve) | set(range(pre, post, every)))
        new_pre, new_post = crossing(curve)
        if (new_pre, new_post) == (pre, post):  # nothing finer to store (e.g. gap not divisible)
            break
        pre, post = new_pre, new_post
    result.pre_step, result.post_step = pre, post
    result.zooms = zooms
    result.retrained_steps = sum(z.trained_steps for z in zooms)
    result.evaluations = evaluator.table()
    if pre is not None and post is not None:
        result.accuracy_pre, result.p_pre = evaluator(pre)
        result.accuracy_post, result.p_post = evaluator(post)
        from interp.emergence import jump_noise

        result.jump, result.jump_se, result.jump_too_small = jump_noise(
            evaluator.p_answer[pre], evaluator.p_answer[post], min_se=min_jump_se
        )
    return result
