"""(f) Cellular automata: the loss plateau grows with S; with the attention bias it stays flat.

Paper (Baherwani et al. 2026, arXiv 2606.25010, cellular-automata plateau figure): plateau length S = 8 ≈380, 16 ≈400, 32 ≈650,
64 ≈1400 steps (standard); with the attention bias ≈160–200 for every S ≥ 8 [figure]. The
paper's plateau definition is unknown; ours is :func:`synthetic.metrics.plateau_length` (first
evaluated step whose loss has covered 5 % of the way from ln 4 to the floor).

Checks (ours): "grows" = the mean plateau increases with S at every step of the S ladder and
plateau(S_max) / plateau(S_min) ≥ 2; "flat" = with the bias, max/min of the mean plateau over S
≤ 2 (paper: 200/160 = 1.25). A run that never leaves the plateau counts as its step budget
(a lower bound), marked ``censored``.

Usage: ``python -m analyses.ca_plateau [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from synthetic.harness import Execution, finished, reproduce, run_configs

NAME = "ca_plateau"
PAPER_PLATEAU = {4: 60, 8: 380, 16: 400, 32: 650, 64: 1400, 128: 3300, 256: 8700}  # [figure]
PAPER_BIAS_PLATEAU = "160–200 for every S ≥ 8"  # [figure]


def settings(paper_scale: bool = False) -> dict:
    """CPU: S = 8, 16, 32, 64; ONE rule (``n_rules = 1``) and one transition (``T = 1``): with the
    default 16-rule pool a 2-layer model stayed at ln 4 for 2000 steps here, too slow for this
    machine; 1 layer × 16 heads × d_head 8 with a GELU MLP of 256; lr 3e-3; 512 tokens/step;
    plain runs 400 / 600 / 900 / 1200 steps, biased runs (β = 3 on every head) 500 steps;
    3 seeds. Paper scale: the 16-rule pool, T = 3, 2 layers, S up to 256, 2048 tokens/step,
    10⁴ steps."""
    if paper_scale:
        S = [8, 16, 32, 64, 128, 256]
        return {
            "task": "cellular-automata",
            "n_rules": 16,
            "T": 3,
            "n_layers": 2,
            "n_heads": 16,
            "d_head": 8,
            "d_mlp": 256,
            "lr": 1e-3,
            "seeds": [0, 1, 2],
            "beta": 3.0,
            "S": S,
            "steps": dict.fromkeys(S, 10000),
            "bias_steps": 10_000,
            "tokens_per_step": 2048,
            "eval_every": 25,
            "eval_tokens": 8192,
        }
    return {
        "task": "cellular-automata",
        "n_rules": 1,
        "T": 1,
        "n_layers": 1,
        "n_heads": 16,
        "d_head": 8,
        "d_mlp": 256,
        "lr": 3e-3,
        "seeds": [0, 1, 2],
        "beta": 3.0,
        "S": [8, 16, 32, 64],
        "steps": {8: 400, 16: 600, 32: 900, 64: 1200},
        "bias_steps": 500,
        "tokens_per_step": 512,
        "eval_every": 25,
        "eval_tokens": 2048,
    }


def configs(cfg: dict) -> list[dict]:
    """One TrainConfig field dict per (S, bias on/off, seed)."""
    keys = (
        "task",
        "n_rules",
        "T",
        "n_layers",
        "n_heads",
        "d_head",
        "d_mlp",
        "lr",
        "tokens_per_step",
        "eval_every",
        "eval_tokens",
    )
    return [
        {
            **{k: cfg[k] for k in keys},
            "S": S,
            "seed": seed,
            "bias": beta,
            "steps": cfg["steps"][S] if beta == 0 else cfg["bias_steps"],
        }
        for S in cfg["S"]
        for beta in (0.0, cfg["beta"])
        for seed in cfg["seeds"]
    ]


def plateau_table(cfgs: list[dict], results: list) -> pd.DataFrame:
    """One row per run: S, bias, seed, plateau_length (steps; budget if censored), censored,
    final_loss, floor, wall_time_s."""
    rows = []
    for c, (summary, _) in zip(cfgs, results):
        plateau = summary["plateau_length"]
        rows.append(
            {
                "S": c["S"],
                "bias": c["bias"],
                "seed": c["seed"],
                "steps": c["steps"],
                "plateau_length": plateau if plateau is not None else c["steps"],
                "censored": plateau is None,
                "final_loss": summary["final_loss"],
                "floor": summary["floor"],
                "wall_time_s": summary["wall_time_s"],
            }
        )
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean plateau per (S, bias), with the paper's standard-model number beside it."""
    agg = (
        runs.groupby(["S", "bias"])
        .agg(
            plateau_mean=("plateau_length", "mean"),
            plateau_min=("plateau_length", "min"),
            plateau_max=("plateau_length", "max"),
            censored=("censored", "sum"),
            final_loss=("final_loss", "mean"),
            floor=("floor", "first"),
        )
        .reset_index()
    )
    agg["paper_plateau"] = [
        PAPER_PLATEAU.get(S) if b == 0 else PAPER_BIAS_PLATEAU for S, b in zip(agg["S"], agg["bias"])
    ]
    return agg


