"""Checkpoint files that are not what their label says: corrupt files and shards shared between steps.

Two hazards beyond whole-checkpoint duplicates (:meth:`interp.checkpoints.CheckpointSource.duplicate_steps`):

* **corrupt**: a weight file cut short (a download interrupted) or with its header overwritten.
  A safetensors file is an 8-byte little-endian header length N, N bytes of JSON naming each
  tensor's dtype, shape and ``data_offsets`` into the data that follows, then the data
  (https://github.com/huggingface/safetensors, "Format"). :func:`safetensors_problem` checks that
  structure from the header alone (no tensor is read): a truncated file has less data than its
  header's offsets need, an overwritten header is not JSON or names offsets that do not fit.
* **partial-duplicate**: a sharded checkpoint whose shard is byte-identical to a shard of another
  step whose weights otherwise differ (pythia-12b's branches step50000 and step58000 carry the
  final model's first shard and their own others). Compared per shard by sha256 (the hub's LFS
  oid, so no download is needed online); the tensors of the shared shards are named from the
  shard's header or the checkpoint's ``*.index.json``.

Both kinds of step are left out of the search (:meth:`CheckpointSource.searchable_steps`) and
reported in ``checkpoints.csv`` (:func:`interp.checkpoints.checkpoint_table`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

#: Bytes per element of the safetensors dtypes.
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4,
               "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
#: Largest header accepted (the safetensors library's own limit is 100 MB).
MAX_HEADER_BYTES = 100_000_000


def safetensors_problem(path: str | Path) -> str | None:
    """What is wrong with a safetensors file's structure, or None when it is whole.

    Reads the 8-byte length and the JSON header only.

    Returns:
        One phrase (``"truncated: ..."``, ``"header overwritten: ..."``) or None.
    """
    path = Path(path)
    size = path.stat().st_size
    if size < 8:
        return f"truncated: {size} bytes, not even the 8-byte header length"
    with open(path, "rb") as handle:
        n = int.from_bytes(handle.read(8), "little")
        if n > min(size - 8, MAX_HEADER_BYTES):
            return (f"header overwritten or file truncated: the header length reads {n} bytes, the file holds "
                    f"{size - 8} after it")
        raw = handle.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return f"header overwritten: its {n} bytes are not JSON"
    if not isinstance(header, dict):
        return "header overwritten: not a JSON object of tensors"
    data = size - 8 - n
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = (int(v) for v in info["data_offsets"])
            shape = [int(d) for d in info["shape"]]
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            return f"header overwritten: tensor {name!r} has no dtype, shape and data_offsets"
        if not 0 <= start <= stop:
            return f"header overwritten: tensor {name!r} has data_offsets {[start, stop]}"
        if dtype in DTYPE_BYTES and (stop - start) != math.prod(shape) * DTYPE_BYTES[dtype]:
            return f"header overwritten: tensor {name!r} ({dtype} {shape}) spans {stop - start} bytes"
        end = max(end, stop)
    if end > data:
        return f"truncated: the tensors need {end} bytes of data, the file holds {data}"
    if end < data:
        return f"{data - end} bytes after the last tensor (the header does not describe the file)"
    return None


def file_problem(path: str | Path) -> str | None:
    """:func:`safetensors_problem` for ``.safetensors`` files; other files (pickle ``.bin``) are
    not checked (None)."""
    path = Path(path)
    return safetensors_problem(path) if path.name.endswith(".safetensors") else None


def tensor_names(folder: Path | None, file_name: str) -> list[str]:
    """Tensor names stored in ``folder/file_name``: from its header when the file is there, else
    from the folder's ``*.index.json`` weight map; [] when neither is readable."""
    if folder is None:
        return []
    path = folder / file_name
    if path.is_file() and safetensors_problem(path) is None:
        with open(path, "rb") as handle:
            n = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(n).decode("utf-8"))
        return sorted(k for k in header if k != "__metadata__")
    for index in sorted(folder.glob("*.index.json")):
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError):
            continue
        return sorted(t for t, f in weight_map.items() if f == file_name)
    return []


def shared_files(file_digests: dict[int, dict[str, str]], digests: dict[int, str]) -> dict[int, tuple[list[int], list[str]]]:
    """Steps that hold a weight file byte-identical to one of another step whose whole weights differ.

    Args:
        file_digests: step -> {weight file name: sha256 hex} (steps without them left out).
        digests: step -> the whole checkpoint's digest.

    Returns:
        ``{step: (other steps sharing a file, shared file names)}``, each sorted.
    """
    holders: dict[str, list[tuple[int, str]]] = {}
    for step, files in file_digests.items():
        for name, digest in files.items():
            holders.setdefault(digest, []).append((step, name))
    found: dict[int, tuple[set[int], set[str]]] = {}
    for group in holders.values():
        for step, name in group:
            others = {o for o, _ in group if o != step and digests.get(o) != digests.get(step)}
            if others:
                entry = found.setdefault(step, (set(), set()))
                entry[0].update(others)
                entry[1].add(name)
    return {step: (sorted(o), sorted(n)) for step, (o, n) in sorted(found.items())}


def describe_shared(names: Iterable[str], tensors: list[str], others: list[int], limit: int = 4) -> str:
    """``"shares model-00001-of-00002.safetensors (3 tensors: a, b, c) with step 2000"``."""
    shown = ", ".join(tensors[:limit]) + (f", ... ({len(tensors)} in all)" if len(tensors) > limit else "")
    what = f" ({len(tensors)} tensors: {shown})" if tensors else ""
    steps = ", ".join(map(str, others))
    return f"shares {', '.join(names)}{what} with step{'s' if len(others) > 1 else ''} {steps}"
