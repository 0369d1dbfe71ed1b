"""The interpreter cross-check of the population (analyses/population_crosscheck.py): the folder
comparison, its docs line, and the one-line refusal of an interpreter that lacks the requirements.
The training under another interpreter itself is the entry's job (minutes), not the tests'."""

from __future__ import annotations

import sys

import pytest

from analyses import population_crosscheck as entry


def test_compare_folders_names_each_differing_or_missing_file(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "step0").mkdir(parents=True)
        (root / "step100").mkdir(parents=True)
        (root / "step0" / "model.safetensors").write_bytes(b"\x00\x01")
        (root / "loss.csv").write_text("step,loss\n0,5.5\n")
    (a / "step100" / "model.safetensors").write_bytes(b"\x02")
    (b / "step100" / "model.safetensors").write_bytes(b"\x02")
    assert entry.compare_folders(a, b) == (3, [])
    (b / "step100" / "model.safetensors").write_bytes(b"\x03")
    (a / "step100" / "optimizer.safetensors").write_bytes(b"\x04")
    n, differ = entry.compare_folders(a, b)
    assert (n, differ) == (4, ["step100/model.safetensors", "step100/optimizer.safetensors"])
    row = {"run": "r", "python": "3.13.0", "torch": "2.13.0+cu130", "reference_python": "3.11.7", "files": n}
    line = entry.docs_block([row | {"differ": 2, "first_differing": differ[0]}])
    assert line == (
        "- r under Python 3.13.0 (torch 2.13.0+cu130) against Python 3.11.7: 4 files (checkpoint weights, "
        "optimizer state, loss curve), **2 differ** (first: step100/model.safetensors).\n"
    )
    assert "every file byte-identical" in entry.docs_block([row | {"differ": 0, "first_differing": ""}])


def test_an_interpreter_without_the_requirements_is_refused_in_one_line(tmp_path):
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S -I "$@"\n')  # no site-packages: no torch
    bare.chmod(0o755)
    with pytest.raises(SystemExit) as stop:
        entry.interpreter_facts(str(bare))
    message = str(stop.value)
    assert message.startswith(f"error: --python {bare} cannot import torch and transformers: ") and "\n" not in message
    assert "ModuleNotFoundError" in message
