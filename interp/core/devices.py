"""Device choice, in one place: ``auto`` means CUDA when this torch build has a usable GPU,
else the CPU. A name is checked for its form before torch is imported, so a typo is refused at
once."""

from __future__ import annotations

import re
from typing import Any

VALID_DEVICES = "auto, cpu, cuda or cuda:N"
_DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
#: Model precisions a checkpoint can be loaded in (the one list; the attention softmax and the
#: metric stay float32 under the low ones: :func:`interp.sources.loading.upcast_softmax`).
DTYPES = ("float32", "bfloat16", "float16")


def check_device(device: str | None) -> str:
    """The device name (``None`` -> ``"auto"``) if its form is valid; torch is not imported.

    Raises:
        ValueError: any other name (the valid ones listed).
    """
    name = "auto" if device is None else str(device)
    if not _DEVICE.fullmatch(name):
        raise ValueError(f"device {name!r} is not valid: use {VALID_DEVICES}")
    return name


def check_dtype(dtype: str) -> str:
    """``dtype`` if it is one of :data:`DTYPES`; torch is not imported.

    Raises:
        ValueError: any other name (one line, the valid ones listed).
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}; valid dtypes: {', '.join(DTYPES)}")
    return dtype


def torch_dtype(dtype: str) -> Any:
    """The ``torch.dtype`` named by ``dtype`` (one of :data:`DTYPES`).

    Raises:
        ValueError: a name not in :data:`DTYPES` (one line, the valid ones listed).
    """
    import torch

    return getattr(torch, check_dtype(dtype))


def choose_device(device: str | None = "auto") -> str:
    """The torch device string to run on: ``auto`` -> ``"cuda"`` if available, else ``"cpu"``.

    Raises:
        ValueError: an invalid name, or a CUDA device on a machine or torch build without CUDA
            (or a ``cuda:N`` index beyond the GPUs present).
    """
    name = check_device(device)
    if name == "cpu":
        return name
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available():
        build = f"torch {torch.__version__}" + (" (a CPU-only build)" if torch.version.cuda is None else "")
        raise ValueError(f"device {name!r}: no CUDA GPU is usable here ({build}); use --device cpu or auto")
    index = int(name.split(":")[1]) if ":" in name else 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"device {name!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return name
