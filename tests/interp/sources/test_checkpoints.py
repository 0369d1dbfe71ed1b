"""Checkpoint sources: the hub path against a hub cache built on disk (offline), local suites,
digests and duplicate steps, one-line errors, and resident memory over 30 sequential loads."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import torch

from conftest import TINY_REPO, save_tiny_neox
from interp import sources as checkpoints
from interp.sources import (
    PYTHIA_STEPS,
    CheckpointError,
    HubSource,
    LocalSuiteSource,
    make_byte_tokenizer,
    open_source,
    pythia_model_ids,
)

torch.set_num_threads(1)
TOKENS = torch.tensor([[3, 17, 200, 5, 17, 200, 5, 99, 1, 0, 255, 17]])


def hf_logits(folder: Path) -> torch.Tensor:
    """Reference: the Hugging Face model's own eager forward."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.inference_mode():
        return model(TOKENS).logits


def bridge_logits(model) -> torch.Tensor:
    with torch.inference_mode():
        return model(TOKENS)


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


# ----------------------------------------------------------------------------- pure


def test_schedule_and_ids():
    assert len(PYTHIA_STEPS) == 154
    assert PYTHIA_STEPS[:12] == (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)
    assert PYTHIA_STEPS[-1] == 143000 and all(b - a == 1000 for a, b in itertools.pairwise(PYTHIA_STEPS[11:]))
    ids = pythia_model_ids()
    assert len(ids) == len(set(ids)) == 56  # 5 sizes x 10 seeds + 160m's 3 data-seed and 3 weight-seed runs
    assert "EleutherAI/pythia-14m" in ids and "EleutherAI/pythia-410m-seed9" in ids
    assert "EleutherAI/pythia-160m-data-seed3" in ids and "EleutherAI/pythia-160m-weight-seed1" in ids
    assert not checkpoints.is_pythia_id("EleutherAI/pythia-160m-data-seed4")  # the model cards list 1..3
    assert not checkpoints.is_pythia_id("EleutherAI/pythia-70m-weight-seed1")  # and 160m only
    assert all(checkpoints.is_pythia_id(i) for i in ids)
    assert checkpoints.is_pythia_id("EleutherAI/pythia-2.8b-deduped")
    assert not checkpoints.is_pythia_id("EleutherAI/pythia-1b-seed3")  # seeds exist for 14m..410m only


def test_byte_tokenizer_ids_are_bytes():
    tok = make_byte_tokenizer()
    text = "def f(x):\n\treturn x  # é\x00"
    assert tok(text)["input_ids"] == list(text.encode())
    assert len(tok) == 256 and tok.decode(list(text.encode())) == text


def test_bad_input_one_line_errors(tmp_path):
    with pytest.raises(ValueError) as error:
        HubSource("gpt2")
    assert "unknown model id 'gpt2'" in one_line(error) and "pythia" in str(error.value)
    with pytest.raises(ValueError) as error:
        open_source("EleutherAI/pythia-99m")
    assert "'EleutherAI/pythia-99m'" in one_line(error) and "local suite folder" in str(error.value)
    with pytest.raises(ValueError) as error:
        LocalSuiteSource(tmp_path)
    assert "no checkpoint folders" in one_line(error) and "tried step{N}, checkpoint-{N}" in str(error.value)
    with pytest.raises(ValueError) as error:
        HubSource(TINY_REPO, steps=[])
    one_line(error)
    assert isinstance(HubSource("someone/model", allow_any_id=True), HubSource)


# ----------------------------------------------------------------------------- hub (offline cache)


def test_hub_load_matches_hf_forward(tiny_hub_cache, hub_offline):
    source = HubSource(TINY_REPO, cache_dir=tiny_hub_cache["cache_dir"])
    assert source.available_steps() == [0, 1, 2, 4]
    checkpoint = source.load(1, device="cpu")
    assert (checkpoint.step, checkpoint.revision) == (1, "step1")
    assert checkpoint.commit == tiny_hub_cache["commits"][1]
    assert checkpoint.digest == file_sha256(tiny_hub_cache["models"][1] / "model.safetensors")
    model = checkpoint.model
    assert not model.training and all(p.dtype == torch.float32 for p in model.parameters())
    torch.testing.assert_close(bridge_logits(model), hf_logits(tiny_hub_cache["models"][1]), atol=1e-5, rtol=0)
    assert source.tokenizer()("ab")["input_ids"] == [97, 98]


