"""Synthetic datasets: tokens, masks (with the next-token off-by-one), loss floors, bad input."""

import itertools
import math

import pytest
import torch

from synthetic.datasets import CellularAutomatonTask, LinearMapTask, make_task
from synthetic.training import TrainConfig

torch.set_num_threads(1)

# Hand-worked S = 3, s = 2 example: x1[0] = x0[0]+x0[1], x1[1] = x0[1]+x0[2], x1[2] = x0[0]+x0[2].
A3 = torch.tensor([[1, 1, 0], [0, 1, 1], [1, 0, 1]])


def test_linear_map_hand_worked_masks_off_by_one():
    task = LinearMapTask(S=3, s=2, A=A3)
    assert task.seq_len == 6 and task.d_vocab == 2
    # Position p = 3 + i holds x1[i]; it is predicted by the query one position before it,
    # q = 2 + i, which must attend to the bits of x0 that A's row i selects.
    expected = torch.zeros(6, 6)
    expected[2, [0, 1]] = 1  # q=2 (token x0[2]) predicts x1[0]
    expected[3, [1, 2]] = 1  # q=3 (token x1[0]) predicts x1[1]
    expected[4, [0, 2]] = 1  # q=4 (token x1[1]) predicts x1[2]
    assert torch.equal(task.pattern_mask, expected)
    assert task.loss_mask.tolist() == [True, True, True, True, True, False]
    assert task.target_mask.tolist() == [False, False, True, True, True, False]
    assert task.output_index.tolist() == [-1, -1, 0, 1, 2, -1]


def test_linear_map_tokens_follow_the_map():
    task = LinearMapTask(S=3, s=2, A=A3, T=2)
    tokens = task.sample(64, torch.Generator().manual_seed(0))
    assert tokens.shape == (64, 9)
    x0, x1, x2 = tokens[:, :3], tokens[:, 3:6], tokens[:, 6:]
    assert torch.equal(x1, (x0 @ A3.T) % 2)
    assert torch.equal(x2, (x1 @ A3.T) % 2)
    # Hand-worked: x0 = (1, 0, 1) -> x1 = (1, 1, 0).
    row = tokens[(x0 == torch.tensor([1, 0, 1])).all(1)][0]
    assert row[3:6].tolist() == [1, 1, 0]


@pytest.mark.parametrize("S,s,T", [(8, 3, 1), (16, 1, 2), (5, 5, 3)])
def test_linear_map_mask_predicts_every_target_token(S, s, T):
    """XOR of the tokens at pattern_mask[q] reproduces token q+1 at every target query."""
    task = LinearMapTask(S=S, s=s, T=T, data_seed=3)
    assert (task.A.sum(1) == s).all()
    tokens = task.sample(32, torch.Generator().manual_seed(1))
    targets = torch.nonzero(task.target_mask).flatten()
    assert len(targets) == T * S
    for q in targets.tolist():
        keys = torch.nonzero(task.pattern_mask[q]).flatten()
        assert len(keys) == s and keys.max() <= q  # causal: true keys are visible
        assert torch.equal(tokens[:, keys].sum(1) % 2, tokens[:, q + 1])
    assert task.pattern_mask[~task.target_mask].sum() == 0


def test_linear_map_floors_match_paper():
    # Paper (converged losses): 0.3235, 0.3354, 0.3411 for S = 8, 16, 32.
    for S, paper in [(8, 0.3235), (16, 0.3354), (32, 0.3411)]:
        floor = LinearMapTask(S=S, s=3).floor
        assert floor == pytest.approx((S - 1) / (2 * S - 1) * math.log(2), abs=1e-12)
        assert floor == pytest.approx(paper, abs=1e-4)
    # T transitions: only the S-1 predicted bits of x0 are random.
    assert LinearMapTask(S=8, s=2, T=3).floor == pytest.approx(7 * math.log(2) / 31, abs=1e-12)


def test_linear_map_matrix_is_seeded():
    a, b, c = (LinearMapTask(S=16, s=3, data_seed=d).A for d in (0, 0, 1))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_cellular_automaton_tokens_and_band_mask():
    task = CellularAutomatonTask(S=5, T=2, k=3, n_rules=4, data_seed=2)
    tokens, rule_idx = task.sample_with_rules(16, torch.Generator().manual_seed(0))
    assert tokens.shape == (16, 15) and tokens.max() < 3
    S = task.S
    for q in torch.nonzero(task.target_mask).flatten().tolist():
        t, i = divmod(q + 1, S)  # q predicts cell i of state t
        prev = (t - 1) * S
        window = [prev + (i - 1) % S, prev + i, prev + (i + 1) % S]
        assert set(torch.nonzero(task.pattern_mask[q]).flatten().tolist()) == set(window)
        index = (tokens[:, window[0]] * 3 + tokens[:, window[1]]) * 3 + tokens[:, window[2]]
        expected = task.rules[rule_idx, index]
        assert torch.equal(tokens[:, q + 1], expected)


