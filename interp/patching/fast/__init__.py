"""The fast path: layer skip, patches stacked along the batch, exact shortcuts.

A patch whose first patched component sits in layer ``l`` leaves layers ``< l`` unchanged, so
one forward of the pre checkpoint caches each block's input and output, the attention
activations and the arguments the model hands every block (attention mask, rotary tables,
position ids); its logits are computed at the answer positions only (``logits_to_keep``).
Then, per layer ``l`` and kind of patch:

* every per-head target at layer ``l`` (pattern, q, k, v, z, QK weights, OV weights, a path
  into the head) changes only that head's output at layer ``l`` given the cached input of
  layer ``l``.  One call of block ``l`` with the change applied to *all* of its heads gives each
  head's new ``z`` (heads do not interact inside a layer), and head ``h``'s patched attention
  output is the cached one plus ``delta_h = a_h @ B_h`` (``a = z_new - z_pre``, ``B = W_O``; OV
  weights: ``a = [z_new, z_pre]``, ``B = [W_O_post; -W_O_pre]``).  The same call checks the
  reconstruction: cached block output plus every head's ``delta`` must equal the block's output.
  Once one block passed that check, patterns, values and head outputs skip the call: ``z_new``
  is the post ``z``, ``pattern_post @ v`` from the cached ``hook_v``, or ``pattern_pre @ v_post``
  (if that formula rebuilds the cached ``z``).  An MLP-output patch is ``mlp_post - mlp_pre``.
* the residual streams of a layer's patches are stacked along the batch (one copy of the
  prompts per patch, chunked to ``memory_budget_mb``) and only blocks ``l+1 ... n_layers-1`` run,
  by calling the bridge's own block modules; patched heads of later layers (activation kinds)
  are patched there by hooks;
* block ``l+1``'s query, key, value and MLP-in projections come from a rank-``r`` formula when
  the blocks have a parallel residual (``_LowRankProjections``, checked against the module on
  first use);
* the last block's keys and values run at every position but its query and output
  projections, its MLP and the unembedding at the answer position only (the metric reads
  nothing else); on a CPU the answer rows of several chunks are unembedded together
  (``_PendingUnembedding``).
* while the engine computes, element-wise modules take a faster form of the same function
  (``_shortcuts``, each checked against the module on first use): GPT-2's tanh GELU as one
  kernel instead of seven element-wise passes, and the bridge's norms as the module they wrap
  (the bridge otherwise normalises once more for its unhooked ``hook_scale`` /
  ``hook_normalized``).  The pre-run keeps the model's own modules, so the tail check below
  compares the swapped tail with the model itself.

Where the time goes (torch.profiler, CPU, 1 thread, OLMo-2 70m shape, 32 prompts x 17 tokens,
every head's ``z`` patched): ~57 % the matmuls of stacked copies (blocks ``l+1 .. n_layers-2``,
the own MLP's down projection, the last block's keys and values), ~20 % the answer-only
unembedding and softmax, ~10 % the one-copy matmuls of the pre-run, the checks and the
low-rank tables; the rest element-wise (rotary, norms, SwiGLU).  Counting matmul FLOPs,
TransformerLens's one full forward per head does ~4.3x the work of this layout on that shape,
the ceiling of the speedup at equal matmul efficiency.  Before the shortcuts, GPT-2's
seven-pass GELU alone took ~13 % of its fast path.  Chunks: ``CPU_CHUNK_TOKENS`` rows per
stacked call, half for a gated MLP (``cpu_chunk_tokens``).

Run-time checks against the model's own forward guard the shortcuts (the block-``l``
reconstruction above; the last two blocks called on stacked copies must reproduce the model's
metric).  If one fails, ``FastPathUnsupported`` tells the caller (``interp.patching.engine``)
to use full forwards.

Architecture-specific parts (how a block combines its attention and MLP, the answer-only last
block) are one class per block layout (``layouts``): ``ParallelEngine`` (GPT-NeoX: the MLP reads
the block input), ``SequentialEngine`` (GPT-2, Llama: the MLP reruns on the patched stream) and
``PostNormEngine`` (OLMo-2's output norms ``ln1_post``/``ln2_post``, through which a head's change
passes before it reaches the stream); ``LayerSkipEngine(model, ...)`` picks one
(``layout_class``: the layout whose ``fits(model)`` holds). In a sequential block a one-head
patch reaches its own MLP input first, a rank-``d_head`` change of a normalised stream, so those
projections take the low-rank formula too (``_own_mlp_low_rank``); the last block's MLP runs at the answer positions only. Where queries
and keys are normalised over all heads together (OLMo-2), kinds marked ``through_qk_norm`` in the
kinds table (q, k, QK weights, paths) move every head of the layer and go to the reference path
(``heads_mixing_kinds``).

The package: ``plan`` (which targets the engine computes, chunk sizes), ``modules`` (calling
blocks, swapped forwards, shortcuts, low-rank projections), ``changes`` (the per-unit changes of
block ``l``; ``Z_SHORTCUTS``), ``engine`` (the shared machinery: pre-run, tail, unembedding),
``layouts`` (one class per block layout, each registering itself with the engine, which imports
none of them). Every fact about a patch kind comes from :mod:`interp.patching.kinds`.
"""

from interp.patching._forward import query_mask, replace_hook
from interp.patching.fast.changes import Z_SHORTCUTS
from interp.patching.fast.engine import LayerSkipEngine
from interp.patching.fast.layouts import ParallelEngine, PostNormEngine, SequentialEngine, layout_class
from interp.patching.fast.plan import (
    CPU_CHUNK_TOKENS,
    CPU_UNEMBED_ROWS,
    FastPathUnsupported,
    Unit,
    bytes_per_copy,
    chunk_size,
    cpu_chunk_tokens,
    fast_path_applies,
    heads_mixing_kinds,
    target_units,
)

__all__ = [
    "CPU_CHUNK_TOKENS",
    "CPU_UNEMBED_ROWS",
    "Z_SHORTCUTS",
    "FastPathUnsupported",
    "LayerSkipEngine",
    "ParallelEngine",
    "PostNormEngine",
    "SequentialEngine",
    "Unit",
    "bytes_per_copy",
    "chunk_size",
    "cpu_chunk_tokens",
    "fast_path_applies",
    "heads_mixing_kinds",
    "layout_class",
    "query_mask",
    "replace_hook",
    "target_units",
]
