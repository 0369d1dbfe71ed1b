"""Is it a few heads? The paper's mechanism (claim 2) measured on every emerged seed of an arm (issue 53).

One concept: claim 2 measured over an arm's seeds. Its two measurements, around the dense E at
interval widths and at the largest-jump pair (whose library part is
:mod:`interp.population.claim2_pair`), share the training, the curve check and the kept-run store;
split, each would carry its own copy of them.

For every emerged seed of the arms :data:`ARMS` of the population (``interp/data/suites/
population.yaml``; the point of emergence E read from its kept curve, docs/data/population):

1. the run is trained again, kernel-pinned as the population was, to ``E + 800`` steps (at most
   its budget), keeping every checkpoint's optimizer state (a run's weights at a step do not
   depend on when training stops or on what is kept on disk), and its capability curve is
   compared with the kept one at every checkpoint it shares (:func:`train_and_check`);
2. E is located to one step (:func:`interp.dense.dense_point`: zoom 100 -> 10 -> 1 steps,
   greedy accuracy 0.5 on 512 prompts, held for 2 checkpoints), and the pre steps ``E - w`` for
   each width ``w`` of :data:`WIDTHS` and the wide contrast ``E - 500 -> E + 500`` are re-trained
   exactly (:func:`interp.zoom.store_steps`, each checked against the stored end point bit for bit);
3. at each width the jump in p(answer) is decomposed on 256 prompts (seed 1; the dense search
   used seed 0) with 95 % bootstrap intervals (:func:`interp.decomposition.decompose_jump`):
   top-1, top-2 and all heads' patterns, all head outputs, QK and OV weights, and the seed's
   induction head's and previous-token head's patterns (the heads with the highest
   prefix-matching and previous-token scores at E; every head classed by
   :func:`interp.population.mechanism.classify_heads`).

Each finished run is kept in ``docs/data/population-mechanism/<run>.csv`` (rows) and
``<run>.json`` (dense point, head classes, the curve check, the seconds of each stage; written
last, atomically: a run with both files is done and is never measured again, so the entry resumes
on any clone; a damaged pair is named and redone). The run's training folder is removed after.
Then the per-arm statistics (:mod:`interp.population.mechanism`) are written to ``--out``
(``rows.csv``, ``widths.csv``, ``claims.csv``, ``mechanism.md``, ``mechanism.html``);
``--update-docs`` replaces docs/results.md's blocks between ``population-mechanism:begin`` /
``:end`` and ``population-mechanism-headline:begin`` / ``:end`` and writes
docs/figures/population_mechanism.html.

Runtime: measured per run in the kept ``.json`` (``seconds``) and stated in the docs block.

``--pair largest-jump`` (issue 65, item 3) measures claim 2 at the paper's kind of pair instead:
for every seed of the two arms (emerged or not), the consecutive checkpoints at the suite's native
spacing with the largest p(answer) jump on its kept curve (:func:`interp.population.claim2_pair.
largest_jump_pairs`); the run is trained again to the pair's post step, its kept curve checked, and
the share of the p jump and of the accuracy jump recovered by the top-2 heads' patterns, all
patterns and all head outputs measured on 256 independent prompts
(:func:`interp.population.claim2_pair.measure_pair`). Kept in
``docs/data/population-mechanism-pair/<run>.csv`` and ``.json`` (resumable the same way).

Usage: ``python -m analyses.population_mechanism [--limit N] [--runs RUN ...] [--update-docs]``
(``--no-compute``: the kept runs only). ``--spec population-decoupled --arms ARM`` measures the
emerged seeds of an arm of the decoupling work the same way (kept beside the population's runs;
its tables go to ``--out``, docs/results.md's block stays the population's arms').
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.claim2_timeline import keep_timeline
from interp.population.kept import (
    MECHANISM_KEPT,
    PAIR_KEPT,
    SPECS,
    evaluate_run,
    kept_paths,
    read_kept_curves,
    read_kept_pairs,
    read_kept_timelines,
)
from interp.population.kept import read_kept_mechanism as read_kept
from interp.population.kept import update_docs as replace_block

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_mechanism"
KEPT = MECHANISM_KEPT
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- population-mechanism:begin -->", "<!-- population-mechanism:end -->"
HEADLINE = "<!-- population-mechanism-headline:begin -->", "<!-- population-mechanism-headline:end -->"
#: The arms measured (issue 53): d_model 64 and 128, 2 layers, 4 heads each.
ARMS = ("neox-2l-64d-4h", "neox-2l-128d-4h")
#: Interval widths (steps): pre = post - width, post = E located to one step.
WIDTHS = (100, 20, 5)
#: The wide contrast: pre = E - WIDE, post = E + WIDE (steps).
WIDE = 500
#: Steps trained past the kept E (100-step resolution): the dense post may lie a checkpoint or two
#: later on 512 prompts, and the wide contrast needs post + WIDE.
MARGIN = 800
#: Where the largest-jump pair's runs are kept (``--pair largest-jump``).
PAIR_BLOCK = "<!-- population-mechanism-pair:begin -->", "<!-- population-mechanism-pair:end -->"


def planned_pairs(arms=ARMS, spec: str = "population") -> pd.DataFrame:
    """Every run of ``arms`` (emerged or not) with its largest-jump pair at the suite's native
    spacing (:func:`interp.population.claim2_pair.largest_jump_pairs`) and its budget, seed by seed."""
    from interp.population.claim2_pair import largest_jump_pairs
    from interp.sources.catalogue import load_suite_spec

    cfg = load_suite_spec(spec)
    curves = read_kept_curves(SPECS[spec][0])
    curves = curves[curves["arm"].isin(arms)]
    pairs = largest_jump_pairs(curves, cfg.checkpoint_every)
    pairs["budget"] = pairs["run"].map(curves.groupby("run")["budget"].first())
    pairs["arm_order"] = pairs["arm"].map({a: i for i, a in enumerate(arms)})
    return pairs.sort_values(["seed", "arm_order"]).drop(columns="arm_order").reset_index(drop=True)


def measure_pairs(
    todo: pd.DataFrame,
    kept: Path = PAIR_KEPT,
    n_prompts: int = 256,
    n_boot: int = 1000,
    echo=print,
    timeline: bool = True,
    measured: frozenset = frozenset(),
):
    """Train each run of ``todo`` (:func:`planned_pairs` rows) to its pair's post step, check its
    curve, measure claim 2 at the pair and keep it (rows first, the record last, atomically).

    With ``timeline`` the run's head timeline on the same checkpoints (every consecutive pair up
    to the post step, every head exact: :func:`interp.timeline.head_timeline`) is kept too, under
    ``kept/timeline/<run>.csv`` (issue 69 item 4); a run in ``measured`` (its pair already kept)
    is trained again for its timeline only."""
    from interp.core.io import atomic_to_csv, atomic_write_text, remove_folder
    from interp.population.claim2_pair import PAIR_COLUMNS, measure_pair
    from interp.sources import LocalSuiteSource
    from interp.sources.catalogue import load_suite_spec
    from interp.sources.environment import environment

    cfg = load_suite_spec("population")
    sizes = {size.name: size for size in cfg.sizes}
    curves = read_kept_curves(SPECS["population"][0])
    work = ROOT / "results" / "analyses" / NAME / "work-pair"
    for item in todo.itertuples():
        load, started = os.getloadavg()[0], time.perf_counter()
        folder, check = train_and_check(
            cfg, sizes[item.arm], int(item.seed), int(item.post_step), work, curves[curves["run"] == item.run],
            SPECS["population"][1],
        )  # fmt: skip
        trained = time.perf_counter() - started
        source = LocalSuiteSource(folder)
        try:
            if timeline:
                timed = time.perf_counter()
                keep_timeline(source, item.run, kept, n_prompts, n_boot)
                timed = time.perf_counter() - timed
            if item.run in measured:
                echo(f"{item.run}: timeline kept ({timed:.0f} s)")
                remove_folder(folder)
                continue
            rows = measure_pair(source, int(item.pre_step), int(item.post_step), n_prompts=n_prompts, n_boot=n_boot)
        finally:
            source.close()
        for key in ("kept_jump", "seed", "run", "arm"):
            rows.insert(0, key, getattr(item, key))
        env = environment(cfg)
        record = {
            "arm": item.arm, "run": item.run, "seed": int(item.seed), "pre_step": int(item.pre_step),
            "post_step": int(item.post_step), "kept_jump": float(item.kept_jump), "curve_check": check,
            "seconds": {"train_and_check": trained, "patch": time.perf_counter() - started - trained}
            | ({"of which timeline": timed} if timeline else {}),
            "seconds_total": time.perf_counter() - started, "load_average_at_start": load, "nice": os.nice(0),
            "cpu_model": env.get("cpu_model"), "python": env.get("python"),
            "settings": {"n_prompts": n_prompts, "n_boot": n_boot, "task_seed": 1},
        }  # fmt: skip
        atomic_to_csv(rows[PAIR_COLUMNS], kept / f"{item.run}.csv")
        atomic_write_text(kept / f"{item.run}.json", json.dumps(record, indent=1, default=float))
        remove_folder(folder)
        top = rows[(rows["metric"] == "p") & (rows["component"] == "top-2 patterns")].iloc[0]
        echo(
            f"{item.run}: pair {item.pre_step}->{item.post_step}, top-2 patterns recover {top['recovered']:.2f} "
            f"[{top['recovered_lo']:.2f}, {top['recovered_hi']:.2f}] of the p jump, curve check "
            f"{'identical' if check['identical'] else 'differs'}, {record['seconds_total']:.0f} s"
        )


def planned_runs(arms=ARMS, spec: str = "population") -> pd.DataFrame:
    """The emerged runs of ``arms`` with their kept E (steps), seed by seed across the arms, read
    from the kept curves of the population spec ``spec`` (:data:`analyses.population.SPECS`:
    ``population``, or an arm of the decoupling work such as ``population-decoupled``)."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves

    curves = read_kept_curves(SPECS[spec][0])
    runs = population_from_curves(curves, StudyConfig(threshold=THRESHOLD, hold=HOLD), grid=False).runs
    runs = runs[runs["arm"].isin(arms) & runs["emerged"]].copy()
    runs["arm_order"] = runs["arm"].map({a: i for i, a in enumerate(arms)})
    return runs.sort_values(["seed", "arm_order"])[["arm", "run", "seed", "E", "budget"]].reset_index(drop=True)


