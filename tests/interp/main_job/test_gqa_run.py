"""A Llama-style run with grouped-query attention (RMSNorm, rotary, SwiGLU; 4 query heads sharing
2 key/value heads) in local step folders goes through the whole main job (issue 57 item 3): the
curve, the point of emergence, the ranking with patterns patched (each head a query head, its
key/value head named; the patched pattern's effect equal to a hand-written hook's to 1e-5) and the
report. The models are tiny and random; the capability is a task file whose answers are the last
checkpoint's own greedy predictions, so that it is absent at the first checkpoints and present at
the last: a real point of emergence between two real checkpoints, found by the code under test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from emergence_lens.cli import app
from tests.conftest import save_byte_tokenizer

runner = CliRunner()
N_HEADS, N_KV = 4, 2


def gqa_config(architecture: str = "llama"):
    """A tiny Llama or Qwen2 config with grouped-query attention (4 query heads, 2 key/value heads)."""
    from transformers import LlamaConfig, Qwen2Config

    shape = dict(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=N_HEADS,
        num_key_value_heads=N_KV,
        max_position_embeddings=64,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    return LlamaConfig(**shape) if architecture == "llama" else Qwen2Config(**shape, use_sliding_window=False)


def save_gqa_run(root: Path, architecture: str = "llama") -> Path:
    """Steps 0, 10, 20 of a random Llama or Qwen2 with grouped-query attention, and a byte tokenizer."""
    from transformers import AutoModelForCausalLM

    for step, seed in ((0, 0), (10, 1), (20, 2)):
        torch.manual_seed(seed)
        AutoModelForCausalLM.from_config(gqa_config(architecture)).eval().save_pretrained(root / f"step{step}")
    save_byte_tokenizer(root / "tokenizer")
    return root


def own_answers_file(run: Path, path: Path) -> Path:
    """A task file: letter prompts whose answer is step 20's greedy next byte, kept where that byte
    is a printable letter and steps 0 and 10 predict another one."""
    from transformers import AutoModelForCausalLM

    models = {s: AutoModelForCausalLM.from_pretrained(run / f"step{s}").eval() for s in (0, 10, 20)}
    generator = torch.Generator().manual_seed(0)
    rows = []
    while len(rows) < 24:
        tokens = torch.randint(97, 123, (64, 8), generator=generator)
        with torch.no_grad():
            guess = {s: m(tokens).logits[:, -1].argmax(-1) for s, m in models.items()}
        for i in range(len(tokens)):
            answer = int(guess[20][i])
            if 65 <= answer <= 122 and chr(answer).isalpha() and answer not in (int(guess[0][i]), int(guess[10][i])):
                rows.append(
                    {"prompt": bytes(tokens[i].tolist()).decode(), "answer": chr(answer), "id": f"r{len(rows)}"}
                )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[:24]))
    return path


@pytest.fixture(scope="module")
def gqa_run(tmp_path_factory) -> Path:
    """Steps 0, 10, 20 of a random Llama with grouped-query attention, and a byte tokenizer."""
    return save_gqa_run(tmp_path_factory.mktemp("gqa") / "llama-gqa")


@pytest.fixture(scope="module")
def own_answers(gqa_run, tmp_path_factory) -> Path:
    """:func:`own_answers_file` of :func:`gqa_run`."""
    return own_answers_file(gqa_run, tmp_path_factory.mktemp("task") / "own.jsonl")


def test_gqa_curve_and_ranking_name_query_and_key_value_heads(gqa_run, own_answers, tmp_path):
    curve = runner.invoke(app, ["curve", str(gqa_run), "--task-file", str(own_answers)], terminal_width=200)
    assert curve.exit_code == 0, curve.output
    rows = [line.split() for line in curve.output.splitlines() if line.split()[:1] == ["llama-gqa"]]
    accuracy = {int(r[4]): float(r[5]) for r in rows}
    assert accuracy[20] == 1.0 and accuracy[0] == 0.0 and accuracy[10] == 0.0
    ranked = runner.invoke(
        app,
        ["rank-heads", str(gqa_run), "--pre", "10", "--post", "20", "--task-file", str(own_answers)]
        + ["--out", str(tmp_path / "out")],
        terminal_width=200,
    )
    assert ranked.exit_code == 0, ranked.output
    assert "grouped-query attention: 4 query heads per layer share 2 key/value heads" in ranked.output
    import pandas as pd

    heads = pd.read_csv(tmp_path / "out" / "heads.csv")
    assert len(heads) == 2 * N_HEADS  # 8 query heads ranked
    assert (heads["kv_head"] == heads["head"] // (N_HEADS // N_KV)).all()
    assert sorted(zip(heads["layer"], heads["head"])) == [(l, h) for l in range(2) for h in range(N_HEADS)]


def test_gqa_patched_pattern_equals_a_hand_written_hook(gqa_run, own_answers):
    import emergence_lens as el

    source = el.open_source(gqa_run)
    batch = el.TaskFile(own_answers).build(source.tokenizer())
    ranking = el.rank_heads_between(source, 10, 20, batch, el.StudyConfig(n_boot=20, decompose=False))
    columns = list(ranking.heads.columns)
    assert columns[columns.index("layer") :][:3] == ["layer", "head", "kv_head"]
    post_source = el.open_source(gqa_run)
    post = post_source.load(20, device="cpu").model
    pre = el.open_source(gqa_run).load(10, device="cpu").model
    rows = torch.arange(len(batch.answers))
    with torch.no_grad():
        _, cache = post.run_with_cache(batch.tokens, names_filter=lambda n: n.endswith("attn.hook_pattern"))

        def p_answer(hooks) -> float:
            logits = pre.run_with_hooks(batch.tokens, fwd_hooks=hooks)
            probs = logits[rows, batch.answer_pos].float().softmax(-1)
            return float(probs[rows, batch.answers].mean())

        p_pre = p_answer([])
        assert ranking.value_pre == pytest.approx(p_pre, abs=1e-6)
        for layer in range(2):
            name = f"blocks.{layer}.attn.hook_pattern"
            for head in range(N_HEADS):

                def patch(pattern, hook, head=head, name=name):  # one query head's pattern from post
                    pattern[:, head] = cache[name][:, head]
                    return pattern

                by_hand = p_answer([(name, patch)]) - p_pre
                assert float(ranking.delta[layer, head]) == pytest.approx(by_hand, abs=1e-5), (layer, head)


@pytest.mark.slow
def test_gqa_run_goes_through_the_main_job_and_its_report(gqa_run, own_answers, tmp_path):
    import emergence_lens as el

    task = el.TaskFile(own_answers)
    # hold 0: the run's three checkpoints leave its crossing at step 20 no room for the default hold
    config = el.StudyConfig(scan=True, n_boot=20, scores=False, scrub=False, hold=0)
    with pytest.warns(RuntimeWarning, match="no component decomposition .* 4 query heads share 2 key/value heads"):
        report = el.run_study([str(gqa_run)], task, config, out_dir=tmp_path / "report", progress=False)
    (point,) = report.points.itertuples()
    assert (bool(point.emerged), int(point.pre_step), int(point.post_step)) == (True, 10, 20)
    assert len(report.heads) == 2 * N_HEADS and (tmp_path / "report" / "report.html").is_file()
    shutil.rmtree(tmp_path / "report")


def test_gqa_decomposition_is_refused_in_one_line(gqa_run, own_answers):
    result = runner.invoke(
        app, ["decompose", str(gqa_run), "--pre", "10", "--post", "20", "--task-file", str(own_answers)]
    )
    assert result.exit_code == 2
    (line,) = [s for s in result.output.splitlines() if s.startswith("error:")]
    assert "grouped-query attention (4 query heads share 2 key/value heads)" in line and "rank-heads" in line


def test_an_architecture_the_bridge_cannot_hook_is_one_line(tmp_path):
    from transformers import CTRLConfig, CTRLLMHeadModel

    from interp.sources import open_source
    from interp.sources.loading import TESTED_ARCHITECTURES

    for step in (0, 10):
        torch.manual_seed(step)
        config = CTRLConfig(vocab_size=256, n_embd=32, n_layer=1, n_head=2, dff=64, n_positions=64)
        CTRLLMHeadModel(config).save_pretrained(tmp_path / "ctrl" / f"step{step}")
    save_byte_tokenizer(tmp_path / "ctrl" / "tokenizer")
    with pytest.raises(ValueError) as error:
        open_source(tmp_path / "ctrl").load(0, device="cpu")
    text = str(error.value)
    assert (
        "\n" not in text
        and "ctrl step 0: CTRLLMHeadModel is not an architecture the TransformerLens bridge can hook" in text
    )
    assert all(name in text for name in TESTED_ARCHITECTURES)


def test_gqa_copying_scores_equal_those_of_the_same_model_with_a_kv_head_per_query_head(tmp_path):
    """Each query head's OV circuit reads its key/value head's W_V: the scores of a grouped-query
    Llama equal those of the same function written with one key/value head per query head (its
    k_proj/v_proj rows repeated in transformers' repeat_kv order)."""
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    from interp.scores import copying_scores, head_scores, repeated_random_tokens
    from interp.sources import open_source

    torch.manual_seed(3)
    gqa = LlamaForCausalLM(gqa_config()).eval()
    mha_config = gqa_config()
    mha_config.num_key_value_heads = N_HEADS
    mha = AutoModelForCausalLM.from_config(mha_config).eval()
    d_head, group = 64 // N_HEADS, N_HEADS // N_KV
    state = gqa.state_dict()
    for key, value in list(state.items()):
        if key.endswith(("k_proj.weight", "v_proj.weight")):  # [n_kv * d_head, d_model] -> per query head
            state[key] = value.view(N_KV, d_head, -1).repeat_interleave(group, dim=0).reshape(N_HEADS * d_head, -1)
    mha.load_state_dict(state)
    tokens = repeated_random_tokens(list(range(97, 123)), n_prompts=4, period=6, seed=0)
    with torch.no_grad():
        assert torch.allclose(gqa(tokens).logits, mha(tokens).logits, atol=1e-5)  # the same function
    bridges = []
    for model, name in ((gqa, "gqa"), (mha, "mha")):
        model.save_pretrained(tmp_path / name / "step0")
        save_byte_tokenizer(tmp_path / name / "tokenizer")
        bridges.append(open_source(tmp_path / name).load(0, device="cpu").model)
    got, want = copying_scores(bridges[0]), copying_scores(bridges[1])
    assert got.shape == (2, N_HEADS) and torch.isfinite(got).all()
    assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    scores = [head_scores(b, tokens, period=6) for b in bridges]
    for name in scores[1]:
        assert torch.allclose(scores[0][name], scores[1][name], atol=1e-5), name


@pytest.mark.slow
@pytest.mark.parametrize("architecture", ["llama", "qwen2"])
def test_emergence_run_with_head_scores_on_a_grouped_query_suite(tmp_path, architecture):
    """``emergence run`` with every step of the main job on (head scores, scrubber, report; the
    decomposition is not defined for shared key/value heads and says so) on a tiny Llama and Qwen2."""
    import pandas as pd

    run = save_gqa_run(tmp_path / f"{architecture}-gqa", architecture)
    answers = own_answers_file(run, tmp_path / "own.jsonl")
    out = tmp_path / "report"
    result = runner.invoke(
        app,
        ["run", str(run), "--task-file", str(answers), "--out", str(out), "--scan", "--n-boot", "20", "--hold", "0"],
        terminal_width=200,
    )
    assert result.exit_code == 0, result.output
    assert "4 query heads share 2 key/value heads" in result.output  # no decomposition: one line says why
    points = pd.read_csv(out / "points.csv")
    assert (bool(points["emerged"][0]), int(points["pre_step"][0]), int(points["post_step"][0])) == (True, 10, 20)
    heads = pd.read_csv(out / "heads.csv")
    assert len(heads) == 2 * N_HEADS and (heads["kv_head"] == heads["head"] // (N_HEADS // N_KV)).all()
    scores = pd.read_csv(out / "head_scores.csv")
    assert set(scores["score"]) == {"previous_token", "prefix_matching", "copying"}
    assert len(scores) == 3 * 3 * 2 * N_HEADS and scores["value"].between(-1, 1).all()
    assert (out / "report.html").is_file() and "scrubber" in (out / "report.html").read_text().lower()


def test_the_guides_architecture_table_is_the_tested_one():
    """docs/guide.md's architecture table is ``architecture_table()``, and every test it names exists."""
    import re

    from interp.sources.loading import ARCHITECTURE_TESTS, architecture_table

    root = Path(__file__).resolve().parents[3]
    assert architecture_table() in (root / "docs" / "guide.md").read_text()
    for _, tests in ARCHITECTURE_TESTS.values():
        for test in tests:
            file, _, name = test.partition("::")
            text = (root / file).read_text()
            assert not name or re.search(rf"^def {re.escape(name)}\(", text, re.M), test
