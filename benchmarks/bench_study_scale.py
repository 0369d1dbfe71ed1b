"""Throughput of the main job as a study: a 12-source offline study on 2 workers vs 1 (issue 24,
item 6; goal >= 1.8x).

Builds ``--sources`` (default 12) local suites of random GPT-NeoX checkpoints (``--steps`` steps
each, pythia-14m's layer count and heads at ``--d-model``, byte vocabulary) in a temporary
folder, then runs :func:`interp.main_job.runner.run_study` on all of them into a fresh folder with
``--executor`` (default joblib) and 1 worker, then 2 workers, and prints units per minute of each
and their ratio (joblib's 2 workers are started and have imported the package before the
clock starts, as on a running cluster; 1 worker runs in the process). Each unit runs with one torch thread (as in every sweep), so the ratio measures
how the study spreads over workers; it needs as many idle cores as workers. Both runs must give
identical tables (checked). Usage::

    .venv/bin/python benchmarks/bench_study_scale.py [--sources 12] [--steps 10] [--d-model 256] [--executor joblib|ray]

Last line: ``study_throughput_2_vs_1_workers: <ratio>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd


def build_sources(root: Path, n_sources: int, steps: int, d_model: int) -> list[str]:
    import torch
    from transformers import GPTNeoXForCausalLM

    from interp.sources import make_byte_tokenizer
    from interp.sources.catalogue import neox_config

    names = []
    for i in range(n_sources):
        suite = root / f"run{i:02d}"
        make_byte_tokenizer().save_pretrained(suite / "tokenizer")
        for step in range(steps):
            torch.manual_seed(1000 * i + step)
            GPTNeoXForCausalLM(neox_config(d_model, 6, 4, 256, 128)).save_pretrained(suite / f"step{step}")
        names.append(str(suite))
    return names


def _warm() -> int:
    """Import what a unit needs (a worker's one-off start-up, not the study's throughput)."""
    import transformer_lens.model_bridge  # noqa: F401

    import interp.main_job.runner  # noqa: F401

    return os.getpid()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=12)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--executor", default="joblib", choices=["joblib", "ray"])
    args = parser.parse_args()
    from interp.core.settings import StudyConfig
    from interp.main_job.runner import run_study
    from interp.tasks import RepetitionTask

    print(f"cpu_count={os.cpu_count()} load_avg_before={os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_study_"))
    try:
        names = build_sources(tmp / "sources", args.sources, args.steps, args.d_model)
        task = RepetitionTask(n_prompts=32, length=8, seed=0)
        seconds = {}
        for workers in (1, 2):
            if args.executor == "joblib" and workers > 1:  # warm workers, as on a running cluster
                from joblib import Parallel, delayed

                Parallel(n_jobs=workers, backend="loky")(delayed(_warm)() for _ in range(2 * workers))
            start = time.perf_counter()
            run_study(
                names,
                [task],
                StudyConfig(scan=True),
                executor=args.executor,
                jobs=workers,
                out_dir=tmp / f"out{workers}",
                progress=False,
            )
            seconds[workers] = time.perf_counter() - start
            print(
                f"{workers} worker(s): {args.sources} units in {seconds[workers]:.1f} s "
                f"({60 * args.sources / seconds[workers]:.1f} units/min); load_avg={os.getloadavg()}"
            )
        for name in ("emergence", "points", "heads", "checkpoints"):
            pd.testing.assert_frame_equal(
                pd.read_parquet(tmp / "out1" / f"{name}.parquet"),
                pd.read_parquet(tmp / "out2" / f"{name}.parquet"),
                check_exact=True,
            )
        print("tables of 1 and 2 workers: identical")
        print(f"study_throughput_2_vs_1_workers: {seconds[1] / seconds[2]:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