def train_and_check(
    cfg, size, seed: int, stop: int, work: Path, kept_curve: pd.DataFrame, n_prompts: int = 64
) -> tuple[Path, dict]:
    """Train one population run to ``stop`` (kernel-pinned, every checkpoint resumable) under
    ``work`` and compare its capability curve, evaluated on the ``n_prompts`` prompts its spec's
    curves were kept on, with the kept one at every shared checkpoint.

    Returns:
        ``(run folder, check)``: ``check`` holds ``checkpoints`` compared, ``identical`` (bit for
        bit), ``max_abs_diff_accuracy`` and ``max_abs_diff_p_answer`` (probability).
    """
    from interp.sources.catalogue import run_name
    from interp.sources.embedded import iter_suite

    short = replace(
        cfg, sizes=(size,), seeds=(seed,), steps=stop, size_steps=((size.name, stop),), keep_optimizer="every"
    )
    ((_, folder),) = list(iter_suite(short, root=work, n_jobs=1, progress=False, runs=[run_name(size, seed)]))
    curve = evaluate_run(folder, short, size, seed, n_prompts)
    both = curve.merge(kept_curve, on="step", suffixes=("", "_kept"))
    return folder, {
        "checkpoints": len(both),
        "identical": bool(
            len(both)
            and (both["accuracy"] == both["accuracy_kept"]).all()
            and (both["p_answer"] == both["p_answer_kept"]).all()
        ),
        "max_abs_diff_accuracy": float((both["accuracy"] - both["accuracy_kept"]).abs().max()),
        "max_abs_diff_p_answer": float((both["p_answer"] - both["p_answer_kept"]).abs().max()),
    }


