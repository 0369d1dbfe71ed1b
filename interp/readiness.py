"""Readiness: would the model already solve the task if its heads had the ideal attention pattern?

For every checkpoint of a run, the capability (greedy accuracy, p(answer)) is measured twice: as
trained, and with the chosen heads' attention patterns set to their ideal pattern
(:mod:`interp.patching.ideal`; a pattern patch, so nothing else of the model changes).  The
**readiness step** R is the point where the ideal-pattern curve crosses the threshold under the
same rule as the point of emergence E (first crossing that holds for the next ``hold``
checkpoints, :func:`crossing`).  ``E - R`` (training steps) says how long the rest of the circuit
was ready before the pattern was found: large means the pattern was the bottleneck; ``R ≈ E``
means the rest of the circuit formed together with it.  Its interval is a percentile bootstrap
over prompts (the same resampled prompts at every checkpoint, E and R recomputed per resample).

``heads="auto"`` picks at E's post step the head with the highest prefix-matching score (gets
the ``induction`` pattern) and, among the others, the head with the highest previous-token
score (gets ``previous_token``) (:mod:`interp.scores`).

Sources: Baherwani et al. 2026 (the claim that learning the sparse pattern is the bottleneck of
emergence), Olsson et al. 2022 (previous-token and induction heads, their scores), Efron &
Tibshirani 1993 (percentile bootstrap).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import torch

from interp.core.objects import check_argument
from interp.core.settings import StudyConfig
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

__all__ = [
    "POINTS_COLUMNS",
    "READINESS_COLUMNS",
    "ReadinessResult",
    "auto_heads",
    "crossing",
    "parse_heads",
    "parse_patterns",
    "pick_heads",
    "readiness",
    "readiness_figure",
    "readiness_html",
]

#: readiness.csv: one row per (run, checkpoint)
READINESS_COLUMNS = ["model", "seed", "step", "accuracy", "p_answer", "ideal_accuracy", "ideal_p_answer", "heads"]
#: readiness_points.csv: one row per run (steps; the interval is over prompts)
POINTS_COLUMNS = [
    "model",
    "seed",
    "heads",
    "emergence_step",
    "readiness_step",
    "e_minus_r",
    "e_minus_r_lo",
    "e_minus_r_hi",
    "n_boot",
    "boot_defined",
    "threshold",
    "hold",
]
#: patterns ``--patterns auto`` chooses from, keyed by the head score that picks them
AUTO_PATTERNS = {"prefix_matching": "induction", "previous_token": "previous_token"}


def crossing(
    steps: Sequence[int], accuracy: Sequence[float], threshold: float = DEFAULT_THRESHOLD, hold: int = DEFAULT_HOLD
) -> tuple[int | None, int | None]:
    """``(pre, post)`` of a fully evaluated curve under the point of emergence's rule: ``post`` is
    the first step at or above ``threshold`` that stays there for the next ``hold`` checkpoints.

    The one rule lives in :mod:`interp.emergence` (:func:`interp.emergence.held_crossing`);
    E and R both go through here so that they can never differ in rule.

    Raises:
        ValueError: as :func:`interp.emergence.held_crossing`.
    """
    from interp.emergence import held_crossing

    return held_crossing(steps, accuracy, threshold=threshold, hold=hold)


def parse_heads(text: str) -> list[tuple[int, int]] | str:
    """``"auto"`` or ``"L1H0,L0H2"`` -> ``"auto"`` / ``[(1, 0), (0, 2)]``.

    Raises:
        ValueError: an item that is not ``L<layer>H<head>`` (named), or a repeated head.
    """
    import re

    if text.strip().lower() == "auto":
        return "auto"
    heads = []
    for item in text.split(","):
        match = re.fullmatch(r"\s*L(\d+)H(\d+)\s*", item, flags=re.IGNORECASE)
        if not match:
            raise ValueError(f"--heads: {item.strip()!r} is not a head; expected 'auto' or e.g. L1H0,L0H2")
        heads.append((int(match.group(1)), int(match.group(2))))
    if len(set(heads)) != len(heads):
        raise ValueError(f"--heads: a head is repeated in {text!r}")
    return heads


def parse_patterns(text: str, n_heads: int | None) -> list[str] | str:
    """``"auto"``, one pattern name for every head, or one per head (comma-separated).

    Raises:
        ValueError: an unknown name (the valid ones listed), or a count that differs from the heads'.
    """
    from interp.patching.ideal import IDEAL_PATTERNS

    if text.strip().lower() == "auto":
        return "auto"
    names = [t.strip() for t in text.split(",")]
    bad = [n for n in names if n not in IDEAL_PATTERNS]
    if bad:
        raise ValueError(f"--patterns: {bad[0]!r} is unknown; valid: auto, {', '.join(IDEAL_PATTERNS)}")
    if n_heads is None and len(names) > 1:
        raise ValueError(
            "--patterns: one name per head needs --heads L..H..,...; with --heads auto give 'auto' or one name"
        )
    if n_heads is not None and len(names) not in (1, n_heads):
        raise ValueError(f"--patterns: {len(names)} names for {n_heads} heads; give one name or one per head")
    return names


def auto_heads(
    model: Any, tokenizer: Any, heads: Sequence[tuple[int, int]] | None = None, n_prompts: int = 16, period: int = 20
) -> dict[tuple[int, int], str]:
    """Heads and their ideal pattern chosen from the head scores of ``model`` (the post step).

    ``heads=None``: the head with the highest prefix-matching score gets ``induction``, the
    other head with the highest previous-token score ``previous_token``.  Given ``heads``: each
    gets the pattern of its higher score (prefix-matching -> induction, previous-token ->
    previous_token).

    Returns:
        ``{(layer, head): pattern name}``.
    """
    from interp.scores import head_scores, repeated_random_tokens
    from interp.tasks import alnum_token_pool

    tokens = repeated_random_tokens(alnum_token_pool(tokenizer), n_prompts=n_prompts, period=period)
    with torch.inference_mode():
        scores = head_scores(model, tokens, period)
    return pick_heads(scores, heads)


def pick_heads(scores: Mapping[str, Any], heads: Sequence[tuple[int, int]] | None = None) -> dict[tuple[int, int], str]:
    """:func:`auto_heads`'s choice from head scores already measured (``{"prefix_matching": ...,
    "previous_token": ...}``, each ``Float[Tensor or ndarray, "layer head"]``, :func:`interp.scores.head_scores`).

    Returns:
        ``{(layer, head): pattern name}``.
    """
    prefix, prev = torch.as_tensor(scores["prefix_matching"]), torch.as_tensor(scores["previous_token"])
    if heads is None:
        n_heads = prefix.shape[1]
        ind = divmod(int(prefix.argmax()), n_heads)
        masked = prev.clone()
        masked[ind] = -1.0
        pt = divmod(int(masked.argmax()), n_heads)
        return {ind: "induction", pt: "previous_token"}
    return {(h[0], h[1]): ("induction" if prefix[h] >= prev[h] else "previous_token") for h in heads}


def _scores_at(source: Any, step: int, device: str | None) -> dict[str, Any]:
    """The head scores of ``step`` (:func:`interp.scores.kept_head_scores` on the sequences of
    :func:`interp.scores.score_tokens`): kept from the main job's scan or the scrubber, else one load."""
    from interp.scores import kept_head_scores, score_tokens

    tokens, period = score_tokens(source.tokenizer())
    scores = kept_head_scores(source, step, tokens, period, device)
    if scores is None:
        scores = kept_head_scores(source, step, tokens, period, device, model=source.load(step, device=device).model)
    assert scores is not None  # measured on the loaded model
    return scores


