"""Would ``torch.compile`` give the ensemble its 2×? The batched training step eager vs compiled.

Issue 27, item 1 asks for ≥ 2× tokens/s from training an ensemble of E runs in one process
against E runs one at a time. ``benchmarks/bench_synth_ensemble.py`` measures the eager paths
(1.0–1.3×; docs/synthetic.md says why: one run is already compute, and an ensemble's element-wise
ops leave the L2 cache). This benchmark asks whether fusing those element-wise ops with
``torch.compile`` (inductor, C++ code on CPU) changes that.

Both sides run the same step: :func:`synthetic.ensemble.ensemble_forward` over E stacked copies
of the real model (``build_model``; the linear map at S = 16, s = 3, 1 attention-only layer of
16 heads × d_head 8, d_vocab 2, 64 sequences of 32 tokens = 2048 tokens per member and step),
cross-entropy on every next-token position, backward and one ``torch.optim.AdamW`` step. One
side calls the loss eagerly, the other through ``torch.compile`` (its compile time is printed and
left out of the timing). Timing alternates eager and compiled in rounds and reports the median
of each. Tokens/s (all members together) of the compiled ensemble of the largest E against the eager
ensemble of 1 (one run at a time) is the number item 1 asks about. Usage::

    .venv/bin/python benchmarks/bench_synth_compile.py [--steps 20] [--rounds 3] [--threads 1] [--sizes 1,8]

Needs a C++ compiler (inductor's CPU back end). Last line:
``compiled_ensemble_vs_eager_single_tokens_per_s_ratio: <ratio>``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch
import torch.nn.functional as F

from synthetic.datasets import LinearMapTask
from synthetic.ensemble import ensemble_forward, native_state
from synthetic.models import ModelConfig, build_model

N_HEADS, D_HEAD = 16, 8


def stacked_params(E: int, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """E freshly initialised models' native weights, stacked on a leading ensemble axis."""
    states = []
    for seed in range(E):
        torch.manual_seed(seed)
        states.append(native_state(build_model(cfg)))
    return {name: torch.stack([s[name].detach() for s in states]).requires_grad_(True) for name in states[0]}


def tokens_per_s(step, params, optimizer, batches: list[torch.Tensor]) -> float:
    """Tokens/s (all members together) of ``len(batches)`` training steps of ``step(params, tokens) -> loss``."""
    start = time.perf_counter()
    for tokens in batches:
        optimizer.zero_grad(set_to_none=True)
        step(params, tokens).backward()
        optimizer.step()
    return sum(t.numel() for t in batches) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="training steps per timed round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per side")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--sizes", default="1,8", help="ensemble sizes E, comma-separated (1 = one run)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sizes = sorted({int(x) for x in args.sizes.split(",")})
    if sizes[0] != 1:
        raise SystemExit(f"--sizes {args.sizes!r} must include 1 (the one-at-a-time reference)")
    print(f"threads {args.threads}, {os.cpu_count()} CPUs, load average {os.getloadavg()}, steps {args.steps}")
    task = LinearMapTask(S=16, s=3)
    cfg = ModelConfig(d_vocab=2, n_ctx=task.seq_len, n_heads=N_HEADS, d_head=D_HEAD)
    gen = torch.Generator().manual_seed(0)

    def loss(params: dict[str, torch.Tensor], tokens: torch.Tensor) -> torch.Tensor:
        logits = ensemble_forward(params, tokens, n_layers=1, n_heads=N_HEADS, d_head=D_HEAD)
        per_member = F.cross_entropy(
            logits[:, :, :-1].flatten(0, 2), tokens[:, :, 1:].flatten(), reduction="none"
        ).view(tokens.shape[0], -1)
        return per_member.mean(1).sum()

    rates: dict[tuple[int, str], float] = {}
    for E in sizes:
        batches = [torch.stack([task.sample(64, gen) for _ in range(E)]) for _ in range(args.steps)]
        sides = {"eager": loss, "compiled": torch.compile(loss)}
        params = {name: stacked_params(E, cfg) for name in sides}
        optimizers = {name: torch.optim.AdamW(params[name].values(), lr=1e-3) for name in sides}
        for name, step in sides.items():
            start = time.perf_counter()
            tokens_per_s(step, params[name], optimizers[name], batches[:2])  # warm-up (and compile)
            if name == "compiled":
                print(f"E={E}: compile and two warm-up steps {time.perf_counter() - start:.1f} s")
        measured: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            for name, step in sides.items():
                measured[name].append(tokens_per_s(step, params[name], optimizers[name], batches))
        for name in sides:
            rates[E, name] = statistics.median(measured[name])
        print(
            f"E={E}: eager {rates[E, 'eager']:,.0f}, compiled {rates[E, 'compiled']:,.0f} tokens/s; "
            f"compiled vs eager {rates[E, 'compiled'] / rates[E, 'eager']:.2f}x; against one eager run at a time: "
            f"eager {rates[E, 'eager'] / rates[1, 'eager']:.2f}x, compiled {rates[E, 'compiled'] / rates[1, 'eager']:.2f}x"
        )
    print(f"load average after {os.getloadavg()}")
    ratio = rates[sizes[-1], "compiled"] / rates[1, "eager"]
    print(f"compiled_ensemble_vs_eager_single_tokens_per_s_ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
