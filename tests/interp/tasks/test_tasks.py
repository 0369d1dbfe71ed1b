"""Capability tasks: prompt construction, tokenizer checks, metrics."""

import pytest
import torch

from interp.sources import make_byte_tokenizer as byte_tokenizer
from interp.tasks import RepetitionTask, TaskBatch, TaskError, TokenRepetitionTask, evaluate, make_task, score_logits


@pytest.fixture(scope="module")
def tok():
    return byte_tokenizer()


def test_repetition_prompts_follow_the_paper_format(tok):
    batch = RepetitionTask(n_prompts=5, length=8, seed=3).build(tok)
    assert batch.tokens.shape == (5, 15)
    assert torch.equal(batch.answer_pos, torch.full((5,), 14))
    for row, answer, text in zip(batch.tokens, batch.answers, batch.prompts):
        digits = tok.decode(row.tolist())
        assert digits == text and len(digits) == 15 and digits.isdigit()
        assert digits[8:] == digits[:7]  # partial repeat of the first 7 digits
        assert tok.decode([int(answer)]) == digits[7]  # answer: the next digit of the repeat


def test_repetition_is_deterministic_given_seed(tok):
    a = RepetitionTask(n_prompts=4, seed=1).build(tok)
    b = RepetitionTask(n_prompts=4, seed=1).build(tok)
    c = RepetitionTask(n_prompts=4, seed=2).build(tok)
    assert torch.equal(a.tokens, b.tokens) and not torch.equal(a.tokens, c.tokens)


def test_byte_tokenizer_falls_back_to_no_separator(tok):
    # " 7" is two byte tokens, so the automatic prefix is "" for a byte vocabulary
    batch = RepetitionTask(n_prompts=2, length=4).build(tok)
    assert " " not in batch.prompts[0]


def test_digit_that_splits_is_a_clear_error(tok):
    with pytest.raises(TaskError, match=r"item ' 0' tokenises to 2 tokens"):
        RepetitionTask(n_prompts=2, prefix=" ").build(tok)


def test_unequal_prompt_lengths_are_padded_on_the_right():
    batch = TaskBatch.from_token_lists([[1, 2], [1, 2, 3]], [4, 5], pad_id=9)
    assert batch.tokens.tolist() == [[1, 2, 9], [1, 2, 3]] and batch.answer_pos.tolist() == [1, 2]
    assert batch.attention_mask.tolist() == [[1, 1, 0], [1, 1, 1]] and batch.padded
    assert batch.forward_kwargs()["position_ids"].tolist() == [[0, 1, 2], [0, 1, 2]]
    equal = TaskBatch.from_token_lists([[1, 2], [3, 4]], [4, 5])
    assert equal.attention_mask is None and equal.forward_kwargs() == {}
    with pytest.raises(TaskError, match="prompt 1 is empty"):
        TaskBatch.from_token_lists([[1], []], [4, 5])


def test_token_repetition_answers_are_the_next_repeated_token(tok):
    batch = TokenRepetitionTask(n_prompts=6, length=7, seed=0).build(tok)
    assert batch.tokens.shape == (6, 13)
    assert torch.equal(batch.tokens[:, 7:], batch.tokens[:, :6])
    assert torch.equal(batch.answers, batch.tokens[:, 6])
    assert all(len(set(row[:7].tolist())) == 7 for row in batch.tokens)  # sampled without replacement


def test_unknown_task_lists_valid_ones():
    with pytest.raises(
        ValueError, match="unknown task 'nope'; valid tasks: repetition, token-repetition, pattern-completion, ioi"
    ):
        make_task("nope")


def test_make_task_refuses_a_parameter_the_task_does_not_take():
    """IOI has no ``length``: refused in one line naming it and IOI's parameters (not dropped)."""
    with pytest.raises(ValueError) as err:
        make_task("ioi", n_prompts=4, length=5)
    assert str(err.value) == (
        "task 'ioi' takes no parameter 'length'; valid parameters: "
        "n_prompts, order, seed, names, places, objects, prepend_bos"
    )
    assert make_task("repetition", n_prompts=3, length=5).length == 5  # a parameter it takes is used
    # the CLI's shared options (--n-prompts, --length) go to each task that has them
    from interp.tasks import parse_tasks

    ioi, rep = parse_tasks("ioi,repetition", n_prompts=4, length=5, seed=0)
    assert (ioi.n_prompts, rep.n_prompts, rep.length) == (4, 4, 5)


def test_task_names_are_the_class_names_field():
    from interp.tasks import REGISTRY, RepetitionTask, TaskSpec, register_task

    assert {name: spec.cls.name for name, spec in REGISTRY.items()} == {n: n for n in REGISTRY}
    with pytest.raises(ValueError, match="task 'repetition' is already registered; pass replace=True"):
        register_task(TaskSpec(RepetitionTask, "p", "here", "again"))


def test_metrics_from_logits():
    batch = TaskBatch.from_token_lists([[0, 1], [0, 1], [1, 0], [1, 1]], [2, 2, 2, 3])
    logits = torch.zeros(4, 2, 4)
    logits[0, 1, 2] = 10.0  # right, p ~ 1
    logits[1, 1, 3] = 10.0  # wrong, p ~ 0
    logits[2, 1, 2] = 0.0  # uniform: argmax is token 0 -> wrong, p = 0.25
    logits[3, 1, 3] = 10.0  # right
    score = score_logits(logits, batch)
    assert score.accuracy == pytest.approx(0.5)
    expected = (torch.softmax(logits[:, 1], -1)[torch.arange(4), batch.answers]).mean().item()
    assert score.p_answer == pytest.approx(expected, abs=1e-7)


def test_evaluate_chunks_agree_with_one_pass(tok):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(256, 16), torch.nn.Linear(16, 256))
    batch = RepetitionTask(n_prompts=10).build(tok)
    whole = evaluate(model, batch, chunk_size=64)
    chunked = evaluate(model, batch, chunk_size=3)
    assert whole.accuracy == pytest.approx(chunked.accuracy)
    assert whole.p_answer == pytest.approx(chunked.p_answer, abs=1e-6)
