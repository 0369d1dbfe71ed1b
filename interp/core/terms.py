"""Words and names every floor reads, defined once: the point-of-emergence rule in words (with its
default threshold and hold) and the columns of the component-decomposition table.

The search that applies the rule is :mod:`interp.emergence` (:func:`interp.emergence.held_crossing`),
which re-exports :data:`DEFAULT_HOLD`, :data:`RULE` and :func:`rule_text`; the table is built by
:func:`interp.decomposition.decompose_jump`, which re-exports :data:`COMPONENT_COLUMNS`. They sit on the
ground floor so that the report (:mod:`interp.report`) captions the rule and recognises the table
without importing the analyses above it.
"""

from __future__ import annotations

__all__ = [
    "COMPONENT_COLUMNS",
    "DEFAULT_HOLD",
    "DEFAULT_THRESHOLD",
    "IND_THRESHOLD",
    "PREV_THRESHOLD",
    "RULE",
    "induction_blocker",
    "rule_text",
]

#: Greedy-accuracy threshold of the point of emergence (a fraction in (0, 1]; the rule's default).
DEFAULT_THRESHOLD = 0.5
#: Checkpoints after post that must stay at or above the threshold (the rule's default).
DEFAULT_HOLD = 2
#: Previous-token score (fraction of attention on the previous token) at which a head counts as a
#: previous-token head (formation order, head classes; interp.population.formation, .mechanism).
PREV_THRESHOLD = 0.3
#: Prefix-matching score (fraction of attention on the token after an earlier copy) at which a head
#: counts as an induction head (Olsson et al. 2022's score; formation order, head classes).
IND_THRESHOLD = 0.2


def induction_blocker(layer: int, previous_token_layers) -> str | None:
    """Why a head at ``layer`` with a high prefix-matching score cannot be called an induction head,
    or None when it can be.

    An induction head attends to the token after an earlier copy of the current token by
    K-composition with a previous-token head in an earlier layer (Olsson et al. 2022, "In-context
    Learning and Induction Heads"; Elhage et al. 2021): a layer-0 head has nothing before it to
    compose with, and a head with no previous-token head in any earlier layer has none either.
    Every labeller (the findings' head line, the population's head classes) asks this one function.

    Args:
        layer: the head's layer (0-based).
        previous_token_layers: the layers of the heads that are previous-token heads at the same
            checkpoint (by the caller's previous-token threshold).

    Returns:
        ``"layer 0: no earlier layer to compose with"``, ``"no previous-token head in layers 0-2"``,
        or None.
    """
    if layer < 1:
        return "layer 0: no earlier layer to compose with"
    if not any(int(other) < layer for other in previous_token_layers):
        before = "layer 0" if layer == 1 else f"layers 0-{layer - 1}"
        return f"no previous-token head in {before}"
    return None


#: The rule in words, for legends and captions (``{hold}`` and ``{room}`` are filled in by :func:`rule_text`).
RULE = (
    "post = the first checkpoint whose greedy accuracy is at or above the threshold and stays there at the next "
    "{hold} checkpoint(s){room}; pre = the checkpoint before it"
)
#: The end-of-run clause of :data:`RULE` (for ``hold >= 1``): a crossing with no room to hold.
_ROOM = " (which must exist: a crossing with no room left to hold is none, the run not emerged by its last checkpoint)"


def rule_text(hold: int = DEFAULT_HOLD) -> str:
    """The point-of-emergence rule in words with ``hold`` (checkpoints) filled in, for legends and captions."""
    return RULE.format(hold=hold, room=_ROOM if hold else "")


#: Columns of the component-decomposition table (``decompose_jump``, ``components.csv``), in order:
#: the run and its pair of steps, the component patched (``target``, ``scope``, ``k`` heads), the
#: metric and its unit, the patched value with its bootstrap interval, the share of the jump
#: recovered with its interval, the values at pre and post, the jump's standard error and flag.
COMPONENT_COLUMNS = [
    "model",
    "seed",
    "pre_step",
    "post_step",
    "target",
    "scope",
    "k",
    "heads",
    "metric",
    "unit",
    "value",
    "value_lo",
    "value_hi",
    "recovered",
    "recovered_lo",
    "recovered_hi",
    "value_pre",
    "value_post",
    "jump_se",
    "jump_too_small",
]
