"""Attention-pattern patching engine: per-head and joint ``hook_pattern`` patches, exact and fast.

The experiment (Baherwani et al. 2026, the head-patching analysis; see ``docs/results.md``):
run the *pre* checkpoint (before the point of emergence) with one head's
``blocks.{l}.attn.hook_pattern`` replaced, at every query position, by the *post* checkpoint's
pattern on the same prompts, and measure the change of the mean probability of the answer,
``delta_p = mean p_patched(answer) - mean p_pre(answer)`` (probability units).

Two exact methods give the same numbers (tests check 1e-5):

``method="reference"``
    ``transformer_lens.patching.get_act_patch_attn_head_pattern_all_pos``: one full forward of
    the pre checkpoint per (layer, head).

``method="fast"`` (layer skip, batched heads)
    A patch at layer ``l`` leaves layers ``< l`` unchanged, so one forward of the pre checkpoint
    caches each block's input and output, ``hook_v``, ``hook_z``, ``hook_pattern`` and the
    arguments the model hands every block (attention mask, rotary tables, position ids); its
    logits are computed at the answer positions only (``logits_to_keep``).  Then, per layer ``l``:

    * every head's post-pattern ``z`` is ``pattern_post @ v`` from the cache (the same formula
      must rebuild the cached ``z``), and head ``h``'s patched attention output is the cached
      one plus ``(z_post - z_pre)[h] @ W_O[h]`` (the attention output is linear in each head's
      pattern): no attention is recomputed per patch, and a parallel-residual block (GPT-NeoX)
      needs no MLP either (a sequential block reruns its MLP);
    * the residual streams of all of layer ``l``'s head patches are stacked along the batch
      (one copy of the prompts per head, chunked to ``memory_budget_mb``) and only blocks
      ``l+1 ... n_layers-1`` run, by calling the bridge's own block modules;
    * block ``l+1``'s query, key, value and MLP-in projections come from a rank-``d_head``
      formula when the blocks have a parallel residual: the stream entering block ``l+1`` is the
      cached one plus ``(z_post - z_pre)[h] @ W_O[h]``, and a linear map of a LayerNorm of it is
      ``(A + dz_h @ M_h) / s + c`` with ``A``, ``M_h``, ``c`` computed once per layer and ``s``
      the per-position norm scale (``_LowRankProjections``; each projection is checked against
      the module itself on first use and the module's own forward used if they differ);
    * the last block's keys and values run at every position but its query and output
      projections, its MLP and the unembedding at the answer position only (the metric reads
      nothing else; with a 50k vocabulary the unembedding is most of a forward).

    Ranking all heads costs a little under ``n_layers * n_heads / 2`` transformer-layer forwards
    plus one answer-only unembedding per head, in ``n_layers`` calls.  Run-time checks against the
    model's own forward guard the shortcuts: block ``l`` itself, run once with every head
    patched, must equal the reconstruction; the last two blocks called on stacked copies must
    reproduce the model's p(answer).  If a check fails (an architecture whose block is not
    ``x + attn + mlp``, or whose blocks cannot be called alone) the engine warns and falls back
    to batched *full* forwards with ``run_with_hooks`` (all patches of a chunk stacked along the
    batch), which is exact for any architecture whose attention applies ``hook_pattern``.

``attribution_delta_p`` is the cheap pre-screen: attribution patching (Nanda 2023, "Attribution
patching: activation patching at industrial scale"; Syed et al. 2023, arXiv:2310.10348), a
first-order Taylor estimate ``sum grad_pattern p(answer) * (pattern_post - pattern_pre)`` from one
forward and one backward pass.

Device: everything runs on the model's device (chosen once, by whoever moved the model); the hot
loop keeps results on that device and moves them to the CPU once at the end.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

__all__ = [
    "PatchingInputs",
    "answer_prob",
    "cache_patterns",
    "mean_answer_prob",
    "patch_heads",
    "patch_head_sets",
    "delta_p_all_heads",
    "attribution_delta_p",
]

# Tolerances of the run-time checks of the fast path against the model's own forward.
_P_CHECK_ATOL = 1e-5  # probability units, as the acceptance test of the engine
_RESID_CHECK_RTOL = 1e-4  # relative to the residual stream's largest entry
# On a CPU, stacked copies beyond ~2k token rows per call only add cache and allocator misses:
# 4 copies of 32 x 17 tokens ran 6-10 % faster than 8-12 on the benchmark shapes.  (GPUs: the
# memory budget alone sets the chunk.)
_CPU_CHUNK_TOKENS = 2048


@dataclass(frozen=True)
class PatchingInputs:
    """The prompts and answers every patching run shares.

    Attributes:
        tokens: ``Int[Tensor, "batch pos"]`` prompt token ids (no padding: every prompt of a
            batch has the same length, so positions line up across checkpoints).
        answers: ``Int[Tensor, "batch"]`` the answer token id of each prompt.
        answer_pos: ``Int[Tensor, "batch"]`` the position whose next-token logits predict the
            answer (usually ``pos - 1``).

    Raises:
        ValueError: on a shape or range mismatch (one line naming the bad value).
    """

    tokens: Int[Tensor, "batch pos"]
    answers: Int[Tensor, "batch"]
    answer_pos: Int[Tensor, "batch"]

    def __post_init__(self) -> None:
        for name in ("tokens", "answers", "answer_pos"):
            value = getattr(self, name)
            if not isinstance(value, Tensor) or value.is_floating_point() or value.is_complex():
                raise ValueError(f"{name} must be an integer torch.Tensor, got {type(value).__name__}"
                                 f"{'' if not isinstance(value, Tensor) else ' of dtype ' + str(value.dtype)}")
        if self.tokens.ndim != 2 or self.tokens.shape[0] == 0 or self.tokens.shape[1] == 0:
            raise ValueError(f"tokens must be a non-empty [batch, pos] tensor, got shape {tuple(self.tokens.shape)}")
        batch, pos = self.tokens.shape
        for name in ("answers", "answer_pos"):
            if tuple(getattr(self, name).shape) != (batch,):
                raise ValueError(f"{name} must have shape ({batch},) to match tokens "
                                 f"{tuple(self.tokens.shape)}, got {tuple(getattr(self, name).shape)}")
        if bool(((self.answer_pos < 0) | (self.answer_pos >= pos)).any()):
            raise ValueError(f"answer_pos must lie in [0, {pos - 1}], got values "
                             f"{self.answer_pos.min().item()}..{self.answer_pos.max().item()}")

    @property
    def batch(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def pos(self) -> int:
        return int(self.tokens.shape[1])

    def to(self, device: str | torch.device) -> "PatchingInputs":
        """The same inputs on ``device``."""
        return PatchingInputs(self.tokens.to(device), self.answers.to(device), self.answer_pos.to(device))


def _as_inputs(inputs: Any) -> PatchingInputs:
    """Accept a PatchingInputs or anything with ``tokens``/``answers``/``answer_pos`` (a TaskBatch)."""
    if isinstance(inputs, PatchingInputs):
        return inputs
    try:
        return PatchingInputs(inputs.tokens, inputs.answers, inputs.answer_pos)
    except AttributeError:
        raise ValueError(f"inputs must be a PatchingInputs (tokens, answers, answer_pos), "
                         f"got {type(inputs).__name__}") from None


# --------------------------------------------------------------------------- metric


def _prob_of_rows(logits_rows: Float[Tensor, "n d_vocab"], answers: Int[Tensor, "n"]) -> Float[Tensor, "n"]:
    """Softmax probability of ``answers`` under each row of logits, in float32."""
    logp = torch.log_softmax(logits_rows.float(), dim=-1)
    return logp.gather(-1, answers[:, None]).squeeze(-1).exp()


def answer_prob(logits: Float[Tensor, "batch pos d_vocab"], inputs: PatchingInputs) -> Float[Tensor, "batch"]:
    """Probability (softmax, float32) the model gives each prompt's answer at its answer position.

    Args:
        logits: ``Float[Tensor, "batch pos d_vocab"]`` output of the model on ``inputs.tokens``.
        inputs: the prompts; ``answers`` and ``answer_pos`` select one logit row per prompt.

    Returns:
        ``Float[Tensor, "batch"]`` probabilities in [0, 1].

    Raises:
        ValueError: if ``logits`` is not ``[batch, pos, d_vocab]`` for these inputs.
    """
    inputs = _as_inputs(inputs)
    if logits.ndim != 3 or tuple(logits.shape[:2]) != (inputs.batch, inputs.pos):
        raise ValueError(f"logits must have shape [{inputs.batch}, {inputs.pos}, d_vocab], "
                         f"got {tuple(logits.shape)}")
    device = logits.device
    rows = logits[torch.arange(inputs.batch, device=device), inputs.answer_pos.to(device)]
    return _prob_of_rows(rows, inputs.answers.to(device))


# --------------------------------------------------------------------------- model checks


def _model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _pattern_hook_name(layer: int) -> str:
    return f"blocks.{layer}.attn.hook_pattern"


def _heads_shape(model: Any) -> tuple[int, int]:
    """``(n_layers, n_heads)`` of a bridge with attention heads, else a one-line ValueError."""
    cfg = getattr(model, "cfg", None)
    n_layers = int(getattr(cfg, "n_layers", 0) or 0)
    n_heads = int(getattr(cfg, "n_heads", 0) or 0)
    hook_dict = getattr(model, "hook_dict", {})
    if n_layers <= 0 or n_heads <= 0 or any(_pattern_hook_name(l) not in hook_dict for l in range(n_layers)):
        raise ValueError(f"model {type(model).__name__} (n_layers={n_layers}, n_heads={n_heads}) has no "
                         "attention heads with blocks.{l}.attn.hook_pattern; attention-pattern patching "
                         "needs a TransformerBridge of an attention model")
    if getattr(model, "training", False):
        raise ValueError("model is in training mode (dropout would randomise patches); call model.eval() first")
    return n_layers, n_heads


def _check_patterns(model: Any, inputs: PatchingInputs, patterns: Tensor) -> tuple[int, int]:
    n_layers, n_heads = _heads_shape(model)
    expected = (n_layers, inputs.batch, n_heads, inputs.pos, inputs.pos)
    if not isinstance(patterns, Tensor) or tuple(patterns.shape) != expected:
        got = tuple(patterns.shape) if isinstance(patterns, Tensor) else type(patterns).__name__
        raise ValueError(f"patterns must have shape [layer, batch, head, query_pos, key_pos] = {expected} "
                         f"for this model and these prompts (post and pre checkpoints must share "
                         f"n_layers and n_heads), got {got}")
    return n_layers, n_heads


def _heads_to_mask(heads: Sequence[tuple[int, int]], n_layers: int, n_heads: int) -> Bool[Tensor, "layer head"]:
    """CPU mask of the given heads (masks only plan runs, so they stay on the host)."""
    mask = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    for item in heads:
        try:
            layer, head = (int(x) for x in item)
        except (TypeError, ValueError):
            raise ValueError(f"each head must be a (layer, head) pair, got {item!r}") from None
        if not (0 <= layer < n_layers and 0 <= head < n_heads):
            raise ValueError(f"head {(layer, head)} out of range: layer in [0, {n_layers - 1}], "
                             f"head in [0, {n_heads - 1}]")
        mask[layer, head] = True
    return mask


# --------------------------------------------------------------------------- public: plain runs


def cache_patterns(model: Any, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "layer batch head query_pos key_pos"]:
    """Attention patterns (``blocks.{l}.attn.hook_pattern``, post-softmax) of every layer.

    Args:
        model: a ``TransformerBridge`` (typically the post checkpoint) in eval mode.
        tokens: ``Int[Tensor, "batch pos"]`` prompts.

    Returns:
        ``Float[Tensor, "layer batch head query_pos key_pos"]`` on the model's device.

    Raises:
        ValueError: if the model has no attention heads or is in training mode.
    """
    n_layers, _ = _heads_shape(model)
    names = {_pattern_hook_name(l) for l in range(n_layers)}
    with torch.no_grad():  # not inference_mode: callers may use the result under autograd
        _, cache = model.run_with_cache(tokens.to(_model_device(model)), names_filter=lambda n: n in names)
        return torch.stack([cache[_pattern_hook_name(l)].float() for l in range(n_layers)])


def _answer_rows_forward(run: Callable, inputs: PatchingInputs) -> tuple[Float[Tensor, "batch"], Any]:
    """``(p(answer) per prompt, rest)`` of ``run(tokens, **kw)`` computing logits at answer positions only.

    Hugging Face causal LMs accept ``logits_to_keep`` (a 1-D tensor of positions) and then
    unembed only those positions; with a 50k vocabulary that is most of a forward's FLOPs.  A
    model that ignores the argument returns full logits, one that rejects it is rerun without.
    """
    keep = torch.unique(inputs.answer_pos)  # sorted
    try:
        out = run(inputs.tokens, logits_to_keep=keep)
    except TypeError:
        out = run(inputs.tokens)
    logits, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    if logits.shape[1] == inputs.pos:
        return answer_prob(logits, inputs), rest
    if logits.shape[1] != keep.numel():
        raise RuntimeError(f"model returned logits of shape {tuple(logits.shape)} for logits_to_keep={keep.tolist()}")
    rows = logits[torch.arange(inputs.batch, device=logits.device), torch.searchsorted(keep, inputs.answer_pos)]
    return _prob_of_rows(rows, inputs.answers), rest


def mean_answer_prob(model: Any, inputs: PatchingInputs) -> float:
    """Mean over prompts of ``p(answer)`` (probability units) from one forward of ``model``.

    Only the answer positions are unembedded when the model supports ``logits_to_keep``.

    Raises:
        ValueError: on malformed inputs.
    """
    inputs = _as_inputs(inputs).to(_model_device(model))
    with torch.inference_mode():
        p, _ = _answer_rows_forward(model, inputs)
        return float(p.mean())


# --------------------------------------------------------------------------- fast engine


class _FastPathUnsupported(RuntimeError):
    """A run-time check of the layer-skip path failed for this model."""


def _sanitize_call_kwargs(kwargs: dict) -> dict:
    """Kwargs captured from the model's own block call, minus the per-forward KV cache."""
    out = {}
    for key, value in kwargs.items():
        if key in ("past_key_value", "past_key_values", "layer_past") or hasattr(value, "get_seq_length"):
            out[key] = None  # a HF Cache object: it belongs to that one forward
        elif key == "use_cache":
            out[key] = False
        else:
            out[key] = value
    return out


