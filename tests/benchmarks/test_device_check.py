"""The CPU half of benchmarks/device_check.sh (issue 24, item 5): the script runs end to end in
its --cpu --tiny mode on a tiny local suite, and its comparison fails on a real difference."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import save_tiny_neox

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.slow
def test_device_check_cpu_half_runs_and_compares(tmp_path, byte_tokenizer_dir):
    suite = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, suite / "tokenizer")
    for step in range(3):
        save_tiny_neox(suite / f"step{step}", seed=step)
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "OUT": str(tmp_path / "out"),
        "SUITE": str(suite),
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        ["bash", "benchmarks/device_check.sh", "--cpu", "--tiny"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for line in (
        "tiny pattern: transformer_lens",
        "switch_speedup_tiny:",
        "max_abs_difference: 0.000e+00",
        "device_check: cpu and cpu agree to 1e-4",
    ):
        assert line in done.stdout, line

    from compare_reports import compare

    cpu, other = tmp_path / "out" / "main-cpu", tmp_path / "out" / "main-cpu-reference"
    table = pd.read_parquet(other / "emergence.parquet")
    table.loc[0, "p_answer"] += 2e-4  # a difference above the tolerance is caught and named
    table.to_parquet(other / "emergence.parquet")
    worst, problems = compare(cpu, other, atol=1e-4)
    assert abs(worst - 2e-4) < 1e-6 and problems == ["emergence.p_answer: max |difference| 2.00e-04 > 0.0001"]


def test_device_check_refuses_an_unknown_option():
    done = subprocess.run(["bash", "benchmarks/device_check.sh", "--gpu"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "unknown option --gpu" in done.stderr
