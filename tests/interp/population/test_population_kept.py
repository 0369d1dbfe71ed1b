"""The library parts the analyses entries share (issue 70): kept-data I/O and folders
(:mod:`interp.population.kept`), the docs-block writer (:func:`interp.core.io.replace_block`),
the shared reading (:mod:`interp.population.reading`) and the forced runs' grid
(:mod:`interp.population.forced`)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pandas as pd
import pytest

from interp.core.io import markdown_table, replace_block
from interp.core.settings import StudyConfig
from interp.population import forced, kept, reading
from interp.population.judged import judged


def test_specs_name_their_kept_folders_under_docs_data():
    assert kept.SPECS["population"] == (kept.DATA / "population", 64)
    assert kept.SPECS["population-decoupled"][1] == 256
    assert kept.DOCS.name == "results.md" and kept.DATA.parent == kept.DOCS.parent


def test_parse_seeds_and_selection_refuse_bad_input_in_one_line():
    assert kept.parse_seeds("3, 1-2,3", tuple(range(12))) == [3, 1, 2]
    with pytest.raises(ValueError, match=r"--seeds '5-2' must be seeds or a-b ranges of 0-11"):
        kept.parse_seeds("5-2", tuple(range(12)))
    cfg = SimpleNamespace(sizes=[SimpleNamespace(name="a"), SimpleNamespace(name="b")], seeds=(0, 1, 2))
    assert kept.selected_seeds(cfg, "s", "1-2", ("b",)) == (1, 2)
    assert kept.selected_seeds(cfg, "s") == (0, 1, 2)
    with pytest.raises(ValueError, match=r"^--arms 'c' is not a size of s; valid: a, b$"):
        kept.selected_seeds(cfg, "s", "", ("c",))


def test_kept_curves_round_trip_and_a_damaged_one_is_removed(tmp_path):
    cols = kept.curve_columns()
    row = dict(arm="a", run="a-seed0", seed=0, n_layers=2, d_model=64, n_heads=4, d_head=16, budget=200)
    whole = pd.DataFrame([{**row, "step": s, "accuracy": 0.1 * s / 100, "p_answer": 0.2} for s in (100, 200)])[cols]
    (tmp_path / "curves").mkdir()
    whole.to_csv(kept.kept_curve("a-seed0", tmp_path), index=False)
    whole.iloc[:1].assign(run="a-seed1").to_csv(kept.kept_curve("a-seed1", tmp_path), index=False)  # cut short
    back = kept.read_kept_curves(tmp_path)
    assert sorted(back["run"].unique()) == ["a-seed0"] and back["accuracy"].tolist() == [0.1, 0.2]
    assert not kept.kept_curve("a-seed1", tmp_path).exists()
    assert kept.read_kept_split_curves(tmp_path / "none").columns.tolist() == [*cols, "init_seed", "data_order_seed"]


def test_replace_block_is_atomic_and_refuses_a_page_without_markers(tmp_path):
    page = tmp_path / "results.md"
    page.write_text("# R\n<!-- x:begin -->\nold\n<!-- x:end -->\ntail\n")
    replace_block(page, "new\n", ("<!-- x:begin -->", "<!-- x:end -->"))
    assert page.read_text() == "# R\n<!-- x:begin -->\nnew\n<!-- x:end -->\ntail\n"
    with pytest.raises(ValueError, match=r"has no <!-- y:begin --> \.\.\. <!-- y:end --> block to replace"):
        replace_block(page, "b\n", ("<!-- y:begin -->", "<!-- y:end -->"))
    with pytest.raises(SystemExit, match="block to replace"):
        kept.update_docs("b\n", ("<!-- y:begin -->", "<!-- y:end -->"), docs=page)


def test_markdown_table_rounds_floats_to_four_digits(tmp_path):
    pd.DataFrame({"a": [1.234567, 2.0], "b": ["x", "y"]}).to_csv(tmp_path / "t.csv", index=False)
    assert markdown_table(tmp_path / "t.csv") == "| a | b |\n| --- | --- |\n| 1.235 | x |\n| 2 | y |\n"


def test_reading_words_and_cut():
    row = SimpleNamespace(median_E=1450.0, median_E_lo=1300.0, median_E_hi=math.inf)
    assert reading.median_text(row) == "1450 (1300–…)"
    assert reading.median_text(SimpleNamespace(median_E=math.nan, median_E_lo=0, median_E_hi=0)) == "not reached"
    assert (
        reading.p_text(2e-5) == "2.0e-05"
        and reading.p_text(0.0114) == "0.011"
        and reading.p_text(math.nan) == "undetermined"
    )
    curves = pd.DataFrame({"step": [100, 200, 300], "budget": [300] * 3})
    cut = reading.at_budget(curves, 200)
    assert cut["step"].tolist() == [100, 200] and set(cut["budget"]) == {200}


def test_forced_cells_and_interval():
    assert forced.parse_cells(forced.DEFAULT_CELLS) == [(1.0, 500), (1.0, 250), (0.25, 500)]
    with pytest.raises(ValueError, match=r"--cells 'x' must be comma-separated β:N pairs"):
        forced.parse_cells("x")
    mean, lo, hi = forced.mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and hi - mean == pytest.approx(4.303 * 1.0 / math.sqrt(3))


def test_judged_defaults_are_the_settings_operating_point():
    import inspect

    params = inspect.signature(judged).parameters
    assert (params["threshold"].default, params["hold"].default) == (StudyConfig().threshold, StudyConfig().hold)


@pytest.mark.slow
def test_keep_runs_trains_keeps_each_curve_and_resumes(tmp_path, monkeypatch):
    """The one loop of both kept populations (:func:`interp.population.kept.keep_runs`): a tiny
    crossed suite's two runs trained and kept with their two seeds; their curves equal
    :func:`kept.evaluate_run` on the trained folders; a second call keeps nothing; a damaged
    file is removed and its run's curve kept again, equal to the first."""
    from interp.sources import embedded
    from interp.sources.catalogue import run_name, suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    tiny = embedded.ModelSize("neox-1l-32d", n_layers=1, d_model=32, n_heads=4)
    cfg = embedded.SuiteConfig(
        sizes=(tiny,), seeds=(3,), data_order_seeds=(3, 4), steps=4, checkpoint_every=2,
        n_ctx=32, batch_size=4, warmup_steps=2, corpus_bytes=200_000,
    )  # fmt: skip
    runs = cfg.runs()
    assert [run_name(*r) for r in runs] == ["neox-1l-32d-seed3", "neox-1l-32d-init3-data4"]
    out = tmp_path / "kept"
    assert kept.keep_runs(cfg, [runs], 1, out, n_prompts=8, split=True) == 2
    curves = kept.read_kept_split_curves(out)
    assert list(curves.columns) == kept.split_curve_columns()
    two = curves[curves["run"] == "neox-1l-32d-init3-data4"].reset_index(drop=True)
    assert two["step"].tolist() == list(cfg.checkpoint_steps) == [0, 1, 2, 4]
    assert (two["init_seed"] == 3).all() and (two["data_order_seed"] == 4).all()
    alone = kept.evaluate_run(suite_dir(cfg) / "neox-1l-32d-init3-data4", cfg, tiny, 3, 8)
    pd.testing.assert_frame_equal(two[kept.curve_columns()], alone[kept.curve_columns()])
    assert kept.keep_runs(cfg, [runs], 1, out, n_prompts=8, split=True) == 0  # resumes: nothing to do
    path = kept.kept_curve("neox-1l-32d-init3-data4", out)
    path.write_text(path.read_text()[:40])  # cut short
    assert kept.keep_runs(cfg, [runs], 1, out, n_prompts=8, split=True) == 1
    again = kept.read_kept_split_curves(out)
    pd.testing.assert_frame_equal(again.sort_values(["run", "step"]).reset_index(drop=True),
                                  curves.sort_values(["run", "step"]).reset_index(drop=True))  # fmt: skip
