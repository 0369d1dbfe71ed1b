"""Claim 2 over seeds (issue 53): mechanism classes, the per-width tables, the kept runs, and one
run of the entry measured end to end on the quick suite (slow)."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from interp.population.mechanism import (
    COMPONENTS,
    ROW_COLUMNS,
    classify_heads,
    figure,
    width_table,
)
from interp.population.statistics import claim2_widths_result


def test_heads_are_classed_by_what_they_do():
    scores = pd.DataFrame(
        {
            "layer": [0, 0, 1, 1, 1, 0],
            "head": [0, 1, 0, 1, 2, 2],
            "previous_token": [0.6, 0.45, 0.1, 0.05, 0.1, 0.1],
            "prefix_matching": [0.01, 0.02, 0.5, 0.4, 0.05, 0.1],
            "copying": [0.1, 0.9, 0.8, 0.2, 0.7, 0.3],
        }
    )
    classes = classify_heads(scores)["mechanism"].tolist()
    # 0.45/0.3 = 1.5 x the previous-token threshold beats no induction: previous-token even though it copies
    assert classes == ["previous-token", "previous-token", "induction", "induction", "copying", "other"]
    both = scores.assign(previous_token=[0.45] * 6, prefix_matching=[0.4] * 6)  # 1.5x against 2x
    # induction where it can compose: layer 1, after layer 0's previous-token heads; layer 0 cannot
    assert classify_heads(both)["mechanism"].tolist() == ["previous-token"] * 2 + ["induction"] * 3 + ["previous-token"]


def test_induction_is_named_only_where_a_head_can_compose():
    """Issue 67 item 5: two layer-0 heads with prefix-matching 0.24 and 0.22 were called induction
    with nothing before them to compose with; a layer-1 head with no previous-token head in layer 0
    neither; a layer-1 head after one is."""
    from interp.core.terms import induction_blocker

    scores = pd.DataFrame(
        {
            "layer": [0, 0, 1],
            "head": [0, 1, 0],
            "previous_token": [0.05, 0.1, 0.1],
            "prefix_matching": [0.24, 0.22, 0.5],
            "copying": [0.1, 0.6, 0.2],
        }
    )
    assert classify_heads(scores)["mechanism"].tolist() == ["other", "copying", "other"]
    with_previous = scores.assign(previous_token=[0.05, 0.6, 0.1])
    assert classify_heads(with_previous)["mechanism"].tolist() == ["other", "previous-token", "induction"]
    assert induction_blocker(0, [0]) == "layer 0: no earlier layer to compose with"
    assert induction_blocker(2, [2, 3]) == "no previous-token head in layers 0-1"
    assert induction_blocker(1, [0]) is None
    with pytest.raises(ValueError, match=r"lack columns \['copying'\]"):
        classify_heads(scores.drop(columns="copying"))


def _rows():
    """Two arms; arm A: 4 seeds at widths 100 and 5 (seed 3's jump within noise at 5 steps)."""
    rows = []
    recovered = {  # (seed, width) -> top-2 share, its lower bound
        (0, "100"): (0.9, 0.6),
        (1, "100"): (0.7, 0.4),
        (2, "100"): (0.2, 0.1),
        (3, "100"): (0.8, 0.55),
        (0, "5"): (0.95, 0.7),
        (1, "5"): (0.6, 0.52),
        (2, "5"): (0.1, -0.2),
        (3, "5"): (5.0, -9.0),
    }
    for (seed, width), (top2, lo) in recovered.items():
        for label, _, _ in COMPONENTS:
            value = top2 if label == "top-2 patterns" else (top2 / 2 if label == "top-1 patterns" else 0.1 * seed)
            rows.append(
                {
                    "arm": "A",
                    "run": f"A-seed{seed}",
                    "seed": seed,
                    "width": width,
                    "pre_step": 1000 - int(width),
                    "post_step": 1000,
                    "component": label,
                    "heads": "L1H0",
                    "mechanisms": "induction" if seed != 2 else "previous-token",
                    "recovered": value,
                    "recovered_lo": lo if label in ("top-2 patterns", "induction head's pattern") else value - 0.1,
                    "recovered_hi": value + 0.3,
                    "p_pre": 0.2,
                    "p_post": 0.4,
                    "jump": 0.2,
                    "jump_se": 0.01,
                    "jump_too_small": seed == 3 and width == "5",
                }
            )
    other = [dict(r, arm="B", run=r["run"].replace("A", "B")) for r in rows if r["width"] == "100"]
    return pd.DataFrame(rows + other, columns=ROW_COLUMNS)


def test_per_width_table_leaves_noise_out_and_names_it():
    rows = _rows()
    table = width_table(rows).set_index(["arm", "width", "component"])
    top2 = table.loc[("A", "5", "top-2 patterns")]
    assert (top2["seeds"], top2["measurable"], top2["noise_runs"]) == (4, 3, "A-seed3")
    assert top2["median"] == pytest.approx(0.6) and top2["q1"] == pytest.approx(np.quantile([0.95, 0.6, 0.1], 0.25))
    assert top2["q3"] == pytest.approx(np.quantile([0.95, 0.6, 0.1], 0.75))
    wide = table.loc[("A", "100", "top-2 patterns")]
    assert (wide["measurable"], wide["noise_runs"]) == (4, "") and wide["median"] == pytest.approx(0.75)
    # widths narrow last; arms in the order of the rows
    assert list(dict.fromkeys(width_table(rows)["width"])) == ["100", "5"]


def test_claim_table_counts_firm_seeds_with_wilson_intervals():
    claims = claim2_widths_result(_rows()).table.set_index(["arm", "width"])
    at100 = claims.loc[("A", "100")]
    # firm: share >= 0.5 and lower bound above 0.5: seeds 0 and 3 (seed 1's interval reaches 0.4)
    assert (at100["seeds"], at100["measurable"], at100["top2_firm"]) == (4, 4, 2)
    lo, hi = proportion_confint(2, 4, method="wilson")
    assert (at100["top2_lo"], at100["top2_hi"]) == (pytest.approx(lo), pytest.approx(hi))
    assert at100["top1_mechanisms"] == "induction 3, previous-token 1"
    at5 = claims.loc[("A", "5")]
    assert (at5["measurable"], at5["top2_firm"], at5["noise_runs"]) == (3, 2, "A-seed3")
    assert at5["top1_mechanisms"] == "induction 2, previous-token 1"  # seed 3 (noise) not counted
    assert at5["top2_share"] == pytest.approx(2 / 3)


def test_claim_lines_give_the_profile_over_widths_without_a_verdict_word():
    """The verdict on claim 2 is taken at the largest-jump pair (tests/interp/population/test_claim2_pair.py); the
    widths are a profile: numbers per width, never a verdict word."""
    rows = _rows()
    a, b = claim2_widths_result(rows).headline
    lo, hi = proportion_confint(2, 4, method="wilson")
    lo3, hi3 = proportion_confint(2, 3, method="wilson")
    assert a.startswith("Claim 2 over interval widths on A (4 emerged seeds; pre = E − width, E located to one step):")
    # the looser criterion (point estimate >= 0.5): seeds 0, 1, 3 at 100 steps, 0 and 1 at 5 (3 is noise)
    assert f"100 steps: 2 of 4 (95 % {lo:.2f}–{hi:.2f}, undecided; 3 by the point estimate alone)" in a
    assert f"5 steps: 2 of 3 (95 % {lo3:.2f}–{hi3:.2f}, undecided; 2 by the point estimate alone)" in a
    assert "whose induction head's pattern alone does: 100 steps: 0 of 4; 5 steps: 0 of 3;" in a
    # largest median share per width: top-2 patterns (0.75 at 100 steps over seeds 0-3; 0.6 at 5 over 0-2)
    assert a.endswith(
        "the largest median share recovered: 100 steps: top-2 patterns 0.75; 5 steps: top-2 patterns 0.60."
    )
    assert b.startswith("Claim 2 over interval widths on B (4 emerged seeds;")
    for line in (a, b):
        assert not any(w in line for w in ("reproduced", "contradicted", "not decidable", "width-dependent"))
    # 20 seeds: every share 0.9 (lower end 0.6) at 100 steps, 0.05 at 5 steps: above half, below half
    many = []
    for seed in range(20):
        for width, share in (("100", 0.9), ("5", 0.05)):
            base = rows[(rows["run"] == "A-seed0") & (rows["width"] == "100")]
            many.append(
                base.assign(
                    run=f"A-seed{seed}",
                    seed=seed,
                    width=width,
                    jump_too_small=False,
                    recovered=share,
                    recovered_lo=share - 0.3,
                    recovered_hi=share + 0.1,
                )
            )
    many = pd.concat(many, ignore_index=True)
    (line,) = claim2_widths_result(many).headline
    assert "100 steps: 20 of 20 (95 % 0.84–1.00, above half; 20 by the point estimate alone)" in line
    assert "5 steps: 0 of 20 (95 % 0.00–0.16, below half; 0 by the point estimate alone)" in line
    assert "5 steps: none above 0.1 (top-1 patterns 0.05)" in line  # every component recovers 0.05 there


def test_figure_has_a_box_per_component_and_arm():
    fig = figure(_rows())
    assert len(fig.data) == 2 * len(COMPONENTS)
    top2 = next(t for t in fig.data if t.name == "top-2 patterns")
    # the noise run (seed 3 at 5 steps) is left out: 7 points in arm A
    assert len(top2.y) == 7 and "A-seed3 (induction)" in top2.text


def test_the_figure_page_opens_on_its_words_as_text():
    from interp.report import page as vis

    lines = [*claim2_widths_result(_rows()).headline, "<script>window.__pwned = 1</script>"]
    html = vis.figures_page("Claim 2", [("Share recovered", figure(_rows()))], lead=lines)
    assert html.index(lines[0].replace("'", "&#39;")) < html.index("Share recovered</h2>")
    assert "<script>window.__pwned" not in html and "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html


def test_the_decoupling_works_arms_are_planned_from_their_own_kept_curves():
    from analyses.population_mechanism import ARMS, main, planned_runs
    from interp.population.kept import SPECS, read_kept_curves

    plan = planned_runs(("neox-2l-64d-8h-r8",), "population-decoupled")
    curves = read_kept_curves(SPECS["population-decoupled"][0])
    arm = curves[curves["arm"] == "neox-2l-64d-8h-r8"]
    assert len(plan) and set(plan["arm"]) == {"neox-2l-64d-8h-r8"} and set(plan["run"]) <= set(arm["run"])
    assert (plan["budget"] == 8000).all()  # the decoupled 8-head arm's budget, not the population's 4000
    assert set(planned_runs()["arm"]) == set(ARMS) and len(planned_runs()) == 48
    with pytest.raises(SystemExit, match=r"--update-docs writes docs/results.md's block of the population's arms"):
        main(["--spec", "population-decoupled", "--no-compute", "--update-docs"])
    with pytest.raises(
        SystemExit, match=r"^error: --arms 'neox-2l-64d-4h' is not an arm of population-decoupled; valid: "
    ):
        main(["--spec", "population-decoupled", "--arms", "neox-2l-64d-4h", "--no-compute"])


def test_kept_runs_resume_and_a_damaged_one_is_redone(tmp_path):
    from analyses.population_mechanism import docs_block
    from interp.population.kept import kept_paths
    from interp.population.kept import read_kept_mechanism as read_kept

    rows = _rows()
    for run, part in rows[rows["arm"] == "A"].groupby("run"):
        csv, record = kept_paths(run, tmp_path)
        part.to_csv(csv, index=False)
        record.write_text(json.dumps({"run": run, "crossing": True, "seconds": {"dense": 1.0}, "seconds_total": 10.0}))
    kept_paths("A-seed0", tmp_path)[0].unlink()  # a record without its rows
    lines = []
    back, records = read_kept(tmp_path, echo=lines.append)
    assert sorted(r["run"] for r in records) == ["A-seed1", "A-seed2", "A-seed3"]
    assert len(lines) == 1 and "A-seed0.json has no whole rows file" in lines[0]
    assert not kept_paths("A-seed0", tmp_path)[1].exists()
    assert len(back) == 3 * 2 * len(COMPONENTS)
    block, headline = docs_block(back, records, 48, "Settings.")
    assert (
        "Measured so far: 3 of the 48 planned runs" in headline
        and "Claim 2 over interval widths on **A** (3 emerged seeds;" in block
    )
    assert "| A | 5 steps | 3 (2) | 1 |" in block  # seed 3 within noise at 5 steps: named, not counted
    assert block.split("| A | 5 steps |")[1].splitlines()[0].endswith("| 3 |")  # named by its seed


@pytest.mark.slow
def test_one_run_measured_end_to_end_on_the_quick_suite(quick_suite, tmp_path):
    """The entry's measurement on one quick-suite run: E to one step, the widths re-trained bit
    for bit, the decomposition at each width and the head classes."""
    from analyses.population_mechanism import measure_run
    from interp.population.mechanism import MECHANISMS

    runs, _ = quick_suite
    run = tmp_path / runs[-1].name
    shutil.copytree(runs[-1], run, ignore=shutil.ignore_patterns("zoom"))
    labels = {"arm": "quick", "run": run.name, "seed": 2}
    rows, record = measure_run(run, labels, widths=(20, 5), wide=200, n_prompts=64, dense_prompts=256, n_boot=50)
    post = record["dense_point"]["post_step"]
    assert post - record["dense_point"]["pre_step"] == 1 and record["max_abs_diff"] == 0.0
    assert [(c["width"], c["pre_step"], c["post_step"]) for c in record["contrasts"]] == [
        ("20", post - 20, post),
        ("5", post - 5, post),
        ("wide", post - 200, post + 200),
    ]
    assert len(rows) == 3 * len(COMPONENTS) and set(rows["width"]) == {"20", "5", "wide"}
    heads = pd.DataFrame(record["heads"])
    assert set(heads["mechanism"]) <= set(MECHANISMS)
    top = heads.sort_values("prefix_matching").iloc[-1]
    assert record["induction_head"] == f"L{int(top['layer'])}H{int(top['head'])}"
    own = rows[rows["component"] == "induction head's pattern"]
    assert (own["heads"] == record["induction_head"]).all() and (own["mechanisms"] == top["mechanism"]).all()
    # each width's jump is the same pre -> post jump every component shares
    for _, part in rows.groupby("width"):
        assert part["jump"].nunique() == 1
        assert part["jump"].iloc[0] == pytest.approx(part["p_post"].iloc[0] - part["p_pre"].iloc[0])
    claims = claim2_widths_result(rows).table
    assert claims["seeds"].tolist() == [1, 1, 1] and claims["width"].tolist() == ["20", "5", "wide"]


@pytest.mark.slow
@pytest.mark.parametrize("width", [1280, 800])
def test_the_figure_page_in_headless_chromium(tmp_path, width):
    from browser import chromium_path, visit
    from interp.report import page as vis

    if chromium_path() is None:
        pytest.skip("headless Chromium not found (Debian package 'chromium')")
    page = tmp_path / "mechanism.html"
    page.write_text(vis.figures_page("Claim 2 over the population", [("Share recovered", figure(_rows()))]))
    shot = tmp_path / f"mechanism-{width}.png"
    result = visit(page, shot, width=width, probe_js="() => document.documentElement.scrollWidth")
    assert result.page_errors == [] and result.console_errors == [] and result.blocked == []
    (fig,) = result.state["figs"]
    assert result.ready and fig["svg"] and fig["traces"] > 0 and fig["legend"] == len(COMPONENTS)
    assert result.state["width"] == width and result.probe <= width  # nothing cut or scrolled sideways
    assert shot.stat().st_size > 10_000
