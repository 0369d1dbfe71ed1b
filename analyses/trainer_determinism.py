"""Which settings change the embedded trainer's weights: thread count and torch's CPU kernel level.

Trains the quick suite's first run (``neox-2l-64d-seed1``) for ``--steps`` steps (300 by default)
once per setting, each in a fresh process (``ATEN_CPU_CAPABILITY`` is read when torch is
imported), and compares the weights at the last step with those of the reference setting
(1 thread, the machine's own kernel level). Writes ``trainer_determinism.csv`` to ``--out``
(default ``results/analyses/trainer_determinism``); the table is quoted in docs/embedded.md.

Usage: ``python -m analyses.trainer_determinism [--steps 300] [--out DIR]``
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

#: (label, torch threads, ATEN_CPU_CAPABILITY or None for the machine's default)
SETTINGS = [
    ("reference: 1 thread, default kernels", 1, None),
    ("same, second process", 1, None),
    ("ATEN_CPU_CAPABILITY=avx512", 1, "avx512"),
    ("2 threads", 2, None),
    ("ATEN_CPU_CAPABILITY=avx2", 1, "avx2"),
    ("ATEN_CPU_CAPABILITY=default", 1, "default"),
]

_CHILD = """
import sys, torch
torch.set_num_threads(int(sys.argv[2]))
from pathlib import Path
from interp import embedded
embedded.train_run(embedded.SMALL, 1, embedded.QUICK, Path(sys.argv[1]), stop_step=int(sys.argv[3]),
                   save_steps=[int(sys.argv[3])])
print(torch.backends.cpu.get_cpu_capability())
"""


def main(argv: list[str] | None = None) -> pd.DataFrame:
    from safetensors.torch import load_file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path("results/analyses/trainer_determinism"))
    args = parser.parse_args(argv)
    rows, reference = [], None
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, threads, capability) in enumerate(SETTINGS):
            env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
            if capability:
                env["ATEN_CPU_CAPABILITY"] = capability
            folder = Path(tmp) / f"v{i}"
            done = subprocess.run([sys.executable, "-c", _CHILD, str(folder), str(threads), str(args.steps)],
                                  env=env, capture_output=True, text=True, check=True)
            weights_file = folder / f"step{args.steps}" / "model.safetensors"
            weights = load_file(str(weights_file))
            reference = reference or weights
            diff = max(float((weights[k] - reference[k]).abs().max()) for k in reference)
            rel = max(float((weights[k] - reference[k]).norm() / reference[k].norm()) for k in reference)
            rows.append({"setting": label, "threads": threads, "cpu_capability": done.stdout.split()[-1],
                         "max_abs_diff": diff, "max_rel_norm_diff": rel,
                         "sha256": hashlib.sha256(weights_file.read_bytes()).hexdigest()[:16]})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    from interp.io import atomic_to_csv

    atomic_to_csv(table, args.out / "trainer_determinism.csv")
    print(table.to_string(index=False))
    return table


if __name__ == "__main__":
    main()