def head_classes(model, tokenizer) -> pd.DataFrame:
    """Scores and mechanism of every head of ``model`` (:func:`interp.scores.head_scores` on 16
    random sequences of 20 tokens repeated once; :func:`interp.population.mechanism.classify_heads`)."""
    import torch

    from interp.population.mechanism import classify_heads
    from interp.scores import head_scores, repeated_random_tokens
    from interp.tasks import alnum_token_pool

    tokens = repeated_random_tokens(alnum_token_pool(tokenizer), n_prompts=16, period=20)
    with torch.inference_mode():
        scores = head_scores(model, tokens, period=20)
    n_layers, n_heads = scores["previous_token"].shape
    table = pd.DataFrame(
        [
            {"layer": l, "head": h, **{name: float(v[l, h]) for name, v in scores.items()}}
            for l in range(n_layers)
            for h in range(n_heads)
        ]
    )
    return classify_heads(table)


def measure_run(
    folder: Path,
    labels: dict,
    widths=WIDTHS,
    wide: int = WIDE,
    n_prompts: int = 256,
    dense_prompts: int = 512,
    n_boot: int = 1000,
) -> tuple[pd.DataFrame, dict]:
    """Locate E to one step and decompose the jump at each width and the wide contrast.

    Args:
        folder: a resumable run folder (every checkpoint's optimizer state, or the last one's:
            :func:`interp.zoom.zoom` re-trains from the nearest resumable step).
        labels: ``arm``, ``run``, ``seed`` for the rows.
        widths: pre = post - width (steps); wide: pre = post - wide, post + wide (steps).
        n_prompts, dense_prompts, n_boot: patching prompts (seed 1), dense-search prompts (seed 0),
            bootstrap resamples.

    Returns:
        ``(rows, record)``: rows with :data:`interp.population.mechanism.ROW_COLUMNS` (empty when
        no crossing holds); the record: the dense point, head classes, re-trained steps, seconds.
    """
    import torch

    from interp.core.settings import StudyConfig
    from interp.decomposition import COMPONENTS as TARGETS
    from interp.decomposition import DecomposeOptions, decompose_jump
    from interp.dense import dense_point
    from interp.patching import Target, capture_post
    from interp.population.mechanism import COMPONENTS, ROW_COLUMNS
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask
    from interp.zoom import store_steps, stored_steps

    seconds = {}
    started = time.perf_counter()
    point = dense_point(folder, resolution=1, n_prompts=dense_prompts)
    seconds["dense"] = time.perf_counter() - started
    record = {
        **labels,
        "dense_point": dict(point.as_row()),
        "crossing": point.post_step is not None,
    }
    if point.post_step is None or point.pre_step is None:
        return pd.DataFrame(columns=ROW_COLUMNS), {**record, "seconds": seconds}
    post = int(point.post_step)
    last = max(stored_steps(folder))
    contrasts = [(str(w), post - w, post) for w in widths if post - w >= 0]
    contrasts.append(("wide", max(0, post - wide), min(post + wide, last)))
    started = time.perf_counter()
    zooms = store_steps(folder, sorted({s for _, a, b in contrasts for s in (a, b)}))
    seconds["store"] = time.perf_counter() - started
    started = time.perf_counter()
    source = LocalSuiteSource(folder, include_zoom=True)
    rows = []
    try:
        batch = RepetitionTask(n_prompts=n_prompts, seed=1).build(source.tokenizer())
        at_post = source.load(post)
        classes = head_classes(at_post.model, source.tokenizer())
        mechanism = {f"L{r.layer}H{r.head}": r.mechanism for r in classes.itertuples()}
        induction = classes.sort_values("prefix_matching", ascending=False).iloc[0]
        previous = classes.sort_values("previous_token", ascending=False).iloc[0]
        own = {
            "induction_pattern": (int(induction["layer"]), int(induction["head"])),
            "previous_token_pattern": (int(previous["layer"]), int(previous["head"])),
        }
        targets = {name: TARGETS[name] for name in ("pattern", "z", "qk", "ov")}
        targets.update({name: Target("pattern", (head,)) for name, head in own.items()})
        captured = {}
        for width, pre_step, post_step in contrasts:
            if post_step not in captured:
                loaded = source.load(post_step)
                captured[post_step] = capture_post(loaded.model, batch.to("cpu"), weights=True)
            pre = source.load(pre_step)
            with torch.inference_mode():
                table = decompose_jump(
                    pre.model, captured[post_step], batch, StudyConfig(metric="p", ks=[1, 2], n_boot=n_boot),
                    DecomposeOptions(targets=targets, topk_kinds=("pattern",)),
                )  # fmt: skip
            for label, target, scope in COMPONENTS:
                match = table[(table["target"] == target) & (table["scope"].astype(str) == scope)]
                if not len(match):
                    continue
                row = match.iloc[0]
                heads = row["heads"] or ("L{}H{}".format(*own[target]) if target in own else f"all {len(classes)}")
                named = [h for h in str(heads).split() if h in mechanism]
                rows.append(
                    {
                        **{k: labels[k] for k in ("arm", "run", "seed")},
                        "width": width,
                        "pre_step": pre_step,
                        "post_step": post_step,
                        "component": label,
                        "heads": heads,
                        "mechanisms": "+".join(mechanism[h] for h in named) if named else "",
                        "recovered": row["recovered"],
                        "recovered_lo": row["recovered_lo"],
                        "recovered_hi": row["recovered_hi"],
                        "p_pre": row["value_pre"],
                        "p_post": row["value_post"],
                        "jump": row["value_post"] - row["value_pre"],
                        "jump_se": row["jump_se"],
                        "jump_too_small": bool(row["jump_too_small"]),
                    }
                )
    finally:
        source.close()
    seconds["patch"] = time.perf_counter() - started
    record.update(
        {
            "heads": classes.round(6).to_dict("records"),
            "contrasts": [{"width": w, "pre_step": a, "post_step": b} for w, a, b in contrasts],
            "induction_head": "L{}H{}".format(*own["induction_pattern"]),
            "previous_token_head": "L{}H{}".format(*own["previous_token_pattern"]),
            "retrained_steps": {
                "dense": int(point.retrained_steps),
                "store": int(sum(z.trained_steps for z in zooms)),
            },
            "max_abs_diff": max([0.0] + [z.max_abs_diff for z in point.zooms + zooms]),
            "seconds": seconds,
        }
    )
    return pd.DataFrame(rows, columns=ROW_COLUMNS), record