def _call_signature(args: tuple, kwargs: dict) -> tuple[str | None, tuple, dict]:
    """``(hidden-states keyword or None if positional, other args, sanitized kwargs)`` of a captured call."""
    if args:
        return None, tuple(args[1:]), _sanitize_call_kwargs(kwargs)
    if "hidden_states" in kwargs:
        rest = {k: v for k, v in kwargs.items() if k != "hidden_states"}
        return "hidden_states", (), _sanitize_call_kwargs(rest)
    raise _FastPathUnsupported("a block was called without positional or hidden_states= residual stream")


def _repeat_batch(value: Any, batch: int, n_copies: int) -> Any:
    """Repeat every tensor whose leading dim is the prompt batch ``n_copies`` times (copy-major).

    Tensors with a leading dim of 1 broadcast (rotary tables, position ids) and are left alone;
    1-D tensors (cache positions) are never batched.
    """
    if n_copies == 1:
        return value
    if isinstance(value, Tensor):
        if value.ndim >= 2 and value.shape[0] == batch:
            return value.repeat(n_copies, *([1] * (value.ndim - 1)))
        return value
    if isinstance(value, tuple):
        return tuple(_repeat_batch(v, batch, n_copies) for v in value)
    if isinstance(value, list):
        return [_repeat_batch(v, batch, n_copies) for v in value]
    if isinstance(value, dict):
        return {k: _repeat_batch(v, batch, n_copies) for k, v in value.items()}
    return value


