"""Benchmark: per-head patching of every activation target, our engine vs TransformerLens, same process.

For random GPT-NeoX models of the Pythia-70m shape (6 layers x 8 heads, d_model 512; the
default) and the Pythia-160m shape (12 x 12, d_model 768), vocabulary 50304, 32 prompts of 17
tokens, it times, for each activation target (pattern, q, k, v, z):

* TransformerLens ``get_act_patch_attn_head_{pattern,q,k,v,out}_all_pos`` (one full forward per head),
* ``interp.patching.per_head_delta(kind)`` (layer skip, heads stacked along the batch),

and for patterns the attribution pre-screen (``attribution_delta_p``, 1 and 2 gradient points per layer);
checks that the fast values equal the reference (max abs difference, probability units) and
prints the ratios.  Goals: every target >= 4x on the 70m shape, patterns >= 5x.

``--shapes gpt2-70m,olmo2-70m``: the same 70m shape as sequential-residual GPT-2 and OLMo-2
models (goal >= 4x). On OLMo-2, queries and keys are normalised over all heads together, so q
and k patches take the reference path there (``heads_mixing_kinds``): run ``--kinds pattern,v,z``.
Measured idle, best of 2 (pattern / v / z): GPT-2 4.70x / 4.72x / 4.69x, OLMo-2 4.04x / 4.16x /
4.25x (single runs, idle and shared: GPT-2 4.4-4.95x, OLMo-2 3.97-4.34x; docs/guide.md); before
the one-kernel GELU, unhooked norms, value shortcut, gated-MLP chunks and pooled unembedding,
3.6-4.0x and 3.6-4.2x.  GPT-NeoX patterns: 5.4x.
Counting matmul FLOPs, OLMo-2's ceiling at equal matmul efficiency is ~4.3x, so its ratios sit
within the +-0.3 noise of that ceiling.

The 160m reference would take ~6 min on one core, so by default it runs on a subset of heads
(``--ref-heads-160m``, spread over all layers) and its all-head time is extrapolated linearly
(one forward per head); the output says so.  Last line: ``speedup_vs_transformer_lens: X``,
the smallest fast-path speedup of the targets and shapes run.

    .venv/bin/python benchmarks/bench_patching.py                 # 70m shape, 5 targets, ~3 min on 1 core
    .venv/bin/python benchmarks/bench_patching.py --shapes 70m,160m --kinds pattern --repeats 2
    .venv/bin/python benchmarks/bench_patching.py --shapes gpt2-70m,olmo2-70m --kinds pattern,v,z
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pandas as pd
import torch

SHAPES = {
    "70m": (6, 8, 512),
    "160m": (12, 12, 768),
    "410m": (24, 16, 1024),
    "gpt2-70m": (6, 8, 512),
    "olmo2-70m": (6, 8, 512),
}
#: Where the models run (``--device``); on CUDA ratios are wall-clock (CPU time does not count the GPU).
DEVICE = "cpu"
#: sequential-residual families at the 70m shape: GPT-2 (pre-LayerNorm, GELU MLP 4 x d_model) and
#: OLMo-2 (RMSNorm after attention and MLP, QK-norm over all heads, SwiGLU MLP 4 x d_model as in
#: OLMo-2-1B); every other shape is GPT-NeoX
FAMILIES = {"gpt2-70m": "gpt2", "olmo2-70m": "olmo2"}
VOCAB = 50304


def _byte_tokenizer_dir(path):
    """The project's byte tokenizer, saved into ``path`` and reloaded (a bridge boots from a folder)."""
    from transformers import AutoTokenizer

    from interp.sources import make_byte_tokenizer

    make_byte_tokenizer().save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def random_neox_bridge(shape: str, seed: int, path: str):
    """A randomly initialised GPT-NeoX (Pythia layout: parallel residual, rotary_pct 0.25)."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    n_layers, n_heads, d_model = SHAPES[shape]
    # initializer_range sharper than the 0.02 default: delta_p well above float noise
    cfg = neox_config(d_model, n_layers, n_heads, VOCAB, 2048, initializer_range=0.1)
    torch.manual_seed(seed)
    hf_model = GPTNeoXForCausalLM(cfg).eval()
    cfg.save_pretrained(path)
    tokenizer = _byte_tokenizer_dir(path)
    return TransformerBridge.boot_transformers(path, hf_model=hf_model, tokenizer=tokenizer).eval()


def random_bridge(shape: str, seed: int, path: str):
    """A randomly initialised model of ``shape``'s family (GPT-NeoX unless listed in FAMILIES)."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import GPT2Config, GPT2LMHeadModel, Olmo2Config, Olmo2ForCausalLM

    family = FAMILIES.get(shape, "neox")
    if family == "neox":
        return random_neox_bridge(shape, seed, path)
    n_layers, n_heads, d_model = SHAPES[shape]
    torch.manual_seed(seed)
    if family == "gpt2":
        hf_model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=VOCAB,
                n_embd=d_model,
                n_layer=n_layers,
                n_head=n_heads,
                n_positions=2048,
                initializer_range=0.1,
            )
        ).eval()
    else:
        hf_model = Olmo2ForCausalLM(
            Olmo2Config(
                vocab_size=VOCAB,
                hidden_size=d_model,
                num_hidden_layers=n_layers,
                num_attention_heads=n_heads,
                num_key_value_heads=n_heads,
                intermediate_size=4 * d_model,
                max_position_embeddings=2048,
                initializer_range=0.1,
                tie_word_embeddings=False,
            )
        ).eval()
    hf_model.save_pretrained(path)
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
        if DEVICE.startswith("cuda"):
            torch.cuda.synchronize()
        start, cpu = time.perf_counter(), time.process_time()
        out = fn()
        if DEVICE.startswith("cuda"):
            torch.cuda.synchronize()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return out, min(walls), min(cpus)


