"""The head-level commands of ``emergence``: ``rank-heads`` (heads ranked by a patch's effect
between two steps), ``decompose`` (the jump by component), ``zoom`` (re-train between two
steps, storing checkpoints densely), ``readiness`` (capability with chosen heads set to their ideal
pattern) and ``scrub`` (every head's pattern over the checkpoints, as a page). Options and
argument checks: :mod:`interp.cli.options`; :mod:`interp.cli` puts these commands on the one app.

Each command but ``zoom`` takes the settings as :class:`~interp.core.settings.StudyConfig`'s fields
it reads (:func:`interp.cli.options.study_options`: the ranking's, the rule's, the loading ones) and
builds ``StudyConfig(**settings)`` first, which checks every value in one line.
"""

from __future__ import annotations

from pathlib import Path

import typer

from interp.cli.options import (
    LOADING,
    RANKING,
    RULE,
    LengthOpt,
    OneTaskOpt,
    PromptsOpt,
    TaskFileOpt,
    TaskOpt,
    check_common,
    check_embedded_heads,
    check_embedded_steps,
    check_resumable,
    check_sources,
    check_steps_available,
    check_tasks_on_sources,
    jump_flag,
    one_task,
    open_named,
    open_step_pair,
    parse_steps,
    source_options,
    study_options,
    warnings_as_lines,
)
from interp.core.settings import StudyConfig

#: the commands of this module, in the order ``emergence --help`` lists them (:mod:`interp.cli`)
app = typer.Typer()


@app.command("rank-heads")
@study_options(RANKING + LOADING)
def rank_heads(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    pre: int = typer.Option(..., min=0, help="Pre-emergence step: of the schedule, or one `emergence zoom` stored."),
    post: int = typer.Option(..., min=0, help="Post-emergence step (later than --pre; zoomed steps too)."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write heads.csv and topk.csv here."),
    **settings,
):
    """Patch each head's attention pattern from POST into PRE; rank by delta (metric units); joint top-K."""
    if pre == post:
        raise ValueError(f"--pre and --post are both {pre}: patching needs two different checkpoints")
    if pre > post:
        raise ValueError(
            f"--pre {pre} is later than --post {post}: --post must be the later checkpoint "
            "(patterns are patched from post into pre)"
        )
    config = StudyConfig(**settings, decompose=False)  # every setting checked here, once (no torch imported)
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out, task_file)
    task_obj = one_task(tasks, "rank-heads")
    from interp.tasks import metric_for

    metric = metric_for(task_obj, config.metric)
    check_tasks_on_sources([source], tasks, **options)
    src = open_step_pair(source, pre, post, "rank-heads", **options)
    from interp.core.io import atomic_to_csv
    from interp.main_job.report import HEADS_COLUMNS, TOPK_COLUMNS, labelled
    from interp.ranking import rank_heads_between
    from interp.sources.catalogue import model_and_seed

    config = config.replace(device=device, metric=metric)
    batch = task_obj.build(src.tokenizer())
    with warnings_as_lines():
        result = rank_heads_between(src, pre, post, batch, config)
    model, seed = model_and_seed(src.model_id)
    columns = list(HEADS_COLUMNS)
    n_heads, n_kv = int(result.delta.shape[1]), int(result.heads["kv_head"].max()) + 1
    if n_kv < n_heads:  # grouped-query attention: each row is a query head
        typer.echo(
            f"grouped-query attention: {n_heads} query heads per layer share {n_kv} key/value heads; a head below "
            f"is a query head (its own pattern patched), kv_head the key/value head it reads"
        )
    heads = labelled(result.heads, model, seed, columns, task=task_obj.name, prepend_bos=batch.prepend_bos)
    topk = labelled(result.topk, model, seed, TOPK_COLUMNS, task=task_obj.name, prepend_bos=batch.prepend_bos)
    typer.echo(
        f"metric={result.metric} ({result.unit}) pre={result.value_pre:.4f} post={result.value_post:.4f} "
        f"jump={result.value_post - result.value_pre:.4f} ± {result.jump_se:.4f}{jump_flag(result.jump_too_small)}"
    )
    typer.echo(heads.head(10).to_string(index=False))
    from interp.report.findings import interval_text

    shares = "; ".join(
        f"K={int(row.k)} {interval_text(row.recovered, row.recovered_lo, row.recovered_hi, 2)}"
        for row in topk.head(4).itertuples()
    )
    noisy = " ⚠ noisy (jump below 3 s.e.)" if result.jump_too_small else ""
    typer.echo(f"recovered by the top K heads' patterns [95 % CI]: {shares}{noisy}")
    if out is not None:
        atomic_to_csv(heads, out / "heads.csv")
        atomic_to_csv(topk, out / "topk.csv")


