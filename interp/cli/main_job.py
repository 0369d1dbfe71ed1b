"""The main job's commands of ``emergence``: ``demo`` (the embedded default suite end to end),
``run`` (the main job on any sources), ``curve`` (capability per checkpoint) and ``bisect``
(the point of emergence, optionally refined densely). Options and argument checks:
:mod:`interp.cli.options`; :mod:`interp.cli` puts these commands on the one app.

Every command takes the settings as :class:`~interp.core.settings.StudyConfig`'s fields: one option
per field it reads, derived from the dataclass (:func:`interp.cli.options.study_options`), so a
field added there is an option of ``run`` (every field) and ``demo`` (all but the loading options
of hub and local runs); ``curve`` reads the loading fields, ``bisect`` those and the rule's. The
command builds ``StudyConfig(**settings)``, which checks every value (one line, before anything
loads), and hands it on.
"""

from __future__ import annotations

from pathlib import Path

import typer

from interp.cli.options import (
    LOADING,
    RULE,
    LengthOpt,
    PromptsOpt,
    TaskFileOpt,
    TaskOpt,
    check_common,
    check_embedded_steps,
    check_resumable,
    check_sources,
    check_steps_available,
    check_tasks_on_sources,
    open_named,
    parse_steps,
    source_options,
    study_options,
    warnings_as_lines,
)
from interp.core.settings import DEMO_CONFIG, StudyConfig

#: the commands of this module, in the order ``emergence --help`` lists them (:mod:`interp.cli`)
app = typer.Typer()


#: ``emergence demo``'s settings that are not options: the embedded suite writes safetensors in
#: ``step{N}`` folders, so the loading options of hub and local runs have nothing to do there.
DEMO_EXCLUDES = ("allow_pickle", "step_pattern", "model_config")


@app.command()
@study_options(defaults=DEMO_CONFIG, exclude=DEMO_EXCLUDES)
def demo(
    quick: bool = typer.Option(
        False, "--quick", help="Small suite for CI: one model size, two seeds (about 2 min on 2 idle cores)."
    ),
    out: Path = typer.Option(Path("results/demo"), help="Output folder."),
    **settings,
):
    """Main job on the embedded default: train (once), find each seed's point of emergence,
    rank heads by delta (delta_p for --metric p), patch the top K jointly, write tables and report.html to OUT.
    The settings' options are StudyConfig's fields, their defaults el.DEMO_CONFIG's (a scan)."""
    config = DEMO_CONFIG.replace(**settings)  # every setting checked here, once, before anything loads
    device, tasks = check_common(config.device, "repetition", 64, 10, out)
    config = config.replace(device=device)
    from interp.main_job import runner

    with warnings_as_lines():
        report = runner.run_study(
            ["embedded-quick" if quick else "embedded"],
            tasks,
            config,
            out_dir=out,
            title="emergence-lens: embedded default suite" + (" (quick)" if quick else ""),
        )
    _print_summary(report, out)


