"""The ``emergence`` command.

``emergence demo`` runs the main job on the embedded default suite; ``bisect``, ``curve`` and
``rank-heads`` run single steps on any source (a Pythia/PolyPythia hub id, a local suite folder,
or ``embedded`` / ``embedded-quick``); ``synth`` and ``sweep`` are the synthetic-task commands.
Errors print one line (``error: ...``) and exit with status 2.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(help="emergence-lens: find the point of emergence and the heads behind it.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

EMBEDDED = {"embedded": "FULL", "embedded-quick": "QUICK"}


@app.callback()
def _main(threads: Optional[int] = typer.Option(
        None, "--threads", min=1, envvar="EMERGENCE_LENS_THREADS",
        help="torch CPU threads (default: torch's choice). 1 is fastest on a busy machine.")) -> None:
    """emergence-lens: find the point of emergence and the heads behind it."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def _one_line_errors(fn):
    """Turn our ValueErrors (bad input) into a one-line message and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, FileNotFoundError, KeyError) as err:
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2)

    return wrapper


def resolve_sources(specs: List[str], progress: bool = True) -> list:
    """Checkpoint sources for CLI arguments.

    ``embedded`` / ``embedded-quick`` expand to every run of that suite and
    ``embedded/<run>`` (as ``emergence list-models`` prints them) to one run, trained on first
    use; anything else goes to :func:`interp.checkpoints.open_source` (hub id or suite folder).

    Raises:
        ValueError: an unknown ``embedded/<run>`` name, or a local path that does not exist.
    """
    from interp import embedded
    from interp.checkpoints import LocalSuiteSource, open_source

    sources = []
    for spec in specs:
        if spec in EMBEDDED:
            cfg = getattr(embedded, EMBEDDED[spec])
            sources += [LocalSuiteSource(path) for path in embedded.ensure_suite(cfg, progress=progress)]
        elif spec.startswith("embedded/"):
            sources.append(LocalSuiteSource(_embedded_run(spec.split("/", 1)[1], progress)))
        elif spec.startswith(("/", "./", "../", "~")) and not Path(spec).expanduser().is_dir():
            raise ValueError(f"local suite folder {spec!r} does not exist")
        else:
            sources.append(open_source(Path(spec).expanduser() if spec.startswith("~") else spec))
    return sources


def _embedded_run(name: str, progress: bool) -> Path:
    """The folder of one embedded run (``neox-2l-64d-seed0``): from the FULL suite if it holds that
    run, else from QUICK; the suite is trained first if it is not in the cache."""
    from interp import embedded

    valid = []
    for cfg in (embedded.FULL, embedded.QUICK):
        names = [embedded.run_name(size, seed) for size in cfg.sizes for seed in cfg.seeds]
        if name in names:
            return embedded.ensure_suite(cfg, progress=progress)[names.index(name)]
        valid += names
    raise ValueError(f"unknown embedded run {name!r}; valid: {', '.join(sorted(set(valid)))}")


def _parse_steps(text: str) -> list[int]:
    """``"0,1000,2000"`` -> [0, 1000, 2000]; a bad item raises a one-line error naming it."""
    steps = []
    for item in text.split(","):
        try:
            steps.append(int(item.strip()))
        except ValueError:
            raise ValueError(f"--steps: {item.strip()!r} is not an integer step; expected e.g. 0,1000,2000") from None
    return steps


def _task(task: str, n_prompts: int, length: int, seed: int):
    from interp.tasks import make_task

    return make_task(task, n_prompts=n_prompts, length=length, seed=seed)


TaskOpt = typer.Option("repetition", help="Capability task: repetition | token-repetition.")
PromptsOpt = typer.Option(64, help="Number of prompts.")
LengthOpt = typer.Option(10, help="Random items per prompt before the partial repeat.")
ThresholdOpt = typer.Option(0.5, help="Greedy-accuracy threshold of the point of emergence.")
DeviceOpt = typer.Option(None, help="torch device (default: cuda if available, else cpu).")
MetricOpt = typer.Option("p", "--metric", help="Patching metric: p (probability of the answer) | logprob | "
                         "logit-diff (answer logit minus the largest distractor logit).")


def _metric(metric: str) -> str:
    """The metric name, checked before any work (one-line error naming the valid ones)."""
    from interp.patching.metrics import resolve_metric

    resolve_metric(metric)
    return metric


def _device(device: Optional[str]) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


@app.command()
@_one_line_errors
def demo(
    quick: bool = typer.Option(False, "--quick", help="Small suite for CI (<= 2 min to train)."),
    out: Path = typer.Option(Path("results/demo"), help="Output folder."),
    method: str = typer.Option("fast", help="Patching engine: fast | reference | attribution."),
    device: Optional[str] = DeviceOpt,
    metric: str = MetricOpt,
):
    """Main job on the embedded default: train (once), find each seed's point of emergence,
    rank heads by delta_p, patch the top K jointly, write tables and report.html to OUT."""
    from interp.pipeline import run_main_job

    metric = _metric(metric)
    sources = resolve_sources(["embedded-quick" if quick else "embedded"])
    report = run_main_job(sources, task=_task("repetition", 64, 10, 0), scan=True, method=method,
                          device=_device(device), out_dir=out, metric=metric,
                          title="emergence-lens: embedded default suite" + (" (quick)" if quick else ""))
    _print_summary(report, out)


def _print_summary(report, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    def fmt(value, spec=".3f"):
        if value is None or value != value:
            return "—"
        return format(value, spec) if isinstance(value, float) else str(value)

    table = Table(title="Points of emergence and top heads")
    for column in ["run", "emerged", "pre → post", "evals", "p pre → post", "top head (Δp)", "recovered K=2", "pre-screen ρ"]:
        table.add_column(column)
    for _, row in report.summary().iterrows():
        table.add_row(
            f"{row['model']} seed {row['seed']}", fmt(row["emerged"]),
            f"{fmt(row['pre_step'])} → {fmt(row['post_step'])}", fmt(row["n_evaluations"]),
            f"{fmt(row['p_pre'])} → {fmt(row['p_post'])}",
            "—" if row["top_head"] is None else f"{row['top_head']} ({row['top_delta_p']:+.3f})",
            fmt(row["recovered_top2"]), fmt(row["prescreen_spearman"], ".2f"),
        )
    Console(width=max(120, Console().width)).print(table)
    for line in report.hazards():  # duplicates excluded, missing steps, a listing from the cache
        typer.echo(f"hazard: {line}")
        typer.echo(f"wrote {out}/report.html and emergence/points/heads/topk/components .csv/.parquet")


@app.command()
@_one_line_errors
def curve(
    source: str = typer.Argument(..., help="Hub id (EleutherAI/pythia-70m-seed3), suite folder, or embedded."),
    steps: Optional[str] = typer.Option(None, help="Comma-separated steps (default: every searchable step)."),
    task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write emergence.csv here."),
    device: Optional[str] = DeviceOpt,
):
    """Capability (greedy accuracy, p(answer)) per checkpoint."""
    import pandas as pd

    from interp.emergence import StepEvaluator
    from interp.io import atomic_to_csv
    from interp.pipeline import EMERGENCE_COLUMNS, model_and_seed

    frames = []
    for src in resolve_sources([source]):
        batch = _task(task, n_prompts, length, 0).build(src.tokenizer())
        evaluator = StepEvaluator(src, batch, device=_device(device))
        wanted = _parse_steps(steps) if steps else src.searchable_steps()
        for step in wanted:
            evaluator(step)
        model, seed = model_and_seed(src.model_id)
        if not steps:  # the digests are known already; explicit steps need not read every step's
            from interp.checkpoints import checkpoint_table, hazard_lines

            for line in hazard_lines(checkpoint_table(src), f"{model} seed {seed}"):
                typer.echo(f"hazard: {line}", err=True)
        table = evaluator.table()
        table.insert(0, "seed", seed)
        table.insert(0, "model", model)
        frames.append(table[EMERGENCE_COLUMNS])
        src.close()
    result = pd.concat(frames, ignore_index=True)
    typer.echo(result.to_string(index=False))
    if out is not None:
        atomic_to_csv(result, out / "emergence.csv")


@app.command()
@_one_line_errors
def bisect(
    source: List[str] = typer.Argument(..., help="One or more sources (hub ids, suite folders, embedded)."),
    threshold: float = ThresholdOpt, task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write points.csv and emergence.csv here."),
    device: Optional[str] = DeviceOpt,
):
    """Point of emergence of each source by bisection over its checkpoints."""
    from interp.emergence import find_emergence
    from interp.io import atomic_to_csv
    from interp.pipeline import model_and_seed

    import pandas as pd

    from interp.checkpoints import checkpoint_table, hazard_lines
    from interp.pipeline import CHECKPOINTS_COLUMNS, _labelled

    points, curves, tables, hazards = [], [], [], []
    for src in resolve_sources(source):
        batch = _task(task, n_prompts, length, 0).build(src.tokenizer())
        point = find_emergence(src, batch, threshold=threshold, device=_device(device))
        model, seed = model_and_seed(src.model_id)
        points.append({"model": model, "seed": seed, **point.as_row()})
        curve_table = point.evaluations.drop(columns="order")
        curve_table.insert(0, "seed", seed)
        curve_table.insert(0, "model", model)
        curves.append(curve_table)
        tables.append(_labelled(checkpoint_table(src), model, seed, CHECKPOINTS_COLUMNS))
        hazards += hazard_lines(tables[-1], f"{model} seed {seed}")
        src.close()
    points_df = pd.DataFrame(points).astype({"pre_step": "Int64", "post_step": "Int64"})
    typer.echo(points_df.to_string(index=False))
    for line in hazards:
        typer.echo(f"hazard: {line}")
    if out is not None:
        atomic_to_csv(points_df, out / "points.csv")
        atomic_to_csv(pd.concat(curves, ignore_index=True), out / "emergence.csv")
        atomic_to_csv(pd.concat(tables, ignore_index=True), out / "checkpoints.csv")


@app.command("rank-heads")
@_one_line_errors
def rank_heads(
    source: str = typer.Argument(..., help="Hub id, suite folder (one run)."),
    pre: int = typer.Option(..., help="Pre-emergence step."),
    post: int = typer.Option(..., help="Post-emergence step."),
    method: str = typer.Option("fast", help="fast | reference | attribution."),
    prescreen_top_n: Optional[int] = typer.Option(None, help="Exact delta_p only for the attribution pre-screen's top N heads."),
    task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write heads.csv and topk.csv here."),
    device: Optional[str] = DeviceOpt,
    metric: str = MetricOpt,
):
    """Patch each head's attention pattern from POST into PRE; rank by delta_p; joint top-K."""
    from interp.io import atomic_to_csv
    from interp.pipeline import HEADS_COLUMNS, TOPK_COLUMNS, _labelled, model_and_seed
    from interp.ranking import rank_heads_between

    metric = _metric(metric)

    if pre == post:
        raise ValueError(f"--pre and --post are both {pre}: patching needs two different checkpoints")
    if pre > post:
        typer.echo(f"warning: --pre {pre} is later than --post {post}: patterns are patched from the earlier "
                   "checkpoint into the later one (a noising experiment), so delta_p is expected to be negative", err=True)
    (src,) = resolve_sources([source])
    batch = _task(task, n_prompts, length, 0).build(src.tokenizer())
    result = rank_heads_between(src, pre, post, batch, method=method, prescreen_top_n=prescreen_top_n,
                                device=_device(device), metric=metric)
    model, seed = model_and_seed(src.model_id)
    heads = _labelled(result.heads, model, seed, HEADS_COLUMNS)
    topk = _labelled(result.topk, model, seed, TOPK_COLUMNS)
    typer.echo(f"metric={result.metric} pre={result.p_pre:.4f} post={result.p_post:.4f}")
    typer.echo(heads.head(10).to_string(index=False))
    if out is not None:
        atomic_to_csv(heads, out / "heads.csv")
        atomic_to_csv(topk, out / "topk.csv")


