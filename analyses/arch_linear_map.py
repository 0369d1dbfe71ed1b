"""(3a) Linear map: MLP-Mixer vs transformer at a matched parameter budget.

Paper (Baherwani et al. 2026, arXiv 2606.25010, MLP-Mixer vs transformer figure, S = 16): at S = 16, s = 3 the Mixer
reaches loss 0.40 at ≈900 steps vs ≈2500 for the transformer (≈2.8× sooner); at 10⁴ steps
s = 5: 0.395 vs 0.595, s = 7: 0.465 vs 0.59 [figure]. "Almost an order of magnitude in sample
efficiency" [stated].

Ours: both architectures at the same trainable-parameter count (the Mixer's ``d_model`` is
found by :func:`synthetic.models.budget.match_parameter_budget` against the transformer's
count), every other training setting shared. Per (s, architecture, seed): steps to the loss
threshold (``steps_to_threshold``; a run that never reaches it counts as the step budget, a
lower bound, marked ``censored``) and the final loss after the fixed budget.

Threshold: the paper's 0.40 at S = 16 lies 18.1 % of the way from the floor (0.3354) to ln 2;
at another S we use the same fraction of that S's gap (S = 8: 0.3903), so the two thresholds
mean the same progress.

Usage: ``python -m analyses.arch_linear_map [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from synthetic.harness import Execution, finished, reproduce, run_configs, scaled_threshold

NAME = "arch_linear_map"
PAPER_STEPS = {3: {"mlp-mixer": 900, "transformer": 2500}}  # steps to 0.40 at S = 16 [figure]
PAPER_FINAL = {
    5: {"mlp-mixer": 0.395, "transformer": 0.595},  # loss at 10⁴ steps [figure]
    7: {"mlp-mixer": 0.465, "transformer": 0.59},
}
ARCHS = ("transformer", "mlp-mixer")
TABLE_COLUMNS = ["s", "arch", "steps_mean", "final_loss", "paper_steps_to_0.40", "paper_final_loss"]


def settings(paper_scale: bool = False) -> dict:
    """CPU: S = 8 (the transformer does not leave ln 2 within 3 000 steps at S = 16 here),
    s ∈ {3, 5, 7}; transformer 1 layer × 8 heads × d_head 8, attention-only; Mixer 1 layer with
    a GELU channel MLP of 128, width matched to the transformer's parameter count; 1 000 steps,
    2 048 tokens/step, lr 1e-3; 3 seeds. Paper scale (the paper's decisive point, issue 27): S = 16,
    s = 3, 16 heads × d_head 8, Mixer channel MLP 256, 10⁴ steps (6 runs; ``--set 's=[3,5,7]'`` adds the
    paper's 10⁴-step comparisons at s = 5 and 7)."""
    if paper_scale:
        return {
            "S": 16,
            "s": [3],
            "seeds": [0, 1, 2],
            "n_layers": 1,
            "n_heads": 16,
            "d_head": 8,
            "mixer_d_mlp": 256,
            "steps": 10_000,
            "tokens_per_step": 2048,
            "lr": 1e-3,
            "eval_every": 50,
            "eval_tokens": 8192,
        }
    return {
        "S": 8,
        "s": [3, 5, 7],
        "seeds": [0, 1, 2],
        "n_layers": 1,
        "n_heads": 8,
        "d_head": 8,
        "mixer_d_mlp": 128,
        "steps": 1000,
        "tokens_per_step": 2048,
        "lr": 1e-3,
        "eval_every": 50,
        "eval_tokens": 2048,
    }


def matched_widths(cfg: dict) -> dict[str, dict]:
    """Model fields per architecture at the transformer's parameter count.

    Returns ``{arch: {"d_model", "d_mlp", "n_params"}}``.

    Raises:
        ValueError: the Mixer cannot reach the transformer's count within 10 %.
    """
    from synthetic.models import ModelConfig
    from synthetic.models.budget import match_parameter_budget, parameter_count

    n_ctx = 2 * cfg["S"]
    base = ModelConfig(d_vocab=2, n_ctx=n_ctx, n_layers=cfg["n_layers"], n_heads=cfg["n_heads"], d_head=cfg["d_head"])
    target = parameter_count(base)
    mixer = match_parameter_budget("mlp-mixer", target, ModelConfig(**{**base.__dict__, "d_mlp": cfg["mixer_d_mlp"]}))
    return {
        "transformer": {"d_model": None, "d_mlp": None, "n_params": target},
        "mlp-mixer": {"d_model": mixer.d_model, "d_mlp": mixer.d_mlp, "n_params": parameter_count(mixer)},
    }


def configs(cfg: dict, widths: dict[str, dict]) -> list[dict]:
    """One TrainConfig field dict per (s, arch, seed)."""
    shared = {
        k: cfg[k]
        for k in ("S", "n_layers", "n_heads", "d_head", "steps", "tokens_per_step", "lr", "eval_every", "eval_tokens")
    }
    thr = scaled_threshold(cfg["S"])
    return [
        {
            **shared,
            "task": "linear-map",
            "s": s,
            "arch": arch,
            "seed": seed,
            "loss_threshold": thr,
            "d_model": widths[arch]["d_model"],
            "d_mlp": widths[arch]["d_mlp"],
        }
        for s in cfg["s"]
        for arch in ARCHS
        for seed in cfg["seeds"]
    ]


def run_table(cfgs: list[dict], results: list) -> pd.DataFrame:
    """One row per run: s, arch, seed, n_params, steps_to_threshold (budget if censored),
    censored, final_loss, floor, threshold, wall_time_s."""
    rows = []
    for c, (summary, _) in zip(cfgs, results):
        reached = summary["steps_to_threshold"]
        rows.append(
            {
                "S": c["S"],
                "s": c["s"],
                "arch": c["arch"],
                "seed": c["seed"],
                "n_params": summary["n_params"],
                "d_model": c["d_model"],
                "d_mlp": c["d_mlp"],
                "steps": c["steps"],
                "steps_to_threshold": reached if reached is not None else c["steps"],
                "censored": reached is None,
                "final_loss": summary["final_loss"],
                "floor": summary["floor"],
                "threshold": summary["threshold"],
                "wall_time_s": summary["wall_time_s"],
            }
        )
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (s, arch): mean/min/max steps to threshold, censored count, mean final loss, and the
    paper's numbers (steps to 0.40 for s = 3, loss at 10⁴ steps for s = 5, 7)."""
    agg = (
        runs.groupby(["s", "arch"])
        .agg(
            n_params=("n_params", "first"),
            steps_mean=("steps_to_threshold", "mean"),
            steps_min=("steps_to_threshold", "min"),
            steps_max=("steps_to_threshold", "max"),
            censored=("censored", "sum"),
            final_loss=("final_loss", "mean"),
            final_loss_min=("final_loss", "min"),
            final_loss_max=("final_loss", "max"),
            floor=("floor", "first"),
            threshold=("threshold", "first"),
        )
        .reset_index()
    )
    agg["paper_steps_to_0.40"] = [PAPER_STEPS.get(s, {}).get(a) for s, a in zip(agg.s, agg.arch)]
    agg["paper_final_loss"] = [PAPER_FINAL.get(s, {}).get(a) for s, a in zip(agg.s, agg.arch)]
    return agg


def headline(agg: pd.DataFrame) -> list[str]:
    """Per s: transformer/Mixer ratio of mean steps to threshold and the final losses, with the
    paper's numbers beside them."""
    lines = []
    for s, sub in agg.groupby("s"):
        t = sub[sub.arch == "transformer"].iloc[0]
        m = sub[sub.arch == "mlp-mixer"].iloc[0]
        ratio = t.steps_mean / m.steps_mean
        paper = PAPER_STEPS.get(s)
        paper_txt = (
            f"paper {paper['transformer']}/{paper['mlp-mixer']} = {paper['transformer'] / paper['mlp-mixer']:.1f}×"
            if paper
            else "paper: not reported"
        )
        lines.append(
            f"s={s}: steps to {t.threshold:.4f}: transformer {t.steps_mean:.0f} "
            f"({int(t.censored)} censored) vs Mixer {m.steps_mean:.0f} ({int(m.censored)} censored): "
            f"Mixer {ratio:.2f}× sooner ({paper_txt}); final loss Mixer {m.final_loss:.3f} vs "
            f"transformer {t.final_loss:.3f} (Mixer lower: {m.final_loss < t.final_loss}"
            + (
                f"; paper {PAPER_FINAL[s]['mlp-mixer']} vs {PAPER_FINAL[s]['transformer']})"
                if s in PAPER_FINAL
                else ")"
            )
        )
    return lines


def figure(cfgs: list[dict], results: list, threshold: float) -> go.Figure:
    """Mean loss curve per (s, arch) over seeds, one panel per s, threshold dashed."""
    s_values = sorted({c["s"] for c in cfgs})
    fig = make_subplots(rows=1, cols=len(s_values), subplot_titles=[f"s = {s}" for s in s_values], shared_yaxes=True)
    colors = {"transformer": "#1f77b4", "mlp-mixer": "#d62728"}
    for col, s in enumerate(s_values, start=1):
        for arch in ARCHS:
            curves = [
                m.set_index("step")["loss"] for c, (_, m) in zip(cfgs, results) if c["s"] == s and c["arch"] == arch
            ]
            mean = pd.concat(curves, axis=1).mean(axis=1)
            fig.add_trace(
                go.Scatter(
                    x=mean.index,
                    y=mean.values,
                    name=arch,
                    legendgroup=arch,
                    showlegend=col == 1,
                    line={"color": colors[arch]},
                ),
                row=1,
                col=col,
            )
        fig.add_hline(y=threshold, line_dash="dash", line_color="grey", row=1, col=col)
    fig.update_layout(
        title=f"Linear map S = {cfgs[0]['S']}: mean loss over seeds (dashed: threshold)",
        yaxis_title="loss (nats/token)",
    )
    fig.update_xaxes(title_text="step")
    return fig


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, pd.DataFrame, go.Figure]:
    """Train every (s, arch, seed); return (per-run table, per-(s, arch) table, figure)."""
    cfgs = configs(cfg, matched_widths(cfg))
    cfgs, results = finished(cfgs, run_configs(cfgs, execution))
    runs = run_table(cfgs, results)
    return runs, summarise(runs), figure(cfgs, results, scaled_threshold(cfg["S"]))


def written(outputs: tuple) -> pd.DataFrame:
    """The per-run table with each (s, arch)'s means and the paper's numbers beside it."""
    runs, agg, _ = outputs
    return runs.merge(agg[TABLE_COLUMNS].rename(columns={"final_loss": "final_loss_mean"}), on=["s", "arch"])


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, agg, fig) = reproduce(NAME, __doc__, argv, settings, run, table=written)
    for line in headline(agg):
        print(line)
    return runs


if __name__ == "__main__":
    main()
