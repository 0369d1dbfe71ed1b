"""Checkpoints that ask for code of their own: a ``config.json`` with ``auto_map``.

transformers loads such a model by importing the Python files the checkpoint ships
(``trust_remote_code=True``: FastChat #2713, transformers #23959). This toolkit never runs a
checkpoint's code, so a step that asks for it has its own status, ``needs-remote-code``
(:func:`interp.sources.checkpoint_table`), is left out of the search and is refused in one line
naming what it asks for, instead of transformers' first sentence or "another model's shape".
"""

from __future__ import annotations

import json
from pathlib import Path


def remote_code_request(config_file: str | Path) -> str | None:
    """What custom code a ``config.json`` asks for, in one phrase, or None when it asks for none.

    Args:
        config_file: a checkpoint's ``config.json`` (a missing or unreadable file: None; the
            corrupt-file checks name that).

    Returns:
        ``"config.json asks for custom code (auto_map: AutoModelForCausalLM ->
        modeling_x.XForCausalLM, AutoConfig -> configuration_x.XConfig); this tool does not run
        checkpoint code"``: the model classes first, then the others, each sorted.
    """
    try:
        raw = json.loads(Path(config_file).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    auto_map = raw.get("auto_map") if isinstance(raw, dict) else None
    if not auto_map or not isinstance(auto_map, dict):
        return None

    def named(value) -> str:
        values = value if isinstance(value, list) else [value]
        return " / ".join(str(v) for v in values if v)

    keys = sorted(auto_map, key=lambda k: (not str(k).startswith("AutoModel"), str(k)))
    asked = ", ".join(f"{k} -> {named(auto_map[k])}" for k in keys)
    return f"config.json asks for custom code (auto_map: {asked}); this tool does not run checkpoint code"
