"""Resident memory across 30 sequential checkpoint loads (goal: <= 10 % growth after the first).

Writes a temporary local suite of random GPT-NeoX checkpoints at Pythia-70m's shape (6 layers,
d_model 512, 8 heads, d_vocab 50304: ~70 M parameters, ~282 MB of safetensors each). To keep
disk use and writing time small, ``--distinct`` (default 6) checkpoints get their own weights and
the other step folders hard-link one of them (the loads still read and allocate every tensor
anew). It then loads them one after another through ``LocalSuiteSource.load``, runs one
forward pass on each, drops the checkpoint and records the process's resident set size (psutil).
Growth = (max RSS over loads 2..N - RSS after load 1) / RSS after load 1.

``--no-release`` disables the source's explicit release of the previous bridge (the behaviour of
booting bridges in a loop without a garbage collection): a comparison, which can take several
GB of memory. Usage::

    .venv/bin/python benchmarks/bench_checkpoint_memory.py [--n-checkpoints 30] [--distinct 6] [--d-vocab 50304]

Last line: ``rss_growth_after_first_pct: <percent>``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import torch

from interp.sources import LocalSuiteSource, base, loading, make_byte_tokenizer


def write_suite(
    root: Path, n_checkpoints: int, distinct: int, d_vocab: int, d_model: int, n_layers: int, n_heads: int
) -> None:
    """A local suite (``step{N}/`` folders, interp/sources/layouts.py): ``distinct`` random checkpoints, the other
    step folders hard-linking their files (step k links step k % distinct)."""
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    config = neox_config(d_model, n_layers, n_heads, d_vocab, 2048)
    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(config).eval()
    make_byte_tokenizer().save_pretrained(root / "tokenizer")
    for step in range(n_checkpoints):
        folder = root / f"step{step}"
        if step >= distinct:
            folder.mkdir()
            for file in (root / f"step{step % distinct}").iterdir():
                (folder / file.name).hardlink_to(file)
            continue
        with torch.no_grad():  # a small random walk: each distinct checkpoint has its own weights
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter), alpha=1e-3)
        model.save_pretrained(folder)


def measure(root: Path, release: bool) -> tuple[list[float], list[float]]:
    """RSS (MiB) after each load + forward, and seconds per load."""
    if not release:  # where it is called: the source's loads (base) and the release between them (loading)
        base._release_memory = loading._release_memory = lambda: None
    source = LocalSuiteSource(root)
    process = psutil.Process()
    tokens = torch.randint(0, 256, (4, 64))
    rss, seconds = [], []
    for step in source.available_steps():
        start = time.perf_counter()
        checkpoint = source.load(step, device="cpu")
        seconds.append(time.perf_counter() - start)
        with torch.inference_mode():
            checkpoint.model(tokens)
        del checkpoint
        rss.append(process.memory_info().rss / 2**20)
        print(f"step {step:3d}: rss {rss[-1]:8.1f} MiB, load {seconds[-1]:.2f} s", flush=True)
    source.close()
    return rss, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-checkpoints", type=int, default=30)
    parser.add_argument("--distinct", type=int, default=6, help="checkpoints with their own weight files")
    parser.add_argument("--d-vocab", type=int, default=50304)
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--n-layers", type=int, default=6)
    parser.add_argument("--n-heads", type=int, default=8)
    parser.add_argument("--no-release", action="store_true", help="disable the explicit release (comparison)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    root = Path(tempfile.mkdtemp(prefix="bench_checkpoint_memory_"))
    try:
        start = time.perf_counter()
        write_suite(root, args.n_checkpoints, args.distinct, args.d_vocab, args.d_model, args.n_layers, args.n_heads)
        print(f"wrote {args.n_checkpoints} checkpoints in {time.perf_counter() - start:.0f} s", flush=True)
        rss, seconds = measure(root, release=not args.no_release)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    growth = 100 * (max(rss[1:]) - rss[0]) / rss[0]
    print(
        f"rss after first load: {rss[0]:.0f} MiB; max after: {max(rss[1:]):.0f} MiB; last: {rss[-1]:.0f} MiB; "
        f"mean load {sum(seconds) / len(seconds):.2f} s"
    )
    print(f"rss_growth_after_first_pct: {growth:.1f}")


if __name__ == "__main__":
    main()
