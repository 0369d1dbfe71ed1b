"""The population entry (analyses/population.py): its blocks of seeds, its kept curves and the
docs block it writes, on a constructed curves table (no training)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analyses import population as entry
from interp.core.settings import StudyConfig
from interp.population import kept as kept_io
from interp.population.reading import population_block
from interp.population.tables import population_from_curves
from interp.sources.catalogue import load_suite_spec


def test_blocks_give_every_arm_its_seeds_in_turn():
    cfg = load_suite_spec("population")
    blocks = kept_io.blocks(cfg, 2)
    assert len(blocks) == 12 and all(len(block) == 10 for block in blocks)
    assert [(size.name, seed) for size, seed in blocks[0][:5]] == [
        ("neox-2l-64d-1h", 0),
        ("neox-2l-64d-2h", 0),
        ("neox-2l-64d-4h", 0),
        ("neox-2l-64d-8h", 0),
        ("neox-2l-128d-4h", 0),
    ]
    assert sorted(seed for _, seed in blocks[-1]) == [22] * 5 + [23] * 5


def _curve(arm: str, n_heads: int, seed: int, crossing: int | None, budget: int = 600) -> pd.DataFrame:
    steps = np.arange(0, budget + 1, 100)
    accuracy = np.where(steps >= crossing, 0.9, 0.1) if crossing is not None else np.full(len(steps), 0.1)
    return pd.DataFrame(
        dict(
            arm=arm,
            run=f"{arm}-seed{seed}",
            seed=seed,
            n_layers=2,
            d_model=64,
            n_heads=n_heads,
            d_head=64 // n_heads,
            budget=budget,
            step=steps,
            accuracy=accuracy,
            p_answer=accuracy / 2,
        )
    )[entry.curve_columns()]


def test_kept_curves_round_trip_and_a_damaged_one_is_redone(tmp_path, capsys):
    curves = [_curve("a", 1, 0, 200), _curve("a", 1, 1, None), _curve("b", 2, 0, 100)]
    for curve in curves:
        path = kept_io.kept_curve(curve["run"].iloc[0], tmp_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        curve.to_csv(path, index=False)
    kept_io.kept_curve("a-seed1", tmp_path).write_text("arm,run\nhalf")  # cut short
    b = kept_io.kept_curve("b-seed0", tmp_path)
    b.write_text(b.read_text()[: len(b.read_text()) // 2])  # cut mid-row: every column there, the end missing
    table = kept_io.read_kept_curves(tmp_path)
    assert sorted(table["run"].unique()) == ["a-seed0"]
    assert not kept_io.kept_curve("a-seed1", tmp_path).exists()  # removed: its run is evaluated again
    assert not b.exists()
    said = capsys.readouterr().out
    assert "a-seed1.csv is not a whole curve" in said and "b-seed0.csv is not a whole curve" in said


def test_docs_block_states_the_tables():
    curves = pd.concat(
        [_curve("neox-a", 1, s, c) for s, c in enumerate([200, 300, None])]
        + [_curve("neox-b", 2, s, c) for s, c in enumerate([100, 100, 200])],
        ignore_index=True,
    )
    result = population_from_curves(curves, StudyConfig(threshold=0.5, hold=2), reference="neox-a")
    block = population_block(result, 120, "the rest not trained yet")
    assert block.startswith("Runs evaluated: 6 of the spec's 120 (the rest not trained yet).")
    # E = the post step held for 2 checkpoints; a run that never crosses is censored at 600
    assert list(result.runs.sort_values(["arm", "seed"])["E"].fillna(-1)) == [200, 300, -1, 100, 100, 200]
    # rotary dims per head (Pythia's 25 % of d_head) and what else varies against the reference
    assert "| neox-a | 1 | 64 | 16 | (reference) | 3 | 2 | " in block
    assert "| neox-b | 2 | 32 | 8 | n_heads; d_head 32 vs 64, rotary dims per head 8 vs 16 | 3 | 3 | 100 (" in block
    # the grid of rules: one row per finding, nine cells and the judge's robustness word
    assert "| finding | 0.4/1 | 0.4/2 | 0.4/3 | 0.5/1 | 0.5/2 | 0.5/3 | 0.6/1 | 0.6/2 | 0.6/3 | verdict |" in block
    assert "| p=0.063 | robust null: not significant in any cell (p ≥ 0.05) |" in block  # log-rank, all arms
    assert "| a 1/3 never | robust: holds in every cell |" in block
    for line in result.findings:
        assert f"- {line}" in block


def test_unpinned_comparison_pairs_seeds_and_states_the_verdict():
    from analyses import population_unpinned as unpinned

    # pinned arm "a": E 200, 300, censored; the unpinned copy: seed 0 the same, seed 1 later, seed 2 emerges
    pinned = pd.concat([_curve("a", 1, s, c) for s, c in enumerate([200, 300, None])], ignore_index=True)
    other = pd.concat([_curve("a", 1, s, c) for s, c in enumerate([200, 400, 300])], ignore_index=True)
    result, pairs, label = unpinned.comparison(pinned, other, "a", "default")
    assert label == "a-unpinned-default"
    assert pairs["E_pinned"].fillna(-1).tolist() == [200, 300, -1]
    assert pairs["E_unpinned"].tolist() == [200, 400, 300]
    assert pairs["differs"].tolist() == [False, True, True]
    block = unpinned.docs_block(result, pairs, "a", label, 24)
    assert block.startswith("Unpinned runs evaluated: 3 of 24; seeds compared with their pinned twin: 3.")
    assert "- Per-seed points of emergence differ on 2 of 3 seeds (seed 1: 300 → 400, seed 2: never → 300)." in block
    # the curves: seed 0's are equal at every checkpoint; seeds 1 and 2 differ where the accuracy steps differ
    n = len(_curve("a", 1, 0, 200))
    assert pairs["checkpoints"].tolist() == [n] * 3 and pairs["checkpoints_differ"].tolist()[0] == 0
    assert (
        f"- The bits differ: p(answer) differs at {pairs['checkpoints_differ'].sum()} of {3 * n} checkpoints, on 2 of 3"
        in block
    )
    test = result.tests[result.tests["arm"] == label].iloc[0]
    assert f"p = {test['p']:.2f}" in block
    assert "| a | pinned AVX2 | 3 | 2 | " in block and "| a-unpinned-default | default, unpinned | 3 | 3 | " in block


def test_unpinned_arm_config_keeps_one_arm_and_refuses_an_unknown_one():
    import pytest

    from analyses import population_unpinned as unpinned

    cfg = unpinned.arm_config(load_suite_spec("population"), "neox-2l-64d-4h")
    assert [size.name for size in cfg.sizes] == ["neox-2l-64d-4h"] and len(cfg.run_names()) == 24
    with pytest.raises(SystemExit, match="'nope' is not an arm of the population; arms: neox-2l-64d-1h"):
        unpinned.arm_config(load_suite_spec("population"), "nope")


def test_headline_says_claim_4_is_confounded_until_the_decoupled_arms_are_in():
    curves = pd.concat(
        [_curve("neox-2l-64d-1h", 1, s, c) for s, c in enumerate([100, 200, 300])]
        + [_curve("neox-2l-64d-4h", 4, s, c) for s, c in enumerate([200, 300, 400])],
        ignore_index=True,
    )
    result = population_from_curves(curves, StudyConfig(threshold=0.5, hold=2), reference="neox-2l-64d-4h", grid=False)
    block = entry.headline_block(result, 120, (10, 96))
    assert (
        "- **Claim 4's contrast is confounded.** At d_model 64 the head count moves with d_head 64–16, rotary dims"
        in block
    )
    assert "the 4-head arm has 2 rotary frequencies per head" in block and "have 10 of 96 runs kept" in block
    assert "Claim 4's contrast is confounded" not in entry.headline_block(result, 120, (96, 96))
    fixed = pd.concat(
        [_curve("neox-2l-64d-1h-r8", 1, s, c) for s, c in enumerate([100, 200, 300])]
        + [_curve("neox-2l-64d-4h-r8", 4, s, c) for s, c in enumerate([200, 300, 400])],
        ignore_index=True,
    )
    decoupled = population_from_curves(fixed, StudyConfig(hold=2), reference="neox-2l-64d-4h-r8", grid=False)
    block = entry.headline_block(result, 120, (96, 96), decoupled)
    lines = [x for x in block.splitlines() if x.startswith("- Decoupled arms")]
    assert [x.split("runs): ", 1)[1] for x in lines] == decoupled.claims
    (line,) = [x for x in lines if "Claim 4, heads" in x]  # the judge's: d_head varies with the head count
    assert "Claim 4, heads (neox, d_model 64, 2 layers, heads 1, 4): confounded at threshold 0.5, hold 2" in line
    assert (
        "1 → 4 heads: confounded, robust null (log-rank stratified by seed p = 0.083; also varies: d_head 16 vs 64)"
        in (line)
    )
    assert "reproduced" not in line and "contradicted" not in line


def test_seeds_outside_the_spec_are_refused_in_one_line_before_anything_trains():
    with pytest.raises(SystemExit, match=r"^error: --seeds '30-40' must be seeds or a-b ranges of 0-23, e.g. 0-11$"):
        entry.main(["--spec", "population-8h-long", "--seeds", "30-40"])


def test_the_long_continuation_block_counts_runs_emerged_by_each_multiple_of_the_budget():
    """Four 8-head runs to 12000 steps: one crosses at 5000, one at 9000, two stay at 0.1. By 4000
    none emerged, by 8000 one (E 5000), by 12000 two (E 5000 and 9000, share 2 of 4 with its Wilson
    interval). The word on claim 1's "never" is the judge's: the arm mixes emerged and
    never-emerged seeds in every cell of the rule grid, and its flat runs sit far below the
    threshold (0.1: no ceiling), so reproduced, robust; eight flat runs mix nothing in any cell, a
    robust null (not decidable)."""
    from interp.population.survival import share_interval

    arm = "neox-2l-64d-8h"
    curves = pd.concat(
        [_curve(arm, 8, s, c, budget=12000) for s, c in enumerate([5000, 9000, None, None])], ignore_index=True
    )
    block = entry.long_block(curves, 24)
    assert block.startswith("Runs evaluated: 4 of the spec's 24 (the rest not trained yet; 256 prompts per checkpoint;")
    assert "| 4000 | 4 | 0 | 0.00 (0.00–0.49) | — | 0.10–0.10 (0.10) |" in block
    assert "| 8000 | 4 | 1 | 0.25 (0.05–0.70) | 5000–5000 (5000) | 0.10–0.90 (0.10) |" in block
    share, lo, hi = share_interval(2, 4)
    assert f"| 12000 | 4 | 2 | {share:.2f} ({lo:.2f}–{hi:.2f}) | 5000–9000 (7000) | 0.10–0.90 (0.50) |" in block
    assert "Emerged by 12000 over the rule grid (threshold/hold: runs): 0.4/1: 2, 0.4/2: 2," in block
    assert (
        "- Claim 1, never: reproduced, robust at threshold 0.5, hold 2 (mixed arms: neox-2l-64d-8h 2 of 4 never); "
        "the paper: or never.\n"
    ) in block
    assert block.rstrip().endswith(
        f"- The numbers at threshold 0.5, hold 2: 2 of 4 plain runs emerged by 12000 (95 % Wilson {lo:.2f}–{hi:.2f}) "
        "at E 5000–9000; their best accuracy, median 0.10 by 4000, is 0.50 by 12000, and 0 more reach accuracy 0.5 "
        "at some checkpoint without holding it for 2."
    )
    for old in ("few emerge", "long plateau", "not decidable yet", "Reading"):
        assert old not in block  # no verdict word of the entry's own
    flat = pd.concat([_curve(arm, 8, s, None, budget=12000) for s in range(8)], ignore_index=True)
    assert (
        "- Claim 1, never: not decidable, robust null at threshold 0.5, hold 2 (no arm mixes seeds that emerged with "
        "seeds that never did by the budget);"
    ) in entry.long_block(flat, 24)
    # a ninth run touches 0.9 on one checkpoint only: it reaches 0.5 without holding it
    blip = _curve(arm, 8, 8, None, budget=12000)
    blip.loc[blip["step"] == 9000, "accuracy"] = 0.9
    assert "and 1 more reach accuracy 0.5 at some checkpoint without holding it for 2" in entry.long_block(
        pd.concat([flat, blip]), 24
    )
    # one run that reaches 0.45 only: it emerges at threshold 0.4 and in no other cell, so the arm
    # mixes emerged and never at 0.4 only: not decidable at the operating point, not robust
    near = _curve(arm, 8, 8, 7000, budget=12000).assign(accuracy=lambda c: c["accuracy"].clip(upper=0.45))
    assert (
        "- Claim 1, never: not decidable, not robust at threshold 0.5, hold 2 (no arm mixes seeds that emerged with "
        "seeds that never did by the budget; holds at 0.4/1, 0.4/2, 0.4/3 only)"
        in entry.long_block(pd.concat([flat, near]), 24)
    )


def test_a_continuation_on_a_ceiling_near_the_threshold_is_called_ceiling():
    """Eight runs that level off at accuracy 0.35 (below the threshold 0.5 by less than
    interp.population.contrast.NEAR, flat over the last tenth of the budget) and one that crosses
    at 5000: the arm mixes emerged and never-emerged seeds, yet the judge calls claim 1's "never"
    a ceiling (the rule cannot tell a seed that never learns from one just under the threshold),
    never reproduced."""
    arm = "neox-2l-64d-8h"
    flat = [_curve(arm, 8, s, None, budget=12000).assign(accuracy=0.35) for s in range(8)]
    line = entry.long_headline(pd.concat([*flat, _curve(arm, 8, 8, 5000, budget=12000)]), 9)
    assert line.startswith('- **Claim 1, "never", past the budget** (`population-8h-long`:')
    assert "trained on to 12000 steps = 3 × its budget; 9 of 9 runs): Claim 1, never: ceiling, robust at " in line
    assert (
        "neox-2l-64d-8h: 8 of 9 runs never emerged, their level 0.35–0.35 (median 0.35, below the threshold 0.5)"
        in (line)
    )
    assert "reproduced" not in line
    assert line.rstrip().endswith(
        "The numbers: 1 of 9 plain runs emerged by 12000 (95 % Wilson 0.02–0.43) at E 5000; their best accuracy, "
        "median 0.35 by 4000, is 0.35 by 12000, and 0 more reach accuracy 0.5 at some checkpoint without holding it "
        "for 2."
    )


def test_the_continuation_rewrites_its_own_block_and_leaves_the_populations_alone(tmp_path, monkeypatch):
    """``--spec population-8h-long --update-docs`` once overwrote the population's headline and
    section-4 blocks with the 8-head continuation's statistics; it now writes only its own block."""
    arm = "neox-2l-64d-8h"
    kept = tmp_path / "kept"
    for seed, crossing in enumerate([5000, None, None]):
        curve = _curve(arm, 8, seed, crossing, budget=12000)
        path = kept_io.kept_curve(curve["run"].iloc[0], kept)
        path.parent.mkdir(parents=True, exist_ok=True)
        curve.to_csv(path, index=False)
    docs = tmp_path / "results.md"
    others = "".join(
        f"{begin}\nuntouched {begin}\n{end}\n" for begin, end in [(entry.BEGIN, entry.END), entry.HEADLINE]
    )
    docs.write_text(
        others
        + f"{entry.LONG_MARKERS[0]}\nold\n{entry.LONG_MARKERS[1]}\n"
        + f"{entry.LONG_HEADLINE[0]}\nold\n{entry.LONG_HEADLINE[1]}\n"
    )
    monkeypatch.setattr(kept_io, "DOCS", docs)
    monkeypatch.setitem(entry.SPECS, "population-8h-long", (kept, 256))
    entry.main(["--spec", "population-8h-long", "--finished-only", "--update-docs", "--out", str(tmp_path / "out")])
    text = docs.read_text()
    assert text.startswith(others)  # both population blocks as they were
    assert "Runs evaluated: 3 of the spec's 24 (the rest not trained yet; 256 prompts per checkpoint;" in text
    assert "| 12000 | 3 | 1 |" in text and "\nold\n" not in text
    headline = text.split(entry.LONG_HEADLINE[0] + "\n", 1)[1].split(entry.LONG_HEADLINE[1])[0]
    assert headline == entry.long_headline(kept_io.read_kept_curves(kept), 24)


