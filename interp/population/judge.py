"""The one judge: every verdict word said about a claim of the paper comes from here.

A claim is answered by contrasts (two arms of a population that should differ in one factor), by
shares (how many seeds show a property, claim 2) or by facts (an arm's E spreads, claim 1). Each
is summarised as evidence (:class:`Evidence`, :class:`ShareEvidence`, :class:`FactEvidence`) and
judged by the decision table below; a claim made of several contrasts is judged by
:func:`judge_claim`. Pages, headlines, ``result.claims`` and docs/results.md take their words from
the :class:`Verdict` returned, and word nothing themselves (docs/population.md, "The judge", prints
the same table; a test keeps the two equal).

The decision table for a contrast, first match wins (alpha = :data:`ALPHA`, 0.05):

1. ``confounded``: the arms differ in more than the compared factor (:attr:`Evidence.also_varies`);
   never "reproduced" or "contradicted", whatever the test says.
2. ``curves cross``: proportional hazards rejected for the pair (:attr:`Evidence.ph_p` < alpha) and the
   Kaplan-Meier curves swap order (:attr:`Evidence.crossing`): one hazard ratio would average
   opposite early and late effects, so none is quoted; the shares emerged at fixed steps and the
   restricted mean time to E speak instead.
3. ``reproduced`` / ``contradicted``: the test at the operating point (log-rank, or its
   seed-stratified form where the arms share seeds) has p < alpha, in the paper's direction or
   against it. The direction is the test's own (observed minus expected events), never a median.
4. ``ceiling``: no significant test, and an arm's runs level off below the threshold
   (:attr:`Evidence.ceiling`): its "never" is a capacity ceiling near the threshold, not a delay
   the budget cut short, and the rule cannot date it.
5. ``not decidable``: otherwise.

Robustness, from the same test in every cell of the rule grid (threshold x hold): ``robust`` where
p < alpha in the same direction in every cell; ``robust null`` where p >= alpha in every cell; ``not
robust`` otherwise (the cells that break it are named).

A claim over several one-factor contrasts (:func:`judge_claim`): ``confounded`` where every
contrast is; otherwise over the one-factor contrasts only: ``non-monotone`` where decisive ones go
both ways; ``reproduced`` / ``contradicted`` where all go the same way; ``reproduced in part`` /
``contradicted in part`` where the decisive ones go one way and the rest are not decisive;
``curves cross`` or ``ceiling`` where no contrast is decisive and one of those is; else ``not
decidable``.

A share (claim 2: seeds whose top heads' patterns recover at least half the jump): ``reproduced``
where the Wilson interval of the share of seeds firmly above half lies above one half,
``contradicted`` where the interval of the share firmly below half does, else ``not decidable``;
robust where the looser criterion (the point estimate alone) gives the same word.

Source: the checks of docs/population.md, "Checks before a finding is quoted"; log-rank test
(Mantel 1966), proportional hazards (Grambsch & Therneau 1994), Wilson 1927.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = [
    "ALPHA",
    "CLAIM_WORDS",
    "DECISION_TABLE",
    "ROBUST_WORDS",
    "Cell",
    "Evidence",
    "FactEvidence",
    "ShareEvidence",
    "Verdict",
    "judge",
    "judge_claim",
    "judge_components",
    "judge_fact",
    "judge_share",
]

#: Significance level of every test the judge reads (two-sided p).
ALPHA = 0.05
#: Every verdict word, with what it means (docs/population.md prints this table).
DECISION_TABLE = {
    "confounded": "the arms differ in more than the compared factor: no verdict on the claim",
    "curves cross": "proportional hazards rejected and the Kaplan-Meier curves swap order: opposite early and late "
    "effects, no single hazard ratio",
    "reproduced": "the test is significant in the paper's direction",
    "contradicted": "the test is significant against the paper's direction",
    "ceiling": "no significant test, and an arm's runs level off below the threshold: the rule cannot date a "
    "capability its runs do not reach",
    "non-monotone": "decisive contrasts of one claim go both ways",
    "reproduced in part": "the decisive contrasts go the paper's way, the others are not decisive",
    "contradicted in part": "the decisive contrasts go against the paper, the others are not decisive",
    "not decidable": "no test is significant and nothing above applies",
}
#: The verdict words (keys of :data:`DECISION_TABLE`).
CLAIM_WORDS = tuple(DECISION_TABLE)
#: Robustness words over the rule grid (threshold x hold), with what they mean.
ROBUST_WORDS = {
    "robust": "p < alpha in the same direction in every cell of the rule grid",
    "robust null": "p ≥ 0.05 in every cell of the rule grid",
    "not robust": "the cells disagree (they are named)",
}


@dataclass(frozen=True)
class Cell:
    """One cell of the rule grid for one contrast.

    Attributes:
        threshold: greedy-accuracy threshold (fraction); hold: checkpoints held.
        p: the test's two-sided p (NaN: undetermined in this cell).
        sign: the test's direction, arm b against arm a: +1 b emerges earlier (more events than
            expected under equal hazards), -1 later, 0 none.
    """

    threshold: float
    hold: int
    p: float
    sign: int

    @property
    def name(self) -> str:
        """``"0.5/2"``."""
        return f"{self.threshold:g}/{self.hold}"


@dataclass(frozen=True)
class Evidence:
    """What the judge reads of one two-arm contrast (arm b against arm a).

    Attributes:
        label: the contrast in words, e.g. ``"8 heads against 4, d_head 16"``.
        cells: the test in every cell of the rule grid (:class:`Cell`).
        operating: the operating point ``(threshold, hold)``.
        wanted: the paper's direction for b against a (+1: b earlier, -1: b later).
        hr, hr_lo, hr_hi: hazard ratio of b against a with its 95 % interval (NaN: undetermined).
        ph_p: per-pair proportional-hazards test p (Grambsch-Therneau; NaN: not computed).
        crossing: the Kaplan-Meier curves' crossing in words (``""``: they do not cross).
        also_varies: what other design factor differs between the arms (``""``: one factor).
        named: quantities fixed by the compared factor and those held (attention width, position-free
            dims per head: :data:`interp.population.shapes.DERIVED`), named in the reason, never a
            confounder.
        ceiling: an arm's level below the threshold in words (``""``: none).
        test: the test's name, e.g. ``"log-rank"`` or ``"log-rank stratified by seed"``.
        detail: numbers the verdict's reason quotes (shares at fixed steps, restricted means).
    """

    label: str
    cells: tuple[Cell, ...]
    operating: tuple[float, int] = (0.5, 2)
    wanted: int = 1
    hr: float = math.nan
    hr_lo: float = math.nan
    hr_hi: float = math.nan
    ph_p: float = math.nan
    crossing: str = ""
    also_varies: str = ""
    named: str = ""
    ceiling: str = ""
    test: str = "log-rank"
    detail: str = ""

    def cell(self) -> Cell:
        """The operating point's cell.

        Raises:
            ValueError: no cell at :attr:`operating`.
        """
        for c in self.cells:
            if (c.threshold, c.hold) == tuple(self.operating):
                return c
        raise ValueError(f"{self.label}: no cell at the operating point {self.operating}; cells: {self.cell_names()}")

    def cell_names(self) -> list[str]:
        return [c.name for c in self.cells]


@dataclass(frozen=True)
class ShareEvidence:
    """Seeds that show a property (claim 2), for one arm.

    Attributes:
        label: what is counted, e.g. ``"neox-2l-64d-4h, largest-jump pair"``.
        above, below, n: seeds whose interval lies above / below the bar, of ``n`` measurable.
        above_point, below_point: the same counted by the point estimate alone (the looser criterion).
        noise: seeds left out because their jump is within noise (named in the reason).
        sides: the words for the two sides in the reason (default ``("above", "below")`` the bar).
    """

    label: str
    above: int
    below: int
    n: int
    above_point: int
    below_point: int
    noise: str = ""
    sides: tuple[str, str] = ("above", "below")


@dataclass(frozen=True)
class FactEvidence:
    """A fact that holds or not in each cell of the rule grid (claim 1: E spreads over seeds).

    Attributes:
        label: the fact in words; holds: cell name -> whether it holds there; operating: the
        operating cell's name; detail: numbers for the reason; ceiling: an arm's never-runs flat
        just under the threshold, in words (``""``: none; claim 1's "never").
    """

    label: str
    holds: dict[str, bool]
    operating: str = "0.5/2"
    detail: str = ""
    ceiling: str = ""


@dataclass(frozen=True)
class Verdict:
    """The judge's answer.

    Attributes:
        word: one of :data:`CLAIM_WORDS`.
        robust: one of :data:`ROBUST_WORDS` (``""`` where the grid was not read).
        label: what was judged.
        reason: the numbers behind the word, short.
        decide: what would decide it (``""`` where it is decided and robust).
        parts: the verdicts of the contrasts a claim is made of.
        side: a contrast's significant direction at the operating point, arm b against arm a
            (``"earlier"``, ``"later"``; ``""``: not significant, or not a contrast).
    """

    word: str
    robust: str
    label: str
    reason: str = ""
    decide: str = ""
    parts: tuple[Verdict, ...] = field(default_factory=tuple)
    side: str = ""

    def __post_init__(self) -> None:
        if self.word not in DECISION_TABLE:
            raise ValueError(f"verdict word {self.word!r}; valid: {', '.join(CLAIM_WORDS)}")
        if self.robust and self.robust not in ROBUST_WORDS:
            raise ValueError(f"robustness word {self.robust!r}; valid: {', '.join(ROBUST_WORDS)}")

    def text(self) -> str:
        """``"<label>: <word>, <robust> (<reason>)"``."""
        robust = f", {self.robust}" if self.robust else ""
        reason = f" ({self.reason})" if self.reason else ""
        return f"{self.label}: {self.word}{robust}{reason}"

    def as_row(self) -> dict:
        """The verdict as a table row (``label``, ``verdict``, ``robust``, ``reason``, ``decide``)."""
        return {
            "label": self.label,
            "verdict": self.word,
            "robust": self.robust,
            "reason": self.reason,
            "decide": self.decide,
        }


def fmt_p(p: float) -> str:
    """``p = 0.34``, ``p = 0.012``, ``p < 0.001``; NaN -> ``p undetermined``."""
    if p is None or not math.isfinite(p):
        return "p undetermined"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}" if p < 0.1 else f"p = {p:.2f}"


def _significant(c: Cell) -> bool:
    return math.isfinite(c.p) and c.p < ALPHA and c.sign != 0


def robustness(cells: tuple[Cell, ...]) -> tuple[str, str]:
    """(robustness word, the cells that break it) of a test read in every cell of the rule grid.

    Returns:
        ``("robust", "")`` where p < :data:`ALPHA` with one direction everywhere; ``("robust
        null", "")`` where p >= alpha everywhere; else ``("not robust", "earlier at 0.4/1; ...")``.

    Raises:
        ValueError: no cells.
    """
    if not cells:
        raise ValueError("robustness: no cell of the rule grid given; give the test in each cell")
    readings: dict[str, list[str]] = {}
    for c in cells:
        word = (
            "undetermined"
            if not math.isfinite(c.p)
            else "not significant"
            if c.p >= ALPHA
            else "earlier"
            if c.sign > 0
            else "later"
            if c.sign < 0
            else "significant"  # a test with no direction (e.g. across several arms)
        )
        readings.setdefault(word, []).append(c.name)
    if set(readings) in ({"earlier"}, {"later"}, {"significant"}):
        return "robust", ""
    if set(readings) == {"not significant"}:
        return "robust null", ""
    return "not robust", "; ".join(f"{w} at {', '.join(names)}" for w, names in readings.items())


def _hr_text(e: Evidence) -> str:
    if not math.isfinite(e.hr) or not (math.isfinite(e.hr_lo) and math.isfinite(e.hr_hi)):
        return ""
    return f"HR ×{e.hr:.2f} (95 % CI {e.hr_lo:.2f}–{e.hr_hi:.2f})"


def judge(e: Evidence) -> Verdict:
    """The verdict on one two-arm contrast, by the decision table of this module.

    Args:
        e: the contrast's evidence (:class:`Evidence`).

    Returns:
        A :class:`Verdict` with its word, robustness over the grid, reason and what would decide it.

    Raises:
        ValueError: no cell at the operating point.
    """
    at = e.cell()
    robust, broken = robustness(e.cells)
    side = "earlier" if at.sign > 0 else "later" if at.sign < 0 else "no direction"
    test = f"{e.test} {fmt_p(at.p)}" + (f", {side}" if _significant(at) else "")
    sided = side if _significant(at) else ""
    hr = _hr_text(e)
    grid = f"; {broken}" if broken else ""
    if e.also_varies:
        return Verdict(
            "confounded", robust, e.label, f"{test}; also varies: {e.also_varies}{grid}",
            f"arms differing in the compared factor alone ({e.also_varies} vary too)", side=sided,
        )  # fmt: skip
    if math.isfinite(e.ph_p) and e.ph_p < ALPHA and e.crossing:
        detail = f"; {e.detail}" if e.detail else ""
        return Verdict(
            "curves cross", robust, e.label,
            f"proportional hazards rejected ({fmt_p(e.ph_p)}): {e.crossing}; {test}{detail}",
            "shares at stated steps or the restricted mean time to E, not one hazard ratio", side=sided,
        )  # fmt: skip
    named = f"with it {e.named}" if e.named else ""
    reason = "; ".join(x for x in (test, hr, e.ceiling, named) if x) + grid
    if _significant(at):
        word = "reproduced" if at.sign == e.wanted else "contradicted"
        decide = "" if robust == "robust" else f"the rule-grid cells that disagree ({broken})"
        return Verdict(word, robust, e.label, reason, decide, side=sided)
    if e.ceiling:
        return Verdict(
            "ceiling", robust, e.label, reason,
            "a threshold-free measure (level, area under the accuracy curve)", side=sided,
        )  # fmt: skip
    decide = (
        f"more seeds (HR ×{e.hr_lo:.2f}–{e.hr_hi:.2f} still open)" if hr and e.hr_lo < 1 < e.hr_hi else "more seeds"
    )
    return Verdict("not decidable", robust, e.label, reason, decide, side=sided)


def judge_claim(label: str, parts: list[Verdict], noun: str = "one-factor contrast") -> Verdict:
    """The verdict on a claim made of several contrasts (e.g. each head count against the next
    fewer), by the combination rules of this module.

    Args:
        label: the claim, e.g. ``"Claim 4, heads"``.
        parts: the contrasts' verdicts (:func:`judge`), or one verdict per population or arm.
        noun: what a part is, for the reason (``"one-factor contrast"``, ``"population"``, ``"arm"``).

    Returns:
        A :class:`Verdict` whose ``parts`` are ``parts``; its robustness is ``robust`` where every
        decisive part is robust (``robust null`` where no part is decisive and every part is a
        robust null), else ``not robust``.

    Raises:
        ValueError: no parts.
    """
    if not parts:
        raise ValueError(f"judge_claim({label!r}): no contrast to judge")
    one = [p for p in parts if p.word != "confounded"]
    if not one:
        signs = [p.side or "no difference" for p in parts]
        shape = ", ".join(f"{signs.count(s)} {s}" for s in dict.fromkeys(signs))
        pattern = (
            "non-monotone" if "earlier" in signs and "later" in signs
            else "none significant" if set(signs) == {"no difference"}
            else "monotone" if len(set(signs)) == 1 else "mixed"
        )  # fmt: skip
        return Verdict(
            "confounded", "", label,
            f"every contrast also varies another factor; the tests alone, {pattern}: {shape}",
            parts[0].decide, tuple(parts),
        )  # fmt: skip
    words = [p.word for p in one]
    yes, no = words.count("reproduced"), words.count("contradicted")
    decisive = [p for p in one if p.word in ("reproduced", "contradicted")]
    if yes and no:
        word = "non-monotone"
    elif yes == len(one):
        word = "reproduced"
    elif no == len(one):
        word = "contradicted"
    elif yes:
        word = "reproduced in part"
    elif no:
        word = "contradicted in part"
    elif "curves cross" in words:
        word = "curves cross"
    elif "ceiling" in words:
        word = "ceiling"
    else:
        word = "not decidable"
    if decisive:
        robust = "robust" if all(p.robust == "robust" for p in decisive) else "not robust"
    else:
        robust = "robust null" if all(p.robust == "robust null" for p in one) else "not robust"
    counts = ", ".join(f"{words.count(w)} {w}" for w in dict.fromkeys(words))
    skipped = len(parts) - len(one)
    reason = f"{len(one)} {noun}{'s' if len(one) != 1 else ''}: {counts}" + (
        f"; {skipped} confounded left out" if skipped else ""
    )
    decide = "; ".join(dict.fromkeys(p.decide for p in one if p.decide))
    return Verdict(word, robust, label, reason, decide, tuple(parts))


def _wilson(k: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=ALPHA, method="wilson")
    return float(lo), float(hi)


def _share_word(
    above: int, below: int, n: int, half: float, sides: tuple[str, str] = ("above", "below")
) -> tuple[str, str]:
    if n == 0:
        return "not decidable", "no measurable seed"
    lo_a, hi_a = _wilson(above, n)
    lo_b, hi_b = _wilson(below, n)
    text = (
        f"{above} of {n} {sides[0]} (95 % {lo_a:.2f}–{hi_a:.2f}), "
        f"{below} of {n} {sides[1]} (95 % {lo_b:.2f}–{hi_b:.2f})"
    )
    if lo_a > half:
        return "reproduced", text
    if lo_b > half:
        return "contradicted", text
    return "not decidable", text


def judge_share(e: ShareEvidence, half: float = 0.5) -> Verdict:
    """The verdict on a share of seeds (claim 2): most seeds firmly above the bar, most firmly
    below it, or neither, each with the Wilson interval of its share.

    Args:
        e: the counts (:class:`ShareEvidence`).
        half: the share of seeds that counts as "most" (a probability).

    Returns:
        A :class:`Verdict`; ``robust`` where the point-estimate criterion gives the same word,
        else ``not robust``.
    """
    word, text = _share_word(e.above, e.below, e.n, half, e.sides)
    loose, _ = _share_word(e.above_point, e.below_point, e.n, half)
    robust = "robust" if loose == word else "not robust"
    noise = f"; jump within noise, not counted: seeds {e.noise}" if e.noise else ""
    decide = "" if word != "not decidable" else "more seeds, or more prompts per seed"
    loose_text = "" if loose == word else f"; by the point estimate alone: {loose}"
    return Verdict(word, robust, e.label, f"{text}{loose_text}{noise}", decide)


def judge_fact(e: FactEvidence) -> Verdict:
    """The verdict on a fact read in every cell of the rule grid (claim 1's spread over seeds):
    ``reproduced`` where it holds at the operating point, else ``not decidable`` (a fact that
    fails is no evidence against the claim at this scale), and ``ceiling`` wherever
    :attr:`FactEvidence.ceiling` says the runs that never emerged level off just under the threshold; ``robust`` where it holds in every cell,
    ``robust null`` where in none, else ``not robust`` naming the cells.

    Raises:
        ValueError: the operating cell is not among ``e.holds``.
    """
    if e.operating not in e.holds:
        raise ValueError(f"{e.label}: no cell {e.operating!r}; cells: {', '.join(e.holds)}")
    yes = [c for c, v in e.holds.items() if v]
    word = "reproduced" if e.holds[e.operating] else "not decidable"
    no = [c for c, v in e.holds.items() if not v]
    if len(yes) == len(e.holds):
        robust, broken = "robust", ""
    elif not yes:
        robust, broken = "robust null", ""
    else:
        robust, broken = "not robust", f"holds at {', '.join(yes)} only"
    reason = "; ".join(x for x in (e.detail, broken) if x)
    decide = "" if robust != "not robust" else f"fails at {', '.join(no)}"
    if e.ceiling:  # the runs that never emerged sit flat just under the threshold: the rule cannot tell
        reason = "; ".join(x for x in (reason, e.ceiling) if x)
        return Verdict(
            "ceiling", robust, e.label, reason, "a threshold-free measure (level, area under the accuracy curve)"
        )
    return Verdict(word, robust, e.label, reason, decide)


def judge_components(label: str, p_init: float, p_data: float, agree: bool = True) -> Verdict:
    """The verdict on claim 1's "depending only on the seed" from a crossed initialisation ×
    data-order population (:mod:`interp.population.variance`): ``reproduced`` where either part of
    the seed carries a significant share of the spread of log E (permutation p < :data:`ALPHA`),
    else ``not decidable``; which part is named in the reason, never in the word.

    Args:
        label: the claim in words.
        p_init, p_data: the permutation test's p for the initialisation and the data-order
            component (probability; NaN: not computed).
        agree: whether the classical F test reads the same (``robust`` where it does).

    Returns:
        A :class:`Verdict` whose ``side`` is ``"initialisation"``, ``"data order"``, ``"both"`` or ``""``.
    """
    sig = [name for name, p in (("initialisation", p_init), ("data order", p_data)) if math.isfinite(p) and p < ALPHA]
    side = "both" if len(sig) == 2 else sig[0] if sig else ""
    word = "reproduced" if sig else "not decidable"
    reason = (
        f"the spread of E goes with {' and '.join(sig)} (permutation {fmt_p(p_init)} initialisation, "
        f"{fmt_p(p_data)} data order)"
    )
    robust = "robust" if agree else "not robust"
    return Verdict(word, robust, label, reason, "" if sig else "more seeds of each part", side=side)
