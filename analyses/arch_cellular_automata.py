"""(3b) Cellular automata: transformer vs MLP-Mixer, Mamba-2, Gated DeltaNet and RWKV.

Paper (Baherwani et al. 2026): the MLP-Mixer "loses on cellular automata"; "Mamba, Gated DeltaNet
and RWKV mostly lose to transformers" [stated; no numbers reachable].

Ours: every architecture at the transformer's trainable-parameter count (width ``d_model``
found by :func:`synthetic.models.budget.match_parameter_budget`; Mamba-2 blocks have no MLP,
the others keep the transformer's MLP width), the same data, optimiser and step budget. Per
run: ``late_loss`` (mean loss over the last 4 evaluations, nats/token; less noisy than the last
one), plateau length and steps to the default threshold (95 % of the way to the floor; a run
that never gets there counts as the budget, ``censored``). "A beats B" = A's mean late loss
over seeds is lower; we also count the seeds where it is lower (paired by seed: same
evaluation data, same training batches).

Usage: ``python -m analyses.arch_cellular_automata [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go

from synthetic.harness import LATE_EVALS, Execution, finished, reproduce, run_configs

NAME = "arch_cellular_automata"
ARCHS = ("transformer", "mlp-mixer", "mamba2", "gated-deltanet", "rwkv")
PAPER_VERDICT = {
    "mlp-mixer": "loses to the transformer [stated]",
    "mamba2": "mostly loses [stated]",
    "gated-deltanet": "mostly loses [stated]",
    "rwkv": "mostly loses [stated]",
    "transformer": "reference",
}


def settings(paper_scale: bool = False) -> dict:
    """CPU: S = 4, T = 3, k = 4, a pool of 4 rules (with 16 rules a 2-layer transformer stays
    at ln 4 for 2 000 steps here, analyses/ca_plateau.py), 1 layer, transformer 8 heads ×
    d_head 8 + GELU MLP 256 (51 648 parameters), lr 3e-3, 512 tokens/step, 300 steps (Mamba-2,
    Gated DeltaNet and RWKV run their pure-torch paths on CPU, 0.1–0.5 s/step), 3 seeds.
    Paper scale: S = 16, 16 rules, 2 layers, 16 heads × 8, MLP 256, 2 048 tokens/step, 10⁴ steps."""
    if paper_scale:
        return {
            "S": 16,
            "T": 3,
            "k": 4,
            "n_rules": 16,
            "n_layers": 2,
            "n_heads": 16,
            "d_head": 8,
            "d_mlp": 256,
            "lr": 1e-3,
            "tokens_per_step": 2048,
            "steps": 10_000,
            "eval_every": 50,
            "eval_tokens": 8192,
            "seeds": [0, 1, 2],
            "archs": list(ARCHS),
        }
    return {
        "S": 4,
        "T": 3,
        "k": 4,
        "n_rules": 4,
        "n_layers": 1,
        "n_heads": 8,
        "d_head": 8,
        "d_mlp": 256,
        "lr": 3e-3,
        "tokens_per_step": 512,
        "steps": 300,
        "eval_every": 25,
        "eval_tokens": 2048,
        "seeds": [0, 1, 2],
        "archs": list(ARCHS),
    }


def matched_widths(cfg: dict) -> dict[str, dict]:
    """``{arch: {"d_model", "d_mlp", "n_params"}}`` at the transformer's parameter count.

    Raises:
        ValueError: an architecture cannot reach the count within 10 %.
    """
    from synthetic.models import ModelConfig
    from synthetic.models.budget import match_parameter_budget, parameter_count

    base = ModelConfig(
        d_vocab=cfg["k"],
        n_ctx=(cfg["T"] + 1) * cfg["S"],
        n_layers=cfg["n_layers"],
        n_heads=cfg["n_heads"],
        d_head=cfg["d_head"],
        d_mlp=cfg["d_mlp"],
    )
    target = parameter_count(base)
    widths = {"transformer": {"d_model": None, "d_mlp": cfg["d_mlp"], "n_params": target}}
    for arch in cfg["archs"]:
        if arch == "transformer":
            continue
        d_mlp = None if arch == "mamba2" else cfg["d_mlp"]  # a Mamba-2 block has no MLP
        m = match_parameter_budget(arch, target, ModelConfig(**{**base.__dict__, "d_mlp": d_mlp}))
        widths[arch] = {"d_model": m.d_model, "d_mlp": d_mlp, "n_params": parameter_count(m)}
    return widths


def configs(cfg: dict, widths: dict[str, dict]) -> list[dict]:
    """One TrainConfig field dict per (arch, seed)."""
    shared = {
        k: cfg[k]
        for k in (
            "S",
            "T",
            "k",
            "n_rules",
            "n_layers",
            "n_heads",
            "d_head",
            "lr",
            "tokens_per_step",
            "steps",
            "eval_every",
            "eval_tokens",
        )
    }
    return [
        {
            **shared,
            "task": "cellular-automata",
            "arch": arch,
            "seed": seed,
            "d_model": widths[arch]["d_model"],
            "d_mlp": widths[arch]["d_mlp"],
        }
        for arch in cfg["archs"]
        for seed in cfg["seeds"]
    ]


def run_table(cfgs: list[dict], results: list) -> pd.DataFrame:
    """One row per run: arch, seed, n_params, d_model, late_loss, final_loss, plateau_length,
    steps_to_threshold (budget if censored), censored, floor, wall_time_s."""
    rows = []
    for c, (summary, metrics) in zip(cfgs, results):
        reached, plateau = summary["steps_to_threshold"], summary["plateau_length"]
        rows.append(
            {
                "arch": c["arch"],
                "seed": c["seed"],
                "n_params": summary["n_params"],
                "d_model": c["d_model"],
                "d_mlp": c["d_mlp"],
                "steps": c["steps"],
                "late_loss": float(metrics["loss"].tail(LATE_EVALS).mean()),
                "final_loss": summary["final_loss"],
                "plateau_length": plateau if plateau is not None else c["steps"],
                "plateau_censored": plateau is None,
                "steps_to_threshold": reached if reached is not None else c["steps"],
                "censored": reached is None,
                "floor": summary["floor"],
                "wall_time_s": summary["wall_time_s"],
            }
        )
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per arch: parameters, mean/min/max late loss, mean plateau, seeds where the transformer's
    late loss is lower (paired by seed), the paper's verdict."""
    agg = (
        runs.groupby("arch", sort=False)
        .agg(
            n_params=("n_params", "first"),
            d_model=("d_model", "first"),
            late_loss=("late_loss", "mean"),
            late_loss_min=("late_loss", "min"),
            late_loss_max=("late_loss", "max"),
            plateau_mean=("plateau_length", "mean"),
            plateau_censored=("plateau_censored", "sum"),
            steps_to_threshold=("steps_to_threshold", "mean"),
            censored=("censored", "sum"),
            floor=("floor", "first"),
            wall_time_s=("wall_time_s", "mean"),
        )
        .reset_index()
    )
    ref = runs[runs.arch == "transformer"].set_index("seed")["late_loss"]
    agg["seeds_transformer_lower"] = [
        int((ref < runs[runs.arch == a].set_index("seed")["late_loss"].reindex(ref.index)).sum()) for a in agg.arch
    ]
    agg["transformer_wins"] = agg["late_loss"] > float(ref.mean())
    agg["paper"] = agg.arch.map(PAPER_VERDICT)
    return agg