def test_hub_duplicates_and_pickle(tiny_hub_cache, hub_offline):
    source = HubSource(TINY_REPO, cache_dir=tiny_hub_cache["cache_dir"])
    assert source.digest(2) == source.digest(1) != source.digest(0)
    # no main branch in this cache: neither label of the group {1, 2} is known right
    assert source.final_digest() is None
    assert source.duplicate_groups([0, 1, 2]) == [[1, 2]]
    assert source.duplicate_steps([0, 1, 2]) == {1: 2, 2: 1}
    with pytest.raises(ValueError) as error:  # step 4 holds only pytorch_model.bin
        source.load(4)
    assert "only pickle weights (pytorch_model.bin)" in one_line(error) and "allow_pickle (--allow-pickle)" in str(
        error.value
    )
    with pytest.raises(ValueError, match="only pickle weights"):
        source.searchable_steps()

    permissive = HubSource(TINY_REPO, cache_dir=tiny_hub_cache["cache_dir"], allow_pickle=True)
    assert permissive.searchable_steps() == [0, 4]
    checkpoint = permissive.load(4, device="cpu")
    assert checkpoint.digest == file_sha256(tiny_hub_cache["models"][4] / "pytorch_model.bin")
    torch.testing.assert_close(
        bridge_logits(checkpoint.model), hf_logits(tiny_hub_cache["models"][4]), atol=1e-5, rtol=0
    )


def test_hub_missing_step_names_nearest(tiny_hub_cache, hub_offline):
    source = HubSource(TINY_REPO, cache_dir=tiny_hub_cache["cache_dir"])
    with pytest.raises(CheckpointError) as error:
        source.load(1000)
    message = one_line(error)
    assert TINY_REPO in message and "step 1000" in message and "nearest available steps: 4" in message
    with pytest.raises(CheckpointError) as error:
        source.digest(3)
    assert "step 3" in one_line(error) and "154-step schedule" in str(error.value) and "steps: 2, 4" in str(error.value)


@pytest.mark.slow
def test_hub_env_var_path_in_fresh_process(tiny_hub_cache, tmp_path):
    """The path a user runs: no cache_dir argument, HF_HUB_CACHE + HF_HUB_OFFLINE=1 read at import."""
    script = (
        "import json, torch; from interp.sources import open_source; "
        f"s = open_source({TINY_REPO!r}); c = s.load(0, device='cpu'); "
        f"print(json.dumps(dict(steps=s.available_steps(), digest=c.digest, commit=c.commit, "
        f"logits=c.model(torch.tensor({TOKENS.tolist()}))[0, -1, :5].tolist())))"
    )
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tiny_hub_cache["cache_dir"]),
        "HF_HOME": str(tmp_path / "hf_home"),
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["steps"] == [0, 1, 2, 4]
    assert result["digest"] == file_sha256(tiny_hub_cache["models"][0] / "model.safetensors")
    assert result["commit"] == tiny_hub_cache["commits"][0]
    expected = hf_logits(tiny_hub_cache["models"][0])[0, -1, :5]
    torch.testing.assert_close(torch.tensor(result["logits"]), expected, atol=1e-5, rtol=0)


def test_hub_online_listing_and_digest_from_metadata(tmp_path, monkeypatch):
    """Online: steps are the repo's step branches; a digest comes from LFS metadata (no download).
    The hub API is replaced by a stand-in returning what huggingface_hub returns."""
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    lfs_sha = "ab" * 32

    class FakeApi:
        def list_repo_refs(self, repo_id):
            names = ["main", "step0", "step1000", "step3000", "notastep"]
            return SimpleNamespace(branches=[SimpleNamespace(name=n) for n in names])

        def get_paths_info(self, repo_id, paths, revision=None):
            assert revision == "step3000"
            return [SimpleNamespace(path="model.safetensors", lfs=SimpleNamespace(sha256=lfs_sha))]

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    source = HubSource("EleutherAI/pythia-410m-seed9", cache_dir=tmp_path)
    assert source.available_steps() == [0, 1000, 3000]
    assert source.digest(3000) == lfs_sha
    with pytest.raises(CheckpointError) as error:
        source.load(2000)
    assert "no branch step2000 on the hub" in one_line(error) and "steps: 1000, 3000" in str(error.value)


# ----------------------------------------------------------------------------- local suites


@pytest.fixture(scope="module")
def tiny_suite(tmp_path_factory, byte_tokenizer_dir) -> Path:
    """ROOT/suite.json, ROOT/tokenizer/, ROOT/step{0,1,2}/ (step2 = step1's weights)."""
    root = tmp_path_factory.mktemp("suite")
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    save_tiny_neox(root / "step0", seed=10)
    save_tiny_neox(root / "step1", seed=11)
    shutil.copytree(root / "step1", root / "step2")
    (root / "suite.json").write_text(json.dumps({"model_id": "tiny-suite", "steps": [0, 1, 2]}))
    return root