def _first(output: Any) -> Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def _pattern_patch_hook(post: Float[Tensor, "batch head q k"], mask: Bool[Tensor, "copies head"]) -> Callable:
    """hook_pattern hook: copy c of the stacked batch gets post patterns on heads ``mask[c]``."""
    select = mask[:, None, :, None, None]

    def hook(pattern: Tensor, hook: Any = None) -> Tensor:
        stacked = pattern.reshape(mask.shape[0], -1, *pattern.shape[1:])
        return torch.where(select, post[None].to(pattern.dtype), stacked).reshape(pattern.shape)

    return hook


def _bytes_per_copy(model: Any, inputs: PatchingInputs, full_logits: bool) -> int:
    """Rough peak activation bytes of one copy of the prompts in a layer-skip (or full) run."""
    cfg = model.cfg
    d_model = int(cfg.d_model)
    d_mlp = int(getattr(cfg, "d_mlp", None) or 4 * d_model)
    n_heads, d_vocab = int(cfg.n_heads), int(cfg.d_vocab)
    batch, pos = inputs.batch, inputs.pos
    per_token = 8 * d_model + 3 * d_mlp + 4 * n_heads * pos
    logits = 3 * d_vocab * (pos if full_logits else 1)
    return 4 * batch * (pos * per_token + logits)