KINDS = ("pattern", "q", "k", "v", "z")


def _tl_all_pos(kind: str):
    from transformer_lens import patching as tlp

    return {
        "pattern": tlp.get_act_patch_attn_head_pattern_all_pos,
        "q": tlp.get_act_patch_attn_head_q_all_pos,
        "k": tlp.get_act_patch_attn_head_k_all_pos,
        "v": tlp.get_act_patch_attn_head_v_all_pos,
        "z": tlp.get_act_patch_attn_head_out_all_pos,
    }[kind]


def bench_shape(shape: str, batch: int, pos: int, ref_heads: int | None, repeats: int, kinds=KINDS) -> list[dict]:
    """One row per activation kind: TransformerLens's all-position patch vs ``per_head_delta``."""
    from transformer_lens import ActivationCache
    from transformer_lens.patching import (
        generic_activation_patch,
        layer_head_pattern_patch_setter,
        layer_head_vector_patch_setter,
    )

    from interp.patching import (
        TaskBatch,
        answer_probability,
        attribution_delta_p,
        capture_post,
        per_head_delta,
    )
    from interp.patching.targets import hook_name

    n_layers, n_heads, _ = SHAPES[shape]
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (batch, pos), generator=gen).to(DEVICE)
    with tempfile.TemporaryDirectory() as tmp:
        post_model = random_bridge(shape, 1, tmp).to(DEVICE)
        with torch.inference_mode():
            answers = post_model(tokens)[:, -1].argmax(-1)
        inputs = TaskBatch(tokens, answers, torch.full((batch,), pos - 1, device=tokens.device))
        post = capture_post(post_model, inputs, weights=False)
        del post_model
        model = random_bridge(shape, 0, tmp).to(DEVICE)
    rows_of = torch.arange(batch, device=tokens.device)
    with torch.inference_mode():
        p_pre = answer_probability(model(tokens)[rows_of, inputs.answer_pos], inputs).mean()

    def metric(logits):
        return answer_probability(logits[rows_of, inputs.answer_pos], inputs).mean() - p_pre

    all_pairs = [(l, h) for l in range(n_layers) for h in range(n_heads)]
    results = []
    for kind in kinds:
        cache = ActivationCache({hook_name(kind, l): post.activation(kind, l) for l in range(n_layers)}, model)
        if ref_heads is None or ref_heads >= len(all_pairs):
            pairs = all_pairs
            with torch.inference_mode():
                ref, t_ref, c_ref = _timed(lambda: _tl_all_pos(kind)(model, tokens, cache, metric), repeats)  # noqa: B023
            ref = ref.flatten()
        else:  # evenly spread subset, extrapolated linearly (one forward per head)
            step = len(all_pairs) / ref_heads
            pairs = [all_pairs[int(i * step)] for i in range(ref_heads)]
            setter = layer_head_pattern_patch_setter if kind == "pattern" else layer_head_vector_patch_setter
            index_df = pd.DataFrame(pairs, columns=["layer", "head_index" if kind == "pattern" else "head"])
            with torch.inference_mode():
                ref, t_sub, c_sub = _timed(
                    functools.partial(
                        generic_activation_patch,
                        model,
                        tokens,
                        cache,
                        metric,
                        patch_setter=setter,
                        activation_name=kind,
                        index_df=index_df,
                    ),
                    repeats,
                )
            t_ref = t_sub * len(all_pairs) / len(pairs)
            c_ref = c_sub * len(all_pairs) / len(pairs)
        fast, t_fast, c_fast = _timed(lambda: per_head_delta(model, post, inputs, kind), repeats)  # noqa: B023
        fast_sel = torch.stack([fast[l, h] for l, h in pairs])
        row = dict(
            shape=shape,
            kind=kind,
            heads=len(all_pairs),
            ref_heads_run=len(pairs),
            t_ref=t_ref,
            t_fast=t_fast,
            c_ref=c_ref,
            c_fast=c_fast,
            max_abs_diff=float((fast_sel.cpu() - ref.cpu()).abs().max()),
            max_abs_delta_p=float(fast.abs().max()),
        )
        if kind == "pattern":
            patterns = torch.stack([post.activation("pattern", l) for l in range(n_layers)])
            for steps in (1, 2):
                _, t_attr, c_attr = _timed(lambda: attribution_delta_p(model, inputs, patterns, steps=steps), repeats)  # noqa: B023
                row[f"t_attr{steps}"], row[f"c_attr{steps}"] = t_attr, c_attr
        results.append(row)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="70m")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--pos", type=int, default=17)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1, help="time each method this many times, keep the best")
    parser.add_argument(
        "--ref-heads-160m", type=int, default=12, help="heads of the 160m / 410m reference actually run (0 = all)"
    )
    parser.add_argument("--device", default="cpu", help="cpu or cuda (ratios are then wall-clock)")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    torch.set_num_threads(args.threads)
    speedups = []
    for shape in args.shapes.split(","):
        ref_heads = args.ref_heads_160m if shape in ("160m", "410m") and args.ref_heads_160m > 0 else None
        print(
            f"[{shape}] {SHAPES[shape][0] * SHAPES[shape][1]} heads, {args.batch} prompts x {args.pos} tokens, "
            f"{args.threads} thread(s); seconds = process CPU time (wall-clock in brackets), best of {args.repeats}"
        )
        for r in bench_shape(shape, args.batch, args.pos, ref_heads, args.repeats, args.kinds.split(",")):
            extrap = (
                ""
                if r["ref_heads_run"] == r["heads"]
                else f" (extrapolated from {r['ref_heads_run']} of {r['heads']} heads)"
            )
            s_fast = r["t_ref"] / r["t_fast"] if DEVICE.startswith("cuda") else r["c_ref"] / r["c_fast"]
            speedups.append(s_fast)
            goal = 5 if r["kind"] == "pattern" and shape in ("70m", "160m") else 4
            print(
                f"[{shape}] {r['kind']:>7}: transformer_lens {r['c_ref']:7.2f} s [{r['t_ref']:.2f}]{extrap}; "
                f"fast {r['c_fast']:6.2f} s [{r['t_fast']:.2f}] -> {s_fast:.1f}x (goal >= {goal}x); "
                f"max |fast - reference| {r['max_abs_diff']:.1e} (max |delta_p| {r['max_abs_delta_p']:.1e})"
            )
            print(f"{shape}_{r['kind']}_speedup_fast: {s_fast:.2f}")
            for steps in (1, 2):
                if f"c_attr{steps}" in r:
                    print(
                        f"[{shape}] pre-screen, {steps} gradient point(s): {r[f'c_attr{steps}']:.2f} s -> "
                        f"{r['c_ref'] / r[f'c_attr{steps}']:.1f}x vs the pattern reference"
                    )
        if shape in ("70m", "160m") and "pattern" in args.kinds:
            print(
                f"[{shape}] FLOP ratio reference / fast path for patterns (the speedup at equal matmul "
                f"efficiency): {flop_ceiling(shape, args.batch, args.pos):.1f}x"
            )
    print(
        "(speedups are CPU-time ratios: equal to wall-clock ratios on an idle machine, and robust when other "
        "processes share the cores; last line: the smallest fast-path speedup over the targets run)"
    )
    print(f"speedup_vs_transformer_lens: {min(speedups):.2f}")


if __name__ == "__main__":
    main()