def test_local_suite_load_digest_duplicates(tiny_suite):
    source = open_source(tiny_suite)
    assert isinstance(source, LocalSuiteSource) and source.model_id == "tiny-suite"
    assert source.available_steps() == [0, 1, 2]
    assert source.digest(0) == file_sha256(tiny_suite / "step0" / "model.safetensors")
    assert source.duplicate_steps() == {1: 2, 2: 1}
    assert source.searchable_steps() == [0]
    checkpoint = source.load(0, device="cpu")
    assert (checkpoint.step, checkpoint.revision, checkpoint.commit) == (0, "step0", None)
    torch.testing.assert_close(bridge_logits(checkpoint.model), hf_logits(tiny_suite / "step0"), atol=1e-5, rtol=0)
    with pytest.raises(CheckpointError) as error:
        source.load(7)
    assert "tiny-suite" in one_line(error) and "step 7" in str(error.value) and "steps: 2" in str(error.value)
    with pytest.raises(CheckpointError) as error:
        source.digest("last")
    assert "'last' is not an integer training step (available: 0..2)" in one_line(error)


def test_local_suite_layout_variants(tiny_suite, tmp_path):
    bare = tmp_path / "bare"  # no suite.json, no tokenizer/: steps from folders, tokenizer from a step
    save_tiny_neox(bare / "step10", seed=1)
    save_tiny_neox(bare / "step3", seed=2)
    make_byte_tokenizer().save_pretrained(bare / "step3")
    source = LocalSuiteSource(bare)
    assert source.available_steps() == [3, 10] and source.model_id == "bare"
    assert source.tokenizer()("a")["input_ids"] == [97]
    torch.testing.assert_close(
        bridge_logits(source.load(10, device="cpu").model), hf_logits(bare / "step10"), atol=1e-5, rtol=0
    )

    broken = tmp_path / "broken"
    shutil.copytree(tiny_suite, broken)
    (broken / "suite.json").write_text(json.dumps({"steps": [0, 1, 2, 5]}))
    with pytest.raises(ValueError) as error:
        LocalSuiteSource(broken)
    assert "[5]" in one_line(error)


def test_each_load_has_its_own_weights(tiny_suite):
    """Loading another step never changes a checkpoint already handed out, and reloading a step
    gives that step's weights again (equal to the Hugging Face forward to 1e-5)."""
    source = LocalSuiteSource(tiny_suite)
    first = source.load(0, device="cpu")
    before = bridge_logits(first.model)
    second = source.load(1, device="cpu")
    torch.testing.assert_close(bridge_logits(second.model), hf_logits(tiny_suite / "step1"), atol=1e-5, rtol=0)
    torch.testing.assert_close(bridge_logits(first.model), before, atol=0, rtol=0)
    again = source.load(0, device="cpu")
    torch.testing.assert_close(bridge_logits(again.model), hf_logits(tiny_suite / "step0"), atol=1e-5, rtol=0)
    source.close()
    assert source._bridge is None


def test_model_without_attention_heads(tmp_path, byte_tokenizer_dir):
    from transformers import MambaConfig, MambaForCausalLM

    root = tmp_path / "mamba"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    torch.manual_seed(0)
    MambaForCausalLM(MambaConfig(vocab_size=256, hidden_size=32, num_hidden_layers=2, state_size=4)).save_pretrained(
        root / "step0"
    )
    with pytest.raises(ValueError) as error:
        LocalSuiteSource(root).load(0, device="cpu")
    assert "no attention heads" in one_line(error) and "step 0" in str(error.value)

    zero = tmp_path / "zero"
    save_tiny_neox(zero / "step0")
    config = json.loads((zero / "step0" / "config.json").read_text())
    (zero / "step0" / "config.json").write_text(json.dumps({**config, "num_attention_heads": 0}))
    with pytest.raises(ValueError) as error:
        LocalSuiteSource(zero).load(0, device="cpu")
    assert "num_attention_heads=0" in one_line(error)