def checks(agg: pd.DataFrame) -> dict:
    """ "grows" (plain) and "flat" (bias) as defined in the module docstring."""
    plain = agg[agg.bias == 0].sort_values("S")["plateau_mean"].to_numpy()
    biased = agg[agg.bias != 0].sort_values("S")["plateau_mean"].to_numpy()
    grows = bool((plain[1:] > plain[:-1]).all() and plain[-1] >= 2 * plain[0])
    flat_ratio = float(biased.max() / biased.min())
    return {
        "grows": grows,
        "growth_ratio": float(plain[-1] / plain[0]),
        "flat": flat_ratio <= 2.0,
        "bias_max_over_min": flat_ratio,
    }


def figure(agg: pd.DataFrame) -> go.Figure:
    fig = go.Figure()
    for b, name in ((0.0, "ours, standard"), (None, "ours, with bias")):
        sub = agg[agg.bias == 0] if b == 0.0 else agg[agg.bias != 0]
        fig.add_trace(
            go.Scatter(
                x=sub["S"],
                y=sub["plateau_mean"],
                mode="lines+markers",
                name=name,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": sub["plateau_max"] - sub["plateau_mean"],
                    "arrayminus": sub["plateau_mean"] - sub["plateau_min"],
                },
            )
        )
    fig.add_trace(
        go.Scatter(
            x=list(PAPER_PLATEAU),
            y=list(PAPER_PLATEAU.values()),
            mode="lines+markers",
            name="paper, standard [figure]",
            line={"dash": "dot"},
        )
    )
    fig.update_layout(
        title="Cellular automata: plateau length vs S",
        xaxis_type="log",
        xaxis_title="state size S",
        yaxis_title="plateau length (steps)",
    )
    return fig


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, pd.DataFrame, go.Figure]:
    """Train every (S, bias, seed); return (per-run table, per-(S, bias) table, figure)."""
    cfgs = configs(cfg)
    cfgs, results = finished(cfgs, run_configs(cfgs, execution))
    runs = plateau_table(cfgs, results)
    agg = summarise(runs)
    return runs, agg, figure(agg)


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, agg, fig) = reproduce(
        NAME,
        __doc__,
        argv,
        settings,
        run,
        table=lambda o: o[0].merge(o[1][["S", "bias", "plateau_mean", "paper_plateau"]], on=["S", "bias"]),
    )
    c = checks(agg)
    print(
        f"plateau grows with S (standard): {c['grows']} (S_max/S_min = {c['growth_ratio']:.2f}; paper 1400/380 = 3.7)"
    )
    print(f"plateau flat with bias: {c['flat']} (max/min over S = {c['bias_max_over_min']:.2f}; paper ≈1.25)")
    return runs


if __name__ == "__main__":
    main()
