"""The checkpoint-suite commands of ``emergence`` (mounted at the top level by
:mod:`emergence_lens.cli`): ``demo``, ``run``, ``curve``, ``bisect``, ``rank-heads``,
``decompose``, ``zoom``, ``train-suite``, ``list-models``.

Every command is one call of a public function that a notebook can make too, and checks all of
its arguments (device, task, sources, steps, output folder) before it loads or trains anything.
Commands raise ``ValueError`` for bad input; the root app turns any escaping error into one
line (``error: ...``, exit status 2). Heavy libraries are imported inside the commands.

Adding a command: write a function below with ``@app.command()``; check its arguments first
(the ``_check_*`` helpers), then make the one call. Nothing else needs registering.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(help="Checkpoint suites: point of emergence and the heads behind it.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

TaskOpt = typer.Option("repetition", help="Capability task: repetition | token-repetition.")
PromptsOpt = typer.Option(64, min=1, help="Number of prompts.")
LengthOpt = typer.Option(10, min=1, help="Random items per prompt before the partial repeat.")
ThresholdOpt = typer.Option(0.5, min=0.0, max=1.0, help="Greedy-accuracy threshold of the point of emergence.")
DeviceOpt = typer.Option("auto", help="torch device: auto (cuda if available, else cpu), cpu, cuda, cuda:N.")
MethodOpt = typer.Option("fast", help="Patching engine: fast | reference | attribution.")
METHODS = ("fast", "reference", "attribution")
MetricOpt = typer.Option("p", "--metric", help="Patching metric: p (probability of the answer) | logprob | "
                         "logit-diff (answer logit minus the largest distractor logit).")


# -- argument checks (cheap; run before anything is loaded) -----------------------------------
def _check_common(device: str, task: str, n_prompts: int, length: int, out: Optional[Path],
                  method: str = "fast"):
    """Device, method, task and output folder; returns (device, task object)."""
    from interp.devices import choose_device, check_device
    from interp.io import check_out_dir

    check_device(device)  # form first: no torch import for a typo
    if method not in METHODS:
        raise ValueError(f"--method {method!r} is unknown; valid: {', '.join(METHODS)}")
    check_out_dir(out)
    from interp.tasks import make_task

    return choose_device(device), make_task(task, n_prompts=n_prompts, length=length, seed=0)


def _metric(metric: str) -> str:
    """The metric name, checked before any work (one-line error naming the valid ones)."""
    from interp.patching.metrics import resolve_metric

    resolve_metric(metric)
    return metric


def _check_sources(names: List[str]) -> None:
    from interp.sources import check_source_name

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


def _check_steps_available(src, steps: List[int]) -> None:
    """Every step of ``steps`` is one the source holds (the error names the nearest ones)."""
    from interp.checkpoints import CheckpointError, nearest_steps

    available = sorted(src.available_steps())
    for step in steps:
        if step not in available:
            near = ", ".join(map(str, nearest_steps(step, available)))
            raise CheckpointError(f"{src.model_id} has no checkpoint at step {step}; nearest: {near}")


def _echo_duplicate_hazards(src, pre: int, post: int) -> None:
    """``hazard:`` lines when ``pre`` or ``post`` shares its weights with another step (at most one
    label of such a group is right, see ``CheckpointSource.duplicate_steps``); an error when
    ``pre`` and ``post`` themselves are identical (nothing to patch)."""
    if src.digest(pre) == src.digest(post):
        raise ValueError(f"{src.model_id}: steps {pre} and {post} have identical weights (digest "
                         f"{src.digest(pre)[:12]}): nothing to patch; pick checkpoints that differ")
    from interp.checkpoints import CheckpointError

    try:
        groups = src.duplicate_groups()
    except (CheckpointError, ValueError):  # offline, a step's weights not cached: no digest to compare
        groups = []
    for group in groups:
        for step in (pre, post):
            if step in group:
                others = ", ".join(str(s) for s in group if s != step)
                typer.echo(f"hazard: step {step} has the same weights as step {others} "
                           "(identical weights: at most one of the labels is right)")


def _check_embedded_steps(name: str, steps: List[int]) -> None:
    """For an embedded name, the steps its suite will hold are known before it is trained."""
    from interp.catalogue import is_embedded_name, resolve_embedded
    from interp.checkpoints import CheckpointError, nearest_steps

    if not is_embedded_name(name):
        return
    for cfg, run in resolve_embedded(name):
        size = next(s for s in cfg.sizes if run.startswith(f"{s.name}-seed"))
        schedule = list(cfg.checkpoint_steps_for(size))
        for step in steps:
            if step not in schedule:
                near = ", ".join(map(str, nearest_steps(step, schedule)))
                raise CheckpointError(f"embedded/{run} has no checkpoint at step {step}; nearest: {near}")


def _open(names: List[str]) -> list:
    from interp.sources import open_sources

    return open_sources(names)


def _open_step_pair(source: str, pre: int, post: int, command: str):
    """Open the one run ``command`` works on and check ``pre`` / ``post`` there: the embedded
    suite's steps before training it, the source's own steps after opening it, and steps with
    identical weights (:func:`_echo_duplicate_hazards`)."""
    from interp.sources import check_one_run

    check_one_run(source, command)
    _check_embedded_steps(source, [pre, post])
    (src,) = _open([source])
    _check_steps_available(src, [pre, post])
    _echo_duplicate_hazards(src, pre, post)
    return src


def _open_as_ready(names: List[str]):
    """The main job's sources, handed out as each is ready (trained runs analysed while others train)."""
    from interp.sources import ReadySources

    return ReadySources(names)


