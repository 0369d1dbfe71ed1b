"""The checkpoint-suite commands of ``emergence`` (mounted at the top level by
:mod:`emergence_lens.cli`): ``demo``, ``run``, ``curve``, ``bisect``, ``rank-heads``,
``decompose``, ``zoom``, ``readiness``, ``scrub``, ``train-suite``, ``list-models``, ``list-tasks``.

Over 600 lines because every command is a thin wrapper of a few lines (check the arguments,
make one call) and tests patch this module's helpers by name (``cli._open``); splitting the
commands into groups per module is left for when a group grows its own options.

Every command is one call of a public function that a notebook can make too, and checks all of
its arguments (device, task, sources, steps, output folder) before it loads or trains anything.
Commands raise ``ValueError`` for bad input; the root app turns any escaping error into one
line (``error: ...``, exit status 2). Heavy libraries are imported inside the commands.

Adding a command: write a function below with ``@app.command()``; check its arguments first
(the ``_check_*`` helpers), then make the one call. Nothing else needs registering.
"""

from __future__ import annotations

from pathlib import Path

import typer

app = typer.Typer(
    help="Checkpoint suites: point of emergence and the heads behind it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

TaskOpt = typer.Option(
    None,
    help="Capability task(s), comma-separated: repetition | token-repetition | "
    "pattern-completion | ioi | a .jsonl/.csv task file (see `emergence list-tasks`); "
    "default: repetition, or only the --task-file files when some are given.",
)
TaskFileOpt = typer.Option(
    None,
    "--task-file",
    help="Your own prompts (JSONL or CSV: prompt, answer, optional distractors, id); repeatable, added to --task.",
)
PromptsOpt = typer.Option(64, min=1, help="Number of prompts.")
LengthOpt = typer.Option(10, min=1, help="Random items per prompt before the partial repeat.")
ThresholdOpt = typer.Option(0.5, help="Greedy-accuracy threshold of the point of emergence, in (0, 1].")
HoldOpt = typer.Option(
    2,
    min=0,
    help="Point of emergence: post is the first checkpoint at or above the threshold "
    "that stays there at the next HOLD checkpoints (every remaining one near the end); "
    "0 = the first crossing.",
)
DeviceOpt = typer.Option("auto", help="torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:N.")
MethodOpt = typer.Option("fast", help="Patching engine: fast | reference | attribution.")
METHODS = ("fast", "reference", "attribution")


def _metric_option():
    """``--metric``: choices and help from the metric registry (:mod:`interp.core.metrics`, no torch import);
    default None: the task's own metric."""
    from interp.core.metrics import metric_help

    return typer.Option(None, "--metric", help=metric_help() + " Default: the task's own (`emergence list-tasks`).")


MetricOpt = _metric_option()


# -- argument checks (cheap; run before anything is loaded) -----------------------------------
def _check_common(
    device: str,
    task: str | None,
    n_prompts: int,
    length: int,
    out: Path | None,
    method: str = "fast",
    task_files: list[Path] | None = None,
):
    """Device, method, tasks (names and files; files read and checked for form) and output
    folder; returns (device, list of task objects)."""
    from interp.core.devices import check_device, choose_device
    from interp.core.io import check_out_dir

    check_device(device)  # form first: no torch import for a typo
    if method not in METHODS:
        raise ValueError(f"--method {method!r} is unknown; valid: {', '.join(METHODS)}")
    check_out_dir(out)
    from interp.task_registry import parse_tasks

    task = task if task is not None else ("" if task_files else "repetition")
    return choose_device(device), parse_tasks(task, task_files or (), n_prompts=n_prompts, length=length, seed=0)


def _one_task(tasks: list, command: str):
    """The single task of a command that works on one (rank-heads, decompose)."""
    if len(tasks) != 1:
        raise ValueError(
            f"{command} works on one task; got {len(tasks)} ({', '.join(t.name for t in tasks)}): give one --task"
        )
    return tasks[0]


def _check_threshold(threshold: float) -> None:
    """The greedy-accuracy threshold lies in (0, 1] (0 would call every checkpoint emerged)."""
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"--threshold {threshold:g} must be in (0, 1] (a greedy-accuracy fraction, e.g. 0.5)")


