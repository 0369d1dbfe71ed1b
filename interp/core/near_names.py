"""Names near a known one, for "did you mean" (issue 71): ``embeded/neox-2l-64d-seed0`` is one edit
from ``embedded/neox-2l-64d-seed0``, and a typo of a shipped name is refused with the name that
works instead of being taken for a hub repo and fetched (ground floor: no imports)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["NEAR_EDITS", "edit_distance", "near_name"]

#: The most single-character edits (insert, delete, replace) between a name and a known one for
#: "did you mean": ``embeded/neox-2l-64d-seed0`` is 1 from ``embedded/neox-2l-64d-seed0``.
NEAR_EDITS = 2


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest single-character insertions, deletions and replacements
    that turn ``a`` into ``b`` (Levenshtein 1966; the two-row dynamic programme)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def near_name(name: str, known: Sequence[str], max_edits: int = NEAR_EDITS) -> str | None:
    """The name of ``known`` nearest to ``name`` when it is at most ``max_edits`` edits away (and
    fewer than a third of ``name``'s length: ``abc`` is not a typo of ``embedded``), else None; the
    first of ``known`` on a tie. ``name`` itself in ``known``: None (nothing to correct)."""
    if name in known:
        return None
    limit = min(max_edits, max(0, (len(name) - 1) // 3))
    best, best_edits = None, limit + 1
    for candidate in known:
        if abs(len(candidate) - len(name)) >= best_edits:
            continue
        edits = edit_distance(name, candidate)
        if edits < best_edits:
            best, best_edits = candidate, edits
    return best