@app.command()
@study_options()
def run(
    source: list[str] = typer.Argument(
        ..., help="Sources: hub ids, suite folders, embedded, embedded-quick, embedded/<run>."
    ),
    out: Path = typer.Option(..., help="Output folder."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    executor: str = typer.Option(
        "local",
        help="Where units run: local (this process), joblib (JOBS processes), "
        "ray (a local Ray with JOBS CPUs, or the cluster at --address).",
    ),
    jobs: int = typer.Option(1, help="Worker processes (joblib) or CPUs of a local Ray."),
    address: str | None = typer.Option(None, help="An existing Ray cluster (ray://head:10001 or auto)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="List the (source, task) units and which are done; run nothing."
    ),
    **settings,
):
    """The main job (curve, point of emergence, head ranking, top-K, report) on any sources, for
    each task (--task a,b,FILE and --task-file), as resumable (source, task) units stored in
    OUT/units: a killed run started again does only the missing units. The settings' options are
    StudyConfig's fields (every one of them)."""
    config = StudyConfig(**settings)  # every setting checked here, once (no torch imported)
    check_sources(source)  # names next: a typo is refused before torch is imported
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out, task_files=task_file)
    config = config.replace(device=device)
    check_tasks_on_sources(source, tasks, **options)
    from interp.main_job import runner
    from interp.main_job.units import damaged_units, plan_units, study_status

    runner.check_executor(executor, jobs, address)
    if dry_run:  # (a run names its damaged units itself, once: runner.run)
        for line in damaged_units(plan_units(source, tasks), out).values():
            typer.echo(f"damaged: {line}", err=True)
        status = study_status(plan_units(source, tasks), out)
        for row in status.itertuples():
            typer.echo(f"{'done' if row.done else 'todo'}  {row.source}  {row.task}  {row.unit_id}")
        typer.echo(f"{int(status['done'].sum())} of {len(status)} units done in {out}/units")
        return
    with warnings_as_lines():  # too few prompts for the accuracy rule, bootstrap bounds left out, ...
        report = runner.run_study(source, tasks, config, executor=executor, jobs=jobs, address=address, out_dir=out)
    _print_summary(report, out)


def _print_summary(report, out: Path) -> None:
    """The summary table (every share and effect with its 95 % interval and the noise mark), then
    the findings (:meth:`interp.main_job.report.MainJobReport.findings`), the rule and the hazards."""
    from rich.console import Console
    from rich.table import Table

    from interp.core.metrics import metric_spec
    from interp.report.findings import NOISY, interval_text
    from interp.sources.catalogue import run_label

    def fmt(value, spec=".3f"):
        if value is None or value != value:
            return "—"
        return format(value, spec) if isinstance(value, float) else str(value)

    metrics = report.metrics() or ["p"]
    label = metric_spec(metrics[0]).label if len(metrics) == 1 else "metric"
    unit = metric_spec(metrics[0]).unit if len(metrics) == 1 else "metric units"
    summary = report.summary()
    tasks = list(dict.fromkeys(summary["task"])) if len(summary) else []
    one_task = len(tasks) == 1
    table = Table(
        title=f"Points of emergence and top heads (metric {', '.join(metrics)}: {label}, {unit}"
        + (f"; task {tasks[0]}" if one_task else "")
        + "; [95 % CI])"
    )
    columns = ["run", *([] if one_task else ["task"])]
    columns += ["emerged", "pre → post", "monotone", "evals", f"{label} pre → post", "top head Δ", "recovered K=2"]
    for column in columns:
        table.add_column(column, no_wrap=True)
    for _, row in summary.iterrows():
        noisy = bool(row.get("jump_too_small")) if _notna(row.get("jump_too_small")) else False
        top = (
            "—"
            if not _notna(row["top_head"])
            else f"{row['top_head']} "
            + interval_text(row["top_delta"], row.get("top_delta_lo"), row.get("top_delta_hi"), signed=True)
        )
        cells = [run_label(row["model"], row["seed"]), *([] if one_task else [str(row["task"])])]
        cells += [
            fmt(row["emerged"]),
            f"{_step(row['pre_step'])} → {_step(row['post_step'])}",
            fmt(row["monotone"]),
            fmt(row["n_evaluations"]),
            f"{fmt(row['value_pre'])} → {fmt(row['value_post'])}",
            top,
            interval_text(
                row["recovered_top2"], row.get("recovered_top2_lo"), row.get("recovered_top2_hi"), 2, noisy=noisy
            ),
        ]
        table.add_row(*cells)
    Console(width=max(150, Console().width)).print(table)
    for r in report.runs:  # a run not emerged because its crossing has no room to hold: said, not a bare False
        if r.point.note:
            typer.echo(f"not emerged: {run_label(r.model, r.seed)}{'' if one_task else f' ({r.task})'}: {r.point.note}")
    if summary.get("jump_too_small", None) is not None and summary["jump_too_small"].fillna(False).astype(bool).any():
        typer.echo(f"{NOISY}: the run's jump is below 3 standard errors; its Δ and recovered compare against noise.")
    typer.echo("findings (computed from the tables; report.html opens with them):")
    for line in report.findings():
        typer.echo(f"- {line}")
    from interp.core.terms import rule_text

    typer.echo(f"point of emergence: {rule_text(report.hold)}")
    for line in report.hazards():  # duplicates excluded, missing steps, a listing from the cache
        typer.echo(f"hazard: {line}")
    typer.echo(
        f"wrote {out}/report.html and emergence/points/heads/topk/components/head_scores/checkpoints .csv/.parquet"
    )


