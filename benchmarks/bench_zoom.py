"""Locating the dense point of emergence: zooming from the stored state vs re-training from step 0.

On one embedded run (default: the quick suite's first run, trained on first use), in one run:

- zoom: :func:`interp.dense.dense_point` at ``--resolution`` steps on a copy of the run (re-trains
  only inside the bracketing interval, from the stored optimizer state);
- reference: re-train the run from step 0 to the coarse post step, saving every ``--resolution``
  steps inside the bracketing interval, then evaluate those checkpoints the same way (what
  locating the dense point needed before checkpoints carried their optimizer state).

Both use the run's recorded thread count. The headline is the ratio reference / zoom.

Usage: ``python benchmarks/bench_zoom.py [--run FOLDER] [--resolution 10]``
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch

from interp.dense import DenseEvaluator, dense_point
from interp.emergence import held_crossing
from interp.sources import embedded
from interp.zoom import run_settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run", type=Path, default=None, help="a resumable run folder (default: quick suite, first run)"
    )
    parser.add_argument("--resolution", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=512)
    args = parser.parse_args()
    run = args.run or embedded.ensure_suite(embedded.QUICK)[0]
    cfg, size, seed, threads = run_settings(run)
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / run.name
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("zoom"))
        start = time.perf_counter()
        point = dense_point(copy, resolution=args.resolution, n_prompts=args.prompts)
        zoom_s = time.perf_counter() - start
        if point.pre_step is None or not point.zooms:
            raise SystemExit(
                f"{run.name}: no crossing to zoom into (dense point {point.pre_step} -> {point.post_step})"
            )
        pre, post = point.zooms[0].pre, point.zooms[0].post  # the coarse bracket
        print(
            f"{run.name}: coarse bracket {pre} -> {post}; zoom found {point.pre_step} -> {point.post_step} at "
            f"{args.resolution}-step resolution, re-training {point.retrained_steps} steps, in {zoom_s:.1f} s"
        )

        ref = Path(tmp) / "from-zero"
        grid = list(range(pre, post + 1, args.resolution))
        start = time.perf_counter()
        embedded.train_run(size, seed, cfg, ref, stop_step=post, save_steps=grid)
        for s in embedded.SuiteConfig.checkpoint_steps_for(cfg, size):  # the evaluator reads stored steps
            if s not in grid and (copy / f"step{s}").is_dir():
                shutil.copytree(copy / f"step{s}", ref / f"step{s}")
        shutil.copy(copy / "suite.json", ref / "suite.json")
        shutil.copytree(copy / "tokenizer", ref / "tokenizer")
        from interp.sources import LocalSuiteSource
        from interp.tasks import RepetitionTask

        batch = RepetitionTask(n_prompts=args.prompts).build(LocalSuiteSource(ref).tokenizer())
        evaluator = DenseEvaluator(ref, batch)
        steps = sorted(set(grid) | {s for s in cfg.checkpoint_steps_for(size) if s > post})
        found = held_crossing(steps, [evaluator(s)[0] for s in steps])
        ref_s = time.perf_counter() - start
        print(
            f"re-training from step 0 to {post} and evaluating {len(grid)} checkpoints: {ref_s:.1f} s "
            f"(found {found[0]} -> {found[1]})"
        )
    print(f"zoom_speedup: {ref_s / zoom_s:.1f}")


if __name__ == "__main__":
    main()
