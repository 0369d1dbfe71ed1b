"""(4) Pre-pretraining on k-Shuffle Dyck or neural cellular automata, then the linear map.

Paper (Baherwani et al. 2026): pre-pretraining on Dyck or on neural cellular automata "sometimes
speeds emergence" [stated in the summary we were given; no numbers, settings unknown].

Ours (:func:`synthetic.pretraining.pretrain_then_train`): a twin of the task model with the
generator's vocabulary trains ``pretrain_steps`` steps on the generator; every weight except
the token embedding and unembedding is copied into the task model, which then trains on the
linear map exactly as a model trained from scratch (same seed, batches, evaluation data).
Three arms per seed: scratch, Dyck, NCA. Steps to emergence = steps to the threshold of
:mod:`arch_linear_map` (the paper's 0.40 moved to this S; never reached → the budget,
``censored``); we also report the plateau length (first step 5 % of the way from ln 2 to the
floor). The comparison is reported whatever its sign: ``delta_steps`` = pretrained − scratch,
paired by seed (negative = pre-pretraining sped emergence).

The models have ``n_ctx = 64`` (the task uses the first 16 positions) so that a pre-pretraining
sequence holds several NCA frames (4×4 grid: 17 tokens a frame) and long Dyck prefixes.

Usage: ``python -m analyses.prepretraining [--paper-scale] [--out DIR] [--jobs N]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from synthetic.harness import Execution, finished, reproduce, run_configs, scaled_threshold

NAME = "prepretraining"
ARMS = ("scratch", "dyck", "nca")
PAPER = "pre-pretraining on Dyck or NCA sometimes speeds emergence [stated; no numbers]"


def settings(paper_scale: bool = False) -> dict:
    """CPU: linear map S = 8, s = 3, 1-layer attention-only transformer 8 heads × d_head 8,
    n_ctx 64, 1 000 task steps, 2 048 tokens/step, lr 1e-3; 300 pre-pretraining steps at the
    same tokens/step (32 sequences of 64 tokens); 3 seeds. Paper scale: S = 16, 16 heads,
    10⁴ task steps, 2 000 pre-pretraining steps, 5 seeds."""
    if paper_scale:
        task = {
            "task": "linear-map",
            "S": 16,
            "s": 3,
            "n_layers": 1,
            "n_heads": 16,
            "d_head": 8,
            "n_ctx": 64,
            "lr": 1e-3,
            "tokens_per_step": 2048,
            "steps": 10_000,
            "eval_every": 50,
            "eval_tokens": 8192,
        }
        return {"task": task, "pretrain_steps": 2000, "seeds": [0, 1, 2, 3, 4], "arms": list(ARMS)}
    task = {
        "task": "linear-map",
        "S": 8,
        "s": 3,
        "n_layers": 1,
        "n_heads": 8,
        "d_head": 8,
        "n_ctx": 64,
        "lr": 1e-3,
        "tokens_per_step": 2048,
        "steps": 1000,
        "eval_every": 50,
        "eval_tokens": 2048,
    }
    return {"task": task, "pretrain_steps": 300, "seeds": [0, 1, 2], "arms": list(ARMS)}


class PretrainRunner:
    """Sweep runner for one arm of one seed: config = :class:`~synthetic.training.TrainConfig`
    fields plus ``arm`` (scratch | dyck | nca) and ``pretrain_steps`` (0 for scratch)."""

    def resolve(self, config: dict[str, Any]) -> dict[str, Any]:
        """TrainConfig defaults filled in; raises ValueError on a bad field or an unknown arm."""
        from synthetic.sweeps import train_runner

        fields = dict(config)
        arm, steps = fields.pop("arm", None), fields.pop("pretrain_steps", 0)
        if arm not in ARMS:
            raise ValueError(f"arm={arm!r} is unknown: choose one of {', '.join(ARMS)}")
        return {**train_runner.resolve(fields), "arm": arm, "pretrain_steps": 0 if arm == "scratch" else int(steps)}

    def __call__(self, config: dict[str, Any]) -> tuple[dict, pd.DataFrame]:
        from synthetic.pretraining import pretrain_then_train
        from synthetic.training import TrainConfig

        fields = dict(config)
        arm, steps = fields.pop("arm"), fields.pop("pretrain_steps")
        # scratch: the same code path with zero pre-pretraining steps (same seed, batches, data)
        result = pretrain_then_train(TrainConfig(**fields), "dyck" if arm == "scratch" else arm, steps)
        return {k: v for k, v in result.summary.items() if k != "config"}, result.metrics


runner = PretrainRunner()
RUNNER = "analyses.prepretraining:runner"


def jobs_list(cfg: dict) -> list[tuple[dict, str]]:
    """``(TrainConfig fields, arm)`` per (arm, seed), with the scaled 0.40 threshold."""
    task = {**cfg["task"], "loss_threshold": scaled_threshold(cfg["task"]["S"])}
    return [({**task, "seed": seed}, arm) for arm in cfg["arms"] for seed in cfg["seeds"]]


def run_table(todo: list[tuple[dict, str]], results: list) -> pd.DataFrame:
    """One row per run: arm, seed, steps_to_threshold (budget if censored), censored,
    plateau_length, final_loss, pretrain_final_loss, n_params, wall_time_s."""
    rows = []
    for (fields, arm), (summary, _) in zip(todo, results):
        reached, plateau = summary["steps_to_threshold"], summary["plateau_length"]
        rows.append(
            {
                "arm": arm,
                "seed": fields["seed"],
                "n_params": summary["n_params"],
                "steps": fields["steps"],
                "pretrain_steps": summary["pretrain_steps"],
                "steps_to_threshold": reached if reached is not None else fields["steps"],
                "censored": reached is None,
                "threshold": summary["threshold"],
                "plateau_length": plateau if plateau is not None else fields["steps"],
                "final_loss": summary["final_loss"],
                "pretrain_loss_start": summary["pretrain_loss_start"],
                "pretrain_final_loss": summary["pretrain_final_loss"],
                "wall_time_s": summary["wall_time_s"],
            }
        )
    runs = pd.DataFrame(rows)
    scratch = runs[runs.arm == "scratch"].set_index("seed")
    runs["delta_steps"] = runs.steps_to_threshold - runs.seed.map(scratch.steps_to_threshold)
    runs["delta_plateau"] = runs.plateau_length - runs.seed.map(scratch.plateau_length)
    return runs


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Per arm: mean steps to threshold and plateau, mean paired differences, seeds faster."""
    agg = (
        runs.groupby("arm", sort=False)
        .agg(
            steps_to_threshold=("steps_to_threshold", "mean"),
            censored=("censored", "sum"),
            plateau_mean=("plateau_length", "mean"),
            delta_steps_mean=("delta_steps", "mean"),
            delta_steps_min=("delta_steps", "min"),
            delta_steps_max=("delta_steps", "max"),
            delta_plateau_mean=("delta_plateau", "mean"),
            seeds_faster=("delta_steps", lambda d: int((d < 0).sum())),
            seeds_slower=("delta_steps", lambda d: int((d > 0).sum())),
            final_loss=("final_loss", "mean"),
            pretrain_final_loss=("pretrain_final_loss", "mean"),
        )
        .reset_index()
    )
    agg["paper"] = PAPER
    return agg


