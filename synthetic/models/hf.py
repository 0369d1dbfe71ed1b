"""Shared plumbing for the Hugging Face token mixers (Mamba-2, Gated DeltaNet, RWKV).

Three jobs, each needed by more than one architecture module:

* :func:`use_torch_kernels_off_cuda`: transformers 5.x binds the fast kernels of optional
  packages (``fla`` for Gated DeltaNet, ``mamba_ssm`` / ``causal_conv1d`` for Mamba-2) at
  import time of the modeling file, via ``use_kernel_func_from_hub_with_fallback``. When such a
  package is installed together with triton, the module-level function calls the triton
  kernel even for CPU tensors and crashes. We rebind every such function to a dispatcher that
  runs the package kernel only for CUDA tensors and transformers' own pure-torch reference
  otherwise (the trap is reproduced in ``tests/test_synth_architectures.py``).
* :func:`wrap_hf_model`: wraps the Hugging Face model in a TransformerLens 4.x
  ``TransformerBridge`` (``boot_transformers(path, hf_model=…, tokenizer=…)``) so hooks read
  the same way as on the transformer, and checks that the bridge's logits equal the HF model's.
  Where booting fails, a plain :class:`HFCausalLM` (tokens → logits) is returned and the reason
  recorded in ``model.bridge_error``.
* :func:`freeze_dead_parameters`: parameters that cannot influence the logits (e.g. the norm in
  front of a zero-width MLP) are frozen so that trainable-parameter counts stay honest.
"""

from __future__ import annotations

import copy
import functools
import inspect
import tempfile
import warnings
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

# Attribute set on the dispatchers so that rebinding is idempotent.
_DISPATCH_FLAG = "_emergence_lens_off_cuda_dispatch"

#: Settings every toy language model's Hugging Face config shares: untied embeddings, no
#: generation cache, and no special tokens (ids outside a toy vocabulary only trigger warnings;
#: nothing generates here).
TOY_LM_SETTINGS = dict(
    tie_word_embeddings=False, use_cache=False, bos_token_id=None, eos_token_id=None, pad_token_id=None
)


class HFCausalLM(nn.Module):
    """A Hugging Face causal LM seen as ``tokens -> logits`` (no cache, no loss).

    Used where no TransformerLens adapter boots; the training loop needs nothing else.
    """

    def __init__(self, hf_model: nn.Module):
        super().__init__()
        self.hf_model = hf_model

    def forward(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_vocab"]:
        """Logits for every position; ``use_cache=False`` so no recurrent state is kept."""
        return self.hf_model(tokens, use_cache=False).logits


def _torch_reference(fn: Callable) -> Callable | None:
    """The pure-torch function that ``use_kernel_func_from_hub_with_fallback`` wrapped.

    ``functools.wraps`` leaves it at the bottom of the ``__wrapped__`` chain.
    """
    if not hasattr(fn, "__wrapped__"):
        return None
    return inspect.unwrap(fn)


def _on_cuda(args: tuple, kwargs: dict) -> bool:
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, Tensor)]
    return bool(tensors) and all(t.is_cuda for t in tensors)


def _dispatcher(kernel_fn: Callable, torch_fn: Callable) -> Callable:
    params = inspect.signature(torch_fn).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())

    @functools.wraps(torch_fn)
    def dispatch(*args, **kwargs):
        if _on_cuda(args, kwargs):
            return kernel_fn(*args, **kwargs)
        if not accepts_any:
            kwargs = {k: v for k, v in kwargs.items() if k in params}
        return torch_fn(*args, **kwargs)

    setattr(dispatch, _DISPATCH_FLAG, True)
    return dispatch


def use_torch_kernels_off_cuda(module: ModuleType, names: Iterable[str]) -> list[str]:
    """Rebind kernel-dispatching functions of a transformers modeling module (in place).

    Each named module-level function is replaced by a dispatcher: CUDA tensors go to whatever
    transformers bound at import time (the ``fla`` / ``mamba_ssm`` / ``causal_conv1d`` kernel
    when installed), any other device goes to transformers' pure-torch reference, which is
    what runs anyway when those packages are absent. The forward of the HF layer (and of the
    TransformerLens bridge, which looks the function up in the module at call time) picks the
    rebinding up. Idempotent.

    Args:
        module: e.g. ``transformers.models.qwen3_5.modeling_qwen3_5``.
        names: module-level function names, e.g. ``["torch_chunk_gated_delta_rule"]``.

    Returns:
        The names that were rebound now (empty when all were already rebound).

    Raises:
        ValueError: a name is not a function of ``module`` or has no torch reference
            (transformers changed its kernel plumbing; see the module docstring).
    """
    rebound = []
    for name in names:
        fn = getattr(module, name, None)
        if fn is None or not callable(fn):
            raise ValueError(f"{module.__name__}.{name} is not a function: cannot force the torch path")
        if getattr(fn, _DISPATCH_FLAG, False):
            continue
        torch_fn = _torch_reference(fn)
        if torch_fn is None:
            raise ValueError(
                f"{module.__name__}.{name} has no __wrapped__ torch reference: transformers' kernel "
                "plumbing changed, update synthetic/models/hf.py"
            )
        setattr(module, name, _dispatcher(fn, torch_fn))
        rebound.append(name)
    return rebound


