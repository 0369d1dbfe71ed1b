"""Claim 2 at the paper's kind of checkpoint pair: the consecutive checkpoints with the largest jump.

Baherwani et al. 2026 patch a few heads' attention patterns from the checkpoint just after the
capability's jump into the one just before it, at the suite's own checkpoint spacing. Here that
pair is chosen for each seed from its kept capability curve (p(answer) on the population's kept
prompts, checkpoints at the suite's native spacing ``checkpoint_every`` only, so every pair is one
spacing apart): the consecutive pair with the largest increase in mean p(answer)
(:func:`largest_jump_pairs`). The jump is then measured again on independent prompts (the
patching prompts, task seed 1; the pair was picked on seed 0), so the selection does not inflate
the share recovered (:func:`measure_pair`):

- the share of the **p(answer) jump** recovered by the top-2 heads' patterns (the two heads with
  the largest single-head effect on p), by all heads' patterns and by all head outputs
  (``hook_z``), with 95 % percentile bootstrap intervals over prompts
  (:func:`interp.decomposition.decompose_jump`);
- the share of the **greedy-accuracy jump** recovered by the same three components (the top-2
  heads being the p-ranked ones), from the reference engine's per-prompt values
  (:func:`interp.patching.patch_values`) and the same bootstrap
  (:func:`interp.ranking_stats.bootstrap_interval`).

A seed whose p jump on the patching prompts is below 3 standard errors (``jump_too_small``) is
named and counted as neither side. The table per arm, metric and component and the judge's verdict are
one statistic, :func:`interp.population.statistics.claim2_pair_result`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PAIR_COLUMNS", "PAIR_COMPONENTS", "largest_jump_pairs", "measure_pair"]

#: (label, decompose_jump target, scope) of the components measured at the pair.
PAIR_COMPONENTS = (
    ("top-2 patterns", "pattern", "top-2"),
    ("all patterns", "pattern", "all"),
    ("all head outputs", "z", "all"),
)
#: One row per (run, metric, component).
PAIR_COLUMNS = [
    "arm", "run", "seed", "pre_step", "post_step", "kept_jump", "metric", "component", "heads", "recovered",
    "recovered_lo", "recovered_hi", "value_pre", "value_post", "jump", "jump_se", "jump_too_small",
]  # fmt: skip


def largest_jump_pairs(curves: pd.DataFrame, every: int) -> pd.DataFrame:
    """For each run of ``curves``, the consecutive checkpoints (``every`` steps apart) with the
    largest increase in mean p(answer).

    Args:
        curves: kept curves (``arm``, ``run``, ``seed``, ``step``, ``p_answer`` in probability).
        every: the suite's checkpoint spacing (steps); only steps that are multiples of it are
            used, so that every pair spans the same number of steps.

    Returns:
        One row per run: ``arm``, ``run``, ``seed``, ``pre_step``, ``post_step`` (steps) and
        ``kept_jump`` (the increase in p(answer) on the kept prompts, probability).

    Raises:
        ValueError: ``every`` < 1, or a run with fewer than two checkpoints at that spacing.
    """
    if every < 1:
        raise ValueError(f"every={every!r} must be a checkpoint spacing >= 1 step")
    rows = []
    for run, curve in curves.groupby("run", sort=False):
        native = curve[curve["step"] % every == 0].sort_values("step")
        if len(native) < 2:
            raise ValueError(f"run {run!r} has {len(native)} checkpoints at a spacing of {every} steps; need 2")
        jumps = native["p_answer"].diff().to_numpy()[1:]
        i = int(np.argmax(jumps))
        rows.append(
            {
                "arm": curve["arm"].iloc[0],
                "run": run,
                "seed": int(curve["seed"].iloc[0]),
                "pre_step": int(native["step"].iloc[i]),
                "post_step": int(native["step"].iloc[i + 1]),
                "kept_jump": float(jumps[i]),
            }
        )
    return pd.DataFrame(rows, columns=["arm", "run", "seed", "pre_step", "post_step", "kept_jump"])


def _accuracy_rows(pre_model, captured, batch, top2, p_acc_pre, p_acc_post, n_boot: int) -> list[dict]:
    """The accuracy jump's share recovered by each component (reference engine, per prompt)."""
    from interp.core.metrics import greedy_correct
    from interp.patching import Target, patch_values
    from interp.ranking_stats import bootstrap_interval

    targets = [Target("pattern", top2), Target("pattern"), Target("z")]
    patched = patch_values(pre_model, captured, batch, targets, metric=greedy_correct, method="reference")
    pre, post = p_acc_pre.double(), p_acc_post.double()
    jump = float((post - pre).mean())
    diff = (post - pre).numpy()
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
    bounds = bootstrap_interval(patched, pre, post, n_boot=n_boot, seed=0)
    out = []
    for i, (label, _, _) in enumerate(PAIR_COMPONENTS):
        value = float(patched[i].double().mean())
        out.append(
            {
                "metric": "accuracy",
                "component": label,
                "recovered": (value - float(pre.mean())) / jump if jump else float("nan"),
                "recovered_lo": float(bounds["recovered_lo"][i]),
                "recovered_hi": float(bounds["recovered_hi"][i]),
                "value_pre": float(pre.mean()),
                "value_post": float(post.mean()),
                "jump": jump,
                "jump_se": se,
                "jump_too_small": bool(not np.isfinite(se) or abs(jump) < 3 * se),
            }
        )
    return out