def _check_tasks_on_sources(names: list[str], tasks: list) -> None:
    """Build every task with each source's tokenizer before any checkpoint loads (a task file's
    answers must be one token; IOI needs single-token names). Embedded names use the byte
    tokenizer (nothing is trained here); other sources load their tokenizer files only."""
    from interp.sources.catalogue import is_embedded_name

    seen = set()
    for name in names:
        if is_embedded_name(name):
            key = "embedded"
            if key in seen:
                continue
            from interp.sources.common import make_byte_tokenizer

            tokenizer = make_byte_tokenizer()
            tokenizer.name_or_path = "embedded byte tokenizer"  # what error lines name
        else:
            from interp.sources.door import open_source

            key = name
            src = open_source(name)
            try:
                tokenizer = src.tokenizer()
            finally:
                src.close()
        seen.add(key)
        for task in tasks:
            task.build(tokenizer)


def _metric_for(metric: str | None, task) -> str:
    """``metric``, or the task's default metric when none is given."""
    from interp.task_registry import default_metric

    return metric or default_metric(task)


def _metric(metric: str | None) -> str | None:
    """The metric name (None: each task's default), checked before any work (one-line error
    naming the valid ones, from the registry)."""
    from interp.core.metrics import patching_metric_names

    if metric is not None and metric not in patching_metric_names():
        raise ValueError(f"metric={metric!r}; valid: {', '.join(patching_metric_names())} (--metric)")
    return metric


def _check_sources(names: list[str]) -> None:
    from interp.sources.door import check_source_name

    for name in names:
        check_source_name(name)


def _parse_steps(text: str) -> list[int]:
    """``"0,1000,2000"`` -> [0, 1000, 2000]; a bad item raises a one-line error naming it."""
    steps = []
    for item in text.split(","):
        try:
            steps.append(int(item.strip()))
        except ValueError:
            raise ValueError(f"--steps: {item.strip()!r} is not an integer step; expected e.g. 0,1000,2000") from None
    if any(step < 0 for step in steps):
        raise ValueError(f"--steps: {min(steps)} is negative; steps count from 0")
    return steps


def _check_steps_available(src, steps: list[int]) -> None:
    """Every step of ``steps`` is one the source holds (the error names the nearest ones) and its
    weight files are whole (the error names the corrupt file)."""
    from interp.sources.common import CheckpointError, nearest_steps

    available = sorted(src.available_steps())
    for step in steps:
        if step not in available:
            near = ", ".join(map(str, nearest_steps(step, available)))
            raise CheckpointError(f"{src.model_id} has no checkpoint at step {step}; nearest: {near}")
    for step in steps:  # a corrupt file: one line naming the step and the file, before any load
        reason = src.corrupt_reason(step)
        if reason is not None:
            raise CheckpointError(f"{src.model_id} step {step}: {reason}; pick another step (the search leaves it out)")


def _echo_duplicate_hazards(src, pre: int, post: int) -> None:
    """``hazard:`` lines when ``pre`` or ``post`` shares its weights with another step (at most one
    label of such a group is right, see ``CheckpointSource.duplicate_steps``); an error when
    ``pre`` and ``post`` themselves are identical (nothing to patch)."""
    if src.digest(pre) == src.digest(post):
        raise ValueError(
            f"{src.model_id}: steps {pre} and {post} have identical weights (digest "
            f"{src.digest(pre)[:12]}): nothing to patch; pick checkpoints that differ"
        )
    from interp.sources.common import CheckpointError

    try:
        groups = src.duplicate_groups()
    except (CheckpointError, ValueError):  # offline, a step's weights not cached: no digest to compare
        groups = []
    for group in groups:
        for step in (pre, post):
            if step in group:
                others = ", ".join(str(s) for s in group if s != step)
                typer.echo(
                    f"hazard: step {step} has the same weights as step {others} "
                    "(identical weights: at most one of the labels is right)"
                )


def _check_embedded_steps(name: str, steps: list[int]) -> None:
    """For an embedded name, the steps its suite will hold are known before it is trained: the
    schedule, plus the steps ``emergence zoom`` stored for the run if it is trained already."""
    from interp.sources.catalogue import is_embedded_name, resolve_embedded
    from interp.sources.common import CheckpointError, nearest_steps

    if not is_embedded_name(name):
        return
    from interp.sources.door import zoomed_steps

    for cfg, run in resolve_embedded(name):
        size = next(s for s in cfg.sizes if run.startswith(f"{s.name}-seed"))
        schedule = sorted(set(cfg.checkpoint_steps_for(size)) | set(zoomed_steps(name)))
        for step in steps:
            if step not in schedule:
                near = ", ".join(map(str, nearest_steps(step, schedule)))
                raise CheckpointError(f"embedded/{run} has no checkpoint at step {step}; nearest: {near}")


