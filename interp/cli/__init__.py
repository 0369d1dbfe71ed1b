"""The checkpoint-suite commands of ``emergence`` (mounted at the top level by
:mod:`emergence_lens.cli`): ``demo``, ``run``, ``curve``, ``bisect``, ``rank-heads``,
``decompose``, ``zoom``, ``readiness``, ``scrub``, ``timeline``, ``train-suite``, ``download``, ``list-models``,
``list-tasks``.

One app (:data:`app`) holds them in that order: the main job's commands
(:mod:`interp.cli.main_job`), the head-level ones (:mod:`interp.cli.heads`), then the suite and
listing commands below. What they share (options, argument checks, openers of sources) is
:mod:`interp.cli.options` (public names, imported from there; this package re-exports none), and
every command's settings options are derived from ``StudyConfig``'s fields, the ones it reads
(:func:`interp.cli.options.study_options`; ``tests/emergence_lens/test_cli_settings.py`` lists them per command);
a test that stands in for a helper patches it in the module of the command that calls it
(``interp.cli.heads.open_named``).

Every command is one call of a public function that a notebook can make too, and checks all of
its arguments (device, task, sources, steps, output folder) before it loads or trains anything.
Commands raise ``ValueError`` for bad input; the root app turns any escaping error into one
line (``error: ...``, exit status 2). Heavy libraries are imported inside the commands.

Adding a command: write a function with ``@app.command()`` in the module of its group; if it
reads study settings, put ``@study_options((field, ...))`` under it, take ``**settings`` and build
``StudyConfig(**settings)`` first (and add its row to the test's table); check its other arguments
(the ``check_*`` helpers of :mod:`interp.cli.options`), then make the one call. Nothing else needs
registering.
"""

from __future__ import annotations

from pathlib import Path

import typer

from interp.cli import heads, main_job, timeline
from interp.cli.heads import decompose, rank_heads, readiness_command, scrub, zoom
from interp.cli.main_job import bisect, curve, demo, run
from interp.cli.options import parse_steps
from interp.cli.timeline import timeline as timeline_command

__all__ = [
    "app",
    "bisect",
    "curve",
    "decompose",
    "demo",
    "download_command",
    "list_models",
    "list_tasks",
    "rank_heads",
    "readiness_command",
    "run",
    "scrub",
    "timeline_command",
    "train_suite",
    "zoom",
]

app = typer.Typer(
    help="Checkpoint suites: point of emergence and the heads behind it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.registered_commands += (
    main_job.app.registered_commands + heads.app.registered_commands + timeline.app.registered_commands
)


@app.command("train-suite")
def train_suite(
    spec: str = typer.Argument(
        "embedded",
        help="A suite spec: a shipped name (embedded, embedded-quick, population) or a .yaml/.json file "
        "(sizes as n_layers/d_model/n_heads, seeds, steps, checkpoint_every, data settings; docs/embedded.md).",
    ),
    quick: bool = typer.Option(False, "--quick", help="The CI-sized suite (embedded-quick); no SPEC with it."),
    executor: str = typer.Option("local", "--executor", help="local (pinned worker pool), joblib or ray."),
    jobs: int | None = typer.Option(None, "--jobs", help="Worker processes (default: the CPU count)."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="An existing Ray cluster ('auto')."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List the runs, their steps and disk; train nothing."),
):
    """Train (or find in the cache) a checkpoint suite, resumably, and print its run folders with
    their size on disk. SPEC defaults to the embedded default suite."""
    from interp.sources.catalogue import SUITE_PREFIX, load_suite_spec
    from interp.sources.suites import check_executor, folder_mb, plan_suite, train_suite

    if quick and spec != "embedded":
        raise ValueError(f"--quick names the quick suite; it takes no SPEC (got {spec!r})")
    cfg = load_suite_spec("embedded-quick" if quick else spec.removeprefix(SUITE_PREFIX))
    check_executor(executor, jobs)
    plan = plan_suite(cfg)
    if dry_run:
        typer.echo(plan.drop(columns=["folder"]).to_string(index=False))
        todo = plan[plan["status"] != "trained"]
        typer.echo(
            f"{len(plan)} runs, {len(todo)} to train ({int(todo['steps'].sum()):,} steps); "
            f"~{plan['disk_mb'].sum() / 1000:.2f} GB on disk when trained; folder {Path(plan['folder'][0]).parent}"
        )
        return
    for path in train_suite(cfg, executor=executor, jobs=jobs, ray_address=ray_address):
        typer.echo(f"{path}\t{folder_mb(path)} MB")


@app.command("download")
def download_command(
    source: str = typer.Argument(
        ...,
        help="A hub repo whose branches name training steps: EleutherAI/pythia-70m-seed3, "
        "allenai/OLMo-2-0425-1B[:SERIES], ... (emergence list-models).",
    ),
    steps: str | None = typer.Option(None, "--steps", help="The steps to fetch, e.g. 1000,2000."),
    all_steps: bool = typer.Option(False, "--all", help="Every checkpoint revision of the repo (series)."),
    grid: int | None = typer.Option(
        None, "--grid", help="N revisions evenly spread over the repo's checkpoints, first and last included."
    ),
    cache: Path | None = typer.Option(
        None, "--cache", help="Hub cache folder (default HF_HUB_CACHE, ~/.cache/huggingface/hub)."
    ),
    allow_pickle: bool = typer.Option(
        False, "--allow-pickle", help="Also fetch .bin weights of revisions without safetensors."
    ),
    rehash: bool = typer.Option(
        True, "--rehash/--no-rehash", help="Hash the files already in the cache too (fetched ones always are)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the revisions and their sizes; fetch nothing."),
):
    """Fetch checkpoint revisions of a hub repo into the hub cache (sizes first, then progress;
    resumable; every file checked against the hub's sha256), so that `emergence run SOURCE` works
    offline afterwards (HF_HUB_OFFLINE=1). Choose one of --steps, --all, --grid."""
    from interp.sources.download import download
    from interp.sources.hub import SUGGESTED_GRID

    chosen = [name for name, given in (("--steps", steps is not None), ("--all", all_steps), ("--grid", grid)) if given]
    if len(chosen) != 1:
        raise ValueError(
            f"choose what to fetch with one of --steps 1000,2000, --all or --grid {SUGGESTED_GRID}"
            + (f" (got {' and '.join(chosen)})" if chosen else "")
        )
    download(
        source,
        steps=parse_steps(steps) if steps is not None else None,
        grid=grid,
        cache_dir=cache,
        allow_pickle=allow_pickle,
        rehash=rehash,
        dry_run=dry_run,
        echo=typer.echo,
    )


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
    """Print every capability task: its parameters, default metric, BOS convention and source.

    The table is ``interp.tasks.REGISTRY``'s."""
    from interp.tasks import task_table

    for _, row in task_table().iterrows():
        typer.echo(f"{row['task']}: {row['description']}")
        typer.echo(f"    parameters: {row['parameters']}")
        typer.echo(
            f"    default metric: {row['default_metric']}; prepend_bos: {row['prepend_bos']}; "
            f"embedded byte tokenizer: {'yes' if row['byte_tokenizer'] else 'no (needs a word-piece vocabulary)'}"
        )
        typer.echo(f"    source: {row['source']}")