@pytest.mark.slow
def test_resident_memory_over_30_loads(tmp_path, byte_tokenizer_dir):
    """30 sequential loads grow resident memory by <= 10 % after the first.
    The model (7.3 MB of weights, plus the bridge around it) is large enough that keeping every
    bridge alive, as happens without the source's explicit release, exceeds that bound."""
    root = tmp_path / "suite30"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for step in range(30):
        save_tiny_neox(root / f"step{step}", seed=step, d_model=192, n_layers=4, n_heads=4)
    source = LocalSuiteSource(root)
    process = psutil.Process()
    rss = []
    for step in source.available_steps():
        checkpoint = source.load(step, device="cpu")
        bridge_logits(checkpoint.model)
        del checkpoint
        rss.append(process.memory_info().rss)
    growth = (max(rss[1:]) - rss[0]) / rss[0]
    print(f"rss_growth_after_first_pct: {100 * growth:.1f}")
    assert growth <= 0.10, f"RSS grew {100 * growth:.1f}% after the first load: {[r >> 20 for r in rss]} MiB"


# ----------------------------------------------------------------------------- revision names


def test_revision_names_parse_to_steps_tokens_and_series():
    from interp.sources.families import RevisionParser

    parser = RevisionParser()
    cases = {
        "step1000": (1000, None, ""),
        "step1000-tokens4B": (1000, 4 * 10**9, ""),
        "step20000-tokens84B": (20000, 84 * 10**9, ""),
        "step5-tokens20971520": (5, 20971520, ""),
        "stage1-step1000-tokens5B": (1000, 5 * 10**9, "stage1"),
        "stage2-ingredient3-step12000-tokens26B": (12000, 26 * 10**9, "stage2-ingredient3"),
    }
    for name, expected in cases.items():
        rev = parser.parse(name)
        assert (rev.step, rev.tokens, rev.series) == expected and rev.name == name
    for name in ("main", "step", "step1000-tokens", "stage1-step1k", "refs/pr/1", "global_step1000"):
        assert parser.parse(name) is None, name
    custom = RevisionParser(r"step-(?P<step>\d+)-(?P<tokens>\d+)(?P<unit>B)T")  # e.g. step-001000-2BT
    rev = custom.parse("step-001000-2BT")
    assert (rev.step, rev.tokens, rev.series) == (1000, 2 * 10**9, "")
    assert RevisionParser(r"global_step(\d+)").parse("global_step250").step == 250
    with pytest.raises(ValueError) as error:
        RevisionParser(r"ckpt-(\d+)-(\d+)")
    assert "(?P<step>" in one_line(error)
    with pytest.raises(ValueError) as error:
        RevisionParser(r"step(")
    assert "does not compile" in one_line(error)


def test_schedule_series_default_alternates_and_grid():
    from interp.sources.families import build_schedule, regular_grid

    names = [
        "main",
        "stage1-step0-tokens0B",
        "stage1-step1000-tokens5B",
        "step150-tokens1B",
        "stage1-step2000-tokens9B",
        "step2000-tokens9B",
        "stage1-step4000-tokens17B",
        "stage2-ingredient1-step0-tokens0B",
        "stage2-ingredient1-step1000-tokens5B",
        "stage2-ingredient2-step1000-tokens5B",
    ]
    schedule = build_schedule(names)
    # plain names of a staged repo count in stage1; the prefixed branch wins a shared step
    assert schedule.series == schedule.default_series == "stage1"
    assert schedule.series_counts == {"stage1": 6, "stage2-ingredient1": 2, "stage2-ingredient2": 1}
    assert schedule.steps == [0, 150, 1000, 2000, 4000]
    assert schedule.revisions[2000].name == "stage1-step2000-tokens9B"
    assert [r.name for r in schedule.alternates] == ["step2000-tokens9B"]
    other = build_schedule(names, series="stage2-ingredient1")
    assert other.steps == [0, 1000] and other.revisions[1000].tokens == 5 * 10**9
    with pytest.raises(ValueError) as error:
        build_schedule(names, series="stage3")
    assert "'stage3'" in one_line(error) and "stage2-ingredient2 (1 branches)" in str(error.value)
    # a regular stride with one gap: 3000 missing, 150 extra (off the grid)
    assert regular_grid([0, 150, 1000, 2000, 4000, 5000]) == [0, 1000, 2000, 3000, 4000, 5000]
    assert regular_grid(PYTHIA_STEPS[:12]) == []  # log-spaced: no dominant stride, nothing inferred


