"""``emergence timeline``: every head's pattern-patching effect at every checkpoint pair of one run
(:func:`interp.timeline.head_timeline`), as a tidy table and its own page. :mod:`interp.cli`
puts the command on the one app.

The settings' options are :class:`~interp.core.settings.StudyConfig`'s fields (derived as ``emergence
run``'s are, :func:`interp.cli.options.study_options`), their defaults
:data:`interp.core.settings.TIMELINE_CONFIG`'s (the screen, then exact verification), without the four
the timeline does not read (``scan``: it always scans; ``decompose``, ``scrub``, ``ks``). Its own:
``--pairs``, ``--sample``, ``--seed``, ``--scrubber``. Every argument is checked before anything loads.
"""

from __future__ import annotations

from pathlib import Path

import typer

from interp.cli.options import (
    LengthOpt,
    OneTaskOpt,
    PromptsOpt,
    check_common,
    check_embedded_steps,
    check_tasks_on_sources,
    one_task,
    source_options,
    study_options,
    warnings_as_lines,
)
from interp.core.settings import TIMELINE_CONFIG, check_pairs

#: the commands of this module (:mod:`interp.cli`)
app = typer.Typer()

#: StudyConfig fields the timeline does not read (not offered as options).
TIMELINE_EXCLUDES = ("scan", "decompose", "scrub", "ks")


@app.command()
@study_options(defaults=TIMELINE_CONFIG, exclude=TIMELINE_EXCLUDES)
def timeline(
    source: str = typer.Argument(..., help="One run: hub id, suite folder (any layout) or embedded[-quick]/<run>."),
    out: Path = typer.Option(..., help="Output folder (resumable: finished pairs are kept in OUT/pairs)."),
    pairs: str = typer.Option(
        "consecutive",
        help="consecutive (each checkpoint with the next) | to-post (each with E's post step) | "
        "to-final (each with the last checkpoint).",
    ),
    sample: int = typer.Option(
        4, help="Heads outside the screen's top N patched exactly per pair, drawn at random: the miss bound."
    ),
    seed: int = typer.Option(0, help="Random seed of the sample."),
    scrubber: Path | None = typer.Option(
        None,
        help="A page holding this run's scrubber (emergence scrub's page, or the main job's report.html): "
        "clicking a heatmap cell opens it on that head at that step.",
    ),
    task: str | None = OneTaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    **settings,
):
    """Every head's effect at every checkpoint pair: the attribution screen estimates each head, the
    exact engine verifies the top N (--prescreen-top-n) plus --sample drawn at random (their
    largest effect bounds what the screen missed). Writes OUT/timeline.csv (step, post_step, layer,
    head, delta, lo, hi, how, ...), pairs.csv, curve.csv and timeline.html; a killed run started
    again does only the missing pairs. --method fast or reference: every head exact."""
    from interp.sources.door import check_one_run

    config = TIMELINE_CONFIG.replace(**settings)  # every setting checked here, once (no torch imported)
    check_pairs(pairs)
    for name, value in (("--sample", sample), ("--seed", seed)):
        if value < 0:
            raise ValueError(f"{name}={value}: must be an integer >= 0")
    check_one_run(source, "timeline")
    if scrubber is not None and not scrubber.is_file():
        raise ValueError(f"--scrubber {str(scrubber)!r}: no such file; give the page emergence scrub or run wrote")
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out)
    task_obj = one_task(tasks, "timeline")
    config = config.replace(device=device)
    check_tasks_on_sources([source], tasks, **options)
    check_embedded_steps(source, [])
    from interp.timeline import head_timeline

    with warnings_as_lines():
        result = head_timeline(source, task_obj, config, pairs=pairs, sample=sample, seed=seed, out_dir=out)
    if scrubber is not None:  # the page again, its cells linked to the scrubber
        result.save_html(out / "timeline.html", scrubber=scrubber)
    for line in result.findings():
        typer.echo(f"- {line}")
    typer.echo(f"wrote {out}/timeline.html, timeline.csv/.parquet, pairs.csv, curve.csv ({len(result.pairs)} pairs)")
