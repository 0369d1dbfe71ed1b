"""RWKV: RWKV-4 from transformers on CPU, RWKV-7 from flash-linear-attention on CUDA.

* RWKV-4 (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era",
  arXiv 2305.13048): ``transformers.RwkvForCausalLM``. Its CPU path is a python loop over
  positions (``rwkv_linear_attention_cpu``, ~230 ms/step on a toy): keep runs small.
* RWKV-7 (Peng et al. 2025, "RWKV-7 Goose", arXiv 2503.14456): ``fla.models.RWKV7ForCausalLM``,
  whose layers exist only as triton kernels, so it is chosen only for a run on a CUDA device
  when ``fla`` imports (override: ``EMERGENCE_LENS_RWKV_VERSION=4|7``). The version is part of a
  run's resolved config (``TrainConfig.rwkv_version``, filled in from the run's device by
  :func:`rwkv_version`), hence of its run id; every built model records the version that ran
  in ``model.rwkv_version`` (4 or 7).

RWKV-4 mapping from :class:`synthetic.models.ModelConfig` (our choice; the paper gives no
configuration):

* ``hidden_size = d_model``; time-mix key/value/receptance width
  ``attention_hidden_size = n_heads * d_head`` (the transformer's q/k/v width; RWKV-4 has no
  heads); ``context_length = n_ctx``; ``rescale_every = 0`` (transformers halves the residual
  every 6 layers in eval mode only, which would make train and eval logits differ).
* ``d_mlp``: channel-mix width. ``None`` means no channel-mix, like the attention-only
  transformer: its key/value get zero width (the sublayer outputs exactly 0) and its receptance
  and the norm in front of it are frozen, so the trainable count is honest and the module tree
  stays the one the TransformerLens adapter expects.
* ``n_layers = 1``: transformers' initialiser divides by ``num_hidden_layers - 1``; we build two
  layers and keep the first, whose initialisation is the one-layer limit (ratio 0 → 1 terms
  equal 0 and 1).

RWKV-7 mapping: ``hidden_size = d_model``, ``head_dim = d_head``, ``num_hidden_layers =
n_layers``, ``intermediate_size = d_mlp`` or fla's default ``4 * d_model`` when ``d_mlp`` is
None (zero width is untested there; recorded as ``model.d_mlp_effective``). Not exercised on
this project's CPU machines.
"""

from __future__ import annotations

import importlib.util
import os
import warnings

import torch
from torch import nn

from synthetic.models.hf import TOY_LM_SETTINGS, freeze_dead_parameters, wrap_hf_model

ARCH = "rwkv"
RWKV_VERSION_ENV = "EMERGENCE_LENS_RWKV_VERSION"
RWKV7_FFN_RATIO = 4  # fla RWKV7Config default hidden_ratio


def rwkv_version(device: str | torch.device) -> int:
    """The RWKV version a run on ``device`` uses: 7 when ``device`` is CUDA and ``fla`` is
    importable, else 4. Whether this machine has a GPU does not matter, only the run's device.

    The environment variable ``EMERGENCE_LENS_RWKV_VERSION`` (``4`` or ``7``) overrides the
    choice.

    Raises:
        ValueError: the environment variable holds anything but 4 or 7.
    """
    forced = os.environ.get(RWKV_VERSION_ENV)
    if forced is not None:
        if forced not in ("4", "7"):
            raise ValueError(f"{RWKV_VERSION_ENV}={forced!r} is invalid: use 4 (transformers, CPU) or 7 (fla, CUDA)")
        return int(forced)
    on_cuda = torch.device(device).type == "cuda"
    return 7 if on_cuda and importlib.util.find_spec("fla") is not None else 4


def rwkv4_config(cfg, n_layers: int | None = None):
    """The ``transformers.RwkvConfig`` for a :class:`ModelConfig` (mapping in module doc)."""
    from transformers import RwkvConfig

    return RwkvConfig(
        vocab_size=cfg.d_vocab,
        context_length=cfg.n_ctx,
        hidden_size=cfg.resolved_d_model,
        num_hidden_layers=cfg.n_layers if n_layers is None else n_layers,
        attention_hidden_size=cfg.n_heads * cfg.d_head,
        intermediate_size=cfg.d_mlp or 1,  # zero width is applied after init (see _remove_channel_mix)
        rescale_every=0,
        **TOY_LM_SETTINGS,
    )