def measure_pair(source, pre_step: int, post_step: int, n_prompts: int = 256, n_boot: int = 1000) -> pd.DataFrame:
    """Claim 2 at one checkpoint pair of one run: the share of the p(answer) jump and of the
    greedy-accuracy jump recovered by the top-2 heads' patterns, all heads' patterns and all
    head outputs, patched from ``post_step`` into ``pre_step``.

    Args:
        source: an open checkpoint source holding both steps (``interp.sources``).
        pre_step, post_step: the pair (steps).
        n_prompts: repetition prompts (task seed 1).
        n_boot: bootstrap resamples over prompts for the 95 % intervals.

    Returns:
        Rows with :data:`PAIR_COLUMNS` less the run's labels and ``kept_jump`` (``metric`` is
        ``p`` or ``accuracy``; ``heads`` names the top-2 heads, e.g. ``L1H2 L0H3``).

    Source: Baherwani et al. 2026 (claim 2: patching a few heads' patterns from the checkpoint
    after the jump recovers most of it); percentile bootstrap (Efron & Tibshirani 1993).
    """
    import torch

    from interp.core.metrics import greedy_correct
    from interp.core.settings import StudyConfig
    from interp.decomposition import COMPONENTS as TARGETS
    from interp.decomposition import DecomposeOptions, decompose_jump
    from interp.patching import capture_post
    from interp.patching._forward import answer_logits_forward
    from interp.tasks import RepetitionTask

    batch = RepetitionTask(n_prompts=n_prompts, seed=1).build(source.tokenizer()).to("cpu")
    with torch.inference_mode():
        post_model = source.load(post_step).model
        acc_post = greedy_correct(answer_logits_forward(post_model, batch)[0], batch).cpu()
        captured = capture_post(post_model, batch, weights=True)
        pre_model = source.load(pre_step).model
        acc_pre = greedy_correct(answer_logits_forward(pre_model, batch)[0], batch).cpu()
        table = decompose_jump(
            pre_model, captured, batch, StudyConfig(metric="p", ks=[2], n_boot=n_boot),
            DecomposeOptions(targets={name: TARGETS[name] for name in ("pattern", "z")}, topk_kinds=("pattern",)),
        )  # fmt: skip
        rows = []
        top2 = None
        for label, target, scope in PAIR_COMPONENTS:
            row = table[(table["target"] == target) & (table["scope"].astype(str) == scope)].iloc[0]
            if scope == "top-2":
                top2 = row["heads"]
            rows.append(
                {
                    "metric": "p",
                    "component": label,
                    "heads": row["heads"] if scope == "top-2" else "",
                    "recovered": row["recovered"],
                    "recovered_lo": row["recovered_lo"],
                    "recovered_hi": row["recovered_hi"],
                    "value_pre": row["value_pre"],
                    "value_post": row["value_post"],
                    "jump": row["value_post"] - row["value_pre"],
                    "jump_se": row["jump_se"],
                    "jump_too_small": bool(row["jump_too_small"]),
                }
            )
        heads = tuple((int(h[1 : h.index("H")]), int(h[h.index("H") + 1 :])) for h in str(top2).split())
        acc = _accuracy_rows(pre_model, captured, batch, heads, acc_pre, acc_post, n_boot)
    for row in acc:
        row["heads"] = top2 if row["component"] == "top-2 patterns" else ""
    out = pd.DataFrame(rows + acc)
    out.insert(0, "post_step", int(post_step))
    out.insert(0, "pre_step", int(pre_step))
    return out


