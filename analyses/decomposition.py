"""Which component carries the jump? The embedded suite's points of emergence, decomposed.

For every run of a suite (default: the embedded default suite, all six runs, at the suite's own
checkpoint spacing): the point of emergence by bisection (``interp.emergence``), then, between
its pre and post checkpoints, the share of the jump in the metric recovered by patching each
component from post into pre (``interp.decomposition.decompose_jump``: all patterns, queries, keys,
values, head outputs, QK weights, OV weights, MLP outputs, MLP weights, embedding, unembedding;
top-K curves for patterns and head outputs; 95 % bootstrap intervals over prompts), and the
attribution pre-screen of the pattern patch checked against exact patching (Spearman rho, and
whether the exact top 2 heads are the estimate's top 2) for attribution patching (1 gradient
point) and integrated gradients (``--ig-steps`` points; ``interp.patching.attribution``).

Also the head scores (``interp.scores``: previous-token, prefix-matching, OV copying) at the
checkpoints around each point.

Writes to ``--out`` (default ``results/analyses/decomposition/``): ``components.csv``,
``prescreen.csv``, ``head_scores.csv``, ``decomposition.md`` (the tables docs/results.md quotes) and
``decomposition.html`` (the figures); ``--update-docs`` also replaces the block between the
``decomposition:begin`` / ``decomposition:end`` markers of ``docs/results.md`` and writes the
figure page to ``docs/figures/decomposition.html``.  Last line: ``decomposition_runs: N``.

Usage: ``python -m analyses.decomposition [--suite embedded] [--metric p] [--update-docs]``
(about 1 minute per run on 2 cores, after the suite is trained).
"""

from __future__ import annotations

import argparse
import re
import time
from pathlib import Path

import pandas as pd
import torch

from interp.cli.options import description
from interp.core.io import atomic_to_csv, atomic_write_text
from interp.core.terms import DEFAULT_THRESHOLD
from interp.emergence import DEFAULT_HOLD

ROOT = Path(__file__).resolve().parents[1]
NAME = "decomposition"
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- decomposition:begin -->", "<!-- decomposition:end -->"
SHOWN = ["pattern", "q", "k", "v", "z", "qk", "ov", "mlp", "mlp_weights", "embed", "unembed"]


def analyse_source(source, metric: str, n_boot: int, ig_steps: int, threshold: float = DEFAULT_THRESHOLD):
    """(components, prescreen rows, point) of one run; components None if it did not emerge."""
    from interp.core.settings import StudyConfig
    from interp.emergence import find_emergence
    from interp.patching import attribution_delta_p
    from interp.ranking import rank_heads_between
    from interp.ranking_stats import prescreen_rank_correlation
    from interp.sources.catalogue import model_and_seed
    from interp.tasks import RepetitionTask

    model, seed = model_and_seed(source.model_id)
    batch = RepetitionTask().build(source.tokenizer())
    point = find_emergence(source, batch, threshold=threshold)
    if not (point.emerged and point.pre_step is not None):
        return None, [], (model, seed, point), None
    config = StudyConfig(metric=metric, decompose=True, n_boot=n_boot)
    ranking = rank_heads_between(source, point.pre_step, point.post_step, batch, config)
    components = ranking.components.assign(model=model, seed=seed)
    pre = source.load(point.pre_step)
    exact = ranking.delta
    rows = []
    for steps in sorted({1, ig_steps}):
        estimate = attribution_delta_p(
            pre.model, batch.to(next(pre.model.parameters()).device), ranking.post_patterns, metric=metric, steps=steps
        )
        top_exact = set(torch.topk(exact.flatten(), 2).indices.tolist())
        top_est = set(torch.topk(estimate.flatten(), 2).indices.tolist())
        rows.append(
            {
                "model": model,
                "seed": seed,
                "pre_step": point.pre_step,
                "post_step": point.post_step,
                "method": "attribution patching" if steps == 1 else f"integrated gradients ({steps} points)",
                "steps": steps,
                "spearman": prescreen_rank_correlation(exact, estimate),
                "top2_found": top_exact == top_est,
                "metric": metric,
            }
        )
    from interp.scores import head_scores_over_checkpoints, steps_around

    steps = steps_around(source.searchable_steps(), point.pre_step, point.post_step, n_before=3, n_after=2)
    scores = head_scores_over_checkpoints(source, steps, model=model, seed=seed)
    scores["pre_step"], scores["post_step"] = point.pre_step, point.post_step
    return components, rows, (model, seed, point), scores


