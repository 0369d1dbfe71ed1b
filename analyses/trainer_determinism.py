"""Which settings change the embedded trainer's weights, with and without the kernel pins.

Trains the quick suite's first run (``neox-2l-64d-seed1``) for ``--steps`` steps (300 by default)
once per setting, each from a fresh Python process whose environment is the setting: ``pinned``
rows train the way the suite does (a worker spawned with :data:`interp.core.kernel_pins.PINS`, so the
caller's variables must not matter), ``unpinned`` rows with ``EMERGENCE_LENS_UNPINNED=1`` (the
caller's ``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``, ``ONEDNN_MAX_CPU_ISA`` and thread count decide).
Compares the weights at the last step with those of the first row and records the training
speed (steps/s, training loop only). Writes ``trainer_determinism.csv`` to ``--out`` (default
``results/analyses/trainer_determinism``); the table is quoted in docs/embedded.md.

Usage: ``python -m analyses.trainer_determinism [--steps 300] [--out DIR] [--quick]``
(``--quick``: the pinned rows and the unpinned default only).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from interp.cli.options import description

#: (label, pinned, torch threads, caller's environment changes)
SETTINGS = [
    ("pinned (the suite's trainer)", True, 1, {}),
    ("pinned, second process", True, 1, {}),
    (
        "pinned, caller ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE",
        True,
        1,
        {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
    ),
    ("unpinned, the machine's defaults", False, 1, {}),
    ("unpinned, 2 threads", False, 2, {}),
    ("unpinned, ATEN_CPU_CAPABILITY=avx2", False, 1, {"ATEN_CPU_CAPABILITY": "avx2"}),
    ("unpinned, ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2", False, 1, {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}),
    ("unpinned, ATEN_CPU_CAPABILITY=default", False, 1, {"ATEN_CPU_CAPABILITY": "default"}),
    ("unpinned, MKL_CBWR=COMPATIBLE", False, 1, {"MKL_CBWR": "COMPATIBLE"}),
]
QUICK_ROWS = 4

_CHILD = """
import json, sys
from pathlib import Path
from analyses.trainer_determinism import train_and_report
from interp.core import kernel_pins
out, threads, steps, pinned = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
if pinned:
    report = kernel_pins.run_pinned(train_and_report, out, steps, threads=threads)
else:
    import torch
    torch.set_num_threads(threads)
    report = train_and_report(out, steps)
print(json.dumps(report))
"""


def train_and_report(out: Path, steps: int) -> dict:
    """Train ``neox-2l-64d-seed1`` of the quick suite to ``steps`` in this process, saving only the
    last step; returns torch's kernel level, the kernel variables and the training seconds."""
    import time

    import torch

    from interp.core import kernel_pins
    from interp.sources import catalogue, embedded

    started = time.perf_counter()
    embedded.train_run(catalogue.SMALL, 1, catalogue.QUICK, out, stop_step=steps, save_steps=[steps])
    return {
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "seconds": time.perf_counter() - started,
        "env": kernel_pins.kernel_env(),
    }


def main(argv: list[str] | None = None) -> pd.DataFrame:
    from safetensors.torch import load_file

    from interp.core import kernel_pins

    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("results/analyses/trainer_determinism"))
    parser.add_argument("--quick", action="store_true", help="the pinned rows and the unpinned default only")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: must be >= 1")
    rows, reference = [], None
    settings = SETTINGS[:QUICK_ROWS] if args.quick else SETTINGS
    root = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, pinned, threads, changes) in enumerate(settings):
            env = {
                k: v
                for k, v in os.environ.items()
                if k not in (*kernel_pins.PINS, *kernel_pins.THREAD_VARS, kernel_pins.UNPIN_VAR)
            }
            env.update(changes)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
            if not pinned:
                env[kernel_pins.UNPIN_VAR] = "1"
            folder = Path(tmp) / f"v{i}"
            done = subprocess.run(
                [sys.executable, "-c", _CHILD, str(folder), str(threads), str(args.steps), "1" if pinned else "0"],
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(f"setting {label!r} failed: {done.stderr.strip().splitlines()[-1:]}")
            report = json.loads(done.stdout.strip().splitlines()[-1])
            weights_file = folder / f"step{args.steps}" / "model.safetensors"
            weights = load_file(str(weights_file))
            reference = reference or weights
            diff = max(float((weights[k] - reference[k]).abs().max()) for k in reference)
            rel = max(float((weights[k] - reference[k]).norm() / reference[k].norm()) for k in reference)
            rows.append(
                {
                    "setting": label,
                    "pinned": pinned,
                    "threads": report["threads"],
                    "cpu_capability": report["cpu_capability"],
                    "max_abs_diff": diff,
                    "max_rel_norm_diff": rel,
                    "sha256": hashlib.sha256(weights_file.read_bytes()).hexdigest()[:16],
                    "steps_per_s": round(args.steps / report["seconds"], 2),
                }
            )
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    from interp.core.io import atomic_to_csv

    atomic_to_csv(table, args.out / "trainer_determinism.csv")
    print(table.to_string(index=False))
    return table


if __name__ == "__main__":
    main()
