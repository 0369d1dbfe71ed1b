"""What every checkpoint-suite command of ``emergence`` shares: the settings' options (derived from
StudyConfig's fields by :func:`study_options`, never declared by hand), the other options
(``TaskOpt``, ``PromptsOpt``, ...), the argument checks (``check_*``, cheap: run before anything
is loaded) and the openers of sources (``open_named``, ``open_step_pair``).

The commands are :mod:`interp.cli.main_job` (``demo``, ``run``, ``curve``, ``bisect``) and
:mod:`interp.cli.heads` (``rank-heads``, ``decompose``, ``zoom``, ``readiness``, ``scrub``);
:mod:`interp.cli` puts them on one app.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import typer

from interp.core.field_options import with_field_options
from interp.core.settings import StudyConfig


def description(doc: str) -> str:
    """The first paragraph of a module's docstring on one line: the ``--help`` description of a
    runnable entry (``python -m analyses.<name>``; the first line alone cuts a wrapped sentence in two)."""
    paragraph = doc.strip().split("\n\n")[0]
    return " ".join(paragraph.split())


TaskOpt = typer.Option(
    None,
    help="Capability task(s), comma-separated: repetition | token-repetition | "
    "pattern-completion | ioi | a .jsonl/.csv task file (see `emergence list-tasks`); "
    "default: repetition, or only the --task-file files when some are given.",
)
#: ``--task`` of a command without ``--task-file`` (``scrub``): one task, a name or a file.
OneTaskOpt = typer.Option(
    None,
    help="Capability task: repetition | token-repetition | pattern-completion | ioi | a .jsonl/.csv task file "
    "(see `emergence list-tasks`); default: repetition.",
)
TaskFileOpt = typer.Option(
    None,
    "--task-file",
    help="Your own prompts (JSONL or CSV: prompt, answer, optional distractors, id); repeatable, added to --task.",
)
PromptsOpt = typer.Option(64, min=1, help="Number of prompts.")
LengthOpt = typer.Option(10, min=1, help="Random items per prompt before the partial repeat.")
#: The ``--help`` panel of the options derived from StudyConfig's fields (:func:`study_options`).
SETTINGS_PANEL = "Study settings (StudyConfig)"
#: StudyConfig's fields that every command opening checkpoints reads: where they load, and how a
#: hub or local run's files are read (:func:`source_options`).
LOADING = ("device", "allow_pickle", "step_pattern", "model_config")
#: The fields of the point of emergence's rule (:mod:`interp.emergence`).
RULE = ("threshold", "hold")
#: The fields a head ranking reads (:func:`interp.ranking.rank_heads_between`; ``ks`` and ``n_boot``
#: its joint top-K and intervals).
RANKING = ("method", "metric", "prescreen_top_n", "prescreen_steps", "ks", "n_boot")


def study_options(
    include: Sequence[str] | None = None, defaults: StudyConfig | None = None, exclude: Sequence[str] = ()
) -> Callable[[Callable], Callable]:
    """The one road from the settings to a command's options: a decorator (under
    ``@app.command()``) that gives the command one option per StudyConfig field it reads,
    ``--name-with-dashes`` with the field's help, type and default (``defaults``' value when given:
    ``DEMO_CONFIG``, ``TIMELINE_CONFIG``), listed in ``--help`` under :data:`SETTINGS_PANEL`. The
    command takes them as ``**settings`` and builds ``StudyConfig(**settings)`` (or
    ``defaults.replace(**settings)``), which checks every value in one line before anything loads;
    no command declares a settings option by hand (``tests/emergence_lens/test_cli_settings.py``).

    Args:
        include: the fields the command reads (None: every field not in ``exclude``).
        defaults: the settings whose values are the options' defaults (None: StudyConfig's own).
        exclude: with ``include`` None, the fields the command does not read.

    Raises:
        ValueError: a name that is not a StudyConfig field, or a parameter of the command named
            like one (:func:`interp.core.field_options.with_field_options`).
    """

    def derive(command: Callable) -> Callable:
        return with_field_options(command, StudyConfig, defaults, exclude, include, SETTINGS_PANEL)

    return derive


def source_options(config: StudyConfig) -> dict:
    """The options every loading command hands to the sources it opens: ``config``'s
    ``allow_pickle``, ``step_pattern`` and ``model_config`` (``--allow-pickle``, ``--step-pattern``,
    ``--config``), the pattern and the config file checked first (one line each, before anything
    loads)."""
    model_config, step_pattern = config.model_config, config.step_pattern
    if model_config is not None:
        from interp.sources.checkpoint_files import read_config_file

        try:
            read_config_file(model_config)
        except ValueError as err:
            raise ValueError(f"--config: {err}") from None
    if step_pattern is not None:
        from interp.sources.layouts import check_step_pattern

        try:
            check_step_pattern(step_pattern)
        except ValueError as err:
            raise ValueError(f"--step-pattern: {err}") from None
    return {"allow_pickle": config.allow_pickle, "step_pattern": step_pattern, "config": model_config}


# -- argument checks (cheap; run before anything is loaded) -----------------------------------
def check_common(
    device: str | None,
    task: str | None,
    n_prompts: int,
    length: int,
    out: Path | None,
    task_files: list[Path] | None = None,
):
    """Device (None: auto), tasks (names and files; files read and checked for form) and output
    folder; returns (the device chosen, list of task objects). The study settings (method, metric,
    threshold, ...) are checked by :class:`interp.core.settings.StudyConfig`, which each command
    builds from its flags first."""
    from interp.core.devices import check_device, choose_device
    from interp.core.io import check_out_dir

    check_device(device)  # form first: no torch import for a typo
    check_out_dir(out)
    from interp.tasks import parse_tasks

    task = task if task is not None else ("" if task_files else "repetition")
    return choose_device(device), parse_tasks(task, task_files or (), n_prompts=n_prompts, length=length, seed=0)


def one_task(tasks: list, command: str):
    """The single task of a command that works on one (rank-heads, decompose)."""
    if len(tasks) != 1:
        raise ValueError(
            f"{command} works on one task; got {len(tasks)} ({', '.join(t.name for t in tasks)}): give one --task"
        )
    return tasks[0]


def check_tasks_on_sources(names: list[str], tasks: list, **options) -> None:
    """Build every task with each source's tokenizer before any checkpoint loads (a task file's
    answers must be one token; IOI needs single-token names; no prompt longer than the model's
    context). Embedded names use the byte tokenizer and the suite's ``n_ctx`` (nothing is trained
    here); other sources load their tokenizer files and ``config.json`` only. ``options``:
    :func:`source_options` (``allow_pickle``, ``step_pattern``)."""
    from interp.sources.catalogue import is_embedded_name

    seen = set()
    for name in names:
        if is_embedded_name(name):
            from interp.core.task_batch import CONTEXT_ATTRIBUTE
            from interp.sources.catalogue import resolve_embedded
            from interp.sources.loading import make_byte_tokenizer

            n_ctx = min(cfg.n_ctx for cfg, _ in resolve_embedded(name))
            key = f"embedded-{n_ctx}"
            if key in seen:
                continue
            tokenizer = make_byte_tokenizer()
            tokenizer.name_or_path = "embedded byte tokenizer"  # what error lines name
            # the context the suite trains with (its config.json's, once trained): checked now
            setattr(tokenizer, CONTEXT_ATTRIBUTE, (n_ctx, f"{name}: n_ctx of the embedded suite"))
        else:
            from interp.sources.door import open_source

            key = name
            src = open_source(name, **options)
            try:
                tokenizer = src.tokenizer()
            finally:
                src.close()
        seen.add(key)
        for task in tasks:
            task.build(tokenizer)


def check_sources(names: list[str]) -> None:
    """Every name is a source (:func:`interp.sources.door.check_source_name`, which answers a bare
    embedded run name such as ``neox-2l-128d-seed2`` with the name that works)."""
    from interp.sources.door import check_source_name

    for name in names:
        check_source_name(name)


def parse_steps(text: str) -> list[int]:
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


def check_steps_available(src, steps: list[int]) -> None:
    """Every step of ``steps`` is one the source holds (the error names the nearest ones, or, for a
    hub step listed from the cache without whole weights, the file and the repair) and its weight
    files are whole (the error names the corrupt file)."""
    from interp.sources.loading import CheckpointError, HubUnavailableError, nearest_steps

    available = sorted(src.available_steps())
    for step in steps:
        if step not in available and (detail := src.missing_detail(step)):  # a half-downloaded hub step
            raise HubUnavailableError(f"{src.model_id} step {step}: {detail}")
        if step not in available:
            near = ", ".join(map(str, nearest_steps(step, available)))
            raise CheckpointError(f"{src.model_id} has no checkpoint at step {step}; nearest: {near}")
    for step in steps:  # custom code or a corrupt file: one line naming the step and why, before any load
        reason = src.remote_code_reason(step) or src.corrupt_reason(step)
        if reason is not None:
            raise CheckpointError(f"{src.model_id} step {step}: {reason}; pick another step (the search leaves it out)")


def echo_duplicate_hazards(src, pre: int, post: int) -> None:
    """``hazard:`` lines when ``pre`` or ``post`` shares its weights with another step (at most one
    label of such a group is right, see ``CheckpointSource.duplicate_steps``); an error when
    ``pre`` and ``post`` themselves are identical (nothing to patch)."""
    if src.digest(pre) == src.digest(post):
        raise ValueError(
            f"{src.model_id}: steps {pre} and {post} have identical weights (digest "
            f"{src.digest(pre)[:12]}): nothing to patch; pick checkpoints that differ"
        )
    from interp.sources.loading import CheckpointError

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


def check_embedded_steps(name: str, steps: list[int]) -> None:
    """For an embedded name, the steps its suite will hold are known before it is trained: the
    schedule, plus the steps ``emergence zoom`` stored for the run if it is trained already."""
    from interp.sources.catalogue import is_embedded_name, resolve_embedded, suite_label
    from interp.sources.loading import CheckpointError, nearest_steps

    if not is_embedded_name(name):
        return
    from interp.sources.door import zoomed_steps

    for cfg, run in resolve_embedded(name):
        size = next(s for s in cfg.sizes if run.startswith(f"{s.name}-seed"))
        schedule = sorted(set(cfg.checkpoint_steps_for(size)) | set(zoomed_steps(name)))
        for step in steps:
            if step not in schedule:
                near = ", ".join(map(str, nearest_steps(step, schedule)))
                raise CheckpointError(f"{suite_label(cfg)}/{run} has no checkpoint at step {step}; nearest: {near}")


def check_embedded_heads(name: str, heads) -> None:
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


def check_resumable(name: str, what: str) -> None:
    """``name`` is a run trained here (embedded or a folder): a hub id carries no optimizer state."""
    from interp.sources.catalogue import is_embedded_name

    if not is_embedded_name(name) and not Path(name).expanduser().is_dir():
        raise ValueError(
            f"{name}: hub checkpoints carry no optimizer state; {what} needs a run trained by "
            "emergence-lens (an embedded run or a suite folder written by `emergence train-suite`)"
        )


def open_named(names: list[str], include_zoom: bool = False, **options) -> list:
    """Open the sources; ``include_zoom``: a run's zoomed steps are offered too (commands that
    take explicit steps; searches read the base schedule); ``options``: :func:`source_options`."""
    from interp.sources.door import open_sources

    return open_sources(names, include_zoom=include_zoom, **options)


def open_step_pair(source: str, pre: int, post: int, command: str, **options):
    """Open the one run ``command`` works on and check ``pre`` / ``post`` there: the embedded
    suite's steps before training it, the source's own steps after opening it, and steps with
    identical weights (:func:`echo_duplicate_hazards`)."""
    from interp.sources.door import check_one_run

    check_one_run(source, command)
    check_embedded_steps(source, [pre, post])
    (src,) = open_named([source], include_zoom=True, **options)
    check_steps_available(src, [pre, post])
    echo_duplicate_hazards(src, pre, post)
    return src


def jump_flag(too_small: bool) -> str:
    """The CLI's flag of a jump below 3 standard errors (``interp.emergence.jump_noise``)."""
    return "  JUMP TOO SMALL: below 3 standard errors; the shares below divide by noise" if too_small else ""


class warnings_as_lines:
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
