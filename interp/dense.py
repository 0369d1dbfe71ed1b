"""The point of emergence located to a given resolution by recursive zooming (:func:`dense_point`).

:func:`dense_point` zooms (:func:`interp.zoom.zoom`) recursively into the bracketing interval,
evaluates every checkpoint with more prompts (512 by default) and applies the noise rule of
:func:`interp.emergence.held_crossing` (the crossing must hold for the next ``hold`` checkpoints).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.core.devices import choose_device
from interp.core.objects import check_argument, fields_html, results_equal, short_repr
from interp.core.settings import StudyConfig
from interp.emergence import held_crossing
from interp.sources.local import overlay_steps
from interp.zoom import ZoomResult, _metadata, run_folder, step_folder, stored_steps, zoom


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
    logits are all the capability needs; bridge logits equal them: tests/interp/sources/test_checkpoints.py checks it).
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
    config: StudyConfig = StudyConfig(),
    n_prompts: int = 512,
    min_jump_se: float = 3.0,
    tolerance: float = 0.0,
    task_seed: int = 0,
    length: int = 10,
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
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``threshold``
            (greedy-accuracy fraction, as in the base search), ``hold`` (checkpoints after the
            crossing that must stay at or above it) and ``device`` (where the checkpoints are
            evaluated; None: cuda if usable, else cpu; re-training uses the run's own settings).
        n_prompts: repetition prompts (more than the base search's 64: at 10-step spacing
            accuracy on 64 prompts moves by ~0.06 between neighbouring checkpoints).
        min_jump_se: the jump is flagged as too small when below this many standard errors.
        tolerance: passed to :func:`zoom`.
        task_seed, length: the repetition prompts' seed and digit-string length (tokens;
            :class:`interp.tasks.RepetitionTask`).
        max_rounds: most zoom rounds (each narrows the bracket about tenfold).

    Returns:
        :class:`DensePoint`.

    Raises:
        NotResumableError: the source cannot be resumed.
        TypeError: ``config`` is not a ``StudyConfig``.
        ValueError: ``resolution < 1`` or ``n_prompts < 1``.
        ZoomMismatchError: a zoom did not reproduce its stored end point.
    """
    from interp.sources.local import LocalSuiteSource
    from interp.tasks import RepetitionTask

    check_argument(isinstance(config, StudyConfig), config, "dense_point: config", "a StudyConfig")
    if resolution < 1:
        raise ValueError(f"resolution={resolution}: must be >= 1 step")
    threshold, hold, device = config.threshold, config.hold, choose_device(config.device or "auto")
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
