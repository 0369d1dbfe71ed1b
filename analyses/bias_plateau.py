"""(c) The attention bias removes the plateau: plateau with β > 0 ≤ 1/5 of the plateau without.

Paper (Baherwani et al. 2026, arXiv 2606.25010, abstract): biasing the attention logits toward the true
pattern removes the loss plateau [stated]; on cellular automata the biased plateau is ≈160–200
steps for every S ≥ 8 against up to 1400 at S = 64 [figure]. Scale and schedule are unknown:
we add β·mask to every head for the whole run (the training default).

Setting (ours): the linear map at S = 16, s = 3, where the plain 1-layer model sits at ln 2
for a long time. Plateau length is :func:`synthetic.metrics.plateau_length` (first
evaluation that has covered 5 % of the way from ln 2 to the floor); a run that never leaves
counts as its step budget (a lower bound, ``censored``), so the ratio is then an upper bound.

Usage: ``python -m analyses.bias_plateau [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from synthetic.harness import Execution, finished, reproduce, run_configs

NAME = "bias_plateau"
RATIO_LIMIT = 0.2  # the goal: "at most 1/5"


def settings(paper_scale: bool = False) -> dict:
    """CPU: linear map S = 16, s = 3 (the paper's staircase setting), 1 layer × 16 heads ×
    d_head 8, lr 1e-3, 512 tokens/step, plain runs 3000 steps, biased runs (β = 3 on every head,
    whole run) 1000 steps, 3 seeds. Paper scale: 2048 tokens/step, 10⁴ steps for both."""
    base = {
        "task": "linear-map",
        "S": 16,
        "s": 3,
        "n_heads": 16,
        "d_head": 8,
        "n_layers": 1,
        "lr": 1e-3,
        "beta": 3.0,
        "seeds": [0, 1, 2],
    }
    if paper_scale:
        return {
            **base,
            "steps": 10_000,
            "bias_steps": 10_000,
            "tokens_per_step": 2048,
            "eval_every": 50,
            "eval_tokens": 8192,
        }
    return {**base, "steps": 3000, "bias_steps": 1000, "tokens_per_step": 512, "eval_every": 50, "eval_tokens": 2048}


def configs(cfg: dict) -> list[dict]:
    """One TrainConfig field dict per (β, seed)."""
    keys = ("task", "S", "s", "n_layers", "n_heads", "d_head", "lr", "tokens_per_step", "eval_every", "eval_tokens")
    return [
        {
            **{k: cfg[k] for k in keys},
            "seed": seed,
            "bias": beta,
            "steps": cfg["steps"] if beta == 0 else cfg["bias_steps"],
        }
        for beta in (0.0, cfg["beta"])
        for seed in cfg["seeds"]
    ]


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, dict, go.Figure]:
    """Train plain and biased runs; return (per-run table, headline dict, figure).

    Headline: ``plain_mean`` and ``bias_mean`` (plateau, steps), ``plain_censored`` (runs that
    never left), ``ratio`` = bias_mean / plain_mean, ``passes`` = ratio ≤ 1/5 and the plain
    model has a plateau at least 5 evaluations long.
    """
    cfgs = configs(cfg)
    cfgs, results = finished(cfgs, run_configs(cfgs, execution))
    rows = []
    for c, (summary, _) in zip(cfgs, results):
        p = summary["plateau_length"]
        rows.append(
            {
                "S": c["S"],
                "s": c["s"],
                "bias": c["bias"],
                "seed": c["seed"],
                "steps": c["steps"],
                "plateau_length": p if p is not None else c["steps"],
                "censored": p is None,
                "steps_to_threshold": summary["steps_to_threshold"],
                "final_loss": summary["final_loss"],
                "floor": summary["floor"],
                "final_max_alignment": summary["final_max_alignment"],
                "wall_time_s": summary["wall_time_s"],
            }
        )
    runs = pd.DataFrame(rows)
    plain, biased = runs[runs.bias == 0], runs[runs.bias != 0]
    head = {
        "plain_mean": float(plain.plateau_length.mean()),
        "bias_mean": float(biased.plateau_length.mean()),
        "plain_censored": int(plain.censored.sum()),
        "bias_censored": int(biased.censored.sum()),
    }
    head["ratio"] = head["bias_mean"] / head["plain_mean"]
    head["plain_has_plateau"] = head["plain_mean"] >= 5 * cfg["eval_every"]
    head["passes"] = bool(head["ratio"] <= RATIO_LIMIT and head["plain_has_plateau"])

    fig = go.Figure()
    for c, (_, metrics) in zip(cfgs, results):
        label = f"β={c['bias']:g} seed {c['seed']}"
        fig.add_trace(
            go.Scatter(
                x=metrics["step"],
                y=metrics["loss"],
                mode="lines",
                name=label,
                line={"dash": "solid" if c["bias"] == 0 else "dot"},
            )
        )
        if "loss_nobias" in metrics:
            fig.add_trace(
                go.Scatter(
                    x=metrics["step"],
                    y=metrics["loss_nobias"],
                    mode="lines",
                    name=label + " (evaluated without bias)",
                    visible="legendonly",
                )
            )
    fig.update_layout(
        title=f"Linear map S={cfg['S']}, s={cfg['s']}: loss with and without the attention bias",
        xaxis_title="step",
        yaxis_title="loss (nats)",
    )
    return runs, head, fig


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, head, fig) = reproduce(NAME, __doc__, argv, settings, run, shown=lambda o: o[0])
    print(
        f"plateau without bias: {head['plain_mean']:.0f} steps ({head['plain_censored']} never left); "
        f"with bias: {head['bias_mean']:.0f} steps ({head['bias_censored']} never left)"
    )
    print(f"ratio bias/plain = {head['ratio']:.3f} (≤ 0.2 required): {head['passes']}")
    return runs


if __name__ == "__main__":
    main()
