"""Head scores per checkpoint: previous-token, prefix-matching (induction) and OV copying.

Definitions (Olsson et al. 2022, "In-context Learning and Induction Heads", arXiv:2209.11895,
section "Definitions"; Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"):

``previous_token``
    on a sequence of random tokens repeated once, the mean attention from each query position
    ``i >= 1`` to key ``i - 1``.
``prefix_matching``
    on the same sequence, the mean attention from each query position ``i`` of the repeat to
    the token *after* the previous occurrence of its token, key ``i - period + 1``
    (TransformerLens's head detector calls this pattern "induction").  A perfect induction head
    scores 1, a uniform or an attend-to-the-first-token pattern about 0.
``copying``
    of the head's OV circuit ``W_E W_V W_O W_U`` (vocab x vocab, the LayerNorm gains folded
    in: ``ln1`` before ``W_V``, ``ln_final`` before ``W_U``; centring and scale ignored as in
    Elhage et al.): ``sum(lambda) / sum(|lambda|)`` over its eigenvalues, in [-1, 1]; near 1 when
    the head copies the tokens it attends to into the logits.  Its nonzero eigenvalues are
    those of the ``d_head x d_head`` matrix ``W_O W_U W_E W_V`` (cyclic permutation).

All attention scores read ``hook_pattern`` (post-softmax) of the model on tokens from
``repeated_random_tokens``; values are fractions of attention (probability units).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core.kept import KEPT, tensor_digest

__all__ = [
    "HEAD_SCORE_COLUMNS",
    "SCORES",
    "copying_score_from_weights",
    "copying_scores",
    "head_scores",
    "head_scores_over_checkpoints",
    "kept_head_scores",
    "kept_scores_key",
    "prefix_matching_score",
    "previous_token_score",
    "repeated_random_tokens",
    "score_tokens",
    "steps_around",
]

SCORES = ("previous_token", "prefix_matching", "copying")
HEAD_SCORE_COLUMNS = ["model", "seed", "step", "layer", "head", "score", "value"]


def _check_pattern(pattern: Tensor) -> None:
    if not isinstance(pattern, Tensor) or pattern.ndim != 4 or pattern.shape[-1] != pattern.shape[-2]:
        shape = tuple(pattern.shape) if isinstance(pattern, Tensor) else type(pattern).__name__
        raise ValueError(f"pattern must be [batch, head, query_pos, key_pos] with query_pos == key_pos, got {shape}")


def previous_token_score(pattern: Float[Tensor, "batch head query_pos key_pos"]) -> Float[Tensor, " head"]:
    """Mean attention from position ``i`` to ``i - 1`` over ``i >= 1`` and the batch.

    Raises:
        ValueError: a pattern that is not ``[batch, head, pos, pos]``.
    """
    _check_pattern(pattern)
    return pattern.float().diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def prefix_matching_score(
    pattern: Float[Tensor, "batch head query_pos key_pos"], period: int
) -> Float[Tensor, " head"]:
    """Mean attention from each position ``i >= period`` to key ``i - period + 1`` (the token after
    the previous occurrence of token ``i`` on a sequence that repeats with ``period``).

    Raises:
        ValueError: a malformed pattern, or ``period`` not in ``[2, pos - 1]``.
    """
    _check_pattern(pattern)
    pos = pattern.shape[-1]
    if not 2 <= period < pos:
        raise ValueError(f"period={period} must lie in [2, {pos - 1}] for {pos} positions")
    return pattern.float().diagonal(offset=-(period - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, 2))


def copying_score_from_weights(
    W_E: Float[Tensor, "d_vocab d_model"],
    W_V: Float[Tensor, "head d_model d_head"],
    W_O: Float[Tensor, "head d_head d_model"],
    W_U: Float[Tensor, "d_model d_vocab"],
) -> Float[Tensor, " head"]:
    """``sum(lambda) / sum(|lambda|)`` of each head's OV circuit ``W_E W_V[h] W_O[h] W_U``.

    Raises:
        ValueError: shapes that do not chain.
    """
    if not (
        W_E.shape[1] == W_V.shape[1] == W_O.shape[2] == W_U.shape[0]
        and W_V.shape[2] == W_O.shape[1]
        and W_V.shape[0] == W_O.shape[0]
    ):
        raise ValueError(
            f"shapes do not chain: W_E {tuple(W_E.shape)}, W_V {tuple(W_V.shape)}, "
            f"W_O {tuple(W_O.shape)}, W_U {tuple(W_U.shape)}"
        )
    inner = W_U.double() @ W_E.double()  # [d_model, d_model]
    small = W_O.double() @ inner @ W_V.double()  # [head, d_head, d_head]: same nonzero eigenvalues
    eig = torch.linalg.eigvals(small)
    total = eig.sum(dim=-1).real
    return (total / eig.abs().sum(dim=-1).clamp_min(1e-30)).float()


def _gain(norm: Any, d_model: int) -> Tensor:
    weight = getattr(norm, "weight", None)
    if not isinstance(weight, Tensor):
        inner = getattr(norm, "original_component", None)
        weight = getattr(inner, "weight", None)
    if not isinstance(weight, Tensor) or weight.shape != (d_model,):
        return torch.ones(d_model)
    return weight.detach().float().cpu()


def copying_scores(model: Any) -> Float[Tensor, "layer head"]:
    """OV copying score of every head of a ``TransformerBridge`` (LayerNorm gains folded in).

    With grouped-query attention (``W_V`` of shape ``[n_key_value_heads, d_model, d_head]``,
    Ainslie et al. 2023) each query head's OV circuit reads the values of its key/value head
    ``head // (n_heads // n_key_value_heads)``: the score is per query head, as the ranking's
    heads are (tests/interp/main_job/test_gqa_run.py: equal to the scores of the same model written with one
    key/value head per query head, to 1e-5).

    Returns:
        [layer, head] scores in [-1, 1], one per query head.
    """
    n_layers = int(model.cfg.n_layers)
    W_E = model.W_E.detach().float().cpu()
    W_U = model.W_U.detach().float().cpu() * _gain(model.ln_final, W_E.shape[1])[:, None]
    out = []
    for l in range(n_layers):
        attn = model.blocks[l].attn
        W_V = attn.W_V.detach().float().cpu() * _gain(model.blocks[l].ln1, W_E.shape[1])[None, :, None]
        W_O = attn.W_O.detach().float().cpu()
        if W_V.shape[0] != W_O.shape[0] and W_V.shape[0] > 0 and W_O.shape[0] % W_V.shape[0] == 0:
            W_V = W_V.repeat_interleave(W_O.shape[0] // W_V.shape[0], dim=0)  # each query head: its kv head
        out.append(copying_score_from_weights(W_E, W_V, W_O, W_U))
    return torch.stack(out)


def repeated_random_tokens(
    token_pool: Sequence[int], n_prompts: int = 16, period: int = 20, seed: int = 0
) -> Int[Tensor, "batch two_period"]:
    """``n_prompts`` rows of ``period`` distinct random tokens from ``token_pool`` repeated once.

    Raises:
        ValueError: a pool smaller than ``period`` or ``period < 2``.
    """
    pool = list(token_pool)
    if period < 2 or len(pool) < period:
        raise ValueError(f"period={period} needs >= 2 and at most the pool size {len(pool)}")
    rng = np.random.default_rng(seed)
    rows = [[pool[i] for i in rng.choice(len(pool), size=period, replace=False)] for _ in range(n_prompts)]
    return torch.tensor([r + r for r in rows], dtype=torch.long)


def head_scores(model: Any, tokens: Int[Tensor, "batch pos"], period: int) -> dict[str, Float[Tensor, "layer head"]]:
    """Previous-token, prefix-matching and copying scores of every head (see the module docstring).

    Args:
        model: a ``TransformerBridge`` (eval mode).
        tokens: ``repeated_random_tokens(...)``: sequences that repeat with ``period``.
        period: the repeat length in tokens.

    Returns:
        ``{score name: Float[Tensor, "layer head"]}`` (CPU).

    Raises:
        ValueError: a model without attention heads or a bad ``period``.

    Sources: previous-token and prefix-matching scores, Olsson et al. 2022, "In-context Learning
    and Induction Heads"; the copying score (OV circuit eigenvalues), Elhage et al. 2021, "A
    Mathematical Framework for Transformer Circuits".
    """
    from interp.patching import cache_patterns

    patterns = cache_patterns(model, tokens).cpu()  # [layer, batch, head, q, k]
    return {
        "previous_token": torch.stack([previous_token_score(p) for p in patterns]),
        "prefix_matching": torch.stack([prefix_matching_score(p, period) for p in patterns]),
        "copying": copying_scores(model),
    }


def score_tokens(
    tokenizer: Any, token_pool: Sequence[int] | None = None, n_prompts: int = 16, period: int = 20
) -> tuple[Int[Tensor, "batch two_period"], int]:
    """The sequences every head is scored on, and their period (tokens): ``n_prompts`` rows of
    ``period`` random tokens repeated once (:func:`repeated_random_tokens`, seed 0), drawn from
    ``token_pool`` (default: the tokenizer's single letters and digits,
    ``interp.tasks.alnum_token_pool``; a smaller vocabulary than ``period``: every item once).

    Raises:
        ValueError: as :func:`repeated_random_tokens`.
    """
    from interp.tasks import alnum_token_pool

    pool = token_pool if token_pool is not None else alnum_token_pool(tokenizer)
    if token_pool is None and 2 <= len(pool) < period:  # a small vocabulary (a word-level toy): every item once
        period = len(pool)
    return repeated_random_tokens(pool, n_prompts=n_prompts, period=period), period


def kept_scores_key(source: Any, step: int, tokens: Tensor, period: int, device: str | None = None) -> tuple | None:
    """The key of ``step``'s head scores on ``tokens`` in the process's kept evaluations
    (:mod:`interp.core.kept`; None where the source gives no digest)."""
    return KEPT.key(source, step, tensor_digest(tokens, period), "head-scores", device)


def kept_head_scores(
    source: Any, step: int, tokens: Tensor, period: int, device: str | None = None, model: Any = None
) -> dict[str, np.ndarray] | None:
    """:func:`head_scores` of ``source``'s ``step`` (``{name: Float[ndarray, "layer head"]}``), taken
    from the process's kept evaluations (:mod:`interp.core.kept`) when measured before; else
    measured on ``model`` (``step`` loaded by the caller) and kept, or None without a ``model``."""
    key = kept_scores_key(source, step, tokens, period, device)
    scores = KEPT.get(key)
    if scores is None and model is not None:
        with torch.inference_mode():
            scores = {name: values.cpu().numpy() for name, values in head_scores(model, tokens, period).items()}
        KEPT.put(key, scores)
    return scores


def steps_around(steps: Sequence[int], pre_step: int, post_step: int, n_before: int = 3, n_after: int = 3) -> list[int]:
    """``pre_step`` and the ``n_before`` checkpoints before it, ``post_step`` and the ``n_after`` after it.

    (Kept short by default: on the hub every extra step is one more checkpoint download.)
    """
    steps = sorted(steps)
    before = [s for s in steps if s <= pre_step][-(n_before + 1) :]
    after = [s for s in steps if s >= post_step][: n_after + 1]
    return sorted(set(before + after))


def head_scores_over_checkpoints(
    source: Any,
    steps: Sequence[int],
    token_pool: Sequence[int] | None = None,
    n_prompts: int = 16,
    period: int = 20,
    device: str | None = None,
    model: str | None = None,
    seed: int | None = None,
) -> pd.DataFrame:
    """``head_scores`` at each of ``steps`` of a checkpoint source, one row per (step, head, score);
    a step scored before in this process on the same sequences (the main job's scan, the
    scrubber: :func:`kept_head_scores`) is not loaded again.

    Args:
        source: a checkpoint source (``interp.sources``).
        steps: training steps to score.
        token_pool: token ids of the random sequences (default: the tokenizer's single
            letters and digits, ``interp.tasks.alnum_token_pool``).
        n_prompts: random sequences scored at each step.
        period: length of the random block that each sequence repeats once (tokens; sequences
            are ``2 * period`` tokens); with the default pool, at most the pool's size (a
            tokenizer with fewer single letters and digits, such as a 13-word vocabulary).
        device: where each checkpoint is loaded (default: the source's choice).
        model, seed: labels of the table (default: from the source's id,
            :func:`interp.sources.catalogue.model_and_seed`).

    Returns:
        DataFrame with ``HEAD_SCORE_COLUMNS`` (values: attention fractions, or the copying ratio).

    Raises:
        ValueError: as :func:`repeated_random_tokens` (``period < 2`` or a pool smaller than it)
            and :func:`head_scores`.

    Sources: as :func:`head_scores` (Olsson et al. 2022; Elhage et al. 2021).
    """
    from interp.sources.catalogue import model_and_seed

    known_model, known_seed = model_and_seed(getattr(source, "model_id", ""))
    model = known_model if model is None else model
    seed = known_seed if seed is None else seed

    tokens, period = score_tokens(source.tokenizer(), token_pool, n_prompts, period)
    rows = []
    steps = list(steps)
    wanted = [s for s in steps if KEPT.get(kept_scores_key(source, s, tokens, period, device)) is None]
    for step in steps:
        scores = kept_head_scores(source, step, tokens, period, device)
        if scores is None:
            loaded = source.load(step, device=device)
            later = [s for s in wanted if s > step]
            if later and hasattr(source, "prefetch"):
                source.prefetch(later[0])  # read while this step is scored (swapping sources only)
            scores = kept_head_scores(source, step, tokens, period, device, model=loaded.model)
        assert scores is not None  # measured on the loaded model
        for name, values in scores.items():
            for (layer, head), value in np.ndenumerate(values):
                rows.append((model, seed, int(step), int(layer), int(head), name, float(value)))
    return pd.DataFrame(rows, columns=HEAD_SCORE_COLUMNS)
