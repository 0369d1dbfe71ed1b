"""Command line for the synthetic tasks: ``emergence synth train`` and ``emergence sweep``
(mounted by :mod:`emergence_lens.cli`).

Example::

    emergence synth train --task linear-map --S 16 --s 3 --n-layers 1 --n-heads 16 \\
        --d-head 8 --steps 10000 --seed 0 --bias 5 --out results/lm-S16-s3

writes ``DIR/metrics.parquet`` and ``DIR/summary.json`` (see :func:`synthetic.training.train`).
"""

from __future__ import annotations

import enum
import importlib.util
import json
from pathlib import Path

import typer

from synthetic.training import TrainConfig

app = typer.Typer(help="Synthetic tasks with a known attention pattern.", no_args_is_help=True, add_completion=False)

_D = TrainConfig()  # defaults shown in --help come from the dataclass


@app.command("train")
def train(
    out: Path = typer.Option(..., "--out", help="Output folder (metrics.parquet, summary.json)."),
    task: str = typer.Option(_D.task, "--task", help="linear-map | cellular-automata"),
    S: int = typer.Option(_D.S, "--S", help="State size S (bits / cells per state)."),
    s: int = typer.Option(_D.s, "--s", help="Sparsity s: ones per row of A (linear map)."),
    T: int | None = typer.Option(
        None, "--T", help="Transitions per sequence (default: 1 for linear-map, 3 for cellular-automata)."
    ),
    k: int = typer.Option(_D.k, "--k", help="Cell states (cellular automata)."),
    n_rules: int = typer.Option(_D.n_rules, "--n-rules", help="Rule-pool size (cellular automata)."),
    data_seed: int = typer.Option(
        _D.data_seed, "--data-seed", help="Seed of A / the rule pool and the evaluation set."
    ),
    arch: str = typer.Option(_D.arch, "--arch", help="Architecture (see synthetic.models.ARCHITECTURES)."),
    n_layers: int = typer.Option(_D.n_layers, "--n-layers"),
    n_heads: int = typer.Option(_D.n_heads, "--n-heads"),
    d_head: int = typer.Option(_D.d_head, "--d-head"),
    d_model: int | None = typer.Option(None, "--d-model", help="(default: n_heads * d_head)"),
    d_mlp: int | None = typer.Option(None, "--d-mlp", help="MLP width (default: none, attention-only)."),
    positional_embedding: str = typer.Option(
        _D.positional_embedding, "--positional-embedding", help="learned | rotary"
    ),
    n_ctx: int | None = typer.Option(None, "--n-ctx", help="Model context (default: the sequence length)."),
    steps: int = typer.Option(_D.steps, "--steps", help="Optimizer updates."),
    lr: float = typer.Option(_D.lr, "--lr"),
    warmup_steps: int = typer.Option(_D.warmup_steps, "--warmup-steps"),
    weight_decay: float = typer.Option(_D.weight_decay, "--weight-decay"),
    tokens_per_step: int = typer.Option(
        _D.tokens_per_step, "--tokens-per-step", help="Batch = tokens_per_step // sequence length."
    ),
    seed: int = typer.Option(_D.seed, "--seed", help="Weights and training batches."),
    eval_every: int = typer.Option(_D.eval_every, "--eval-every", help="Steps between evaluations."),
    eval_tokens: int = typer.Option(_D.eval_tokens, "--eval-tokens"),
    loss_threshold: float | None = typer.Option(
        None, "--loss-threshold", help="Nats (default: floor + margin·(plateau − floor))."
    ),
    plateau_margin: float = typer.Option(_D.plateau_margin, "--plateau-margin"),
    bias: float = typer.Option(_D.bias, "--bias", help="Attention bias β added to the true keys' logits (0: off)."),
    bias_layers: str | None = typer.Option(None, "--bias-layers", help="e.g. '0,1' (default: all)."),
    bias_heads: str | None = typer.Option(None, "--bias-heads", help="e.g. '0,3' (default: all)."),
    bias_schedule: str = typer.Option(_D.bias_schedule, "--bias-schedule", help="constant | linear-anneal"),
    bias_anneal_steps: int | None = typer.Option(None, "--bias-anneal-steps", help="(default: steps)"),
    checkpoint_every: int = typer.Option(
        _D.checkpoint_every,
        "--checkpoint-every",
        help="Save the folder DIR/checkpoints/step{N}/ every N steps (0: never).",
    ),
    device: str = typer.Option(_D.device, "--device", help="auto | cpu | cuda | cuda:N"),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
    wandb: bool = typer.Option(False, "--wandb/--no-wandb", help="Log to wandb (offline unless WANDB_MODE=online)."),
) -> None:
    """Train one model on one synthetic task; write DIR/metrics.parquet and DIR/summary.json."""
    config = TrainConfig(
        task=task,
        S=S,
        s=s,
        T=T,
        k=k,
        n_rules=n_rules,
        data_seed=data_seed,
        arch=arch,
        n_layers=n_layers,
        n_heads=n_heads,
        d_head=d_head,
        d_model=d_model,
        d_mlp=d_mlp,
        positional_embedding=positional_embedding,
        n_ctx=n_ctx,
        steps=steps,
        lr=lr,
        warmup_steps=warmup_steps,
        weight_decay=weight_decay,
        tokens_per_step=tokens_per_step,
        seed=seed,
        eval_every=eval_every,
        eval_tokens=eval_tokens,
        loss_threshold=loss_threshold,
        plateau_margin=plateau_margin,
        bias=bias,
        bias_layers=bias_layers,
        bias_heads=bias_heads,
        bias_schedule=bias_schedule,
        bias_anneal_steps=bias_anneal_steps,
        checkpoint_every=checkpoint_every,
        device=device,
    )
    # Every check before any work: the output folder, the config, the task and model shapes,
    # the device, the optional wandb package.
    from interp.core.devices import choose_device
    from interp.core.io import check_out_dir
    from synthetic.training import train as train_run

    check_out_dir(out)
    config.validate()
    config.model_config(config.make_task())
    choose_device(None if device == "auto" else device)
    if wandb and importlib.util.find_spec("wandb") is None:
        raise ValueError(
            "--wandb needs the package 'wandb', which is not installed: pip install 'emergence-lens[wandb]'"
        )
    result = train_run(config, out_dir=out, progress=progress, wandb=wandb)
    keys = ("final_loss", "floor", "plateau_length", "steps_to_threshold", "emerged", "wall_time_s")
    typer.echo(json.dumps({k: result.summary[k] for k in keys}))
    typer.echo(f"wrote {out / 'metrics.parquet'} and {out / 'summary.json'}")