def _chunk_size(model: Any, inputs: PatchingInputs, memory_budget_mb: int, full_logits: bool = False) -> int:
    if not isinstance(memory_budget_mb, (int, float)) or memory_budget_mb <= 0:
        raise ValueError(f"memory_budget_mb must be a positive number of MiB, got {memory_budget_mb!r}")
    return max(1, int(memory_budget_mb * 2**20) // _bytes_per_copy(model, inputs, full_logits))


# --------------------------------------------------------------------------- low-rank input projections


def _norm_affine(norm: torch.nn.Module) -> tuple[bool, Tensor | None, Tensor | None, float] | None:
    """``(centred, gain, bias, eps)`` of a LayerNorm / RMSNorm module (bridge or torch), else None."""
    if isinstance(norm, torch.nn.LayerNorm):
        return True, norm.weight, norm.bias, float(norm.eps)
    if hasattr(norm, "uses_rms_norm") and getattr(norm, "original_component", None) is not None:
        inner = norm.original_component  # a TransformerBridge NormalizationBridge
        weight = getattr(norm, "weight", None)
        if not isinstance(weight, Tensor):
            return None
        rms = bool(norm.uses_rms_norm)
        gain = 1.0 + weight if norm.uses_weight_offset else weight
        eps = getattr(inner, "eps", None) or getattr(inner, "variance_epsilon", None) or \
            getattr(norm.config, "eps", 1e-5)
        return not rms, gain, None if rms else getattr(inner, "bias", None), float(eps)
    return None


@contextlib.contextmanager
def _recording_norm_projections(block: torch.nn.Module) -> Iterator[list[tuple[str, str]]]:
    """Yield a list that, after the block has run once, holds ``(linear, norm)`` submodule names.

    A pair is a ``torch.nn.Linear`` called exactly once, on exactly the output of a norm module
    of the same block (a block's query/key/value and MLP-in projections).
    """
    norm_out: dict[str, Tensor] = {}
    linear_in: dict[str, list] = {}
    handles = []
    for name, module in block.named_modules():
        if _norm_affine(module) is not None:
            handles.append(module.register_forward_hook(
                lambda mod, args, out, name=name: norm_out.__setitem__(name, out)))
        elif isinstance(module, torch.nn.Linear):
            handles.append(module.register_forward_pre_hook(
                lambda mod, args, name=name: linear_in.setdefault(name, []).append(args[0] if args else None)))
    found: list[tuple[str, str]] = []
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()
    for linear, inputs in linear_in.items():
        x = inputs[0] if len(inputs) == 1 else None
        if not isinstance(x, Tensor):
            continue
        # The very tensor first; equal values only as a fallback (hooks may copy), where two norms
        # with equal outputs here have equal parameters, so either one gives the same formula.
        same = [n for n, out in norm_out.items() if out is x] or \
            [n for n, out in norm_out.items() if isinstance(out, Tensor) and out.shape == x.shape and torch.equal(out, x)]
        if same:
            found.append((linear, same[0]))


@contextlib.contextmanager
def _swapped_forward(module: torch.nn.Module, forward: Callable) -> Iterator[None]:
    """Let ``module`` compute with ``forward`` inside the block (hooks on it still run)."""
    previous = module.__dict__.get("forward")
    module.forward = forward
    try:
        yield
    finally:
        if previous is None:
            del module.forward
        else:
            module.forward = previous


def _answer_rows_linear(linear: torch.nn.Linear, rows: Int[Tensor, "n"], pos: Int[Tensor, "n"],
                        shape: tuple[int, int]) -> Callable:
    """``linear``'s forward evaluated at positions ``(rows, pos)`` only, zeros elsewhere.

    For the last block's query and output projections: the metric reads the attention output
    at the answer position alone, and each query position's output depends only on its own
    query, so the other positions' queries (zeros: a uniform pattern) and outputs are never read.
    """
    def forward(inp: Tensor) -> Tensor:
        if inp.ndim != 3 or tuple(inp.shape[:2]) != shape:
            return torch.nn.Linear.forward(linear, inp)
        out = inp.new_zeros(*shape, linear.out_features)
        out[rows, pos] = torch.nn.Linear.forward(linear, inp[rows, pos])
        return out
    return forward


class _LowRankProjections:
    """Norm-fed projections of the block after a one-head patch, without the d_model matmul.

    With a parallel residual (GPT-NeoX), patching head h of block l changes the stream entering
    block l+1 by ``delta_h = dz_h @ W_O[h]`` only (``dz = z_post - z_pre``, rank <= d_head).  A
    linear map ``(W, b)`` read from a LayerNorm ``(g, beta, eps)`` of that stream then splits:

        W ln(base + delta_h) + b = (A + dz_h @ M_h) / s + c
        A   = ((base - mean base) * g) @ W.T          [batch * pos, out]  once per layer
        M_h = ((W_O[h] - its mean over d_model) * g) @ W.T   [d_head, out]   once per layer
        c   = W @ beta + b,    s = sqrt(var(base + delta_h) + eps)   per position

    (RMSNorm: no centring, no beta.)  Each stacked copy then costs ``d_head x out`` per position
    for the query, key, value and MLP-in projections instead of ``d_model x out``: about 7/12
    of a block's matmuls at ``1 / n_heads`` of the price.  The module's own forward is swapped
    for the formula only while ``installed``; its first use is checked against the module on
    one prompt and, if it differs, the module's own forward is used from then on.
    """

    def __init__(self, block: torch.nn.Module, pairs: Sequence[tuple[str, str]],
                 base: Float[Tensor, "batch pos d_model"], W_O: Float[Tensor, "head d_head d_model"],
                 dz: Float[Tensor, "batch pos head d_head"]):
        self.dz = dz.float()
        self.entries: list[tuple[torch.nn.Linear, str, Tensor, Tensor, Tensor]] = []
        self.norms: dict[str, tuple[bool, float]] = {}
        self.broken = False
        self._checked: set[torch.nn.Module] = set()  # projections already compared with the module
        for linear_name, norm_name in pairs:
            linear, affine = block.get_submodule(linear_name), _norm_affine(block.get_submodule(norm_name))
            if not isinstance(linear, torch.nn.Linear) or affine is None or linear.weight.dtype != torch.float32:
                continue  # exactness: float32 weights only (bf16 keeps the module's own rounding)
            centred, gain, beta, eps = affine
            W = linear.weight  # [out, d_model]
            g = torch.ones(W.shape[1], device=W.device) if gain is None else gain.float()
            base_c = base.float() - base.float().mean(-1, keepdim=True) if centred else base.float()
            W_O_c = W_O.float() - W_O.float().mean(-1, keepdim=True) if centred else W_O.float()
            A = ((base_c * g) @ W.T).reshape(-1, W.shape[0])  # [batch * pos, out]
            M = (W_O_c * g) @ W.T
            c = torch.zeros(W.shape[0], device=W.device)
            if beta is not None:
                c = c + W @ beta.float()
            if linear.bias is not None:
                c = c + linear.bias.float()
            self.entries.append((linear, norm_name, A, M, c))
            self.norms[norm_name] = (centred, eps)

    @contextlib.contextmanager
    def installed(self, heads: Int[Tensor, "copies"], stream: Float[Tensor, "rows pos d_model"]) -> Iterator[None]:
        """Swap the projections in for stacked copies of ``stream``; copy ``c`` patched head ``heads[c]``.

        ``heads`` lives on the CPU (read without a device sync); ``stream`` is ``[copies * batch,
        pos, d_model]``, the residual stream entering the block.
        """
        n_copies = heads.numel()
        batch, pos = self.dz.shape[:2]
        heads_list = heads.tolist()
        dz = self.dz[:, :, heads.to(self.dz.device)].permute(2, 0, 1, 3).reshape(n_copies, batch * pos, -1)
        scales: dict[str, Tensor] = {}

        def scale(norm_name: str) -> Tensor:
            if norm_name not in scales:
                centred, eps = self.norms[norm_name]
                x = stream.float()
                var = x.var(-1, unbiased=False, keepdim=True) if centred else x.pow(2).mean(-1, keepdim=True)
                scales[norm_name] = (var + eps).sqrt()
            return scales[norm_name]

        def make_forward(linear: torch.nn.Linear, norm_name: str, A: Tensor, M: Tensor, c: Tensor) -> Callable:
            def forward(inp: Tensor) -> Tensor:
                if self.broken or inp.shape != stream.shape:  # e.g. the last block's answer-only MLP
                    return torch.nn.Linear.forward(linear, inp)
                # One addmm per copy (faster on CPU than a bmm over gathered M), A added in the same call.
                out = torch.empty(n_copies, batch * pos, A.shape[-1], device=A.device)
                for i, head in enumerate(heads_list):
                    torch.addmm(A, dz[i], M[head], out=out[i])
                out = out.view(n_copies * batch, pos, -1).div_(scale(norm_name)).add_(c)
                if linear not in checked:
                    ref = torch.nn.Linear.forward(linear, inp[:1])
                    if float((out[:1] - ref).abs().max()) > _RESID_CHECK_RTOL * max(1.0, float(ref.abs().max())):
                        self.broken = True
                        return torch.nn.Linear.forward(linear, inp)
                    checked.add(linear)
                return out.to(inp.dtype)
            return forward

        checked = self._checked
        with contextlib.ExitStack() as stack:
            for entry in self.entries:
                stack.enter_context(_swapped_forward(entry[0], make_forward(*entry)))
            yield


class _LayerSkipEngine:
    """Cached pre-checkpoint run plus the layer-skip machinery (see the module docstring)."""

    def __init__(self, model: Any, inputs: PatchingInputs, patterns: Tensor):
        self.model = model
        self.n_layers, self.n_heads = _check_patterns(model, inputs, patterns)
        self.device = _model_device(model)
        self.inputs = inputs.to(self.device)
        self.post = patterns.to(self.device, torch.float32)
        self.batch, self.pos = self.inputs.batch, self.inputs.pos
        self._deltas: dict[int, Tensor] = {}
        self._dz: dict[int, Tensor] = {}  # z_post - z_pre per layer, [batch, pos, head, d_head]
        self._norm_pairs: list[tuple[str, str]] = []  # (linear, norm) names inside a block
        self.low_rank_layers: list[int] = []  # blocks whose projections took the low-rank path
        self._structure_checked = False  # set once block l itself confirmed the delta path
        self._pre_run()

    # ---- the one forward of the pre checkpoint
    def _pre_run(self) -> None:
        L = self.n_layers
        self.parallel = bool(getattr(self.model.cfg, "parallel_attn_mlp", False))
        names, optional = set(), set()
        for l in range(L):
            names |= {f"blocks.{l}.hook_in", f"blocks.{l}.hook_out", f"blocks.{l}.attn.hook_z", _pattern_hook_name(l)}
            optional.add(f"blocks.{l}.attn.hook_v")
            if not self.parallel:  # a sequential block's MLP reads resid_pre + attn_out
                names.add(f"blocks.{l}.attn.hook_out")
        block_calls: dict[int, tuple] = {}
        attn_call: dict[str, tuple] = {}
        handles = []
        for l, block in enumerate(self.model.blocks):
            handles.append(block.register_forward_pre_hook(
                lambda mod, args, kwargs, l=l: block_calls.__setitem__(l, (args, kwargs)), with_kwargs=True))
        last = self.model.blocks[L - 1]
        if hasattr(last, "attn"):
            handles.append(last.attn.register_forward_pre_hook(
                lambda mod, args, kwargs: attn_call.__setitem__("last", (args, kwargs)), with_kwargs=True))
        try:
            self.p_pre_rows, (cache,) = _answer_rows_forward(
                lambda tokens, **kw: self.model.run_with_cache(tokens, names_filter=lambda n: n in names or n in optional, **kw),
                self.inputs)
        finally:
            for h in handles:
                h.remove()
        self.p_pre = self.p_pre_rows.mean()
        missing = sorted(n for n in names if n not in cache.keys())
        if missing or len(block_calls) != L or "last" not in attn_call:
            raise _FastPathUnsupported(f"the pre-run did not expose {missing[:3] or 'block/attention calls'}")
        self.resid_pre = [cache[f"blocks.{l}.hook_in"] for l in range(L)]
        self.resid_post = [cache[f"blocks.{l}.hook_out"] for l in range(L)]
        self.attn_out = None if self.parallel else [cache[f"blocks.{l}.attn.hook_out"] for l in range(L)]
        self.z_pre = [cache[f"blocks.{l}.attn.hook_z"] for l in range(L)]
        self.pattern_pre = [cache[_pattern_hook_name(l)] for l in range(L)]
        v_names = [f"blocks.{l}.attn.hook_v" for l in range(L)]
        self.v_pre = [cache[n] for n in v_names] if all(n in cache.keys() for n in v_names) else None
        # Positional args after the hidden states, and kwargs, exactly as the model passed them.
        self.block_args = [_call_signature(*block_calls[l]) for l in range(L)]
        self.attn_args = _call_signature(*attn_call["last"])

    # ---- building blocks of a run
    def _call(self, module: Any, signature: tuple, hidden: Tensor, n_copies: int) -> Tensor:
        """Call ``module`` as the model did, with ``hidden`` as its hidden states, on stacked copies."""
        key, args, kwargs = signature
        args = _repeat_batch(args, self.batch, n_copies)
        kwargs = _repeat_batch(kwargs, self.batch, n_copies)
        if key is None:
            return _first(module(hidden, *args, **kwargs))
        return _first(module(*args, **{**kwargs, key: hidden}))

    def _call_block(self, layer: int, resid: Tensor, n_copies: int) -> Tensor:
        return self._call(self.model.blocks[layer], self.block_args[layer], resid, n_copies)

    def _mlp(self, layer: int, x: Tensor) -> Tensor:
        block = self.model.blocks[layer]
        return _first(block.mlp(_first(block.ln2(x))))

    def _has_mlp(self, layer: int) -> bool:
        block = self.model.blocks[layer]
        return hasattr(block, "mlp") and hasattr(block, "ln2") and not getattr(self.model.cfg, "attn_only", False)

    def _answer_rows(self, n_copies: int) -> tuple[Tensor, Tensor]:
        rows = torch.arange(n_copies * self.batch, device=self.device)
        return rows, self.inputs.answer_pos.repeat(n_copies)

    def _final_block_at_answer(self, resid: Tensor, n_copies: int) -> Float[Tensor, "rows d_model"]:
        """Last block at the answer position only: attention (its keys and values at all positions,
        its query and output projections at the answer), then the MLP."""
        layer = self.n_layers - 1
        block = self.model.blocks[layer]
        rows, pos = self._answer_rows(n_copies)
        with contextlib.ExitStack() as stack:
            for name in ("q", "o"):  # TransformerBridge's names for the query / output projections
                linear = getattr(getattr(block.attn, name, None), "original_component", None)
                if isinstance(linear, torch.nn.Linear) and "forward" not in linear.__dict__:
                    stack.enter_context(_swapped_forward(linear, _answer_rows_linear(
                        linear, rows, pos, (n_copies * self.batch, self.pos))))
            attn = self._call(block.attn, self.attn_args, _first(block.ln1(resid)), n_copies)
        x, a = resid[rows, pos], attn[rows, pos]
        if not self._has_mlp(layer):
            return x + a
        if self.parallel:
            return self._mlp(layer, x[:, None])[:, 0] + a + x
        mid = a + x
        return self._mlp(layer, mid[:, None])[:, 0] + mid

    def _unembed_rows(self, x: Float[Tensor, "rows d_model"]) -> Float[Tensor, "rows d_vocab"]:
        logits = _first(self.model.unembed(_first(self.model.ln_final(x[:, None]))))[:, 0]
        cap = float(getattr(self.model.cfg, "output_logits_soft_cap", 0.0) or 0.0)
        return cap * torch.tanh(logits / cap) if cap > 0 else logits

    def run_tail(self, resid: Tensor, first_block: int, n_copies: int,
                 masks: Bool[Tensor, "copies layer head"] | None = None) -> Float[Tensor, "copies batch"]:
        """p(answer) per copy and prompt, running blocks ``first_block ..`` from ``resid``.

        ``resid`` is the stacked residual stream entering ``first_block`` (``first_block ==
        n_layers`` means it is already the final residual stream).  ``masks[c, j]`` (on the CPU:
        planning reads it without device syncs) are the heads of block ``j`` that copy ``c``
        patches with the post pattern.
        """
        L = self.n_layers
        hooks = []
        if masks is not None:
            for j in range(first_block, L):
                if bool(masks[:, j].any()):
                    mask = masks[:, j].to(self.device, non_blocking=True)
                    hooks.append((_pattern_hook_name(j), _pattern_patch_hook(self.post[j], mask)))
        with self.model.hooks(fwd_hooks=hooks):
            for j in range(first_block, L - 1):
                resid = self._call_block(j, resid, n_copies)
            if first_block <= L - 1:
                x = self._final_block_at_answer(resid, n_copies)
            else:
                rows, pos = self._answer_rows(n_copies)
                x = resid[rows, pos]
        logits = self._unembed_rows(x)
        answers = self.inputs.answers.repeat(n_copies)
        return _prob_of_rows(logits, answers).reshape(n_copies, self.batch)

    # ---- layer l: per-head change of the attention output
    def _z_post_direct(self, layer: int) -> Tensor | None:
        """``z`` with every head on its post pattern, as ``pattern @ v`` from the cached ``hook_v``.

        Returns None unless the same formula rebuilds the cached pre-run ``z`` (checks the
        [batch, pos, kv_head, d_head] layout and the grouped-query head mapping).
        """
        v = self.v_pre[layer] if self.v_pre is not None else None
        z_pre = self.z_pre[layer]
        if v is None or v.ndim != 4 or z_pre.ndim != 4 or v.shape[2] == 0 or self.n_heads % v.shape[2]:
            return None
        v = v.float().repeat_interleave(self.n_heads // v.shape[2], dim=2)  # GQA: kv head of each head
        rebuilt = torch.einsum("bhqk,bkhd->bqhd", self.pattern_pre[layer].float(), v)
        if rebuilt.shape != z_pre.shape or not torch.allclose(rebuilt, z_pre.float(), rtol=1e-4, atol=1e-5):
            return None
        return torch.einsum("bhqk,bkhd->bqhd", self.post[layer], v)

    def head_deltas(self, layer: int) -> Float[Tensor, "head batch pos d_model"]:
        """Change of block ``layer``'s attention output when head h alone is patched (cached).

        ``delta[h] = (z_post - z_pre)[:, :, h] @ W_O[h]``.  The first layer computed (and any
        layer whose ``z`` cannot be rebuilt from ``hook_v``) also runs block ``layer`` itself
        with every head patched, and the reconstruction must equal it.
        """
        if layer in self._deltas:
            return self._deltas[layer]
        block = self.model.blocks[layer]
        everything = torch.ones(1, self.n_heads, dtype=torch.bool, device=self.device)
        z_post = self._z_post_direct(layer)
        out_all = None
        if z_post is None or not self._structure_checked:
            captured: dict[str, Tensor] = {}
            hooks = [(_pattern_hook_name(layer), _pattern_patch_hook(self.post[layer], everything)),
                     (f"blocks.{layer}.attn.hook_z", lambda z, hook: captured.__setitem__("z", z) or z)]
            try:
                with self.model.hooks(fwd_hooks=hooks), _recording_norm_projections(block) as pairs:
                    out_all = self._call_block(layer, self.resid_pre[layer], 1)
                self._norm_pairs = self._norm_pairs or pairs
            except (TypeError, RuntimeError, IndexError) as err:
                raise _FastPathUnsupported(f"block {layer} cannot be called on its own: {err}") from err
            if "z" not in captured:
                raise _FastPathUnsupported(f"block {layer} exposes no hook_z")
            z_post = captured["z"] if z_post is None else z_post
        W_O = getattr(block.attn, "W_O", None)
        if not isinstance(W_O, Tensor) or W_O.ndim != 3:
            raise _FastPathUnsupported(f"block {layer} exposes no W_O [head, d_head, d_model]")
        dz = z_post.float() - self.z_pre[layer].float()
        if dz.ndim != 4 or dz.shape[2] != self.n_heads:
            raise _FastPathUnsupported(f"hook_z of block {layer} has shape {tuple(dz.shape)}, not [batch, pos, head, d_head]")
        pattern_moved = not torch.equal(self.post[layer], self.pattern_pre[layer].float())
        if out_all is not None and pattern_moved and not bool(dz.abs().max() > 0):
            raise ValueError(f"block {layer}'s attention ignores edits of hook_pattern (z is unchanged); "
                             "this architecture's bridge cannot be pattern-patched")
        delta = torch.einsum("bphd,hdm->hbpm", dz, W_O.to(dz.dtype))
        self._deltas[layer], self._dz[layer] = delta, dz
        if out_all is not None:
            # The reconstruction with every head patched must equal the block itself.
            rebuilt = self.start_residual(layer, everything)
            err = float((rebuilt - out_all).abs().max())
            if err > _RESID_CHECK_RTOL * max(1.0, float(out_all.abs().max())):
                del self._deltas[layer], self._dz[layer]
                raise _FastPathUnsupported(f"block {layer} is not x + attn + mlp (reconstruction error {err:.2e})")
            self._structure_checked = True
        return delta

    def start_residual(self, layer: int, head_mask: Bool[Tensor, "copies head"]) -> Float[Tensor, "rows pos d_model"]:
        """Residual stream leaving block ``layer`` with heads ``head_mask[c]`` patched, stacked."""
        delta = torch.einsum("ch,hbpm->cbpm", head_mask.to(self._deltas[layer].dtype), self._deltas[layer])
        n = head_mask.shape[0]
        if not self._has_mlp(layer) or self.parallel:
            # Parallel residual (GPT-NeoX): the MLP reads the block input, unchanged by the patch.
            out = self.resid_post[layer][None] + delta
        else:
            mid = (self.resid_pre[layer] + self.attn_out[layer])[None] + delta
            mid = mid.reshape(n * self.batch, self.pos, -1)
            return self._mlp(layer, mid) + mid
        return out.reshape(n * self.batch, self.pos, -1)

    def check_tail(self) -> None:
        """Blocks called with stacked copies + answer-only head must reproduce the model's p."""
        first = max(0, self.n_layers - 2)
        resid = self.resid_pre[first].repeat(2, 1, 1)
        try:
            p = self.run_tail(resid, first, 2)
        except (TypeError, RuntimeError, IndexError) as err:
            raise _FastPathUnsupported(f"blocks cannot be called on stacked copies: {err}") from err
        err = float((p - self.p_pre_rows[None]).abs().max())
        if err > _P_CHECK_ATOL:
            raise _FastPathUnsupported(f"layer-skip tail differs from the model's forward by {err:.2e} in p")

    def p_of_sets(self, masks: Bool[Tensor, "sets layer head"], chunk: int) -> Float[Tensor, "sets"]:
        """Mean p(answer) for each joint patch ``masks[s]`` (copies grouped by lowest layer)."""
        masks = masks.cpu()  # planning only; each chunk's masks go to the device once
        n_sets = masks.shape[0]
        out = self.p_pre.expand(n_sets).clone()
        any_layer = masks.any(dim=2)  # [sets, layer]
        has_any = any_layer.any(dim=1)
        start = torch.where(has_any, any_layer.float().argmax(dim=1), torch.full_like(has_any, -1, dtype=torch.long))
        for layer in sorted(set(start[has_any].tolist())):
            idx = torch.nonzero(start == layer).flatten()
            self.head_deltas(layer)
            low_rank = self._low_rank(layer, masks[idx])
            for lo in range(0, idx.numel(), chunk):
                sel = idx[lo:lo + chunk]
                m = masks[sel]
                resid = self.start_residual(layer, m[:, layer].to(self.device))
                heads = m[:, layer].float().argmax(dim=1)  # on the CPU: planning only
                with low_rank.installed(heads, resid) if low_rank is not None else contextlib.nullcontext():
                    out[sel.to(self.device)] = self.run_tail(resid, layer + 1, sel.numel(), m).mean(dim=1)
            if low_rank is not None and not low_rank.broken:
                self.low_rank_layers.append(layer + 1)
            del self._deltas[layer], self._dz[layer]  # [head, batch, pos, d_model] per layer: one at a time
        return out

    def _low_rank(self, layer: int, masks: Bool[Tensor, "sets layer head"]) -> _LowRankProjections | None:
        """Low-rank projections for block ``layer + 1`` when every set patches one head of ``layer``.

        Needs the stream entering block ``layer + 1`` to be the cached one plus the head's
        ``delta`` (parallel residual, or no MLP) and at least one norm-fed projection found.
        """
        direct = self.parallel or not self._has_mlp(layer)
        if not (direct and self._norm_pairs and layer + 1 < self.n_layers and bool((masks[:, layer].sum(1) == 1).all())):
            return None
        W_O = self.model.blocks[layer].attn.W_O
        low_rank = _LowRankProjections(self.model.blocks[layer + 1], self._norm_pairs, self.resid_post[layer],
                                       W_O, self._dz[layer])
        return low_rank if low_rank.entries else None


def _p_of_sets_full_forward(model: Any, inputs: PatchingInputs, post: Tensor,
                            masks: Bool[Tensor, "sets layer head"], chunk: int) -> Float[Tensor, "sets"]:
    """Fallback: batched full forwards, every patch of a chunk stacked along the batch."""
    n_sets, n_layers, _ = masks.shape
    masks = masks.cpu()
    out = torch.empty(n_sets, device=inputs.tokens.device)
    for lo in range(0, n_sets, chunk):
        m = masks[lo:lo + chunk]
        n = m.shape[0]
        hooks = [(_pattern_hook_name(l), _pattern_patch_hook(post[l], m[:, l].to(post.device)))
                 for l in range(n_layers) if bool(m[:, l].any())]
        stacked = PatchingInputs(inputs.tokens.repeat(n, 1), inputs.answers.repeat(n), inputs.answer_pos.repeat(n))
        p, _ = _answer_rows_forward(lambda tokens, **kw: model.run_with_hooks(tokens, fwd_hooks=hooks, **kw), stacked)
        out[lo:lo + n] = p.reshape(n, -1).mean(dim=1)
    return out


def _fast_p_of_sets(model: Any, inputs: PatchingInputs, patterns: Tensor,
                    masks: Bool[Tensor, "sets layer head"], memory_budget_mb: int) -> tuple[Tensor, Tensor]:
    """``(p per set, p_pre)`` by the layer-skip engine, or batched full forwards if it fails its checks."""
    with torch.inference_mode():
        try:
            engine = _LayerSkipEngine(model, inputs, patterns)
            engine.check_tail()
            chunk = _chunk_size(model, inputs, memory_budget_mb)
            if engine.device.type == "cpu":
                chunk = min(chunk, max(1, round(_CPU_CHUNK_TOKENS / (inputs.batch * inputs.pos))))
            return engine.p_of_sets(masks, chunk), engine.p_pre
        except _FastPathUnsupported as err:
            warnings.warn(f"layer-skip patching unavailable for this model ({err}); using batched full "
                          "forwards", RuntimeWarning, stacklevel=3)
        device = _model_device(model)
        inputs = inputs.to(device)
        p_pre = _answer_rows_forward(model, inputs)[0].mean()
        chunk = _chunk_size(model, inputs, memory_budget_mb, full_logits=True)
        return _p_of_sets_full_forward(model, inputs, patterns.to(device, torch.float32), masks, chunk), p_pre


# --------------------------------------------------------------------------- public: patching


def patch_head_sets(model: Any, inputs: PatchingInputs, patterns: Float[Tensor, "layer batch head q k"],
                    head_sets: Sequence[Sequence[tuple[int, int]]], memory_budget_mb: int = 1024) -> Float[Tensor, "sets"]:
    """Mean p(answer) of the pre checkpoint with each set of heads jointly patched.

    Each set's heads get the post checkpoint's ``hook_pattern`` at all query positions (the
    joint top-K patch of the head-ranking analysis).  All sets run stacked along the batch,
    starting each at the lowest patched layer (layer-skip engine; exact).

    Args:
        model: pre-checkpoint ``TransformerBridge`` in eval mode.
        inputs: prompts and answers.
        patterns: the post checkpoint's patterns, from ``cache_patterns``.
        head_sets: a sequence of sets of ``(layer, head)``; an empty set gives the unpatched p.
        memory_budget_mb: activation memory per stacked chunk, MiB.

    Returns:
        ``Float[Tensor, "sets"]`` mean p(answer) per set (probability units, CPU).

    Raises:
        ValueError: no attention heads, pattern shape mismatch, a head out of range, bad budget.
    """
    inputs = _as_inputs(inputs)
    n_layers, n_heads = _check_patterns(model, inputs, patterns)
    masks = torch.stack([_heads_to_mask(s, n_layers, n_heads) for s in head_sets]) if len(head_sets) else \
        torch.zeros(0, n_layers, n_heads, dtype=torch.bool)
    _chunk_size(model, inputs, memory_budget_mb)  # validates the budget before any forward
    if masks.shape[0] == 0:
        return torch.zeros(0)
    p, _ = _fast_p_of_sets(model, inputs, patterns, masks, memory_budget_mb)
    return p.cpu()


def patch_heads(model: Any, inputs: PatchingInputs, patterns: Float[Tensor, "layer batch head q k"],
                heads: Sequence[tuple[int, int]]) -> float:
    """Mean p(answer) (probability units) of the pre checkpoint with ``heads`` jointly patched.

    See ``patch_head_sets``; ``heads=[]`` returns the unpatched mean p(answer).

    Raises:
        ValueError: no attention heads, pattern shape mismatch, a head out of range.
    """
    return float(patch_head_sets(model, inputs, patterns, [list(heads)])[0])


def _reference_delta_p(model: Any, inputs: PatchingInputs, patterns: Tensor,
                       head_mask: Bool[Tensor, "layer head"]) -> Float[Tensor, "layer head"]:
    """``transformer_lens.patching.get_act_patch_attn_head_pattern_all_pos``: one forward per head."""
    import pandas as pd
    from transformer_lens import ActivationCache
    from transformer_lens.patching import (
        generic_activation_patch,
        get_act_patch_attn_head_pattern_all_pos,
        layer_head_pattern_patch_setter,
    )

    n_layers, n_heads = head_mask.shape
    device = _model_device(model)
    inputs = inputs.to(device)
    post_cache = ActivationCache({_pattern_hook_name(l): patterns[l].to(device, torch.float32)
                                  for l in range(n_layers)}, model)
    with torch.inference_mode():
        p_pre = answer_prob(model(inputs.tokens), inputs).mean()

        def metric(logits: Tensor) -> Tensor:
            return answer_prob(logits, inputs).mean() - p_pre

        pairs = torch.nonzero(head_mask.cpu()).tolist()
        if bool(head_mask.all()):
            values = get_act_patch_attn_head_pattern_all_pos(model, inputs.tokens, post_cache, metric)
        else:  # the same patch, restricted to the requested heads
            values = generic_activation_patch(
                model, inputs.tokens, post_cache, metric, patch_setter=layer_head_pattern_patch_setter,
                activation_name="pattern", index_df=pd.DataFrame(pairs, columns=["layer", "head_index"]))
    out = torch.full((n_layers, n_heads), float("nan"))
    for (layer, head), v in zip(pairs, values.flatten().tolist()):
        out[layer, head] = v
    return out


def delta_p_all_heads(model: Any, inputs: PatchingInputs, patterns: Float[Tensor, "layer batch head q k"],
                      method: Literal["fast", "reference"] = "fast", memory_budget_mb: int = 1024,
                      heads: Sequence[tuple[int, int]] | None = None) -> Float[Tensor, "layer head"]:
    """Per-head ``delta_p = mean p_patched(answer) - mean p_pre(answer)`` (probability units).

    Head (l, h) of the pre checkpoint ``model`` gets the post checkpoint's pattern at all query
    positions (Baherwani et al. 2026, head patching; TransformerLens
    ``get_act_patch_attn_head_pattern_all_pos``).

    Args:
        model: pre-checkpoint ``TransformerBridge`` in eval mode (float32 recommended).
        inputs: prompts and answers.
        patterns: ``Float[Tensor, "layer batch head query_pos key_pos"]``, the post checkpoint's
            patterns on the same tokens (``cache_patterns``).
        method: ``"fast"`` (layer skip, heads stacked along the batch) or ``"reference"`` (one
            TransformerLens forward per head).  They agree to 1e-5.
        memory_budget_mb: activation memory per stacked chunk (fast method), MiB.
        heads: compute only these ``(layer, head)`` pairs; the rest are NaN.

    Returns:
        ``Float[Tensor, "layer head"]`` on the CPU.

    Raises:
        ValueError: no attention heads, pattern shape mismatch, bad method/head/budget, or an
            attention implementation that ignores ``hook_pattern`` edits.
    """
    inputs = _as_inputs(inputs)
    n_layers, n_heads = _check_patterns(model, inputs, patterns)
    if method not in ("fast", "reference"):
        raise ValueError(f"method must be 'fast' or 'reference', got {method!r}")
    _chunk_size(model, inputs, memory_budget_mb)
    if heads is None:
        head_mask = torch.ones(n_layers, n_heads, dtype=torch.bool)
    else:
        head_mask = _heads_to_mask(heads, n_layers, n_heads)
    out = torch.full((n_layers, n_heads), float("nan"))
    if not bool(head_mask.any()):
        return out
    if method == "reference":
        return _reference_delta_p(model, inputs, patterns, head_mask)
    pairs = torch.nonzero(head_mask)  # [n, 2], ordered by layer: one stacked call per layer
    masks = torch.zeros(pairs.shape[0], n_layers, n_heads, dtype=torch.bool)
    masks[torch.arange(pairs.shape[0]), pairs[:, 0], pairs[:, 1]] = True
    p, p_pre = _fast_p_of_sets(model, inputs, patterns, masks, memory_budget_mb)
    out[pairs[:, 0], pairs[:, 1]] = (p - p_pre).cpu()  # the one device -> host copy
    return out


# --------------------------------------------------------------------------- attribution pre-screen


def attribution_delta_p(model: Any, inputs: PatchingInputs,
                        patterns: Float[Tensor, "layer batch head q k"]) -> Float[Tensor, "layer head"]:
    """First-order estimate of every head's ``delta_p`` from one forward and one backward pass.

    ``delta_p[l, h] ~= sum_{b, q, k} d(mean_b p_b(answer)) / d pattern[l, b, h, q, k]
    * (pattern_post - pattern_pre)[l, b, h, q, k]`` — attribution patching (Nanda 2023;
    Syed et al. 2023, arXiv:2310.10348) applied to ``hook_pattern``.  Exact for small pattern
    changes; for the large changes at a point of emergence it is a ranking pre-screen, to be
    followed by exact patching of its top heads (``delta_p_all_heads(heads=...)``).

    Args:
        model: pre-checkpoint ``TransformerBridge`` in eval mode.
        inputs: prompts and answers.
        patterns: the post checkpoint's patterns (``cache_patterns``).

    Returns:
        ``Float[Tensor, "layer head"]`` estimated delta_p (probability units, CPU).

    Raises:
        ValueError: no attention heads or pattern shape mismatch.
    """
    inputs = _as_inputs(inputs)
    n_layers, _ = _check_patterns(model, inputs, patterns)
    device = _model_device(model)
    # clone(): tensors made under inference_mode cannot enter an autograd graph.
    inputs = PatchingInputs(*(t.to(device).clone() for t in (inputs.tokens, inputs.answers, inputs.answer_pos)))
    post = patterns.to(device, torch.float32)
    kept: dict[int, Tensor] = {}

    def leaf_residual(resid: Tensor, hook: Any = None) -> Tensor:
        # Grad flows from here even if the parameters are frozen; no parameter grads are built.
        return resid.detach().requires_grad_(True)

    def keep(layer: int) -> Callable:
        def hook(pattern: Tensor, hook: Any = None) -> Tensor:
            kept[layer] = pattern
            return pattern
        return hook

    hooks = [("blocks.0.hook_in", leaf_residual)] + [(_pattern_hook_name(l), keep(l)) for l in range(n_layers)]
    with torch.inference_mode(False), torch.enable_grad():
        p_rows, _ = _answer_rows_forward(lambda tokens, **kw: model.run_with_hooks(tokens, fwd_hooks=hooks, **kw),
                                         inputs)
        p = p_rows.mean()
        grads = torch.autograd.grad(p, [kept[l] for l in range(n_layers)], allow_unused=True)
    est = torch.stack([
        (g.float() * (post[l] - kept[l].detach().float())).sum(dim=(0, 2, 3)) if g is not None
        else torch.zeros(post.shape[2], device=device)
        for l, g in enumerate(grads)])
    return est.detach().cpu()
