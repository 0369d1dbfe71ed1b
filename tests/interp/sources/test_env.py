"""`emergence env` / `el.environment_report()`: the machine, and whether it trains the documented
suite; `--version`; the command listing and a closed pipe (the command line's manners)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from emergence_lens.cli import app
from interp.core import kernel_pins
from interp.sources import catalogue, environment, machine
from interp.sources.environment import environment_key_parts
from interp.sources.machine import DOCUMENTED_SUITES, environment_report

REPO = Path(__file__).resolve().parents[3]
runner = CliRunner()


def test_the_documented_folder_is_the_hash_of_its_parts_and_the_pages_quote_it():
    """The record cannot drift from the code (the config's digest, the key's hash of its parts)
    nor from the pages that quote the suite."""
    documented = DOCUMENTED_SUITES["embedded"]
    config_digest, key = documented["folder"].split("-")
    assert config_digest == catalogue.SUITES["embedded"].digest()
    assert key == environment.hash_parts(documented["key_parts"])
    for page in documented["pages"]:
        assert documented["folder"] in (REPO / page).read_text(), page


def test_report_says_whether_this_machine_trains_the_documented_suite(tmp_path):
    report = environment_report(tmp_path)
    json.dumps(report)  # JSON-safe as documented
    suite = {s["name"]: s for s in report["suites"]}["embedded"]
    here = environment_key_parts(catalogue.FULL)
    same = here == DOCUMENTED_SUITES["embedded"]["key_parts"]
    assert suite["same_as_documented"] is same and (suite["differs"] == {}) is same
    assert suite["folder"] == catalogue.suite_dir(catalogue.FULL, tmp_path).name
    assert (suite["runs"], suite["runs_cached"]) == (6, 0)  # an empty cache
    cpuinfo = Path("/proc/cpuinfo")
    assert report["cpu"]["avx512f"] == ("avx512f" in (cpuinfo.read_text() if cpuinfo.is_file() else ""))
    assert report["kernel_pins"]["apply"] is kernel_pins.pins_apply()
    assert report["python"] == platform.python_version()
    assert report["emergence_lens"]["version"] == version("emergence-lens")


def test_cached_and_interrupted_runs_are_counted(tmp_path):
    run = catalogue.suite_dir(catalogue.QUICK, tmp_path) / catalogue.QUICK.run_names()[0]
    run.mkdir(parents=True)
    (run / "suite.json").write_text("{}")
    (run.parent / f".tmp-neox-2l-64d-seed2-{os.getpid()}").mkdir()  # a live worker's unfinished folder
    suite = {s["name"]: s for s in environment_report(tmp_path)["suites"]}["embedded-quick"]
    assert (suite["runs"], suite["runs_cached"], suite["interrupted"]) == (2, 1, [])
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    killed = run.parent / f".tmp-neox-2l-64d-seed2-{int(dead.stdout)}"  # a killed worker's, nothing kept
    killed.mkdir()
    suite = {s["name"]: s for s in environment_report(tmp_path)["suites"]}["embedded-quick"]
    assert suite["runs_cached"] == 1 and suite["interrupted"] == [{"folder": killed.name, "resumes_from_step": None}]


def _env_in_a_fresh_process(tmp_path, **variables) -> dict:
    """``emergence env --json`` in its own process (the pins' verdict is cached per process)."""
    done = subprocess.run(
        [sys.executable, "-m", "emergence_lens", "env", "--json", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, **variables},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_unpinned_kernels_are_named_as_the_part_that_differs(tmp_path):
    report = _env_in_a_fresh_process(tmp_path, EMERGENCE_LENS_UNPINNED="1", ATEN_CPU_CAPABILITY="default")
    suite = {s["name"]: s for s in report["suites"]}["embedded"]
    assert not report["kernel_pins"]["apply"] and report["cpu"]["torch_level"] == "DEFAULT"
    assert not suite["same_as_documented"] and suite["folder"] != suite["documented_folder"]
    assert "EMERGENCE_LENS_UNPINNED=1" in suite["differs"]["cpu"]
    unpinned = subprocess.run(
        [sys.executable, "-m", "emergence_lens", "env", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "EMERGENCE_LENS_UNPINNED": "1"},
        timeout=300,
    ).stdout
    assert "NOT the suite docs/results.md" in unpinned and "cpu: the kernel pins do not apply here" in unpinned
    text = runner.invoke(app, ["env", "--cache", str(tmp_path)]).output
    if kernel_pins.pins_apply() and environment_key_parts(catalogue.FULL) == DOCUMENTED_SUITES["embedded"]["key_parts"]:
        assert "this machine trains the same weights" in text and "NOT the suite" not in text


def test_version_is_the_packages():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output == f"emergence-lens {pyproject}\n"
    import emergence_lens as el

    assert el.__version__ == pyproject and "__version__" in dir(el)


def test_the_command_listing_gives_each_command_one_paragraph_of_prose():
    """typer's rich mode would keep a docstring's line breaks in ``emergence --help``'s listing."""
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "220"}, terminal_width=220)
    assert result.exit_code == 0
    assert "find each seed's point of emergence, rank heads by delta" in result.output
    assert ":data:" not in result.output


