"""(3c) Depth hurts the linear map and helps multi-rule cellular automata.

Paper (Baherwani et al. 2026): "Depth hurts the linear map and helps multi-rule cellular automata"
[stated in the summary we were given; no numbers reachable]. Whether depth was compared at a
fixed parameter count is unknown; we add layers of the same width (the parameter count grows
with depth and is reported), which makes "depth hurts" the stronger statement.

Per run: linear map: steps to the threshold of :mod:`arch_linear_map` (the paper's 0.40 moved
to this S at the same fraction of the plateau-to-floor gap; never reached → the budget,
``censored``) and the final loss; cellular automata: ``late_loss`` (mean of the last 4
evaluations, nats/token) and plateau length. "Hurts" = the deepest model's mean steps to
threshold is larger than the 1-layer model's (ties broken by the final loss); "helps" = the
deepest model's mean late loss is lower.

Usage: ``python -m analyses.depth [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from synthetic.harness import LATE_EVALS, Execution, finished, reproduce, run_configs, scaled_threshold

NAME = "depth"
PAPER = {"linear-map": "depth hurts [stated]", "cellular-automata": "depth helps (multi-rule) [stated]"}


def settings(paper_scale: bool = False) -> dict:
    """CPU: depth 1 vs 2; linear map S = 8, s = 3, attention-only 8 heads × d_head 8, 1 000
    steps, 2 048 tokens/step, lr 1e-3; cellular automata S = 4, T = 3, 4 rules, 8 heads × 8 +
    MLP 256, 300 steps, 512 tokens/step, lr 3e-3; 3 seeds. Paper scale: depth 1, 2, 4; linear
    map S = 16 with 16 heads, cellular automata S = 16 with 16 rules, 10⁴ steps."""
    if paper_scale:
        lm = {
            "task": "linear-map",
            "S": 16,
            "s": 3,
            "n_heads": 16,
            "d_head": 8,
            "d_mlp": None,
            "lr": 1e-3,
            "tokens_per_step": 2048,
            "steps": 10_000,
            "eval_every": 50,
            "eval_tokens": 8192,
        }
        ca = {
            "task": "cellular-automata",
            "S": 16,
            "T": 3,
            "n_rules": 16,
            "n_heads": 16,
            "d_head": 8,
            "d_mlp": 256,
            "lr": 1e-3,
            "tokens_per_step": 2048,
            "steps": 10_000,
            "eval_every": 50,
            "eval_tokens": 8192,
        }
        return {"layers": [1, 2, 4], "seeds": [0, 1, 2], "tasks": [lm, ca]}
    lm = {
        "task": "linear-map",
        "S": 8,
        "s": 3,
        "n_heads": 8,
        "d_head": 8,
        "d_mlp": None,
        "lr": 1e-3,
        "tokens_per_step": 2048,
        "steps": 1000,
        "eval_every": 50,
        "eval_tokens": 2048,
    }
    ca = {
        "task": "cellular-automata",
        "S": 4,
        "T": 3,
        "n_rules": 4,
        "n_heads": 8,
        "d_head": 8,
        "d_mlp": 256,
        "lr": 3e-3,
        "tokens_per_step": 512,
        "steps": 300,
        "eval_every": 25,
        "eval_tokens": 2048,
    }
    return {"layers": [1, 2], "seeds": [0, 1, 2], "tasks": [lm, ca]}


def configs(cfg: dict) -> list[dict]:
    """One TrainConfig field dict per (task, n_layers, seed); the linear map gets the scaled
    0.40 threshold of :func:`synthetic.harness.scaled_threshold`."""
    out = []
    for task in cfg["tasks"]:
        extra = {"loss_threshold": scaled_threshold(task["S"])} if task["task"] == "linear-map" else {}
        out += [{**task, **extra, "n_layers": n, "seed": seed} for n in cfg["layers"] for seed in cfg["seeds"]]
    return out


def run_table(cfgs: list[dict], results: list) -> pd.DataFrame:
    """One row per run: task, n_layers, seed, n_params, steps_to_threshold (budget if censored),
    censored, plateau_length, final_loss, late_loss, floor, wall_time_s."""
    rows = []
    for c, (summary, metrics) in zip(cfgs, results):
        reached, plateau = summary["steps_to_threshold"], summary["plateau_length"]
        rows.append(
            {
                "task": c["task"],
                "S": c["S"],
                "n_layers": c["n_layers"],
                "seed": c["seed"],
                "n_params": summary["n_params"],
                "steps": c["steps"],
                "steps_to_threshold": reached if reached is not None else c["steps"],
                "censored": reached is None,
                "threshold": summary["threshold"],
                "plateau_length": plateau if plateau is not None else c["steps"],
                "final_loss": summary["final_loss"],
                "late_loss": float(metrics["loss"].tail(LATE_EVALS).mean()),
                "floor": summary["floor"],
                "wall_time_s": summary["wall_time_s"],
            }
        )
    return pd.DataFrame(rows)


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (task, n_layers): means over seeds and the paper's statement."""
    agg = (
        runs.groupby(["task", "n_layers"])
        .agg(
            n_params=("n_params", "first"),
            steps_to_threshold=("steps_to_threshold", "mean"),
            censored=("censored", "sum"),
            plateau_mean=("plateau_length", "mean"),
            final_loss=("final_loss", "mean"),
            late_loss=("late_loss", "mean"),
            late_loss_min=("late_loss", "min"),
            late_loss_max=("late_loss", "max"),
            floor=("floor", "first"),
            threshold=("threshold", "first"),
        )
        .reset_index()
    )
    agg["paper"] = agg.task.map(PAPER)
    return agg