def _remove_channel_mix(hf_model: nn.Module, d_model: int) -> None:
    """Zero-width channel-mix: ``sigmoid(r(x)) * value(relu(key(x))²)`` with empty key/value is 0."""
    for block in hf_model.rwkv.blocks:
        ff = block.feed_forward
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Initializing zero-element tensors is a no-op"
            ff.key = nn.Linear(d_model, 0, bias=False)
            ff.value = nn.Linear(0, d_model, bias=False)
        freeze_dead_parameters(
            [*ff.receptance.parameters(), ff.time_mix_key, ff.time_mix_receptance, *block.ln2.parameters()]
        )


def build_rwkv4(cfg) -> nn.Module:
    """RWKV-4 via ``transformers.RwkvForCausalLM`` (CPU or CUDA; CUDA kernel only via ``kernels``).

    Raises:
        ValueError: ``d_mlp`` < 1 (use None for no channel-mix).
    """
    from transformers import RwkvForCausalLM

    if cfg.d_mlp is not None and cfg.d_mlp < 1:
        raise ValueError(f"d_mlp={cfg.d_mlp!r} is invalid: give a positive channel-mix width or None (none)")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        hf_model = RwkvForCausalLM(rwkv4_config(cfg, n_layers=max(2, cfg.n_layers))).float()
    if cfg.n_layers == 1:
        hf_model.rwkv.blocks = hf_model.rwkv.blocks[:1]
        hf_model.config.num_hidden_layers = 1
    if cfg.d_mlp is None:
        _remove_channel_mix(hf_model, cfg.resolved_d_model)
    return wrap_hf_model(
        hf_model,
        cfg.d_vocab,
        cfg.n_ctx,
        cfg.seed,
        arch=ARCH,
        rwkv_version=4,
        implementation="transformers.RwkvForCausalLM (RWKV-4)",
        d_mlp_effective=cfg.d_mlp,
    )


def build_rwkv7(cfg, device: str | torch.device = "cuda") -> nn.Module:
    """RWKV-7 via ``fla.models.RWKV7ForCausalLM`` on a CUDA device (triton kernels only).

    Raises:
        ValueError: ``device`` is not CUDA, or ``fla`` is not installed.
    """
    if torch.device(device).type != "cuda":
        raise ValueError(
            f"device={str(device)!r} is invalid for RWKV-7: fla's kernels need a CUDA device; RWKV-4 runs on CPU"
        )
    if importlib.util.find_spec("fla") is None:
        raise ValueError(
            "RWKV-7 needs flash-linear-attention (pip install flash-linear-attention); RWKV-4 needs nothing"
        )
    from fla.models import RWKV7Config, RWKV7ForCausalLM

    d_model = cfg.resolved_d_model
    d_mlp = cfg.d_mlp if cfg.d_mlp is not None else RWKV7_FFN_RATIO * d_model
    hf_cfg = RWKV7Config(
        hidden_size=d_model,
        num_hidden_layers=cfg.n_layers,
        head_dim=cfg.d_head,
        intermediate_size=d_mlp,
        vocab_size=cfg.d_vocab,
        max_position_embeddings=cfg.n_ctx,
        **{k: v for k, v in TOY_LM_SETTINGS.items() if k != "pad_token_id"},
    )
    with torch.random.fork_rng(devices=[torch.device(device)]):
        torch.manual_seed(cfg.seed)
        hf_model = RWKV7ForCausalLM(hf_cfg).float().to(device)
    return wrap_hf_model(
        hf_model,
        cfg.d_vocab,
        cfg.n_ctx,
        cfg.seed,
        arch=ARCH,
        rwkv_version=7,
        implementation="fla.models.RWKV7ForCausalLM (RWKV-7)",
        d_mlp_effective=d_mlp,
    )


def build(cfg) -> nn.Module:
    """RWKV LM ``forward(tokens Int[batch,pos]) -> logits Float[batch,pos,d_vocab]``.

    RWKV-7 when ``cfg.rwkv_version`` is 7 (built on CUDA), else RWKV-4; ``model.rwkv_version``
    records which. ``has_attention=False``. Seeded by ``cfg.seed``.

    Raises:
        ValueError: ``cfg.rwkv_version`` is not None, 4 or 7.
    """
    version = cfg.rwkv_version if cfg.rwkv_version is not None else 4
    if version not in (4, 7):
        raise ValueError(f"rwkv_version={cfg.rwkv_version!r} is invalid: use 4 (transformers) or 7 (fla, CUDA)")
    return build_rwkv7(cfg) if version == 7 else build_rwkv4(cfg)


def _register() -> None:
    from synthetic.models import register_architecture

    register_architecture(ARCH, build)


_register()