def measure_population(
    todo: pd.DataFrame,
    kept: Path = KEPT,
    work: Path | None = None,
    echo=print,
    spec: str = "population",
    **settings,
) -> list[str]:
    """Train, check and measure each run of ``todo`` (:func:`planned_runs` rows of the population
    spec ``spec``) and keep it (:func:`kept_paths`; rows first, the record last, each written
    atomically); returns the runs measured now. The run's training folder is removed after it is kept."""
    from interp.core.io import atomic_to_csv, atomic_write_text, remove_folder
    from interp.sources.catalogue import load_suite_spec
    from interp.sources.environment import environment

    cfg = load_suite_spec(spec)
    sizes = {size.name: size for size in cfg.sizes}
    folder_kept, n_kept_prompts = SPECS[spec]
    curves = read_kept_curves(folder_kept)
    work = Path(work) if work is not None else ROOT / "results" / "analyses" / NAME / "work"
    done = []
    for item in todo.itertuples():
        size = sizes[item.arm]
        stop = int(min(item.budget, int(item.E) + MARGIN))
        load = os.getloadavg()[0]
        started = time.perf_counter()
        folder, check = train_and_check(
            cfg, size, int(item.seed), stop, work, curves[curves["run"] == item.run], n_kept_prompts
        )
        train_seconds = time.perf_counter() - started
        labels = {"arm": item.arm, "run": item.run, "seed": int(item.seed)}
        rows, record = measure_run(folder, labels, **settings)
        meta = json.loads((folder / "suite.json").read_text())
        env = environment(cfg)
        record.update(
            {
                "E_kept": int(item.E),
                "trained_to": stop,
                "curve_check": check,
                "seconds": {"train_and_check": train_seconds, **record["seconds"]},
                "seconds_total": time.perf_counter() - started,
                "train_seconds_recorded": meta.get("train_seconds"),
                "load_average_at_start": load,
                "nice": os.nice(0),
                "cpu_model": env.get("cpu_model"),
                "python": env.get("python"),
                "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
            }
        )
        rows_path, record_path = kept_paths(item.run, kept)
        if len(rows):
            atomic_to_csv(rows, rows_path)
        atomic_write_text(record_path, json.dumps(record, indent=1, default=float))
        remove_folder(folder)
        done.append(item.run)
        echo(
            f"{item.run}: E {record['dense_point']['post_step']} (kept {int(item.E)}), curve check "
            f"{'identical' if check['identical'] else 'max |Δp| ' + format(check['max_abs_diff_p_answer'], '.2g')}, "
            f"{record['seconds_total']:.0f} s"
        )
    return done