def _check_embedded_heads(name: str, heads) -> None:
    """For an embedded name, heads (``[(layer, head), ...]``) are checked against the suite's sizes
    before it is trained."""
    from interp.sources.catalogue import is_embedded_name, resolve_embedded

    if not is_embedded_name(name) or isinstance(heads, str):
        return
    for cfg, run in resolve_embedded(name):
        size = next(s for s in cfg.sizes if run.startswith(f"{s.name}-seed"))
        for layer, head in heads:
            if not (layer < size.n_layers and head < size.n_heads):
                raise ValueError(
                    f"--heads: L{layer}H{head} is outside {run} (layers 0..{size.n_layers - 1}, "
                    f"heads 0..{size.n_heads - 1})"
                )


def _check_resumable(name: str, what: str) -> None:
    """``name`` is a run trained here (embedded or a folder): a hub id carries no optimizer state."""
    from interp.sources.catalogue import is_embedded_name

    if not is_embedded_name(name) and not Path(name).expanduser().is_dir():
        raise ValueError(
            f"{name}: hub checkpoints carry no optimizer state; {what} needs a run trained by "
            "emergence-lens (an embedded run or a suite folder written by `emergence train-suite`)"
        )


def _open(names: list[str], include_zoom: bool = False) -> list:
    """Open the sources; ``include_zoom``: a run's zoomed steps are offered too (commands that
    take explicit steps; searches read the base schedule)."""
    from interp.sources.door import open_sources

    return open_sources(names, include_zoom=include_zoom)


def _open_step_pair(source: str, pre: int, post: int, command: str):
    """Open the one run ``command`` works on and check ``pre`` / ``post`` there: the embedded
    suite's steps before training it, the source's own steps after opening it, and steps with
    identical weights (:func:`_echo_duplicate_hazards`)."""
    from interp.sources.door import check_one_run

    check_one_run(source, command)
    _check_embedded_steps(source, [pre, post])
    (src,) = _open([source], include_zoom=True)
    _check_steps_available(src, [pre, post])
    _echo_duplicate_hazards(src, pre, post)
    return src


def _jump_flag(too_small: bool) -> str:
    """The CLI's flag of a jump below 3 standard errors (``interp.emergence.jump_noise``)."""
    return "  JUMP TOO SMALL: below 3 standard errors; the shares below divide by noise" if too_small else ""


class _warnings_as_lines:
    """Show the warnings a computation raises as ``warning: <message>`` lines on stderr (one each,
    once per message) instead of Python's two-line ``file:line: RuntimeWarning`` form."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self._caught = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        seen = set()
        for item in self._caught:
            text = str(item.message)
            if text not in seen and issubclass(item.category, RuntimeWarning):
                seen.add(text)
                typer.echo(f"warning: {text}", err=True)
        return False


def _open_as_ready(names: list[str]):
    """The main job's sources, handed out as each is ready (trained runs analysed while others train)."""
    from interp.sources.door import ReadySources

    return ReadySources(names)


# -- commands ---------------------------------------------------------------------------------
@app.command()
def demo(
    quick: bool = typer.Option(False, "--quick", help="Small suite for CI (about 2.5 min to train)."),
    out: Path = typer.Option(Path("results/demo"), help="Output folder."),
    method: str = MethodOpt,
    device: str = DeviceOpt,
    metric: str = MetricOpt,
    hold: int = HoldOpt,
):
    """Main job on the embedded default: train (once), find each seed's point of emergence,
    rank heads by delta (delta_p for --metric p), patch the top K jointly, write tables and report.html to OUT."""
    device, tasks = _check_common(device, "repetition", 64, 10, out, method)
    metric = _metric(metric)
    from interp.pipeline import run_main_job

    report = run_main_job(
        _open_as_ready(["embedded-quick" if quick else "embedded"]),
        task=tasks,
        scan=True,
        method=method,
        device=device,
        out_dir=out,
        metric=metric,
        hold=hold,
        title="emergence-lens: embedded default suite" + (" (quick)" if quick else ""),
    )
    _print_summary(report, out)