# -- commands ---------------------------------------------------------------------------------
@app.command()
def demo(
    quick: bool = typer.Option(False, "--quick", help="Small suite for CI (about 2.5 min to train)."),
    out: Path = typer.Option(Path("results/demo"), help="Output folder."),
    method: str = MethodOpt,
    device: str = DeviceOpt,
    metric: str = MetricOpt,
):
    """Main job on the embedded default: train (once), find each seed's point of emergence,
    rank heads by delta_p, patch the top K jointly, write tables and report.html to OUT."""
    device, task = _check_common(device, "repetition", 64, 10, out, method)
    metric = _metric(metric)
    from interp.pipeline import run_main_job

    report = run_main_job(_open_as_ready(["embedded-quick" if quick else "embedded"]), task=task, scan=True,
                          method=method, device=device, out_dir=out, metric=metric,
                          title="emergence-lens: embedded default suite" + (" (quick)" if quick else ""))
    _print_summary(report, out)


@app.command()
def run(
    source: List[str] = typer.Argument(..., help="Sources: hub ids, suite folders, embedded, embedded-quick, embedded/<run>."),
    out: Path = typer.Option(..., help="Output folder."),
    threshold: float = ThresholdOpt, task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    scan: bool = typer.Option(False, help="Evaluate every checkpoint too (full curves)."),
    method: str = MethodOpt,
    prescreen_top_n: Optional[int] = typer.Option(None, min=1, help="Exact delta_p only for the attribution pre-screen's top N heads."),
    device: str = DeviceOpt,
    metric: str = MetricOpt,
    executor: str = typer.Option("local", help="Where units run: local (this process), joblib (JOBS processes), "
                                 "ray (a local Ray with JOBS CPUs, or the cluster at --address)."),
    jobs: int = typer.Option(1, help="Worker processes (joblib) or CPUs of a local Ray."),
    address: Optional[str] = typer.Option(None, help="An existing Ray cluster (ray://head:10001 or auto)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the (source, task) units and which are done; run nothing."),
    dtype: str = typer.Option("float32", help="Model precision: float32, bfloat16 or float16 (softmax and metric in float32)."),
):
    """The main job (curve, point of emergence, head ranking, top-K, report) on any sources, as
    resumable (source, task) units stored in OUT/units: a killed run started again does only the
    missing units."""
    _check_sources(source)  # names first: a typo is refused before torch is imported
    device, task_obj = _check_common(device, task, n_prompts, length, out, method)
    metric = _metric(metric)
    from interp.study import check_study_options, plan_units, run_study, study_status

    check_study_options(executor, jobs, dtype)
    if address is not None and executor != "ray":
        raise ValueError(f"--address {address!r} needs --executor ray (got {executor!r})")
    if dry_run:
        status = study_status(plan_units(source, [task_obj]), out)
        for row in status.itertuples():
            typer.echo(f"{'done' if row.done else 'todo'}  {row.source}  {row.task}  {row.unit_id}")
        typer.echo(f"{int(status['done'].sum())} of {len(status)} units done in {out}/units")
        return
    report = run_study(source, out, tasks=[task_obj], executor=executor, jobs=jobs, address=address,
                       threshold=threshold, scan=scan, method=method, prescreen_top_n=prescreen_top_n,
                       device=device, metric=metric, dtype=dtype)
    _print_summary(report, out)


