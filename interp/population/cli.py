"""``emergence population``: survival statistics of the point of emergence over a population of
seeds, from checkpoint sources (every checkpoint evaluated) or from a capability table (CSV).

Mounted lazily by :data:`emergence_lens.cli.LAZY_COMMANDS` (statsmodels and scipy are imported
only when it runs). Every argument is checked before anything loads: the sources' names, the
task, the settings and budget, the output folder, and a curves file's columns and values. The
settings' options are :class:`~interp.core.settings.StudyConfig`'s fields it reads (the rule's and
``device``, :func:`interp.cli.options.study_options`).
"""

from __future__ import annotations

from pathlib import Path

import typer

from interp.cli.options import RULE, LengthOpt, PromptsOpt, study_options

app = typer.Typer(add_completion=False, help="Survival statistics of the point of emergence over seeds.")


def _read_csv(path: Path):
    """A CSV table with every float as written: pandas before 3.0 parses floats with a fast parser
    that can be one unit in the last place off (``make check-floors``, pandas 2.1 and 2.2)."""
    import pandas as pd

    return pd.read_csv(path, float_precision="round_trip")


def _read_curves(path: Path, budget: int | None):
    """The capability table in ``path`` (CSV or parquet), checked (one-line errors)."""
    import pandas as pd

    from interp.population.tables import check_curves

    if not path.is_file():
        raise ValueError(f"--from-curves {str(path)!r}: no such file (a CSV or parquet capability table)")
    try:
        table = pd.read_parquet(path) if path.suffix.lower() == ".parquet" else _read_csv(path)
    except (ValueError, OSError, pd.errors.ParserError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"--from-curves {str(path)!r}: not a readable table ({first})") from None
    return check_curves(table, budget=budget)


def _read_mechanism(path: Path):
    """Claim 2's per-run rows in ``path`` (CSV or parquet, as ``python -m analyses.population_mechanism``
    writes ``rows.csv``), checked (one-line errors)."""
    import pandas as pd

    from interp.population.mechanism import check_rows

    if not path.is_file():
        raise ValueError(f"--mechanism {str(path)!r}: no such file (claim 2's per-run rows, CSV or parquet)")
    try:
        table = pd.read_parquet(path) if path.suffix.lower() == ".parquet" else _read_csv(path)
        return check_rows(table)
    except (ValueError, OSError, pd.errors.ParserError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"--mechanism {str(path)!r}: {first}") from None


@app.command("population")
@study_options((*RULE, "device"))
def population_command(
    source: list[str] | None = typer.Argument(
        None,
        help=(
            "Sources (runs): embedded, embedded-quick, embedded/<run>, suite:<spec> (every run of a suite spec: a "
            "shipped name such as population, or a .yaml file), suite:<spec>/<run>, suite folders, hub ids."
        ),
    ),
    out: Path = typer.Option(..., "--out", help="Output folder: tables (CSV, parquet) and population.html."),
    from_curves: Path | None = typer.Option(
        None,
        "--from-curves",
        help="A capability table (CSV or parquet: arm, run, seed, n_layers, d_model, n_heads, d_head, step, "
        "p_answer, accuracy, budget) instead of sources.",
    ),
    task: str = typer.Option("repetition", help="Capability task (a name from `emergence list-tasks`)."),
    budget: int | None = typer.Option(
        None, help="Step budget of every run (steps): not emerged by then = censored. Default: the last step."
    ),
    reference: str | None = typer.Option(
        None,
        help="Arm the pairwise log-rank tests compare with. Default: the shipped spec's reference arm when the arms "
        "are a shipped population's (neox-2l-64d-4h for `population`), else the first arm by shape.",
    ),
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    title: str = typer.Option("emergence over seeds", help="The page's title."),
    mechanism: Path | None = typer.Option(
        None,
        "--mechanism",
        help="Claim 2's per-run rows (CSV or parquet, as `python -m analyses.population_mechanism` writes rows.csv): "
        "the page then shows the share of the jump each component recovers per width, beside claims 1 and 4.",
    ),
    **settings,
):
    """Survival statistics of the point of emergence over seeds: Kaplan-Meier per arm, median E
    with its interval, share never emerged, log-rank tests, Cox hazard ratio per doubling of heads;
    prints the paper's claims answered (``PopulationResult.claims``) and the findings, and writes the tables and population.html to OUT."""
    from interp.core.io import check_out_dir

    if budget is not None and budget < 0:
        raise ValueError(f"--budget {budget}: must be an integer >= 0 (optimizer steps)")
    from interp.core.settings import StudyConfig

    config = StudyConfig(**settings)  # every setting checked here, once, before anything loads
    check_out_dir(out)
    if bool(source) == (from_curves is not None):
        raise ValueError("give either sources or --from-curves FILE (one of the two)")
    rows = _read_mechanism(mechanism) if mechanism is not None else None
    if from_curves is not None:
        from interp.population.tables import default_reference, population_from_curves

        curves = _read_curves(from_curves, budget)
        if reference is None:
            reference = default_reference(curves["arm"].unique())
        result = population_from_curves(curves, config, reference=reference, title=title)
    else:
        from interp.cli.options import check_common, check_sources, check_tasks_on_sources, one_task

        check_sources(list(source or []))
        device, tasks = check_common(config.device, task, n_prompts, length, out)
        config = config.replace(device=device)
        task_obj = one_task(tasks, "population")
        check_tasks_on_sources(list(source or []), tasks)
        from interp.population.collect import population

        result = population(
            list(source or []),
            task=task_obj,
            config=config,
            budget=budget,
            reference=reference,
            title=title,
            progress=False,
        )
    if rows is not None:
        result = result.with_mechanism(rows)
    written = result.save(out)
    for line in result.claims + result.mechanism_claims + result.findings:
        typer.echo(line)
    typer.echo(f"wrote {len(written)} files to {out} (page: {written['population.html']})")
