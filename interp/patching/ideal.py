"""Ideal attention patterns as a patch source: a head's pattern set to the pattern it *should* have.

Besides "from the post checkpoint", a pattern target can take its pattern from a rule applied to
the prompt's tokens.  ``IdealPatterns({(layer, head): name_or_callable})`` is passed where a
post checkpoint goes (``patch_values(pre, IdealPatterns(...), batch, [pattern(heads)])``); the
engine builds a :class:`~interp.patching.post.PostCheckpoint` whose ``hook_pattern`` holds the
ideal pattern of each chosen head, so the fast path and the reference path patch it exactly as
they patch a post pattern (equal to 1e-5, tests/interp/patching/test_patching_ideal.py).

Named patterns (``IDEAL_PATTERNS``; ``[batch, query_pos, key_pos]``, row ``i`` = query ``i``):

==================  ====================================================================
``previous_token``  query ``i`` attends to key ``i - 1`` (query 0 to itself)
``induction``       to key ``j + 1``, ``j < i`` the latest earlier occurrence of token ``i``
                    (Olsson et al. 2022's induction / prefix-matching pattern); to key 0 (the
                    first token) where there is none
``duplicate_token`` uniformly to every earlier occurrence ``j < i`` of token ``i``; to key 0
                    where there is none
``first_token``     to key 0
``uniform``         uniformly to keys ``0 .. i``
``offset_3``        to key ``i - 3`` (key 0 for ``i < 3``): the previous-token pattern's
                    sparsity at a wrong offset, the control of forcing (issue 45)
``induction_offset_3``  to key ``min(j + 3, i)``, ``j`` as for ``induction`` (key 0 where
                    there is none): the induction pattern's sparsity, two keys off
==================  ====================================================================

A callable ``(tokens [batch, pos]) -> pattern [batch, pos, pos]`` is checked: finite, non-negative,
zero above the diagonal (causal) and rows summing to 1 (to 1e-4), else a one-line ValueError.

Sources: Olsson et al. 2022 ("In-context Learning and Induction Heads", arXiv:2209.11895),
TransformerLens's head detector (its "previous_token", "duplicate_token", "induction" patterns),
Baherwani et al. 2026 (the ideal sparse patterns whose learning the paper calls the bottleneck).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

__all__ = [
    "IDEAL_PATTERNS",
    "IdealPatterns",
    "check_pattern",
    "duplicate_token_pattern",
    "first_token_pattern",
    "ideal_pattern",
    "induction_offset_3_pattern",
    "induction_pattern",
    "offset_3_pattern",
    "previous_token_pattern",
    "uniform_pattern",
]

PatternRule = str | Callable[[Tensor], Tensor]


def _tokens(tokens: Any) -> Tensor:
    if not isinstance(tokens, Tensor) or tokens.ndim != 2 or tokens.is_floating_point() or 0 in tokens.shape:
        got = tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__
        raise ValueError(f"tokens must be a non-empty integer [batch, pos] tensor, got {got}")
    return tokens


def _one_hot_rows(keys: Int[Tensor, "batch pos"], pos: int) -> Float[Tensor, "batch pos pos"]:
    return torch.nn.functional.one_hot(keys.long(), pos).float()


def previous_token_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Query ``i`` attends to key ``i - 1`` (query 0 to key 0)."""
    n, pos = _tokens(tokens).shape
    keys = (torch.arange(pos, device=tokens.device) - 1).clamp_min(0).expand(n, pos)
    return _one_hot_rows(keys, pos)


def _same_token(tokens: Tensor) -> Tensor:
    """``[batch, q, k]``: True where key ``k < q`` holds the query's token."""
    pos = tokens.shape[1]
    earlier = torch.ones(pos, pos, dtype=torch.bool, device=tokens.device).tril(-1)
    return (tokens[:, :, None] == tokens[:, None, :]) & earlier


def induction_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Query ``i`` attends to key ``j + 1``, ``j < i`` the latest earlier occurrence of token ``i``
    (``j + 1 <= i``, so the pattern is causal); key 0 where token ``i`` did not occur before."""
    n, pos = _tokens(tokens).shape
    same = _same_token(tokens)
    index = torch.arange(pos, device=tokens.device)
    latest = torch.where(same, index[None, None, :], torch.full_like(index, -1)[None, None, :]).amax(dim=-1)
    keys = torch.where(latest >= 0, latest + 1, torch.zeros_like(latest))
    return _one_hot_rows(keys, pos)


def duplicate_token_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Query ``i`` attends uniformly to every earlier occurrence of token ``i``; key 0 where there is none."""
    n, pos = _tokens(tokens).shape
    same = _same_token(tokens).float()
    none = same.sum(dim=-1, keepdim=True) == 0
    first = torch.zeros_like(same)
    first[..., 0] = 1.0
    same = torch.where(none, first, same)
    return same / same.sum(dim=-1, keepdim=True)


