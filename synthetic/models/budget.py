"""Parameter-budget matching across architectures.

Comparisons between the transformer and the alternative token mixers (Baherwani et al. 2026,
arXiv 2606.25010: MLP-Mixer, Mamba, Gated DeltaNet, RWKV against the transformer) are
made at equal trainable-parameter count: :func:`match_parameter_budget` keeps every field of a
base config and searches the architecture's width knob, ``d_model``, for the count nearest a
target (by default the transformer's). The counts come from building the model and
:func:`synthetic.models.count_parameters`, so they are exact, not formulas.

Width granularity: Mamba-2 needs ``2 * d_model`` to be a multiple of ``d_head`` (SSM heads
tile the inner width, see ``synthetic/models/mamba.py``); every other architecture takes any
``d_model ≥ 1``.

Some budgets cannot be met by width alone, e.g. the causal MLP-Mixer's token-mixing matrices
hold ``n_layers · (n_ctx (n_ctx + 1) + 2 n_ctx)`` parameters whatever ``d_model`` is; then the
nearest reachable count is reported in the error.
"""

from __future__ import annotations

import dataclasses
import math

from synthetic.models import ARCHITECTURES, ModelConfig, build_model, count_parameters

MAX_D_MODEL = 8192  # search ceiling; far above anything trained on CPU here


def _step(arch: str, base: ModelConfig) -> int:
    """Smallest ``d_model`` increment the architecture accepts."""
    if arch == "mamba2":
        return base.d_head // math.gcd(2, base.d_head)
    return 1


def parameter_count(cfg: ModelConfig) -> int:
    """Trainable parameters of the model ``cfg`` describes (built, counted, discarded)."""
    return count_parameters(build_model(cfg))


def match_parameter_budget(
    arch: str, target_params: int, base_cfg: ModelConfig, tolerance: float | None = 0.1
) -> ModelConfig:
    """``base_cfg`` with ``arch`` and the ``d_model`` whose parameter count is nearest ``target_params``.

    Doubling then bisection on ``d_model`` (counts grow monotonically with width), then the
    nearer of the two bracketing widths.

    Args:
        arch: key of :data:`synthetic.models.ARCHITECTURES`.
        target_params: trainable parameters to match, e.g.
            ``count_parameters(build_model(transformer_cfg))``.
        base_cfg: every other field (d_vocab, n_ctx, n_layers, n_heads, d_head, d_mlp, seed…).
        tolerance: largest accepted ``|count − target| / target``; None accepts the nearest.

    Returns:
        A new :class:`ModelConfig` (``base_cfg`` is not modified).

    Raises:
        ValueError: unknown ``arch``, ``target_params < 1``, or no width within ``tolerance``
            (the message names the nearest reachable count and its ``d_model``).
    """
    if arch not in ARCHITECTURES:
        raise ValueError(f"arch={arch!r} is unknown: choose one of {', '.join(sorted(ARCHITECTURES))}")
    if not isinstance(target_params, int) or target_params < 1:
        raise ValueError(f"target_params={target_params!r} is invalid: must be an integer ≥ 1")
    step = _step(arch, base_cfg)

    def config(k: int) -> ModelConfig:
        return dataclasses.replace(base_cfg, arch=arch, d_model=k * step)

    counts: dict[int, int] = {}

    def count(k: int) -> int:
        if k not in counts:
            counts[k] = parameter_count(config(k))
        return counts[k]

    # Exponential search for a bracket, then bisection: never builds a model much wider than needed.
    lo, hi = 0, 1
    while count(hi) < target_params and hi * step < MAX_D_MODEL:
        lo, hi = hi, 2 * hi
    if count(hi) < target_params or lo == 0:
        best = hi  # target beyond the ceiling, or at most the narrowest model
    else:
        while hi - lo > 1:  # invariant: count(lo) < target ≤ count(hi)
            mid = (lo + hi) // 2
            if count(mid) < target_params:
                lo = mid
            else:
                hi = mid
        best = min((lo, hi), key=lambda k: abs(count(k) - target_params))
    error = abs(count(best) - target_params) / target_params
    if tolerance is not None and error > tolerance:
        raise ValueError(
            f"target_params={target_params} is out of reach for arch={arch!r} within {tolerance:.0%}: "
            f"nearest is {count(best)} parameters at d_model={best * step} (other fields of base_cfg fixed)"
        )
    return config(best)
