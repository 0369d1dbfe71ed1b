"""Every ``emergence`` command refuses bad arguments before it loads or trains anything: exit
status 2, one ``error:`` line (or typer's usage panel for a parser error), no traceback, and no
output folder left behind. Nothing here trains a model: the embedded cache points at an empty
folder, and a test fails if anything appears in it."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from typer.testing import CliRunner

from emergence_lens.cli import app
from tests.conftest import save_byte_tokenizer

runner = CliRunner()
SPEC_OK = "task: linear-map\nS: 8\nsteps: 5\neval_every: 5\ntokens_per_step: 256\neval_tokens: 256\n"

# (id, arguments, text the output must hold). SUITE, OUT, PAGE, FILE, SPEC and BADYAML are filled in
# per test: a tiny local suite (steps 0, 100, 200), the output folder (must not appear; PAGE a page in it), an
# existing plain file, a valid sweep spec and one with a YAML syntax error at line 3, column 5.
BAD = [
    (
        "bisect-device-gpu",
        ["bisect", "SUITE", "--device", "gpu", "--out", "OUT"],
        "device 'gpu' is not valid: use auto, cpu, cuda",
    ),
    (
        "bisect-device-cuda-cpu-torch",
        ["bisect", "SUITE", "--device", "cuda", "--out", "OUT"],
        "no CUDA GPU is usable here",
    ),
    ("bisect-task", ["bisect", "SUITE", "--task", "nope", "--out", "OUT"], "unknown task 'nope'"),
    (
        "bisect-ioi-byte-tokenizer",
        ["bisect", "SUITE", "--task", "ioi", "--out", "OUT"],
        "IOI needs a word-piece vocabulary",
    ),
    (
        "rank-heads-two-tasks",
        ["rank-heads", "SUITE", "--pre", "0", "--post", "100", "--task", "repetition,token-repetition"],
        "rank-heads works on one task; got 2",
    ),
    ("bisect-threshold", ["bisect", "SUITE", "--threshold", "2", "--out", "OUT"], "threshold=2.0 must be in (0, 1]"),
    ("bisect-out-is-file", ["bisect", "SUITE", "--out", "FILE"], "is an existing file"),
    (
        "bisect-unknown-id",
        ["bisect", "EleutherAI/pythia-71m", "--out", "OUT"],
        "unknown checkpoint source 'EleutherAI/pythia-71m'",
    ),
    (
        "bisect-bad-name-after-embedded",
        ["bisect", "embedded", "not-a-source", "--out", "OUT"],
        "unknown checkpoint source 'not-a-source'",
    ),
    ("bisect-hub-repo-not-cached-after-embedded", ["bisect", "embedded", "nope/nope", "--out", "OUT"], "nope/nope"),
    ("curve-steps", ["curve", "SUITE", "--steps", "0,1k", "--out", "OUT"], "--steps: '1k' is not an integer"),
    (
        "curve-missing-step",
        ["curve", "SUITE", "--steps", "0,150", "--out", "OUT"],
        "no checkpoint at step 150; nearest: 100, 200",
    ),
    (
        "curve-embedded-step",
        ["curve", "embedded-quick", "--steps", "150", "--out", "OUT"],
        "embedded-quick/neox-2l-64d-seed1 has no checkpoint at step 150; nearest: 100, 200",
    ),
    (
        "rank-heads-embedded-step",
        ["rank-heads", "embedded/neox-2l-128d-seed0", "--pre", "1250", "--post", "1300", "--out", "OUT"],
        "has no checkpoint at step 1250; nearest: 1200, 1300",
    ),
    ("curve-prompts", ["curve", "SUITE", "--n-prompts", "0", "--out", "OUT"], "Invalid value"),
    (
        "rank-heads-prescreen",
        ["rank-heads", "SUITE", "--pre", "100", "--post", "200", "--prescreen-top-n", "-3", "--out", "OUT"],
        "prescreen_top_n=-3: must be an integer >= 1",  # StudyConfig's, as every command's settings
    ),
    (
        "rank-heads-suite-of-runs",
        ["rank-heads", "embedded", "--pre", "0", "--post", "100", "--out", "OUT"],
        "rank-heads takes one run, and 'embedded' names 6: use one of embedded/neox-2l-64d-seed0",
    ),
    (
        "rank-heads-same-step",
        ["rank-heads", "SUITE", "--pre", "100", "--post", "100", "--out", "OUT"],
        "two different checkpoints",
    ),
    (
        "rank-heads-reversed",
        ["rank-heads", "SUITE", "--pre", "200", "--post", "100", "--out", "OUT"],
        "--pre 200 is later than --post 100",
    ),
    (
        "rank-heads-missing-step",
        ["rank-heads", "SUITE", "--pre", "150", "--post", "200", "--out", "OUT"],
        "no checkpoint at step 150; nearest: 100, 200",
    ),
    (
        "rank-heads-method",
        ["rank-heads", "SUITE", "--pre", "100", "--post", "200", "--method", "exact", "--out", "OUT"],
        "method='exact'; valid: fast, reference, attribution",
    ),
    ("run-device", ["run", "embedded", "--device", "gpu", "--out", "OUT"], "device 'gpu' is not valid"),
    (
        "run-method",
        ["run", "embedded", "--method", "exact", "--out", "OUT"],
        "method='exact'; valid: fast, reference, attribution",
    ),
    (
        "run-missing-folder",
        ["run", "./no/such/suite", "--out", "OUT"],
        "local suite folder './no/such/suite' does not exist",
    ),
    ("demo-device", ["demo", "--device", "tpu", "--out", "OUT"], "device 'tpu' is not valid"),
    ("demo-out-is-file", ["demo", "--out", "FILE"], "is an existing file"),
    ("synth-train-out-is-file", ["synth", "train", "--S", "8", "--steps", "5", "--out", "FILE"], "is an existing file"),
    ("synth-train-task", ["synth", "train", "--task", "sorting", "--out", "OUT"], "task='sorting' is unknown"),
    ("synth-train-device", ["synth", "train", "--device", "gpu", "--out", "OUT"], "device="),
    (
        "synth-train-context",
        ["synth", "train", "--S", "8", "--n-ctx", "4", "--out", "OUT"],
        "exceeds the model context",
    ),
    (
        "sweep-yaml-syntax",
        ["sweep", "BADYAML", "--out", "OUT"],
        "bad.yaml:3:5: YAML syntax error: mapping values are not allowed here",
    ),
    ("sweep-unknown-field", ["sweep", "SPECFIELD", "--out", "OUT"], "unknown config field 'stepz'"),
    ("sweep-out-is-file", ["sweep", "SPEC", "--out", "FILE"], "exists and is not a folder"),
    ("sweep-jobs", ["sweep", "SPEC", "--jobs", "0", "--out", "OUT"], "Invalid value"),
    ("results-unknown", ["results", "--only", "nope", "--out", "OUT"], "unknown analysis 'nope'; valid: main_job"),
    ("env-cache-is-file", ["env", "--cache", "FILE"], "(--cache) is a file, not a folder"),
    (
        "download-no-choice",
        ["download", "EleutherAI/pythia-70m-seed3"],
        "choose what to fetch with one of --steps 1000,2000, --all or --grid 30",
    ),
    (
        "download-two-choices",
        ["download", "EleutherAI/pythia-70m-seed3", "--all", "--grid", "5"],
        "(got --all and --grid)",
    ),
    ("download-steps", ["download", "EleutherAI/pythia-70m-seed3", "--steps", "1k"], "--steps: '1k' is not an integer"),
    (
        "download-grid",
        ["download", "EleutherAI/pythia-70m-seed3", "--grid", "1"],
        "grid=1: need an integer of at least 2",
    ),
    (
        "download-unknown-source",
        ["download", "EleutherAI/pythia-71m", "--all"],
        "unknown checkpoint source 'EleutherAI/pythia-71m'",
    ),
    ("download-embedded", ["download", "embedded-quick", "--all"], "'embedded-quick' is not a hub repository"),
    ("download-cache-is-file", ["download", "EleutherAI/pythia-70m-seed3", "--all", "--cache", "FILE"], "is a file"),
    ("results-out-is-file", ["results", "--only", "depth", "--out", "FILE"], "is an existing file"),
    ("results-jobs", ["results", "--jobs", "0", "--out", "OUT"], "Invalid value"),
    (
        "rank-heads-metric",
        ["rank-heads", "SUITE", "--pre", "100", "--post", "200", "--metric", "accuracy", "--out", "OUT"],
        "metric='accuracy'; valid: p, logprob, logit-diff",
    ),
    ("demo-metric", ["demo", "--metric", "kl", "--out", "OUT"], "metric='kl'; valid"),
    ("bisect-resolution", ["bisect", "SUITE", "--resolution", "0", "--out", "OUT"], "Invalid value"),
    ("bisect-hold", ["bisect", "SUITE", "--hold", "-1", "--out", "OUT"], "hold=-1: must be an integer >= 0"),
    ("run-hold", ["run", "SUITE", "--hold", "-2", "--out", "OUT"], "hold=-2: must be an integer >= 0"),  # StudyConfig's
    ("demo-hold", ["demo", "--hold", "-1", "--out", "OUT"], "hold=-1: must be an integer >= 0"),
    ("run-ks", ["run", "SUITE", "--ks", "1,0", "--out", "OUT"], "ks item=0: must be an integer >= 1"),
    (
        "run-ks-text",
        ["run", "SUITE", "--ks", "1,two", "--out", "OUT"],
        "Invalid value for '--ks': Value error, ks: 'two'",
    ),
    ("demo-n-boot", ["demo", "--n-boot", "-5", "--out", "OUT"], "n_boot=-5: must be an integer >= 0"),
    ("zoom-reversed", ["zoom", "SUITE", "--pre", "200", "--post", "100"], "--pre 200 must be earlier than --post 100"),
    (
        "zoom-suite-of-runs",
        ["zoom", "embedded", "--pre", "0", "--post", "100"],
        "zoom takes one run, and 'embedded' names 6",
    ),
    (
        "zoom-embedded-step",
        ["zoom", "embedded/neox-2l-128d-seed0", "--pre", "1250", "--post", "1300"],
        "has no checkpoint at step 1250; nearest: 1200, 1300",
    ),
    ("zoom-not-trained-here", ["zoom", "SUITE", "--pre", "100", "--post", "200"], "zoom cannot re-train it"),
    (
        "decompose-reversed",
        ["decompose", "SUITE", "--pre", "200", "--post", "100", "--out", "OUT"],
        "--pre 200 must be earlier than --post 100",
    ),
    (
        "decompose-suite-of-runs",
        ["decompose", "embedded", "--pre", "0", "--post", "100", "--out", "OUT"],
        "decompose takes one run, and 'embedded' names 6",
    ),
    (
        "decompose-missing-step",
        ["decompose", "SUITE", "--pre", "150", "--post", "200", "--out", "OUT"],
        "no checkpoint at step 150; nearest: 100, 200",
    ),
    (
        "decompose-metric",
        ["decompose", "SUITE", "--pre", "100", "--post", "200", "--metric", "acc", "--out", "OUT"],
        "metric='acc'; valid",
    ),
    (
        "run-threshold-zero",
        ["run", "embedded/neox-2l-128d-seed0", "--out", "OUT", "--threshold", "0"],
        "threshold=0.0 must be in (0, 1]",
    ),
    (
        "run-threshold-above-one",
        ["run", "SUITE", "--out", "OUT", "--threshold", "1.5"],
        "threshold=1.5 must be in (0, 1]",
    ),
    (
        "bisect-threshold-zero",
        ["bisect", "embedded-quick", "--threshold", "0", "--out", "OUT"],
        "threshold=0.0 must be in (0, 1]",
    ),
    (
        "zoom-every-too-wide",
        ["zoom", "embedded/neox-2l-128d-seed0", "--pre", "1100", "--post", "1200", "--every", "100"],
        "--every 100 leaves no step strictly between",
    ),
    (
        "bisect-resolution-hub",
        ["bisect", "embedded-quick", "EleutherAI/pythia-70m", "--resolution", "10", "--out", "OUT"],
        "EleutherAI/pythia-70m: hub checkpoints carry no optimizer state; bisect --resolution needs a run trained by emergence-lens",
    ),
    ("sweep-missing-spec", ["sweep", "nope.yaml", "--out", "OUT"], "Invalid value"),
    ("population-no-input", ["population", "--out", "OUT"], "give either sources or --from-curves FILE"),
    ("population-both-inputs", ["population", "SUITE", "--from-curves", "FILE", "--out", "OUT"], "give either"),
    ("population-budget", ["population", "SUITE", "--budget", "-1", "--out", "OUT"], "--budget -1: must be an integer"),
    ("population-threshold", ["population", "SUITE", "--threshold", "0", "--out", "OUT"], "threshold=0.0 must be in"),
    ("population-task", ["population", "SUITE", "--task", "nope", "--out", "OUT"], "unknown task 'nope'"),
    ("population-source", ["population", "EleutherAI/pythia-71m", "--out", "OUT"], "unknown checkpoint source"),
    ("population-out-is-file", ["population", "SUITE", "--out", "FILE"], "is an existing file"),
    (
        "population-curves-columns",
        ["population", "--from-curves", "FILE", "--out", "OUT"],
        "capability table: unknown column(s) 'keep me'; missing column(s) 'arm'",
    ),
    ("population-curves-missing", ["population", "--from-curves", "nope.csv", "--out", "OUT"], "no such file"),
    ("readiness-heads", ["readiness", "SUITE", "--heads", "L1,H0", "--out", "OUT"], "--heads: 'L1' is not a head"),
    (
        "readiness-patterns",
        ["readiness", "SUITE", "--patterns", "induct", "--out", "OUT"],
        "--patterns: 'induct' is unknown",
    ),
    (
        "readiness-embedded-head",
        ["readiness", "embedded", "--heads", "L0H9", "--patterns", "induction", "--out", "OUT"],
        "--heads: L0H9 is outside neox-2l-64d-seed0",
    ),
    ("readiness-out-is-file", ["readiness", "SUITE", "--out", "FILE"], "is an existing file"),
    ("timeline-pairs", ["timeline", "SUITE", "--pairs", "next", "--out", "OUT"], "pairs='next'; valid: consecutive"),
    (
        "timeline-sample",
        ["timeline", "SUITE", "--sample", "-2", "--out", "OUT"],
        "--sample=-2: must be an integer >= 0",
    ),
    ("timeline-method", ["timeline", "SUITE", "--method", "exact", "--out", "OUT"], "method='exact'; valid"),
    (
        "timeline-suite-of-runs",
        ["timeline", "embedded", "--out", "OUT"],
        "timeline takes one run, and 'embedded' names 6",
    ),
    ("timeline-task", ["timeline", "SUITE", "--task", "nope", "--out", "OUT"], "unknown task 'nope'"),
    ("scrub-suite-of-runs", ["scrub", "embedded", "--out", "PAGE"], "scrub takes one run, and 'embedded' names 6"),
    ("scrub-out-not-html", ["scrub", "SUITE", "--out", "OUT"], "expected a page path ending with .html"),
    (
        "scrub-missing-step",
        ["scrub", "SUITE", "--steps", "0,150", "--out", "PAGE"],
        "no checkpoint at step 150; nearest: 100, 200",
    ),
    (
        "scrub-embedded-step",
        ["scrub", "embedded/neox-2l-128d-seed0", "--steps", "1250", "--out", "PAGE"],
        "has no checkpoint at step 1250; nearest: 1200, 1300",
    ),
    ("scrub-heads-not-a-file", ["scrub", "SUITE", "--heads", "OUT", "--out", "PAGE"], "--heads"),
    ("scrub-device", ["scrub", "SUITE", "--device", "gpu", "--out", "PAGE"], "device 'gpu' is not valid"),
]
#: Commands with no argument to get wrong.
NO_ARGUMENTS = {"list-models", "list-tasks", "train-suite"}


@pytest.fixture
def empty_cache(tmp_path, monkeypatch, hub_offline):
    """An empty embedded cache and an empty, offline hub cache: nothing to reuse, nothing to fetch."""
    from huggingface_hub import constants

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    return cache


def _fill(args, tiny_local_suite, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_OK)
    field = tmp_path / "field.yaml"
    field.write_text("stepz: 3\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: linear-map\nsteps: 5\nS: 8: 9\n")  # a second ':' at line 3, column 5
    plain = tmp_path / "a-file"
    plain.write_text("keep me\n")
    names = {
        "SUITE": tiny_local_suite,
        "OUT": tmp_path / "out",
        "FILE": plain,
        "SPEC": spec,
        "SPECFIELD": field,
        "BADYAML": bad,
        "PAGE": tmp_path / "out" / "page.html",
    }
    return [str(names.get(a, a)) for a in args]


def assert_refused(result, expected: str) -> None:
    output = result.output
    assert result.exit_code == 2, output
    assert "Traceback" not in output, output
    assert expected in output, output
    if "Invalid value" not in expected:  # our own errors: exactly one line
        lines = [line for line in output.strip().splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: emergence "), output


@pytest.mark.parametrize("args, expected", [row[1:] for row in BAD], ids=[row[0] for row in BAD])
def test_bad_argument_is_refused_before_any_work(args, expected, tiny_local_suite, tmp_path, empty_cache, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a CPU-only torch, on any machine
    result = runner.invoke(app, _fill(args, tiny_local_suite, tmp_path))
    assert_refused(result, expected)
    assert not (tmp_path / "out").exists()  # no output folder left behind
    assert (tmp_path / "a-file").read_text() == "keep me\n"
    # nothing trained (the kernel pins' MKL shim, compiled on first use on a non-Intel CPU, is no training)
    assert [p.name for p in empty_cache.iterdir() if p.name != "kernel-pins"] == []


def test_every_command_with_arguments_has_bad_input_rows():
    import typer

    group = typer.main.get_command(app)
    commands = set(group.list_commands(None)) - NO_ARGUMENTS
    covered = {row[1][0] for row in BAD}
    assert commands - covered == set(), f"commands without a bad-input row: {commands - covered}"


def test_traceback_only_with_debug(tiny_local_suite, tmp_path):
    result = runner.invoke(app, ["--debug", "bisect", str(tiny_local_suite), "--device", "gpu"])
    assert result.exit_code != 0 and isinstance(result.exception, ValueError)
    assert "device 'gpu' is not valid" in str(result.exception)


def test_sweep_where_every_run_fails_exits_non_zero_listing_failures(tmp_path):
    spec = tmp_path / "fails.yaml"
    # tokens_per_step below one sequence (2·S = 16 tokens): every run fails inside train()
    spec.write_text("task: linear-map\nS: 8\nsteps: 5\ntokens_per_step: 4\nseeds: [0, 1]\n")
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "sw"), "--no-progress"])
    assert result.exit_code == 1, result.output
    failed = [line for line in result.output.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 2 and all("tokens_per_step=4 is smaller than one sequence" in line for line in failed)
    assert "2 runs: 2 ran, 0 already done, 2 failed" in result.output
    assert "Traceback" not in result.output


def test_sweep_executor_ray_without_ray(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real_find_spec(name, *a)
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_OK)
    result = runner.invoke(app, ["sweep", str(spec), "--executor", "ray", "--out", str(tmp_path / "sw")])
    assert_refused(
        result, "executor 'ray' needs the package 'ray', which is not installed: pip install 'emergence-lens[ray]'"
    )
    assert "%|" not in result.output  # no progress bar before the error
    assert not (tmp_path / "sw").exists()


def test_synth_wandb_without_wandb(tmp_path, monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name, *a)
    )
    result = runner.invoke(app, ["synth", "train", "--S", "8", "--steps", "5", "--wandb", "--out", str(tmp_path / "o")])
    assert_refused(result, "--wandb needs the package 'wandb'")
    assert not (tmp_path / "o").exists()


def test_missing_optional_dependency_of_a_lazy_command_is_one_line(monkeypatch):
    import emergence_lens.cli as root

    monkeypatch.setitem(root.LAZY_COMMANDS, "synth", ("no_such_package_xyz.cli:app", "x"))
    result = runner.invoke(app, ["synth", "train"])
    assert_refused(result, "'emergence synth' is unavailable: needs the package 'no_such_package_xyz'")


def test_oserror_is_one_line_naming_the_file(tiny_local_suite, tmp_path, monkeypatch):
    """An error escaping a command (here an unreadable checkpoint) is one line, not a traceback."""
    broken = tmp_path / "broken"
    for step in (0, 100):
        (broken / f"step{step}").mkdir(parents=True)
        (broken / f"step{step}" / "config.json").write_text("{not json")
    save_byte_tokenizer(broken / "tokenizer")
    result = runner.invoke(
        app, ["rank-heads", str(broken), "--pre", "0", "--post", "100", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    lines = [line for line in result.output.strip().splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and lines[0].startswith("error: emergence rank-heads: "), result.output
    assert not (tmp_path / "out").exists()
