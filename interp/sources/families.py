"""Model families with public intermediate checkpoints, and revision names -> training steps.

A hub repository that publishes intermediate checkpoints names one branch per checkpoint, and the
name encodes the training step (and sometimes the tokens seen and the training stage):

=============================================  ==============================================
``step{N}``                                    Pythia / PolyPythia (Biderman et al. 2023)
``step{N}-tokens{M}B``                         OLMo 1 / 1.7 / 0724 (Groeneveld et al. 2024)
``stage{k}-step{N}-tokens{M}B``                OLMo-2 pretraining (OLMo et al. 2024, "2 OLMo 2 Furious")
``stage{k}-ingredient{j}-step{N}-tokens{M}B``  OLMo-2 mid-training runs ("ingredients")
=============================================  ==============================================

``tokens{M}`` without a unit is a count of tokens; ``K``/``M``/``B``/``T`` scale it by 1e3, 1e6,
1e9, 1e12, and so do their lowercase spellings (``tokens5b`` = ``tokens5B``). Any other naming goes through a user-given regular expression with a named group
``step`` (optional groups ``tokens`` (a count, or with ``unit``) and ``series``).

A **series** is one training trajectory inside a repository: all plain ``step{N}`` names form
the series ``""``; ``stage1-...`` names the series ``"stage1"``; ``stage2-ingredient3-...`` the
series ``"stage2-ingredient3"``. Several series can hold the same step (OLMo-2's stage-2
ingredients each restart at step 0), so a source follows exactly one. Default: **the series
with the most branches** (ties: the first name in sorted order); for OLMo-2 that is ``stage1``.
When stage-prefixed names exist, plain step names are counted in ``stage1`` (OLMo-2-1124-7B's
listing has a few stage-1 branches without the prefix, e.g. ``step150-tokens1B``; allenai's
model discussion #6); where a plain and a ``stage1-`` name give the same step the prefixed one is
used and the other is kept in :attr:`Schedule.alternates`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

#: The built-in revision-name grammar (see the module docstring).
DEFAULT_REVISION_REGEX = (
    r"(?:(?P<series>stage\d+(?:-ingredient\d+)?)-)?step(?P<step>\d+)"
    r"(?:-tokens(?P<tokens>\d+)(?P<unit>[KMBTkmbt]?))?"
)
_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
#: Branch names that look like a checkpoint's: reported when the parser does not take them.
STEP_LIKE = re.compile(r"step[-_]?\d+", re.IGNORECASE)


@dataclass(frozen=True)
class Revision:
    """One hub branch that names a checkpoint.

    Attributes:
        name: the branch name (the ``revision=`` to download).
        step: training step (optimizer steps).
        tokens: tokens seen at this step (tokens), when the name says; else ``None``.
        series: the trajectory the branch belongs to (``""``, ``"stage1"``, ``"stage2-ingredient1"``).
    """

    name: str
    step: int
    tokens: int | None = None
    series: str = ""


class RevisionParser:
    """Branch name -> :class:`Revision` (or ``None`` for names that are not checkpoints, e.g. ``main``).

    Args:
        regex: a pattern that must match the whole name, with a named group ``step`` (or exactly
            one group, taken as the step); optional named groups ``tokens``, ``unit``
            (``K``/``M``/``B``/``T``, either case) and ``series``. Default :data:`DEFAULT_REVISION_REGEX`.

    Raises:
        ValueError: the regex does not compile or has no step group.
    """

    def __init__(self, regex: str | re.Pattern | None = None):
        text = DEFAULT_REVISION_REGEX if regex is None else regex
        try:
            self.pattern = text if isinstance(text, re.Pattern) else re.compile(text)
        except re.error as error:
            raise ValueError(f"revision regex {text!r} does not compile: {error}") from None
        groups = self.pattern.groupindex
        if "step" not in groups and self.pattern.groups != 1:
            raise ValueError(
                f"revision regex {self.pattern.pattern!r} needs a named group (?P<step>\\d+) "
                f"(or exactly one group) holding the training step"
            )
        self._step_group = "step" if "step" in groups else 1

    def parse(self, name: str) -> Revision | None:
        """The revision a branch name encodes, or ``None`` if the name does not match."""
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        try:
            step = int(match.group(self._step_group))
        except (TypeError, ValueError):
            return None
        groups = match.groupdict()
        tokens = None
        if groups.get("tokens") is not None:
            unit = (groups.get("unit") or "").upper()
            tokens = int(groups["tokens"]) * _UNITS.get(unit, 1)
        return Revision(name=name, step=step, tokens=tokens, series=groups.get("series") or "")


@dataclass
class Schedule:
    """The checkpoints of one series of a repository.

    Attributes:
        revisions: ``{step: Revision}`` of the chosen series, ascending.
        series: the chosen series.
        series_counts: branches per series in the repository (``{"stage1": 1234, ...}``).
        default_series: the series chosen when none is asked for.
        alternates: branches of the chosen series that name a step already taken by another branch.
        unparsed: branch names that look like checkpoints (``step`` and digits in them) but do
            not parse (:data:`STEP_LIKE`): not in the schedule, reported so none drops out silently.
    """

    revisions: dict[int, Revision]
    series: str
    series_counts: dict[str, int]
    default_series: str
    alternates: list[Revision] = field(default_factory=list)
    unparsed: list[str] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        """The series' steps, ascending."""
        return list(self.revisions)