def test_a_reader_that_leaves_early_gets_no_error():
    """``emergence list-models | head -1``: a pipe whose reader has gone ends the command quietly
    (here the reader is gone before the command writes, so every write meets the closed pipe)."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "emergence_lens", "list-models"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 1  # click's status for a closed pipe
    assert done.stderr == "", done.stderr


@pytest.mark.parametrize("part", ["corpus", "torch", "cpu"])
def test_each_differing_part_says_why(part):
    line = machine._why_part_differs(part, DOCUMENTED_SUITES["embedded"])
    expected = {"corpus": "interp/data/training-text-v1.xz", "torch": "torch 2.13.0 trained", "cpu": "kernel"}[part]
    assert expected in line


def test_the_suite_key_names_the_torch_release_not_its_build(monkeypatch):
    """The CPU and the CUDA build of one torch release train the same bytes on the CPU (measured,
    docs/embedded.md): the key keeps the release, so both are told they train the documented suite."""
    from interp.sources import environment

    assert environment.torch_release("2.13.0+cu130") == environment.torch_release("2.13.0+cpu") == "2.13.0"
    assert environment.torch_release("2.13.0") == "2.13.0" and environment.torch_release(None) is None
    keys = {}
    for build in ("2.13.0+cpu", "2.13.0+cu130", "2.14.0+cpu"):
        real = environment.environment

        def with_build(cfg, build=build, real=real):
            env = real(cfg)
            return {**env, "packages": {**env["packages"], "torch": build}}

        monkeypatch.setattr(environment, "environment", with_build)
        keys[build] = environment.environment_key(catalogue.FULL)
        monkeypatch.setattr(environment, "environment", real)
    assert keys["2.13.0+cpu"] == keys["2.13.0+cu130"] != keys["2.14.0+cpu"]


def test_a_suite_cached_in_another_environment_is_named_before_training_again(tmp_path):
    """A new user whose transformers is newer than the one a cached suite was trained with sees
    one line naming the cached folder and the part of the key that differs (a new user's report:
    the quick suite silently trained again under transformers 5.25.0)."""
    import json
    from importlib.metadata import version

    from interp.sources.catalogue import SUITES, suite_dir
    from interp.sources.environment import why_trained_here

    cfg = SUITES["embedded-quick"]
    here = suite_dir(cfg, tmp_path)
    assert why_trained_here(here, cfg) is None  # nothing cached anywhere
    other = here.parent / f"{here.name.split('-')[0]}-0badf00d"
    (other / "neox-2l-64d-seed1").mkdir(parents=True)
    (other / ".tmp-neox-2l-64d-seed2-1").mkdir()  # an interrupted run is no trained copy
    meta = {"environment": {"corpus_sha256": "x", "packages": {"torch": "2.13.0+cu130", "transformers": "5.0.0"}}}
    (other / "neox-2l-64d-seed1" / "suite.json").write_text(json.dumps(meta))
    line = why_trained_here(here, cfg)
    assert line.startswith(f"note: {other} holds this suite trained in another environment (")
    parts = environment_key_parts(cfg)
    differ = [f"corpus x there, {parts['corpus']} here"]
    if parts["torch"] != "2.13.0":  # a build label (+cu130) is no difference: the release is compared
        differ.append(f"torch 2.13.0 there, {parts['torch']} here")
    differ.append(f"transformers 5.0.0 there, {version('transformers')} here")
    assert f"another environment ({'; '.join(differ)});" in line
    assert line.endswith(
        f"trains its own copy in {here.name} (constraints.txt pins the documented versions; `emergence env` compares them)"
    )
