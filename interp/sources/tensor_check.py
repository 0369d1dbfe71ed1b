"""Weight files that lack or add tensors: the names in a checkpoint's headers against its model.

transformers loads a checkpoint that lacks a parameter without an error: it logs a warning and
leaves the parameter at its random initialisation, drawn afresh on every load (the kind of
transformers issue 46620). A tiny GPT-NeoX step whose file lacked one layer's
``query_key_value.weight`` gave p(answer) 0.0529, 0.0516, 0.0504, ... on successive loads
(0.0733 whole): the same label, other numbers every run, which can fake or hide a jump. A file
with tensors the model does not have is as suspect (the wrong checkpoint, or a broken export).

:func:`tensor_problem` compares the tensor names in the safetensors headers (no tensor is read)
with what the model built from the step's ``config.json`` holds, built on the meta device (no
memory, no initialisation). The comparison follows transformers' own loading rules:

* file names are mapped by the checkpoint renamings transformers applies
  (:func:`interp.sources.weight_swap._file_key_renamer`; GPT-NeoX's ``embed_out.`` -> ``lm_head.``);
* a parameter tied to another (``all_tied_weights_keys``, e.g. an unembedding tied to the
  embedding) may be absent, as may keys matching the model's patterns of keys to ignore when
  missing (:func:`interp.core.adapters.transformers.load_ignore_patterns`);
* extra names matching its patterns of keys to ignore when unexpected (old GPT-NeoX files' ``attention.bias``
  and ``masked_bias``) or naming a buffer the model computes itself (``rotary_emb.inv_freq``) are
  not extras.

A model that cannot be built on the meta device (remote code, an unknown type) is not checked
(None), nor are pickle ``.bin`` files (their names need unpickling).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

#: Tensor names shown per kind in a problem (then a count).
SHOWN = 6
#: config.json text -> (expected names, tied, ignored if missing, ignored if extra, buffer names, renamer)
_EXPECTED: dict[str, tuple | None] = {}


def header_names(path: Path) -> list[str]:
    """Tensor names in a safetensors file's header (the file must be structurally whole)."""
    with open(path, "rb") as handle:
        n = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(n).decode("utf-8"))
    return [k for k in header if k != "__metadata__"]


def _expected(config_file: Path, trust_remote_code: bool) -> tuple | None:
    text = config_file.read_text()
    if text not in _EXPECTED:
        _EXPECTED[text] = _build_expected(config_file, trust_remote_code)
    return _EXPECTED[text]


def _build_expected(config_file: Path, trust_remote_code: bool) -> tuple | None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from interp.core.adapters.transformers import load_ignore_patterns
    from interp.sources.weight_swap import _file_key_renamer

    try:
        config = AutoConfig.from_pretrained(config_file, trust_remote_code=trust_remote_code)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    except Exception:  # an architecture transformers cannot build here: not checked
        return None
    expected = set(model.state_dict())
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    ignore_missing, ignore_extra = load_ignore_patterns(model)
    buffers = {name.rsplit(".", 1)[-1] for name, _ in model.named_buffers()}
    rename = _file_key_renamer(model) or (lambda key: key)
    return expected, tied, ignore_missing, ignore_extra, buffers, rename


def _all_shards_here(folder: Path, files: Sequence[Path]) -> bool:
    """False when the folder's ``*.index.json`` names shards that are not among ``files`` (a
    download in progress or cut off: those shards' tensors are not missing, only not here)."""
    held = {p.name for p in files}
    for index in folder.glob("*.index.json"):
        try:
            shards = set(json.loads(index.read_text())["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            continue
        if not shards <= held:
            return False
    return True


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f", ... ({len(names)} in all)" if len(names) > SHOWN else "")


def tensor_problem(
    files: Sequence[Path], trust_remote_code: bool = False, config_file: Path | None = None
) -> str | None:
    """What a checkpoint's safetensors files lack or add against the model of its ``config.json``.

    Args:
        files: the step's weight files (structurally whole: :func:`safetensors_problem` passed),
            in the folder that holds its ``config.json``.
        trust_remote_code: passed to transformers when building the model's skeleton.
        config_file: the model's ``config.json`` when it is not beside the files (a local run's
            config given once); None: the files' folder's.

    Returns:
        ``"lacks 1 tensor the model needs (transformers would fill it at random on every load):
        gpt_neox.layers.1.attention.query_key_value.weight"``, ``"holds 2 tensors the model does not
        have: ..."`` (both, ``;``-joined, when both), or None when the names match, or when the
        files are pickles, there is no ``config.json``, shards the index names are not here yet
        or the model cannot be built on the meta device (not checked).
    """
    files = list(files)
    if not files or any(not p.name.endswith(".safetensors") for p in files):
        return None
    folder = files[0].parent
    config_file = config_file or folder / "config.json"
    if not config_file.is_file() or not _all_shards_here(folder, files):
        return None
    found = _expected(config_file, trust_remote_code)
    if found is None:
        return None
    expected, tied, ignore_missing, ignore_extra, buffers, rename = found
    names = {rename(key): key for path in files for key in header_names(path)}
    missing = sorted(k for k in expected - set(names) if k not in tied and not any(p.search(k) for p in ignore_missing))
    extra = sorted(
        names[k]
        for k in set(names) - expected
        if k.rsplit(".", 1)[-1] not in buffers and not any(p.search(k) for p in ignore_extra)
    )
    parts = []
    if missing:
        one = len(missing) == 1
        parts.append(
            f"lacks {len(missing)} tensor{'' if one else 's'} the model needs (transformers would fill "
            f"{'it' if one else 'them'} at random on every load): {_listed(missing)}"
        )
    if extra:
        one = len(extra) == 1
        parts.append(f"holds {len(extra)} tensor{'' if one else 's'} the model does not have: {_listed(extra)}")
    return "; ".join(parts) or None