def _series_label(series: str) -> str:
    return series if series else '"" (plain step names)'


def build_schedule(names: Iterable[str], parser: RevisionParser | None = None, series: str | None = None) -> Schedule:
    """Group branch names into series and keep one series' ``{step: revision}``.

    Args:
        names: branch names (non-checkpoint names such as ``main`` are ignored).
        parser: the revision-name parser (default: the built-in grammar).
        series: the series to follow; default: the one with the most branches (module docstring).

    Raises:
        ValueError: ``series`` is not one of the repository's series (the message lists them
            with their branch counts).
    """
    parser = parser or RevisionParser()
    ordered = sorted(set(names))
    parsed = [r for r in (parser.parse(n) for n in ordered) if r is not None]
    unparsed = sorted(set(ordered) - {r.name for r in parsed})
    unparsed = [n for n in unparsed if STEP_LIKE.search(n)]
    staged = any(r.series.startswith("stage") for r in parsed)
    if staged:  # plain names in a staged repository are stage-1 branches without their prefix
        parsed = [r if r.series else Revision(r.name, r.step, r.tokens, "stage1") for r in parsed]
    counts = Counter(r.series for r in parsed)
    default = min(counts, key=lambda s: (-counts[s], s)) if counts else ""
    chosen = default if series is None else series
    if series is not None and series not in counts:
        listing = ", ".join(f"{_series_label(s)} ({n} branches)" for s, n in sorted(counts.items())) or "none"
        raise ValueError(f"series {series!r} is not in this repository; its series: {listing}")
    revisions: dict[int, Revision] = {}
    alternates = []
    # Prefixed names first, so that a step named both ways keeps its prefixed branch.
    for rev in sorted(
        (r for r in parsed if r.series == chosen), key=lambda r: (not r.name.startswith("stage"), r.name)
    ):
        if rev.step in revisions:
            alternates.append(rev)
        else:
            revisions[rev.step] = rev
    return Schedule(
        revisions=dict(sorted(revisions.items())),
        series=chosen,
        series_counts=dict(sorted(counts.items())),
        default_series=default,
        alternates=alternates,
        unparsed=unparsed,
    )


def regular_grid(steps: Sequence[int]) -> list[int]:
    """The regular schedule a list of checkpoint steps seems to follow, to spot missing steps.

    The stride is the most common gap between consecutive steps, and the grid's offset the most
    common remainder of the listed steps divided by it (ties: the smallest), so a series that
    does not start at a multiple of its stride (a run resumed mid-way: 500, 1500, 2500, ...)
    follows its own grid. The grid is inferred only if, among the listed steps on it, at least
    half of the consecutive gaps equal the stride (a log-spaced schedule such as Pythia's early
    steps has no such stride). It runs from the first listed step on it to the last one. Steps
    off the grid (OLMo-2-1124-7B's steps 150, 600, ...) are extra, not a reason to reject it.

    Args:
        steps: listed checkpoint steps (training steps), any order.

    Returns:
        the grid steps, ascending (``[]`` with fewer than 3 steps on it or no dominant stride).
    """
    ordered = sorted({int(s) for s in steps})
    if len(ordered) < 3:
        return []
    gaps = Counter(b - a for a, b in itertools.pairwise(ordered))
    stride = max(gaps.items(), key=lambda item: (item[1], item[0]))[0]
    residues = Counter(s % stride for s in ordered)
    offset = min(residues, key=lambda r: (-residues[r], r))
    on_grid = [s for s in ordered if s % stride == offset]
    if len(on_grid) < 3:
        return []
    regular = sum(b - a == stride for a, b in itertools.pairwise(on_grid))
    if regular * 2 < len(on_grid) - 1:
        return []
    return list(range(on_grid[0], on_grid[-1] + 1, stride))


@dataclass(frozen=True)
class ModelFamily:
    """A family of hub repositories with intermediate checkpoints.

    Attributes:
        name: display name.
        id_pattern: regular expression matching the family's hub ids (whole id).
        example_ids: ids checked to exist with this naming (model cards, hub listings).
        revision_format: how branch names look.
        architecture: the transformers model type and block structure.
        schedule: what the checkpoint schedule is.
        revision_regex: a family-specific regex, or ``None`` for the built-in grammar.
    """

    name: str
    id_pattern: str
    example_ids: tuple[str, ...]
    revision_format: str
    architecture: str
    schedule: str
    revision_regex: str | None = None

    def matches(self, model_id: str) -> bool:
        """Whether ``model_id`` belongs to this family."""
        return re.fullmatch(self.id_pattern, model_id) is not None


