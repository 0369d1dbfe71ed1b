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

from interp.core.devices import DTYPES, check_device, check_dtype
from interp.core.field_options import setting
from interp.core.metrics import metric_help, patching_metric_names
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

__all__ = [
    "DEMO_CONFIG",
    "METHODS",
    "N_BOOT",
    "TIMELINE_CONFIG",
    "TIMELINE_PAIRS",
    "StudyConfig",
    "check_pairs",
    "parse_ks",
]

#: The patching engines (:mod:`interp.patching`): fast (layer skip), reference (full forwards,
#: TransformerLens), attribution (a gradient pre-screen, then exact deltas).
METHODS = ("fast", "reference", "attribution")
#: Bootstrap resamples of the ranking's 95 % intervals (:mod:`interp.ranking_stats`).
N_BOOT = 1000


def _positive_int(name: str, value: Any, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r}: must be an integer >= {minimum}")


def parse_ks(text: str | tuple[int, ...]) -> tuple[int, ...]:
    """``--ks``'s text, ``"1,2,5"``, as ``(1, 2, 5)`` (a tuple given is returned as it is; the
    sizes are checked by :class:`StudyConfig`).

    Raises:
        ValueError: an item that is not an integer (one line naming it).
    """
    if not isinstance(text, str):
        return tuple(text)
    sizes = []
    for item in text.split(","):
        try:
            sizes.append(int(item.strip()))
        except ValueError:
            raise ValueError(f"ks: {item.strip()!r} is not an integer; expected sizes such as 1,2,5") from None
    return tuple(sizes)


@dataclass(frozen=True)
class StudyConfig:
    """Every setting of the main job, checked when made.

    What each field means is its ``help`` metadata, written once beside it
    (``dataclasses.fields(StudyConfig)``, :func:`interp.core.field_options.field_help`);
    ``emergence run`` offers every field as an option ``--name-with-dashes`` with that help
    (``--n-boot``, ``--scan/--no-scan``; ``--ks 1,2,5``), ``emergence demo`` every field but the
    two that only hub and local runs read (:mod:`interp.cli.main_job`).

    Where the fields lead: the patching engines are :data:`METHODS` (:mod:`interp.patching`); the
    metrics the registry's (:mod:`interp.core.metrics`; None: :func:`interp.tasks.metric_for`, ``p``
    where no task is known); the dtypes :data:`interp.core.devices.DTYPES`; the weight swap
    :mod:`interp.sources.weight_swap`; the folder patterns :mod:`interp.sources.layouts`.
    ``scan=False`` bisects (:func:`interp.emergence.find_emergence`): a few checkpoints of a hub
    run's 154 are loaded, the curve holds those, and ``monotone`` judges only them, so a scan
    (:func:`interp.emergence.scan_emergence`) of the same run can say False where bisection says
    True; ``emergence demo`` scans (:data:`DEMO_CONFIG`).

    Raises:
        ValueError: any value out of its range or not among the valid ones (one line naming both).

    Example:
        >>> StudyConfig(metric="logprob", scan=True).metric
        'logprob'
    """

    threshold: float = setting(DEFAULT_THRESHOLD, "Greedy-accuracy threshold of the point of emergence, in (0, 1].")
    hold: int = setting(
        DEFAULT_HOLD,
        "Checkpoints after post that must stay at or above the threshold (fewer near the end; 0: the first crossing).",
    )
    scan: bool = setting(
        False, "Evaluate every checkpoint (full curve); else bisect (fewer loads; the curve holds the steps probed)."
    )
    method: Literal["fast", "reference", "attribution"] = setting(
        "fast", f"Patching engine: {' | '.join(METHODS)} (layer skip; TransformerLens forwards; gradient pre-screen)."
    )
    metric: str | None = setting(None, metric_help() + " Default: the task's own (`emergence list-tasks`).")
    prescreen_top_n: int | None = setting(
        None,
        "Exact delta only for the attribution pre-screen's top N heads (default: every head; with method "
        "attribution a quarter of them).",
    )
    prescreen_steps: int = setting(2, "Integration steps of the attribution pre-screen.")
    decompose: bool = setting(True, "Decompose the jump by component (components.csv).")
    scores: bool = setting(True, "Score every head around the point (head_scores.csv).")
    scrub: bool = setting(True, "Keep every head's pattern at each evaluated step (the scrubber).")
    dtype: str = setting("float32", f"Model precision: {' | '.join(DTYPES)} (softmax, metric in float32).")
    swap_weights: bool = setting(True, "Switch checkpoints inside one resident model (values as a fresh load's).")
    device: str | None = setting(None, "torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:N.")
    ks: tuple[int, ...] | None = setting(
        None, "Top-K sizes patched jointly, e.g. 1,2,5 (default: 1 to 5 and all heads).", parse=parse_ks
    )
    n_boot: int = setting(N_BOOT, "Bootstrap resamples of the 95 % intervals (0: none).")
    allow_pickle: bool = setting(
        False, "Also load .bin (pickle) weights of steps without safetensors (unpickling can run code)."
    )
    step_pattern: str | None = setting(
        None,
        "How a local run names its checkpoint folders, e.g. 'epoch{E}-step{N}'; default: step{N}, checkpoint-{N}, "
        "global_step{N}, iter_{N:07d}, step-{N}, step_{N}, ckpt-{N}.",
    )

    model_config: str | None = setting(
        None,
        "A local run's model config.json (or the folder holding one) for steps that hold none: single-file "
        "checkpoints, safetensors-only folders; default: the run folder's config.json, else what a file records.",
        flag="--config",
    )

    def __post_init__(self) -> None:
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
        if self.model_config is not None and not isinstance(self.model_config, str):
            raise ValueError(f"model_config={self.model_config!r}: must be the path of a config.json (text)")
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

#: The settings ``emergence timeline`` / :func:`interp.timeline.head_timeline` start from: the
#: attribution screen on every head, then the exact engine on its top N and a random sample of the
#: rest (the rest :class:`StudyConfig`'s defaults; the timeline always scans and reads neither
#: ``decompose``, ``scrub`` nor ``ks``).
TIMELINE_CONFIG = StudyConfig(method="attribution")

#: How the timeline pairs checkpoints (:mod:`interp.timeline`): each with the next, each with the
#: point of emergence's post step, each with the run's last checkpoint.
TIMELINE_PAIRS = ("consecutive", "to-post", "to-final")


def check_pairs(pairs: Any) -> str:
    """``pairs`` if it is one of :data:`TIMELINE_PAIRS`.

    Raises:
        ValueError: one line naming the value and the valid ones.
    """
    if pairs not in TIMELINE_PAIRS:
        raise ValueError(f"pairs={pairs!r}; valid: {', '.join(TIMELINE_PAIRS)}")
    return str(pairs)
