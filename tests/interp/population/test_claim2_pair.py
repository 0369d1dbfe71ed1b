"""Claim 2 at the paper's kind of pair (interp.population.claim2_pair; issue 65, item 3): the
largest-jump pair at the suite's spacing, the shares of the p and accuracy jumps, their verdict."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from interp.population.claim2_pair import PAIR_COLUMNS, largest_jump_pairs
from interp.population.statistics import claim2_pair_result


def _curve(run: str, seed: int, p: list[float], steps: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"arm": "A", "run": run, "seed": seed, "step": steps, "p_answer": p})


def test_the_largest_jump_pair_is_read_at_the_native_spacing_only():
    # steps 0, 1, 2, 4 are log-spaced; the jump 0.1 -> 0.6 between 2 and 4 is not at the spacing of 100
    steps = [0, 1, 2, 4, 100, 200, 300, 400]
    curves = pd.concat(
        [
            _curve("A-seed0", 0, [0.55, 0.1, 0.1, 0.6, 0.6, 0.62, 0.9, 0.95], steps),
            _curve("A-seed1", 1, [0.0, 0.0, 0.0, 0.0, 0.1, 0.5, 0.55, 0.6], steps),
        ]
    )
    pairs = largest_jump_pairs(curves, every=100)
    assert pairs[["run", "pre_step", "post_step"]].values.tolist() == [
        ["A-seed0", 200, 300],
        ["A-seed1", 100, 200],
    ]
    assert pairs["kept_jump"].tolist() == pytest.approx([0.9 - 0.62, 0.4])
    with pytest.raises(ValueError, match="every=0"):
        largest_jump_pairs(curves, every=0)
    with pytest.raises(ValueError, match="'A-seed0' has 1 checkpoints"):
        largest_jump_pairs(curves[curves["step"] < 100], every=100)


def _rows(shares: dict[int, tuple[float, float, float]], noise: tuple[int, ...] = ()) -> pd.DataFrame:
    """Rows of arm A: seed -> (top-2 share, its lower and upper bound) of the p jump."""
    out = []
    for seed, (r, lo, hi) in shares.items():
        for metric in ("p", "accuracy"):
            for component in ("top-2 patterns", "all patterns", "all head outputs"):
                out.append(
                    dict(arm="A", run=f"A-seed{seed}", seed=seed, pre_step=100, post_step=200, kept_jump=0.3,
                         metric=metric, component=component, heads="L1H0 L0H1" if component == "top-2 patterns" else "",
                         recovered=r if component == "top-2 patterns" else 0.9, recovered_lo=lo, recovered_hi=hi,
                         value_pre=0.2, value_post=0.5, jump=0.3, jump_se=0.01,
                         jump_too_small=seed in noise and metric == "p")
                )  # fmt: skip
    return pd.DataFrame(out, columns=PAIR_COLUMNS)


def test_the_verdict_counts_seeds_by_their_interval_and_names_the_noisy_ones():
    # 9 seeds firmly below half, 1 straddling, 1 within noise
    shares = dict.fromkeys(range(9), (0.2, 0.1, 0.3)) | {9: (0.53, 0.49, 0.56), 10: (5.0, -9.0, 9.0)}
    rows = _rows(shares, noise=(10,))
    found = claim2_pair_result(rows)
    table = found.table.set_index(["metric", "component"])
    top = table.loc[("p", "top-2 patterns")]
    assert (top["seeds"], top["measurable"], top["above"], top["below"], top["straddle"]) == (11, 10, 0, 9, 1)
    assert top["noise_seeds"] == "10"
    assert top["median"] == pytest.approx(float(np.median([0.2] * 9 + [0.53])))
    (v,) = found.verdict.parts
    assert (v.word, v.robust) == ("contradicted", "robust")
    assert "0 of 10 above" in v.reason and "9 of 10 below" in v.reason and "seeds 10" in v.reason


@pytest.mark.slow
def test_the_shares_at_a_pair_equal_a_hand_computation_on_the_quick_suite(quick_suite):
    """The accuracy jump's share recovered by all heads' patterns equals the share computed by hand
    from the reference engine's per-prompt values."""
    from interp.core.metrics import greedy_correct
    from interp.patching import Target, capture_post, patch_values
    from interp.patching._forward import answer_logits_forward
    from interp.population.claim2_pair import measure_pair
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    runs, _ = quick_suite
    source = LocalSuiteSource(runs[0])
    try:
        rows = measure_pair(source, 900, 1000, n_prompts=32, n_boot=50)
        assert set(rows["metric"]) == {"p", "accuracy"} and len(rows) == 6
        batch = RepetitionTask(n_prompts=32, seed=1).build(source.tokenizer()).to("cpu")
        with torch.inference_mode():
            post = source.load(1000).model
            acc_post = greedy_correct(answer_logits_forward(post, batch)[0], batch).double().mean()
            captured = capture_post(post, batch, weights=True)
            pre = source.load(900).model
            acc_pre = greedy_correct(answer_logits_forward(pre, batch)[0], batch).double().mean()
            patched = patch_values(pre, captured, batch, [Target("pattern")], metric=greedy_correct, method="reference")
    finally:
        source.close()
    row = rows[(rows["metric"] == "accuracy") & (rows["component"] == "all patterns")].iloc[0]
    assert row["value_pre"] == pytest.approx(float(acc_pre), abs=1e-12)
    assert row["value_post"] == pytest.approx(float(acc_post), abs=1e-12)
    if acc_post != acc_pre:
        expected = (float(patched[0].double().mean()) - float(acc_pre)) / float(acc_post - acc_pre)
        assert row["recovered"] == pytest.approx(expected, abs=1e-5)