def _print_summary(report, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from interp.catalogue import run_label

    def fmt(value, spec=".3f"):
        if value is None or value != value:
            return "—"
        return format(value, spec) if isinstance(value, float) else str(value)

    table = Table(title="Points of emergence and top heads")
    for column in ["run", "emerged", "pre → post", "evals", "p pre → post", "top head (Δp)", "recovered K=2", "pre-screen ρ"]:
        table.add_column(column)
    for _, row in report.summary().iterrows():
        table.add_row(
            run_label(row["model"], row["seed"]), fmt(row["emerged"]),
            f"{fmt(row['pre_step'])} → {fmt(row['post_step'])}", fmt(row["n_evaluations"]),
            f"{fmt(row['p_pre'])} → {fmt(row['p_post'])}",
            "—" if row["top_head"] is None else f"{row['top_head']} ({row['top_delta_p']:+.3f})",
            fmt(row["recovered_top2"]), fmt(row["prescreen_spearman"], ".2f"),
        )
    Console(width=max(120, Console().width)).print(table)
    for line in report.hazards():  # duplicates excluded, missing steps, a listing from the cache
        typer.echo(f"hazard: {line}")
    typer.echo(f"wrote {out}/report.html and emergence/points/heads/topk/components/head_scores/checkpoints "
               ".csv/.parquet")


@app.command()
def curve(
    source: str = typer.Argument(..., help="Hub id (EleutherAI/pythia-70m-seed3), suite folder, or embedded name."),
    steps: Optional[str] = typer.Option(None, help="Comma-separated steps (default: every searchable step)."),
    task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write emergence.csv here."),
    device: str = DeviceOpt,
):
    """Capability (greedy accuracy, p(answer)) per checkpoint."""
    device, task_obj = _check_common(device, task, n_prompts, length, out)
    wanted = _parse_steps(steps) if steps else None
    _check_sources([source])
    _check_embedded_steps(source, wanted or [])
    import pandas as pd

    from interp.catalogue import run_label
    from interp.emergence import StepEvaluator
    from interp.io import atomic_to_csv
    from interp.pipeline import EMERGENCE_COLUMNS, _labelled, model_and_seed

    frames = []
    for src in _open([source]):
        if wanted is not None:
            _check_steps_available(src, wanted)
        evaluator = StepEvaluator(src, task_obj.build(src.tokenizer()), device=device)
        for step in wanted if wanted is not None else src.searchable_steps():
            evaluator(step)
        model, seed = model_and_seed(src.model_id)
        if wanted is None:  # the digests are known already; explicit steps need not read every step's
            from interp.checkpoints import checkpoint_table, hazard_lines

            for line in hazard_lines(checkpoint_table(src), run_label(model, seed)):
                typer.echo(f"hazard: {line}", err=True)
        frames.append(_labelled(evaluator.table(), model, seed, EMERGENCE_COLUMNS))
        src.close()
    result = pd.concat(frames, ignore_index=True)
    typer.echo(result.to_string(index=False))
    if out is not None:
        atomic_to_csv(result, out / "emergence.csv")


@app.command()
def bisect(
    source: List[str] = typer.Argument(..., help="One or more sources (hub ids, suite folders, embedded names)."),
    threshold: float = ThresholdOpt, task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write points.csv, emergence.csv and checkpoints.csv here."),
    device: str = DeviceOpt,
    resolution: Optional[int] = typer.Option(
        None, min=1, help="Locate the point to N steps by re-training denser checkpoints (runs trained here only)."),
    dense_prompts: int = typer.Option(512, min=1, help="Prompts per checkpoint in the dense search (with --resolution)."),
    hold: int = typer.Option(2, min=0, help="Dense search: checkpoints after the crossing that must stay above the threshold."),
):
    """Point of emergence of each source by bisection over its checkpoints; with --resolution N,
    zoom recursively into the bracketing interval down to N steps (see docs/embedded.md)."""
    _check_sources(source)  # names first: a typo is refused before torch is imported
    device, task_obj = _check_common(device, task, n_prompts, length, out)
    if resolution is not None:
        return _bisect_dense(source, resolution, threshold, dense_prompts, hold, length, out)
    import pandas as pd

    from interp.catalogue import run_label
    from interp.checkpoints import checkpoint_table, hazard_lines
    from interp.emergence import find_emergence
    from interp.io import atomic_to_csv
    from interp.pipeline import CHECKPOINTS_COLUMNS, _labelled, model_and_seed

    points, curves, tables = [], [], []
    for src in _open(source):
        point = find_emergence(src, task_obj.build(src.tokenizer()), threshold=threshold, device=device)
        model, seed = model_and_seed(src.model_id)
        points.append({"model": model, "seed": seed, **point.as_row()})
        table = point.evaluations.drop(columns="order")
        curves.append(_labelled(table, model, seed, ["model", "seed", *table.columns]))
        checkpoints = checkpoint_table(src)
        tables.append(_labelled(checkpoints, model, seed, CHECKPOINTS_COLUMNS))
        for line in hazard_lines(checkpoints, run_label(model, seed)):
            typer.echo(f"hazard: {line}", err=True)
        src.close()
    points_df = pd.DataFrame(points).astype({"pre_step": "Int64", "post_step": "Int64"})
    typer.echo(points_df.to_string(index=False))
    if out is not None:
        atomic_to_csv(points_df, out / "points.csv")
        atomic_to_csv(pd.concat(curves, ignore_index=True), out / "emergence.csv")
        atomic_to_csv(pd.concat(tables, ignore_index=True), out / "checkpoints.csv")


def _bisect_dense(specs: List[str], resolution: int, threshold: float, n_prompts: int, hold: int,
                  length: int, out: Optional[Path]) -> None:
    """``bisect --resolution``: :func:`interp.zoom.dense_point` per run; points_dense.csv in OUT."""
    import pandas as pd

    from interp.io import atomic_to_csv
    from interp.zoom import dense_point

    rows, curves = [], []
    for src in _open(specs):
        point = dense_point(src, resolution=resolution, threshold=threshold, n_prompts=n_prompts, hold=hold,
                            length=length)
        rows.append(point.as_row())
        curves.append(point.evaluations.assign(model_id=point.model_id))
        flag = "  (jump too small to divide by)" if point.jump_too_small else ""
        typer.echo(f"{point.model_id}: pre {point.pre_step} -> post {point.post_step} at {resolution}-step "
                   f"resolution; accuracy {point.accuracy_pre} -> {point.accuracy_post}; p(answer) jump "
                   f"{point.jump} ± {point.jump_se}{flag}; re-trained {point.retrained_steps} steps")
    if out is not None:
        atomic_to_csv(pd.DataFrame(rows), out / "points_dense.csv")
        atomic_to_csv(pd.concat(curves, ignore_index=True), out / "emergence_dense.csv")


@app.command("rank-heads")
def rank_heads(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    pre: int = typer.Option(..., min=0, help="Pre-emergence step."),
    post: int = typer.Option(..., min=0, help="Post-emergence step (later than --pre)."),
    method: str = MethodOpt,
    prescreen_top_n: Optional[int] = typer.Option(None, min=1, help="Exact delta_p only for the attribution pre-screen's top N heads."),
    task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write heads.csv and topk.csv here."),
    device: str = DeviceOpt,
    metric: str = MetricOpt,
):
    """Patch each head's attention pattern from POST into PRE; rank by delta_p; joint top-K."""
    if pre == post:
        raise ValueError(f"--pre and --post are both {pre}: patching needs two different checkpoints")
    if pre > post:
        raise ValueError(f"--pre {pre} is later than --post {post}: --post must be the later checkpoint "
                         "(patterns are patched from post into pre)")
    device, task_obj = _check_common(device, task, n_prompts, length, out, method)
    metric = _metric(metric)
    src = _open_step_pair(source, pre, post, "rank-heads")
    from interp.io import atomic_to_csv
    from interp.pipeline import HEADS_COLUMNS, TOPK_COLUMNS, _labelled, model_and_seed
    from interp.ranking import rank_heads_between

    result = rank_heads_between(src, pre, post, task_obj.build(src.tokenizer()), method=method,
                                prescreen_top_n=prescreen_top_n, device=device, metric=metric)
    model, seed = model_and_seed(src.model_id)
    heads = _labelled(result.heads, model, seed, HEADS_COLUMNS)
    topk = _labelled(result.topk, model, seed, TOPK_COLUMNS)
    typer.echo(f"metric={result.metric} pre={result.p_pre:.4f} post={result.p_post:.4f}")
    typer.echo(heads.head(10).to_string(index=False))
    if out is not None:
        atomic_to_csv(heads, out / "heads.csv")
        atomic_to_csv(topk, out / "topk.csv")


@app.command("decompose")
def decompose(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    pre: int = typer.Option(..., min=0, help="Pre-emergence step."),
    post: int = typer.Option(..., min=0, help="Post-emergence step (later than --pre)."),
    task: str = TaskOpt, n_prompts: int = PromptsOpt, length: int = LengthOpt,
    out: Optional[Path] = typer.Option(None, help="Write components.csv here."),
    device: str = DeviceOpt,
    metric: str = MetricOpt,
):
    """Share of the PRE -> POST jump each component recovers when patched from POST into PRE."""
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    device, task_obj = _check_common(device, task, n_prompts, length, out)
    metric = _metric(metric)
    src = _open_step_pair(source, pre, post, "decompose")
    from interp.io import atomic_to_csv
    from interp.ranking import decompose_between

    table = decompose_between(src, pre, post, task_obj.build(src.tokenizer()), metric=metric, device=device)
    columns = ["target", "scope", "k", "heads", "value", "recovered", "recovered_lo", "recovered_hi"]
    typer.echo(f"metric={metric} pre={table['value_pre'].iloc[0]:.4f} post={table['value_post'].iloc[0]:.4f}")
    typer.echo(table[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if out is not None:
        atomic_to_csv(table, out / "components.csv")


@app.command()
def zoom(
    source: str = typer.Argument(..., help="One run trained here: embedded/<run> or its folder."),
    pre: int = typer.Option(..., min=0, help="Stored step to re-train from."),
    post: int = typer.Option(..., min=0, help="Stored step to re-train to (its weights are checked)."),
    every: Optional[int] = typer.Option(None, min=1, help="Spacing of the new checkpoints (default: >= 10 new)."),
    tolerance: float = typer.Option(0.0, min=0.0, help="Largest accepted max |diff| at POST (0: bit for bit)."),
):
    """Re-train PRE -> POST from PRE's saved state and store checkpoints every K steps in the run's
    zoom overlay (RUN/zoom/); the base schedule is left as it is."""
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    from interp.sources import check_one_run

    check_one_run(source, "zoom")
    from interp.catalogue import is_embedded_name

    if not is_embedded_name(source) and not Path(source).expanduser().is_dir():  # a hub id: nothing to resume
        raise ValueError(f"{source}: hub checkpoints carry no optimizer state; zoom needs a run trained by "
                         "emergence-lens (an embedded run or a suite folder written by `emergence train-suite`)")
    _check_embedded_steps(source, [pre, post])
    from interp.zoom import zoom as zoom_run

    (src,) = _open([source])
    result = zoom_run(src, pre, post, every=every, tolerance=tolerance)
    typer.echo(f"{result.run}: re-trained {result.trained_steps} steps ({result.pre} -> {result.post}) in "
               f"{result.seconds:.1f} s with {result.threads} thread(s); max |diff| at step {result.post}: "
               f"{result.max_abs_diff:.3g} (tolerance {result.tolerance:g}); stored {len(result.new_steps)} new "
               f"steps every {result.every}: {result.new_steps}")


@app.command("train-suite")
def train_suite(quick: bool = typer.Option(False, "--quick", help="The CI-sized suite.")):
    """Train (or find in the cache) the embedded default suite and print its run folders."""
    from interp import embedded

    for path in embedded.ensure_suite(embedded.QUICK if quick else embedded.FULL):
        typer.echo(str(path))


@app.command("list-models")
def list_models():
    """Print the known model families (id patterns, revision names), then every source name
    accepted above: Pythia / PolyPythia hub ids and embedded names."""
    from interp.catalogue import embedded_source_names, pythia_model_ids
    from interp.families import FAMILIES

    for family in FAMILIES:
        typer.echo(f"# {family.name}: ids {family.id_pattern}  revisions {family.revision_format}  "
                   f"({family.architecture}; {family.schedule}); e.g. {', '.join(family.example_ids)}")
    typer.echo("# any other org/name repo whose branches name steps (step{N}[-tokens{M}B], "
               "stage{k}[-ingredient{j}]-step{N}-tokens{M}B); ID:SERIES picks a series, e.g. "
               "allenai/OLMo-2-1124-7B:stage2-ingredient1")

    notes = {"embedded": "(every run of the default suite)", "embedded-quick": "(every run of the CI-sized suite)"}
    for name in pythia_model_ids() + embedded_source_names():
        typer.echo(f"{name:<15} {notes[name]}" if name in notes else name)