@app.callback()
def _main() -> None:
    """Synthetic tasks with a known attention pattern."""


class Executor(str, enum.Enum):  # noqa: UP042 (StrEnum would change str(Executor.ray))
    """Where ``sweep`` runs its runs: ``joblib`` (processes on this machine) or ``ray``."""

    joblib = "joblib"
    ray = "ray"


sweep_app = typer.Typer(add_completion=False, help="Run a sweep spec (grid × seeds) into a results store.")


@sweep_app.command("sweep")
def sweep_command(
    spec: Path = typer.Argument(..., exists=True, dir_okay=False, help="Sweep spec (.yaml, .toml or .json)."),
    out: Path = typer.Option(..., "--out", "-o", help="Sweep folder; rows land in OUT/results.parquet."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Parallel runs (processes or Ray CPUs)."),
    executor: Executor = typer.Option(Executor.joblib, "--executor", help="joblib (this machine) or ray."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Existing Ray cluster; default local."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Re-run runs recorded as failed."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the runs and what is missing; run nothing."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar with ETA."),
    force: bool = typer.Option(
        False, "--force", help="Start over: OUT holds another spec's sweep; delete its runs first."
    ),
    ensemble: int = typer.Option(
        1,
        "--ensemble",
        min=1,
        help="Train up to N runs of one shape (differing only "
        "in seed, data_seed, s, n_rules) together in one worker; 1 = each alone.",
    ),
) -> None:
    """Run every missing run of SPEC (re-running resumes an interrupted sweep). Runs train a
    synthetic-task model (synthetic.sweeps:train_runner) unless SPEC names a runner. Exits with
    status 1, listing them, when any run of SPEC failed. One sweep per folder: OUT holding another
    spec is refused (both named) unless --force."""
    from interp.core.io import config_json
    from sweeps import ResultsStore, failure_lines, plan_runs, run_sweep
    from synthetic.sweeps import DEFAULT_RUNNER

    if dry_run:
        from sweeps.driver import check_spec_folder
        from sweeps.spec import load_spec

        tasks = plan_runs(spec, default_runner=DEFAULT_RUNNER)
        loaded = load_spec(spec)
        loaded.runner = loaded.runner or DEFAULT_RUNNER
        other_spec = check_spec_folder(out, loaded, force)
        done = set() if other_spec else ResultsStore(out).done_ids()
        for line in [] if other_spec else ResultsStore(out).damaged_lines():
            typer.echo(f"damaged: {line}", err=True)
        for t in tasks:
            typer.echo(f"{t.run_id} {'done' if t.run_id in done else 'todo'} {config_json(t.config)}")
        typer.echo(f"{len(tasks)} runs, {sum(t.run_id not in done for t in tasks)} to run")
        return
    for line in ResultsStore(out).damaged_lines():
        typer.echo(f"damaged: {line}", err=True)
    outcome = run_sweep(
        spec,
        out,
        jobs=jobs,
        executor=executor.value,
        ray_address=ray_address,
        retry_failed=retry_failed,
        progress=progress,
        default_runner=DEFAULT_RUNNER,
        force=force,
        ensemble=ensemble,
    )
    typer.echo(
        f"{outcome.n_planned} runs: {outcome.n_ran} ran, {outcome.n_skipped} already done, "
        f"{outcome.n_failed} failed; rows in {outcome.out_dir / 'results.parquet'}"
    )
    failures = failure_lines(outcome.results)
    if failures:
        for line in failures:
            typer.echo(f"failed: {line} (log: {outcome.out_dir / 'logs'})", err=True)
        raise typer.Exit(1)
