"""Start-up of the ``emergence`` command: wall time of ``--help``, ``list-models`` and a bad-input
error, against importing torch (what every command paid before heavy imports moved into the
commands) and against the 1.5 s budget.

Usage: ``python benchmarks/bench_cli_startup.py [--repeats 5]``; the last line is the headline
``cli_startup_s: <slowest of the three, median over repeats>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BUDGET_S = 1.5
EMERGENCE = [sys.executable, "-m", "emergence_lens"]
CASES = {
    "emergence --help": ([*EMERGENCE, "--help"], 0),
    "emergence list-models": ([*EMERGENCE, "list-models"], 0),
    "emergence bisect embedded --device gpu": ([*EMERGENCE, "bisect", "embedded", "--device", "gpu"], 2),
}


def wall(cmd: list[str], expect: int, repeats: int) -> float:
    """Median wall seconds of ``cmd`` over ``repeats`` runs; its exit status must be ``expect``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
        times.append(time.perf_counter() - t0)
        if done.returncode != expect:
            raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}, expected {expect}: {done.stderr[-500:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; median of {args.repeats} runs")
    torch_s = wall([sys.executable, "-c", "import torch, transformers, transformer_lens"], 0, args.repeats)
    print(f"{'import torch, transformers, transformer_lens':45s} {torch_s:6.2f} s (reference)")
    results = {}
    for name, (cmd, expect) in CASES.items():
        results[name] = wall(cmd, expect, args.repeats)
        print(f"{name:45s} {results[name]:6.2f} s  ({results[name] / torch_s:.2f} of the reference)")
    slowest = max(results.values())
    print(f"slowest / budget {BUDGET_S} s: {slowest / BUDGET_S:.2f}; reference / slowest: {torch_s / slowest:.1f}x")
    print(f"cli_startup_s: {slowest:.2f}")


if __name__ == "__main__":
    main()