def figure(cfgs: list[dict], results: list, floor: float) -> go.Figure:
    """Mean loss curve per arch over seeds; the floor dashed."""
    fig = go.Figure()
    for arch in dict.fromkeys(c["arch"] for c in cfgs):
        curves = [m.set_index("step")["loss"] for c, (_, m) in zip(cfgs, results) if c["arch"] == arch]
        mean = pd.concat(curves, axis=1).mean(axis=1)
        fig.add_trace(go.Scatter(x=mean.index, y=mean.values, name=arch))
    fig.add_hline(y=floor, line_dash="dash", line_color="grey", annotation_text="floor")
    fig.update_layout(
        title=f"Cellular automata S = {cfgs[0]['S']}, {cfgs[0]['n_rules']} rules: mean loss "
        "over seeds, equal parameter budget",
        xaxis_title="step",
        yaxis_title="loss (nats/token)",
    )
    return fig


def headline(agg: pd.DataFrame) -> list[str]:
    """One line per non-transformer architecture: beaten by the transformer or not."""
    t = agg[agg.arch == "transformer"].iloc[0]
    n_seeds_lines = []
    for _, r in agg[agg.arch != "transformer"].iterrows():
        n_seeds_lines.append(
            f"transformer {t.late_loss:.3f} vs {r.arch} {r.late_loss:.3f} (late loss, nats): transformer "
            f"{'wins' if r.transformer_wins else 'loses'}, lower on {r.seeds_transformer_lower} seeds "
            f"(paper: {r.arch} {r.paper})"
        )
    trail = agg[agg.arch.isin(["mamba2", "gated-deltanet", "rwkv"])]
    n_seeds_lines.append(
        f"Mamba-2/Gated DeltaNet/RWKV trail the transformer: {int(trail.transformer_wins.sum())}/"
        f"{len(trail)} (paper: 'mostly')"
    )
    return n_seeds_lines


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, pd.DataFrame, go.Figure]:
    """Train every (arch, seed); return (per-run table, per-arch table, figure)."""
    widths = matched_widths(cfg)
    cfgs = configs(cfg, widths)
    # Slow architectures first so the two workers finish together.
    order = sorted(range(len(cfgs)), key=lambda i: cfgs[i]["arch"] in ("transformer", "mlp-mixer"))
    done = run_configs([cfgs[i] for i in order], execution)
    results = [None] * len(cfgs)
    for i, r in zip(order, done):
        results[i] = r
    cfgs, results = finished(cfgs, results)
    runs = run_table(cfgs, results)
    agg = summarise(runs)
    return runs, agg, figure(cfgs, results, float(runs.floor.iloc[0]))


def written(outputs: tuple) -> pd.DataFrame:
    """The per-run table with each arch's mean late loss and the paper's claim beside it."""
    runs, agg, _ = outputs
    late = agg[["arch", "late_loss", "seeds_transformer_lower", "paper"]].rename(
        columns={"late_loss": "late_loss_mean"}
    )
    return runs.merge(late, on="arch")


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, agg, fig) = reproduce(
        NAME, __doc__, argv, settings, run, table=written, shown=lambda o: o[1].drop(columns=["paper"])
    )
    for line in headline(agg):
        print(line)
    return runs


if __name__ == "__main__":
    main()
