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
from interp.tasks import CapabilityTask, RepetitionTask
from interp import visualisation as vis
from interp.catalogue import run_label

EMERGENCE_COLUMNS = ["model", "seed", "step", "accuracy", "p_answer"]
POINTS_COLUMNS = ["model", "seed", "pre_step", "post_step", "emerged", "n_evaluations", "monotone", "threshold"]
CHECKPOINTS_COLUMNS = ["model", "seed", "step", "revision", "tokens", "digest", "status", "same_weights_as", "listing"]
HEADS_COLUMNS = ["model", "seed", "layer", "head", "delta_p", "rank", "delta_p_attribution", "delta_p_lo", "delta_p_hi",
                 "metric"]
TOPK_COLUMNS = ["model", "seed", "k", "p_patched", "recovered", "metric"]

SUMMARY_LEGEND = (
    "<b>pre_step → post_step</b>: consecutive checkpoints where greedy accuracy crosses the threshold and "
    "stays above it (training steps). <b>n_evaluations</b>: checkpoints the bisection evaluated. "
    "<b>metric</b>: what p_pre, p_post, Δp and recovered measure (p = probability of the answer token, "
    "logprob = its log probability in nats, logit-diff = its logit minus the largest distractor logit). "
    "<b>p_pre, p_post</b>: mean metric of the pre / post checkpoint. <b>jump</b> = p_post − p_pre (recovered "
    "divides by it: below ~0.05 it is ill-conditioned). <b>top_head</b>, <b>top_delta_p</b>: the head whose "
    "post-step attention pattern, patched alone into the pre step, raises p(answer) most, and by how much. "
    "<b>recovered_top2</b>: (p with the top 2 heads patched − p_pre) / jump. <b>prescreen_spearman</b>: rank "
    "correlation of the pre-screen's estimate (integrated gradients on the patterns) with exact Δp over heads; "
    "<b>prescreen_top2_found</b>: whether the exact top 2 heads are the estimate's top 2."
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
    checkpoints: pd.DataFrame | None = None  # interp.checkpoints.checkpoint_table: one row per step
    training_loss: pd.DataFrame | None = None  # step, loss (nats): runs our trainer wrote (loss.csv)
    prescreen_top2_found: bool | None = None
    metric: str = "p"
    components: pd.DataFrame | None = None
    head_scores: pd.DataFrame | None = None


def _labelled(df: pd.DataFrame, model: str, seed: int, columns: Sequence[str]) -> pd.DataFrame:
    df = df.copy()
    df.insert(0, "seed", seed)
    df.insert(0, "model", model)
    return df[list(columns)]


def _training_loss(source) -> pd.DataFrame | None:
    """The per-step training loss of a run that our trainer wrote (``loss.csv`` beside its
    checkpoints, :func:`interp.embedded.loss_curve`); None for hub and foreign suites."""
    root = getattr(source, "root", None)
    if root is None or not (Path(root) / "loss.csv").is_file():
        return None
    from interp.embedded import loss_curve

    return loss_curve(root)


def analyse_run(
    source, task: CapabilityTask | None = None, threshold: float = 0.5, scan: bool = False,
    method: str = "fast", prescreen_top_n: int | None = None, device: str | None = None,
    metric: str = "p", decompose: bool = True, scores: bool = True, prescreen_steps: int = 2,
    dtype: str = "float32", swap_weights: bool = True,
) -> RunAnalysis:
    """The main job on one run: capability curve, point of emergence and, if it emerged between
    two checkpoints, the head ranking and joint top-K recovery.

    Args:
        source: checkpoint source of the run.
        task: capability task (default :class:`interp.tasks.RepetitionTask`).
        threshold: greedy-accuracy threshold for the point of emergence (fraction).
        scan: also evaluate every searchable step (for the full curve); bisection still counts
            only its own evaluations, and shares the memoised scores (no checkpoint loads twice).
        method, prescreen_top_n, device, metric, prescreen_steps: see
            :func:`interp.ranking.rank_heads_between`.
        decompose: also decompose the jump by component (``components.csv``).
        scores: also score every head at the checkpoints around the point (``head_scores.csv``,
            :mod:`interp.scores`).
        dtype: ``float32`` (default), ``bfloat16`` or ``float16`` for the models; with the low
            precisions the attention softmax and the metric are computed in float32
            (:func:`interp.checkpoints.upcast_softmax`).
        swap_weights: switch checkpoints inside one resident bridge (:mod:`interp.weight_swap`)
            and read the next checkpoint ahead on a background thread; every value equals a
            fresh boot's (tests/test_weight_swap.py).

    Raises:
        ValueError: an unknown ``dtype`` (the valid ones named).
    """
    from interp.ranking import rank_heads_between

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype not in dtypes:
        raise ValueError(f"dtype={dtype!r}; valid dtypes: {', '.join(dtypes)}")
    if hasattr(source, "swap_weights"):
        source.swap_weights = swap_weights
        source.dtype = dtypes[dtype]
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
    from interp.checkpoints import checkpoint_table

    analysis.checkpoints = checkpoint_table(source)  # digests are known from the search already
    analysis.training_loss = _training_loss(source)
    if point.emerged and point.pre_step is not None:
        ranked = rank_heads_between(source, point.pre_step, point.post_step, batch, method=method,
                                    prescreen_top_n=prescreen_top_n, device=device, metric=metric,
                                    decompose=decompose, prescreen_steps=prescreen_steps)
        for key in ("p_pre", "p_post", "delta_p", "heads", "topk", "example_tokens", "example_patterns",
                    "example_names", "rank_correlation_prescreen", "prescreen_top2_found", "metric"):
            setattr(analysis, key, getattr(ranked, key))
        if ranked.components is not None:
            analysis.components = ranked.components.assign(model=model, seed=seed)
        if scores:
            from interp.scores import head_scores_over_checkpoints, steps_around

            steps = steps_around(source.searchable_steps(), point.pre_step, point.post_step)
            analysis.head_scores = head_scores_over_checkpoints(source, steps, device=device, model=model, seed=seed)
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
        """Joint top-K patching per emerged run: model, seed, k, p_patched, recovered, metric."""
        frames = [_labelled(r.topk, r.model, r.seed, TOPK_COLUMNS) for r in self.runs if r.topk is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=TOPK_COLUMNS)

    @property
    def checkpoints(self) -> pd.DataFrame:
        """One row per step of each run: step, revision, tokens, digest, status (searchable,
        duplicate-excluded, duplicate-kept-final, missing), same_weights_as, listing."""
        frames = [_labelled(r.checkpoints, r.model, r.seed, CHECKPOINTS_COLUMNS) for r in self.runs if r.checkpoints is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CHECKPOINTS_COLUMNS)

    def hazards(self) -> list[str]:
        """One line per checkpoint hazard of each run (duplicates excluded, missing steps, a
        listing from the cache); empty when every run is clean."""
        from interp.checkpoints import hazard_lines

        return [line for r in self.runs if r.checkpoints is not None
                for line in hazard_lines(r.checkpoints, run_label(r.model, r.seed))]

    @property
    def components(self) -> pd.DataFrame:
        """The jump decomposed by component per emerged run (``interp.ranking.COMPONENT_COLUMNS``)."""
        from interp.ranking import COMPONENT_COLUMNS

        frames = [r.components for r in self.runs if r.components is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COMPONENT_COLUMNS)

    @property
    def head_scores(self) -> pd.DataFrame:
        """Head scores at the checkpoints around each point (``interp.scores.HEAD_SCORE_COLUMNS``)."""
        from interp.scores import HEAD_SCORE_COLUMNS

        frames = [r.head_scores for r in self.runs if r.head_scores is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=HEAD_SCORE_COLUMNS)

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
                "prescreen_spearman": r.rank_correlation_prescreen, "prescreen_top2_found": r.prescreen_top2_found,
                "metric": r.metric if r.heads is not None else None,
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
        """Write ``emergence``, ``points``, ``heads``, ``topk``, ``components``, ``head_scores`` and
        ``checkpoints`` as CSV and parquet, ``report.html``, ``provenance.json`` and ``state/``
        (what :meth:`load` reads back).

        Every file is written atomically (temporary file, then rename); the HTML is rendered in
        memory before anything is written, so a rendering error leaves the folder untouched.
        Without a provenance record (a report built by hand) one naming this call is written.
        """
        from interp import report_state
        from interp.provenance import make_provenance, write_provenance

        out = Path(out_dir)
        page = self.html()
        written = {}
        for name in ("emergence", "points", "heads", "topk", "components", "head_scores", "checkpoints"):
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
    metric: str = "p", decompose: bool = True, scores: bool = True, prescreen_steps: int = 2,
) -> MainJobReport:
    """Run :func:`analyse_run` on every source and collect a :class:`MainJobReport`.

    Sources are processed one at a time, as the iterable hands them out, and closed afterwards
    (each source reuses one bridge, so resident memory stays flat over long checkpoint sweeps).
    With :class:`interp.sources.ReadySources` (what the CLI passes), embedded runs are analysed as
    soon as each is trained and a core is free, and the report keeps the order of the names. If
    ``out_dir`` is given the report is saved there.
    """
    from tqdm.auto import tqdm

    from interp.provenance import make_provenance

    positioned = sources.with_positions() if hasattr(sources, "with_positions") else enumerate(sources)
    total = len(sources) if hasattr(sources, "__len__") else None
    done: list[tuple[int, RunAnalysis, dict]] = []
    for position, source in tqdm(positioned, total=total, desc="runs", disable=not progress):
        try:
            run = analyse_run(source, task=task, threshold=threshold, scan=scan, method=method,
                              prescreen_top_n=prescreen_top_n, device=device, metric=metric,
                              decompose=decompose, scores=scores, prescreen_steps=prescreen_steps)
            done.append((position, run, _step_digests(source, run)))
        finally:
            source.close()
    done.sort(key=lambda item: item[0])
    runs = [run for _, run, _ in done]
    digests = {run.model_id: steps for _, run, steps in done}
    settings = {"sources": [run.model_id for run in runs], "task": task or RepetitionTask(), "threshold": threshold,
                "scan": scan, "method": method, "prescreen_top_n": prescreen_top_n, "device": device,
                "metric": metric if isinstance(metric, str) else getattr(metric, "__name__", repr(metric)),
                "decompose": decompose, "scores": scores, "prescreen_steps": prescreen_steps}
    report = MainJobReport(runs=runs, threshold=threshold, title=title,
                           provenance=make_provenance("interp.pipeline.run_main_job", settings, digests))
    if out_dir is not None:
        report.save(out_dir)
    return report