def _step(value) -> str:
    """A training step for a table cell (``—`` when missing; never ``200.000``)."""
    return str(int(value)) if _notna(value) else "—"


def _notna(value) -> bool:
    """Whether a table cell holds a value (not None, NaN or pandas' NA)."""
    import pandas as pd

    return value is not None and bool(pd.notna(value))


@app.command()
@study_options(LOADING)
def curve(
    source: str = typer.Argument(..., help="Hub id (EleutherAI/pythia-70m-seed3), suite folder, or embedded name."),
    steps: str | None = typer.Option(
        None,
        help="Comma-separated steps, zoomed steps (emergence zoom) included "
        "(default: every searchable step of the base schedule).",
    ),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write emergence.csv here."),
    **settings,
):
    """Capability (greedy accuracy, p(answer)) per checkpoint."""
    config = StudyConfig(**settings)  # every setting checked here, once (no torch imported)
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out, task_files=task_file)
    wanted = parse_steps(steps) if steps else None
    check_sources([source])
    check_embedded_steps(source, wanted or [])
    check_tasks_on_sources([source], tasks, **options)
    import pandas as pd

    from interp.core.io import atomic_to_csv
    from interp.emergence import StepEvaluator
    from interp.main_job.report import EMERGENCE_COLUMNS, labelled
    from interp.sources.catalogue import model_and_seed, run_label

    frames = []
    for src in open_named([source], include_zoom=wanted is not None, **options):
        if wanted is not None:
            check_steps_available(src, wanted)
        model, seed = model_and_seed(src.model_id)
        for task_obj in tasks:
            batch = task_obj.build(src.tokenizer())
            evaluator = StepEvaluator(src, batch, device=device)
            for step in wanted if wanted is not None else src.searchable_steps():
                evaluator(step)
            frames.append(
                labelled(
                    evaluator.table(), model, seed, EMERGENCE_COLUMNS, task=task_obj.name, prepend_bos=batch.prepend_bos
                )
            )
        if wanted is None:  # the digests are known already; explicit steps need not read every step's
            from interp.sources.checkpoint_integrity import checkpoint_table, hazard_lines

            for line in hazard_lines(checkpoint_table(src), run_label(model, seed)):
                typer.echo(f"hazard: {line}", err=True)
        src.close()
    result = pd.concat(frames, ignore_index=True)
    typer.echo(result.to_string(index=False))
    if out is not None:
        atomic_to_csv(result, out / "emergence.csv")