@app.command("decompose")
@_one_line_errors
def decompose(
    source: str = typer.Argument(..., help="Hub id, suite folder or embedded/<run> (one run)."),
    pre: int = typer.Option(..., help="Pre-emergence step."),
    post: int = typer.Option(..., help="Post-emergence step (later than --pre)."),
    task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write components.csv here."),
    device: Optional[str] = DeviceOpt,
    metric: str = MetricOpt,
):
    """Share of the PRE -> POST jump each component recovers when patched from POST into PRE."""
    from interp.io import atomic_to_csv
    from interp.ranking import decompose_between

    metric = _metric(metric)
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    sources = resolve_sources([source])
    if len(sources) != 1:
        raise ValueError(f"decompose takes one run; {source!r} has {len(sources)}: use embedded/<run>")
    (src,) = sources
    table = decompose_between(src, pre, post, _task(task, n_prompts, length, 0).build(src.tokenizer()),
                              metric=metric, device=_device(device))
    columns = ["target", "scope", "k", "heads", "value", "recovered", "recovered_lo", "recovered_hi"]
    typer.echo(f"metric={metric} pre={table['value_pre'].iloc[0]:.4f} post={table['value_post'].iloc[0]:.4f}")
    typer.echo(table[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if out is not None:
        atomic_to_csv(table, out / "components.csv")


@app.command()
@_one_line_errors
def run(
    source: List[str] = typer.Argument(..., help="Sources: hub ids, suite folders, embedded, embedded-quick."),
    out: Path = typer.Option(..., help="Output folder."),
    threshold: float = ThresholdOpt, task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    scan: bool = typer.Option(False, help="Evaluate every checkpoint too (full curves)."),
    method: str = typer.Option("fast", help="fast | reference | attribution."),
    device: Optional[str] = DeviceOpt,
    metric: str = MetricOpt,
):
    """The main job (curve, point of emergence, head ranking, top-K, report) on any sources."""
    from interp.pipeline import run_main_job

    metric = _metric(metric)
    report = run_main_job(resolve_sources(source), task=_task(task, n_prompts, length, 0), threshold=threshold,
                          scan=scan, method=method, device=_device(device), out_dir=out, metric=metric)
    _print_summary(report, out)


@app.command("train-suite")
@_one_line_errors
def train_suite(quick: bool = typer.Option(False, "--quick", help="The CI-sized suite.")):
    """Train (or find in the cache) the embedded default suite and print its run folders."""
    from interp import embedded

    for path in embedded.ensure_suite(embedded.QUICK if quick else embedded.FULL):
        typer.echo(str(path))


@app.command("list-models")
def list_models():
    """Print the known model families (id patterns, revision names), then the Pythia /
    PolyPythia hub ids and the embedded suite names."""
    from interp import embedded
    from interp.checkpoints import pythia_model_ids
    from interp.families import FAMILIES

    for family in FAMILIES:
        typer.echo(f"# {family.name}: ids {family.id_pattern}  revisions {family.revision_format}  "
                   f"({family.architecture}; {family.schedule}); e.g. {', '.join(family.example_ids)}")
    typer.echo("# any other org/name repo whose branches name steps (step{N}[-tokens{M}B], "
               "stage{k}[-ingredient{j}]-step{N}-tokens{M}B); ID:SERIES picks a series, e.g. "
               "allenai/OLMo-2-1124-7B:stage2-ingredient1")

    for model_id in pythia_model_ids():
        typer.echo(model_id)
    typer.echo("embedded        (every run of the default suite)")
    typer.echo("embedded-quick  (every run of the CI-sized suite)")
    seen = set()
    for cfg_name in ("FULL", "QUICK"):
        cfg = getattr(embedded, cfg_name)
        for size in cfg.sizes:
            for seed in cfg.seeds:
                name = f"embedded/{embedded.run_name(size, seed)}"
                if name not in seen:
                    seen.add(name)
                    typer.echo(name)


def _mount_synthetic() -> None:
    """Mount the synthetic-task sub-commands (``emergence synth``, ``emergence sweep``)."""
    try:
        from synthetic.cli import app as synth_app
    except ImportError:  # pragma: no cover - synthetic package incomplete
        synth_app = None
    if synth_app is not None:
        app.add_typer(synth_app, name="synth", help="Synthetic tasks with a known attention pattern.")
    try:
        from synthetic.sweeps import sweep_command
    except ImportError:  # pragma: no cover
        sweep_command = None
    if sweep_command is not None:
        app.command("sweep")(sweep_command)


_mount_synthetic()


if __name__ == "__main__":  # pragma: no cover
    app()
