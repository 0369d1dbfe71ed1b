"""Switching checkpoints of one architecture inside one resident ``TransformerBridge``.

Booting a ``TransformerBridge`` (config, tokenizer reload, HF model construction, component
wrapping) costs far more than the weights it holds; within one training run every checkpoint has
the same architecture, so :class:`WeightSwap` copies the next checkpoint's safetensors straight
into the resident bridge's parameters (``Tensor.copy_``: same storage, same device, the bridge's
dtype) instead.

How TransformerLens 4.x holds the Hugging Face model (checked on 4.3, GPT-NeoX): booting wraps
the HF modules in place, so most bridge parameters *are* the HF model's parameters (a parameter
named ``gpt_neox.layers.0.attention.query_key_value.weight`` by transformers is the bridge's
``...attention._original_component.query_key_value._original_component.weight``). The one
processed form it caches is the split of a fused QKV matrix: ``JointQKVAttentionBridge`` calls its
adapter's ``split_qkv_matrix`` once at boot and keeps independent ``q``/``k``/``v`` copies that
its forward uses. :meth:`WeightSwap.apply` therefore copies every file tensor into the parameter
transformers loaded it into, then re-runs ``split_qkv_matrix`` on every joint-QKV attention and
copies the result into ``q``/``k``/``v``.

Safety: a plan is built at a fresh boot and refuses (``WeightSwap.build`` returns None, and the
source keeps booting) unless every parameter of the bridge is written by one of the two routes;
buffers (rotary frequencies, a zero unembedding bias) depend on the config only, and a swap is
only used between checkpoints whose ``config.json`` is identical. tests/interp/sources/test_weight_swap.py checks
that every capability value and logit of a swapped bridge equals a fresh boot's.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch


def _file_key_renamer(hf_model) -> callable:
    """file key -> transformers parameter name, by the checkpoint renamings transformers applies
    when loading (e.g. GPT-NeoX's ``embed_out.`` -> ``lm_head.``); None when the model needs
    conversions other than renamings (then no swap plan is made)."""
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import WeightRenaming
    except ImportError:  # an older transformers: names in files are the parameter names
        return lambda key: key
    rules = []
    for transform in get_model_conversion_mapping(hf_model):
        if not isinstance(transform, WeightRenaming):
            return None
        sources, targets = transform.source_patterns, transform.target_patterns
        if len(targets) != 1:
            return None
        rules += [(re.compile(source), targets[0]) for source in sources]

    def rename(key: str) -> str:
        for pattern, target in rules:
            key = pattern.sub(target, key)
        return key

    return rename


def read_weights(files: Sequence[Path], dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint's safetensors files, on the CPU.

    Args:
        files: the checkpoint's ``*.safetensors`` files.
        dtype: None keeps the stored dtype and maps the files lazily (pages are read when the
            tensors are first used); a dtype reads every tensor into memory now, converted to it
            (what a read-ahead thread does, so that :meth:`WeightSwap.apply` is a plain memory
            copy on the critical path).
    """
    from safetensors.torch import load_file

    tensors: dict[str, torch.Tensor] = {}
    for path in files:
        tensors.update(load_file(str(path), device="cpu"))
    if dtype is not None:
        tensors = {
            key: (t.to(dtype) if t.dtype != dtype else t.clone()) if t.is_floating_point() else t.clone()
            for key, t in tensors.items()
        }
    return tensors


class WeightSwap:
    """How to write a checkpoint's safetensors into one booted bridge (see the module docstring).

    Built with :meth:`build` from the HF model's named parameters captured *before* booting (the
    same tensor objects the bridge then uses) and the booted bridge; :meth:`apply` switches the
    bridge to another checkpoint of the same architecture.
    """

    def __init__(self, targets: dict[str, list[torch.Tensor]], joint_qkv: list, config_text: str):
        self.targets = targets
        self.joint_qkv = joint_qkv
        self.config_text = config_text
        #: per joint-QKV module: [(q/k/v tensor, the HF parameter it selects from, flat index)] when
        #: the split is a pure selection of one parameter's elements (:func:`_probe_split`), else None
        self.gathers = [_probe_split(m) for m in joint_qkv]

    @classmethod
    def build(
        cls, hf_named: Mapping[str, torch.Tensor], bridge, file_keys: Sequence[str], hf_model, config_text: str
    ) -> WeightSwap | None:
        """A plan for ``bridge``, or None when some bridge parameter would not be written.

        Args:
            hf_named: ``dict(hf_model.named_parameters())`` taken before ``boot_transformers``.
            bridge: the booted ``TransformerBridge``.
            file_keys: tensor names in the checkpoint's safetensors files.
            hf_model: the HF model (for transformers' checkpoint renamings).
            config_text: the checkpoint's ``config.json`` text (a swap needs the same text).
        """
        rename = _file_key_renamer(hf_model)
        if rename is None:
            return None
        by_name = dict(hf_named)
        targets: dict[str, list[torch.Tensor]] = {}
        for key in file_keys:
            name = rename(key)
            if name not in by_name:
                return None
            targets[key] = [by_name[name]]
        joint_qkv = [
            m
            for m in bridge.modules()
            if callable(getattr(m, "split_qkv_matrix", None)) and all(hasattr(m, n) for n in ("q", "k", "v"))
        ]
        written = {t.data_ptr() for group in targets.values() for t in group}
        for module in joint_qkv:
            for part in (module.q, module.k, module.v):
                written |= {p.data_ptr() for p in part.parameters()}
        if any(p.data_ptr() not in written for p in bridge.parameters()):
            return None
        return cls(targets, joint_qkv, config_text)

    def fits(self, file_keys: Sequence[str], config_text: str) -> bool:
        """Whether a checkpoint with these file tensors and this ``config.json`` can be swapped in."""
        return config_text == self.config_text and set(file_keys) == set(self.targets)

    @torch.no_grad()
    def apply(self, tensors: Mapping[str, torch.Tensor], adopt: bool = False) -> None:
        """Copy ``tensors`` (file key -> tensor) into the bridge and refresh its QKV split.

        Args:
            tensors: file key -> tensor, as :func:`read_weights` returns them.
            adopt: the tensors are owned by the caller, in memory and handed over (a read-ahead
                made them with ``read_weights(files, dtype=...)``): a tensor already in the
                parameter's dtype, device and layout becomes that parameter's data
                (``Parameter.data = tensor``, no copy; the parameter object stays the same, and
                the old storage is freed) instead of being copied into it.

        Raises:
            ValueError: a tensor's shape differs from the parameter it goes into.
        """
        for key, tensor in tensors.items():
            group = self.targets[key]
            for target in group:
                if target.shape != tensor.shape:
                    raise ValueError(
                        f"weight {key!r} has shape {tuple(tensor.shape)}, the resident bridge "
                        f"{tuple(target.shape)}: not the same architecture"
                    )
                if (
                    adopt
                    and len(group) == 1
                    and tensor.dtype == target.dtype
                    and tensor.device == target.device
                    and tensor.is_contiguous()
                    and target.is_contiguous()
                ):
                    target.data = tensor
                else:
                    target.copy_(tensor)
        for module, gathers in zip(self.joint_qkv, self.gathers):
            if gathers is not None:
                for target, param, index in gathers:  # one gather straight into the resident tensor
                    torch.index_select(param.reshape(-1), 0, index, out=target.view(-1))
                continue
            parts = _split_qkv(module)
            for bridge_part, fresh in zip((module.q, module.k, module.v), parts):
                resident = bridge_part.original_component
                resident.weight.copy_(fresh.weight)
                if getattr(resident, "bias", None) is not None and getattr(fresh, "bias", None) is not None:
                    resident.bias.copy_(fresh.bias)


def _split_qkv(module) -> tuple:
    """``module.split_qkv_matrix(its HF attention)``: the q, k, v ``nn.Linear`` it builds.

    The adapter builds three ``nn.Linear`` and then replaces their weights by slices of the
    fused matrix; their random initialisation was ~40 % of a swap of a 70m-shaped model, so the
    layers are built on the meta device (the slices stay real tensors). An adapter that builds
    real tensors with factory functions gets meta ones that way; it is run again normally.
    """
    try:
        with torch.device("meta"):
            parts = module.split_qkv_matrix(module.original_component)
        if not any(t.is_meta for part in parts for t in part.parameters()):
            return parts
    except (RuntimeError, NotImplementedError, TypeError, ValueError):
        pass
    return module.split_qkv_matrix(module.original_component)


@torch.no_grad()
def _probe_split(module):
    """The QKV split of ``module`` as an element selection, or None.

    Every split the adapters ship (GPT-NeoX's per-head interleave, GPT-2's thirds...) selects
    elements of the HF attention's parameters. Filling those parameters with their element
    numbers, running the split once and reading the numbers back gives the selection; applying
    it is one gather per q/k/v tensor instead of building three ``nn.Linear``. The parameters
    are restored afterwards, and the selection is used only when it reproduces the real split
    exactly (float32 parameters whose element count float32 counts exactly: < 2**24).
    """
    parts = [module.q, module.k, module.v]
    skip = {id(p) for part in parts for p in part.parameters()}
    params = [p for p in module.original_component.parameters() if id(p) not in skip]
    total = sum(p.numel() for p in params)
    if not params or total >= 2**24 or any(p.dtype != torch.float32 for p in params):
        return None
    saved = [p.detach().clone() for p in params]
    try:
        real = _split_qkv(module)
        offset = 0
        for p in params:
            p.copy_(torch.arange(offset, offset + p.numel(), dtype=torch.float32).view_as(p))
            offset += p.numel()
        probe = _split_qkv(module)
    finally:
        for p, value in zip(params, saved):
            p.copy_(value)
    gathers = []
    flat = torch.cat([p.reshape(-1) for p in params])
    bounds = [0]
    for p in params:
        bounds.append(bounds[-1] + p.numel())
    spans = list(itertools.pairwise(bounds))
    for bridge_part, real_part, probe_part in zip(parts, real, probe):
        resident = bridge_part.original_component
        for name in ("weight", "bias"):
            target, ids = getattr(resident, name, None), getattr(probe_part, name, None)
            if target is None or ids is None:
                continue
            index = ids.detach().reshape(-1).round().long().to(flat.device)
            if (
                index.min() < 0
                or index.max() >= total
                or not torch.equal(
                    flat[index].view_as(target), getattr(real_part, name).detach().to(flat.device).view_as(target)
                )
            ):
                return None
            owners = [i for i, (lo, hi) in enumerate(spans) if lo <= int(index.min()) and int(index.max()) < hi]
            if len(owners) != 1 or not target.is_contiguous():
                return None
            gathers.append((target, params[owners[0]], index - spans[owners[0]][0]))
    return gathers
