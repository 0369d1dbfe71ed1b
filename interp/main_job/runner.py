"""The main job's one runner: :func:`run_study` over (source, task) units, whichever executor runs
them, and :func:`analyse_run` for one unit.

One prompt's way: :func:`run_study` opens the sources (embedded runs as each is trained) and calls
:func:`analyse_run` on each (source, task) with the one :class:`~interp.core.settings.StudyConfig`;
that builds the task's ``TaskBatch`` (:mod:`interp.tasks`), finds the point of emergence
(:mod:`interp.emergence`) and hands the pair of checkpoints to
:func:`interp.ranking.rank_heads_between`, which patches every head (:mod:`interp.patching`) and
ranks them. Every finished unit is stored (:mod:`interp.main_job.units`) and the
:class:`~interp.main_job.report.MainJobReport` is assembled from the store, so the report is the
same whether the units ran here (``executor="local"``: plain function calls) or in joblib or Ray
workers (which send back the unit's :class:`~interp.main_job.report.RunAnalysis` pickled).

Method (Baherwani et al. 2026, Pythia part): find the pair (pre, post) of consecutive
checkpoints where the capability jumps; patch each head's attention pattern
(``blocks.{l}.attn.hook_pattern``, all query positions) from post into pre and record
``delta_p = mean p_patched(answer) - mean p_pre(answer)``; rank heads by ``delta_p``; patch the
top K jointly and report ``recovered = (p_K - p_pre) / (p_post - p_pre)`` (ARENA-style
calibration: pre = 0, post = 1).
"""

from __future__ import annotations

import json
import logging
import platform
import tempfile
import time
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import pandas as pd
import torch

from interp.core.objects import check_argument
from interp.core.settings import StudyConfig
from interp.emergence import StepEvaluator, check_source, find_emergence, scan_emergence
from interp.main_job.report import MainJobReport, RunAnalysis
from interp.main_job.units import (
    Unit,
    damaged_units,
    done_units,
    expand_sources,
    store_unit,
    unit_id,
    unit_label,
)
from interp.sources.catalogue import model_and_seed
from interp.tasks import CapabilityTask, RepetitionTask

__all__ = ["EXECUTORS", "analyse_run", "analyse_unit", "check_executor", "run_study", "step_digests"]

logger = logging.getLogger(__name__)

#: Where units run: ``local`` (this process, plain calls), ``joblib`` (worker processes), ``ray``.
EXECUTORS = ("local", "joblib", "ray")


def _training_loss(source) -> pd.DataFrame | None:
    """The per-step training loss the run records (:meth:`interp.sources.CheckpointSource.loss_curve`:
    our trainer's ``loss.csv``, a ``Trainer`` run's ``trainer_state.json``); None where none is."""
    loss_curve = getattr(source, "loss_curve", None)
    return loss_curve() if loss_curve is not None else None


