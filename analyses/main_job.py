"""The main job on the embedded suite, plus the checks docs/results.md quotes beside it.

1. ``emergence demo``'s job (:func:`interp.main_job.runner.run_study`): points of emergence, head
   ranking by delta_p, joint top-K, report.html, into ``OUT/``.
2. ``attention.csv``: on one run (``--check-run``), at its pre and post steps, each head's mean
   attention from the answer query to the induction key (the position after the previous
   occurrence of the current token, Olsson et al. 2022, "In-context learning and induction
   heads") and to the previous token; from ``hook_pattern``, over the task's prompts.
3. ``patch_check.csv``: every head's pattern patched from post into pre with a plain
   ``run_with_hooks`` (TransformerLens hooks, no engine code) against the engine's joint patch of
   all heads (``topk.csv`` at K = every head): the two p(answer) must agree.
4. ``accuracy.csv``: greedy accuracy and p(answer) on ``--accuracy-prompts`` prompts (512) of
   ``--accuracy-run`` at ``--accuracy-steps`` (the late dip of a non-monotone run).

Usage: ``python -m analyses.main_job [--suite embedded] [--out DIR]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from interp.cli.options import description

NAME = "main_job"
OUT = Path("results/analyses") / NAME


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m analyses.{NAME}", description=description(__doc__))
    parser.add_argument("--suite", default="embedded", help="embedded | embedded-quick")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check-run", default="neox-2l-128d-seed0", help="run of the attention and patch checks")
    parser.add_argument("--accuracy-run", default="neox-2l-64d-seed2")
    parser.add_argument("--accuracy-steps", default="2600,2800,2900")
    parser.add_argument("--accuracy-prompts", type=int, default=512)
    parser.add_argument("--jobs", type=int, default=2, help="(accepted for the results registry; the job runs here)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(accepted for the results registry; unused)")
    args = parser.parse_args(argv)
    from interp.sources.catalogue import SUITES

    if args.suite not in SUITES:
        parser.error(f"--suite {args.suite!r}: choose one of {', '.join(SUITES)}")
    runs = SUITES[args.suite].run_names()
    for option in ("check_run", "accuracy_run"):
        if getattr(args, option) not in runs:
            parser.error(
                f"--{option.replace('_', '-')} {getattr(args, option)!r} is not a run of {args.suite}: {', '.join(runs)}"
            )
    return args


def attention_on_keys(model, batch, length: int) -> pd.DataFrame:
    """Per (layer, head): mean attention (probability) from each prompt's answer query to its
    induction key (``answer_pos − length + 1``: the token after the previous occurrence of the
    query's token, since the prompt repeats its first ``length − 1`` items) and to the previous
    token (``answer_pos − 1``)."""
    import torch

    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(model.cfg.n_layers)]
    with torch.inference_mode():
        _, cache = model.run_with_cache(batch.tokens, names_filter=lambda n: n in names)
    rows = torch.arange(batch.tokens.shape[0])
    q = batch.answer_pos
    out = []
    for layer, name in enumerate(names):
        pattern = cache[name]  # [batch, head, query_pos, key_pos]
        for head in range(pattern.shape[1]):
            out.append(
                {
                    "layer": layer,
                    "head": head,
                    "induction_key": float(pattern[rows, head, q, q - length + 1].mean()),
                    "previous_token": float(pattern[rows, head, q, q - 1].mean()),
                }
            )
    return pd.DataFrame(out)


def patch_all_heads_by_hand(pre_model, post_model, batch) -> float:
    """Mean p(answer) of ``pre_model`` with every head's ``hook_pattern`` replaced by
    ``post_model``'s on the same prompts (plain TransformerLens hooks)."""
    import torch

    names = [f"blocks.{layer}.attn.hook_pattern" for layer in range(pre_model.cfg.n_layers)]
    with torch.inference_mode():
        _, post_cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n in names)
        hooks = [(name, lambda pattern, hook, name=name: post_cache[name]) for name in names]
        logits = pre_model.run_with_hooks(batch.tokens, fwd_hooks=hooks)
    rows = torch.arange(batch.tokens.shape[0])
    probs = logits[rows, batch.answer_pos].float().softmax(-1)[rows, batch.answers]
    return float(probs.mean())


def main(argv: Sequence[str] | None = None) -> pd.DataFrame:
    args = parse_args(argv)
    import time

    from interp.core.io import atomic_to_csv
    from interp.core.settings import StudyConfig
    from interp.emergence import StepEvaluator
    from interp.main_job.runner import run_study
    from interp.sources import open_sources
    from interp.sources.catalogue import SUITES
    from interp.tasks import RepetitionTask

    started = time.perf_counter()
    task = RepetitionTask()
    report = run_study(
        [args.suite], task, StudyConfig(scan=True), out_dir=args.out, title=f"emergence-lens: {args.suite}"
    )
    points = report.points.assign(run=lambda d: d.model + "-seed" + d.seed.astype(str)).set_index("run")

    (src,) = open_sources([f"{args.suite}/{args.check_run}"])
    batch = task.build(src.tokenizer())
    pre_step, post_step = int(points.loc[args.check_run, "pre_step"]), int(points.loc[args.check_run, "post_step"])
    frames = []
    for step in (pre_step, post_step):
        table = attention_on_keys(src.load(step).model, batch, task.length)
        frames.append(table.assign(run=args.check_run, step=step))
    attention = pd.concat(frames, ignore_index=True)
    atomic_to_csv(attention, args.out / "attention.csv")

    # Two checkpoints held at once: load each into its own source so neither overwrites the other.
    (pre_src,) = open_sources([f"{args.suite}/{args.check_run}"])
    by_hand = patch_all_heads_by_hand(pre_src.load(pre_step).model, src.load(post_step).model, batch)
    topk = report.topk.assign(run=lambda d: d.model + "-seed" + d.seed.astype(str))
    engine = topk[(topk.run == args.check_run)].sort_values("k").iloc[-1]
    check = pd.DataFrame(
        [
            {
                "run": args.check_run,
                "pre_step": pre_step,
                "post_step": post_step,
                "k": int(engine.k),
                "p_engine": float(engine["value"]),
                "p_by_hand": by_hand,
                "abs_difference": abs(float(engine["value"]) - by_hand),
            }
        ]
    )
    atomic_to_csv(check, args.out / "patch_check.csv")
    src.close()
    pre_src.close()

    (acc_src,) = open_sources([f"{args.suite}/{args.accuracy_run}"])
    big = RepetitionTask(n_prompts=args.accuracy_prompts, seed=1)
    evaluator = StepEvaluator(acc_src, big.build(acc_src.tokenizer()))
    steps = [int(s) for s in args.accuracy_steps.split(",")]
    for step in steps:
        evaluator(step)
    accuracy = evaluator.table().assign(run=args.accuracy_run, n_prompts=args.accuracy_prompts)
    atomic_to_csv(accuracy, args.out / "accuracy.csv")
    acc_src.close()

    print(report.summary().to_string(index=False))
    print(attention.to_string(index=False))
    print(check.to_string(index=False))
    print(accuracy.to_string(index=False))
    print(
        f"runtime: {time.perf_counter() - started:.0f} s; outputs in {args.out} ({len(SUITES[args.suite].run_names())} runs)"
    )
    return report.summary()


if __name__ == "__main__":
    main()