@app.command()
def run(
    source: list[str] = typer.Argument(
        ..., help="Sources: hub ids, suite folders, embedded, embedded-quick, embedded/<run>."
    ),
    out: Path = typer.Option(..., help="Output folder."),
    threshold: float = ThresholdOpt,
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    scan: bool = typer.Option(False, help="Evaluate every checkpoint (full curves) and take the point from the scan."),
    method: str = MethodOpt,
    prescreen_top_n: int | None = typer.Option(
        None, min=1, help="Exact per-head delta only for the attribution pre-screen's top N heads."
    ),
    device: str = DeviceOpt,
    metric: str = MetricOpt,
    hold: int = HoldOpt,
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
    dtype: str = typer.Option(
        "float32", help="Model precision: float32, bfloat16 or float16 (softmax and metric in float32)."
    ),
):
    """The main job (curve, point of emergence, head ranking, top-K, report) on any sources, for
    each task (--task a,b,FILE and --task-file), as resumable (source, task) units stored in
    OUT/units: a killed run started again does only the missing units."""
    _check_sources(source)  # names first: a typo is refused before torch is imported
    _check_threshold(threshold)
    device, tasks = _check_common(device, task, n_prompts, length, out, method, task_file)
    metric = _metric(metric)
    _check_tasks_on_sources(source, tasks)
    from interp.study import check_study_options, plan_units, run_study, study_status

    check_study_options(executor, jobs, dtype)
    if address is not None and executor != "ray":
        raise ValueError(f"--address {address!r} needs --executor ray (got {executor!r})")
    if dry_run:
        status = study_status(plan_units(source, tasks), out)
        for row in status.itertuples():
            typer.echo(f"{'done' if row.done else 'todo'}  {row.source}  {row.task}  {row.unit_id}")
        typer.echo(f"{int(status['done'].sum())} of {len(status)} units done in {out}/units")
        return
    report = run_study(
        source,
        out,
        tasks=tasks,
        executor=executor,
        jobs=jobs,
        address=address,
        threshold=threshold,
        scan=scan,
        method=method,
        prescreen_top_n=prescreen_top_n,
        device=device,
        metric=metric,
        dtype=dtype,
        hold=hold,
    )
    _print_summary(report, out)


def _print_summary(report, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from interp.sources.catalogue import run_label

    def fmt(value, spec=".3f"):
        if value is None or value != value:
            return "—"
        return format(value, spec) if isinstance(value, float) else str(value)

    from interp.core.metrics import metric_spec

    metrics = report.metrics() or ["p"]
    label = metric_spec(metrics[0]).label if len(metrics) == 1 else "metric"
    unit = metric_spec(metrics[0]).unit if len(metrics) == 1 else "metric units"
    table = Table(title=f"Points of emergence and top heads (metric {', '.join(metrics)}: {label}, {unit})")
    for column in [
        "run",
        "task",
        "emerged",
        "pre → post",
        "monotone",
        "evals",
        f"{label} pre → post",
        f"top head (Δ {label})",
        "recovered K=2",
        "pre-screen ρ",
    ]:
        table.add_column(column)
    for _, row in report.summary().iterrows():
        table.add_row(
            run_label(row["model"], row["seed"]),
            str(row["task"]),
            fmt(row["emerged"]),
            f"{fmt(row['pre_step'])} → {fmt(row['post_step'])}",
            fmt(row["monotone"]),
            fmt(row["n_evaluations"]),
            f"{fmt(row['value_pre'])} → {fmt(row['value_post'])}",
            "—" if row["top_head"] is None else f"{row['top_head']} ({row['top_delta']:+.3f})",
            fmt(row["recovered_top2"]),
            fmt(row["prescreen_spearman"], ".2f"),
        )
    Console(width=max(120, Console().width)).print(table)
    from interp.emergence import rule_text

    typer.echo(f"point of emergence: {rule_text(report.hold)}")
    for line in report.hazards():  # duplicates excluded, missing steps, a listing from the cache
        typer.echo(f"hazard: {line}")
    typer.echo(
        f"wrote {out}/report.html and emergence/points/heads/topk/components/head_scores/checkpoints .csv/.parquet"
    )


@app.command()
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
    device: str = DeviceOpt,
):
    """Capability (greedy accuracy, p(answer)) per checkpoint."""
    device, tasks = _check_common(device, task, n_prompts, length, out, task_files=task_file)
    wanted = _parse_steps(steps) if steps else None
    _check_sources([source])
    _check_embedded_steps(source, wanted or [])
    _check_tasks_on_sources([source], tasks)
    import pandas as pd

    from interp.core.io import atomic_to_csv
    from interp.emergence import StepEvaluator
    from interp.pipeline import EMERGENCE_COLUMNS, labelled
    from interp.sources.catalogue import model_and_seed, run_label

    frames = []
    for src in _open([source], include_zoom=wanted is not None):
        if wanted is not None:
            _check_steps_available(src, wanted)
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
def bisect(
    source: list[str] = typer.Argument(..., help="One or more sources (hub ids, suite folders, embedded names)."),
    threshold: float = ThresholdOpt,
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write points.csv, emergence.csv and checkpoints.csv here."),
    device: str = DeviceOpt,
    resolution: int | None = typer.Option(
        None, min=1, help="Locate the point to N steps by re-training denser checkpoints (runs trained here only)."
    ),
    dense_prompts: int = typer.Option(
        512, min=1, help="Prompts per checkpoint in the dense search (with --resolution)."
    ),
    hold: int = HoldOpt,
):
    """Point of emergence of each source by bisection over its checkpoints (post: the first checkpoint at or
    above the threshold that holds for the next --hold checkpoints); with --resolution N,
    zoom recursively into the bracketing interval down to N steps (see docs/embedded.md)."""
    _check_sources(source)  # names first: a typo is refused before torch is imported
    _check_threshold(threshold)
    device, tasks = _check_common(device, task, n_prompts, length, out, task_files=task_file)
    if resolution is not None:
        if [t.name for t in tasks] != ["repetition"]:
            raise ValueError(
                "--resolution re-trains and searches with the repetition task only; drop --task/--task-file"
            )
        for name in source:
            _check_resumable(name, "bisect --resolution")
        return _bisect_dense(source, resolution, threshold, dense_prompts, hold, length, out)
    import pandas as pd

    from interp.core.io import atomic_to_csv
    from interp.emergence import find_emergence
    from interp.pipeline import CHECKPOINTS_COLUMNS, KEY_COLUMNS, labelled
    from interp.sources.catalogue import model_and_seed, run_label
    from interp.sources.checkpoint_integrity import checkpoint_table, hazard_lines

    _check_tasks_on_sources(source, tasks)
    points, curves, tables = [], [], []
    for src in _open(source):
        model, seed = model_and_seed(src.model_id)
        for task_obj in tasks:  # one point of emergence per (run, task)
            batch = task_obj.build(src.tokenizer())
            point = find_emergence(src, batch, threshold=threshold, device=device, hold=hold)
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
    typer.echo(points_df.to_string(index=False))
    if out is not None:
        atomic_to_csv(points_df, out / "points.csv")
        atomic_to_csv(pd.concat(curves, ignore_index=True), out / "emergence.csv")
        atomic_to_csv(pd.concat(tables, ignore_index=True), out / "checkpoints.csv")


