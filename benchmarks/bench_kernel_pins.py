"""What the kernel pins cost: training steps/s pinned (AVX2 kernels, MKL's AVX2 branch, oneDNN at
AVX2) against unpinned (the machine's own kernels), per model size, measured in one run.

Each measurement trains ``--steps`` steps of the quick suite's first run at one size in a fresh
process (one torch thread, as each suite worker trains), without saving; pinned and unpinned
alternate ``--rounds`` times so that load from other processes hits both alike. The best round of
each is reported, with the ratio unpinned / pinned steps/s (> 1: the pins cost speed).

Usage: ``python benchmarks/bench_kernel_pins.py [--steps 100] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

_CHILD = """
import json, sys
from interp.core import kernel_pins
from benchmarks.bench_kernel_pins import steps_per_second
size, steps, pinned = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if pinned:
    print(json.dumps(kernel_pins.run_pinned(steps_per_second, size, steps)))
else:
    import torch
    torch.set_num_threads(1)
    print(json.dumps(steps_per_second(size, steps)))
"""


def steps_per_second(size_name: str, steps: int) -> dict:
    """Train ``steps`` steps of ``size_name`` (seed 1, the quick suite's settings) in this process,
    after 5 warm-up steps; returns steps/s and torch's kernel level."""
    import time

    import torch

    from interp.sources import catalogue, embedded

    size = {s.name: s for s in (catalogue.SMALL, catalogue.BASE)}[size_name]
    embedded.train_run(size, 1, catalogue.QUICK, None, stop_step=5)
    started = time.perf_counter()
    embedded.train_run(size, 1, catalogue.QUICK, None, stop_step=steps)
    return {
        "steps_per_s": steps / (time.perf_counter() - started),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def main() -> None:
    from interp.core import kernel_pins
    from interp.sources import catalogue, environment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k not in (*kernel_pins.PINS, kernel_pins.UNPIN_VAR)}
    env["PYTHONPATH"] = root
    env["OMP_NUM_THREADS"] = "1"
    print(f"CPU: {environment.cpu_model()}; pins apply: {kernel_pins.why_not() or 'yes'}")
    for size in (catalogue.SMALL, catalogue.BASE):
        best = {True: (0.0, ""), False: (0.0, "")}
        for _ in range(args.rounds):
            for pinned in (True, False):
                run_env = dict(env, **({} if pinned else {kernel_pins.UNPIN_VAR: "1"}))
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, size.name, str(args.steps), "1" if pinned else "0"],
                    env=run_env,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                got = json.loads(done.stdout.strip().splitlines()[-1])
                best[pinned] = max(best[pinned], (got["steps_per_s"], got["cpu_capability"]))
        (p, p_level), (u, u_level) = best[True], best[False]
        print(
            f"{size.name}: pinned {p:.2f} steps/s ({p_level}), unpinned {u:.2f} steps/s ({u_level}), "
            f"unpinned/pinned {u / p:.2f}x"
        )


if __name__ == "__main__":
    main()
