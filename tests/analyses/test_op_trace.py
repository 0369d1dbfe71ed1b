"""analyses.op_trace: the per-op trace that finds the kernel computing other bits (issue 19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from analyses.op_trace import OpRecorder, compare_traces, first_difference, read_trace, trace_training, write_trace
from interp.core import kernel_pins

ROOT = Path(__file__).resolve().parents[2]


def _small_step(x: torch.Tensor) -> list[dict]:
    with OpRecorder() as rec:
        w = torch.empty(4, 4).normal_(generator=torch.Generator().manual_seed(0))
        torch.nn.functional.gelu(x @ w).sum()
    return rec.rows


def test_recorder_names_the_first_op_that_differs_and_ignores_uninitialised_memory():
    x = torch.arange(8.0).reshape(2, 4)
    a, b = _small_step(x), _small_step(x)
    ops = [r["op"] for r in a]
    assert ops[:2] == ["aten::empty.memory_format", "aten::normal_"]
    assert a[0]["out"][0][2] == "uninit"  # garbage memory is not hashed
    assert first_difference(a, b) is None
    c = _small_step(x + 1)  # another input: the matmul is the first op to differ, its inputs differ
    first = first_difference(a, c)
    assert first is not None and first["op"] == "aten::mm" and first["same_inputs"] is False
    assert first["i"] == ops.index("aten::mm")


def test_compare_traces_reports_the_op_whose_kernel_differs(tmp_path):
    x = torch.arange(8.0).reshape(2, 4)
    rows = _small_step(x)
    doctored = json.loads(json.dumps(rows))
    i = [r["op"] for r in rows].index("aten::gelu")
    for later in doctored[i:]:  # gelu computes other bits from the same inputs; later ops inherit it
        for out in later["out"]:
            out[2] = "0" * 16
    a, b = {"kernels": {"k": "a"}, "rows": rows}, {"kernels": {"k": "b"}, "rows": doctored}
    write_trace(a, tmp_path / "a.jsonl")
    write_trace(b, tmp_path / "b.jsonl")
    text = compare_traces(read_trace(tmp_path / "a.jsonl"), read_trace(tmp_path / "b.jsonl"))
    assert f"the first: #{i} aten::gelu (same inputs: True)" in text
    assert "from the same inputs: aten::gelu" in text
    assert "identical" in compare_traces(a, a)


def test_read_trace_refuses_other_files_in_one_line(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"step": 1}\n')
    with pytest.raises(ValueError, match=r"x\.jsonl: line 1 has no 'kernels'"):
        read_trace(bad)
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="not an op trace"):
        read_trace(bad)
    with pytest.raises(ValueError, match="steps=0"):
        trace_training(0)


def test_the_trainer_step_traces_the_same_bits_twice(one_torch_thread):
    a, b = trace_training(1), trace_training(1)
    assert len(a["rows"]) > 500  # init, forward, backward, clipping, AdamW
    assert {"aten::normal_", "aten::gelu", "aten::_fused_adamw_"} & {r["op"] for r in a["rows"]}
    assert first_difference(a["rows"], b["rows"]) is None


@pytest.mark.slow
@pytest.mark.skipif(not kernel_pins.pins_apply(), reason=f"the kernel pins do not apply here: {kernel_pins.why_not()}")
def test_torch_default_kernels_first_differ_from_the_pinned_reference_in_the_initialisation(tmp_path):
    """Unpinned with ATen's DEFAULT kernels (MKL and oneDNN at AVX2), the trainer's first step
    first differs from the committed pinned reference trace (ATen at AVX2) at the initialisation's
    ``normal_``, on equal inputs: the trace names the kernel level's op, not a later symptom."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "MKL_CBWR": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
    }
    subprocess.run(
        [sys.executable, "-m", "analyses.op_trace", "--unpinned", "--out", str(tmp_path / "default.jsonl")],
        env={**env, "ATEN_CPU_CAPABILITY": "default"},
        check=True,
        capture_output=True,
    )
    reference = read_trace(ROOT / "analyses" / "reference" / "op_trace_pinned.jsonl")
    assert reference["kernels"]["cpu_capability"] == "AVX2" and reference["kernels"]["MKL_CBWR"] == "AVX2"
    first = first_difference(read_trace(tmp_path / "default.jsonl")["rows"], reference["rows"])
    assert first is not None and first["op"] == "aten::normal_" and first["same_inputs"] is True


@pytest.mark.slow
@pytest.mark.skipif(not kernel_pins.pins_apply(), reason=f"the kernel pins do not apply here: {kernel_pins.why_not()}")
def test_the_pinned_first_step_equals_the_reference_trace_op_for_op(tmp_path):
    """Issue 19: under the pins, the trainer's first step computes the committed reference's bits
    (Intel Xeon, Sapphire Rapids) op for op on this CPU, whatever its vendor and level; on an AMD
    EPYC this holds only with the vendor pin (docs/embedded.md, Kernel pins)."""
    env = {k: v for k, v in os.environ.items() if k not in (*kernel_pins.PINS, *kernel_pins.THREAD_VARS)}
    subprocess.run(
        [sys.executable, "-m", "analyses.op_trace", "--out", str(tmp_path / "pinned.jsonl")],
        env={**env, "PYTHONPATH": str(ROOT), "ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
        check=True,
        capture_output=True,
    )
    here = read_trace(tmp_path / "pinned.jsonl")
    reference = read_trace(ROOT / "analyses" / "reference" / "op_trace_pinned.jsonl")
    assert here["kernels"]["EMERGENCE_LENS_PINNED"] == "AVX2" and len(here["rows"]) == len(reference["rows"]) == 833
    assert first_difference(here["rows"], reference["rows"]) is None