def analyse_run(
    source, task: CapabilityTask | None = None, config: StudyConfig | None = None, progress=None
) -> RunAnalysis:
    """The main job on one (run, task): capability curve, point of emergence and, if it emerged
    between two checkpoints, the head ranking and joint top-K recovery.

    Args:
        source: checkpoint source of the run (:func:`interp.sources.open_source`).
        task: capability task (default :class:`interp.tasks.RepetitionTask`).
        config: the settings (:class:`interp.core.settings.StudyConfig`, default
            ``StudyConfig()``): the threshold and hold of the point of emergence, scan or
            bisection, then everything :func:`interp.ranking.rank_heads_between` reads
            (``metric=None``: the task's default, :func:`interp.tasks.metric_for`); with
            ``decompose`` the jump is decomposed by component, with ``scores`` every head is
            scored around the point (:mod:`interp.scores`), with ``scrub`` every head's pattern
            on the first prompts is kept at each evaluated step (the report's scrubber);
            ``dtype`` and ``swap_weights`` are set on the source before its first load; with
            ``scrub`` and ``scores`` the head scores are measured at every evaluated step as it
            is loaded, so the scores around the point and a later scrubber load nothing.
        progress: called as ``progress(step, kept)`` after each checkpoint the search scores
            (``kept``: taken from the process's kept evaluations, :mod:`interp.core.kept`);
            :func:`run_study`'s progress line hangs here.

    Returns:
        :class:`interp.main_job.report.RunAnalysis`.

    Raises:
        TypeError: ``source`` is not a checkpoint source (a name: use :func:`run`, or
            ``el.open_source(name)``), ``task`` not a task, ``config`` not a ``StudyConfig``
            (one line naming what was passed, before anything loads).
        ValueError: as the task, the source or the ranking (a task the source's tokenizer
            cannot encode, ...).
    """
    _check_run_arguments(source, task, config)
    from interp.core.devices import torch_dtype
    from interp.ranking import rank_heads_between
    from interp.scrubbing import DEFAULT_PROMPTS, PatternRecorder, token_labels
    from interp.tasks import metric_for

    config = config or StudyConfig()
    if hasattr(source, "swap_weights"):
        source.swap_weights = config.swap_weights
        source.dtype = torch_dtype(config.dtype)
    task = task or RepetitionTask()
    config = config.replace(metric=metric_for(task, config.metric))
    device = config.device
    batch = task.build(source.tokenizer())
    model, seed = model_and_seed(source.model_id)
    evaluator = (
        PatternRecorder(source, batch, device=device, n_prompts=DEFAULT_PROMPTS, scores=config.scores)
        if config.scrub
        else StepEvaluator(source, batch, device=device)
    )
    evaluator.progress = progress
    search = scan_emergence if config.scan else find_emergence
    point = search(source, batch, threshold=config.threshold, evaluator=evaluator, hold=config.hold, progress=False)
    curve = evaluator.table()  # every searchable step with a scan; the bisection's steps without
    analysis = RunAnalysis(
        model=model,
        seed=seed,
        model_id=source.model_id,
        point=point,
        curve=curve[["step", "accuracy", "p_answer"]],
        task=task.name,
        prepend_bos=batch.prepend_bos,
    )
    from interp.sources.checkpoint_integrity import checkpoint_table

    analysis.checkpoints = checkpoint_table(source)  # digests are known from the search already
    analysis.training_loss = _training_loss(source)
    if config.scrub and isinstance(evaluator, PatternRecorder) and evaluator.patterns:
        steps, patterns = evaluator.recorded()
        tokenizer = source.tokenizer()
        analysis.scrub_steps, analysis.scrub_patterns = steps, torch.from_numpy(patterns)
        analysis.scrub_tokens = [token_labels(tokenizer, row.tolist()) for row in batch.tokens[: evaluator.n_prompts]]
    if point.emerged and point.pre_step is not None and point.post_step is not None:
        ranked = rank_heads_between(source, point.pre_step, point.post_step, batch, config)
        for key, value in ranked.ranking_values().items():  # the fields of interp.ranking.RankingFields
            setattr(analysis, key, value)
        if ranked.components is not None:
            analysis.components = ranked.components.assign(
                model=model, seed=seed, task=task.name, prepend_bos=batch.prepend_bos
            )
        if config.scores:
            from interp.scores import head_scores_over_checkpoints, steps_around

            steps = steps_around(source.searchable_steps(), point.pre_step, point.post_step)
            analysis.head_scores = head_scores_over_checkpoints(
                source, steps, device=device, model=model, seed=seed
            ).assign(task=task.name, prepend_bos=batch.prepend_bos)
    return analysis


def step_digests(source, run: RunAnalysis) -> dict[str, str]:
    """Weight digest of every step the run evaluated or patched (``"step{N}"`` -> sha256 hex)."""
    steps = {int(s) for s in run.curve["step"]} | {
        s for s in (run.point.pre_step, run.point.post_step) if s is not None
    }
    return {f"step{step}": source.digest(step) for step in sorted(steps)}