def cost_line(records: list[dict], n_planned: int) -> str:
    """The measured cost per run (median over the kept records) and the estimate for the rest."""
    done = [r for r in records if "seconds_total" in r]
    if not done:
        return "No run measured yet."
    total = pd.Series([r["seconds_total"] for r in done])
    stages = pd.DataFrame([r["seconds"] for r in done]).median()
    loads = pd.Series([r.get("load_average_at_start", float("nan")) for r in done])
    parts = ", ".join(f"{k.replace('_', ' ')} {v:.0f} s" for k, v in stages.items())
    left = n_planned - len(done)
    by_arm = pd.DataFrame([{"arm": r.get("arm"), "s": r["seconds_total"]} for r in done]).groupby("arm", sort=False)
    per_arm = ", ".join(f"{arm} {part['s'].median():.0f} s" for arm, part in by_arm)
    rest = f"; the {left} runs left: about {left * total.median() / 3600:.1f} h at that load" if left > 0 else ""
    return (
        f"Cost per run (median of {len(done)}, on {done[0].get('cpu_model')}, Python {done[0].get('python')}, "
        f"load average {loads.min():.1f}–{loads.max():.1f} at the start): {total.median():.0f} s ({parts}); "
        f"per arm {per_arm}{rest}."
    )


def docs_block(rows: pd.DataFrame, records: list[dict], n_planned: int, settings: str) -> tuple[str, str]:
    """(docs/results.md's block, the headline lines) from the kept runs."""
    from interp.population.mechanism import width_table
    from interp.population.statistics import claim2_widths_result

    measured = len(records)
    partial = (
        f"**Measured so far: {measured} of the {n_planned} planned runs** (regenerate with "
        f"`python -m analyses.population_mechanism --update-docs` when the entry completes); "
        "until then nothing below is a population statistic."
        if measured < n_planned
        else f"All {n_planned} planned runs measured (every emerged seed of {', '.join(dict.fromkeys(rows['arm']))})."
    )
    lines = [partial, "", settings, "", cost_line(records, n_planned), ""]
    checks = [r["curve_check"] for r in records if "curve_check" in r]
    if checks:
        lines += [
            (
                f"Each run trained again matches its kept curve: accuracy exactly on "
                f"{sum(c['max_abs_diff_accuracy'] == 0 for c in checks)} of {len(checks)}, largest |Δ p(answer)| "
                f"{max(c['max_abs_diff_p_answer'] for c in checks):.2g}; every zoom reproduced its stored end point "
                f"(largest max |diff| {max(r.get('max_abs_diff', 0.0) for r in records):.3g})."
            ),
            "",
        ]
    if rows.empty:
        return "\n".join(lines) + "\n", partial
    claims_result = claim2_widths_result(rows, arm_format="**{}**")
    claims = claims_result.table
    lines += [
        (
            "Per arm and width: seeds where the top two heads' patterns recover ≥ 0.5 of the jump with the 95 % "
            "bootstrap interval above 0.5 (share of the measurable seeds, Wilson 95 % interval); the same for the "
            "seed's induction head's pattern; the mechanism of each measurable seed's top-1 head; runs whose jump "
            "is below 3 standard errors, named (not averaged in):"
        ),
        "",
        "| arm | width | seeds (measurable) | top-2 firm | share [95 % CI] | induction head firm | top-1 head is | jump within noise (seeds) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in claims.itertuples():
        width = f"{c.width} steps" if c.width.isdigit() else f"±{WIDE} (wide)"
        share = "—" if not c.measurable else f"{c.top2_share:.2f} [{c.top2_lo:.2f}, {c.top2_hi:.2f}]"
        lines.append(
            f"| {c.arm} | {width} | {c.seeds} ({c.measurable}) | {c.top2_firm} | {share} | "
            f"{c.induction_firm} of {c.measurable} | {c.top1_mechanisms or '—'} | {c.noise_seeds or '—'} |"
        )
    widths = width_table(rows)
    lines += [
        "",
        "Share of the jump recovered over the measurable seeds, median [quartiles]:",
        "",
    ]
    for arm, sub in widths.groupby("arm", sort=False):
        order = list(dict.fromkeys(sub["width"]))
        head = [f"{w} steps" if w.isdigit() else f"±{WIDE}" for w in order]
        lines += [f"**{arm}**", "", "| component | " + " | ".join(head) + " |", "| --- |" + " --- |" * len(order)]
        for component, part in sub.groupby("component", sort=False):
            cells = []
            for w in order:
                r = part[part["width"] == w]
                cells.append(
                    "—"
                    if not len(r) or not r.iloc[0]["measurable"]
                    else f"{r.iloc[0]['median']:.2f} [{r.iloc[0]['q1']:.2f}, {r.iloc[0]['q3']:.2f}] (n={r.iloc[0]['measurable']})"
                )
            lines.append(f"| {component} | " + " | ".join(cells) + " |")
        lines.append("")
    said = claims_result.headline
    lines += [f"- {s}" for s in said]
    headline = partial + "\n\n" + "\n".join(f"- {line}" for line in said)
    return "\n".join(lines) + "\n", headline


def update_docs(block: str, headline: str, figure_page: str, docs: Path = DOCS) -> None:
    """Replace docs/results.md's population-mechanism block and headline, write the figure page."""
    from interp.core.io import atomic_write_text

    atomic_write_text(ROOT / "docs" / "figures" / f"{NAME}.html", figure_page)
    text = docs.read_text()
    for (begin, end), body, heading in (
        ((BEGIN, END), block, "\n## Claim 2 over the population: is it a few heads? (issue 53)\n\n"),
        (HEADLINE, headline + "\n", "\n"),
    ):
        if begin not in text:
            text += f"{heading}{begin}\n{end}\n"
        text = re.sub(
            re.escape(begin) + r".*?" + re.escape(end), f"{begin}\n{body}{end}".replace("\\", "\\\\"), text, flags=re.S
        )
    atomic_write_text(docs, text)


def main(argv=None) -> None:
    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.population.mechanism import figure, width_table
    from interp.population.statistics import claim2_widths_result
    from interp.report import page as vis

    parser = argparse.ArgumentParser(prog=f"python -m analyses.{NAME}", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--kept", type=Path, default=KEPT, help="where finished runs are kept (default: docs')")
    parser.add_argument(
        "--spec",
        default="population",
        help="the population spec whose emerged seeds are measured (population, or the decoupling work's: "
        "population-decoupled, population-heads-dhead); docs are written for the population's arms only",
    )
    parser.add_argument("--arms", default=None, help="comma-separated arms of the spec (default: the population's two)")
    parser.add_argument("--runs", nargs="*", default=None, help="only these runs (names as the population spells them)")
    parser.add_argument("--limit", type=int, default=None, help="measure at most N runs now")
    parser.add_argument("--no-compute", action="store_true", help="use the kept runs only")
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)), help="pre -> post widths in steps")
    parser.add_argument("--prompts", type=int, default=256, help="patching prompts (seed 1)")
    parser.add_argument("--dense-prompts", type=int, default=512, help="dense search prompts (seed 0)")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--update-docs", action="store_true")
    parser.add_argument(
        "--pair",
        choices=["widths", "largest-jump"],
        default="widths",
        help="widths: pre = E - width around the dense E (issue 53); largest-jump: the consecutive checkpoints "
        "with the largest p jump, every seed of the two arms (issue 65, kept in docs/data/population-mechanism-pair)",
    )
    parser.add_argument("--seeds", default=None, help="largest-jump only: a seed range a-b (two processes split it)")
    parser.add_argument(
        "--no-timeline",
        dest="timeline",
        action="store_false",
        help="largest-jump only: do not keep each new run's head timeline (kept by default)",
    )
    parser.add_argument(
        "--timelines-missing",
        action="store_true",
        help="largest-jump only: also train the measured runs that have no kept timeline again, for it",
    )
    parser.add_argument("--jobs", type=int, default=1, help="(ignored: one run at a time, one thread)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored)")
    args = parser.parse_args(argv)
    try:
        widths = tuple(int(w) for w in args.widths.split(","))
    except ValueError:
        raise SystemExit(f"error: --widths {args.widths!r} must be comma-separated steps, e.g. 100,20,5") from None
    if any(w < 1 for w in widths) or (args.limit is not None and args.limit < 0) or args.prompts < 2:
        raise SystemExit(f"error: --widths {args.widths} must be >= 1, --limit >= 0, --prompts >= 2")
    from interp.sources.catalogue import load_suite_spec

    if args.spec not in SPECS:
        raise SystemExit(f"error: --spec {args.spec!r} is not a population spec; valid: {', '.join(sorted(SPECS))}")
    valid = [size.name for size in load_suite_spec(args.spec).sizes]
    arms = tuple(a for a in (args.arms or ",".join(ARMS if args.spec == "population" else valid)).split(",") if a)
    bad = [a for a in arms if a not in valid]
    if bad:
        raise SystemExit(f"error: --arms {bad[0]!r} is not an arm of {args.spec}; valid: {', '.join(valid)}")
    if args.update_docs and (args.spec != "population" or set(arms) != set(ARMS)):
        raise SystemExit(
            f"error: --update-docs writes docs/results.md's block of the population's arms ({', '.join(ARMS)}); "
            f"measure {args.spec}'s arms without it (their tables go to --out)"
        )
    if args.pair == "largest-jump":
        return main_pairs(args, arms)
    plan = planned_runs(arms, args.spec)
    unknown = sorted(set(args.runs or ()) - set(plan["run"]))
    if unknown:
        raise SystemExit(
            f"error: --runs {unknown}: not emerged runs of {', '.join(arms)} (valid: {', '.join(plan['run'])})"
        )
    started = time.time()
    _, records = read_kept(args.kept)
    have = {r["run"] for r in records}
    todo = plan[~plan["run"].isin(have)]
    if args.runs:
        todo = todo[todo["run"].isin(args.runs)]
    if args.limit is not None:
        todo = todo.head(args.limit)
    if not args.no_compute and len(todo):
        measure_population(
            todo,
            args.kept,
            spec=args.spec,
            widths=widths,
            n_prompts=args.prompts,
            dense_prompts=args.dense_prompts,
            n_boot=args.n_boot,
        )
    rows, records = read_kept(args.kept)
    rank = {a: i for i, a in enumerate(arms)}  # the tables and the figure in the order of --arms
    rows = rows[rows["arm"].isin(arms)].sort_values("arm", key=lambda c: c.map(rank), kind="stable")
    records = [r for r in records if r.get("arm") in rank]
    settings = (
        f"Command: `python -m analyses.{NAME} --widths {args.widths} --prompts {args.prompts} --dense-prompts "
        f"{args.dense_prompts} --n-boot {args.n_boot}`; arms {', '.join(arms)} (every emerged seed); E located to "
        f"one step (greedy accuracy 0.5 on {args.dense_prompts} repetition prompts, seed 0, held for 2 checkpoints); "
        f"post = E, pre = E − width, and the wide contrast E − {WIDE} → E + {WIDE}; patching {args.prompts} prompts "
        f"(seed 1), metric p(answer), 95 % bootstrap intervals ({args.n_boot} resamples) over prompts; head "
        "classes at E (induction: prefix-matching ≥ 0.2; previous-token: previous-token score ≥ 0.3; copying: "
        "OV copying score ≥ 0.5)."
    )
    block, headline = docs_block(rows, records, len(plan), settings)
    atomic_write_text(args.out / "mechanism.md", block)
    atomic_to_csv(rows, args.out / "rows.csv")
    claims = claim2_widths_result(rows) if len(rows) else None
    if claims is not None:
        atomic_to_csv(width_table(rows), args.out / "widths.csv")
        atomic_to_csv(claims.table, args.out / "claims.csv")
    title = "Claim 2 over the population: share of the jump recovered per width"
    figures = [("Share recovered per width and component (one point per seed)", figure(rows))]
    lead = list(claims.headline) if claims is not None else ["No run measured yet."]
    if len(records) < len(plan):
        lead = [
            f"Measured so far: {len(records)} of the {len(plan)} planned runs; not yet a population statistic."
        ] + lead
    atomic_write_text(args.out / "mechanism.html", vis.figures_page(title, figures, lead=lead))
    if args.update_docs:  # plotly.js from its CDN: the docs page stays small
        update_docs(block, headline, vis.figures_page(title, figures, inline_plotly=False, lead=lead))
    print(block)
    print(f"wrote {args.out} in {time.time() - started:.0f} s")
    print(f"population_mechanism_runs: {len(records)} of {len(plan)}")