def test_known_families_and_ids():
    from interp.sources.families import FAMILIES, family_of

    assert family_of("EleutherAI/pythia-70m-seed3").name.startswith("Pythia")
    assert family_of("allenai/OLMo-2-1124-7B").name == "OLMo-2"
    assert family_of("allenai/OLMo-1B-0724-hf").name.startswith("OLMo (")
    assert family_of("openai-community/gpt2") is None
    assert all(f.matches(i) for f in FAMILIES for i in f.example_ids)
    assert checkpoints.is_hub_id("allenai/OLMo-2-0425-1B") and checkpoints.is_hub_id("someone/gpt2-steps")
    assert not checkpoints.is_hub_id("EleutherAI/pythia-99m") and not checkpoints.is_hub_id("gpt2")
    source = open_source("allenai/OLMo-2-1124-7B:stage2-ingredient1")
    assert isinstance(source, HubSource) and source.series_requested == "stage2-ingredient1"
    assert source.steps is None and HubSource(TINY_REPO).steps == PYTHIA_STEPS


class _FakeHubApi:
    """Stands in for huggingface_hub.HfApi: a branch listing and LFS metadata per revision."""

    def __init__(self, branches, lfs=None, fail=False):
        self.branches, self.lfs, self.fail = branches, lfs or {}, fail

    def __call__(self):
        return self

    def list_repo_refs(self, repo_id):
        if self.fail:
            raise ConnectionError("no route to host")
        return SimpleNamespace(branches=[SimpleNamespace(name=n) for n in self.branches])

    def get_paths_info(self, repo_id, paths, revision=None):
        sha = self.lfs.get(revision)
        return [SimpleNamespace(path="model.safetensors", lfs=SimpleNamespace(sha256=sha))] if sha else []


def test_hub_olmo2_listing_series_tokens_and_hazards(tmp_path, monkeypatch):
    """Online listing of an OLMo-2-style repo (hub API stand-in): the default series, tokens per
    step, a missing step of the regular grid, duplicates with the final model known from main."""
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    final = "f" * 64
    branches = [
        "main",
        "stage1-step0-tokens0B",
        "stage1-step1000-tokens5B",
        "stage1-step2000-tokens9B",
        "stage1-step4000-tokens17B",
        "stage2-ingredient1-step0-tokens0B",
        "stage2-ingredient1-step500-tokens2B",
    ]
    lfs = {
        "main": final,
        "stage1-step0-tokens0B": "0" * 64,
        "stage1-step1000-tokens5B": final,
        "stage1-step2000-tokens9B": "2" * 64,
        "stage1-step4000-tokens17B": final,
        "stage2-ingredient1-step0-tokens0B": "0" * 64,
        "stage2-ingredient1-step500-tokens2B": "5" * 64,
    }
    monkeypatch.setattr(huggingface_hub, "HfApi", _FakeHubApi(branches, lfs))
    source = open_source("allenai/OLMo-2-0425-1B", cache_dir=tmp_path)
    assert source.series == "stage1" and source.available_steps() == [0, 1000, 2000, 4000]
    assert source.revision(2000) == "stage1-step2000-tokens9B" and source.tokens_at(2000) == 9 * 10**9
    assert source.missing_steps() == [3000] and source.listing == "hub"
    assert source.final_digest() == final
    assert source.duplicate_steps() == {1000: 4000}  # the final step matches main: its label is right
    table = checkpoints.checkpoint_table(source)
    assert table["status"].tolist() == [
        "searchable",
        "duplicate-excluded",
        "searchable",
        "missing",
        "duplicate-kept-final",
    ]
    assert table["tokens"].tolist()[:3] == [0, 5 * 10**9, 9 * 10**9] and table["same_weights_as"][1] == "4000"
    lines = checkpoints.hazard_lines(table, "olmo")
    assert (
        lines[0]
        == "olmo: 1 steps excluded, identical weights within each group {1000, 4000} (kept: final step 4000, digest equal to the final model's)"
    )
    assert lines[1] == "olmo: 1 steps of the schedule missing: 3000" and len(lines) == 2
    with pytest.raises(CheckpointError) as error:
        source.load(3000)
    assert "no branch for step 3000 in series 'stage1'" in one_line(error) and "2000, 4000" in str(error.value)

    ingredient = open_source("allenai/OLMo-2-0425-1B:stage2-ingredient1", cache_dir=tmp_path)
    assert ingredient.available_steps() == [0, 500] and ingredient.duplicate_steps() == {}
    with pytest.raises(ValueError) as error:
        open_source("allenai/OLMo-2-0425-1B:stage9", cache_dir=tmp_path).available_steps()
    assert "'stage9'" in one_line(error) and "stage1 (4 branches)" in str(error.value)


