"""transformers' private names that the project uses, behind public-looking names of ours.

Checked on transformers 5.24.0 (the declared floor and the pinned version). What moves breaks :func:`interp.sources.tensor_check.tensor_problem`:
a checkpoint whose file holds tensors the model ignores (old GPT-NeoX files' ``attention.bias``,
``masked_bias``) would be refused as holding extra tensors, or one that lacks an ignorable key as
lacking it; loading itself (``from_pretrained``) does not use this module.

* :func:`load_ignore_patterns` reads ``PreTrainedModel._keys_to_ignore_on_load_missing`` and
  ``_keys_to_ignore_on_load_unexpected``: the regular expressions transformers matches against
  a file's key names before it reports them missing or unexpected. The public road,
  ``from_pretrained(..., output_loading_info=True)``, applies them but reads every tensor; the
  check compares names only (safetensors headers and a model on the meta device), so it needs
  the patterns themselves.

(``PretrainedConfig._attn_implementation``, set before, is not needed: the configuration takes
``attn_implementation=`` as an argument, and a built model has ``set_attn_implementation``.)
"""

from __future__ import annotations

import re

__all__ = ["load_ignore_patterns"]


def load_ignore_patterns(model) -> tuple[list[re.Pattern], list[re.Pattern]]:
    """``(missing, unexpected)``: the compiled patterns of checkpoint keys that transformers lets a
    file of ``model`` (a ``PreTrainedModel``, built on any device) lack, and hold without a model
    parameter; empty lists where the model declares none (GPT-NeoX on 5.24: none missing, and
    ``attention.bias`` and ``attention.masked_bias`` unexpected)."""
    missing = getattr(model, "_keys_to_ignore_on_load_missing", None) or []
    unexpected = getattr(model, "_keys_to_ignore_on_load_unexpected", None) or []
    return [re.compile(p) for p in missing], [re.compile(p) for p in unexpected]
