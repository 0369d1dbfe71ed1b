"""Per-checkpoint head features of one run: what the forecast and the formation order read.

For every checkpoint of a run and every head, on ``n_prompts`` sequences of ``period`` distinct
random letters and digits repeated once (:func:`interp.scores.repeated_random_tokens`, the tokens
of :mod:`interp.scores`):

``previous_token``, ``prefix_matching``
    the scores of :mod:`interp.scores` (Olsson et al. 2022): the mean attention to key ``i - 1``,
    and on the repeat to key ``i - period + 1`` (fractions of attention, probability units).
``entropy``
    the mean over queries ``i >= 1`` and prompts of the attention row's entropy (nats; a row
    on one key is 0, a uniform row over ``i + 1`` keys is ``ln(i + 1)``).
``dist_ideal``
    the mean total-variation distance (``0.5 * L1``, in [0, 1]) between the head's rows and the
    ideal pattern of its layer (:mod:`interp.patching.ideal`): ``previous_token`` for layer 0,
    ``induction`` for layers >= 1 (the two-layer repetition circuit: a previous-token head feeds
    an induction head, Olsson et al. 2022), over every query ``i >= 1``.

and, per run and checkpoint, ``loss``: the mean training loss (nats) over the 100 optimizer
steps up to the checkpoint (``loss.csv`` of the run; NaN where the run has none).

A run's table is computed once and kept (``docs/data/population/heads/<run>.csv``, written by
``analyses/population_insight.py``): 38-48 checkpoints x 2-16 heads; measured 15-35 s per run
(0.4-0.7 s per checkpoint, mostly loading it) at ``nice -n 19`` beside the population's two
training workers, and 100-200 s per run when the 2-core machine's load average was 10-11.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["FEATURE_COLUMNS", "HEAD_FEATURES", "head_features", "loss_at_steps", "run_head_features"]

#: The per-head features, in the order of :data:`FEATURE_COLUMNS`.
HEAD_FEATURES = ("previous_token", "prefix_matching", "entropy", "dist_ideal")
#: Columns of a run's head-feature table: one row per (step, layer, head).
FEATURE_COLUMNS = ["run", "step", "layer", "head", *HEAD_FEATURES, "loss"]
#: Training steps averaged into a checkpoint's ``loss``.
LOSS_WINDOW = 100


def loss_at_steps(losses: pd.DataFrame, steps, window: int = LOSS_WINDOW) -> dict[int, float]:
    """``{step: mean training loss of the optimizer steps in (step - window, step]}`` (nats);
    NaN where no loss row falls in the window (step 0: the loss of step 0 itself).

    Raises:
        ValueError: ``losses`` without ``step`` and ``loss`` columns, or ``window < 1``.
    """
    if not {"step", "loss"} <= set(losses.columns):
        raise ValueError(f"losses need columns step and loss, got {list(losses.columns)}")
    if window < 1:
        raise ValueError(f"window={window} must be >= 1 (optimizer steps)")
    s, v = losses["step"].to_numpy(), losses["loss"].to_numpy(dtype=float)
    out = {}
    for step in steps:
        mask = (s <= step) & (s > step - window)
        out[int(step)] = float(v[mask].mean()) if mask.any() else math.nan
    return out


def head_features(source, steps=None, n_prompts: int = 16, period: int = 20, losses: pd.DataFrame | None = None):
    """The head features of :mod:`interp.population.heads` at every step of ``source``.

    Args:
        source: a checkpoint source (:mod:`interp.sources`), e.g. a ``LocalSuiteSource``.
        steps: the steps to read (default: every step the source has).
        n_prompts: random repeated sequences per checkpoint.
        period: length in tokens of the block each sequence repeats once (sequences are
            ``2 * period`` tokens).
        losses: the run's training losses (``step``, ``loss``; nats) for the ``loss`` column, or None.

    Returns:
        DataFrame with :data:`FEATURE_COLUMNS` (``run`` = the source's id), one row per (step, layer, head).

    Raises:
        ValueError: ``n_prompts < 1`` or a bad ``period`` (:func:`interp.scores.repeated_random_tokens`).

    Sources: Olsson et al. 2022, "In-context Learning and Induction Heads" (previous-token and
    prefix-matching scores, the induction pattern); Baherwani et al. 2026 (attention entropy and
    the distance to the ideal sparse pattern as the quantity whose learning is the bottleneck).
    """
    import torch

    from interp.patching import cache_patterns
    from interp.patching.ideal import ideal_pattern
    from interp.scores import prefix_matching_score, previous_token_score, repeated_random_tokens
    from interp.tasks import alnum_token_pool

    if n_prompts < 1:
        raise ValueError(f"n_prompts={n_prompts} must be >= 1")
    tokens = repeated_random_tokens(alnum_token_pool(source.tokenizer()), n_prompts=n_prompts, period=period)
    ideals = {name: ideal_pattern(name, tokens) for name in ("previous_token", "induction")}  # [batch, q, k]
    steps = list(source.available_steps() if steps is None else steps)
    loss = loss_at_steps(losses, steps) if losses is not None else {}
    run = str(getattr(source, "model_id", ""))
    rows = []
    for step in steps:
        loaded = source.load(step)
        with torch.inference_mode():
            patterns = cache_patterns(loaded.model, tokens).cpu()  # [layer, batch, head, q, k]
        for layer, pattern in enumerate(patterns):
            prev = previous_token_score(pattern).numpy()
            prefix = prefix_matching_score(pattern, period).numpy()
            rows_p = pattern[:, :, 1:, :]  # queries i >= 1
            entropy = -(rows_p * torch.log(rows_p.clamp_min(1e-30))).sum(-1).mean(dim=(0, 2)).numpy()
            ideal = ideals["previous_token" if layer == 0 else "induction"][:, None, 1:, :]
            dist = (0.5 * (rows_p - ideal).abs().sum(-1)).mean(dim=(0, 2)).numpy()
            for head in range(pattern.shape[1]):
                rows.append(
                    (
                        run,
                        int(step),
                        layer,
                        head,
                        float(prev[head]),
                        float(prefix[head]),
                        float(entropy[head]),
                        float(dist[head]),
                        loss.get(int(step), math.nan),
                    )
                )
    return pd.DataFrame(rows, columns=FEATURE_COLUMNS)


def run_head_features(folder: str | Path, n_prompts: int = 16, period: int = 20) -> pd.DataFrame:
    """:func:`head_features` of a trained local run folder (a suite's run: ``suite.json``,
    ``step*/``, ``loss.csv``), ``run`` = the folder's name.

    Raises:
        ValueError: a folder that is not a finished run (no ``suite.json``).
    """
    from interp.sources import LocalSuiteSource

    folder = Path(folder)
    if not (folder / "suite.json").is_file():
        raise ValueError(f"{folder} is not a finished run (no suite.json)")
    losses = pd.read_csv(folder / "loss.csv") if (folder / "loss.csv").is_file() else None
    source = LocalSuiteSource(folder)
    try:
        table = head_features(source, n_prompts=n_prompts, period=period, losses=losses)
    finally:
        source.close()
    return table.assign(run=folder.name)


def summarise_heads(table: pd.DataFrame) -> pd.DataFrame:
    """Per (run, step): the best head of each feature, the quantities that do not depend on the
    head count: ``prev_max`` (max previous-token score over layer-0 heads), ``ind_max`` (max
    prefix-matching score over heads of layers >= 1), ``entropy_min`` (min over all heads, nats),
    ``dist_min`` (min distance to the ideal pattern over all heads) and ``loss``."""
    if table.empty:
        return pd.DataFrame(columns=["run", "step", "prev_max", "ind_max", "entropy_min", "dist_min", "loss"])
    l0, l1 = table[table["layer"] == 0], table[table["layer"] >= 1]
    keys = ["run", "step"]
    out = table.groupby(keys, sort=True).agg(
        entropy_min=("entropy", "min"), dist_min=("dist_ideal", "min"), loss=("loss", "first")
    )
    out["prev_max"] = l0.groupby(keys)["previous_token"].max()
    out["ind_max"] = l1.groupby(keys)["prefix_matching"].max() if len(l1) else np.nan
    return out.reset_index()[["run", "step", "prev_max", "ind_max", "entropy_min", "dist_min", "loss"]]
