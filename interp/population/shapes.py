"""What an arm of a population is made of, and what else varies with a compared factor (issue
52, item 1): at a fixed ``d_model`` more heads also means a smaller ``d_head`` and, under Pythia's
``rotary_pct = 0.25``, fewer rotary dimensions per head (:func:`rotary_dims`); a contrast between
arms that differ in more than one factor is *confounded*. A leaf module: it reads the run table's
shape columns (``arm``, ``n_layers``, ``d_model``, ``n_heads``, ``d_head``) and nothing else.
"""

from __future__ import annotations

import re

import pandas as pd

__all__ = [
    "DERIVED",
    "FACTORS",
    "also_varies",
    "architecture",
    "derived_varies",
    "differences",
    "pair_varies",
    "rotary_dims",
]

#: The design factors an arm is made of, in the order a contrast names them: a contrast whose arms
#: differ in more than one of them is confounded (:mod:`interp.population.judge`).
FACTORS = ("architecture", "n_layers", "d_model", "n_heads", "d_head", "rotary_dims")
#: Quantities fixed by the design factors, named beside a contrast but never a confounder: no
#: design varies the head count alone holding both d_head and the attention width
#: (``n_heads * d_head``), nor d_head alone holding the rotary and the position-free dimensions
#: per head (``d_head - rotary_dims``).
DERIVED = ("attention_width", "position_free_dims")
_WORDS = {
    "rotary_dims": "rotary dims per head",
    "attention_width": "attention width",
    "position_free_dims": "position-free dims per head",
}


def architecture(arm: str) -> str:
    """The model family of an arm, the first part of its name where the name has parts
    (``neox-2l-64d-4h`` -> ``neox``, ``phi-...`` -> ``phi``); ``""`` for a name without one (``"A"``),
    which says nothing about the family."""
    head, sep, _ = str(arm).partition("-")
    return head if sep else ""


def rotary_dims(arm: str, d_head: int) -> int:
    """Rotary dimensions per head of an arm as the suite specs build it: the ``-r<N>`` suffix of
    its name when present (a size with ``rotary_dim: N``, :class:`interp.sources.catalogue.ModelSize`),
    else Pythia's 25 % of ``d_head`` (``int(d_head * 0.25)``; GPT-NeoX ``rotary_pct = 0.25``)."""
    match = re.search(r"-r(\d+)$", str(arm))
    return int(match.group(1)) if match else int(int(d_head) * 0.25)


def _shapes(runs: pd.DataFrame) -> pd.DataFrame:
    shapes = runs.groupby("arm", sort=False)[["n_layers", "d_model", "n_heads", "d_head"]].first()
    shapes["rotary_dims"] = [rotary_dims(a, d) for a, d in zip(shapes.index, shapes["d_head"])]
    shapes["architecture"] = [architecture(a) for a in shapes.index]
    shapes["attention_width"] = shapes["n_heads"] * shapes["d_head"]
    shapes["position_free_dims"] = shapes["d_head"] - shapes["rotary_dims"]
    return shapes


def _value(v):
    return v if isinstance(v, str) else int(v)


def differences(runs: pd.DataFrame, a: str, b: str) -> list[tuple[str, int, int]]:
    """The shape factors (:data:`FACTORS`) in which arm ``a`` differs from arm ``b``:
    ``[(factor, value in a, value in b), ...]``; more than one: the contrast is confounded."""
    shapes = _shapes(runs)
    return [
        (f, _value(shapes.loc[a, f]), _value(shapes.loc[b, f])) for f in FACTORS if shapes.loc[a, f] != shapes.loc[b, f]
    ]


def _span(values) -> str:
    values = sorted({_value(v) for v in values}, reverse=True)
    return f"{values[0]}–{values[-1]}" if len(values) > 1 else f"{values[0]}"


def also_varies(runs: pd.DataFrame, arms, factor: str) -> str:
    """What else varies with ``factor`` over ``arms``: ``"d_head 64–8, rotary dims per head 16–2"``,
    or ``""`` when nothing does (the contrast varies one thing). A factor crossed with ``factor``
    (the same values at every level of it, as d_head 8 and 16 at both 4 and 8 heads) does not vary
    with it: a fit over such arms is not confounded by it."""
    shapes = _shapes(runs).loc[list(arms)]

    def with_factor(f: str) -> bool:
        levels = shapes.groupby(factor)[f].agg(frozenset)
        return shapes[f].nunique() > 1 and levels.nunique() > 1

    return ", ".join(f"{_WORDS.get(f, f)} {_span(shapes[f])}" for f in FACTORS if f != factor and with_factor(f))


def pair_varies(runs: pd.DataFrame, a: str, b: str, factor: str) -> str:
    """What else differs between arms ``a`` and ``b`` besides ``factor``: ``"d_head 16 vs 32"``."""
    return ", ".join(f"{_WORDS.get(f, f)} {va} vs {vb}" for f, va, vb in differences(runs, a, b) if f != factor)


def derived_varies(runs: pd.DataFrame, a: str, b: str) -> str:
    """The derived quantities (:data:`DERIVED`) that differ between arms ``a`` and ``b``, named
    beside a contrast (``"attention width 128 vs 64"``), ``""`` where none does; never a confounder."""
    shapes = _shapes(runs)
    return ", ".join(
        f"{_WORDS[f]} {int(shapes.loc[a, f])} vs {int(shapes.loc[b, f])}"
        for f in DERIVED
        if shapes.loc[a, f] != shapes.loc[b, f]
    )