def first_token_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Every query attends to key 0 (the first token)."""
    n, pos = _tokens(tokens).shape
    return _one_hot_rows(torch.zeros(n, pos, dtype=torch.long, device=tokens.device), pos)


def uniform_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Query ``i`` attends uniformly to keys ``0 .. i``."""
    n, pos = _tokens(tokens).shape
    causal = torch.ones(pos, pos, device=tokens.device).tril()
    return (causal / causal.sum(dim=-1, keepdim=True)).expand(n, pos, pos).clone()


def offset_3_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Query ``i`` attends to key ``i - 3`` (key 0 for ``i < 3``): one key per row like the
    previous-token pattern, at an offset wrong for the repetition task (a forcing control)."""
    n, pos = _tokens(tokens).shape
    keys = (torch.arange(pos, device=tokens.device) - 3).clamp_min(0).expand(n, pos)
    return _one_hot_rows(keys, pos)


def induction_offset_3_pattern(tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """Query ``i`` attends to key ``min(j + 3, i)``, ``j`` the latest earlier occurrence of token
    ``i`` (key 0 where there is none): one key per row like the induction pattern, two keys past
    the one the repetition task needs (a forcing control)."""
    keys = induction_pattern(tokens).argmax(dim=-1)  # j + 1, or 0 where none
    index = torch.arange(tokens.shape[1], device=tokens.device).expand_as(keys)
    shifted = torch.where(keys > 0, torch.minimum(keys + 2, index), keys)
    return _one_hot_rows(shifted, tokens.shape[1])


#: name -> rule ``(tokens [batch, pos]) -> pattern [batch, pos, pos]``
IDEAL_PATTERNS: dict[str, Callable[[Tensor], Tensor]] = {
    "previous_token": previous_token_pattern,
    "induction": induction_pattern,
    "duplicate_token": duplicate_token_pattern,
    "first_token": first_token_pattern,
    "uniform": uniform_pattern,
    "offset_3": offset_3_pattern,
    "induction_offset_3": induction_offset_3_pattern,
}


def check_pattern(
    pattern: Any, tokens: Int[Tensor, "batch pos"], name: str = "pattern"
) -> Float[Tensor, "batch pos pos"]:
    """``pattern`` as float32 if it is a valid attention pattern ``[batch, query_pos, key_pos]`` for ``tokens``.

    Raises:
        ValueError: not a ``[batch, pos, pos]`` tensor of these tokens, non-finite or negative
            entries, attention above the diagonal (not causal), or rows not summing to 1 (1e-4).
    """
    n, pos = tokens.shape
    if not isinstance(pattern, Tensor) or tuple(pattern.shape) != (n, pos, pos):
        got = tuple(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise ValueError(f"ideal pattern {name} must be a [batch, pos, pos] = {(n, pos, pos)} tensor, got {got}")
    pattern = pattern.float()
    if not bool(torch.isfinite(pattern).all()) or bool((pattern < 0).any()):
        raise ValueError(f"ideal pattern {name} has negative or non-finite entries; attention weights must be >= 0")
    above = pattern.triu(1).abs().max().item() if pos > 1 else 0.0
    if above > 1e-6:
        raise ValueError(f"ideal pattern {name} is not causal: weight {above:.3g} on a key after its query")
    rows = pattern.sum(dim=-1)
    worst = (rows - 1).abs().max().item()
    if worst > 1e-4:
        raise ValueError(
            f"ideal pattern {name} has rows summing to {rows.flatten()[(rows - 1).abs().argmax()]:.4g}; "
            "every query's attention must sum to 1"
        )
    return pattern


def _rule(rule: PatternRule) -> tuple[str, Callable[[Tensor], Tensor]]:
    if isinstance(rule, str):
        if rule not in IDEAL_PATTERNS:
            raise ValueError(f"ideal pattern {rule!r} is unknown; valid: {', '.join(IDEAL_PATTERNS)} or a callable")
        return rule, IDEAL_PATTERNS[rule]
    if callable(rule):
        return getattr(rule, "__name__", type(rule).__name__), rule
    raise ValueError(
        f"ideal pattern must be a name ({', '.join(IDEAL_PATTERNS)}) or a callable, got {type(rule).__name__}"
    )


def ideal_pattern(rule: PatternRule, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos pos"]:
    """The ideal pattern ``rule`` (a name of ``IDEAL_PATTERNS`` or a callable) on ``tokens``, checked.

    Returns:
        ``Float[Tensor, "batch query_pos key_pos"]`` (float32, rows sum to 1, causal).

    Raises:
        ValueError: an unknown name, bad tokens, or a callable whose pattern fails :func:`check_pattern`.

    Sources: Olsson et al. 2022, "In-context Learning and Induction Heads" (previous-token and
    induction patterns); TransformerLens's head detector (its named patterns).
    """
    name, fn = _rule(rule)
    tokens = _tokens(tokens)
    return check_pattern(fn(tokens), tokens, name=repr(name))


@dataclass(frozen=True)
class IdealPatterns:
    """A patch source whose pattern of each chosen head is an ideal pattern of the prompt's tokens.

    Pass it where ``patch_values`` takes the post checkpoint; only ``pattern`` targets whose heads
    are all chosen here can take from it.

    Attributes:
        heads: ``{(layer, head): rule}``, rule a name of ``IDEAL_PATTERNS`` or a callable
            ``(tokens [batch, pos]) -> [batch, pos, pos]``.  ``IdealPatterns.of("induction",
            [(1, 0)])`` builds it for one rule.

    Raises:
        ValueError: an unknown rule, a malformed head, or no heads.

    Sources: Baherwani et al. 2026 (setting a head to the sparse pattern it should learn);
    Olsson et al. 2022 and TransformerLens's head detector (the named patterns).
    """

    heads: Mapping[tuple[int, int], PatternRule]

    def __post_init__(self) -> None:
        if not isinstance(self.heads, Mapping) or not self.heads:
            raise ValueError("IdealPatterns needs {(layer, head): pattern} with at least one head")
        from interp.patching.targets import _pair

        fixed = {}
        for head, rule in self.heads.items():
            _rule(rule)
            fixed[_pair(head)] = rule
        object.__setattr__(self, "heads", fixed)

    @classmethod
    def of(cls, rule: PatternRule, heads: Sequence[tuple[int, int]]) -> IdealPatterns:
        """Every head of ``heads`` gets ``rule``."""
        return cls({(h[0], h[1]): rule for h in heads})

    def label(self) -> str:
        """``L1H0=induction+L0H2=previous_token``."""
        return "+".join(f"L{l}H{h}={_rule(r)[0]}" for (l, h), r in sorted(self.heads.items()))

    def post(self, model: Any, batch: Any) -> Any:
        """The :class:`~interp.patching.post.PostCheckpoint` holding these patterns on ``batch``.

        Heads not chosen get the uniform pattern (a valid pattern the engine may compute with;
        targets can patch only chosen heads, see :meth:`check_targets`).

        Raises:
            ValueError: a head outside the model, or a callable's pattern fails :func:`check_pattern`.
        """
        from interp.patching._forward import check_batch, heads_shape, model_device
        from interp.patching.post import PostCheckpoint
        from interp.patching.targets import Target, hook_name

        batch = check_batch(batch)
        n_layers, n_heads = heads_shape(model)
        Target("pattern", tuple(self.heads)).resolved_heads(n_layers, n_heads)  # range check
        tokens = batch.tokens.cpu()
        cache: dict[str | int, Tensor] = {}
        base = uniform_pattern(tokens)
        patterns = base[:, None].repeat(1, n_heads, 1, 1)[None].repeat(n_layers, 1, 1, 1, 1)
        for (layer, head), rule in self.heads.items():
            key = rule if isinstance(rule, str) else id(rule)
            if key not in cache:
                cache[key] = ideal_pattern(rule, tokens)
            patterns[layer, :, head] = cache[key]
        device = model_device(model)
        return PostCheckpoint(
            {hook_name("pattern", l): patterns[l].to(device) for l in range(n_layers)},
            None,
            None,
            n_layers,
            n_heads,
            tokens=batch.tokens.clone(),
        )

    def check_targets(self, targets: Sequence[Any], n_layers: int, n_heads: int) -> None:
        """Check that every target is a ``pattern`` target whose heads all have an ideal pattern here.

        Raises:
            ValueError: a target of another kind, or one that patches a head not chosen here.
        """
        chosen = set(self.heads)
        for target in targets:
            if target.kind != "pattern":
                raise ValueError(f"ideal patterns patch 'pattern' targets only, got {target.label()!r}")
            missing = [h for h in target.resolved_heads(n_layers, n_heads) if h not in chosen]
            if missing:
                raise ValueError(
                    f"target {target.label()!r} patches heads {missing} that have no ideal "
                    f"pattern; chosen: {self.label()}"
                )
