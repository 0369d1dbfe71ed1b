"""``emergence download`` / :func:`interp.sources.download.download` against a hub served on
127.0.0.1 (:mod:`tests.fake_hub`): huggingface_hub's own download code runs, and the cache it fills
is then read offline by ``open_source`` (issue 43, item 7)."""

from __future__ import annotations

import hashlib
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from interp.sources import CheckpointError, CorruptCheckpointError, HubUnavailableError
from interp.sources.download import download, grid_steps, plan_download
from interp.sources.loading import PYTHIA_STEPS
from tests.conftest import TINY_REPO, save_byte_tokenizer, save_tiny_neox
from tests.fake_hub import FakeHub

STEPS = (0, 1, 2, 4, 8)  # the first five of Pythia's schedule


@pytest.fixture(scope="module")
def repo_files(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """Per branch the files a Pythia step branch has: config, tokenizer, safetensors weights and
    the pickle copy beside them (which is not fetched)."""
    root = tmp_path_factory.mktemp("fake_hub_models")
    tokenizer = {p.name: p.read_bytes() for p in save_byte_tokenizer(root / "tok").iterdir()}
    branches = {}
    for step in STEPS:
        folder = save_tiny_neox(root / f"m{step}", seed=step)
        files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
        files["pytorch_model.bin"] = b"pickle bytes that must not be fetched " + bytes([step])
        branches[f"step{step}"] = {**files, **tokenizer}
    return branches


@pytest.fixture
def hub(repo_files, monkeypatch):
    """The fake hub serving TINY_REPO, huggingface_hub pointed at it, online."""
    from huggingface_hub import constants

    fake = FakeHub()
    for branch, files in repo_files.items():
        fake.add(TINY_REPO, branch, files)
    fake.add(TINY_REPO, "main", repo_files["step8"])
    url = fake.url = fake.start()
    monkeypatch.setenv("HF_ENDPOINT", url)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    yield fake
    fake.stop()


def fetched_files(files: dict[str, bytes]) -> dict[str, bytes]:
    return {name: data for name, data in files.items() if name != "pytorch_model.bin"}


def test_grid_steps_spread_evenly_by_position():
    grid = grid_steps(PYTHIA_STEPS, 30)
    assert len(grid) == len(set(grid)) == 30 and grid[0] == 0 and grid[-1] == 143000
    assert grid == sorted(grid)
    gaps = [PYTHIA_STEPS.index(b) - PYTHIA_STEPS.index(a) for a, b in itertools.pairwise(grid)]
    assert set(gaps) <= {5, 6}  # 153 positions in 29 gaps of 5 or 6
    assert grid_steps([0, 1, 2, 4, 8], 3) == [0, 2, 8]
    assert grid_steps([0, 1, 2, 4, 8], 5) == [0, 1, 2, 4, 8]
    assert grid_steps([0, 1, 2, 4, 8], 2) == [0, 8]


def test_download_then_the_source_opens_offline(hub, repo_files, tmp_path, hub_cache_env):
    lines: list[str] = []
    plan = download(TINY_REPO, steps=[4, 1], cache_dir=tmp_path, progress=False, echo=lines.append)
    assert plan.steps == [1, 4] and [r.status for r in plan.revisions] == ["fetched", "fetched"]
    # sizes shown before downloading: per revision and in all, the pickle copy left out
    sizes = {b: sum(len(d) for d in fetched_files(repo_files[b]).values()) for b in ("step1", "step4")}
    assert [r.total_bytes for r in plan.revisions] == [sizes["step1"], sizes["step4"]]
    assert lines[0].startswith("step       1  step1") and "to fetch" in lines[0]
    assert lines[2].startswith(f"{TINY_REPO}: 2 of 5 checkpoint revisions")
    assert plan.missing_bytes == 0 and plan.total_bytes == sizes["step1"] + sizes["step4"]
    assert lines[-1].endswith(f"HF_HUB_OFFLINE=1 HF_HUB_CACHE={tmp_path} emergence run {TINY_REPO}")
    assert not hub.gets("pytorch_model.bin") and len(hub.gets("model.safetensors")) == 2

    hub_cache_env(tmp_path)  # offline from here: no network, the cache only
    from interp.sources import open_source

    source = open_source(TINY_REPO)
    assert source.available_steps() == [1, 4]
    weights = repo_files["step4"]["model.safetensors"]
    assert source.digest(4) == hashlib.sha256(weights).hexdigest()
    checkpoint = source.load(4, device="cpu")
    assert (checkpoint.step, checkpoint.revision) == (4, "step4")
    assert source.tokenizer()("ab")["input_ids"] == [97, 98]


def test_an_interrupted_download_continues_and_skips_what_is_complete(hub, tmp_path):
    hub.fail.add(("step4", "model.safetensors"))
    with pytest.raises(HubUnavailableError) as error:
        download(TINY_REPO, steps=[1, 4], cache_dir=tmp_path, progress=False, echo=None)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"download stopped at branch step4 (1 of 2 revisions complete) of {TINY_REPO}: ")
    assert message.endswith("run the same command again: it keeps every file already fetched and continues")

    hub.fail.clear()
    hub.log.clear()
    lines: list[str] = []
    plan = download(TINY_REPO, steps=[1, 4], cache_dir=tmp_path, progress=False, echo=lines.append)
    assert lines[0].endswith("in the cache") and "to fetch" in lines[1]
    assert [r.status for r in plan.revisions] == ["complete", "fetched"]
    commit1 = hub.repos[TINY_REPO]["step1"][0]
    assert not [p for p in hub.gets() if f"/{commit1}/" in p or "/step1/" in p]  # step1: nothing fetched again
    assert hub.gets("model.safetensors") and all("step1" not in p for p in hub.gets())


