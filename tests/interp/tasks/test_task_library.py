"""The paper's four capabilities and the researcher's own prompts (issue 23): pattern completion,
IOI on a tiny model with a word-level tokenizer built here, task files, padded batches (equal to
each prompt run alone, fast patching equal to the reference), BOS conventions, and the registry.
"""

from __future__ import annotations

import json
import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.tasks import (
    IOI_NAMES,
    IOI_OBJECTS,
    IOI_PLACES,
    IOI_TEMPLATES,
    REGISTRY,
    IOITask,
    PatternCompletionTask,
    RepetitionTask,
    TaskBatch,
    TaskError,
    TaskFile,
    metric_for,
    parse_tasks,
    task_table,
    tokenizer_adds_bos,
)

EOT = "<|endoftext|>"


def word_vocab() -> list[str]:
    """Every word of the IOI templates and fillers, letters, digits and punctuation."""
    words = {EOT, "[UNK]", ",", ".", *"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"}
    for template in IOI_TEMPLATES:
        words |= set(template.replace(",", " ").replace(".", " ").split())
    words |= set(IOI_NAMES) | set(IOI_PLACES) | set(IOI_OBJECTS) | {"Paris", "France", "capital", "of", "is", "The"}
    words -= {"[A]", "[B]", "[PLACE]", "[OBJECT]"}
    return sorted(words)