def _bayes_loss_reference(task, tokens):
    """Brute force: posterior over the pool from explicit consistency checks, token by token."""
    S, k = task.S, task.k
    out = []
    for seq in tokens.tolist():
        losses = [math.log(k)] * (S - 1)
        consistent = list(range(task.n_rules))
        for p in range(S, len(seq)):
            t, i = divmod(p, S)
            prev = seq[(t - 1) * S : t * S]
            w = (prev[(i - 1) % S] * k + prev[i]) * k + prev[(i + 1) % S]
            agree = [r for r in consistent if task.rules[r, w].item() == seq[p]]
            losses.append(-math.log(len(agree) / len(consistent)))
            consistent = agree
        out.append(losses)
    return torch.tensor(out, dtype=torch.float64)


def test_cellular_automaton_bayes_loss_matches_reference():
    task = CellularAutomatonTask(S=3, T=3, k=2, n_rules=5, data_seed=0)
    tokens = task.sample(40, torch.Generator().manual_seed(4))
    assert torch.allclose(task.bayes_loss(tokens), _bayes_loss_reference(task, tokens), atol=1e-9)


def test_cellular_automaton_floor():
    # One rule: transitions are deterministic, so the floor is the random first state alone.
    one = CellularAutomatonTask(S=6, T=2, k=4, n_rules=1)
    assert one.floor == pytest.approx(5 * math.log(4) / 17, abs=1e-12)
    assert one.floor == pytest.approx(one.floor_lower_bound, abs=1e-12)
    # A pool: inferring the rule costs extra, at most ln n_rules per sequence (chain rule),
    # exactly that once every sequence shows enough windows to single out its rule.
    pool = CellularAutomatonTask(S=6, T=2, k=4, n_rules=16)
    assert pool.floor_lower_bound + 0.02 < pool.floor < pool.floor_upper_bound
    long = CellularAutomatonTask(S=16, T=3, k=4, n_rules=16)
    assert long.floor == pytest.approx((15 * math.log(4) + math.log(16)) / 63, abs=1e-12)
    assert long.floor == pytest.approx(long.floor_upper_bound, abs=1e-12)
    # Deterministic in data_seed.
    assert CellularAutomatonTask(S=6, T=2, k=4, n_rules=16).floor == pool.floor


def test_make_task_defaults():
    assert make_task("linear-map", S=4, s=2).T == 1
    ca = make_task("cellular-automata", S=4)
    assert (ca.T, ca.k, ca.seq_len, ca.plateau_loss) == (3, 4, 16, math.log(4))


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: LinearMapTask(S=4, s=0), "s=0"),
        (lambda: LinearMapTask(S=4, s=5), "s=5"),
        (lambda: LinearMapTask(S=4, s=2, T=0), "T=0"),
        (lambda: LinearMapTask(S=3, s=2, A=torch.eye(3, dtype=torch.long)), "row sums"),
        (lambda: CellularAutomatonTask(S=2), "S=2"),
        (lambda: CellularAutomatonTask(S=8, k=1), "k=1"),
        (lambda: CellularAutomatonTask(S=8, T=0), "T=0"),
        (lambda: CellularAutomatonTask(S=8, n_rules=0), "n_rules=0"),
        (lambda: make_task("copying", S=4), "copying"),
        (lambda: TrainConfig(S=16, n_ctx=20).model_config(make_task("linear-map", S=16)), "n_ctx=20"),
    ],
)
def test_bad_input_is_one_line_value_error(build, match):
    with pytest.raises(ValueError, match=match) as info:
        build()
    assert "\n" not in str(info.value)


def test_every_window_is_a_valid_table_index():
    task = CellularAutomatonTask(S=3, T=1, k=2, n_rules=1)
    states = torch.tensor(list(itertools.product(range(2), repeat=3)))
    windows = task._windows(states)
    assert windows.min() >= 0 and windows.max() < 8
    assert windows[5].tolist() == [(1 * 2 + 1) * 2 + 0, (1 * 2 + 0) * 2 + 1, (0 * 2 + 1) * 2 + 1]