def _pair_table(rows: pd.DataFrame, half: float = 0.5) -> pd.DataFrame:
    """Per arm, metric and component: the seeds measured, those whose p jump is within noise
    (named, counted as neither side), and among the rest the seeds whose share recovered has its
    95 % interval above ``half`` (firm), below it, or straddling it; the firm share with its
    Wilson 95 % interval; the median share with its quartiles.

    Args:
        rows: :data:`PAIR_COLUMNS` rows of one or more runs.
        half: the share that counts as "most of the jump" (the paper's reading: half).

    Returns:
        One row per (arm, metric, component): ``seeds``, ``noise_seeds`` (text), ``measurable``,
        ``above``, ``below``, ``straddle``, ``share_above``, ``share_lo``, ``share_hi``,
        ``median``, ``q1``, ``q3``.

    Source: Wilson 1927 score interval (``statsmodels.stats.proportion.proportion_confint``).
    """
    from statsmodels.stats.proportion import proportion_confint

    noise_runs = set(rows[(rows["metric"] == "p") & rows["jump_too_small"]]["run"])
    out = []
    for (arm, metric, component), part in rows.groupby(["arm", "metric", "component"], sort=False):
        ok = part[~part["run"].isin(noise_runs)]
        n = len(ok)
        above = int((ok["recovered_lo"] > half).sum())
        below = int((ok["recovered_hi"] < half).sum())
        lo, hi = proportion_confint(above, n, method="wilson") if n else (np.nan, np.nan)
        noise = part[part["run"].isin(noise_runs)]["seed"].astype(int).tolist()
        out.append(
            {
                "arm": arm,
                "metric": metric,
                "component": component,
                "seeds": len(part),
                "noise_seeds": " ".join(map(str, sorted(noise))),
                "measurable": n,
                "above": above,
                "below": below,
                "straddle": n - above - below,
                "share_above": above / n if n else np.nan,
                "share_lo": float(lo),
                "share_hi": float(hi),
                "median": float(ok["recovered"].median()) if n else np.nan,
                "q1": float(ok["recovered"].quantile(0.25)) if n else np.nan,
                "q3": float(ok["recovered"].quantile(0.75)) if n else np.nan,
            }
        )
    return pd.DataFrame(out)


def _pair_verdicts(rows: pd.DataFrame, half: float = 0.5) -> list:
    """Claim 2 per arm at the largest-jump pair, judged (:func:`interp.population.judge.judge_share`):
    most seeds' top-2 heads' patterns firmly recover at least ``half`` of the p(answer) jump
    (reproduced), most firmly recover less (contradicted), or neither (not decidable); robust where
    the point estimate alone gives the same word. The reason adds the median shares of the p jump
    and of the accuracy jump by the top-2 patterns, all patterns and all head outputs, with their
    quartiles.

    Args:
        rows: :data:`PAIR_COLUMNS` rows.
        half: the share that counts as "most of the jump" (the paper's reading: half).

    Returns:
        One :class:`interp.population.judge.Verdict` per arm, labelled ``"Claim 2 (<arm>, largest-jump pair)"``.
    """
    from interp.population.judge import ShareEvidence, Verdict, judge_share

    table = _pair_table(rows, half)
    out = []
    for arm, sub in table.groupby("arm", sort=False):
        top = sub[(sub["metric"] == "p") & (sub["component"] == "top-2 patterns")].iloc[0]
        ok = rows[(rows["arm"] == arm) & (rows["metric"] == "p") & (rows["component"] == "top-2 patterns")]
        ok = ok[~ok["jump_too_small"]]
        v = judge_share(
            ShareEvidence(
                f"Claim 2 ({arm}, largest-jump pair)",
                above=int(top["above"]),
                below=int(top["below"]),
                n=int(top["measurable"]),
                above_point=int((ok["recovered"] >= half).sum()),
                below_point=int((ok["recovered"] < half).sum()),
                noise=str(top["noise_seeds"]),
            ),
            half,
        )
        medians = "; ".join(
            f"{r.component} {r.median:.2f} [{r.q1:.2f}, {r.q3:.2f}] of the {'p' if r.metric == 'p' else 'accuracy'} jump"
            for r in sub.itertuples()
            if r.measurable
        )
        out.append(Verdict(v.word, v.robust, v.label, f"{v.reason}; median shares: {medians}", v.decide))
    return out