def _correct(rows: torch.Tensor, batch) -> torch.Tensor:
    """Greedy correctness per prompt (1.0 / 0.0) from the answer-position logits."""
    return (rows.argmax(-1) == batch.answers.to(rows.device)).float()


@dataclass
class ReadinessResult:
    """Readiness of one run (see the module docstring).

    Attributes:
        model, seed: the run.
        heads: ``{(layer, head): ideal pattern name}`` patched.
        curve: one row per checkpoint: ``step``, ``accuracy``, ``p_answer`` (as trained),
            ``ideal_accuracy``, ``ideal_p_answer`` (chosen heads set to their ideal pattern);
            fractions / probabilities.
        emergence: ``(pre, post)`` of the plain curve (E = post), steps.
        ready: ``(pre, post)`` of the ideal-pattern curve (R = post), steps.
        e_minus_r: ``E - R`` in training steps (None when either is undefined).
        interval: 95 % percentile-bootstrap interval of ``E - R`` over prompts (steps).
        boot_defined: fraction of resamples in which both E and R exist (NaN with ``n_boot=0``).
        n_boot: bootstrap resamples behind ``interval`` (0: no interval, ``(None, None)``).
        threshold: greedy-accuracy threshold (fraction) of E and R; hold: the crossing rule's hold.
        correct, ideal_correct: ``Float[ndarray, "step prompt"]`` greedy correctness (1.0 / 0.0) as
            trained / with the ideal patterns (for more resampling).

    Sources: Baherwani et al. 2026 (the pattern as the bottleneck of emergence), Olsson et al.
    2022 (the heads' ideal patterns), Efron & Tibshirani 1993 (percentile bootstrap).
    """

    model: str
    seed: int
    heads: dict
    curve: pd.DataFrame
    emergence: tuple
    ready: tuple
    e_minus_r: int | None
    interval: tuple
    boot_defined: float
    n_boot: int
    threshold: float
    hold: int
    correct: np.ndarray | None = field(repr=False, default=None)
    ideal_correct: np.ndarray | None = field(repr=False, default=None)

    @property
    def heads_label(self) -> str:
        """The patched heads and their patterns in one label, e.g. ``"L1H3=induction+L0H2=previous_token"``."""
        return "+".join(f"L{l}H{h}={p}" for (l, h), p in sorted(self.heads.items()))

    def table(self) -> pd.DataFrame:
        """readiness.csv rows of this run (:data:`READINESS_COLUMNS`)."""
        df = self.curve.copy()
        df.insert(0, "seed", self.seed)
        df.insert(0, "model", self.model)
        df["heads"] = self.heads_label
        return df[READINESS_COLUMNS]

    def section_html(self, assets) -> str:
        """The report's readiness section (:func:`interp.report.page.readiness_section`): the figure
        (plotly.js from ``assets``, an :class:`interp.report.display.Assets`) and its caption."""
        from interp.report.display import figure_fragment

        return figure_fragment(readiness_figure(self), assets, _caption(self))

    def point_row(self) -> dict:
        """readiness_points.csv row of this run (:data:`POINTS_COLUMNS`)."""
        return {
            "model": self.model,
            "seed": self.seed,
            "heads": self.heads_label,
            "emergence_step": self.emergence[1],
            "readiness_step": self.ready[1],
            "e_minus_r": self.e_minus_r,
            "e_minus_r_lo": self.interval[0],
            "e_minus_r_hi": self.interval[1],
            "n_boot": self.n_boot,
            "boot_defined": self.boot_defined,
            "threshold": self.threshold,
            "hold": self.hold,
        }

    def figure(self):
        """The capability curve and the ideal-pattern curve on one figure, E and R marked."""
        return readiness_figure(self)

    def __repr__(self) -> str:
        """One line: the run, its heads, E, R and E - R with its interval (``curve`` summarised)."""
        lo, hi = self.interval
        gap = "undefined" if self.e_minus_r is None else f"{self.e_minus_r} steps [{lo}, {hi}]"
        return (
            f"ReadinessResult({self.model} seed {self.seed}, heads {self.heads_label}, E={self.emergence[1]}, "
            f"R={self.ready[1]}, E - R = {gap}, curve: {len(self.curve)} checkpoints, threshold {self.threshold:g}, "
            f"hold {self.hold}, n_boot {self.n_boot})"
        )

    def save_html(self, path) -> Path:
        """Write this run's readiness page (:func:`readiness_page`; plotly inlined, opens offline),
        atomically; returns the path."""
        from interp.core.io import atomic_write_text

        return atomic_write_text(Path(path), readiness_page([self], title=f"Readiness: {self.model} seed {self.seed}"))

    def _repr_html_(self) -> str:
        return readiness_html(self)


