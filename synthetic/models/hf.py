"""Shared code for the Hugging Face token mixers (Mamba-2, Gated DeltaNet, RWKV).

Three jobs, each needed by more than one architecture module:

* :func:`check_cpu_kernels`: transformers binds the fast kernels of optional packages (``fla``
  for Gated DeltaNet, ``mamba_ssm`` / ``causal_conv1d`` for Mamba-2) when its modeling file is
  imported; from 5.25 it runs them only on devices they support and its own pure-torch reference
  on the CPU. On an older transformers with such a package installed the CPU path crashes, so the
  build is refused with a message naming the fix (the trap is reproduced in
  ``tests/synthetic/test_synth_architectures.py``). The project never rewrites transformers' functions.
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
import importlib.util
import re
import sys
import tempfile
import warnings
from collections.abc import Iterable
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

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


#: The first transformers release whose kernel wrapper (``use_kernel_func_from_hub_with_fallback``)
#: sends tensors on a device the optional package does not support (CPU for ``fla``,
#: ``mamba_ssm``, ``causal_conv1d``) to transformers' own pure-torch reference. Before it, an
#: installed package's triton kernel was called for CPU tensors too, and crashed.
DEVICE_AWARE_KERNELS = (5, 25)
#: Import name -> distribution name of the kernel packages transformers binds when installed.
KERNEL_DISTRIBUTIONS = {
    "fla": "flash-linear-attention",
    "mamba_ssm": "mamba-ssm",
    "causal_conv1d": "causal-conv1d",
}


def _installed(package: str) -> bool:
    if package in sys.modules:
        return sys.modules[package] is not None
    return importlib.util.find_spec(package) is not None


def transformers_release() -> tuple[int, int]:
    """The installed transformers' (major, minor) release, e.g. ``(5, 24)``."""
    import transformers

    major, minor = (int(part) for part in re.findall(r"\d+", transformers.__version__)[:2])
    return major, minor


def check_cpu_kernels(arch: str, packages: Iterable[str]) -> None:
    """Refuse, before any model is built, a transformers release that calls CUDA-only kernels on CPU.

    transformers binds the kernels of optional packages (``fla`` for Gated DeltaNet, ``mamba_ssm``
    and ``causal_conv1d`` for Mamba-2) when its modeling file is imported. From 5.25
    (:data:`DEVICE_AWARE_KERNELS`) it calls them only for tensors on a device they support and its
    pure-torch reference otherwise, so a CPU run takes the torch path whether or not they are
    installed; before 5.25 a CPU tensor reached the triton kernel and crashed (reproduced by
    ``tests/synthetic/test_synth_architectures.py::test_cpu_runs_when_triton_kernels_are_installed``). The
    model is built on the CPU and checked there (:func:`wrap_hf_model`), so the refusal holds for
    every device. Nothing of transformers is touched: its public behaviour decides the path.

    Args:
        arch: the architecture's name, for the message.
        packages: import names of the kernel packages its modeling file binds
            (keys of :data:`KERNEL_DISTRIBUTIONS`).

    Raises:
        ValueError: one of ``packages`` is installed and transformers is older than 5.25; the
            message names both fixes (a newer transformers, or uninstalling the package).
    """
    import transformers

    installed = [p for p in packages if _installed(p)]
    if installed and transformers_release() < DEVICE_AWARE_KERNELS:
        names = " ".join(KERNEL_DISTRIBUTIONS.get(p, p) for p in installed)
        floor = ".".join(map(str, DEVICE_AWARE_KERNELS))
        raise ValueError(
            f"arch {arch!r}: transformers {transformers.__version__} calls the kernels of {names} (installed here) "
            f"on CPU tensors too, where they crash; install transformers>={floor}, which runs its pure-torch path "
            f"on the CPU, or uninstall {names}"
        )


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
    ``tests/synthetic/test_synth_architectures.py::test_hf_models_are_bridged_and_match_hf_logits``).

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
