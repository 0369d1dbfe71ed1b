"""Other checkpoint families offline: tiny OLMo-2- and GPT-2-shaped models in hub caches with
step-named revisions (stage/ingredient series, tokens per step, a duplicate-weight branch, a
missing step), loaded and run through ``curve``, ``bisect`` and ``rank-heads`` with
HF_HUB_OFFLINE=1. The caches are built by tests/conftest.py (``olmo2_hub_cache``,
``gpt2_hub_cache``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from conftest import GPT2_REPO, OLMO2_REPO
from emergence_lens.cli import app
from interp.sources import HubSource, open_source
from interp.tasks import make_task

torch.set_num_threads(1)
runner = CliRunner()
N_PROMPTS, LENGTH = 8, 6  # the CLI's repetition task with --n-prompts 8 --length 6, seed 0


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def hf_p_answer(folder: Path, tokenizer) -> float:
    """Reference: mean p(answer) of the Hugging Face model's own eager forward on the CLI's prompts."""
    from transformers import AutoModelForCausalLM

    batch = make_task("repetition", n_prompts=N_PROMPTS, length=LENGTH, seed=0).build(tokenizer)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.inference_mode():
        logits = model(batch.tokens).logits[torch.arange(len(batch.answers)), batch.answer_pos]
    return float(logits.softmax(-1)[torch.arange(len(batch.answers)), batch.answers].mean())


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


TASK = ["--n-prompts", str(N_PROMPTS), "--length", str(LENGTH), "--device", "cpu"]


def test_olmo2_source_offline(olmo2_hub_cache, hub_cache_env):
    """Series, tokens per step, the missing step, the duplicate group with the final step known
    right from main, and a load equal to the Hugging Face forward."""
    hub_cache_env(olmo2_hub_cache["cache_dir"])
    models = olmo2_hub_cache["models"]
    source = open_source(OLMO2_REPO)
    assert isinstance(source, HubSource) and source.listing == "cache (HF_HUB_OFFLINE=1)"
    assert source.series == "stage1" and source.schedule.series_counts == {"stage1": 5, "stage2-ingredient1": 2}
    assert source.available_steps() == [0, 1000, 2000, 4000, 5000] and source.missing_steps() == [3000]
    assert [source.tokens_at(s) for s in (0, 1000, 5000)] == [0, 5 * 10**9, 21 * 10**9]
    assert source.final_digest() == sha256(models["main"] / "model.safetensors")
    assert source.duplicate_steps() == {2000: 5000} and source.searchable_steps() == [0, 1000, 4000, 5000]
    checkpoint = source.load(4000, device="cpu")
    assert checkpoint.revision == "stage1-step4000-tokens17B"
    assert checkpoint.digest == sha256(models["stage1-step4000-tokens17B"] / "model.safetensors")

    from transformers import AutoModelForCausalLM

    tokens = torch.tensor([[3, 17, 200, 5, 17, 200, 5, 99, 1, 0, 255, 17]])
    hf = AutoModelForCausalLM.from_pretrained(models["stage1-step4000-tokens17B"], attn_implementation="eager").eval()
    with torch.inference_mode():
        torch.testing.assert_close(checkpoint.model(tokens), hf(tokens).logits, atol=1e-5, rtol=0)

    ingredient = open_source(f"{OLMO2_REPO}:stage2-ingredient1")
    assert ingredient.available_steps() == [0, 1000] and ingredient.missing_steps() == []
    assert ingredient.load(1000, device="cpu").digest == sha256(
        models["stage2-ingredient1-step1000-tokens4B"] / "model.safetensors"
    )


@pytest.mark.slow
def test_olmo2_cli_curve_bisect_rank_heads(olmo2_hub_cache, hub_cache_env, tmp_path):
    hub_cache_env(olmo2_hub_cache["cache_dir"])
    models = olmo2_hub_cache["models"]
    tokenizer = open_source(OLMO2_REPO).tokenizer()

    invoke("curve", OLMO2_REPO, "--steps", "0,1000,5000", *TASK, "--out", tmp_path / "curve")
    curve = pd.read_csv(tmp_path / "curve" / "emergence.csv")
    assert curve["step"].tolist() == [0, 1000, 5000] and set(curve["model"]) == {"OLMo-2-0425-1B"}
    expected = hf_p_answer(models["stage1-step1000-tokens5B"], tokenizer)
    assert curve.loc[curve["step"] == 1000, "p_answer"].item() == pytest.approx(expected, abs=1e-5)

    invoke("curve", f"{OLMO2_REPO}:stage2-ingredient1", "--steps", "1000", *TASK, "--out", tmp_path / "ingredient")
    p_ingredient = pd.read_csv(tmp_path / "ingredient" / "emergence.csv")["p_answer"].item()
    assert p_ingredient == pytest.approx(
        hf_p_answer(models["stage2-ingredient1-step1000-tokens4B"], tokenizer), abs=1e-5
    )
    assert abs(p_ingredient - expected) > 1e-4  # the other series' step 1000 is another model

    result = invoke("bisect", OLMO2_REPO, *TASK, "--out", tmp_path / "bisect")
    points = pd.read_csv(tmp_path / "bisect" / "points.csv")
    assert points["emerged"].tolist() == [False] and points["n_evaluations"].tolist() == [2]  # random models
    table = pd.read_csv(tmp_path / "bisect" / "checkpoints.csv")
    assert table[["step", "status"]].values.tolist() == [
        [0, "searchable"],
        [1000, "searchable"],
        [2000, "duplicate-excluded"],
        [3000, "missing"],
        [4000, "searchable"],
        [5000, "duplicate-kept-final"],
    ]
    assert table["revision"][1] == "stage1-step1000-tokens5B" and table["tokens"][4] == 17 * 10**9
    assert (
        "hazard: OLMo-2-0425-1B seed 0: 1 steps excluded, identical weights within each group {2000, 5000}"
        in result.output
    )
    assert "1 steps of the schedule not in the local hub cache: 3000" in result.output
    evaluated = pd.read_csv(tmp_path / "bisect" / "emergence.csv")["step"].tolist()
    assert evaluated == [0, 5000]  # first and last searchable steps

    missing = runner.invoke(app, ["rank-heads", OLMO2_REPO, "--pre", "3000", "--post", "4000", *TASK])
    assert missing.exit_code == 2 and "step 3000" in missing.output and "2000, 4000" in missing.output


@pytest.mark.slow
def test_olmo2_cli_rank_heads(olmo2_hub_cache, hub_cache_env, tmp_path):
    """Random tiny models do not emerge: the ranking is asked for directly, with both engines;
    each equals a hand-written hook patch of the top head, and the two agree to 1e-5."""
    hub_cache_env(olmo2_hub_cache["cache_dir"])
    for method in ("fast", "reference"):
        invoke(
            "rank-heads",
            OLMO2_REPO,
            "--pre",
            "1000",
            "--post",
            "4000",
            "--method",
            method,
            *TASK,
            "--out",
            tmp_path / method,
        )
    fast = pd.read_csv(tmp_path / "fast" / "heads.csv").sort_values(["layer", "head"])
    reference = pd.read_csv(tmp_path / "reference" / "heads.csv").sort_values(["layer", "head"])
    assert len(fast) == 2 * 4 and sorted(fast["rank"]) == list(range(1, 9))
    assert (fast["delta"].to_numpy() - reference["delta"].to_numpy()).__abs__().max() < 1e-5
    top = reference.sort_values("rank").iloc[0]
    assert top["delta"] == pytest.approx(
        _hooked_delta_p(OLMO2_REPO, 1000, 4000, int(top["layer"]), int(top["head"])), abs=1e-5
    )


def _hooked_delta_p(spec: str, pre: int, post: int, layer: int, head: int) -> float:
    """delta_p of one head by hand: the pre model run with that head's hook_pattern replaced by
    the post model's, minus the pre model's own p(answer)."""
    source = open_source(spec)
    batch = make_task("repetition", n_prompts=N_PROMPTS, length=LENGTH, seed=0).build(source.tokenizer())
    name = f"blocks.{layer}.attn.hook_pattern"
    rows = torch.arange(len(batch.answers))
    with torch.inference_mode():
        _, cache = source.load(post, device="cpu").model.run_with_cache(batch.tokens, names_filter=[name])
        post_pattern = cache[name].clone()
        model = source.load(pre, device="cpu").model

        def patch(pattern, hook):
            pattern[:, head] = post_pattern[:, head]
            return pattern

        def p(logits):
            return float(logits[rows, batch.answer_pos].softmax(-1)[rows, batch.answers].mean())

        return p(model.run_with_hooks(batch.tokens, fwd_hooks=[(name, patch)])) - p(model(batch.tokens))


@pytest.mark.slow
def test_gpt2_cli_curve_bisect_rank_heads(gpt2_hub_cache, hub_cache_env, tmp_path):
    """Plain ``step{N}-tokens{M}`` names (a count of tokens); duplicate weights at 100 and 400 with
    no main branch: neither label is known right, both leave the search."""
    hub_cache_env(gpt2_hub_cache["cache_dir"])
    models = gpt2_hub_cache["models"]
    source = open_source(GPT2_REPO)
    assert source.series == "" and source.available_steps() == [0, 100, 200, 400, 500]
    assert source.tokens_at(200) == 409600 and source.missing_steps() == [300]
    assert source.final_digest() is None and source.duplicate_steps() == {100: 400, 400: 100}
    tokenizer = source.tokenizer()

    invoke("curve", GPT2_REPO, "--steps", "0,200", *TASK, "--out", tmp_path / "curve")
    curve = pd.read_csv(tmp_path / "curve" / "emergence.csv")
    assert curve["p_answer"][1] == pytest.approx(hf_p_answer(models["step200-tokens409600"], tokenizer), abs=1e-5)

    result = invoke("bisect", GPT2_REPO, *TASK, "--out", tmp_path / "bisect")
    table = pd.read_csv(tmp_path / "bisect" / "checkpoints.csv")
    assert table["status"].tolist() == [
        "searchable",
        "duplicate-excluded",
        "searchable",
        "missing",
        "duplicate-excluded",
        "searchable",
    ]
    assert "no label known right" in result.output
    assert pd.read_csv(tmp_path / "bisect" / "emergence.csv")["step"].tolist() == [0, 500]

    for method in ("fast", "reference"):
        invoke(
            "rank-heads",
            GPT2_REPO,
            "--pre",
            "200",
            "--post",
            "500",
            "--method",
            method,
            *TASK,
            "--out",
            tmp_path / method,
        )
    fast = pd.read_csv(tmp_path / "fast" / "heads.csv").sort_values(["layer", "head"])
    reference = pd.read_csv(tmp_path / "reference" / "heads.csv").sort_values(["layer", "head"])
    assert len(fast) == 2 * 4
    assert (fast["delta"].to_numpy() - reference["delta"].to_numpy()).__abs__().max() < 1e-5
    top = reference.sort_values("rank").iloc[0]
    assert top["delta"] == pytest.approx(
        _hooked_delta_p(GPT2_REPO, 200, 500, int(top["layer"]), int(top["head"])), abs=1e-5
    )


def test_list_models_names_the_families():
    result = invoke("list-models")
    families = [line for line in result.output.splitlines() if line.startswith("# ")]
    assert families[0].startswith("# Pythia / PolyPythia: ids EleutherAI/pythia-")
    assert any(
        line.startswith("# OLMo-2: ids allenai/OLMo-2-") and "stage1-step{N}-tokens{M}B" in line for line in families
    )
    assert any("allenai/OLMo-1B-hf" in line and "step{N}-tokens{M}B" in line for line in families)


def test_olmo1_branch_names_and_load(tmp_path, byte_tokenizer_dir, hub_cache_env):
    """OLMo 1's ``step{N}-tokens{M}B`` branches: one series, tokens from the name, and a tiny
    ``olmo`` model (non-parametric LayerNorm) that boots with logits equal to Hugging Face's."""
    from transformers import AutoModelForCausalLM, OlmoConfig, OlmoForCausalLM

    from conftest import build_hub_cache

    torch.manual_seed(0)
    config = OlmoConfig(
        vocab_size=256,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
        tie_word_embeddings=False,
    )
    OlmoForCausalLM(config).save_pretrained(tmp_path / "m")
    build_hub_cache(
        tmp_path / "cache",
        "allenai/OLMo-1B-hf",
        {"step20000-tokens84B": tmp_path / "m", "step21000-tokens88B": tmp_path / "m"},
        byte_tokenizer_dir,
    )
    hub_cache_env(tmp_path / "cache")
    source = open_source("allenai/OLMo-1B-hf")
    assert source.series == "" and source.available_steps() == [20000, 21000]
    assert source.tokens_at(21000) == 88 * 10**9
    tokens = torch.tensor([[3, 17, 200, 5, 17, 200, 5, 99, 1, 0, 255, 17]])
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "m", attn_implementation="eager").eval()
    with torch.inference_mode():
        torch.testing.assert_close(source.load(20000, device="cpu").model(tokens), hf(tokens).logits, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- PolyPythia's split seeds (issue 72)
SPLIT_REPOS = {  # repo -> the seeds of its three tiny checkpoints (steps 0, 1000, 2000)
    "EleutherAI/pythia-160m-seed3": (30, 31, 32),
    "EleutherAI/pythia-160m-data-seed2": (20, 21, 22),
    "EleutherAI/pythia-160m-weight-seed1": (10, 11, 12),
}


@pytest.fixture(scope="module")
def split_hub_cache(tmp_path_factory, byte_tokenizer_dir):
    """A hub cache holding tiny GPT-NeoX stand-ins of three PolyPythia 160m repos, one with both
    seed parts varied, one with the data order varied, one with the initial weights varied, each
    at branches step0, step1000, step2000 of Pythia's schedule. Returns (cache folder, {repo:
    {branch: folder}})."""
    from conftest import build_hub_cache, save_tiny_neox

    root = tmp_path_factory.mktemp("split_hub")
    models = {}
    for repo, seeds in SPLIT_REPOS.items():
        name = repo.split("/")[-1]
        models[repo] = {
            f"step{step}": save_tiny_neox(root / f"{name}-{step}", seed=seed)
            for step, seed in zip((0, 1000, 2000), seeds, strict=True)
        }
        build_hub_cache(root / "cache", repo, models[repo], byte_tokenizer_dir)
    return root / "cache", models


def test_polypythia_split_seed_ids_offline(split_hub_cache, hub_cache_env):
    """``-data-seed{N}`` and ``-weight-seed{N}`` open as Pythia repos (the 154-step schedule, the
    step{N} branches), load the weights of their branch, and are listed by list-models; an id the
    model cards do not list is refused in one line naming the valid ones."""
    from interp.sources.loading import PYTHIA_STEPS

    cache, models = split_hub_cache
    hub_cache_env(cache)
    for repo in ("EleutherAI/pythia-160m-data-seed2", "EleutherAI/pythia-160m-weight-seed1"):
        source = open_source(repo)
        assert isinstance(source, HubSource) and source.steps == tuple(PYTHIA_STEPS) and len(PYTHIA_STEPS) == 154
        assert source.available_steps() == [0, 1000, 2000]
        checkpoint = source.load(1000, device="cpu")
        assert checkpoint.revision == "step1000"
        assert checkpoint.digest == sha256(models[repo]["step1000"] / "model.safetensors")
        source.close()
    listed = invoke("list-models").output.split()
    for part in ("data", "weight"):
        assert all(f"EleutherAI/pythia-160m-{part}-seed{n}" in listed for n in (1, 2, 3))
    assert "EleutherAI/pythia-160m-data-seed4" not in listed and "EleutherAI/pythia-70m-data-seed1" not in listed
    with pytest.raises(
        ValueError, match=r"unknown model id 'EleutherAI/pythia-70m-data-seed1'.*pythia-160m-\{data,weight\}"
    ):
        HubSource("EleutherAI/pythia-70m-data-seed1")


def test_population_over_hub_runs_groups_them_by_which_seed_varies(split_hub_cache, hub_cache_env):
    import emergence_lens as el
    from interp.tasks import RepetitionTask

    cache, _ = split_hub_cache
    hub_cache_env(cache)
    result = el.population(
        list(SPLIT_REPOS),
        task=RepetitionTask(n_prompts=8, length=6),
        config=el.StudyConfig(threshold=0.125, hold=0, device="cpu"),
        progress=False,
    )
    runs = result.runs.set_index("run")
    assert runs.loc["EleutherAI/pythia-160m-seed3", ["arm", "init_seed", "data_order_seed"]].tolist() == [
        "L2-d32-h4",
        3,
        3,
    ]
    assert runs.loc["EleutherAI/pythia-160m-data-seed2", ["arm", "init_seed", "data_order_seed"]].tolist() == [
        "L2-d32-h4 (data order varied)",
        0,
        2,
    ]
    assert runs.loc["EleutherAI/pythia-160m-weight-seed1", ["arm", "init_seed", "data_order_seed"]].tolist() == [
        "L2-d32-h4 (initialisation varied)",
        1,
        0,
    ]
    assert set(result.arms["arm"]) == {
        "L2-d32-h4",
        "L2-d32-h4 (data order varied)",
        "L2-d32-h4 (initialisation varied)",
    }
    assert result.curves.groupby("run")["step"].apply(list).tolist() == [[0, 1000, 2000]] * 3