def test_the_continuations_headline_gives_the_judges_word_beside_the_paper():
    """Eight flat runs at 0.1 and one that crosses at 5000: the arm mixes emerged and never-emerged
    seeds in every cell (reproduced, robust, from the judge); eight flat runs alone mix in none (a
    robust null, not decidable), and while runs are missing the line says it is not a finding."""
    arm = "neox-2l-64d-8h"
    flat = [_curve(arm, 8, s, None, budget=12000) for s in range(8)]
    line = entry.long_headline(pd.concat([*flat, _curve(arm, 8, 8, 5000, budget=12000)]), 9)
    assert line.startswith('- **Claim 1, "never", past the budget** (`population-8h-long`:')
    assert (
        "trained on to 12000 steps = 3 × its budget; 9 of 9 runs): Claim 1, never: reproduced, robust at threshold "
        "0.5, hold 2 (mixed arms: neox-2l-64d-8h 8 of 9 never); the paper: or never. The "
        "numbers: 1 of 9 plain runs emerged by 12000 (95 % Wilson 0.02–0.43) at E 5000;" in line
    )
    alone = entry.long_headline(pd.concat(flat), 24)
    assert "8 of 24 runs; 16 runs not trained yet, so not a finding): Claim 1, never: not decidable, robust null" in (
        alone
    )
    assert entry.long_headline(pd.DataFrame(columns=entry.curve_columns()), 24) == ""