#: The Pythia / PolyPythia hub ids with ``step{N}`` branches: the one place this pattern is written
#: (:func:`interp.sources.catalogue.is_pythia_id`, the family table and the error messages read it).
POLYPYTHIA_SIZES = ("14m", "31m", "70m", "160m", "410m")
PYTHIA_SIZES = ("70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")
#: PolyPythia's runs with one part of the seed varied (the model cards' naming convention, van der
#: Wal et al. 2025): ``-data-seed{N}`` varies the data order with the initial weights fixed,
#: ``-weight-seed{N}`` the initial weights with the data order fixed; 160m only, N in 1..3.
POLYPYTHIA_SPLIT_SIZES = ("160m",)
POLYPYTHIA_SPLIT_SEEDS = (1, 2, 3)
POLYPYTHIA_ID_PATTERN = (
    rf"EleutherAI/pythia-({'|'.join(POLYPYTHIA_SIZES)})(-seed[1-9])?"
    rf"|EleutherAI/pythia-({'|'.join(POLYPYTHIA_SPLIT_SIZES)})-(data|weight)-seed[{''.join(map(str, POLYPYTHIA_SPLIT_SEEDS))}]"
)
PYTHIA_ID_PATTERN = rf"EleutherAI/pythia-({'|'.join(s.replace('.', chr(92) + '.') for s in PYTHIA_SIZES)})(-deduped)?"
#: The same ids as one line of text, for error messages.
PYTHIA_IDS_TEXT = (
    f"a Pythia/PolyPythia hub id (EleutherAI/pythia-{{{','.join(POLYPYTHIA_SIZES)}}}[-seed{{1..9}}], "
    f"EleutherAI/pythia-{','.join(POLYPYTHIA_SPLIT_SIZES)}-{{data,weight}}-seed{{1..3}} "
    f"or EleutherAI/pythia-{{{','.join(PYTHIA_SIZES)}}}[-deduped])"
)


#: The families this toolkit knows (``emergence list-models``). Sources: the model cards of
#: ``EleutherAI/pythia-*`` (Biderman et al. 2023; van der Wal et al. 2025, PolyPythias),
#: ``allenai/OLMo-1B`` / ``allenai/OLMo-1B-0724-hf`` / ``allenai/OLMo-7B-0424`` ("The naming
#: convention is step1000-tokens4B"), and ``allenai/OLMo-2-1124-7B`` (stage1/stage2 branches).
FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(
        name="Pythia / PolyPythia",
        id_pattern=f"{POLYPYTHIA_ID_PATTERN}|{PYTHIA_ID_PATTERN}",
        example_ids=(
            "EleutherAI/pythia-70m-seed3",
            "EleutherAI/pythia-160m",
            "EleutherAI/pythia-410m-deduped",
            "EleutherAI/pythia-160m-data-seed1",
            "EleutherAI/pythia-160m-weight-seed2",
        ),
        revision_format="step{N}",
        architecture="gpt_neox (parallel residual)",
        schedule="154 steps: 0, 1, 2, 4, ..., 512, then every 1000 to 143000",
    ),
    ModelFamily(
        name="OLMo (1, 1.7, 0724)",
        id_pattern=r"allenai/OLMo-(1B|7B)(-0424|-0724)?-hf",
        example_ids=("allenai/OLMo-1B-hf", "allenai/OLMo-7B-hf", "allenai/OLMo-1B-0724-hf", "allenai/OLMo-7B-0424-hf"),
        revision_format="step{N}-tokens{M}B",
        architecture="olmo (sequential pre-norm, non-parametric LayerNorm)",
        schedule="every 1000 steps (a few branches lost, per the model cards)",
    ),
    ModelFamily(
        name="OLMo-2",
        id_pattern=r"allenai/OLMo-2-\d{4}-\d+B",
        example_ids=("allenai/OLMo-2-0425-1B", "allenai/OLMo-2-1124-7B", "allenai/OLMo-2-1124-13B"),
        revision_format="stage1-step{N}-tokens{M}B; stage2-ingredient{j}-step{N}-tokens{M}B",
        architecture="olmo2 (sequential, RMSNorm after attention and MLP, QK-norm)",
        schedule="stage1 every 1000 steps (default series); stage2 ingredients restart at step 0",
    ),
)


def family_of(model_id: str) -> ModelFamily | None:
    """The known family of a hub id, or ``None``."""
    return next((f for f in FAMILIES if f.matches(model_id)), None)