def test_a_damaged_file_is_named_and_fetched_again(hub, repo_files, tmp_path):
    hub.damage[("step2", "model.safetensors")] = 1  # served damaged once
    lines: list[str] = []
    plan = download(TINY_REPO, steps=[2], cache_dir=tmp_path, progress=False, echo=lines.append)
    assert plan.revisions[0].status == "fetched (re-fetched damaged: model.safetensors)"
    damaged = [line for line in lines if line.startswith("damaged:")]
    assert len(damaged) == 1 and damaged[0].startswith(f"damaged: {TINY_REPO} step2/model.safetensors (")
    commit = plan.revisions[0].commit
    snapshot = tmp_path / "models--EleutherAI--pythia-14m-seed3" / "snapshots" / commit
    assert (snapshot / "model.safetensors").read_bytes() == repo_files["step2"]["model.safetensors"]

    # damaged in the cache (same size, one byte changed): found by the hash, named, fetched again
    config = (snapshot / "config.json").resolve()
    config.write_bytes(b"{" + config.read_bytes()[1:].replace(b'"', b"'", 1))
    hub.log.clear()
    lines.clear()
    plan = download(TINY_REPO, steps=[2], cache_dir=tmp_path, progress=False, echo=lines.append)
    assert plan.revisions[0].status == "complete (re-fetched damaged: config.json)"
    assert [line.split(" (")[0] for line in lines if line.startswith("damaged:")] == [
        f"damaged: {TINY_REPO} step2/config.json"
    ]
    assert [p.rsplit("/", 1)[1] for p in hub.gets()] == ["config.json"]
    assert (snapshot / "config.json").read_bytes() == repo_files["step2"]["config.json"]

    hub.damage[("step0", "model.safetensors")] = 2  # damaged on every try: refused, never trusted
    with pytest.raises(CorruptCheckpointError, match=r"^EleutherAI/pythia-14m-seed3 step0/model.safetensors: digest"):
        download(TINY_REPO, steps=[0], cache_dir=tmp_path, progress=False, echo=None)


