"""Sweep executor speed-up: 8 short training runs serially (in-process) vs on 2 joblib workers.

Both sweeps run the same 8 runs (linear map, S=8, s in {1, 2}, seeds 0..3) into fresh folders,
timed end to end, worker start-up included (that is what a user waits for). Goal: >= 1.7x on a
2-core machine. Usage::

    .venv/bin/python benchmarks/bench_sweep_parallel.py [--steps 150] [--jobs 2]

Last line: ``sweep_parallel_speedup: <ratio>``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from synthetic.sweeps import run_sweep


def spec(steps: int) -> dict:
    return {"task": "linear-map", "S": 8, "steps": steps, "eval_every": max(steps // 10, 1),
            "grid": {"s": [1, 2]}, "seeds": [0, 1, 2, 3]}


def timed_sweep(steps: int, jobs: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        outcome = run_sweep(spec(steps), Path(out), jobs=jobs, progress=False)
        elapsed = time.perf_counter() - t0
    if outcome.n_failed:
        raise SystemExit(f"{outcome.n_failed} runs failed: {outcome.results['error'].dropna().tolist()}")
    return elapsed, dict(zip(outcome.results["run_id"], outcome.results["final_loss"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150, help="training steps per run")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers for the parallel sweep")
    args = parser.parse_args()
    torch.set_num_threads(1)
    serial_s, serial_losses = timed_sweep(args.steps, 1)
    parallel_s, parallel_losses = timed_sweep(args.steps, args.jobs)
    same = serial_losses == parallel_losses
    print(f"8 runs x {args.steps} steps: serial {serial_s:.1f} s, {args.jobs} joblib workers {parallel_s:.1f} s")
    print(f"final losses identical across executors: {same}")
    print(f"sweep_parallel_speedup: {serial_s / parallel_s:.2f}")


if __name__ == "__main__":
    main()