def pair_block(rows: pd.DataFrame, records: list[dict], n_planned: int) -> str:
    """docs/results.md's block for the largest-jump pair: how many runs are in, the measured cost,
    the curve checks, the table per arm, metric and component, and the judge's line per arm."""
    from interp.population.statistics import claim2_pair_result

    n = len(records)
    lines = [
        f"**Measured so far: {n} of the {n_planned} planned runs**; until all are in, the shares below are not "
        "a population statistic."
        if n < n_planned
        else f"All {n_planned} planned runs measured.",
        "",
    ]
    if not n:
        return "\n".join(lines) + "\n"
    total = pd.Series([r["seconds_total"] for r in records])
    checks = [r["curve_check"] for r in records]
    lines += [
        (
            f"Cost per run: median {total.median():.0f} s (range {total.min():.0f}–{total.max():.0f} s; on "
            f"{records[0].get('cpu_model')}, Python {records[0].get('python')}, beside other work). Each run trained "
            f"again matches its kept curve: accuracy exactly on {sum(c['max_abs_diff_accuracy'] == 0 for c in checks)} "
            f"of {len(checks)}, largest |Δ p(answer)| {max(c['max_abs_diff_p_answer'] for c in checks):.2g}."
        ),
        "",
        "| arm | jump | component | seeds (measurable) | above half | below half | straddle | median share [quartiles] | jump within noise (seeds) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {a: i for i, a in enumerate(ARMS)}
    pair = claim2_pair_result(rows)
    for r in pair.table.sort_values("arm", key=lambda c: c.map(order), kind="stable").itertuples():
        median = "—" if not r.measurable else f"{r.median:.2f} [{r.q1:.2f}, {r.q3:.2f}]"
        lines.append(
            f"| {r.arm} | {'p(answer)' if r.metric == 'p' else 'accuracy'} | {r.component} | {r.seeds} ({r.measurable}) "
            f"| {r.above} | {r.below} | {r.straddle} | {median} | {r.noise_seeds or '—'} |"
        )
    lines.append("")
    lines += [f"- {v.text()}." for v in pair.verdict.parts]
    return "\n".join(lines) + "\n"


def timeline_block(rows: pd.DataFrame, timelines: dict[str, pd.DataFrame]) -> str:
    """docs/results.md's lines on claim 2 along the time axis (issue 69 item 4): per arm, when the
    seeds' top heads start to matter relative to E (:mod:`interp.population.claim2_timeline`)."""
    from interp.population.claim2_timeline import FRACTIONS, lead_summary, lead_table, lead_verdict
    from interp.population.tables import runs_from_curves
    from interp.sources.catalogue import load_suite_spec

    if not timelines:
        return ""
    cfg = load_suite_spec("population")
    curves = read_kept_curves(SPECS["population"][0])
    runs = runs_from_curves(curves[curves["run"].isin(list(timelines))])
    by_fraction = {f: lead_table(timelines, rows, runs, cfg.checkpoint_every, f) for f in FRACTIONS}
    leads = by_fraction[FRACTIONS[0]]
    lines = [
        "",
        (
            f"**Along the time axis** ({len(timelines)} of the {len(planned_pairs())} runs have a kept head timeline: "
            "every head's pattern patched from each checkpoint into the one before it, up to the pair's post step, "
            "every head exact). A seed's onset is the first checkpoint interval where one of its two top heads "
            f"reaches {FRACTIONS[0]:g} of its peak effect on p(answer) with its 95 % interval excluding 0, dated at "
            f"the interval's later checkpoint; the lead is E minus the onset (steps; checkpoints every "
            f'{cfg.checkpoint_every} steps, so ±{cfg.checkpoint_every} is "at E").'
        ),
        "",
        "| arm | seeds | dated | at E [95 % CI] | leads | lags | no onset | no E | median lead, steps [95 % CI] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = {a: i for i, a in enumerate(ARMS)}
    summary = lead_summary(leads)
    for r in summary.sort_values("arm", key=lambda c: c.map(order), kind="stable").itertuples():
        share = "—" if not r.dated else f"{r.at_E} ({r.at_E_lo:.2f}–{r.at_E_hi:.2f})"
        median = "—" if not r.dated else f"{r.median_lead:.0f} [{r.median_lo:.0f}, {r.median_hi:.0f}]"
        lines.append(
            f"| {r.arm} | {r.seeds} | {r.dated} | {share} | {r.leads} | {r.lags} | {r.no_onset} | {r.no_E} | {median} |"
        )
    lines.append("")
    for arm in sorted(summary.loc[summary["dated"] > 0, "arm"], key=order.get):
        lines.append(f"- {lead_verdict(by_fraction, arm).text()}.")
    lines.append(
        '- The paper: the jump "coincides with a few heads abruptly learning a task-relevant attention '
        'pattern" (claim 2); "at E" is that coincidence at this suite\'s checkpoint spacing.'
    )
    return "\n".join(lines) + "\n"


def main_pairs(args, arms) -> None:
    """``--pair largest-jump``: measure the missing runs (within ``--seeds``), then the tables."""
    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.population.statistics import claim2_pair_result

    if args.spec != "population" or set(arms) != set(ARMS):
        raise SystemExit(f"error: --pair largest-jump measures the population's arms ({', '.join(ARMS)}) only")
    plan = planned_pairs(arms)
    if args.seeds:
        try:
            a, b = (int(x) for x in args.seeds.split("-"))
        except ValueError:
            raise SystemExit(f"error: --seeds {args.seeds!r} must be a range a-b, e.g. 0-11") from None
        plan = plan[plan["seed"].between(a, b)]
    started = time.time()
    kept = args.kept if args.kept != KEPT else PAIR_KEPT
    _, records = read_kept_pairs(kept)
    if args.timelines_missing and not args.timeline:
        raise SystemExit(
            "error: --timelines-missing trains runs again for their timelines; it cannot go with --no-timeline"
        )
    done = frozenset(r["run"] for r in records)
    todo = plan[~plan["run"].isin(done)]
    if args.timelines_missing:  # measured runs without a timeline are trained again for it
        todo = pd.concat([todo, plan[plan["run"].isin(done - set(read_kept_timelines(kept)))]])
    if args.limit is not None:
        todo = todo.head(args.limit)
    if not args.no_compute and len(todo):
        measure_pairs(todo, kept, n_prompts=args.prompts, n_boot=args.n_boot, timeline=args.timeline, measured=done)
    rows, records = read_kept_pairs(kept)
    atomic_to_csv(rows, args.out / "pair_rows.csv")
    block = pair_block(rows, records, len(planned_pairs(arms))) + timeline_block(rows, read_kept_timelines(kept))
    atomic_write_text(args.out / "pair.md", block)
    if len(rows):
        atomic_to_csv(claim2_pair_result(rows).table, args.out / "pair_table.csv")
    if args.update_docs:
        replace_block(block, PAIR_BLOCK)
    print(block)
    print(f"wrote {args.out} in {time.time() - started:.0f} s")
    print(f"population_mechanism_pair_runs: {len(records)} of {len(planned_pairs(arms))}")


if __name__ == "__main__":
    main()