def test_a_grid_with_an_offset_reports_its_gaps():
    """Issue 41, item 4: a series whose steps are not multiples of its stride (a run resumed
    mid-way, a listing that starts late) follows its own offset; before, no gap was found."""
    from interp.sources.families import regular_grid

    assert regular_grid([500, 1500, 2500, 4500, 5500]) == [500, 1500, 2500, 3500, 4500, 5500]
    assert regular_grid([7, 17, 27, 57, 67, 77]) == [7, 17, 27, 37, 47, 57, 67, 77]
    assert regular_grid([250, 1250, 2250, 3250, 60]) == [250, 1250, 2250, 3250]  # 60 is extra, off the grid
    # the most common remainder decides: one step at a multiple of the stride does not
    assert regular_grid([3000, 4500, 5500, 6500, 8500]) == [4500, 5500, 6500, 7500, 8500]
    assert regular_grid([0, 150, 1000, 2000, 4000, 5000]) == [0, 1000, 2000, 3000, 4000, 5000]  # as before


def test_hub_missing_steps_on_an_offset_grid(tmp_path, monkeypatch):
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    branches = ["main", "step1500-tokens3B", "step2500-tokens5B", "step3500-tokens7B", "step5500-tokens11B"]
    monkeypatch.setattr(huggingface_hub, "HfApi", _FakeHubApi(branches))
    source = HubSource("someone/resumed-run", cache_dir=tmp_path, allow_any_id=True)
    assert source.available_steps() == [1500, 2500, 3500, 5500]
    assert source.missing_steps() == [4500]


def test_lowercase_token_units_parse_and_unparsed_step_names_are_reported(tmp_path, monkeypatch, caplog):
    """Issue 41, item 5: ``-tokens5b`` parses as ``-tokens5B`` (before, the branch dropped out of
    the listing); a name that looks like a step but does not parse is named in a warning."""
    import huggingface_hub
    from huggingface_hub import constants

    from interp.sources.families import RevisionParser, build_schedule

    parser = RevisionParser()
    for lower, upper in (
        ("step1000-tokens5b", "step1000-tokens5B"),
        ("stage1-step2000-tokens9k", "stage1-step2000-tokens9K"),
    ):
        a, b = parser.parse(lower), parser.parse(upper)
        assert (a.step, a.tokens, a.series) == (b.step, b.tokens, b.series)
    assert parser.parse("step1000-tokens5b").tokens == 5 * 10**9
    names = ["main", "step0-tokens0b", "step1000-tokens4b", "step2000-tokens8B", "step3000-tokens12x", "global_step7"]
    schedule = build_schedule(names)
    assert schedule.steps == [0, 1000, 2000]
    assert schedule.unparsed == ["global_step7", "step3000-tokens12x"]
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "HfApi", _FakeHubApi(names))
    source = HubSource("someone/lowercase", cache_dir=tmp_path, allow_any_id=True)
    with caplog.at_level("WARNING"):
        assert source.available_steps() == [0, 1000, 2000] and source.tokens_at(1000) == 4 * 10**9
    assert any(
        "2 branch names look like checkpoints but do not parse, left out: global_step7, step3000-tokens12x" in r.message
        for r in caplog.records
    )


def test_hub_unreachable_falls_back_to_cache_and_says_so(tiny_hub_cache, monkeypatch):
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "HfApi", _FakeHubApi([], fail=True))
    source = HubSource(TINY_REPO, cache_dir=tiny_hub_cache["cache_dir"], allow_pickle=True)
    assert source.available_steps() == [0, 1, 2, 4]
    assert source.listing == "cache (hub unreachable: ConnectionError)"
    table = checkpoints.checkpoint_table(source)
    assert (table["status"] == "missing").sum() == 150 and set(table["listing"]) == {source.listing}
    lines = checkpoints.hazard_lines(table)
    assert lines[0].startswith("2 steps excluded, identical weights within each group {1, 2} (no label known right")
    assert lines[1].startswith("150 steps of the schedule not in the local hub cache: 8, 16, 32")
    assert lines[2] == "steps listed from the local hub cache, not the hub: cache (hub unreachable: ConnectionError)"


# ----------------------------------------------------------------------------- duplicates and hazards


@pytest.fixture
def final_copied_suite(tmp_path, byte_tokenizer_dir) -> Path:
    """Steps 0, 1000, 2000, 3000 with step 3000's (the final) weights copied into step1000/."""
    root = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for seed, step in enumerate([0, 1000, 2000, 3000]):
        save_tiny_neox(root / f"step{step}", seed=20 + seed)
    shutil.copyfile(root / "step3000" / "model.safetensors", root / "step1000" / "model.safetensors")
    return root


