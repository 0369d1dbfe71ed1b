"""(e) Heads vs head dim at S = 16: H = 1 does not learn; H ≥ 16 reaches the floor.

Paper (Baherwani et al. 2026, arXiv 2606.25010, linear-map figures): final loss at S = 16 (floor 0.336): H = 1 never learns;
H ≥ 16 reaches the floor with d_head 8 or 16, H ≥ 32 with d_head 4 [figure]. The sparsity of
that sweep is not stated; we use s = 2 (which the paper's S = 16 models learn).

Checks (ours): "does not learn" = final loss ≥ ln 2 − 5 % of the gap to the floor (every seed);
"reaches the floor" = final loss ≤ threshold (floor + 5 % of the gap; every seed).

Usage: ``python -m analyses.heads_vs_dhead [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from synthetic.harness import LN2, Execution, finished, reproduce, run_configs

NAME = "heads_vs_dhead"
MARGIN = 0.05


def settings(paper_scale: bool = False) -> dict:
    """CPU: S = 16, s = 2; (H, d_head) ∈ {(1, 8), (1, 32), (4, 8), (16, 8)}; 1 layer, lr 3e-3,
    512 tokens/step, 3000 steps, 3 seeds. Paper scale (where it decides the claim, issue 27):
    H ∈ {1, 4, 16, 64} × d_head 8 and H = 128 × d_head 1, 2048 tokens/step, 10⁴ steps, lr 1e-3,
    3 seeds (15 runs)."""
    base = {"S": 16, "s": 2, "lr": 3e-3, "seeds": [0, 1, 2]}
    if paper_scale:
        pairs = [(1, 8), (4, 8), (16, 8), (64, 8), (128, 1)]
        return {
            **base,
            "lr": 1e-3,
            "pairs": pairs,
            "steps": 10_000,
            "tokens_per_step": 2048,
            "eval_every": 100,
            "eval_tokens": 8192,
        }
    return {
        **base,
        "pairs": [(1, 8), (1, 32), (4, 8), (16, 8)],
        "steps": 3000,
        "tokens_per_step": 512,
        "eval_every": 100,
        "eval_tokens": 2048,
    }


def configs(cfg: dict) -> list[dict]:
    """One TrainConfig field dict per (H, d_head, seed)."""
    return [
        {
            "task": "linear-map",
            "S": cfg["S"],
            "s": cfg["s"],
            "n_heads": h,
            "d_head": d,
            "seed": seed,
            "steps": cfg["steps"],
            "tokens_per_step": cfg["tokens_per_step"],
            "lr": cfg["lr"],
            "eval_every": cfg["eval_every"],
            "eval_tokens": cfg["eval_tokens"],
        }
        for h, d in cfg["pairs"]
        for seed in cfg["seeds"]
    ]


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, pd.DataFrame, go.Figure]:
    """Train the grid; return (per-run table, per-(H, d_head) table, figure)."""
    cfgs = configs(cfg)
    cfgs, results = finished(cfgs, run_configs(cfgs, execution))
    runs = pd.DataFrame(
        [
            {
                "n_heads": c["n_heads"],
                "d_head": c["d_head"],
                "seed": c["seed"],
                "steps": c["steps"],
                "final_loss": summ["final_loss"],
                "floor": summ["floor"],
                "reached_floor": summ["final_loss"] <= summ["threshold"],
                "at_ln2": summ["final_loss"] >= LN2 - MARGIN * (LN2 - summ["floor"]),
                "steps_to_threshold": summ["steps_to_threshold"],
                "n_params": summ["n_params"],
                "wall_time_s": summ["wall_time_s"],
            }
            for c, (summ, _) in zip(cfgs, results)
        ]
    )
    agg = (
        runs.groupby(["n_heads", "d_head"])
        .agg(
            final_loss_mean=("final_loss", "mean"),
            final_loss_min=("final_loss", "min"),
            final_loss_max=("final_loss", "max"),
            floor=("floor", "first"),
            reached_all=("reached_floor", "all"),
            at_ln2_all=("at_ln2", "all"),
        )
        .reset_index()
    )
    fig = go.Figure()
    for d, sub in agg.groupby("d_head"):
        fig.add_trace(
            go.Scatter(
                x=sub["n_heads"],
                y=sub["final_loss_mean"],
                mode="lines+markers",
                name=f"d_head={d}",
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": sub["final_loss_max"] - sub["final_loss_mean"],
                    "arrayminus": sub["final_loss_mean"] - sub["final_loss_min"],
                },
            )
        )
    fig.add_hline(y=float(agg["floor"].iloc[0]), line_dash="dot", annotation_text="floor")
    fig.add_hline(y=LN2, line_dash="dot", annotation_text="ln 2")
    fig.update_layout(
        title=f"Linear map S={cfg['S']}, s={cfg['s']}: final loss vs number of heads",
        xaxis_type="log",
        xaxis_title="heads H",
        yaxis_title="final loss (nats)",
    )
    return runs, agg, fig


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, agg, fig) = reproduce(NAME, __doc__, argv, settings, run)
    h1 = agg[agg.n_heads == 1]
    big = agg[agg.n_heads >= 16]
    print(
        f"H=1 does not learn (stays at ln 2, every seed): {bool(h1.at_ln2_all.all())} "
        f"(final {h1.final_loss_mean.round(4).tolist()})"
    )
    print(
        f"H>=16 reaches the floor (every seed): {bool(big.reached_all.all())} "
        f"(final {big.final_loss_mean.round(4).tolist()} vs floor {agg.floor.iloc[0]:.4f})"
    )
    return runs


if __name__ == "__main__":
    main()
