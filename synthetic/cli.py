"""Command line for the synthetic tasks (mounted by the lead as ``emergence synth``).

Example::

    emergence synth train --task linear-map --S 16 --s 3 --n-layers 1 --n-heads 16 \\
        --d-head 8 --steps 10000 --seed 0 --bias 5 --out results/lm-S16-s3

writes ``DIR/metrics.parquet`` and ``DIR/summary.json`` (see :func:`synthetic.training.train`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from synthetic.training import TrainConfig, train as train_run

app = typer.Typer(help="Synthetic tasks with a known attention pattern.", no_args_is_help=True)

_D = TrainConfig()  # defaults shown in --help come from the dataclass


@app.command("train")
def train(
    out: Path = typer.Option(..., "--out", help="Output folder (metrics.parquet, summary.json)."),
    task: str = typer.Option(_D.task, "--task", help="linear-map | cellular-automata"),
    S: int = typer.Option(_D.S, "--S", help="State size S (bits / cells per state)."),
    s: int = typer.Option(_D.s, "--s", help="Sparsity s: ones per row of A (linear map)."),
    T: Optional[int] = typer.Option(None, "--T", help="Transitions per sequence (default: 1 for linear-map, 3 for cellular-automata)."),
    k: int = typer.Option(_D.k, "--k", help="Cell states (cellular automata)."),
    n_rules: int = typer.Option(_D.n_rules, "--n-rules", help="Rule-pool size (cellular automata)."),
    data_seed: int = typer.Option(_D.data_seed, "--data-seed", help="Seed of A / the rule pool and the evaluation set."),
    arch: str = typer.Option(_D.arch, "--arch", help="Architecture (see synthetic.models.ARCHITECTURES)."),
    n_layers: int = typer.Option(_D.n_layers, "--n-layers"),
    n_heads: int = typer.Option(_D.n_heads, "--n-heads"),
    d_head: int = typer.Option(_D.d_head, "--d-head"),
    d_model: Optional[int] = typer.Option(None, "--d-model", help="(default: n_heads * d_head)"),
    d_mlp: Optional[int] = typer.Option(None, "--d-mlp", help="MLP width (default: none, attention-only)."),
    positional_embedding: str = typer.Option(_D.positional_embedding, "--positional-embedding", help="learned | rotary"),
    n_ctx: Optional[int] = typer.Option(None, "--n-ctx", help="Model context (default: the sequence length)."),
    steps: int = typer.Option(_D.steps, "--steps", help="Optimizer updates."),
    lr: float = typer.Option(_D.lr, "--lr"),
    warmup_steps: int = typer.Option(_D.warmup_steps, "--warmup-steps"),
    weight_decay: float = typer.Option(_D.weight_decay, "--weight-decay"),
    tokens_per_step: int = typer.Option(_D.tokens_per_step, "--tokens-per-step", help="Batch = tokens_per_step // sequence length."),
    seed: int = typer.Option(_D.seed, "--seed", help="Weights and training batches."),
    eval_every: int = typer.Option(_D.eval_every, "--eval-every", help="Steps between evaluations."),
    eval_tokens: int = typer.Option(_D.eval_tokens, "--eval-tokens"),
    loss_threshold: Optional[float] = typer.Option(None, "--loss-threshold", help="Nats (default: floor + margin·(plateau − floor))."),
    plateau_margin: float = typer.Option(_D.plateau_margin, "--plateau-margin"),
    bias: float = typer.Option(_D.bias, "--bias", help="Attention bias β added to the true keys' logits (0: off)."),
    bias_layers: Optional[str] = typer.Option(None, "--bias-layers", help="e.g. '0,1' (default: all)."),
    bias_heads: Optional[str] = typer.Option(None, "--bias-heads", help="e.g. '0,3' (default: all)."),
    bias_schedule: str = typer.Option(_D.bias_schedule, "--bias-schedule", help="constant | linear-anneal"),
    bias_anneal_steps: Optional[int] = typer.Option(None, "--bias-anneal-steps", help="(default: steps)"),
    checkpoint_every: int = typer.Option(_D.checkpoint_every, "--checkpoint-every", help="Save DIR/checkpoints/step{N}.pt every N steps (0: never)."),
    device: str = typer.Option(_D.device, "--device", help="auto | cpu | cuda | cuda:N"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    wandb: bool = typer.Option(False, "--wandb/--no-wandb", help="Log to wandb (offline unless WANDB_MODE=online)."),
) -> None:
    """Train one model on one synthetic task; write DIR/metrics.parquet and DIR/summary.json."""
    config = TrainConfig(
        task=task, S=S, s=s, T=T, k=k, n_rules=n_rules, data_seed=data_seed, arch=arch,
        n_layers=n_layers, n_heads=n_heads, d_head=d_head, d_model=d_model, d_mlp=d_mlp,
        positional_embedding=positional_embedding, n_ctx=n_ctx, steps=steps, lr=lr,
        warmup_steps=warmup_steps, weight_decay=weight_decay, tokens_per_step=tokens_per_step,
        seed=seed, eval_every=eval_every, eval_tokens=eval_tokens, loss_threshold=loss_threshold,
        plateau_margin=plateau_margin, bias=bias, bias_layers=bias_layers, bias_heads=bias_heads,
        bias_schedule=bias_schedule, bias_anneal_steps=bias_anneal_steps,
        checkpoint_every=checkpoint_every, device=device,
    )
    try:
        result = train_run(config, out_dir=out, progress=progress, wandb=wandb)
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from None
    keys = ("final_loss", "floor", "plateau_length", "steps_to_threshold", "emerged", "wall_time_s")
    typer.echo(json.dumps({k: result.summary[k] for k in keys}))
    typer.echo(f"wrote {out / 'metrics.parquet'} and {out / 'summary.json'}")


@app.callback()
def _main() -> None:
    """Synthetic tasks with a known attention pattern."""


if __name__ == "__main__":
    app()
