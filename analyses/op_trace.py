"""Per-op trace of the embedded trainer's first step: which operation first computes other bits.

Issue 19 asks for identical trained bytes on every x86-64 CPU. Where two machines (or two
kernel settings) train different weights, the sha256 of the result says only *that* they differ;
this trace says *where*. It runs the quick suite's first run (``neox-2l-64d-seed1``) for
``--steps`` optimizer steps (1 by default: initialisation, one forward, one backward, gradient
clipping and one AdamW update) under a :class:`torch.utils._python_dispatch.TorchDispatchMode`
(through :mod:`interp.core.adapters.torch`, the one place the project uses torch's private names)
that records every ATen operation in call order: its name, and for each tensor output its
shape, dtype and the sha256 of its bytes (first 16 hex digits). Two traces are compared op by
op; the first op whose outputs differ while its inputs were the same bits is the kernel to fix
(or to route elsewhere), since every later difference may only propagate it.

By default the trace runs the way the suite trains, in a worker started with the kernel pins
(:func:`interp.core.kernel_pins.run_pinned`); ``--unpinned`` traces in this process with the
caller's environment (``ATEN_CPU_CAPABILITY``, ``MKL_CBWR``, ``ONEDNN_MAX_CPU_ISA`` decide).

Usage::

    python -m analyses.op_trace --out trace.jsonl [--steps 1] [--unpinned]
    python -m analyses.op_trace --compare here.jsonl there.jsonl

On an AMD machine: trace there under the pins and compare with the reference trace of the
machine the suite was made on, ``analyses/reference/op_trace_pinned.jsonl`` (Intel Xeon Sapphire
Rapids, the pins; docs/embedded.md, "Kernel pins")::

    python -m analyses.op_trace --out amd.jsonl
    python -m analyses.op_trace --compare analyses/reference/op_trace_pinned.jsonl amd.jsonl
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import torch

from interp.cli.options import description
from interp.core.adapters.torch import TorchDispatchMode, written_arguments

__all__ = ["UNINITIALISED", "OpRecorder", "compare_traces", "first_difference", "main", "read_trace", "trace_training"]


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in an operation's arguments or outputs: ``value`` itself, or those inside its
    lists, tuples and dict values (nested), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def tensor_digest(t: torch.Tensor) -> str:
    """First 16 hex digits of the sha256 of ``t``'s bytes (contiguous, on CPU)."""
    data = t.detach()
    if data.is_conj():
        data = data.resolve_conj()
    return hashlib.sha256(data.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()).hexdigest()[:16]


#: Ops whose outputs are uninitialised memory: recorded as ``"uninit"``, never hashed.
UNINITIALISED = {
    "aten::empty.memory_format",
    "aten::empty_like",
    "aten::empty_strided",
    "aten::new_empty",
    "aten::new_empty_strided",
}