def check_executor(executor: str, jobs: int = 1, address: str | None = None) -> None:
    """Raise a one-line ValueError for a bad executor (or its package missing), jobs or address.

    Raises:
        ValueError: ``executor`` not in :data:`EXECUTORS` (or, from
            ``sweeps.executors.check_executor``, its package not installed), ``jobs`` not a
            positive ``int``, or an ``address`` without ``executor="ray"``.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor={executor!r}; valid executors: {', '.join(EXECUTORS)}")
    if executor != "local":
        from sweeps.executors import check_executor as check_package

        check_package(executor)
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs={jobs!r} must be a positive integer")
    if address is not None and executor != "ray":
        raise ValueError(f"address={address!r} needs executor 'ray' (got {executor!r})")


def analyse_unit(unit: dict[str, Any]) -> tuple[dict[str, Any], None]:
    """A joblib or Ray worker's side of one unit: open the source by name, :func:`analyse_run`,
    close it. ``unit``: ``source`` (one run's name), ``task`` (the task object), ``config`` (the
    :class:`StudyConfig`). Returns ``({"run": RunAnalysis, "digests": {...}, "model_id": ...}, None)``,
    the ``(summary, metrics)`` pair :func:`sweeps.execute.execute_run` expects."""
    from interp.sources.door import open_sources

    config = unit["config"]
    (source,) = open_sources(
        [unit["source"]],
        progress=False,
        allow_pickle=config.allow_pickle,
        step_pattern=config.step_pattern,
        config=config.model_config,
    )
    try:
        return _outcome(source, analyse_run(source, unit["task"], unit["config"])), None
    finally:
        source.close()


def _check_run_arguments(source: Any, task: Any, config: Any) -> None:
    """:func:`analyse_run`'s arguments, checked before anything loads.

    Raises:
        TypeError: one line naming the argument, what was passed and what is expected.
    """
    check_source(source, "analyse_run: source")
    check_argument(
        task is None or isinstance(task, CapabilityTask),
        task,
        "analyse_run: task",
        "a CapabilityTask such as el.RepetitionTask()",
    )
    check_argument(
        config is None or isinstance(config, StudyConfig), config, "analyse_run: config", "an el.StudyConfig"
    )


def _outcome(source, analysis: RunAnalysis) -> dict[str, Any]:
    """What the store keeps of one analysed unit besides its analysis: the weight digest of every
    step used, the run's ``model_id``, the folder its checkpoints were read from (a trained suite's
    run folder, whose parent is named by the suite's digest; "" for a hub source) and the torch
    threads of the analysis (the attribution pre-screen's last bits depend on them:
    :func:`interp.patching.attribution.attribution_delta_p`)."""
    root = getattr(source, "root", None)
    return {
        "run": analysis,
        "digests": step_digests(source, analysis),
        "model_id": analysis.model_id,
        "folder": str(Path(root).resolve()) if root is not None else "",
        "torch_threads": torch.get_num_threads(),
    }


def _local_records(
    todo: list[Unit], objects: dict[str, Any], tasks: dict[str, Any], config: StudyConfig, progress: bool, note=None
):
    """The local executor: every unit by a plain call of :func:`analyse_run`, each source opened
    once for all its tasks (embedded runs handed out as each is trained:
    :class:`interp.sources.door.ReadySources`) and closed after its last task. Yields
    ``(unit, outcome, log text)``: outcome the summary of :func:`analyse_unit`, or the exception;
    ``note(step, kept)`` is told of every checkpoint a search scores (the progress line)."""
    from interp.sources.door import ReadySources

    names = list(dict.fromkeys(u.source for u in todo))
    by_source: dict[str, list[Unit]] = {}
    for u in todo:
        by_source.setdefault(u.source, []).append(u)
    pending = [n for n in names if n not in objects]
    stream: Any = (
        ReadySources(
            pending,
            progress=progress,
            allow_pickle=config.allow_pickle,
            step_pattern=config.step_pattern,
            config=config.model_config,
        ).with_positions()
        if pending
        else iter(())
    )

    def named_sources():
        yield from ((n, objects[n]) for n in names if n in objects)
        yield from ((pending[position], source) for position, source in stream)

    try:
        for name, source in named_sources():
            try:
                for unit in by_source[name]:
                    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%S"), time.perf_counter()
                    log = f"unit {unit.unit_id} ({unit.source}, {unit.task}) started {started} on {platform.node()}\n"
                    try:
                        outcome: Any = _outcome(source, analyse_run(source, tasks[unit.task], config, progress=note))
                        log += f"ok after {time.perf_counter() - t0:.3f} s\n"
                    except Exception as error:  # a failing unit is named at the end; the others go on
                        outcome = error
                        log += traceback.format_exc() + f"failed after {time.perf_counter() - t0:.3f} s\n"
                    yield unit, outcome, log
            finally:
                source.close()
    finally:  # a stop (Ctrl-C, an error) closes the sources now: an embedded suite's training workers stop too
        close = getattr(stream, "close", None)
        if close is not None:
            close()


def _remote_records(todo: list[Unit], tasks: dict[str, Any], config: StudyConfig, executor: str, jobs: int, address):
    """joblib or Ray: each unit a :class:`sweeps.runners.RunTask` whose runner is
    :func:`analyse_unit` itself (pickled by reference). Yields ``(unit, outcome, log)`` as :func:`_local_records`."""
    from sweeps.executors import RUN_EXECUTORS
    from sweeps.runners import RunTask

    by_id = {u.unit_id: u for u in todo}
    work = [
        [
            RunTask(
                run_id=u.unit_id,
                runner=analyse_unit,
                config={"source": u.source, "task": tasks[u.task], "config": config},
            )
        ]
        for u in todo
    ]
    for record in RUN_EXECUTORS[executor](work, jobs, address):
        outcome: Any = record.summary if record.status == "ok" else RuntimeError(record.error)
        yield by_id[record.run_id], outcome, record.log or ""


def run_study(
    sources: Iterable[Any],
    tasks: CapabilityTask | Sequence[CapabilityTask] | None = None,
    config: StudyConfig | None = None,
    *,
    executor: str = "local",
    jobs: int = 1,
    address: str | None = None,
    out_dir: str | Path | None = None,
    title: str | None = None,
    progress: bool = True,
) -> MainJobReport:
    """The main job on every (source, task) unit, resumable when ``out_dir`` is given; returns the
    :class:`~interp.main_job.report.MainJobReport` (saved to ``out_dir`` when given).

    Args:
        sources: source names (as for ``emergence run``: hub ids, suite folders, ``embedded``,
            ``embedded-quick``, ``embedded/<run>``; suite names expand to their runs) or, with the
            local executor, opened sources (:func:`interp.sources.open_source`; closed after use).
        tasks: one capability task or several (default one :class:`interp.tasks.RepetitionTask`);
            the report has one analysis per (run, task), in the order of the sources, then the tasks.
        config: the settings, one :class:`~interp.core.settings.StudyConfig` for every unit
            (default ``StudyConfig()``); the provenance records it whole.
        executor: ``local`` (this process: plain calls of :func:`analyse_run`), ``joblib``
            (``jobs`` processes) or ``ray`` (a local Ray with ``jobs`` CPUs, or the cluster at
            ``address``); the report is the same whichever ran the units.
        out_dir: the output folder: the report's tables there, the units' store in ``units/``
            (a unit already stored there is not run again). None: a temporary store, nothing saved.
        title: the page's title (default: named after the runs).
        progress: one progress line over the units (standard output in a notebook,
            :mod:`interp.core.progress`), naming the run and step being scored and how many
            scores were kept from earlier calls in this process (:mod:`interp.core.kept`);
            ``False`` silences it.

    Returns:
        :class:`~interp.main_job.report.MainJobReport`: one :class:`RunAnalysis` per (run, task),
        its tables (points, heads, topk, ...), figures and ``provenance`` (the call, the config
        whole, the weight digest of every step used, and ``runs``: per source name the folder its
        weights were read from, the suite folder (digest) of a trained run, the torch threads).

    Raises:
        TypeError: ``sources`` is one string (a list is expected) or a task is not a
            ``CapabilityTask`` (one line, before anything runs).
        ValueError: a bad name, config, executor, jobs, address or output folder, or opened sources
            with another executor than ``local`` (before anything runs).
        RuntimeError: some units failed (their logs named); the others are stored, and running
            again with the same ``out_dir`` retries only the failed and missing units.
        interp.sources.HubUnavailableError, interp.sources.CheckpointError: every failed unit
            failed so (checkpoints missing from the hub cache, ...): the first, as it is (its
            message says what to fetch and how; running again would not help).
    """
    from interp.core.io import check_out_dir
    from interp.core.progress import progress_bar
    from interp.core.provenance import make_provenance
    from interp.report.report_state import load_report_state
    from sweeps.store import ResultsStore

    config = config if config is not None else StudyConfig()
    check_out_dir(out_dir)
    if not isinstance(config, StudyConfig):
        raise ValueError(f"config={config!r}; valid: a StudyConfig (interp.core.settings)")
    check_executor(executor, jobs, address)
    task_list: list[CapabilityTask] = (
        list(tasks) if isinstance(tasks, (list, tuple)) else [cast(CapabilityTask, tasks) or RepetitionTask()]
    )
    for task in task_list:
        check_argument(
            isinstance(task, CapabilityTask),
            task,
            "run_study: a task",
            "CapabilityTask objects such as el.RepetitionTask()",
        )
    check_argument(
        not isinstance(sources, (str, Path)), sources, "run_study: sources", "a list of source names or opened sources"
    )
    sources = list(sources)  # any iterable: a generator is read once
    objects = {s.model_id: s for s in sources if not isinstance(s, (str, Path))}
    if objects and executor != "local":
        raise ValueError(f"executor={executor!r} opens sources by name in its workers; pass names, not opened sources")
    names = [str(s) if isinstance(s, (str, Path)) else s.model_id for s in sources]
    units = _plan_units(names, objects, task_list)
    task_by_name = {t.name: t for t in task_list}
    with tempfile.TemporaryDirectory(prefix="emergence-units-") as scratch:
        store = ResultsStore(Path(out_dir if out_dir is not None else scratch) / "units")
        for line in damaged_units(units, store.root.parent).values():  # shown once, here
            logger.warning(line)
        done = done_units(units, store.root.parent)
        todo = [u for u in units if u.unit_id not in done]
        failures: list[str] = []
        errors: list[Exception] = []
        if todo:
            store.root.mkdir(parents=True, exist_ok=True)
            # The units' line starts with the analysis: with the local executor when the first run
            # is handed out (an embedded suite's training, with its own line, comes first), so that
            # its rate and time left are the analysis's, never the wait's (issue 71: "0/6" for 71 min,
            # then an ETA of 6 h for 6 min of work).
            bars: list[Any] = []

            def units_bar():
                if not bars:
                    bars.append(
                        progress_bar(len(units), "units", unit="unit", enabled=progress, initial=len(units) - len(todo))
                    )
                return bars[0]

            if executor != "local":  # the workers start on the units at once
                units_bar()
            scored = {"checkpoints": 0, "kept": 0}
            shown = [0.0]  # when the line was last redrawn (perf_counter seconds)

            def note(step: int, kept: bool) -> None:
                bar = units_bar()
                scored["checkpoints"] += 1
                scored["kept"] += kept
                kept_text = f", {scored['kept']} kept" if scored["kept"] else ""
                bar.set_postfix_str(f"step {step} ({scored['checkpoints']} checkpoints{kept_text})", refresh=False)
                if time.perf_counter() - shown[0] >= 0.5:  # redrawn twice a second at most
                    bar.refresh()
                    shown[0] = time.perf_counter()

            records = (
                _local_records(todo, objects, task_by_name, config, progress, note if progress else None)
                if executor == "local"
                else _remote_records(todo, task_by_name, config, executor, jobs, address)
            )
            try:
                for unit, outcome, log in records:
                    store.write_log(unit.unit_id, log)
                    if isinstance(outcome, Exception):
                        errors.append(outcome)
                        failures.append(f"{unit_label(unit)}: {type(outcome).__name__}: {outcome}")
                        logger.warning("unit %s failed: %s", unit_label(unit), outcome)
                        continue
                    store_unit(store.root, unit.unit_id, outcome["run"], config)
                    store.write_run(
                        {
                            "run_id": unit.unit_id,
                            "status": "ok",
                            "source": unit.source,
                            "task": unit.task,
                            "model_id": outcome["model_id"],
                            "folder": outcome["folder"],
                            "torch_threads": outcome["torch_threads"],
                            "digests": json.dumps(outcome["digests"], sort_keys=True),
                            "host": platform.node(),
                        }
                    )
                    units_bar().update(1)
            finally:
                if bars:
                    bars[0].close()
        if errors and len(errors) == len(failures) and all(_not_worth_a_retry(e) for e in errors):
            raise errors[0]
        if failures:
            raise RuntimeError(
                f"{len(failures)} of {len(units)} units failed (logs in {store.logs_dir}); "
                f"run again to retry them: {failures[0]}"
            )
        rows = store.results([u.unit_id for u in units]).set_index("run_id")
        runs: list[RunAnalysis] = []
        digests: dict[str, dict] = {}
        read: dict[str, dict] = {}
        for u in units:
            unit_runs, _ = load_report_state(store.root / "state" / u.unit_id, RunAnalysis)
            runs += unit_runs
            digests.setdefault(rows.loc[u.unit_id, "model_id"], {}).update(json.loads(rows.loc[u.unit_id, "digests"]))
            read.setdefault(u.source, _run_read(rows.loc[u.unit_id]))
    settings = {
        "sources": names,
        "units": [u.unit_id for u in units],
        "tasks": task_list,
        "config": config.as_dict(),
        "executor": executor,
        "jobs": jobs,
    }
    provenance = make_provenance("interp.main_job.runner.run_study", settings, digests)
    provenance["runs"] = read
    report = MainJobReport(runs=runs, threshold=config.threshold, hold=config.hold, title=title, provenance=provenance)
    if out_dir is not None:
        report.save(out_dir)
    return report


def _run_read(row: pd.Series) -> dict[str, Any]:
    """``provenance["runs"][source]``: which weights a source name was read from: ``model_id``,
    ``folder`` (the run folder; "" for a hub source), ``suite`` (for a run of a trained suite, its
    folder's name ``<config digest>-<environment key>``, as ``emergence env`` prints it) and
    ``torch_threads``; None where a unit stored before these were recorded lacks them."""
    folder = row.get("folder")
    folder = None if folder is None or pd.isna(folder) else str(folder)
    threads = row.get("torch_threads")
    return {
        "model_id": row["model_id"],
        "folder": folder,
        "suite": Path(folder).parent.name if folder and (Path(folder) / "suite.json").is_file() else None,
        "torch_threads": None if threads is None or pd.isna(threads) else int(threads),
    }


def _not_worth_a_retry(error: Exception) -> bool:
    """Whether running again cannot mend ``error``: checkpoints the hub cache lacks, a step or
    source that does not exist (its message says what to do instead)."""
    from interp.sources import CheckpointError, HubUnavailableError

    return isinstance(error, (CheckpointError, HubUnavailableError))


def _plan_units(names: list[str], objects: dict[str, Any], tasks: list[CapabilityTask]) -> list[Unit]:
    """Every (source, task) unit, sources in the order given (suite names expanded to their runs,
    an opened source named by its ``model_id``), then tasks in the order given."""
    expanded: list[str] = []
    for name in names:
        expanded += [name] if name in objects else expand_sources([name])
    return [Unit(unit_id(s, t.name), s, t.name) for s in dict.fromkeys(expanded) for t in tasks]
