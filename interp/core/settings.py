"""The main job's settings as one frozen value: :class:`StudyConfig`, on the ground floor, so that
every analysis that reads it (ranking, scrubber, population, readiness) stands above it.

Built once (from the flags of ``emergence run`` / ``emergence demo``, or by the user in Python),
it travels as one argument from :func:`interp.main_job.runner.run_study` to
:func:`interp.main_job.runner.analyse_run` and :func:`interp.ranking.rank_heads_between`, and the
report's provenance records it whole (:meth:`StudyConfig.as_dict`). A bad value is refused when
the object is made, in one line naming the value and the valid ones, before anything is loaded.

No torch at import: the command line builds it before any heavy import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from interp.core.devices import check_device, check_dtype
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

__all__ = ["DEMO_CONFIG", "METHODS", "N_BOOT", "StudyConfig"]

#: The patching engines (:mod:`interp.patching`): fast (layer skip), reference (full forwards,
#: TransformerLens), attribution (a gradient pre-screen, then exact deltas).
METHODS = ("fast", "reference", "attribution")
#: Bootstrap resamples of the ranking's 95 % intervals (:mod:`interp.ranking_stats`).
N_BOOT = 1000


def _positive_int(name: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}")


@dataclass(frozen=True)
class StudyConfig:
    """Every setting of the main job, checked when made.

    Attributes:
        threshold: greedy-accuracy threshold of the point of emergence (a fraction in (0, 1]).
        hold: checkpoints after post that must stay at or above the threshold (integer >= 0;
            :mod:`interp.emergence`).
        scan: evaluate every searchable step (the full curve) and take the point from it
            (:func:`interp.emergence.scan_emergence`); False (the default): bisection
            (:func:`interp.emergence.find_emergence`), the curve holding its steps: a few
            checkpoints of a hub run's 154 loaded, not all; ``monotone`` then judges only the
            evaluated ones, so a scan of the same run can say False where bisection says True.
            ``emergence demo`` scans (:data:`DEMO_CONFIG`).
        method: patching engine, one of :data:`METHODS`.
        metric: a registered patching metric (:mod:`interp.core.metrics`: ``p``, ``logprob``,
            ``logit-diff``, ...); None: each task's own (:func:`interp.tasks.metric_for`;
            ``p`` where no task is known).
        prescreen_top_n: with ``method="attribution"``, exact deltas only for the pre-screen's top
            N heads (None: every head).
        prescreen_steps: integration steps of the attribution pre-screen (integer >= 1).
        decompose: also decompose the jump by component (``components.csv``).
        scores: also score every head at the checkpoints around the point (``head_scores.csv``).
        scrub: also keep every head's pattern on the task's first prompts at each evaluated step
            (the report's scrubber; no extra checkpoint load).
        dtype: model precision, one of :data:`interp.core.devices.DTYPES`; with the low
            precisions the softmax and the metric are computed in float32.
        swap_weights: switch checkpoints inside one resident bridge
            (:mod:`interp.sources.weight_swap`); every value equals a fresh boot's.
        device: torch device (``cpu``, ``cuda``, ``cuda:N``, ``auto``); None: ``auto``.
        ks: the top-K sizes patched jointly (None: the ranking's default, 1 to 5 and all heads).
        n_boot: bootstrap resamples of the 95 % intervals (integer >= 0; 0: no intervals).
        allow_pickle: sources opened by name also load ``.bin`` (pickle) weights of steps without
            safetensors (``--allow-pickle``; unpickling can run code).
        step_pattern: how local runs opened by name name their checkpoint folders
            (``"epoch{E}-step{N}"``, ``--step-pattern``; :mod:`interp.sources.layouts`); None:
            recognised (``step{N}``, ``checkpoint-{N}``, ...).

    Raises:
        ValueError: any value out of its range or not among the valid ones (one line naming both).

    Example:
        >>> StudyConfig(metric="logprob", scan=True).metric
        'logprob'
    """

    threshold: float = DEFAULT_THRESHOLD
    hold: int = DEFAULT_HOLD
    scan: bool = False
    method: Literal["fast", "reference", "attribution"] = "fast"
    metric: str | None = None
    prescreen_top_n: int | None = None
    prescreen_steps: int = 2
    decompose: bool = True
    scores: bool = True
    scrub: bool = True
    dtype: str = "float32"
    swap_weights: bool = True
    device: str | None = None
    ks: tuple[int, ...] | None = None
    n_boot: int = N_BOOT
    allow_pickle: bool = False
    step_pattern: str | None = None

    def __post_init__(self) -> None:
        from interp.core.metrics import patching_metric_names

        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise ValueError(f"threshold={self.threshold!r} must be a number in (0, 1] (a greedy-accuracy fraction)")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold={self.threshold} must be in (0, 1] (a greedy-accuracy fraction)")
        _positive_int("hold", self.hold, minimum=0)
        if self.method not in METHODS:
            raise ValueError(f"method={self.method!r}; valid: {', '.join(METHODS)}")
        if self.metric is not None and self.metric not in patching_metric_names():
            raise ValueError(
                f"metric={self.metric!r}; valid: {', '.join(patching_metric_names())} (None: the task's own)"
            )
        if self.prescreen_top_n is not None:
            _positive_int("prescreen_top_n", self.prescreen_top_n)
        _positive_int("prescreen_steps", self.prescreen_steps)
        for name in ("scan", "decompose", "scores", "scrub", "swap_weights", "allow_pickle"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name}={getattr(self, name)!r}; valid: True, False")
        check_dtype(self.dtype)
        if self.device is not None:
            check_device(self.device)
        if self.ks is not None:
            if isinstance(self.ks, (str, bytes)) or not hasattr(self.ks, "__iter__"):
                raise ValueError(f"ks={self.ks!r}: must be a sequence of integers >= 1, or None")
            object.__setattr__(self, "ks", tuple(self.ks))  # frozen: a list given is kept as a tuple
            for k in self.ks:
                _positive_int("ks item", k)
        _positive_int("n_boot", self.n_boot, minimum=0)
        if self.step_pattern is not None and (not isinstance(self.step_pattern, str) or "{N" not in self.step_pattern):
            # the whole pattern is checked where sources open (interp.sources.layouts.check_step_pattern)
            raise ValueError(
                f"step_pattern={self.step_pattern!r}: must be text naming the step, e.g. 'epoch{{E}}-step{{N}}'"
            )

    def replace(self, **changes: Any) -> StudyConfig:
        """A copy with ``changes`` (checked as a new object is).

        Raises:
            ValueError: as :class:`StudyConfig`.
        """
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every field as JSON-safe values (``ks`` as a list): what provenance records."""
        out = dataclasses.asdict(self)
        out["ks"] = list(self.ks) if self.ks is not None else None
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> StudyConfig:
        """The config :meth:`as_dict` wrote (a field it does not know is refused).

        Raises:
            ValueError: an unknown field (the valid ones named), or as :class:`StudyConfig`.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ValueError(f"StudyConfig fields {unknown} are unknown; valid: {', '.join(names)}")
        return cls(**values)


#: The settings of ``emergence demo`` / ``make demo`` before its flags: a scan of every checkpoint
#: (the embedded suite's checkpoints are local and few; the page draws whole curves), the rest
#: :class:`StudyConfig`'s defaults. ``el.run_study(["embedded"], el.RepetitionTask(), el.DEMO_CONFIG,
#: out_dir="results/demo")`` is the demo from Python; ``StudyConfig()`` bisects instead.
DEMO_CONFIG = StudyConfig(scan=True)