class OpRecorder(TorchDispatchMode):
    """Records ``{"i", "op", "out": [[shape, dtype, sha16], ...], "inputs": sha16 of the input digests}``
    for every ATen operation run under it, in call order (``self.rows``).

    Outputs of :data:`UNINITIALISED` ops hold whatever memory held and are recorded as
    ``"uninit"``; as inputs (e.g. the buffer ``normal_`` fills) they count as ``"uninit"`` until an
    op writes into them (an argument the op's schema marks as written).
    """

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self._uninit: set[int] = set()

    def _digest(self, t: torch.Tensor) -> str:
        return "uninit" if t.untyped_storage().data_ptr() in self._uninit else tensor_digest(t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        inputs = [self._digest(t) for t in _tensors((args, kwargs))]
        out = func(*args, **kwargs)
        name = str(func.name())
        writes = written_arguments(func)
        written = [args[i] for i, _ in writes if i < len(args) and isinstance(args[i], torch.Tensor)]
        written += [kwargs[arg] for _, arg in writes if isinstance(kwargs.get(arg), torch.Tensor)]
        for t in written:
            self._uninit.discard(t.untyped_storage().data_ptr())
        tensors = _tensors(out)
        if name in UNINITIALISED:
            self._uninit.update(t.untyped_storage().data_ptr() for t in tensors)
        outs = [[list(t.shape), str(t.dtype).removeprefix("torch."), self._digest(t)] for t in tensors]
        self.rows.append(
            {
                "i": len(self.rows),
                "op": name,
                "out": outs,
                "inputs": hashlib.sha256("".join(inputs).encode()).hexdigest()[:16],
            }
        )
        return out


def trace_training(steps: int = 1) -> dict:
    """Train ``neox-2l-64d-seed1`` of the quick suite for ``steps`` steps in this process under
    :class:`OpRecorder`; returns ``{"kernels": {...}, "rows": [...]}`` (the kernel level torch
    chose, the kernel variables, one row per ATen op).

    Raises:
        ValueError: ``steps`` < 1.
    """
    if steps < 1:
        raise ValueError(f"steps={steps}: the trace needs at least 1 optimizer step")
    from interp.core import kernel_pins
    from interp.sources import catalogue, embedded
    from interp.sources.environment import cpu_model

    recorder = OpRecorder()
    with recorder:
        embedded.train_run(catalogue.SMALL, 1, catalogue.QUICK, None, stop_step=steps)
    return {
        "kernels": {
            "cpu": cpu_model(),
            "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            **kernel_pins.kernel_env(),
        },
        "rows": recorder.rows,
    }


def write_trace(trace: dict, path: Path) -> None:
    """``path``: a first line ``{"kernels": ...}``, then one JSON line per op (written atomically)."""
    from interp.core.io import atomic_write_text

    lines = [json.dumps({"kernels": trace["kernels"]})] + [json.dumps(row) for row in trace["rows"]]
    atomic_write_text(path, "\n".join(lines) + "\n")


def read_trace(path: Path) -> dict:
    """The trace :func:`write_trace` wrote.

    Raises:
        ValueError: ``path`` is not such a trace (names the file and the line).
    """
    lines = Path(path).read_text().splitlines()
    try:
        head = json.loads(lines[0])
        rows = [json.loads(line) for line in lines[1:]]
    except (IndexError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: not an op trace written by analyses.op_trace ({err})") from None
    if "kernels" not in head:
        raise ValueError(f"{path}: line 1 has no 'kernels': not an op trace written by analyses.op_trace")
    return {"kernels": head["kernels"], "rows": rows}


def first_difference(a: Sequence[dict], b: Sequence[dict]) -> dict | None:
    """The first op (in call order) whose outputs differ between traces ``a`` and ``b``, or None.

    Returns:
        ``{"i", "op", "same_inputs", "a", "b"}``: ``same_inputs`` says whether that op's inputs
        were the same bits in both traces (then this op's kernel computed differently; otherwise
        the difference came in through an input, e.g. an op of another sequence); ``a``/``b`` its
        outputs. A difference in the op sequence itself (another op name at the same index) is
        reported with ``same_inputs`` None.
    """
    for row_a, row_b in zip(a, b):
        if row_a["op"] != row_b["op"]:
            return {
                "i": row_a["i"],
                "op": f"{row_a['op']} / {row_b['op']}",
                "same_inputs": None,
                "a": row_a,
                "b": row_b,
            }
        if row_a["out"] != row_b["out"]:
            return {
                "i": row_a["i"],
                "op": row_a["op"],
                "same_inputs": row_a["inputs"] == row_b["inputs"],
                "a": row_a["out"],
                "b": row_b["out"],
            }
    if len(a) != len(b):
        i = min(len(a), len(b))
        return {"i": i, "op": "(end of the shorter trace)", "same_inputs": None, "a": len(a), "b": len(b)}
    return None


def compare_traces(a: dict, b: dict) -> str:
    """A few lines for a person: the two traces' kernels, how many ops differ, the first one and
    the ops (by name) whose kernels differ on equal inputs."""
    rows_a, rows_b = a["rows"], b["rows"]
    lines = [f"A: {a['kernels']}", f"B: {b['kernels']}", f"ops: {len(rows_a)} / {len(rows_b)}"]
    first = first_difference(rows_a, rows_b)
    if first is None:
        lines.append("identical: every op's outputs are the same bits")
        return "\n".join(lines)
    differing = sum(ra["out"] != rb["out"] for ra, rb in zip(rows_a, rows_b))
    sources = sorted(
        {ra["op"] for ra, rb in zip(rows_a, rows_b) if ra["out"] != rb["out"] and ra["inputs"] == rb["inputs"]}
    )
    lines.append(
        f"{differing} ops differ; the first: #{first['i']} {first['op']} (same inputs: {first['same_inputs']})"
    )
    lines.append(f"ops that compute other bits from the same inputs: {', '.join(sources) or 'none'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> str | None:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("--out", type=Path, help="write the trace here (JSON lines)")
    parser.add_argument("--steps", type=int, default=1, help="optimizer steps traced (default 1)")
    parser.add_argument("--unpinned", action="store_true", help="trace in this process, the caller's kernels")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="compare two traces")
    args = parser.parse_args(argv)
    if args.compare:
        text = compare_traces(read_trace(args.compare[0]), read_trace(args.compare[1]))
        print(text)
        return text
    if args.out is None:
        parser.error("give --out FILE (trace) or --compare A B")
    if args.unpinned:
        trace = trace_training(args.steps)
    else:
        from interp.core import kernel_pins

        trace = kernel_pins.run_pinned(trace_training, args.steps, what="op trace")
    write_trace(trace, args.out)
    print(f"{len(trace['rows'])} ops traced ({trace['kernels']}); written to {args.out}")
    return None


if __name__ == "__main__":
    main()