def scores_markdown(scores: pd.DataFrame) -> str:
    """Per run and checkpoint: the largest prefix-matching and previous-token scores over heads."""
    lines = [
        "",
        (
            "Head scores around each point (`interp.scores`; the largest over heads; steps relative to the "
            f"point: post = the first checkpoint at or above the threshold that holds for the next {DEFAULT_HOLD}, pre = the "
            "one before):"
        ),
        "",
        "| run | score | "
        + " | ".join(["pre − 3", "pre − 2", "pre − 1", "pre", "post", "post + 1", "post + 2"])
        + " |",
        "| --- | --- |" + " --- |" * 7,
    ]
    for (model, seed), sub in scores.groupby(["model", "seed"], sort=False):
        pre, post = int(sub["pre_step"].iloc[0]), int(sub["post_step"].iloc[0])
        steps = sorted(sub["step"].unique())
        before = [s for s in steps if s <= pre][-4:]
        after = [s for s in steps if s >= post][:3]
        slots = [None] * (4 - len(before)) + before + after + [None] * (3 - len(after))
        for score in ("prefix_matching", "previous_token"):
            best = sub[sub["score"] == score].groupby("step")["value"].max()
            cells = ["—" if s is None else f"{best[s]:.2f} ({s})" for s in slots]
            lines.append(f"| {model} seed {seed} | {score} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(components: pd.DataFrame, prescreen: pd.DataFrame, settings: str) -> str:
    """The tables of docs/results.md's decomposition section."""

    def fmt(row) -> str:
        return f"{row['recovered']:.2f} [{row['recovered_lo']:.2f}, {row['recovered_hi']:.2f}]"

    full = components[components["scope"] == "all"]
    lines = [
        settings,
        "",
        (
            "Share of the jump recovered, `recovered = (m_patched − m_pre) / (m_post − m_pre)`, "
            "with 95 % bootstrap intervals over prompts; every head / layer of the component patched at once."
        ),
        "",
    ]
    runs = list(dict.fromkeys(zip(full["model"], full["seed"])))
    header = ["component"] + [f"{m} seed {s}" for m, s in runs]
    lines += ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    steps = {(m, s): g.iloc[0] for (m, s), g in full.groupby(["model", "seed"])}
    lines.append(
        "| pre → post (steps); m pre → post | "
        + " | ".join(
            f"{int(steps[r]['pre_step'])} → {int(steps[r]['post_step'])}; {steps[r]['value_pre']:.3f} → {steps[r]['value_post']:.3f}"
            for r in runs
        )
        + " |"
    )
    for target in [t for t in SHOWN if t in set(full["target"])]:
        cells = []
        for model, seed in runs:
            row = full[(full["model"] == model) & (full["seed"] == seed) & (full["target"] == target)]
            cells.append(fmt(row.iloc[0]) if len(row) else "—")
        lines.append(f"| {target} | " + " | ".join(cells) + " |")
    top = components[components["scope"].astype(str).str.startswith("top-") & components["k"].isin([1, 2])]
    for target in ("pattern", "z"):
        for k in (1, 2):
            cells = []
            for model, seed in runs:
                row = top[(top["model"] == model) & (top["seed"] == seed) & (top["target"] == target) & (top["k"] == k)]
                cells.append(f"{fmt(row.iloc[0])} ({row.iloc[0]['heads']})" if len(row) else "—")
            lines.append(f"| top-{k} {target} | " + " | ".join(cells) + " |")
    lines += [
        "",
        (
            "Per run, the components whose whole-component patch recovers the most (95 % interval in brackets; "
            '"alone" = the interval\'s lower end is above 0.5, i.e. that component carries most of the jump by itself):'
        ),
        "",
    ]
    for model, seed in runs:
        sub = full[(full["model"] == model) & (full["seed"] == seed) & full["target"].isin(SHOWN)]
        sub = sub.sort_values("recovered", ascending=False)
        alone = [t for t, lo in zip(sub["target"], sub["recovered_lo"]) if lo > 0.5]
        best = ", ".join(f"{t} {fmt(r)}" for t, (_, r) in zip(sub["target"][:3], sub.head(3).iterrows()))
        jump = steps[(model, seed)]["value_post"] - steps[(model, seed)]["value_pre"]
        lines.append(
            f"- {model} seed {seed} (jump {jump:+.3f}): largest {best}; "
            + (f"alone: {', '.join(alone)}." if alone else "no component carries it alone.")
        )
    lines += [
        "",
        "Attribution pre-screen of the pattern patch vs exact per-head patching:",
        "",
        "| run | method | Spearman ρ | exact top 2 in the estimate's top 2 |",
        "| --- | --- | --- | --- |",
    ]
    for _, row in prescreen.iterrows():
        lines.append(
            f"| {row['model']} seed {row['seed']} | {row['method']} | {row['spearman']:.2f} | "
            f"{'yes' if row['top2_found'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def update_docs(block: str, figure_page: str) -> None:
    text = DOCS.read_text()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} block to replace")
    text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{block}{END}", text, flags=re.S)
    atomic_write_text(DOCS, text)
    atomic_write_text(ROOT / "docs" / "figures" / "decomposition.html", figure_page)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m analyses.decomposition", description=description(__doc__))
    parser.add_argument(
        "--suite",
        nargs="+",
        default=["embedded"],
        help="embedded | embedded-quick | embedded/<run> | run folders of a local suite (several allowed)",
    )
    parser.add_argument("--metric", default="p", choices=["p", "logprob", "logit-diff"])
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples over prompts")
    parser.add_argument("--ig-steps", type=int, default=2, help="integration points per layer of the IG pre-screen")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's decomposition block")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from interp.report import page as vis
    from interp.sources import open_sources

    start = time.time()
    frames, prescreen, points, scores = [], [], [], []
    for source in open_sources(args.suite, progress=False):
        try:
            components, rows, (model, seed, point), run_scores = analyse_source(
                source, args.metric, args.n_boot, args.ig_steps
            )
        finally:
            source.close()
        points.append((model, seed, point.pre_step, point.post_step, point.emerged))
        print(f"{model} seed {seed}: point {point.pre_step} -> {point.post_step} (emerged {point.emerged})", flush=True)
        if components is not None:
            frames.append(components)
            prescreen += rows
            scores.append(run_scores)
    components = pd.concat(frames, ignore_index=True)
    prescreen = pd.DataFrame(prescreen)
    shown = " ".join(Path(x).name if "/" in x and not x.startswith("embedded") else x for x in args.suite)
    settings = (
        f"Command: `python -m analyses.decomposition --suite {shown} --metric {args.metric} "
        f"--n-boot {args.n_boot} --ig-steps {args.ig_steps}`; task: `RepetitionTask()` (64 prompts); "
        f"point of emergence: greedy accuracy 0.5 held for {DEFAULT_HOLD} checkpoints, bisection; "
        f"metric: {args.metric}."
    )
    scores = pd.concat(scores, ignore_index=True)
    block = markdown(components, prescreen, settings) + scores_markdown(scores)
    page = vis.figures_page(
        "The jump decomposed by component",
        [
            ("Share of the jump each component recovers", vis.components_figure(components)),
            ("Top-K heads: patterns vs head outputs", vis.components_topk_figure(components)),
        ],
        inline_plotly=False,
    )  # also the docs' figure page: plotly.js from its CDN keeps it small
    atomic_to_csv(components, args.out / "components.csv")
    atomic_to_csv(prescreen, args.out / "prescreen.csv")
    atomic_to_csv(scores, args.out / "head_scores.csv")
    atomic_write_text(args.out / "decomposition.md", block)
    atomic_write_text(args.out / "decomposition.html", page)
    if args.update_docs:
        update_docs(block, page)
    print(block)
    print(f"wrote {args.out} in {time.time() - start:.0f} s")
    print(f"decomposition_runs: {len(frames)}")


if __name__ == "__main__":
    main()
