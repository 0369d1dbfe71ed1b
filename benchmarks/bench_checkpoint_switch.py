"""Switching checkpoints: a new TransformerBridge per checkpoint vs weights copied into the resident
bridge (interp.sources.weight_swap), the share of reading time hidden by reading ahead, and resident
memory over many switches (issue 24, items 2 and 3).

Builds, in a temporary folder, a local suite of ``--steps`` (default 10) random GPT-NeoX
checkpoints at each shape: pythia-70m (6 layers, d_model 512, 8 heads) and pythia-160m
(12 layers, d_model 768, 12 heads), d_vocab 50304, float16 safetensors as the hub serves them
(each distinct: a small random walk from one initialisation). Per shape it measures, loading the
steps in order after one warm-up load (the first boot is not a switch):

* ``boot``: ``LocalSuiteSource.load`` as before (config, tokenizer, HF model, boot_transformers);
* ``swap``: the same source with ``swap_weights`` on (safetensors copied into the resident bridge);
* ``ahead``: swap, plus ``prefetch(next step)`` right after each load and one forward pass of
  ``--eval-tokens`` tokens (standing for the evaluation the read is hidden behind); the hidden
  share is 1 - (seconds ``load`` waited for weights with read-ahead) / (seconds it read without);
* ``rss``: resident set size over ``--switches`` (default 200) swaps cycling through the steps,
  without and with read-ahead (one checkpoint ahead is held beside the bridge, so the read-ahead
  run's RSS after switch 1 is one checkpoint larger); growth = (max RSS over switches 2..N - RSS
  after switch 1) / RSS after switch 1 (goal <= 5 %).

With read-ahead the tensors read ahead are converted to the bridge's dtype on the background
thread and adopted as its parameters (``WeightSwap.apply(adopt=True)``), so the switch itself
copies nothing but the QKV split.

Weight digests are hashed once before timing (the main job's search computes every step's digest
for its duplicate check before loading any, so a load finds it known); both paths then run the
same digest and tokenizer checks. Usage::

    .venv/bin/python benchmarks/bench_checkpoint_switch.py [--shapes 70m,160m] [--steps 10] [--switches 200]

Prints one line per shape and measure, then ``switch_speedup_<shape>: <boot/swap>`` lines.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil
import torch

from interp.sources import LocalSuiteSource, make_byte_tokenizer

SHAPES = {"70m": (512, 6, 8), "160m": (768, 12, 12), "14m": (128, 6, 4), "tiny": (64, 2, 4)}


def write_suite(root: Path, shape: str, steps: int, d_vocab: int) -> Path:
    """``root/<shape>``: ``steps`` distinct random float16 checkpoints of that shape."""
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    d_model, n_layers, n_heads = SHAPES[shape]
    suite = root / shape
    make_byte_tokenizer().save_pretrained(suite / "tokenizer")
    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(neox_config(d_model, n_layers, n_heads, d_vocab, 2048)).eval()
    for step in range(steps):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter), alpha=1e-3)
        model.to(torch.float16).save_pretrained(suite / f"step{step}")
        model.to(torch.float32)
    return suite


def switch_times(
    suite: Path, swap: bool, ahead: bool, eval_tokens: int, device: str = "cpu"
) -> tuple[list[float], float]:
    """Seconds per load of steps 1..N after a warm-up load of step 0, and seconds spent reading."""
    source = LocalSuiteSource(suite)
    source.swap_weights = swap
    steps = source.available_steps()
    for step in steps:
        source.digest(step)
    tokens = torch.randint(0, 256, (1, eval_tokens), generator=torch.Generator().manual_seed(0)).to(device)
    source.load(steps[0], device=device)
    source.read_seconds = 0.0
    times = []
    for i, step in enumerate(steps[1:], start=1):
        t0 = time.perf_counter()
        model = source.load(step, device=device).model
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        if ahead and i + 1 < len(steps):
            source.prefetch(steps[i + 1])
        with torch.inference_mode():
            model(tokens)
        del model
    read = source.read_seconds
    source.close()
    return times, read


def rss_over_switches(suite: Path, switches: int, device: str = "cpu", ahead: bool = False) -> list[int]:
    source = LocalSuiteSource(suite)
    source.swap_weights = True
    steps = source.available_steps()
    process = psutil.Process()
    rss = []
    for i in range(switches + 1):
        source.load(steps[i % len(steps)], device=device)
        if ahead:  # measured once the read-ahead is done (while it runs, the file's mapped pages count too)
            source.prefetch(steps[(i + 1) % len(steps)])
            source._ahead[1].join()
        if i:
            rss.append(process.memory_info().rss)
    source.close()
    return rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="70m,160m", help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--switches", type=int, default=200)
    parser.add_argument("--d-vocab", type=int, default=50304)
    parser.add_argument("--eval-tokens", type=int, default=512)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    print(f"cpu_count={os.cpu_count()} torch_threads={torch.get_num_threads()} load_avg={os.getloadavg()}")
    tmp = Path(tempfile.mkdtemp(prefix="bench_switch_"))
    try:
        results = {}
        for shape in args.shapes.split(","):
            suite = write_suite(tmp, shape, args.steps, args.d_vocab)
            boot, _ = switch_times(suite, swap=False, ahead=False, eval_tokens=args.eval_tokens, device=args.device)
            swap, read_plain = switch_times(
                suite, swap=True, ahead=False, eval_tokens=args.eval_tokens, device=args.device
            )
            ahead, read_ahead = switch_times(
                suite, swap=True, ahead=True, eval_tokens=args.eval_tokens, device=args.device
            )
            rss = rss_over_switches(suite, args.switches, device=args.device)
            growth = (max(rss[1:]) - rss[0]) / rss[0]
            rss_ahead = rss_over_switches(suite, args.switches, device=args.device, ahead=True)
            growth_ahead = (max(rss_ahead[1:]) - rss_ahead[0]) / rss_ahead[0]
            mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
            hidden = 1 - read_ahead / read_plain if read_plain > 0 else float("nan")
            print(
                f"{shape}: boot {mean(boot):.3f} s/switch, swap {mean(swap):.3f} s/switch, "
                f"swap+read-ahead {mean(ahead):.3f} s/switch ({len(boot)} switches)"
            )
            print(f"{shape}: reading {read_plain:.3f} s without read-ahead, {read_ahead:.3f} s waited with it")
            print(f"{shape}: rss {rss[0] >> 20} MiB after switch 1, max {max(rss[1:]) >> 20} MiB over {args.switches}")
            print(
                f"{shape}: with read-ahead rss {rss_ahead[0] >> 20} MiB after switch 1, "
                f"max {max(rss_ahead[1:]) >> 20} MiB over {args.switches}"
            )
            results[shape] = (mean(boot) / mean(swap), mean(boot) / mean(ahead), hidden, growth, growth_ahead)
            shutil.rmtree(suite)
        for shape, (speedup, speedup_ahead, hidden, growth, growth_ahead) in results.items():
            print(f"switch_speedup_{shape}: {speedup:.1f}")
            print(f"switch_speedup_read_ahead_{shape}: {speedup_ahead:.1f}")
            print(f"read_hidden_share_{shape}: {hidden:.2f}")
            print(f"rss_growth_over_switches_pct_{shape}: {100 * growth:.1f}")
            print(f"rss_growth_over_switches_read_ahead_pct_{shape}: {100 * growth_ahead:.1f}")
        print(f"load_avg_after={os.getloadavg()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