def _bootstrap(
    steps: list[int], correct: np.ndarray, ideal: np.ndarray, threshold: float, hold: int, n_boot: int, seed: int
) -> tuple[tuple[float | None, float | None], float]:
    if n_boot == 0:  # no interval asked for (StudyConfig(n_boot=0))
        return (None, None), float("nan")
    rng = np.random.default_rng(seed)
    n = correct.shape[1]
    diffs = []
    for _ in range(n_boot):
        idx = rng.integers(0, n, n)
        e = crossing(steps, correct[:, idx].mean(1), threshold, hold)[1]
        r = crossing(steps, ideal[:, idx].mean(1), threshold, hold)[1]
        if e is not None and r is not None:
            diffs.append(e - r)
    if not diffs:
        return (None, None), 0.0
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return (float(lo), float(hi)), len(diffs) / n_boot


def readiness(
    source: Any,
    batch: Any,
    heads: Any = "auto",
    patterns: Any = "auto",
    steps: Sequence[int] | None = None,
    config: StudyConfig = StudyConfig(),
    boot_seed: int = 0,
    on_step: Callable[[int], None] | None = None,
    progress: bool = True,
) -> ReadinessResult:
    """Capability per checkpoint as trained and with the chosen heads' patterns set to ideal.

    Args:
        source: a checkpoint source (``interp.sources``; ``source.load(step)``).
        batch: the task's prompts (``TaskBatch``: tokens ``[batch, pos]``, answers ``[batch]``,
            answer_pos ``[batch]``), tokenised for this source.
        heads: ``"auto"`` (see the module docstring), ``[(layer, head), ...]``, or a mapping
            ``{(layer, head): pattern name or callable}`` (then ``patterns`` is ignored).
        patterns: ``"auto"`` (by each head's scores at E's post step), one name for every head,
            or a list of names, one per head.
        steps: checkpoints to evaluate (training steps; default: every searchable step).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``threshold``
            (greedy-accuracy fraction of E and R), ``hold`` (checkpoints after the crossing that
            must stay at or above it; default :data:`interp.core.terms.DEFAULT_HOLD`), ``device``
            (where checkpoints load; None: cuda if usable, else cpu), ``method`` (patching engine:
            ``reference``, or the fast path for ``fast`` and ``attribution``; equal to 1e-5) and
            ``n_boot`` (bootstrap resamples over prompts for the interval of ``E - R``; default
            :data:`interp.core.settings.N_BOOT`; 0: no interval).
        boot_seed: the bootstrap's generator seed.
        on_step: called with each step once its ideal-pattern values are measured (progress).
        progress: one progress line over the checkpoints as trained, then one over the
            ideal-pattern values (standard output in a notebook, :mod:`interp.core.progress`);
            what this process measured before on the same weights, prompts and settings (the
            main job's scan, an earlier readiness call: :mod:`interp.core.kept`) is counted as
            kept and not loaded again; ``False`` silences them.

    Returns:
        :class:`ReadinessResult` (steps in training steps; accuracies fractions).

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
        ValueError: bad heads / patterns, fewer than 2 steps, or a head outside the model (bad
            settings are refused when the ``StudyConfig`` is made).

    Sources: Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning Sparse
    Attention Patterns" (the claim tested: the sparse pattern is the bottleneck); Olsson et al.
    2022, "In-context Learning and Induction Heads" (previous-token and induction patterns and
    scores); Efron & Tibshirani 1993 (percentile bootstrap of ``E - R``).
    """
    from interp.core.kept import KEPT, batch_digest
    from interp.core.progress import progress_bar
    from interp.evaluator import StepEvaluator, watching
    from interp.patching import IdealPatterns, patch_values, pattern
    from interp.patching._forward import check_batch
    from interp.sources.catalogue import model_and_seed

    check_argument(isinstance(config, StudyConfig), config, "readiness: config", "a StudyConfig")
    threshold, hold, device, n_boot = config.threshold, config.hold, config.device, config.n_boot
    method: Literal["fast", "reference"] = "reference" if config.method == "reference" else "fast"
    batch = check_batch(batch)
    if isinstance(heads, str) and heads != "auto":
        heads = parse_heads(heads)
    if isinstance(patterns, str) and patterns != "auto":
        patterns = parse_patterns(patterns, None if heads == "auto" or isinstance(heads, Mapping) else len(heads))
    steps = sorted(int(s) for s in (steps if steps is not None else source.searchable_steps()))
    if len(steps) < 2:
        raise ValueError(f"readiness needs at least 2 checkpoints, got {steps}")
    evaluator = StepEvaluator(source, batch, device=device)  # the road every capability curve takes
    label = str(getattr(source, "model_id", "run"))
    with watching(evaluator, len(steps), progress, desc=f"{label} as trained"):
        for step, then in zip(steps, [*steps[1:], None]):
            evaluator(step, then=then)
            if step == steps[0] and not isinstance(heads, str):  # a head outside the model: refused now
                from interp.patching.targets import Target

                shape = evaluator.shapes[step]
                Target("pattern", tuple(heads)).resolved_heads(shape["n_layers"], shape["n_heads"])
    correct = np.stack([evaluator.prompt_scores[step].correct for step in steps])
    plain_p = [evaluator.prompt_scores[step].p for step in steps]
    emergence = crossing(steps, correct.mean(1), threshold, hold)
    if isinstance(heads, Mapping):
        chosen = dict(heads)
    else:
        pick_step = emergence[1] if emergence[1] is not None else steps[-1]
        picked: dict[tuple[int, int], str] = {}
        if heads == "auto" or patterns == "auto":  # head scores at E's post step (the last step if none)
            picked = pick_heads(_scores_at(source, pick_step, device), None if heads == "auto" else list(heads))
        chosen_heads = list(picked) if heads == "auto" else [tuple(h) for h in heads]
        if patterns == "auto":
            chosen = picked
        else:
            names = list(patterns)
            names = names * len(chosen_heads) if len(names) == 1 else names
            chosen = dict(zip([tuple(h) for h in chosen_heads], names))
    ideal = IdealPatterns(chosen)
    target = pattern(sorted(ideal.heads))
    # kept per step for the process when every pattern is named (a callable has no stable key)
    named = all(isinstance(rule, str) for rule in ideal.heads.values())
    what = f"ideal:{sorted(ideal.heads.items())}:{method}"
    batch_key = batch_digest(batch)
    ideal_p, ideal_c = [], []
    bar = progress_bar(len(steps), f"{label} ideal patterns", enabled=progress)
    kept = 0
    try:
        for step in steps:
            key = KEPT.key(source, step, batch_key, what, device) if named else None
            values = KEPT.get(key)
            if values is None:
                model = source.load(step, device=device).model
                values = (
                    patch_values(model, ideal, batch, [target], metric="p", method=method)[0].numpy(),
                    patch_values(model, ideal, batch, [target], metric=_correct, method=method)[0].numpy(),
                )
                KEPT.put(key, values)
            else:
                kept += 1
                bar.set_postfix_str(f"{kept} kept", refresh=False)
            ideal_p.append(values[0])
            ideal_c.append(values[1])
            bar.update(1)
            if on_step is not None:
                on_step(step)
    finally:
        bar.close()
    ideal_correct = np.stack(ideal_c)
    ready = crossing(steps, ideal_correct.mean(1), threshold, hold)
    e_minus_r = None if emergence[1] is None or ready[1] is None else int(emergence[1] - ready[1])
    interval, defined = _bootstrap(steps, correct, ideal_correct, threshold, hold, n_boot, boot_seed)
    curve = pd.DataFrame(
        {
            "step": steps,
            "accuracy": correct.mean(1),
            "p_answer": np.stack(plain_p).mean(1),
            "ideal_accuracy": ideal_correct.mean(1),
            "ideal_p_answer": np.stack(ideal_p).mean(1),
        }
    )
    model_name, seed = model_and_seed(source.model_id)
    labels = {h: (r if isinstance(r, str) else getattr(r, "__name__", "callable")) for h, r in ideal.heads.items()}
    return ReadinessResult(
        model_name,
        seed,
        labels,
        curve,
        emergence,
        ready,
        e_minus_r,
        interval,
        defined,
        n_boot,
        threshold,
        hold,
        correct=correct,
        ideal_correct=ideal_correct,
    )


