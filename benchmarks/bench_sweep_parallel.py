"""Sweep executor speed-up: 8 short training runs serially (in-process) vs on 2 joblib workers.

The same 8 runs (linear map, S=8, s in {1, 2}, seeds 0..3) go into fresh folders three times:
serially in this process; on 2 fresh joblib (loky) workers, whose start-up (spawning and
importing torch and TransformerLens) is included, as a user waits for it; and again on the now
warm workers, which is the steady state of a long sweep. Goal: end-to-end >= 1.7x on a 2-core
machine. The load average is printed because other processes on the machine change the ratio.

    .venv/bin/python benchmarks/bench_sweep_parallel.py [--steps 400] [--jobs 2]

Last line: ``sweep_parallel_speedup: <serial / parallel end to end>``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch

from sweeps import plan_runs, run_sweep


def spec(steps: int) -> dict:
    return {
        "task": "linear-map",
        "S": 8,
        "steps": steps,
        "eval_every": max(steps // 5, 1),
        "tokens_per_step": 1024,
        "eval_tokens": 2048,
        "grid": {"s": [1, 2]},
        "seeds": [0, 1, 2, 3],
        "runner": "synthetic.sweeps:train_runner",
    }


def timed_sweep(steps: int, jobs: int) -> tuple[float, float, dict]:
    """(wall seconds of the sweep, mean wall seconds per run, run_id → final loss)."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        outcome = run_sweep(spec(steps), Path(out), jobs=jobs, progress=False)
        elapsed = time.perf_counter() - t0
    if outcome.n_failed:
        raise SystemExit(f"{outcome.n_failed} runs failed: {outcome.results['error'].dropna().tolist()}")
    results = outcome.results
    return elapsed, float(results["wall_time_s"].mean()), dict(zip(results["run_id"], results["final_loss"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="training steps per run")
    parser.add_argument("--jobs", type=int, default=2, help="joblib workers for the parallel sweep")
    args = parser.parse_args()
    torch.set_num_threads(1)
    plan_runs(spec(args.steps))  # imports the training stack here, outside the timings
    load_before = os.getloadavg()[0]
    serial_s, serial_run, serial = timed_sweep(args.steps, 1)
    cold_s, cold_run, cold = timed_sweep(args.steps, args.jobs)
    warm_s, warm_run, warm = timed_sweep(args.steps, args.jobs)
    print(
        f"8 runs x {args.steps} steps on {os.cpu_count()} cores "
        f"(load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)"
    )
    print(f"serial in-process:        {serial_s:6.1f} s  ({serial_run:.2f} s per run)")
    print(f"{args.jobs} joblib workers, cold: {cold_s:6.1f} s  ({cold_run:.2f} s per run, worker start-up included)")
    print(f"{args.jobs} joblib workers, warm: {warm_s:6.1f} s  ({warm_run:.2f} s per run)")
    print(f"final losses identical across executors: {serial == cold == warm}")
    print(f"speed-up warm workers: {serial_s / warm_s:.2f}")
    print(f"sweep_parallel_speedup: {serial_s / cold_s:.2f}")


if __name__ == "__main__":
    main()
