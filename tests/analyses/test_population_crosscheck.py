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


def test_kept_rows_gain_new_runs_and_a_rerun_replaces_its_own_row():
    import pandas as pd

    def row(run, python, differ=0):
        return {"spec": "s", "run": run, "python": python, "torch": "2.13.0+cpu", "reference_python": "3.11.7",
                "files": 40, "differ": differ, "first_differing": "loss.csv" if differ else ""}  # fmt: skip

    kept = pd.DataFrame([row("a-seed0", "3.11.2"), row("a-seed0", "3.13.0")], columns=entry.COLUMNS)
    merged = entry.merge(kept, [row("a-seed0", "3.11.2", differ=3), row("b-seed0", "3.11.2")])
    assert merged[["run", "python", "differ"]].values.tolist() == [
        ["a-seed0", "3.13.0", 0],
        ["a-seed0", "3.11.2", 3],
        ["b-seed0", "3.11.2", 0],
    ]
    lines = entry.docs_block(merged.to_dict("records")).splitlines()
    assert len(lines) == 3 and "**3 differ** (first: loss.csv)" in lines[1]


def test_a_run_of_another_spec_is_refused_in_one_line_naming_the_spec():
    from interp.sources.catalogue import load_suite_spec

    cfg = load_suite_spec("population-heads-dhead")
    with pytest.raises(SystemExit) as stop:
        entry.crosscheck(sys.executable, "neox-2l-64d-1h-seed0", cfg, "population-heads-dhead")
    assert str(stop.value).startswith(
        "error: --run 'neox-2l-64d-1h-seed0' is not a run of population-heads-dhead; e.g. phi-2l-64d-8h-dh16-r8-seed0"
    )