def readiness_figure(result: ReadinessResult):
    """Plotly figure: greedy accuracy as trained and with ideal patterns vs step (linear axis), the
    threshold dashed, E and R marked by vertical lines."""
    import plotly.graph_objects as go

    from interp.report.step_axis import step_axis

    curve = result.curve.sort_values("step")
    x = curve["step"]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curve["accuracy"],
            mode="lines+markers",
            name="accuracy as trained",
            hovertemplate="step %{x}<br>accuracy %{y:.3f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curve["ideal_accuracy"],
            mode="lines+markers",
            name=f"accuracy with ideal patterns ({result.heads_label})",
            hovertemplate="step %{x}<br>ideal-pattern accuracy %{y:.3f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curve["ideal_p_answer"],
            mode="lines",
            line=dict(dash="dot"),
            name="p(answer) with ideal patterns",
            visible="legendonly",
        )
    )
    fig.add_hline(y=result.threshold, line_dash="dash", line_color="gray")
    # E solid black, R dashed green (visible on top of E when they coincide); labels at two heights
    for step, name, color, dash, y in (
        (result.emergence[1], "E", "black", "solid", 1.0),
        (result.ready[1], "R", "green", "dash", 0.9),
    ):
        if step is not None:
            fig.add_vline(x=step, line_color=color, line_width=2, line_dash=dash)
            fig.add_annotation(
                x=step,
                y=y,
                yref="paper",
                text=f"{name} = step {step}",
                showarrow=False,
                xanchor="right",
                font=dict(color=color),
                bgcolor="white",
            )
    step_axis(fig, "linear")
    fig.update_yaxes(title_text="greedy accuracy", range=[-0.02, 1.05])
    fig.update_layout(
        title=f"{result.model} seed {result.seed}: capability vs ideal-pattern capability",
        height=380,
        margin=dict(t=60, b=40),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def _caption(result: ReadinessResult) -> str:
    e, r = result.emergence[1], result.ready[1]
    if result.e_minus_r is None:
        missing = [
            what
            for what, step in (
                ("the run does not emerge (no E)", e),
                ("the ideal-pattern model never crosses and holds (no R)", r),
            )
            if step is None
        ]
        what = f"E = {e}, R = {r}: " + " and ".join(missing)
    else:
        lo, hi = result.interval
        ci = "" if lo is None else f" (95 % bootstrap over prompts: {lo:.0f} to {hi:.0f})"
        what = f"E = step {e}, R = step {r}, E − R = {result.e_minus_r} steps{ci}"
    return (
        f"Greedy accuracy per checkpoint as trained and with the attention patterns of {result.heads_label} set "
        f"to their ideal pattern. {what}. R is the first checkpoint where the ideal-pattern curve crosses "
        f"{result.threshold:g} and stays there for {result.hold} more checkpoints (the rule of the point of "
        f"emergence E)."
    )


def readiness_section(run, ctx) -> Any:
    """Report section (``interp.report.page.RUN_SECTIONS``): the readiness figure of a run that has
    one (:func:`interp.report.page.readiness_section`, which draws :meth:`ReadinessResult.section_html`)."""
    from interp.report.page import readiness_section as section

    return section(run, ctx)


def readiness_html(result: ReadinessResult) -> str:
    """Notebook display of one result: the figure (plotly from the notebook's assets) and its caption."""
    from interp.core.html_fragments import STYLE
    from interp.core.templating import render, trusted
    from interp.report.display import Assets, figure_fragment

    figure = trusted(figure_fragment(readiness_figure(result), Assets(), _caption(result)))
    return render("report/templates/readiness.html.j2", page=False, style=trusted(STYLE), parts=[(None, figure)])


def readiness_page(results: Sequence[ReadinessResult], title: str = "Readiness") -> str:
    """A self-contained page (plotly inlined) with one readiness section per run."""
    from interp.core.templating import render, trusted
    from interp.report.display import figure_fragment, page_html

    def body(assets) -> str:
        parts = [
            (f"{r.model} seed {r.seed}", trusted(figure_fragment(readiness_figure(r), assets, _caption(r))))
            for r in results
        ]
        return render("report/templates/readiness.html.j2", page=True, style="", parts=parts)

    return page_html(title, body)