def _bisect_dense(
    specs: list[str], resolution: int, threshold: float, n_prompts: int, hold: int, length: int, out: Path | None
) -> None:
    """``bisect --resolution``: :func:`interp.zoom.dense_point` per run; points_dense.csv in OUT."""
    import pandas as pd

    from interp.core.io import atomic_to_csv
    from interp.zoom import dense_point

    rows, curves = [], []
    for src in _open(specs):
        point = dense_point(
            src, resolution=resolution, threshold=threshold, n_prompts=n_prompts, hold=hold, length=length
        )
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


@app.command("rank-heads")
def rank_heads(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    pre: int = typer.Option(..., min=0, help="Pre-emergence step: of the schedule, or one `emergence zoom` stored."),
    post: int = typer.Option(..., min=0, help="Post-emergence step (later than --pre; zoomed steps too)."),
    method: str = MethodOpt,
    prescreen_top_n: int | None = typer.Option(
        None, min=1, help="Exact per-head delta only for the attribution pre-screen's top N heads."
    ),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write heads.csv and topk.csv here."),
    device: str = DeviceOpt,
    metric: str = MetricOpt,
):
    """Patch each head's attention pattern from POST into PRE; rank by delta (metric units); joint top-K."""
    if pre == post:
        raise ValueError(f"--pre and --post are both {pre}: patching needs two different checkpoints")
    if pre > post:
        raise ValueError(
            f"--pre {pre} is later than --post {post}: --post must be the later checkpoint "
            "(patterns are patched from post into pre)"
        )
    device, tasks = _check_common(device, task, n_prompts, length, out, method, task_file)
    task_obj = _one_task(tasks, "rank-heads")
    metric = _metric_for(_metric(metric), task_obj)
    _check_tasks_on_sources([source], tasks)
    src = _open_step_pair(source, pre, post, "rank-heads")
    from interp.core.io import atomic_to_csv
    from interp.pipeline import HEADS_COLUMNS, TOPK_COLUMNS, labelled
    from interp.ranking import rank_heads_between
    from interp.sources.catalogue import model_and_seed

    batch = task_obj.build(src.tokenizer())
    with _warnings_as_lines():
        result = rank_heads_between(
            src, pre, post, batch, method=method, prescreen_top_n=prescreen_top_n, device=device, metric=metric
        )
    model, seed = model_and_seed(src.model_id)
    heads = labelled(result.heads, model, seed, HEADS_COLUMNS, task=task_obj.name, prepend_bos=batch.prepend_bos)
    topk = labelled(result.topk, model, seed, TOPK_COLUMNS, task=task_obj.name, prepend_bos=batch.prepend_bos)
    typer.echo(
        f"metric={result.metric} ({result.unit}) pre={result.value_pre:.4f} post={result.value_post:.4f} "
        f"jump={result.value_post - result.value_pre:.4f} ± {result.jump_se:.4f}{_jump_flag(result.jump_too_small)}"
    )
    typer.echo(heads.head(10).to_string(index=False))
    if out is not None:
        atomic_to_csv(heads, out / "heads.csv")
        atomic_to_csv(topk, out / "topk.csv")