def verdicts(agg: pd.DataFrame) -> dict[str, bool | None]:
    """``{"linear_map_depth_hurts", "ca_depth_helps"}`` as defined in the module docstring; None for
    a task with fewer than two depths in ``agg`` (``--finished-only`` on an unfinished entry)."""
    lm = agg[agg.task == "linear-map"].sort_values("n_layers")
    ca = agg[agg.task == "cellular-automata"].sort_values("n_layers")
    hurts = helps = None
    if len(lm) >= 2:
        shallow, deep = lm.iloc[0], lm.iloc[-1]
        hurts = bool((deep.steps_to_threshold, deep.final_loss) > (shallow.steps_to_threshold, shallow.final_loss))
    if len(ca) >= 2:
        helps = bool(ca.iloc[-1].late_loss < ca.iloc[0].late_loss)
    return {"linear_map_depth_hurts": hurts, "ca_depth_helps": helps}


def figure(cfgs: list[dict], results: list) -> go.Figure:
    """Mean loss curve per depth over seeds, one panel per task."""
    tasks = list(dict.fromkeys(c["task"] for c in cfgs))
    fig = make_subplots(rows=1, cols=len(tasks), subplot_titles=tasks)
    for col, task in enumerate(tasks, start=1):
        for n in sorted({c["n_layers"] for c in cfgs}):
            curves = [
                m.set_index("step")["loss"]
                for c, (_, m) in zip(cfgs, results)
                if c["task"] == task and c["n_layers"] == n
            ]
            if not curves:  # --finished-only: a depth of this task has no finished run yet
                continue
            mean = pd.concat(curves, axis=1).mean(axis=1)
            fig.add_trace(go.Scatter(x=mean.index, y=mean.values, name=f"{task}, {n} layer(s)"), row=1, col=col)
    fig.update_layout(title="Depth: mean loss over seeds", yaxis_title="loss (nats/token)")
    fig.update_xaxes(title_text="step")
    return fig


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, pd.DataFrame, go.Figure]:
    """Train every (task, n_layers, seed); return (per-run table, per-(task, depth) table, figure)."""
    cfgs = configs(cfg)
    cfgs, results = finished(cfgs, run_configs(cfgs, execution))
    runs = run_table(cfgs, results)
    return runs, summarise(runs), figure(cfgs, results)


def written(outputs: tuple) -> pd.DataFrame:
    """The per-run table with each (task, depth)'s mean late loss and the paper's claim beside it."""
    runs, agg, _ = outputs
    late = agg[["task", "n_layers", "late_loss", "paper"]].rename(columns={"late_loss": "late_loss_mean"})
    return runs.merge(late, on=["task", "n_layers"])


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, agg, fig) = reproduce(
        NAME, __doc__, argv, settings, run, table=written, shown=lambda o: o[1].drop(columns=["paper"])
    )
    v = {k: "not decided (fewer than two depths finished)" if x is None else x for k, x in verdicts(agg).items()}
    lm = agg[agg.task == "linear-map"]
    ca = agg[agg.task == "cellular-automata"]
    print(
        "linear map, steps to threshold by depth: "
        + ", ".join(f"{r.n_layers}L {r.steps_to_threshold:.0f} (final {r.final_loss:.3f})" for r in lm.itertuples())
        + f": depth hurts: {v['linear_map_depth_hurts']} (paper: hurts)"
    )
    print(
        "cellular automata, late loss by depth: "
        + ", ".join(f"{r.n_layers}L {r.late_loss:.3f}" for r in ca.itertuples())
        + f": depth helps: {v['ca_depth_helps']} (paper: helps)"
    )
    return runs


if __name__ == "__main__":
    main()