@app.command("decompose")
@study_options(("method", "metric", "ks", "n_boot", *LOADING))
def decompose(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    pre: int = typer.Option(..., min=0, help="Pre-emergence step: of the schedule, or one `emergence zoom` stored."),
    post: int = typer.Option(..., min=0, help="Post-emergence step (later than --pre; zoomed steps too)."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write components.csv here."),
    **settings,
):
    """Share of the PRE -> POST jump each component recovers when patched from POST into PRE."""
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    config = StudyConfig(**settings)  # every setting checked here, once (no torch imported)
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out, task_file)
    task_obj = one_task(tasks, "decompose")
    from interp.tasks import metric_for

    metric = metric_for(task_obj, config.metric)
    check_tasks_on_sources([source], tasks, **options)
    src = open_step_pair(source, pre, post, "decompose", **options)
    from interp.core.io import atomic_to_csv
    from interp.decomposition import decompose_between

    batch = task_obj.build(src.tokenizer())
    with warnings_as_lines():
        table = decompose_between(src, pre, post, batch, config.replace(metric=metric, device=device)).assign(
            task=task_obj.name, prepend_bos=batch.prepend_bos
        )
    columns = ["target", "scope", "k", "heads", "value", "recovered", "recovered_lo", "recovered_hi"]
    first = table.iloc[0]
    typer.echo(
        f"metric={metric} ({first['unit']}) pre={first['value_pre']:.4f} post={first['value_post']:.4f} "
        f"jump={first['value_post'] - first['value_pre']:.4f} ± {first['jump_se']:.4f}"
        f"{jump_flag(bool(first['jump_too_small']))}"
    )
    typer.echo(table[columns].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    whole = table[(table["scope"] == "all") & table["target"].isin(["block", "interaction"])].set_index("target")
    if len(whole) == 2:
        parts = table[(table["scope"] == "all") & ~table["target"].isin(["block", "interaction"])]
        best = parts.loc[parts["recovered"].idxmax()]
        typer.echo(
            f"all blocks at once recover {whole.loc['block', 'recovered']:.3f} "
            f"[{whole.loc['block', 'recovered_lo']:.3f}, {whole.loc['block', 'recovered_hi']:.3f}]; the best single "
            f"component, {best['target']}, {best['recovered']:.3f}; interaction (all blocks − qk − ov − "
            f"mlp_weights) {whole.loc['interaction', 'recovered']:.3f} "
            f"[{whole.loc['interaction', 'recovered_lo']:.3f}, {whole.loc['interaction', 'recovered_hi']:.3f}]"
        )
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
    zoom overlay (RUN/zoom/); the base schedule is left as it is. A run that keeps the optimizer
    state of its last checkpoint only is re-trained from the nearest earlier resumable step (else
    step 0); the steps and an estimate of the time are printed before it starts."""
    if pre >= post:
        raise ValueError(f"--pre {pre} must be earlier than --post {post}")
    if every is not None and every >= post - pre:
        raise ValueError(
            f"--every {every} leaves no step strictly between --pre {pre} and --post {post}; "
            f"use --every below {post - pre}"
        )
    from interp.sources.door import check_one_run

    check_one_run(source, "zoom")
    check_resumable(source, "zoom")
    check_embedded_steps(source, [pre, post])
    from interp.zoom import zoom as zoom_run

    (src,) = open_named([source])
    result = zoom_run(src, pre, post, every=every, tolerance=tolerance, echo=typer.echo)
    typer.echo(
        f"{result.run}: re-trained {result.trained_steps} steps ({result.resumed_from} -> {result.post}) in "
        f"{result.seconds:.1f} s with {result.threads} thread(s); max |diff| at step {result.post}: "
        f"{result.max_abs_diff:.3g} (tolerance {result.tolerance:g}); stored {len(result.new_steps)} new "
        f"steps every {result.every}: {result.new_steps}"
    )


@app.command("readiness")
@study_options(("method", "n_boot", *RULE, *LOADING))
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
    steps: str | None = typer.Option(None, help="Comma-separated steps (default: every searchable step)."),
    task: str | None = TaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    task_file: list[Path] | None = TaskFileOpt,
    out: Path | None = typer.Option(None, help="Write readiness.csv, readiness_points.csv and readiness.html here."),
    **settings,
):
    """Per checkpoint, capability as trained and with the chosen heads' attention patterns set to
    their ideal pattern; the readiness step R and E - R (docs/guide.md, "Ideal patterns, readiness and forcing")."""
    from interp.readiness import parse_heads, parse_patterns

    chosen = parse_heads(heads)
    names = parse_patterns(patterns, None if chosen == "auto" else len(chosen))
    config = StudyConfig(**settings)  # every setting checked here, once (no torch imported)
    wanted = parse_steps(steps) if steps else None
    check_sources(source)
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, out, task_file)
    task_obj = one_task(tasks, "readiness")
    check_tasks_on_sources(source, tasks, **options)
    for name in source:
        check_embedded_steps(name, wanted or [])
        check_embedded_heads(name, chosen)
    import pandas as pd

    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.readiness import POINTS_COLUMNS, readiness, readiness_page

    config = config.replace(device=device)
    results = []
    for src in open_named(source, **options):
        if wanted is not None:
            check_steps_available(src, wanted)
        result = readiness(
            src, task_obj.build(src.tokenizer()), heads=chosen, patterns=names, steps=wanted, config=config
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
    """A heads table (``rank-heads --out``'s heads.csv: layer, head, delta), or the heads.csv of a run
    folder (``emergence run --out``, ``rank-heads --out``), read before any loading."""
    import pandas as pd

    path = Path(path).expanduser()
    if path.is_dir() and (path / "heads.csv").is_file():
        path = path / "heads.csv"
    if not path.is_file():
        raise ValueError(
            f"--heads {str(path)!r} is neither a file nor a folder holding heads.csv; expected heads.csv "
            "written by emergence rank-heads/run, or the folder they wrote (--out)"
        )
    try:
        table = pd.read_csv(path)
    except Exception as err:  # a file pandas cannot parse: one line naming it
        raise ValueError(f"--heads {str(path)!r} is not a CSV table ({type(err).__name__})") from None
    if not {"layer", "head", "delta"} <= set(table.columns):
        raise ValueError(f"--heads {str(path)!r} has columns {list(table.columns)}; expected layer, head, delta")
    return table


@app.command()
@study_options(("scores", *RULE, "method", "metric", "prescreen_top_n", "prescreen_steps", *LOADING))
def scrub(
    source: str = typer.Argument(..., help="One run: hub id, suite folder or embedded[-quick]/<run>."),
    out: Path = typer.Option(..., help="The page to write (.html)."),
    steps: str | None = typer.Option(None, help="Comma-separated steps (default: every checkpoint, zoomed steps too)."),
    task: str | None = OneTaskOpt,
    n_prompts: int = PromptsOpt,
    length: int = LengthOpt,
    prompts: int = typer.Option(4, min=1, max=32, help="Prompts of the task the page's chooser offers."),
    heads: Path | None = typer.Option(
        None,
        help="A ranking: heads.csv (rank-heads/run --out) or the folder holding it. Δp per head, heads ordered "
        "by it. Without it, --rank computes one.",
    ),
    rank: bool = typer.Option(
        True,
        help="Without --heads: rank the heads between the point of emergence found on the scrubbed curve "
        "(as rank-heads: each head's post pattern patched into pre), so the page orders them by Δp.",
    ),
    **settings,
):
    """One offline page: every head's attention pattern on a prompt at each checkpoint, a step
    slider with the point of emergence on its track, heads ordered by Δp (from --heads, or ranked
    here with --rank), the difference against the previous or any chosen step (per-step or fixed
    colour range), one head enlarged with its tokens written out, and the capability curve, head
    scores and Δp beside it.

    \b
    Keys, once the page has focus (click it; also listed on the page):
      ← / →        previous / next checkpoint     Home / End   first / last checkpoint
      p            play / pause                   d            difference on / off
      r            the step shown becomes the difference's reference step
      f            fixed difference range on / off (the same colour scale at every step)
      Enter        enlarge the focused head (or click it); Esc closes it
      ↑ / ↓        in the enlarged view: previous / next head
    """
    from interp.sources.door import check_one_run

    config = StudyConfig(**settings)  # every setting checked here, once (no torch imported)
    check_one_run(source, "scrub")
    out = _check_page_path(out)
    wanted = parse_steps(steps) if steps else None
    options = source_options(config)
    device, tasks = check_common(config.device, task, n_prompts, length, None)
    task_obj = one_task(tasks, "scrub")
    from interp.tasks import metric_for

    metric = metric_for(task_obj, config.metric)
    check_tasks_on_sources([source], tasks, **options)
    ranking = _read_ranking(heads) if heads is not None else None
    if ranking is not None and "task" in ranking.columns and ranking["task"].nunique() > 1:
        ranking = ranking[ranking["task"] == task_obj.name]
        if len(ranking) == 0:
            raise ValueError(f"--heads {str(heads)!r} has no rows for the task {task_obj.name!r}")
    check_embedded_steps(source, wanted or [])
    (src,) = open_named([source], **options)
    if wanted is not None:
        check_steps_available(src, wanted)
    if ranking is not None and {"model", "seed"} <= set(ranking.columns):
        from interp.sources.catalogue import model_and_seed

        model, seed = model_and_seed(src.model_id)
        mine = ranking[(ranking["model"] == model) & (ranking["seed"] == seed)]
        if len(mine) == 0 and ranking[["model", "seed"]].drop_duplicates().shape[0] > 1:
            raise ValueError(f"--heads {str(heads)!r} has no rows for {model} seed {seed}")
        ranking = mine if len(mine) else ranking
    from interp.scrubbing import scrubber

    with warnings_as_lines():  # no point of emergence to rank between, too few prompts, ...
        page = scrubber(
            src,
            task=task_obj,
            steps=wanted,
            n_prompts=prompts,
            config=config.replace(device=device, metric=metric),
            ranking=ranking,
            rank=rank,
            progress=False,
        )
    page.save_html(out)
    data = page.data
    ranked = (
        f"; heads ordered by {data.delta_label()} ({'--heads' if ranking is not None else 'ranked here'})"
        if data.delta_p is not None
        else ""
    )
    typer.echo(
        f"wrote {out}: {len(data.steps)} checkpoints ({len(data.zoom_steps)} zoomed) x "
        f"{data.patterns.shape[2] * data.patterns.shape[3]} heads x {len(data.tokens)} prompts of "
        f"{data.patterns.shape[-1]} tokens; {out.stat().st_size / 1e6:.2f} MB{ranked}"
    )
    src.close()
