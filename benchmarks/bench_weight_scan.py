"""What the finiteness check costs (issue 68): hashing a 410m-sized step's weights alone against
hashing them and checking every value for NaN/inf in the same read (interp.sources.weight_scan).

Writes one float16 safetensors file at Pythia-410m's size (24 layers of d_model 1024, d_vocab
50304: ~405 M values, ~810 MB) into a temporary folder, reads it once to warm the page cache,
then times ``loading._sha256_of_file`` (the digest alone, what a local step's hashing cost
before) and ``weight_scan.scan_file`` (the digest and the check, one read) alternately, the best
of ``--repeats`` each, and deletes the file. Usage::

    .venv/bin/python benchmarks/bench_weight_scan.py [--repeats 3] [--scale 1.0]

Last line: ``scan_over_hash_ratio: <best scan time / best hash time>``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from interp.sources.loading import _sha256_of_file
from interp.sources.weight_scan import scan_file


def write_410m_sized(path: Path, scale: float = 1.0) -> int:
    """A float16 safetensors file shaped like pythia-410m's weights (``scale`` < 1: fewer layers)."""
    g = torch.Generator().manual_seed(0)
    d, vocab, layers = 1024, 50304, max(1, round(24 * scale))
    tensors = {"embed_in.weight": torch.randn(vocab, d, generator=g).half()}
    for i in range(layers):
        tensors[f"layers.{i}.attention.query_key_value.weight"] = torch.randn(3 * d, d, generator=g).half()
        tensors[f"layers.{i}.attention.dense.weight"] = torch.randn(d, d, generator=g).half()
        tensors[f"layers.{i}.mlp.dense_h_to_4h.weight"] = torch.randn(4 * d, d, generator=g).half()
        tensors[f"layers.{i}.mlp.dense_4h_to_h.weight"] = torch.randn(d, 4 * d, generator=g).half()
    tensors["embed_out.weight"] = torch.randn(vocab, d, generator=g).half()
    save_file(tensors, path)
    return sum(t.numel() for t in tensors.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the 24 layers written")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-weight-scan-"))
    try:
        path = folder / "model.safetensors"
        n = write_410m_sized(path, args.scale)
        print(f"file: {path.stat().st_size / 1e6:.0f} MB, {n / 1e6:.0f} M float16 values")
        _sha256_of_file(path)  # warm the page cache: both timings read from memory
        hash_s, scan_s = [], []
        for _ in range(args.repeats):
            t = time.perf_counter()
            _sha256_of_file(path)
            hash_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            digest, bad = scan_file(path)
            scan_s.append(time.perf_counter() - t)
            assert not bad and digest == _sha256_of_file(path)
        print(f"sha256 alone: best {min(hash_s):.2f} s of {[round(x, 2) for x in hash_s]}")
        print(f"sha256 + finiteness check, one read: best {min(scan_s):.2f} s of {[round(x, 2) for x in scan_s]}")
        print(f"scan_over_hash_ratio: {min(scan_s) / min(hash_s):.3f}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