def test_final_weights_copied_into_an_earlier_step(final_copied_suite):
    """Identical weights at 1000 and 3000: at most one label is right. Unknown which: both leave
    the search and the group is reported; with the final model's digest recorded, 3000 stays."""
    from interp.emergence import find_emergence
    from interp.tasks import RepetitionTask

    source = LocalSuiteSource(final_copied_suite)
    assert source.final_digest() is None
    assert source.duplicate_groups() == [[1000, 3000]]
    assert source.duplicate_steps() == {1000: 3000, 3000: 1000}
    assert source.searchable_steps() == [0, 2000]
    table = checkpoints.checkpoint_table(source)
    assert table[["step", "status", "same_weights_as"]].values.tolist() == [
        [0, "searchable", ""],
        [1000, "duplicate-excluded", "3000"],
        [2000, "searchable", ""],
        [3000, "duplicate-excluded", "1000"],
    ]
    assert (
        table["digest"][1] == table["digest"][3] == file_sha256(final_copied_suite / "step3000" / "model.safetensors")
    )
    assert checkpoints.hazard_lines(table, "suite") == [
        (
            "suite: 2 steps excluded, identical weights within each group {1000, 3000} (no label known right: "
            "every step of each group excluded)"
        )
    ]
    batch = RepetitionTask(n_prompts=8, length=6).build(source.tokenizer())
    point = find_emergence(source, batch, device="cpu")
    assert point.excluded_steps == {1000: 3000, 3000: 1000}
    assert set(point.evaluations["step"]) <= {0, 2000}

    final = file_sha256(final_copied_suite / "step3000" / "model.safetensors")
    (final_copied_suite / "suite.json").write_text(json.dumps({"final_digest": final}))
    known = LocalSuiteSource(final_copied_suite)
    assert known.final_digest() == final
    assert known.duplicate_steps() == {1000: 3000} and known.searchable_steps() == [0, 2000, 3000]
    table = checkpoints.checkpoint_table(known)
    assert table["status"].tolist() == ["searchable", "duplicate-excluded", "searchable", "duplicate-kept-final"]
    assert checkpoints.hazard_lines(table)[0].endswith("(kept: final step 3000, digest equal to the final model's)")


def test_hub_main_branch_marks_the_final_step_right(tmp_path, byte_tokenizer_dir, hub_offline):
    """Offline: main's cached weights equal the final step's, so the final step of a duplicate
    group stays searchable and the intermediate branch serving the same weights is excluded."""
    from conftest import add_hub_revision

    cache = tmp_path / "cache"
    tokenizer_files = {p.name: p for p in byte_tokenizer_dir.iterdir()}
    models = {seed: save_tiny_neox(tmp_path / f"m{seed}", seed=seed) for seed in (0, 2, 8)}
    for step, folder in [
        (0, models[0]),
        (1, models[8]),
        (2, models[2]),
        (8, models[8]),
    ]:  # step 1 serves the final weights
        add_hub_revision(cache, TINY_REPO, f"step{step}", {**{p.name: p for p in folder.iterdir()}, **tokenizer_files})
    source = HubSource(TINY_REPO, cache_dir=cache, steps=[0, 1, 2, 4, 8])
    assert source.duplicate_steps() == {1: 8, 8: 1} and source.final_digest() is None
    add_hub_revision(cache, TINY_REPO, "main", {p.name: p for p in models[8].iterdir()})
    source = HubSource(TINY_REPO, cache_dir=cache, steps=[0, 1, 2, 4, 8])
    assert source.final_digest() == file_sha256(models[8] / "model.safetensors")
    assert source.duplicate_steps() == {1: 8} and source.searchable_steps() == [0, 2, 8]
    assert source.missing_steps() == [4]
    assert checkpoints.checkpoint_table(source)["status"].tolist() == [
        "searchable",
        "duplicate-excluded",
        "searchable",
        "missing",
        "duplicate-kept-final",
    ]


# ----------------------------------------------------------------------------- tokenizer check


def test_tokenizer_fingerprint_and_mismatch_between_steps(tmp_path, byte_tokenizer_dir):
    from transformers import AutoTokenizer

    fingerprint = checkpoints.tokenizer_fingerprint
    reloaded = AutoTokenizer.from_pretrained(byte_tokenizer_dir)
    assert fingerprint(reloaded) == fingerprint(make_byte_tokenizer())
    extra = AutoTokenizer.from_pretrained(byte_tokenizer_dir)
    extra.add_special_tokens({"pad_token": "<pad>"})
    differ = {k for k, v in fingerprint(extra).items() if v != fingerprint(reloaded)[k]}
    assert differ == {"vocabulary", "special tokens"}

    root = tmp_path / "suite"  # no ROOT/tokenizer/: each step folder carries its own tokenizer
    for step in (0, 100, 200):
        save_tiny_neox(root / f"step{step}", seed=step)
        (extra if step == 200 else reloaded).save_pretrained(root / f"step{step}")
    source = LocalSuiteSource(root)
    assert source.tokenizer()("1")["input_ids"] == [49]
    source.load(100, device="cpu")
    with pytest.raises(checkpoints.TokenizerMismatchError) as error:
        source.load(200, device="cpu")
    assert one_line(error).startswith(
        "suite: the tokenizer at step 200 differs from the one at step 0 (vocabulary, special tokens)"
    )


