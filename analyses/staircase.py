"""(d) Staircase: per-position losses drop one at a time, each with an entropy drop in an aligned head.

Paper (Baherwani et al. 2026, arXiv 2606.25010, linear-map figures): a 1-layer transformer on S = 16, s = 3; the 16 per-position
losses drop to ~0 one at a time between ≈500 and ≈4600 steps, and each drop coincides with an
attention-entropy drop in the heads that learn that row of A [figure].

Measurement (ours): for each output bit ``i`` whose loss drops (first evaluated step with
``loss_out_i ≤ ln 2 / 2``), the head most aligned with row ``i`` of A in the trained model
(attention mass on row ``i``'s true keys at the queries that predict bit ``i``), and the step of
that head's largest drop in entropy *at the queries that predict bit i* (``row_entropy``: the
all-query mean blurs a head that learns one row) between two evaluations. Lag = loss-drop step −
entropy-drop step.

Usage: ``python -m analyses.staircase [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from synthetic.harness import LN2, Execution, finished, reproduce, run_configs

NAME = "staircase"


def settings(paper_scale: bool = False) -> dict:
    """CPU: S = 8, s = 3 (S = 16, s = 3 stayed at ln 2 for 3000 steps here), 1 layer × 16 heads
    × d_head 8, lr 1e-3, 1024 tokens/step, 1200 steps, 3 seeds; paper scale: S = 16, s = 3,
    10⁴ steps, 2048 tokens/step (the training defaults)."""
    if paper_scale:
        return {
            "S": 16,
            "s": 3,
            "seeds": [0, 1, 2],
            "steps": 10_000,
            "tokens_per_step": 2048,
            "lr": 1e-3,
            "eval_every": 50,
            "eval_tokens": 8192,
            "n_heads": 16,
            "d_head": 8,
        }
    return {
        "S": 8,
        "s": 3,
        "seeds": [0, 1, 2],
        "steps": 1200,
        "tokens_per_step": 1024,
        "lr": 1e-3,
        "eval_every": 20,
        "eval_tokens": 2048,
        "n_heads": 16,
        "d_head": 8,
    }


def row_alignment(model: Any, task: Any, n_seqs: int = 256) -> np.ndarray:
    """Attention mass of each head on row ``i``'s true keys at the queries predicting bit ``i``.

    Returns a ``[n_heads, S]`` array (probability), layer 0, from ``blocks.0.attn.hook_pattern``
    on ``n_seqs`` fresh sequences.
    """
    import torch

    device = next(model.parameters()).device
    tokens = task.sample(n_seqs, torch.Generator(device="cpu").manual_seed(12345)).to(device)
    name = "blocks.0.attn.hook_pattern"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n == name)
    pattern = cache[name]  # [batch, head, q, k]
    mass = (pattern * task.pattern_mask.to(device)).sum(-1).mean(0)  # [head, q]
    out = np.zeros((pattern.shape[1], task.S))
    index = task.output_index
    for i in range(task.S):
        out[:, i] = mass[:, (index == i).to(device)].mean(-1).cpu().numpy()
    return out


class AlignmentRunner:
    """Sweep runner: one training run plus each head's alignment with each row of A in the
    trained model (``summary["row_alignment"]``, ``[n_heads][S]``, see :func:`row_alignment`)."""

    def resolve(self, config: dict[str, Any]) -> dict[str, Any]:
        from synthetic.sweeps import train_runner

        return train_runner.resolve(config)

    def __call__(self, config: dict[str, Any]) -> tuple[dict, pd.DataFrame]:
        from synthetic.training import TrainConfig, train

        result = train(TrainConfig(**config), out_dir=None, progress=False)
        summary = {k: v for k, v in result.summary.items() if k != "config"}
        summary["row_alignment"] = row_alignment(result.model, result.task).tolist()
        return summary, result.metrics


runner = AlignmentRunner()
RUNNER = "analyses.staircase:runner"


def drop_step(steps: np.ndarray, values: np.ndarray, below: float) -> int | None:
    """First step with ``value ≤ below`` (None if never)."""
    hit = np.flatnonzero(values <= below)
    return int(steps[hit[0]]) if hit.size else None


def analyse_run(metrics: pd.DataFrame, align: np.ndarray, S: int) -> pd.DataFrame:
    """One row per output bit: loss-drop step, best-aligned head, its entropy-drop step, lag."""
    steps = metrics["step"].to_numpy()
    rows = []
    for i in range(S):
        loss_drop = drop_step(steps, metrics[f"loss_out_{i}"].to_numpy(), LN2 / 2)
        head = int(np.argmax(align[:, i]))
        # the head's entropy at the queries predicting bit i (falls back to its all-query mean)
        column = f"entropy_L0H{head}_out{i}"
        ent = metrics[column if column in metrics else f"entropy_L0H{head}"].to_numpy()
        # the entropy drop counts from the second evaluation: step 0 → first eval is initialisation noise
        diffs = np.diff(ent)
        ent_drop = int(steps[1 + int(np.argmin(diffs))]) if diffs.size else None
        rows.append(
            {
                "output": i,
                "loss_drop_step": loss_drop,
                "head": head,
                "head_row_alignment": float(align[head, i]),
                "entropy_drop_step": ent_drop,
                "entropy_drop_nats": float(-diffs.min()) if diffs.size else None,
                "lag_steps": (loss_drop - ent_drop) if loss_drop is not None else None,
            }
        )
    return pd.DataFrame(rows)


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, list, go.Figure]:
    """Train the seeds; return (per-output table over seeds, raw results, figure)."""
    fields = [
        {
            "task": "linear-map",
            "S": cfg["S"],
            "s": cfg["s"],
            "seed": seed,
            "steps": cfg["steps"],
            "tokens_per_step": cfg["tokens_per_step"],
            "lr": cfg["lr"],
            "eval_every": cfg["eval_every"],
            "eval_tokens": cfg["eval_tokens"],
            "n_heads": cfg["n_heads"],
            "d_head": cfg["d_head"],
            "row_entropy": True,
        }
        for seed in cfg["seeds"]
    ]
    fields, done = finished(fields, run_configs(fields, execution, runner=RUNNER))
    results = [(summary, metrics, np.asarray(summary["row_alignment"])) for summary, metrics in done]
    tables = []
    for f, (summary, metrics, align) in zip(fields, results):
        t = analyse_run(metrics, align, cfg["S"])
        t.insert(0, "seed", f["seed"])
        t["final_loss"] = summary["final_loss"]
        tables.append(t)
    table = pd.concat(tables, ignore_index=True)

    summary0, metrics0, align0 = results[0]
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        subplot_titles=(
            f"seed {fields[0]['seed']}: per-position loss (nats)",
            "entropy of each bit's best-aligned head at that bit's queries (nats)",
        ),
    )
    t0 = table[table.seed == fields[0]["seed"]]
    for i in range(cfg["S"]):
        fig.add_trace(
            go.Scatter(
                x=metrics0["step"], y=metrics0[f"loss_out_{i}"], mode="lines", name=f"bit {i}", legendgroup=f"b{i}"
            ),
            row=1,
            col=1,
        )
    for i, head in zip(t0["output"], t0["head"]):
        fig.add_trace(
            go.Scatter(
                x=metrics0["step"],
                y=metrics0[f"entropy_L0H{head}_out{i}"],
                mode="lines",
                name=f"bit {i}: head {head}",
                legendgroup=f"b{i}",
                line={"dash": "dot"},
            ),
            row=2,
            col=1,
        )
    fig.update_layout(title=f"Staircase, linear map S={cfg['S']}, s={cfg['s']}, 1 layer", xaxis2_title="step")
    return table, results, fig


def describe(table: pd.DataFrame, eval_every: int) -> dict:
    """Headline numbers: bits that dropped, distinct drop steps, |lag| median, share within 2 evals."""
    dropped = table.dropna(subset=["loss_drop_step"])
    per_seed = dropped.groupby("seed")["loss_drop_step"]
    lag = dropped["lag_steps"].abs()
    return {
        "bits_dropped": len(dropped),
        "bits_total": len(table),
        "distinct_drop_steps_per_seed": per_seed.nunique().to_dict(),
        "first_drop": per_seed.min().to_dict(),
        "last_drop": per_seed.max().to_dict(),
        "median_abs_lag": float(lag.median()) if len(lag) else None,
        "share_lag_within_2_evals": float((lag <= 2 * eval_every).mean()) if len(lag) else None,
    }


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (table, _, fig) = reproduce(NAME, __doc__, argv, settings, run, shown=lambda o: o[0])
    d = describe(table, cfg["eval_every"])
    print(
        f"bits whose loss dropped: {d['bits_dropped']}/{d['bits_total']}; distinct drop steps per seed "
        f"{d['distinct_drop_steps_per_seed']}; first {d['first_drop']}, last {d['last_drop']} "
        f"(paper: 16 bits one at a time, ≈500 → ≈4600 steps)"
    )
    print(
        f"lag loss drop − entropy drop of best-aligned head: median |lag| {d['median_abs_lag']} steps; "
        f"share within 2 evaluations ({2 * cfg['eval_every']} steps): {d['share_lag_within_2_evals']}"
    )
    return table


if __name__ == "__main__":
    main()
