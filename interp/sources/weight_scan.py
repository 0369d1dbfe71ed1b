"""One pass over a weight file: its sha256 and the tensors that hold a value that is not finite.

A diverged step (a loss spike to NaN, one overflow to inf) is a whole, well-formed file whose
numbers are meaningless: scored, it gives accuracy 0 and p(answer) NaN, a fake drop that the
search would take for a real one. A local step's weight files are read once anyway, to hash them
(:meth:`interp.sources.LocalSuiteSource.digest`); :func:`scan_file` checks the values in that same
read, tensor by tensor, from the bit patterns: a float is NaN or ±inf exactly when its exponent
bits are all ones (IEEE 754-2019, section 3.4), so ``(bits & mask) == mask`` with the exponent mask
of float16 (``0x7C00``), bfloat16 (``0x7F80``), float32 and float64 finds them without converting
a value. Integer, bool and 8-bit float tensors are not checked.

Cost, measured on a 410m-sized step (an 810 MB float16 safetensors file, warm page cache, a
2-vCPU AMD EPYC shared with other work; ``benchmarks/bench_weight_scan.py``, best of 5): sha256
alone 1.00 s, sha256 and the check in the same read 1.02 s (1.02x; 0.98x to 1.04x over three runs,
12.3 s against 12.9 s under a load of 24). No byte is read twice.

A file whose digest is known without reading it (a hub cache's blob is named by its sha256) is
not read before it loads; its values are checked when they are in memory
(:func:`non_finite_names`), and the load is refused then.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

#: safetensors dtype -> (unsigned integer view, exponent mask) of the float dtypes checked.
EXPONENT_MASKS: dict[str, tuple[type, int]] = {
    "F16": (np.uint16, 0x7C00),
    "BF16": (np.uint16, 0x7F80),
    "F32": (np.uint32, 0x7F80_0000),
    "F64": (np.uint64, 0x7FF0_0000_0000_0000),
}
#: Bytes read at a time (a multiple of every element size).
CHUNK_BYTES = 1 << 22
#: Tensor names shown in a reason (then the count says how many in all).
SHOWN = 3


def _layout(path: Path) -> tuple[int, list[tuple[int, int, str, str]]]:
    """(bytes before the data, [(start, stop, dtype, name), ...] sorted by start) of a whole file."""
    with open(path, "rb") as handle:
        n = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(n).decode("utf-8"))
    spans = [
        (int(info["data_offsets"][0]), int(info["data_offsets"][1]), str(info["dtype"]), name)
        for name, info in header.items()
        if name != "__metadata__"
    ]
    return 8 + n, sorted(spans)


def _has_non_finite(data: bytes | memoryview, dtype: str) -> bool:
    """Whether any value of ``data`` (whole elements of ``dtype``) is NaN or ±inf: with the sign
    bit cleared, a value is not finite exactly when its bits are at least the exponent mask."""
    view, mask = EXPONENT_MASKS[dtype]
    bits: np.ndarray = np.frombuffer(data, dtype=view)
    if not bits.size:
        return False
    magnitude = np.bitwise_and(bits, view(np.iinfo(view).max >> 1))  # the sign bit cleared
    return bool(magnitude.max() >= view(mask))


def scan_file(path: str | Path) -> tuple[str, list[str]]:
    """sha256 hex of a file's bytes and, for a safetensors file, the names of its tensors that
    hold a NaN or an inf, from one read of the file.

    Args:
        path: a weight file; a ``.safetensors`` file must be structurally whole
            (:func:`interp.sources.checkpoint_integrity.safetensors_problem` passed); any other
            file is only hashed.

    Returns:
        ``(sha256 hex, sorted names of the tensors not finite)``; the names are ``[]`` for a file
        that is not safetensors.
    """
    path = Path(path)
    digest = hashlib.sha256()
    if not path.name.endswith(".safetensors"):
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
                digest.update(chunk)
        return digest.hexdigest(), []
    base, spans = _layout(path)
    bad: set[str] = set()
    with open(path, "rb") as handle:
        position = 0

        def read_to(end: int, dtype: str | None, name: str) -> None:
            nonlocal position
            while position < end:
                size = min(CHUNK_BYTES, end - position)
                chunk = handle.read(size)
                if not chunk:
                    return
                digest.update(chunk)
                if dtype in EXPONENT_MASKS and name not in bad and _has_non_finite(chunk, dtype):
                    bad.add(name)
                position += len(chunk)

        for start, stop, dtype, name in spans:
            read_to(base + start, None, "")  # the header and any gap: hashed only
            read_to(base + stop, dtype, name)
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest(), sorted(bad)


def non_finite_names(tensors: Mapping[str, object] | Iterable[tuple[str, object]]) -> list[str]:
    """Names of the floating-point tensors that hold a NaN or an inf (``torch.isfinite``), sorted.

    Args:
        tensors: ``{name: torch.Tensor}`` (a state dict, the tensors read for a weight swap) or
            ``(name, tensor)`` pairs (``model.named_parameters()``).
    """
    import torch

    items = tensors.items() if isinstance(tensors, Mapping) else tensors
    return sorted(
        name
        for name, tensor in items
        if isinstance(tensor, torch.Tensor)
        and tensor.is_floating_point()
        and tensor.numel()
        and not bool(torch.isfinite(tensor).all())
    )


def describe_non_finite(names: Sequence[str]) -> str:
    """``"weights not finite: 2 tensors, e.g. a, b"``."""
    shown = ", ".join(sorted(names)[:SHOWN])
    return f"weights not finite: {len(names)} tensor{'' if len(names) == 1 else 's'}, e.g. {shown}"