@app.command("decompose")
def decompose(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    pre: int = typer.Option(..., min=0, help="Pre-emergence step: of the schedule, or one `emergence zoom` stored."),
    post: int = typer.Option(..., min=0, help="Post-emergence step (later than --pre; zoomed steps too)."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write components.csv here."),
    device: str = DeviceOpt,
    metric: str = MetricOpt,
):
    """Share of the PRE -> POST jump each component recovers when patched from POST into PRE."""
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    device, tasks = _check_common(device, task, n_prompts, length, out, task_files=task_file)
    task_obj = _one_task(tasks, "decompose")
    metric = _metric_for(_metric(metric), task_obj)
    _check_tasks_on_sources([source], tasks)
    src = _open_step_pair(source, pre, post, "decompose")
    from interp.core.io import atomic_to_csv
    from interp.ranking import decompose_between

    batch = task_obj.build(src.tokenizer())
    with _warnings_as_lines():
        table = decompose_between(src, pre, post, batch, metric=metric, device=device).assign(
            task=task_obj.name, prepend_bos=batch.prepend_bos
        )
    columns = ["target", "scope", "k", "heads", "value", "recovered", "recovered_lo", "recovered_hi"]
    first = table.iloc[0]
    typer.echo(
        f"metric={metric} ({first['unit']}) pre={first['value_pre']:.4f} post={first['value_post']:.4f} "
        f"jump={first['value_post'] - first['value_pre']:.4f} ± {first['jump_se']:.4f}"
        f"{_jump_flag(bool(first['jump_too_small']))}"
    )
    typer.echo(table[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if out is not None:
        atomic_to_csv(table, out / "components.csv")


@app.command()
def zoom(
    source: str = typer.Argument(..., help="One run trained here: embedded/<run> or its folder."),
    pre: int = typer.Option(..., min=0, help="Stored step to re-train from (base schedule or zoomed)."),
    post: int = typer.Option(..., min=0, help="Stored step to re-train to (its weights are checked; base or zoomed)."),
    every: int | None = typer.Option(None, min=1, help="Spacing of the new checkpoints (default: >= 10 new)."),
    tolerance: float = typer.Option(0.0, min=0.0, help="Largest accepted max |diff| at POST (0: bit for bit)."),
):
    """Re-train PRE -> POST from PRE's saved state and store checkpoints every K steps in the run's
    zoom overlay (RUN/zoom/); the base schedule is left as it is."""
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    if every is not None and every >= post - pre:
        raise ValueError(
            f"--every {every} leaves no step strictly between --pre {pre} and --post {post}; "
            f"use --every below {post - pre}"
        )
    from interp.sources.door import check_one_run

    check_one_run(source, "zoom")
    _check_resumable(source, "zoom")
    _check_embedded_steps(source, [pre, post])
    from interp.zoom import zoom as zoom_run

    (src,) = _open([source])
    result = zoom_run(src, pre, post, every=every, tolerance=tolerance)
    typer.echo(
        f"{result.run}: re-trained {result.trained_steps} steps ({result.pre} -> {result.post}) in "
        f"{result.seconds:.1f} s with {result.threads} thread(s); max |diff| at step {result.post}: "
        f"{result.max_abs_diff:.3g} (tolerance {result.tolerance:g}); stored {len(result.new_steps)} new "
        f"steps every {result.every}: {result.new_steps}"
    )


@app.command("readiness")
def readiness_command(
    source: list[str] = typer.Argument(..., help="One or more sources (hub ids, suite folders, embedded names)."),
    heads: str = typer.Option(
        "auto", help="auto (highest prefix-matching and previous-token heads at the post step) or heads as L1H0,L0H2."
    ),
    patterns: str = typer.Option(
        "auto",
        help="auto (by each head's scores at the post step), one ideal pattern "
        "for every head, or one per head: previous_token | induction | duplicate_token | "
        "first_token | uniform.",
    ),
    threshold: float = ThresholdOpt,
    hold: int = typer.Option(
        2, min=0, help="Checkpoints after a crossing that must stay above the threshold (E and R)."
    ),
    steps: str | None = typer.Option(None, help="Comma-separated steps (default: every searchable step)."),
    n_boot: int = typer.Option(1000, min=1, help="Bootstrap resamples over prompts for the interval of E - R."),
    method: str = typer.Option("fast", help="Patching engine: fast | reference."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write readiness.csv, readiness_points.csv and readiness.html here."),
    device: str = DeviceOpt,
):
    """Per checkpoint, capability as trained and with the chosen heads' attention patterns set to
    their ideal pattern; the readiness step R and E - R (see interp/readiness.py)."""
    from interp.readiness import parse_heads, parse_patterns

    chosen = parse_heads(heads)
    names = parse_patterns(patterns, None if chosen == "auto" else len(chosen))
    if method not in ("fast", "reference"):
        raise ValueError(f"--method {method!r} is unknown; valid: fast, reference")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"--threshold {threshold} must be in (0, 1]")
    wanted = _parse_steps(steps) if steps else None
    _check_sources(source)
    device, tasks = _check_common(device, task, n_prompts, length, out, method, task_file)
    task_obj = _one_task(tasks, "readiness")
    _check_tasks_on_sources(source, tasks)
    for name in source:
        _check_embedded_steps(name, wanted or [])
        _check_embedded_heads(name, chosen)
    import pandas as pd

    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.readiness import POINTS_COLUMNS, readiness, readiness_page

    results = []
    for src in _open(source):
        if wanted is not None:
            _check_steps_available(src, wanted)
        result = readiness(
            src,
            task_obj.build(src.tokenizer()),
            heads=chosen,
            patterns=names,
            threshold=threshold,
            hold=hold,
            steps=wanted,
            device=device,
            method=method,
            n_boot=n_boot,
        )
        results.append(result)
        src.close()
    points = pd.DataFrame([r.point_row() for r in results], columns=POINTS_COLUMNS)
    typer.echo(points.to_string(index=False))
    if out is not None:
        atomic_to_csv(pd.concat([r.table() for r in results], ignore_index=True), out / "readiness.csv")
        atomic_to_csv(points, out / "readiness_points.csv")
        atomic_write_text(out / "readiness.html", readiness_page(results))


def _check_page_path(out: Path) -> Path:
    """An ``--out`` page path: ends with .html, is not a folder, and no file lies on its way."""
    from interp.core.io import check_out_dir

    out = Path(out).expanduser()
    if out.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"--out {str(out)!r}: expected a page path ending with .html")
    if out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a folder; expected a page path ending with .html")
    check_out_dir(out.parent)
    return out


def _read_ranking(path: Path):
    """A heads table (``rank-heads --out``'s heads.csv: layer, head, delta; ``delta_p`` in tables written
    before the columns followed the metric), read before any loading."""
    import pandas as pd

    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"--heads {str(path)!r} is not a file; expected heads.csv written by emergence rank-heads/run")
    try:
        table = pd.read_csv(path)
    except Exception as err:  # a file pandas cannot parse: one line naming it
        raise ValueError(f"--heads {str(path)!r} is not a CSV table ({type(err).__name__})") from None
    if "delta" in table.columns:  # today's heads.csv: the per-head change in the metric's unit
        table = table.rename(columns={"delta": "delta_p"})
    if not {"layer", "head", "delta_p"} <= set(table.columns):
        raise ValueError(f"--heads {str(path)!r} has columns {list(table.columns)}; expected layer, head, delta")
    return table


@app.command()
def scrub(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    out: Path = typer.Option(..., help="The page to write (.html)."),
    steps: str | None = typer.Option(None, help="Comma-separated steps (default: every checkpoint, zoomed steps too)."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    prompts: int = typer.Option(4, min=1, max=32, help="Prompts of the task the page's chooser offers."),
    heads: Path | None = typer.Option(
        None, help="heads.csv of a ranking (rank-heads/run): Δp per head beside the grid."
    ),
    scores: bool = typer.Option(True, help="Head scores (previous-token, prefix-matching, copying) per checkpoint."),
    threshold: float = ThresholdOpt,
    device: str = DeviceOpt,
):
    """One offline page: every head's attention pattern on a prompt at each checkpoint, a step
    slider (arrow keys, play), the change since the previous step, and the capability curve,
    head scores and Δp beside it."""
    from interp.sources.door import check_one_run

    check_one_run(source, "scrub")
    out = _check_page_path(out)
    wanted = _parse_steps(steps) if steps else None
    device, tasks = _check_common(device, task, n_prompts, length, None)
    task_obj = _one_task(tasks, "scrub")
    _check_tasks_on_sources([source], tasks)
    ranking = _read_ranking(heads) if heads is not None else None
    _check_embedded_steps(source, wanted or [])
    (src,) = _open([source])
    if wanted is not None:
        _check_steps_available(src, wanted)
    if ranking is not None and {"model", "seed"} <= set(ranking.columns):
        from interp.pipeline import model_and_seed

        model, seed = model_and_seed(src.model_id)
        mine = ranking[(ranking["model"] == model) & (ranking["seed"] == seed)]
        if len(mine) == 0 and ranking[["model", "seed"]].drop_duplicates().shape[0] > 1:
            raise ValueError(f"--heads {str(heads)!r} has no rows for {model} seed {seed}")
        ranking = mine if len(mine) else ranking
    from interp.scrubbing import scrubber

    page = scrubber(
        src,
        task=task_obj,
        steps=wanted,
        n_prompts=prompts,
        device=device,
        scores=scores,
        ranking=ranking,
        threshold=threshold,
    )
    page.save_html(out)
    data = page.data
    typer.echo(
        f"wrote {out}: {len(data.steps)} checkpoints ({len(data.zoom_steps)} zoomed) x "
        f"{data.patterns.shape[2] * data.patterns.shape[3]} heads x {len(data.tokens)} prompts of "
        f"{data.patterns.shape[-1]} tokens; {out.stat().st_size / 1e6:.2f} MB"
    )
    src.close()


@app.command("train-suite")
def train_suite(quick: bool = typer.Option(False, "--quick", help="The CI-sized suite.")):
    """Train (or find in the cache) the embedded default suite and print its run folders."""
    from interp.sources import embedded

    for path in embedded.ensure_suite(embedded.QUICK if quick else embedded.FULL):
        typer.echo(str(path))


@app.command("list-models")
def list_models():
    """Print the known model families (id patterns, revision names), then every source name
    accepted above: Pythia / PolyPythia hub ids and embedded names."""
    from interp.sources.catalogue import embedded_source_names, pythia_model_ids
    from interp.sources.families import FAMILIES

    for family in FAMILIES:
        typer.echo(
            f"# {family.name}: ids {family.id_pattern}  revisions {family.revision_format}  "
            f"({family.architecture}; {family.schedule}); e.g. {', '.join(family.example_ids)}"
        )
    typer.echo(
        "# any other org/name repo whose branches name steps (step{N}[-tokens{M}B], "
        "stage{k}[-ingredient{j}]-step{N}-tokens{M}B); ID:SERIES picks a series, e.g. "
        "allenai/OLMo-2-1124-7B:stage2-ingredient1"
    )

    notes = {"embedded": "(every run of the default suite)", "embedded-quick": "(every run of the CI-sized suite)"}
    for name in pythia_model_ids() + embedded_source_names():
        typer.echo(f"{name:<15} {notes[name]}" if name in notes else name)


@app.command("list-tasks")
def list_tasks():
    """Print every capability task: its parameters, default metric, BOS convention and source
    (:data:`interp.task_registry.REGISTRY`)."""
    from interp.task_registry import task_table

    for _, row in task_table().iterrows():
        typer.echo(f"{row['task']}: {row['description']}")
        typer.echo(f"    parameters: {row['parameters']}")
        typer.echo(
            f"    default metric: {row['default_metric']}; prepend_bos: {row['prepend_bos']}; "
            f"embedded byte tokenizer: {'yes' if row['byte_tokenizer'] else 'no (needs a word-piece vocabulary)'}"
        )
        typer.echo(f"    source: {row['source']}")