def freeze_dead_parameters(params: Iterable[nn.Parameter]) -> None:
    """Set ``requires_grad=False`` on parameters that cannot change the logits.

    Keeps ``count_parameters`` (trainable parameters) honest when a sub-layer is disabled by
    giving it zero width but its neighbours stay in the module tree for the bridge's sake.
    """
    for p in params:
        p.requires_grad_(False)


def _save_word_tokenizer(d_vocab: int, directory: str):
    """A word-level tokenizer over the strings ``"0" … "d_vocab-1"``, saved and reloaded.

    The bridge reloads the tokenizer from its ``name_or_path``, so it must come from a
    directory (TransformerLens 4.x ``TransformerBridge.boot_transformers``). Training never
    uses it: tokens are ids.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {str(i): i for i in range(d_vocab)}
    vocab["<unk>"] = d_vocab
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>").save_pretrained(directory)
    return PreTrainedTokenizerFast.from_pretrained(directory)


def boot_bridge(hf_model: nn.Module, d_vocab: int) -> nn.Module:
    """Wrap ``hf_model`` in ``TransformerBridge.boot_transformers`` (offline, float32).

    The bridge rewrites the HF module tree in place and shares its parameters.

    Raises:
        Whatever TransformerLens raises when no adapter fits (callers fall back).
    """
    from transformer_lens.model_bridge import TransformerBridge

    hf_model.config.use_cache = False  # linear-attention caches break the cache-less forward
    hf_model.config.architectures = [type(hf_model).__name__]  # adapter lookup key
    with tempfile.TemporaryDirectory(prefix="emergence-lens-tok-") as directory:
        tokenizer = _save_word_tokenizer(d_vocab, directory)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bridge = TransformerBridge.boot_transformers(
                directory, hf_model=hf_model, tokenizer=tokenizer, device=_device_of(hf_model)
            )
    return bridge


def _device_of(model: nn.Module) -> str:
    return str(next(model.parameters()).device)


def wrap_hf_model(hf_model: nn.Module, d_vocab: int, n_ctx: int, seed: int, **metadata: Any) -> nn.Module:
    """TransformerBridge around ``hf_model`` when it boots and agrees, else :class:`HFCausalLM`.

    The check: logits of bridge and HF model on one random batch must agree to 1e-5
    (measured here: bridge logits equal the HF model's eager logits,
    ``tests/test_synth_architectures.py::test_hf_models_are_bridged_and_match_hf_logits``).

    The returned module has ``forward(tokens) -> logits`` and these attributes:
    ``has_attention = False`` (no attention pattern exists, so attention bias and pattern
    patching must refuse it), ``is_bridge``, ``bridge_error`` (None or the reason the plain
    model is used), ``hf_model`` and every ``metadata`` key.

    Args:
        hf_model: a causal LM whose ``forward(ids, use_cache=False).logits`` is the reference.
        d_vocab, n_ctx: vocabulary size and context length (for the check batch).
        seed: seeds the check batch.
    """
    hf_model.eval()
    gen = torch.Generator().manual_seed(seed)
    probe = torch.randint(0, d_vocab, (2, n_ctx), generator=gen).to(_device_of(hf_model))
    with torch.no_grad():
        reference = hf_model(probe, use_cache=False).logits
    # Booting rewrites the HF module tree in place, so a failed boot could leave it half
    # converted: keep an untouched copy for the fallback.
    pristine = copy.deepcopy(hf_model)
    model: nn.Module
    error = None
    try:
        bridge = boot_bridge(hf_model, d_vocab)
        with torch.no_grad():
            got = bridge(probe)
        if not torch.allclose(got, reference, atol=1e-5, rtol=0):
            raise ValueError(f"bridge logits differ from HF logits by {(got - reference).abs().max():.2e}")
        model = bridge
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
        model = HFCausalLM(pristine)
    model.train()
    attrs = {"has_attention": False, "is_bridge": error is None, "bridge_error": error, **metadata}
    if error is None:
        # Plain attribute (not a registered submodule): the bridge already owns these parameters.
        attrs["hf_model"] = hf_model
    for key, value in attrs.items():
        object.__setattr__(model, key, value)
    return model