def test_grid_and_all_and_the_cli(hub, tmp_path):
    plan = plan_download(TINY_REPO, grid=3, cache_dir=tmp_path)
    assert plan.steps == [0, 2, 8] and plan.missing_bytes == plan.total_bytes > 0
    assert plan_download(TINY_REPO, cache_dir=tmp_path).steps == list(STEPS)
    assert not hub.gets()  # planning downloads nothing

    from emergence_lens.cli import app

    result = CliRunner().invoke(app, ["download", TINY_REPO, "--grid", "2", "--cache", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "step       0  step0" in result.output and "step       8  step8" in result.output
    assert f"{TINY_REPO}: 2 revisions in {tmp_path} (2 fetched now, 0 already there)" in result.output
    dry = CliRunner().invoke(app, ["download", TINY_REPO, "--all", "--cache", str(tmp_path), "--dry-run"])
    assert dry.exit_code == 0 and dry.output.count("in the cache") == 2 and dry.output.count("to fetch") == 4


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"steps": [1, 3]}, CheckpointError, "has no checkpoint at step 3; nearest: 2, 4"),
        (
            {"grid": 9},
            ValueError,
            "grid=9: EleutherAI/pythia-14m-seed3 has 5 checkpoint revisions; use a grid of 2 to 5",
        ),
        ({"grid": 1}, ValueError, "grid=1: need an integer of at least 2"),
        ({"grid": 3, "steps": [1]}, ValueError, "pass steps or grid, not both"),
        ({"steps": [-1]}, ValueError, "steps: -1 is not a training step"),
    ],
)
def test_bad_choices_fail_before_anything_downloads(hub, tmp_path, kwargs, error, message):
    with pytest.raises(error) as raised:
        download(TINY_REPO, cache_dir=tmp_path, progress=False, echo=None, **kwargs)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert not hub.gets() and not any(Path(tmp_path).rglob("*.safetensors"))


def test_a_repository_the_hub_does_not_have_is_one_line(hub, tmp_path):
    with pytest.raises(ValueError) as error:
        download("someorg/nothing-here", grid=3, cache_dir=tmp_path, echo=None)
    assert str(error.value) == (
        "unknown hub repository 'someorg/nothing-here': the hub has no such model repository (cannot list the "
        "branches); check the id (emergence list-models lists the known families); a private one needs a token "
        "(`hf auth login`, or HF_TOKEN)"
    )


def test_sources_that_are_not_hub_repos_and_offline_mode(tmp_path, hub_offline):
    with pytest.raises(ValueError, match=r"^'embedded/neox-2l-64d-seed1' is not a hub repository"):
        download("embedded/neox-2l-64d-seed1", echo=None)
    with pytest.raises(ValueError, match=r"^unknown checkpoint source 'pythia-70m'"):
        download("pythia-70m", echo=None)
    with pytest.raises(HubUnavailableError) as error:
        download(TINY_REPO, steps=[1], cache_dir=tmp_path, echo=None)
    assert str(error.value).startswith(f"cannot download {TINY_REPO}: HF_HUB_OFFLINE=1 is set")


def test_a_series_of_a_staged_repo(hub, repo_files, tmp_path):
    """OLMo-2 names: ``ID:SERIES`` picks the series whose revisions are planned."""
    repo = "allenai/OLMo-2-0425-1B"
    names = ["stage1-step0-tokens0B", "stage1-step1000-tokens5B", "stage1-step2000-tokens9B"]
    names += ["stage2-ingredient1-step0-tokens0B", "stage2-ingredient1-step1000-tokens4B"]
    for name, files in zip(names, repo_files.values(), strict=True):
        hub.add(repo, name, fetched_files(files))
    assert plan_download(repo, grid=2, cache_dir=tmp_path).steps == [0, 2000]  # stage1: the most branches
    plan = plan_download(f"{repo}:stage2-ingredient1", cache_dir=tmp_path)
    assert [r.revision for r in plan.revisions] == names[3:] and plan.series == "stage2-ingredient1"
    assert "(series 'stage2-ingredient1'): 2 of 2 checkpoint revisions" in plan.lines()[-1]