def figure(todo: list[tuple[dict, str]], results: list, threshold: float) -> go.Figure:
    """Task loss curves, one line per (arm, seed), threshold dashed."""
    fig = go.Figure()
    colors = {"scratch": "#1f77b4", "dyck": "#2ca02c", "nca": "#d62728"}
    for (fields, arm), (_, metrics) in zip(todo, results):
        fig.add_trace(
            go.Scatter(
                x=metrics["step"],
                y=metrics["loss"],
                name=f"{arm}, seed {fields['seed']}",
                line={"color": colors.get(arm)},
                legendgroup=arm,
            )
        )
    fig.add_hline(y=threshold, line_dash="dash", line_color="grey", annotation_text="threshold")
    fig.update_layout(
        title="Linear map after pre-pretraining (Dyck, NCA) vs from scratch",
        xaxis_title="task step",
        yaxis_title="loss (nats/token)",
    )
    return fig


def run(cfg: dict, execution: Execution | None = None) -> tuple[pd.DataFrame, pd.DataFrame, go.Figure]:
    """Train every (arm, seed); return (per-run table, per-arm table, figure)."""
    todo = jobs_list(cfg)
    configs = [{**fields, "arm": arm, "pretrain_steps": cfg["pretrain_steps"]} for fields, arm in todo]
    done, results = finished(list(zip(todo, configs, strict=True)), run_configs(configs, execution, runner=RUNNER))
    todo = [job for job, _ in done]  # the (fields, arm) of the runs that finished
    runs = run_table(todo, results)
    return runs, summarise(runs), figure(todo, results, scaled_threshold(cfg["task"]["S"]))


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    cfg, (runs, agg, fig) = reproduce(NAME, __doc__, argv, settings, run, shown=lambda o: o[1].drop(columns=["paper"]))
    for r in agg[agg.arm != "scratch"].itertuples():
        print(
            f"{r.arm}: steps to threshold {r.steps_to_threshold:.0f} vs scratch "
            f"{float(agg[agg.arm == 'scratch'].steps_to_threshold.iloc[0]):.0f}; paired delta "
            f"{r.delta_steps_mean:+.0f} steps (min {r.delta_steps_min:+.0f}, max {r.delta_steps_max:+.0f}); "
            f"faster on {r.seeds_faster}, slower on {r.seeds_slower} seeds (paper: sometimes faster)"
        )
    return runs


if __name__ == "__main__":
    main()