@pytest.mark.slow
def test_hazards_reach_the_main_job_outputs(final_copied_suite, tmp_path):
    """``emergence run``: the summary prints the duplicate group, checkpoints.csv has one row per
    step with its status, and report.html has the hazard section."""
    import pandas as pd
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run", str(final_copied_suite), "--out", str(out), "--n-prompts", "8", "--length", "6", "--device", "cpu"]
    )
    assert result.exit_code == 0, result.output
    assert (
        "hazard: suite seed 0: 2 steps excluded, identical weights within each group {1000, 3000} "
        "(no label known right: every step of each group excluded)"
    ) in result.output
    table = pd.read_csv(out / "checkpoints.csv")
    assert table[["model", "seed", "step", "status"]].values.tolist() == [
        ["suite", 0, 0, "searchable"],
        ["suite", 0, 1000, "duplicate-excluded"],
        ["suite", 0, 2000, "searchable"],
        ["suite", 0, 3000, "duplicate-excluded"],
    ]
    assert len(pd.read_parquet(out / "checkpoints.parquet")) == 4
    page = (out / "report.html").read_text()
    assert "<h3>Checkpoint hazards</h3>" in page and "{1000, 3000}" in page


@pytest.mark.slow
def test_rank_heads_and_decompose_name_duplicate_steps(final_copied_suite, tmp_path):
    """Asked for a step whose weights another step shares, ``rank-heads`` says so in a ``hazard:``
    line and goes on; asked for two identical steps, it refuses in one line and writes nothing."""
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    common = ["--n-prompts", "4", "--length", "4", "--device", "cpu"]
    result = CliRunner().invoke(app, ["rank-heads", str(final_copied_suite), "--pre", "0", "--post", "1000", *common])
    assert result.exit_code == 0, result.output
    assert (
        "hazard: step 1000 has the same weights as step 3000 (identical weights: at most one of the labels is right)"
    ) in result.output
    out = tmp_path / "out"
    for command in ("rank-heads", "decompose"):
        result = CliRunner().invoke(
            app, [command, str(final_copied_suite), "--pre", "1000", "--post", "3000", "--out", str(out), *common]
        )
        assert result.exit_code == 2, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(
            f"error: emergence {command}: suite: steps 1000 and 3000 have identical weights"
        ), result.output
        assert not out.exists()


def test_digest_is_of_the_weights_not_the_optimizer_state(tmp_path, byte_tokenizer_dir):
    """A resumable checkpoint's optimizer.safetensors is not part of the model's digest: the same
    weights with different optimizer moments are one model (a duplicate group), and the digest
    equals the sha256 of model.safetensors alone, as for a checkpoint without training state."""
    from safetensors.torch import save_file

    root = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for seed, step in enumerate([0, 100, 200]):
        save_tiny_neox(root / f"step{step}", seed=30 + seed)
        save_file(
            {"state.0.exp_avg": torch.full((3,), float(step))}, str(root / f"step{step}" / "optimizer.safetensors")
        )
    shutil.copyfile(root / "step200" / "model.safetensors", root / "step0" / "model.safetensors")
    source = LocalSuiteSource(root)
    assert source.digest(100) == checkpoints.combine_digests([file_sha256(root / "step100" / "model.safetensors")])
    assert source.duplicate_groups() == [[0, 200]]


def test_a_suite_folder_under_home_opens_by_its_tilde_path(tiny_local_suite, tmp_path, monkeypatch):
    """``open_source("~/runs/my-suite")`` (docs/guide.md's first cell) opens the folder under $HOME."""
    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copytree(tiny_local_suite, tmp_path / "runs" / "my-suite")
    source = open_source("~/runs/my-suite")
    assert isinstance(source, LocalSuiteSource)
    assert source.root == tmp_path / "runs" / "my-suite"
    assert source.available_steps() == [0, 100, 200]
    assert LocalSuiteSource("~/runs/my-suite").root == source.root