def save_word_tokenizer(directory, bos: bool = False):
    """A word-level Hugging Face tokenizer folder (tokenizers' WordLevel model, whitespace and
    punctuation split). ``bos=True``: it prepends ``<s>`` as Llama's does; else no BOS is added,
    as Pythia's GPT-NeoX tokenizer and OLMo-2's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(word_vocab() + (["<s>"] if bos else []))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", vocab["<s>"])])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOT, pad_token=EOT, unk_token="[UNK]", bos_token="<s>" if bos else EOT
    )
    fast.save_pretrained(directory)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory)


@pytest.fixture(scope="module")
def word_tok(tmp_path_factory):
    return save_word_tokenizer(tmp_path_factory.mktemp("wordtok"))


@pytest.fixture(scope="module")
def byte_tok():
    from interp.sources import make_byte_tokenizer

    return make_byte_tokenizer()


# ----------------------------------------------------------------------------- pattern completion


def test_pattern_completion_answers_follow_the_template(byte_tok):
    task = PatternCompletionTask(n_prompts=8, templates=("ABBA", "ABCABC"), repeats=2, seed=3)
    batch = task.build(byte_tok)
    assert "ours" in PatternCompletionTask.__doc__  # the paper gives no definition
    for i in range(len(batch)):
        template = task.templates[i % 2]
        n = int(batch.answer_pos[i]) + 1
        assert n == len(template) * 2 - 1  # each prompt's own last token
        seq = batch.tokens[i, :n].tolist() + [int(batch.answers[i])]
        binding = {}
        for letter, token in zip(template * 2, seq):
            assert binding.setdefault(letter, token) == token  # one token per letter, everywhere
        assert len(set(binding.values())) == len(binding)  # distinct letters, distinct tokens
        assert sorted(set(batch.distractors[i].tolist())) == sorted(set(binding.values()) - {seq[-1]})
    assert batch.padded and batch.attention_mask[0].sum() == 7 and batch.attention_mask[1].sum() == 11
    with pytest.raises(ValueError, match="template 'AAAA' must be upper-case letters with at least two distinct"):
        PatternCompletionTask(templates=("AAAA",))


# ----------------------------------------------------------------------------- IOI


def test_ioi_on_a_word_level_tokenizer_and_a_tiny_model(word_tok, tmp_path):
    from transformers import GPTNeoXForCausalLM

    from interp.patching import metric_values
    from interp.sources.catalogue import neox_config

    batch = IOITask(n_prompts=12, seed=0).build(word_tok)
    vocab = word_tok.get_vocab()
    assert not batch.prepend_bos
    for i, text in enumerate(batch.prompts):
        io, s = word_tok.decode([int(batch.answers[i])]), word_tok.decode([int(batch.distractors[i, 0])])
        assert io in IOI_NAMES and s in IOI_NAMES and io != s
        assert text.split().count(s) == 2 and text.split().count(io) == 1  # S twice, IO once
        first = next(w for w in text.replace(",", " ").split() if w in (io, s))
        assert first == (io if i % 2 == 0 else s)  # ABBA (IO first), then BABA, alternating
        n = int(batch.attention_mask[i].sum())
        assert batch.tokens[i, :n].tolist() == word_tok(text)["input_ids"]  # the HF tokenizer's own ids
        assert int(batch.answer_pos[i]) == n - 1 and batch.tokens[i, n - 1] == vocab["to"]
    assert batch.padded  # templates differ in length
    assert metric_for(IOITask()) == "logit-diff" and metric_for(IOITask(), "p") == "p"

    # logit-diff = logit(IO) - logit(S) at each prompt's last token, from a bridge of a tiny model
    config = neox_config(32, 2, 4, len(vocab), 64)
    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(config).eval()
    model.save_pretrained(tmp_path)
    word_tok.save_pretrained(tmp_path)
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_transformers(str(tmp_path), hf_model=model, tokenizer=word_tok).eval()
    values = metric_values(bridge, batch, "logit-diff")
    for i in range(len(batch)):
        n = int(batch.answer_pos[i]) + 1
        with torch.inference_mode():
            logits = model(batch.tokens[i : i + 1, :n]).logits[0, -1]
        expected = logits[batch.answers[i]] - logits[batch.distractors[i, 0]]
        assert abs(float(values[i]) - float(expected)) < 1e-5


def test_ioi_is_refused_for_the_byte_tokenizer_in_one_line(byte_tok):
    with pytest.raises(TaskError) as err:
        IOITask(n_prompts=2).build(byte_tok)
    message = str(err.value)
    assert "\n" not in message and "0 of 20 names" in message and "' Mary' -> 5 tokens" in message
    assert "word-piece vocabulary" in message


# ----------------------------------------------------------------------------- task files


def write(path, text: str | bytes):
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_task_file_jsonl_and_csv(word_tok, tmp_path):
    rows = [
        {"prompt": "The capital of France is", "answer": " Paris", "distractors": [" John"], "id": "q1"},
        {
            "prompt": "Mary and John went to the store . John gave a drink to",
            "answer": " Mary",
            "distractors": [" John"],
            "id": "q2",
        },
    ]
    jsonl = write(tmp_path / "mine.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    batch = TaskFile(jsonl).build(word_tok)
    vocab = word_tok.get_vocab()
    assert batch.task == "mine" and batch.answers.tolist() == [vocab["Paris"], vocab["Mary"]]
    assert batch.distractors.tolist() == [[vocab["John"]], [vocab["John"]]]
    assert batch.answer_pos.tolist() == [4, 12] and batch.padded
    csv_file = write(
        tmp_path / "mine.csv", "id,prompt,answer,distractors\nq1,The capital of France is, Paris, John| Mary\n"
    )
    batch = TaskFile(csv_file).build(word_tok)
    assert batch.distractors.tolist() == [[vocab["John"], vocab["Mary"]]] and batch.attention_mask is None


def test_task_file_bad_rows_one_line_each_then_a_count(byte_tok, tmp_path):
    rows = [{"prompt": "abc", "answer": "d"}] + [{"prompt": "x", "answer": f"long{i}"} for i in range(12)]
    path = write(tmp_path / "bad.jsonl", "\n".join(json.dumps(r) for r in rows))
    task = TaskFile(path)  # form is fine: the tokenizer finds the bad rows
    with pytest.raises(TaskError) as err:
        task.build(byte_tok)
    lines = err.value.lines
    assert len(lines) == 11 and lines[-1] == "... and 2 more bad rows"
    assert lines[0].startswith("bad.jsonl: row 1: answer 'long0' is 5 tokens ['l', 'o', 'n', 'g', '0']")


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("empty.jsonl", "\n\n", "has no rows"),
        (
            "missing.jsonl",
            '{"prompt": "a"}\n{"answer": "b"}\n',
            "missing or empty field at line 1 (answer), line 2 (prompt)",
        ),
        ("dup.csv", "id,prompt,answer\n7,a,b\n7,c,d\n", "duplicate ids: id '7' at line 2, line 3"),
        ("latin1.csv", "prompt,answer\ncaf\xe9,b\n".encode("latin-1"), "is not UTF-8 (line 2, byte 17: b'\\xe9')"),
        (
            "mixed.jsonl",
            '{"prompt": "a", "answer": "b", "distractors": ["c"]}\n{"prompt": "a", "answer": "b"}\n',
            "distractors on some rows only",
        ),
        ("notes.txt", "prompt,answer\n", "extension '.txt' is unknown"),
    ],
)
def test_task_file_form_errors_are_one_line(tmp_path, name, content, message):
    path = write(tmp_path / name, content)
    with pytest.raises(TaskError) as err:
        TaskFile(path)
    assert len(err.value.lines) == 1 and message in err.value.lines[0]


def test_cli_refuses_a_bad_task_file_before_loading_a_checkpoint(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from emergence_lens.cli import app
    from interp import sources as checkpoints

    def no_load(*args, **kwargs):
        raise AssertionError("a checkpoint was loaded")

    monkeypatch.setattr(checkpoints.CheckpointSource, "load", no_load)
    monkeypatch.setattr("interp.sources.embedded.ensure_suite", no_load)
    path = write(tmp_path / "bad.jsonl", "\n".join(json.dumps({"prompt": "x", "answer": f"w{i}"}) for i in range(3)))
    result = CliRunner().invoke(
        app, ["run", "embedded-quick", "--task", "repetition", "--task-file", str(path), "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 3 and lines[0].startswith("error: emergence run: bad.jsonl: row 0: answer 'w0' is 2 tokens")
    result = CliRunner().invoke(app, ["curve", "embedded-quick/neox-2l-64d-seed1", "--task", "ioi"])
    assert result.exit_code == 2 and "word-piece vocabulary" in result.output
    result = CliRunner().invoke(app, ["curve", "embedded-quick/neox-2l-64d-seed1", "--task", "repetition,nope"])
    assert result.exit_code == 2 and "unknown task 'nope'; valid tasks: repetition, token-repetition" in result.output
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- registry


def test_registry_and_list_tasks():
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    assert list(REGISTRY) == ["repetition", "token-repetition", "pattern-completion", "ioi"]
    table = task_table()
    assert table.set_index("task").loc["ioi", "default_metric"] == "logit-diff"
    result = CliRunner().invoke(app, ["list-tasks"])
    assert result.exit_code == 0
    for spec in REGISTRY.values():
        assert f"{spec.name}: {spec.description}" in result.output
    assert "Wang et al. 2022" in result.output and "the definition is ours" in result.output
    tasks = parse_tasks("repetition, pattern-completion", n_prompts=4, length=5, seed=0)
    assert [t.name for t in tasks] == ["repetition", "pattern-completion"] and tasks[0].length == 5
    with pytest.raises(ValueError, match="task 'repetition' is given twice"):
        parse_tasks("repetition,repetition")


# ----------------------------------------------------------------------------- BOS


@pytest.mark.parametrize(
    "family,adds_bos", [("pythia (gpt-neox tokenizer)", False), ("olmo-2", False), ("llama-style", True)]
)
def test_bos_convention_matches_the_hf_tokenizer(tmp_path, family, adds_bos):
    """A tokenizer configured as each family's: the task's ids equal ``tokenizer(text)["input_ids"]``."""
    tok = save_word_tokenizer(tmp_path, bos=adds_bos)
    assert tokenizer_adds_bos(tok) is adds_bos
    for task in (RepetitionTask(n_prompts=3, length=4), IOITask(n_prompts=3)):
        batch = task.build(tok)
        assert batch.prepend_bos is adds_bos
        for i, text in enumerate(batch.prompts):
            n = int(batch.answer_pos[i]) + 1
            assert batch.tokens[i, :n].tolist() == tok(text)["input_ids"]
    forced = RepetitionTask(n_prompts=2, length=4, prepend_bos=not adds_bos).build(tok)
    assert forced.prepend_bos is (not adds_bos) and int(forced.answer_pos[0]) == 6 + (0 if adds_bos else 1)


# ----------------------------------------------------------------------------- padding


def _padded_batch(post, vocab: int) -> TaskBatch:
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in (9, 5, 12, 7, 3, 12)]
    batch = TaskBatch.from_token_lists(prompts, [0] * len(prompts), pad_id=1, distractors=[[2, 3, 4]] * len(prompts))
    with torch.inference_mode():
        logits = post(batch.tokens, **batch.forward_kwargs())
    batch.answers = logits[torch.arange(len(prompts)), batch.answer_pos].argmax(-1)
    return batch


@pytest.fixture(scope="module", params=["neox", "olmo2"])
def bridges(request, tmp_path_factory):
    from tests.interp.patching.test_patching_families import hf_model
    from tests.interp.patching.test_patching_targets import VOCAB, boot, neox_hf

    torch.set_num_threads(1)
    make = neox_hf if request.param == "neox" else (lambda seed: hf_model("olmo2", seed))
    pre, post = (boot(make(seed), tmp_path_factory.mktemp(f"{request.param}{seed}")) for seed in (0, 1))
    return request.param, pre, post, _padded_batch(post, VOCAB)


def test_padded_batch_equals_each_prompt_alone(bridges):
    from interp.patching import metric_values
    from interp.tasks import evaluate

    _, pre, _, batch = bridges
    assert batch.padded
    padded = metric_values(pre, batch, "p")
    for i in range(len(batch)):
        n = int(batch.answer_pos[i]) + 1
        alone = TaskBatch.from_token_lists([batch.tokens[i, :n].tolist()], [int(batch.answers[i])])
        assert abs(float(padded[i]) - float(metric_values(pre, alone, "p")[0])) < 1e-5
    score = evaluate(pre, batch, chunk_size=4)
    assert abs(score.p_answer - float(padded.mean())) < 1e-5


def test_fast_patching_equals_reference_on_a_padded_batch(bridges):
    from interp.patching import capture_post, patch_values, per_head_delta
    from interp.patching.targets import Target

    family, pre, post, batch = bridges
    captured = capture_post(post, batch)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to full forwards fails the test
        for kind in ("pattern", "z", "v"):
            fast = per_head_delta(pre, captured, batch, kind, method="fast", per_prompt=True)
            ref = per_head_delta(pre, captured, batch, kind, method="reference", per_prompt=True)
            torch.testing.assert_close(fast, ref, atol=1e-5, rtol=0)
            assert float(ref.abs().max()) > 1e-3  # the patches move p(answer)
        targets = [Target("pattern", ((0, 1), (2, 3))), Target("mlp", layers=(1,))]
        fast = patch_values(pre, captured, batch, targets, metric="logit-diff", method="fast")
        ref = patch_values(pre, captured, batch, targets, metric="logit-diff", method="reference")
        torch.testing.assert_close(fast, ref, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- several tasks in one run


@pytest.mark.slow
def test_main_job_on_several_tasks(tmp_path):
    """Four tasks (three registered, one file) on a word-level local suite: one analysis per
    (run, task), a task column in every table, one summary row and one report section per task."""
    import pandas as pd
    from typer.testing import CliRunner

    from conftest import save_tiny_neox
    from emergence_lens.cli import app
    from interp.main_job.report import MainJobReport

    suite = tmp_path / "suite"
    tok = save_word_tokenizer(suite / "tokenizer")
    for seed, step in enumerate([0, 100, 200]):
        save_tiny_neox(suite / f"step{step}", seed=seed, d_vocab=len(tok.get_vocab()))
    mine = write(
        tmp_path / "capitals.csv",
        "prompt,answer,distractors\nThe capital of France is, Paris, John\n"
        "Mary and John went to the store . John gave a drink to, Mary, John\n",
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(suite),
            "--task",
            "repetition,pattern-completion,ioi",
            "--task-file",
            str(mine),
            "--n-prompts",
            "6",
            "--length",
            "5",
            "--scan",
            "--device",
            "cpu",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    tasks = ["repetition", "pattern-completion", "ioi", "capitals"]
    for name in ("emergence", "points", "heads", "topk"):
        table = pd.read_csv(out / f"{name}.csv")
        assert list(table.columns[:4]) == ["model", "seed", "task", "prepend_bos"]
    emergence, points = pd.read_csv(out / "emergence.csv"), pd.read_csv(out / "points.csv")
    assert list(points["task"]) == tasks and not points["prepend_bos"].any()
    assert emergence.groupby("task")["step"].apply(sorted).to_dict() == {t: [0, 100, 200] for t in tasks}
    report = MainJobReport.load(out)
    assert list(report.summary()["task"]) == tasks and report.tasks == tasks
    figure = report.capability_figure(task="ioi")
    # one run's legend entry (its name, then its pre -> post span or "not emerged")
    assert {t.name.split(":")[0] for t in figure.data if t.name and "seed" in t.name} == {"suite seed 0"}
    with pytest.raises(ValueError, match="task 'nope' is not in this report; its tasks: repetition, "):
        report.capability_figure(task="nope")
    html = (out / "report.html").read_text()
    for task in tasks:
        assert f"<h2>Task: {task}</h2>" in html
    # --task-file alone: only the file's task (no default repetition beside it)
    result = CliRunner().invoke(
        app,
        [
            "curve",
            str(suite),
            "--task-file",
            str(mine),
            "--steps",
            "0,200",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "curve"),
        ],
    )
    assert result.exit_code == 0, result.output
    curve = pd.read_csv(tmp_path / "curve" / "emergence.csv")
    assert list(curve["task"]) == ["capitals", "capitals"] and list(curve["step"]) == [0, 200]
    result = CliRunner().invoke(
        app,
        [
            "bisect",
            str(suite),
            "--task",
            f"ioi,{mine}",
            "--n-prompts",
            "6",
            "--device",
            "cpu",
            "--out",
            str(tmp_path / "bisect"),
        ],
    )
    assert result.exit_code == 0, result.output
    bisected = pd.read_csv(tmp_path / "bisect" / "points.csv")
    assert list(bisected["task"]) == ["ioi", "capitals"]
    assert list(bisected["emerged"]) == list(points.set_index("task").loc[["ioi", "capitals"], "emerged"])
    # p(answer) of the IOI rows equals the metric of a separate single-task run
    from interp.emergence import StepEvaluator
    from interp.sources import LocalSuiteSource

    src = LocalSuiteSource(suite)
    single = StepEvaluator(src, IOITask(n_prompts=6, seed=0).build(src.tokenizer()), device="cpu")
    single(100)
    src.close()
    ioi = emergence[(emergence["task"] == "ioi") & (emergence["step"] == 100)]
    assert abs(float(ioi["p_answer"].iloc[0]) - float(single.table()["p_answer"].iloc[0])) < 1e-6


# ----------------------------------------------------------------------------- one metric default


def test_every_road_ranks_ioi_heads_by_the_tasks_own_metric(word_tok, tmp_path):
    """No metric given means the task's own, decided once (interp.tasks.metric_for): Python's
    rank_heads_between with StudyConfig(), head_ranking and decompose_jump called directly with the
    default config, and the command line's rank-heads all rank IOI heads by logit difference
    (issue 54: rank_heads_between and head_ranking used to fall back to p)."""
    import pandas as pd
    from typer.testing import CliRunner

    import emergence_lens as el
    from conftest import save_tiny_neox
    from emergence_lens.cli import app
    from interp.sources import LocalSuiteSource

    suite = tmp_path / "suite"
    word_tok.save_pretrained(suite / "tokenizer")
    for seed, step in enumerate([0, 100]):
        save_tiny_neox(suite / f"step{step}", seed=seed, d_vocab=len(word_tok.get_vocab()))
    source = LocalSuiteSource(suite)
    try:
        batch = IOITask(n_prompts=6, seed=0).build(source.tokenizer())
        ranking = el.rank_heads_between(source, 0, 100, batch, el.StudyConfig(decompose=False, n_boot=0))
        post = el.capture_post(source.load(100).model, batch, weights=True)
        pre = source.load(0).model
        direct = el.head_ranking(pre, post, batch)  # the default StudyConfig(): metric None
        parts = el.decompose_jump(pre, post, batch, options=el.DecomposeOptions(targets=["pattern"]))
    finally:
        source.close()
    assert metric_for(batch) == metric_for("ioi") == metric_for(IOITask()) == "logit-diff"
    assert ranking.metric == "logit-diff" and set(ranking.heads["metric"]) == {"logit-diff"}
    assert direct.metric == "logit-diff" and direct.unit == "logits" and set(direct.topk["metric"]) == {"logit-diff"}
    torch.testing.assert_close(
        direct.delta.cpu(), ranking.delta, atol=1e-5, rtol=0
    )  # the same values, not only the name
    assert direct.value_post - direct.value_pre == pytest.approx(ranking.value_post - ranking.value_pre, abs=1e-5)
    assert set(parts["metric"]) == {"logit-diff"} and set(parts["unit"]) == {"logits"}
    assert parts["value_pre"].iloc[0] == pytest.approx(direct.value_pre, abs=1e-5)
    out = tmp_path / "cli"
    args = ["rank-heads", str(suite), "--task", "ioi", "--n-prompts", "6", "--pre", "0", "--post", "100"]
    result = CliRunner().invoke(app, [*args, "--device", "cpu", "--out", str(out)])
    assert result.exit_code == 0, result.output
    heads = pd.read_csv(out / "heads.csv")
    assert set(heads["metric"]) == {"logit-diff"}
    pd.testing.assert_series_equal(
        heads.sort_values(["layer", "head"])["delta"].reset_index(drop=True),
        ranking.heads.sort_values(["layer", "head"])["delta"].reset_index(drop=True),
        check_exact=False,
        atol=1e-5,
        rtol=0,
    )