@pytest.mark.slow  # two fresh processes (~10 s of imports each) and a curve over two checkpoints
def test_the_command_in_a_fresh_process_then_curve_offline(hub, tmp_path):
    """The real command, huggingface_hub configured by the environment alone (HF_ENDPOINT,
    HF_HUB_CACHE), then ``emergence curve`` on the downloaded steps with HF_HUB_OFFLINE=1."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(tmp_path / "hf"), NO_PROXY="127.0.0.1")
    command = [sys.executable, "-m", "emergence_lens"]
    fetched = subprocess.run(
        [*command, "download", TINY_REPO, "--steps", "0,8"], env=env, capture_output=True, text=True, timeout=300
    )
    assert fetched.returncode == 0, fetched.stderr
    assert f"{TINY_REPO}: 2 revisions in {tmp_path / 'hf'} (2 fetched now, 0 already there)" in fetched.stdout
    env["HF_HUB_OFFLINE"] = "1"
    task = ["--n-prompts", "4", "--length", "6", "--device", "cpu"]
    curve = subprocess.run(
        [*command, "curve", TINY_REPO, *task, "--out", str(tmp_path / "curve")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert curve.returncode == 0, curve.stdout + curve.stderr
    import pandas as pd

    table = pd.read_csv(tmp_path / "curve" / "emergence.csv")
    assert table["step"].tolist() == [0, 8]


def test_a_half_downloaded_step_is_missing_offline_and_the_named_command_repairs_it(
    hub, repo_files, tmp_path, hub_cache_env, monkeypatch
):
    """Issue 56, item 3: a step whose weights are only a ``.incomplete`` blob (a download cut
    short) or whose snapshot link dangles (a cache copied without its blob) is listed as missing
    with the file and the repairing command, left out of the search; asked for, it is one line."""
    from huggingface_hub import constants

    from interp.sources import open_source
    from interp.sources.checkpoint_integrity import checkpoint_table, hazard_lines

    download(TINY_REPO, steps=[1, 2, 4], cache_dir=tmp_path, progress=False, echo=None)
    repo = tmp_path / "models--EleutherAI--pythia-14m-seed3"

    def weights_link(step: int) -> Path:
        return repo / "snapshots" / (repo / "refs" / f"step{step}").read_text().strip() / "model.safetensors"

    # step 4: killed mid-transfer, as huggingface_hub leaves it: half the bytes in blobs/<sha>.incomplete, no link
    blob = weights_link(4).resolve()
    weights_link(4).unlink()
    blob.rename(blob.with_name(blob.name + ".incomplete"))
    incomplete = blob.with_name(blob.name + ".incomplete")
    os.truncate(incomplete, incomplete.stat().st_size // 2)
    # step 2: its blob deleted, the snapshot link dangles
    blob2 = weights_link(2).resolve()
    blob2.unlink()

    hub_cache_env(tmp_path)
    source = open_source(TINY_REPO)
    assert source.searchable_steps() == [1]
    table = checkpoint_table(source).set_index("step")  # lists them, raises nothing
    assert table.loc[4, "status"] == table.loc[2, "status"] == "missing"
    assert table.loc[4, "revision"] == "step4" and table.loc[4, "detail"] == (
        f"branch step4 has no weight file in the local hub cache {repo}, a download cut short "
        f"(blobs/{blob.name[:12]}...incomplete holds {incomplete.stat().st_size} bytes); "
        f"repair: `emergence download {TINY_REPO} --steps 4` with HF_HUB_OFFLINE unset (or on a machine with a network, "
        "then copy that hub cache here)"
    )
    assert table.loc[2, "detail"] == (
        f"step2/model.safetensors in the local hub cache is a dangling link (its blob {blob2.name[:12]}... "
        f"is not in {repo / 'blobs'}); repair: `emergence download {TINY_REPO} --steps 2` with HF_HUB_OFFLINE unset (or "
        "on a machine with a network, then copy that hub cache here)"
    )
    lines = hazard_lines(checkpoint_table(source))
    assert f"step 2 missing: {table.loc[2, 'detail']}; left out of the search" in lines
    assert f"step 4 missing: {table.loc[4, 'detail']}; left out of the search" in lines
    for step in (2, 4):
        with pytest.raises(HubUnavailableError) as error:
            source.load(step)
        assert str(error.value) == f"{TINY_REPO} step {step}: {table.loc[step, 'detail']}"
    from emergence_lens.cli import app

    asked = CliRunner().invoke(app, ["curve", TINY_REPO, "--steps", "4", "--n-prompts", "4", "--length", "6"])
    assert asked.exit_code == 2
    assert [line for line in asked.output.splitlines() if line.startswith("error:")] == [
        f"error: emergence curve: {TINY_REPO} step 4: {table.loc[4, 'detail']}"
    ]

    # the command the line names repairs both
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    download(TINY_REPO, steps=[2, 4], cache_dir=tmp_path, progress=False, echo=None)
    hub_cache_env(tmp_path)
    source = open_source(TINY_REPO)
    assert source.searchable_steps() == [1, 2, 4]
    assert source.digest(4) == hashlib.sha256(repo_files["step4"]["model.safetensors"]).hexdigest()
    assert (checkpoint_table(source)["detail"].fillna("") == "").all()