@app.command()
@study_options(RULE + LOADING)
def bisect(
    source: list[str] = typer.Argument(..., help="One or more sources (hub ids, suite folders, embedded names)."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write points.csv, emergence.csv and checkpoints.csv here."),
    resolution: int | None = typer.Option(
        None, min=1, help="Locate the point to N steps by re-training denser checkpoints (runs trained here only)."
    ),
    dense_prompts: int = typer.Option(
        512, min=1, help="Prompts per checkpoint in the dense search (with --resolution)."
    ),
    **settings,
):
    """Point of emergence of each source by bisection over its checkpoints (post: the first checkpoint at or
    above the threshold that holds for the next --hold checkpoints); with --resolution N,
    zoom recursively into the bracketing interval down to N steps (see docs/embedded.md)."""
    config = StudyConfig(**settings)  # every setting checked here, once (no torch imported)
    check_sources(source)  # names next: a typo is refused before torch is imported
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out, task_files=task_file)
    config = config.replace(device=device)
    if resolution is not None:
        if [t.name for t in tasks] != ["repetition"]:
            raise ValueError(
                "--resolution re-trains and searches with the repetition task only; drop --task/--task-file"
            )
        for name in source:
            check_resumable(name, "bisect --resolution")
        return _bisect_dense(source, resolution, config, dense_prompts, length, out)
    import pandas as pd

    from interp.core.io import atomic_to_csv
    from interp.emergence import find_emergence
    from interp.main_job.report import CHECKPOINTS_COLUMNS, KEY_COLUMNS, labelled
    from interp.sources.catalogue import model_and_seed, run_label
    from interp.sources.checkpoint_integrity import checkpoint_table, hazard_lines

    check_tasks_on_sources(source, tasks, **options)
    points, curves, tables = [], [], []
    for src in open_named(source, **options):
        model, seed = model_and_seed(src.model_id)
        for task_obj in tasks:  # one point of emergence per (run, task)
            batch = task_obj.build(src.tokenizer())
            with warnings_as_lines():
                point = find_emergence(
                    src, batch, threshold=config.threshold, device=device, hold=config.hold, progress=False
                )
            points.append(
                {
                    "model": model,
                    "seed": seed,
                    "task": task_obj.name,
                    "prepend_bos": batch.prepend_bos,
                    **point.as_row(),
                }
            )
            table = point.evaluations.drop(columns="order")
            curves.append(
                labelled(
                    table,
                    model,
                    seed,
                    [*KEY_COLUMNS, *table.columns],
                    task=task_obj.name,
                    prepend_bos=batch.prepend_bos,
                )
            )
        checkpoints = checkpoint_table(src)
        tables.append(labelled(checkpoints, model, seed, CHECKPOINTS_COLUMNS))
        for line in hazard_lines(checkpoints, run_label(model, seed)):
            typer.echo(f"hazard: {line}", err=True)
        src.close()
    points_df = pd.DataFrame(points).astype({"pre_step": "Int64", "post_step": "Int64"})
    typer.echo(points_df.drop(columns="note").to_string(index=False))  # a note is said by its warning line
    if out is not None:
        atomic_to_csv(points_df, out / "points.csv")
        atomic_to_csv(pd.concat(curves, ignore_index=True), out / "emergence.csv")
        atomic_to_csv(pd.concat(tables, ignore_index=True), out / "checkpoints.csv")


def _bisect_dense(
    specs: list[str], resolution: int, config: StudyConfig, n_prompts: int, length: int, out: Path | None
) -> None:
    """``bisect --resolution``: :func:`interp.dense.dense_point` per run; points_dense.csv in OUT."""
    import pandas as pd

    from interp.core.io import atomic_to_csv
    from interp.dense import dense_point

    rows, curves = [], []
    for src in open_named(specs):
        point = dense_point(src, resolution, config, n_prompts=n_prompts, length=length)
        rows.append(point.as_row())
        curves.append(point.evaluations.assign(model_id=point.model_id))
        flag = "  (jump too small to divide by)" if point.jump_too_small else ""
        typer.echo(
            f"{point.model_id}: pre {point.pre_step} -> post {point.post_step} at {resolution}-step "
            f"resolution; accuracy {point.accuracy_pre} -> {point.accuracy_post}; p(answer) jump "
            f"{point.jump} ± {point.jump_se}{flag}; re-trained {point.retrained_steps} steps"
        )
    if out is not None:
        atomic_to_csv(pd.DataFrame(rows), out / "points_dense.csv")
        atomic_to_csv(pd.concat(curves, ignore_index=True), out / "emergence_dense.csv")
