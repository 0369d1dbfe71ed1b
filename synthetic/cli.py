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
from typing import Any

import typer

from interp.core.field_options import with_field_options
from synthetic.training import TrainConfig

app = typer.Typer(help="Synthetic tasks with a known attention pattern.", no_args_is_help=True, add_completion=False)


def train(
    out: Path = typer.Option(..., "--out", help="Output folder (metrics.parquet, summary.json)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar."),
    wandb: bool = typer.Option(False, "--wandb/--no-wandb", help="Log to wandb (offline unless WANDB_MODE=online)."),
    **fields: Any,
) -> None:
    """Train one model on one synthetic task; write DIR/metrics.parquet and DIR/summary.json."""
    config = TrainConfig(**fields)
    # Every check before any work: the output folder, the config, the task and model shapes,
    # the device, the optional wandb package.
    from interp.core.devices import choose_device
    from interp.core.io import check_out_dir
    from synthetic.training import train as train_run

    check_out_dir(out)
    config.validate()
    config.model_config(config.make_task())
    choose_device(None if config.device == "auto" else config.device)
    if wandb and importlib.util.find_spec("wandb") is None:
        raise ValueError(
            "--wandb needs the package 'wandb', which is not installed: pip install 'emergence-lens[wandb]'"
        )
    result = train_run(config, out_dir=out, progress=progress, wandb=wandb)
    keys = ("final_loss", "floor", "plateau_length", "steps_to_threshold", "emerged", "wall_time_s")
    typer.echo(json.dumps({k: result.summary[k] for k in keys}))
    typer.echo(f"wrote {out / 'metrics.parquet'} and {out / 'summary.json'}")


# one --option per TrainConfig field (--n-layers, --S, --row-entropy/--no-row-entropy), derived from
# the dataclass: the field's type and default, its help metadata (interp.core.field_options)
app.command("train")(with_field_options(train, TrainConfig))


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
    outcome = run_sweep(  # it names each damaged run once (sweeps.driver)
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
