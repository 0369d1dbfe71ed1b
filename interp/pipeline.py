"""The main job end to end: capability per checkpoint -> point of emergence -> attention-pattern
patching from post into pre -> head ranking by delta_p -> joint top-K recovery -> report.

Method (Baherwani et al. 2026, Pythia part): find the pair (pre, post) of consecutive
checkpoints where the capability jumps; patch each head's attention pattern
(``blocks.{l}.attn.hook_pattern``, all query positions) from post into pre and record
``delta_p = mean p_patched(answer) - mean p_pre(answer)``; rank heads by ``delta_p``; patch the
top K jointly and report ``recovered = (p_K - p_pre) / (p_post - p_pre)`` (ARENA-style
calibration: pre = 0, post = 1).

Every function returns DataFrames and plotly figures for Jupyter; :meth:`MainJobReport.save`
writes the tables and the self-contained ``report.html``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from interp.emergence import EmergencePoint, StepEvaluator, find_emergence, full_scan
from interp.io import atomic_to_csv, atomic_to_parquet, atomic_write_text
from interp.tasks import CapabilityTask, RepetitionTask, TaskBatch
from interp import visualisation as vis

EMERGENCE_COLUMNS = ["model", "seed", "step", "accuracy", "p_answer"]
POINTS_COLUMNS = ["model", "seed", "pre_step", "post_step", "emerged", "n_evaluations", "monotone", "threshold"]
HEADS_COLUMNS = ["model", "seed", "layer", "head", "delta_p", "rank", "delta_p_attribution"]
TOPK_COLUMNS = ["model", "seed", "k", "p_patched", "recovered"]

SUMMARY_LEGEND = (
    "<b>pre_step → post_step</b>: consecutive checkpoints where greedy accuracy crosses the threshold and "
    "stays above it (training steps). <b>n_evaluations</b>: checkpoints the bisection evaluated. "
    "<b>p_pre, p_post</b>: mean probability of the answer token. <b>jump</b> = p_post − p_pre (recovered "
    "divides by it: below ~0.05 it is ill-conditioned). <b>top_head</b>, <b>top_delta_p</b>: the head whose "
    "post-step attention pattern, patched alone into the pre step, raises p(answer) most, and by how much. "
    "<b>recovered_top2</b>: (p with the top 2 heads patched − p_pre) / jump. <b>prescreen_spearman</b>: rank "
    "correlation of the 1-forward-1-backward attribution estimate with exact Δp over heads."
)


def model_and_seed(model_id: str) -> tuple[str, int]:
    """Split a run id into (model, seed): ``EleutherAI/pythia-70m-seed3`` -> (``pythia-70m``, 3).

    The PolyPythia base repos (``EleutherAI/pythia-70m``, trained with data seed 1234) are
    labelled seed 0, as in the PolyPythias release. Ids without a ``-seed{N}`` suffix get seed 0.
    """
    name = model_id.rstrip("/").split("/")[-1]
    match = re.fullmatch(r"(.+)-seed(\d+)", name)
    return (match.group(1), int(match.group(2))) if match else (name, 0)


@dataclass
class RunAnalysis:
    """Everything the main job computed for one run (one model at one seed).

    ``delta_p`` is ``Float[Tensor, "layer head"]`` in probability units; ``example_patterns`` holds
    the top heads' patterns on prompt 0 as ``Float[Tensor, "2*n_top query_pos key_pos"]``
    (pre then post for each head) with ``example_names`` and ``example_tokens`` for display.
    """

    def _repr_html_(self) -> str:
        """Jupyter display: the run's summary row, then the report's sections for this run."""
        from interp.display import NOTEBOOK_ASSETS, style_tag, table_fragment

        ctx = vis.ReportContext(assets=NOTEBOOK_ASSETS, threshold=self.point.threshold,
                                delta_p_bound=vis.delta_p_bound([self]))
        summary = table_fragment(MainJobReport(runs=[self], threshold=self.point.threshold).summary())
        return f"<div class='el-run-analysis'>{style_tag()}{summary}{vis.run_html(self, ctx, level=3)}</div>"

    model: str
    seed: int
    model_id: str
    point: EmergencePoint
    curve: pd.DataFrame
    p_pre: float | None = None
    p_post: float | None = None
    delta_p: Float[Tensor, "layer head"] | None = None
    heads: pd.DataFrame | None = None
    topk: pd.DataFrame | None = None
    example_tokens: list[str] = field(default_factory=list)
    example_patterns: Tensor | None = None
    example_names: list[str] = field(default_factory=list)
    rank_correlation_prescreen: float | None = None


def _labelled(df: pd.DataFrame, model: str, seed: int, columns: Sequence[str]) -> pd.DataFrame:
    df = df.copy()
    df.insert(0, "seed", seed)
    df.insert(0, "model", model)
    return df[list(columns)]


def rank_heads_between(
    source, pre_step: int, post_step: int, batch: TaskBatch, method: str = "fast",
    prescreen_top_n: int | None = None, device: str | None = None, n_example_heads: int = 3,
    ks: Sequence[int] | None = None,
) -> dict:
    """Patch every head's pattern from ``post_step`` into ``pre_step`` and rank heads by delta_p.

    Args:
        source: a checkpoint source.
        pre_step, post_step: training steps (must differ and both be available).
        batch: task prompts tokenised for ``source``'s tokenizer.
        method: ``"fast"`` (batched, layer-skipping), ``"reference"`` (one forward per head,
            TransformerLens's ``get_act_patch_attn_head_pattern_all_pos``) or ``"attribution"``
            (1 forward + 1 backward estimate; exact delta_p only for ``prescreen_top_n`` heads,
            default a quarter of the heads).
        prescreen_top_n: with ``"fast"``/``"attribution"``, compute exact delta_p only for the
            attribution pre-screen's top N heads (others NaN, ranked after).
        n_example_heads: top heads whose patterns are kept for display.
        ks: K values for joint top-K patching (default 1 … all heads).

    Returns:
        dict with ``p_pre``, ``p_post`` (probability), ``delta_p`` ``Float[Tensor, "layer head"]``,
        ``heads`` (layer, head, delta_p, rank, delta_p_attribution), ``topk`` (k, p_patched, recovered), the example
        patterns, and ``rank_correlation_prescreen`` when a pre-screen ran.

    Raises:
        ValueError: if ``pre_step == post_step`` or ``method`` is unknown.
    """
    from interp.patching import (PatchingInputs, attribution_delta_p, cache_patterns, delta_p_all_heads,
                                 mean_answer_prob)
    from interp.ranking import prescreen_rank_correlation, rank_heads, topk_recovery

    if pre_step == post_step:
        raise ValueError(f"pre_step == post_step == {pre_step}: patching needs two different checkpoints")
    if method not in ("fast", "reference", "attribution"):
        raise ValueError(f"method={method!r}; valid: 'fast', 'reference', 'attribution'")
    post = source.load(post_step, device=device)
    model_device = next(post.model.parameters()).device
    inputs = PatchingInputs(batch.tokens.to(model_device), batch.answers.to(model_device), batch.answer_pos.to(model_device))
    with torch.inference_mode():
        post_patterns = cache_patterns(post.model, inputs.tokens).clone()
        p_post = mean_answer_prob(post.model, inputs)
    # The source reuses one bridge: loading pre overwrites post's weights, so post is done first.
    pre = source.load(pre_step, device=device)
    with torch.inference_mode():
        pre_patterns = cache_patterns(pre.model, inputs.tokens)
        p_pre = mean_answer_prob(pre.model, inputs)
    # The attribution estimate costs one forward and one backward pass: always computed, so that
    # every report shows how well the cheap pre-screen ranks heads (issue 6, item 2).
    attribution = attribution_delta_p(pre.model, inputs, post_patterns)
    heads_subset = None
    if method == "attribution" or prescreen_top_n is not None:
        top_n = prescreen_top_n if prescreen_top_n is not None else max(1, attribution.numel() // 4)
        order = torch.argsort(attribution.flatten(), descending=True)[:top_n]
        n_heads = attribution.shape[1]
        heads_subset = [(int(i) // n_heads, int(i) % n_heads) for i in order]
    exact_method = "reference" if method == "reference" else "fast"
    with torch.inference_mode():
        delta_p = delta_p_all_heads(pre.model, inputs, post_patterns, method=exact_method, heads=heads_subset)
    finite = torch.isfinite(delta_p)
    correlation = (prescreen_rank_correlation(delta_p[finite], attribution[finite])
                   if int(finite.sum()) >= 3 else None)
    heads = rank_heads(delta_p)
    heads["delta_p_attribution"] = [float(attribution[l, h]) for l, h in zip(heads["layer"], heads["head"])]
    with torch.inference_mode():
        topk = topk_recovery(pre.model, inputs, post_patterns, heads.dropna(subset=["delta_p"]), p_pre, p_post, ks=ks)
    top = heads.dropna(subset=["delta_p"]).head(n_example_heads)
    patterns, names = [], []
    for layer, head in zip(top["layer"], top["head"]):
        patterns += [pre_patterns[layer, 0, head], post_patterns[layer, 0, head]]
        names += [f"L{layer}H{head} pre (step {pre_step})", f"L{layer}H{head} post (step {post_step})"]
    tokenizer = source.tokenizer()
    return {
        "p_pre": p_pre, "p_post": p_post, "delta_p": delta_p.detach().cpu(), "heads": heads, "topk": topk,
        "example_tokens": [tokenizer.decode([int(t)]) for t in batch.tokens[0]],
        "example_patterns": torch.stack(patterns).cpu() if patterns else None, "example_names": names,
        "rank_correlation_prescreen": correlation,
    }


def analyse_run(
    source, task: CapabilityTask | None = None, threshold: float = 0.5, scan: bool = False,
    method: str = "fast", prescreen_top_n: int | None = None, device: str | None = None,
) -> RunAnalysis:
    """The main job on one run: capability curve, point of emergence and, if it emerged between
    two checkpoints, the head ranking and joint top-K recovery.

    Args:
        source: checkpoint source of the run.
        task: capability task (default :class:`interp.tasks.RepetitionTask`).
        threshold: greedy-accuracy threshold for the point of emergence (fraction).
        scan: also evaluate every searchable step (for the full curve); bisection still counts
            only its own evaluations, and shares the memoised scores (no checkpoint loads twice).
        method, prescreen_top_n, device: see :func:`rank_heads_between`.
    """
    task = task or RepetitionTask()
    batch = task.build(source.tokenizer())
    model, seed = model_and_seed(source.model_id)
    evaluator = StepEvaluator(source, batch, device=device)
    curve = full_scan(source, batch, evaluator=evaluator) if scan else None
    point = find_emergence(source, batch, threshold=threshold, evaluator=evaluator)
    if not scan:
        curve = evaluator.table()
    analysis = RunAnalysis(model=model, seed=seed, model_id=source.model_id, point=point,
                           curve=curve[["step", "accuracy", "p_answer"]])
    if point.emerged and point.pre_step is not None:
        ranked = rank_heads_between(source, point.pre_step, point.post_step, batch, method=method,
                                    prescreen_top_n=prescreen_top_n, device=device)
        for key, value in ranked.items():
            setattr(analysis, key, value)
    return analysis


@dataclass
class MainJobReport:
    """Tables (``emergence``, ``points``, ``heads``, ``topk``) and figures of a main-job run."""

    runs: list[RunAnalysis]
    threshold: float = 0.5
    title: str = "emergence-lens report"
    provenance: dict | None = None
    summary_legend: str = SUMMARY_LEGEND

    @property
    def emergence(self) -> pd.DataFrame:
        """Capability per evaluated checkpoint: model, seed, step, accuracy, p_answer."""
        frames = [_labelled(r.curve, r.model, r.seed, EMERGENCE_COLUMNS) for r in self.runs]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=EMERGENCE_COLUMNS)

    @property
    def points(self) -> pd.DataFrame:
        """Point of emergence per run: model, seed, pre_step, post_step, emerged, n_evaluations."""
        rows = [{"model": r.model, "seed": r.seed, **r.point.as_row()} for r in self.runs]
        return pd.DataFrame(rows, columns=POINTS_COLUMNS).astype({"pre_step": "Int64", "post_step": "Int64"})

    @property
    def heads(self) -> pd.DataFrame:
        """Head ranking per emerged run: model, seed, layer, head, delta_p, rank."""
        frames = [_labelled(r.heads, r.model, r.seed, HEADS_COLUMNS) for r in self.runs if r.heads is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=HEADS_COLUMNS)

    @property
    def topk(self) -> pd.DataFrame:
        """Joint top-K patching per emerged run: model, seed, k, p_patched, recovered."""
        frames = [_labelled(r.topk, r.model, r.seed, TOPK_COLUMNS) for r in self.runs if r.topk is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=TOPK_COLUMNS)

    def summary(self) -> pd.DataFrame:
        """One row per run: point of emergence, p before/after, top head, share recovered by top 2."""
        rows = []
        for r in self.runs:
            top = r.heads.iloc[0] if r.heads is not None and len(r.heads) else None
            rec2 = None
            if r.topk is not None and len(r.topk):
                at2 = r.topk[r.topk["k"] == min(2, int(r.topk["k"].max()))]
                rec2 = float(at2["recovered"].iloc[0]) if len(at2) else None
            rows.append({
                "model": r.model, "seed": r.seed, "emerged": r.point.emerged, "pre_step": r.point.pre_step,
                "post_step": r.point.post_step, "n_evaluations": r.point.n_evaluations, "p_pre": r.p_pre,
                "p_post": r.p_post,
                # recovered divides by this jump: below ~0.05 it is ill-conditioned (read it with care)
                "jump": None if r.p_pre is None else r.p_post - r.p_pre, "top_head": None if top is None else f"L{int(top['layer'])}H{int(top['head'])}",
                "top_delta_p": None if top is None else float(top["delta_p"]), "recovered_top2": rec2,
                "prescreen_spearman": r.rank_correlation_prescreen,
            })
        return pd.DataFrame(rows)

    def capability_figure(self, metric: str = "accuracy"):
        """Plotly figure: capability vs step per seed, point of emergence marked."""
        return vis.capability_figure(self.emergence, self.points, metric=metric, threshold=self.threshold)

    def recovery_figure(self):
        """Plotly figure: recovered vs K for every emerged run."""
        return vis.recovery_figure(self.topk)

    def heatmaps(self) -> list:
        """Plotly Δp heatmaps (layer × head), one per emerged run, on one shared colour scale."""
        tensors = [r.delta_p for r in self.runs if r.delta_p is not None]
        finite = [t[torch.isfinite(t)].abs() for t in tensors]
        bound = max((float(f.max()) for f in finite if f.numel()), default=1.0)
        return [vis.delta_p_heatmap(r.delta_p, title=f"{r.model} seed {r.seed}: Δp when each head's pattern at "
                                    f"step {r.point.post_step} is patched into step {r.point.pre_step}", bound=bound)
                for r in self.runs if r.delta_p is not None]

    def html(self) -> str:
        """The self-contained report page (plotly.js and the circuitsvis bundle inlined once each;
        opens offline). Layout and sections: :mod:`interp.visualisation` (``RUN_SECTIONS``)."""
        return vis.report_page(self)

    def _repr_html_(self) -> str:
        """Jupyter display: the report's sections (libraries inlined once per notebook page)."""
        from interp.display import NOTEBOOK_ASSETS

        return vis.report_fragment(self, NOTEBOOK_ASSETS)

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``emergence``, ``points``, ``heads``, ``topk`` as CSV and parquet, ``report.html``,
        ``provenance.json`` and ``state/`` (what :meth:`load` reads back).

        Every file is written atomically (temporary file, then rename); the HTML is rendered in
        memory before anything is written, so a rendering error leaves the folder untouched.
        Without a provenance record (a report built by hand) one naming this call is written.
        """
        from interp import report_state
        from interp.provenance import make_provenance, write_provenance

        out = Path(out_dir)
        page = self.html()
        written = {}
        for name in ("emergence", "points", "heads", "topk"):
            table = getattr(self, name)
            written[f"{name}.csv"] = atomic_to_csv(table, out / f"{name}.csv")
            written[f"{name}.parquet"] = atomic_to_parquet(table, out / f"{name}.parquet")
        written["report.html"] = atomic_write_text(out / "report.html", page)
        written.update(report_state.save_report_state(self, out / "state"))
        record = self.provenance or make_provenance("interp.pipeline.MainJobReport.save",
                                                    {"threshold": self.threshold, "title": self.title})
        written["provenance.json"] = write_provenance(out, record)
        return written

    @classmethod
    def load(cls, folder: str | Path) -> "MainJobReport":
        """Bring back a report saved by :meth:`save`: every run's tables, tensors, point of
        emergence and example patterns, and the provenance record; its figures and ``html()``
        are then the saved report's.

        Raises:
            ValueError: ``folder`` holds no saved report state (``state/report.json``).
        """
        from interp import report_state
        from interp.provenance import read_provenance

        runs, meta = report_state.load_report_state(Path(folder) / "state", RunAnalysis)
        return cls(runs=runs, threshold=meta["threshold"], title=meta["title"], provenance=read_provenance(folder))


def _step_digests(source, run: RunAnalysis) -> dict[str, str]:
    """Weight digest of every step the run evaluated or patched (``"step{N}"`` -> sha256 hex)."""
    steps = set(int(s) for s in run.curve["step"]) | {s for s in (run.point.pre_step, run.point.post_step) if s is not None}
    return {f"step{step}": source.digest(step) for step in sorted(steps)}


def run_main_job(
    sources: Iterable, task: CapabilityTask | None = None, threshold: float = 0.5, scan: bool = False,
    method: str = "fast", prescreen_top_n: int | None = None, device: str | None = None,
    out_dir: str | Path | None = None, title: str = "emergence-lens report", progress: bool = True,
) -> MainJobReport:
    """Run :func:`analyse_run` on every source and collect a :class:`MainJobReport`.

    Sources are processed one at a time and closed afterwards (each source reuses one bridge, so
    resident memory stays flat over long checkpoint sweeps). If ``out_dir`` is given the report
    is saved there.
    """
    from tqdm.auto import tqdm

    from interp.provenance import make_provenance

    sources = list(sources)
    runs, digests = [], {}
    for source in tqdm(sources, desc="runs", disable=not progress):
        try:
            run = analyse_run(source, task=task, threshold=threshold, scan=scan, method=method,
                              prescreen_top_n=prescreen_top_n, device=device)
            runs.append(run)
            digests[source.model_id] = _step_digests(source, run)
        finally:
            source.close()
    settings = {"sources": [s.model_id for s in sources], "task": task or RepetitionTask(), "threshold": threshold,
                "scan": scan, "method": method, "prescreen_top_n": prescreen_top_n, "device": device}
    report = MainJobReport(runs=runs, threshold=threshold, title=title,
                           provenance=make_provenance("interp.pipeline.run_main_job", settings, digests))
    if out_dir is not None:
        report.save(out_dir)
    return report
