"""Benchmark: all-head attention-pattern patching, our engine vs TransformerLens, same process.

For random GPT-NeoX models of the Pythia-70m shape (6 layers x 8 heads, d_model 512) and the
Pythia-160m shape (12 x 12, d_model 768), vocabulary 50304, 32 prompts of 17 tokens, it times

* TransformerLens ``get_act_patch_attn_head_pattern_all_pos`` (one full forward per head),
* ``interp.patching.delta_p_all_heads(method="fast")`` (layer skip, heads stacked along batch),
* ``interp.patching.attribution_delta_p`` (one forward + one backward pre-screen),

checks that the fast values equal the reference (max abs difference, probability units) and
prints the ratios.  Goals (issue 6, item 4a): fast >= 5x, pre-screen >= 15x.

The 160m reference would take ~6 min on one core, so by default it runs on a subset of heads
(``--ref-heads-160m``, spread over all layers) and its all-head time is extrapolated linearly
(one forward per head); the output says so.  Last line: ``speedup_vs_transformer_lens: X``,
the smaller fast-path speedup of the shapes run.

    .venv/bin/python benchmarks/bench_patching.py            # both shapes, ~7 min on 1 core
    .venv/bin/python benchmarks/bench_patching.py --shapes 70m
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd  # noqa: E402
import torch  # noqa: E402

SHAPES = {"70m": (6, 8, 512), "160m": (12, 12, 768)}
VOCAB = 50304


def _byte_tokenizer_dir(path):
    """The project's byte tokenizer, saved into ``path`` and reloaded (a bridge boots from a folder)."""
    from transformers import AutoTokenizer

    from interp.checkpoints import make_byte_tokenizer

    make_byte_tokenizer().save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def random_neox_bridge(shape: str, seed: int, path: str):
    """A randomly initialised GPT-NeoX (Pythia layout: parallel residual, rotary_pct 0.25)."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import GPTNeoXForCausalLM

    from interp.catalogue import neox_config

    n_layers, n_heads, d_model = SHAPES[shape]
    # initializer_range sharper than the 0.02 default: delta_p well above float noise
    cfg = neox_config(d_model, n_layers, n_heads, VOCAB, 2048, initializer_range=0.1)
    torch.manual_seed(seed)
    hf_model = GPTNeoXForCausalLM(cfg).eval()
    cfg.save_pretrained(path)
    tokenizer = _byte_tokenizer_dir(path)
    return TransformerBridge.boot_transformers(path, hf_model=hf_model, tokenizer=tokenizer).eval()


def flop_ceiling(shape: str, batch: int, pos: int) -> float:
    """Reference FLOPs / fast-path FLOPs for this shape (matmuls only): the speedup at equal efficiency.

    Reference: n_layers * n_heads full forwards (every position unembedded).  Fast path: one
    pre-run (answer-only unembed), the tail check (2 copies of the last two blocks), one block for
    the structure check, and per head of layer l: block l+1's query/key/value/MLP-in projections
    from the rank-d_head formula, blocks l+2 .. L-2 in full, the last block's keys and values at
    every position but its query, output projection and MLP at the answer only, and an
    answer-only unembedding.
    """
    n_layers, n_heads, d = SHAPES[shape]
    d_head, tokens = d // n_heads, batch * pos
    mm = lambda rows, d_in, d_out: 2 * rows * d_in * d_out  # noqa: E731
    scores = 2 * 2 * tokens * pos * d  # q k^T and pattern @ v
    block = mm(tokens, d, 3 * d) + mm(tokens, d, d) + mm(tokens, d, 4 * d) + mm(tokens, 4 * d, d) + scores
    low_rank_block = mm(tokens, d_head, 7 * d) + mm(tokens, d, d) + mm(tokens, 4 * d, d) + scores
    last_block = mm(tokens, d, 2 * d) + mm(batch, d, 2 * d) + mm(batch, d, 8 * d) + scores
    low_rank_last = mm(tokens, d_head, 3 * d) + mm(batch, d, d) + mm(batch, d, 8 * d) + scores
    unembed_answer = mm(batch, d, VOCAB)
    reference = n_layers * n_heads * (n_layers * block + mm(tokens, d, VOCAB))
    fast = n_layers * block + unembed_answer + 2 * (block + last_block) + block
    for layer in range(n_layers):
        if layer <= n_layers - 3:
            tail = low_rank_block + (n_layers - 3 - layer) * block + last_block
        else:
            tail = low_rank_last if layer == n_layers - 2 else 0
        fast += n_heads * (tail + unembed_answer)
    return reference / fast


def _timed(fn, repeats: int = 1):
    """``(fn(), wall seconds, process CPU seconds)``, each time the best of ``repeats`` calls.

    Best-of-N on both sides of every ratio: on a shared machine the noise only ever adds time.
    """
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return out, min(walls), min(cpus)


def bench_shape(shape: str, batch: int, pos: int, ref_heads: int | None, repeats: int) -> dict:
    from transformer_lens import ActivationCache
    from transformer_lens.patching import (
        generic_activation_patch,
        get_act_patch_attn_head_pattern_all_pos,
        layer_head_pattern_patch_setter,
    )

    from interp.patching import (
        PatchingInputs,
        answer_prob,
        attribution_delta_p,
        cache_patterns,
        delta_p_all_heads,
    )

    n_layers, n_heads, _ = SHAPES[shape]
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (batch, pos), generator=gen)
    with tempfile.TemporaryDirectory() as tmp:
        post = random_neox_bridge(shape, 1, tmp)
        patterns = cache_patterns(post, tokens)
        with torch.inference_mode():
            answers = post(tokens)[:, -1].argmax(-1)
        del post
        model = random_neox_bridge(shape, 0, tmp)
    inputs = PatchingInputs(tokens, answers, torch.full((batch,), pos - 1))

    # Reference: TransformerLens, one forward per head (baseline forward not timed).
    with torch.inference_mode():
        p_pre = answer_prob(model(tokens), inputs).mean()
    cache = ActivationCache({f"blocks.{l}.attn.hook_pattern": patterns[l] for l in range(n_layers)}, model)

    def metric(logits):
        return answer_prob(logits, inputs).mean() - p_pre

    all_pairs = [(l, h) for l in range(n_layers) for h in range(n_heads)]
    if ref_heads is None or ref_heads >= len(all_pairs):
        pairs = all_pairs
        with torch.inference_mode():
            ref, t_ref, c_ref = _timed(lambda: get_act_patch_attn_head_pattern_all_pos(model, tokens, cache, metric),
                                      repeats)
        ref = ref.flatten()
    else:  # evenly spread subset, extrapolated linearly (one forward per head)
        step = len(all_pairs) / ref_heads
        pairs = [all_pairs[int(i * step)] for i in range(ref_heads)]
        index_df = pd.DataFrame(pairs, columns=["layer", "head_index"])
        with torch.inference_mode():
            ref, t_sub, c_sub = _timed(lambda: generic_activation_patch(
                model, tokens, cache, metric, patch_setter=layer_head_pattern_patch_setter,
                activation_name="pattern", index_df=index_df), repeats)
        t_ref = t_sub * len(all_pairs) / len(pairs)
        c_ref = c_sub * len(all_pairs) / len(pairs)

    fast, t_fast, c_fast = _timed(lambda: delta_p_all_heads(model, inputs, patterns, method="fast"), repeats)
    _, t_attr, c_attr = _timed(lambda: attribution_delta_p(model, inputs, patterns), repeats)
    fast_sel = torch.stack([fast[l, h] for l, h in pairs])
    return dict(shape=shape, heads=len(all_pairs), ref_heads_run=len(pairs), t_ref=t_ref, t_fast=t_fast,
                t_attr=t_attr, c_ref=c_ref, c_fast=c_fast, c_attr=c_attr, max_abs_diff=float((fast_sel - ref.cpu()).abs().max()),
                max_abs_delta_p=float(fast.abs().max()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="70m,160m")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--pos", type=int, default=17)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2, help="time each method this many times, keep the best")
    parser.add_argument("--ref-heads-160m", type=int, default=12,
                        help="heads of the 160m reference actually run (0 = all 144)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    speedups = []
    for shape in args.shapes.split(","):
        ref_heads = None if shape == "70m" or args.ref_heads_160m <= 0 else args.ref_heads_160m
        r = bench_shape(shape, args.batch, args.pos, ref_heads, args.repeats)
        extrap = "" if r["ref_heads_run"] == r["heads"] else \
            f" (extrapolated from {r['ref_heads_run']} of {r['heads']} heads, one forward per head)"
        s_fast, s_attr = r["c_ref"] / r["c_fast"], r["c_ref"] / r["c_attr"]
        speedups.append(s_fast)
        print(f"[{shape}] {r['heads']} heads, {args.batch} prompts x {args.pos} tokens, {args.threads} thread(s); "
              f"seconds = process CPU time (wall-clock in brackets), best of {args.repeats}")
        print(f"[{shape}] transformer_lens all heads: {r['c_ref']:7.2f} s [{r['t_ref']:.2f}]{extrap}")
        print(f"[{shape}] fast (layer skip):          {r['c_fast']:7.2f} s [{r['t_fast']:.2f}] -> {s_fast:.1f}x "
              f"(wall {r['t_ref'] / r['t_fast']:.1f}x; goal >= 5x)")
        print(f"[{shape}] attribution pre-screen:     {r['c_attr']:7.2f} s [{r['t_attr']:.2f}] -> {s_attr:.1f}x "
              f"(wall {r['t_ref'] / r['t_attr']:.1f}x; goal >= 15x)")
        print(f"[{shape}] FLOP ratio reference / fast path (the speedup at equal matmul efficiency): "
              f"{flop_ceiling(shape, args.batch, args.pos):.1f}x")
        print(f"[{shape}] max |fast - reference| = {r['max_abs_diff']:.2e} (max |delta_p| {r['max_abs_delta_p']:.2e})")
        print(f"{shape}_speedup_fast: {s_fast:.2f}")
        print(f"{shape}_speedup_prescreen: {s_attr:.2f}")
    print("(speedups are CPU-time ratios: equal to wall-clock ratios on an idle machine, and robust when other "
          "processes share the cores; last line: the smaller fast-path speedup over the shapes run)")
    print(f"speedup_vs_transformer_lens: {min(speedups):.2f}")


if __name__ == "__main__":
    main()
