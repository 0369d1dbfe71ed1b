"""The researcher's first hour in Python (issue 22; issue 21's one import): one import that
does not slow the command line, results that print in one screen and compare, notebooks that
use the cached suite."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

import emergence_lens as el
from interp.core.objects import MAX_REPR_CHARS, values_equal
from interp.core.settings import StudyConfig

ROOT = Path(__file__).resolve().parents[2]


def test_one_import_exposes_the_notebook_names():
    for name in (
        "open_source",
        "RepetitionTask",
        "TaskBatch",
        "find_emergence",
        "rank_heads_between",
        "decompose_between",
        "run_study",
        "StudyConfig",
        "MainJobReport",
        "show_attention",
        "METRICS",
        "register_metric",
        "HeadRanking",
        "tasks",
        "patching",
    ):
        assert name in el.__all__ and name in dir(el)
    assert not {"importlib", "Any", "annotations"} & set(dir(el))  # tab completion shows the API only
    from interp.ranking import rank_heads_between
    from interp.tasks import RepetitionTask

    assert el.rank_heads_between is rank_heads_between and el.RepetitionTask is RepetitionTask
    assert el.make_task("repetition").name == "repetition"
    for name in el.__all__:
        assert getattr(el, name) is not None
    with pytest.raises(AttributeError, match=r"names it exports: .*rank_heads_between"):
        _ = el.rank_heads


def test_no_public_name_is_taken_by_ipython_automagic():
    """A bare name in a notebook cell must reach the toolkit, not an IPython line magic (issue 58,
    item 4: ``run`` was taken as ``%run``; the main job is ``el.run_study``)."""
    from IPython.core.interactiveshell import InteractiveShell

    magics = set(InteractiveShell.instance().magics_manager.magics["line"])
    assert "run" in magics  # the list is the real one
    assert not magics & set(el.__all__), sorted(magics & set(el.__all__))


def test_import_and_help_do_not_load_torch():
    code = (
        "import sys\nimport emergence_lens\nfrom typer.testing import CliRunner\n"
        "from emergence_lens.cli import app\n"
        "assert CliRunner().invoke(app, ['--help']).exit_code == 0\n"
        "heavy = [m for m in ('torch', 'pandas', 'transformers', 'transformer_lens') if m in sys.modules]\n"
        "print(heavy)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["run", "embeded/neox-2l-64d-seed0", "--out", "OUT"],
            "unknown checkpoint source 'embeded/neox-2l-64d-seed0'; did you mean 'embedded/neox-2l-64d-seed0'?",
        ),
        (["run", "embedded-quik", "--out", "OUT"], "did you mean 'embedded-quick'?"),
        (["demo", "--quick", "--out", "FILE"], "--out 'FILE': 'FILE' is an existing file, not a folder; give --out a"),
        (["run", "embedded-quick", "--out", "FILE/sub"], "'FILE' is an existing file, not a folder"),
        (["demo", "--quick", "--out", "/sys/emergence-out"], "--out '/sys/emergence-out': cannot write in '/sys' ("),
    ],
    ids=["source-typo", "suite-typo", "demo-out-is-a-file", "run-out-under-a-file", "demo-out-unwritable"],
)
def test_a_newcomers_mistake_is_refused_before_anything_heavy_loads(args, expected, tmp_path):
    """A near-miss source name gets "did you mean"; an --out that cannot be a folder, or where nothing
    can be written (/sys: refused even to root), is named with what would do; both before torch,
    pandas or transformers load (issue 71: the typo went to the hub, the unwritable --out failed
    after ~60 s with "Permission denied")."""
    if args[-1].startswith("/sys") and not Path("/sys").is_dir():
        pytest.skip("no /sys here (not Linux)")
    plain = tmp_path / "a-file"
    plain.write_text("keep me\n")
    args = [a.replace("FILE", str(plain)).replace("OUT", str(tmp_path / "out")) for a in args]
    expected = expected.replace("FILE", str(plain))
    code = (
        "import sys\nfrom typer.testing import CliRunner\nfrom emergence_lens.cli import app\n"
        f"result = CliRunner().invoke(app, {args!r})\n"
        "heavy = [m for m in ('torch', 'pandas', 'transformers', 'transformer_lens') if m in sys.modules]\n"
        "print(result.exit_code, heavy)\nprint(result.output)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "EMERGENCE_LENS_CACHE": str(tmp_path / "cache")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    status, _, output = done.stdout.partition("\n")
    assert status == "2 []", done.stdout  # refused, and nothing heavy imported
    assert output.strip().startswith("error: emergence ") and expected in output, output
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    assert plain.read_text() == "keep me\n"


# --------------------------------------------------------------------------- print and compare


def _ranking(delta=None):
    from interp.ranking import HeadRanking
    from interp.ranking_stats import rank_heads

    delta = torch.tensor([[0.3, float("nan")], [0.1, -0.2]]) if delta is None else delta
    heads = rank_heads(delta).assign(metric="logit-diff", unit="logits")
    topk = pd.DataFrame(
        {"k": [1, 2], "value": [0.5, 0.7], "recovered": [0.4, 0.8], "metric": "logit-diff", "unit": "logits"}
    )
    return HeadRanking(
        value_pre=0.1,
        value_post=1.1,
        delta=delta,
        heads=heads,
        topk=topk,
        post_patterns=torch.rand(2, 64, 2, 19, 19, generator=torch.Generator().manual_seed(0)),
        metric="logit-diff",
        unit="logits",
        example_tokens=[str(i) for i in range(19)],
    )


def test_head_ranking_prints_in_one_screen_and_compares_by_value():
    a, b = _ranking(), _ranking()
    text = repr(a)
    assert len(text) < MAX_REPR_CHARS + 200 and text.count("\n") < 30
    assert "metric='logit-diff' (logits)" in text and "L0H0 +0.3" in text
    assert "Tensor[2×64×2×19×19, float32]" in text  # a tensor by its shape, never its values
    assert a == b  # NaN at the same place compares equal, tables by DataFrame.equals
    b.delta = b.delta.clone()
    b.delta[1, 1] = -0.25
    assert a != b
    c = _ranking()
    c.topk = c.topk.assign(value=[0.5, 0.71])
    assert a != c
    assert a.value_pre == 0.1 and not hasattr(a, "p_pre") and not hasattr(a, "delta_p")  # one name per field


def test_head_ranking_has_an_html_view_labelled_with_its_metric():
    import re

    page = _ranking()._repr_html_()
    assert "logit difference per head (logits)" in page  # the heatmap's title (plotly escapes the Δ)
    assert "logit-diff (logit difference, logits)" in page
    visible = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    assert "p(answer)" not in visible and "probability" not in visible and "delta_p" not in visible


def test_values_equal_never_raises():
    frame = pd.DataFrame({"a": [1.0, float("nan")]})
    assert values_equal(frame, frame.copy()) and not values_equal(frame, frame.assign(a=[1.0, 2.0]))
    assert values_equal(float("nan"), float("nan")) and not values_equal(torch.ones(2), torch.ones(3))
    assert values_equal({"x": [torch.zeros(2)]}, {"x": [torch.zeros(2)]})
    assert not values_equal(torch.zeros(2), torch.zeros(2, dtype=torch.float64))


def test_every_result_class_prints_short_and_compares(tmp_path):
    from interp.emergence import EmergencePoint
    from interp.tasks import TaskBatch

    evaluations = pd.DataFrame({"step": range(200), "accuracy": 0.5, "p_answer": 0.4, "order": range(200)})
    point = EmergencePoint("run", 100, 200, True, 0.5, True, 9, evaluations)
    assert point == EmergencePoint("run", 100, 200, True, 0.5, True, 9, evaluations.copy())
    assert point != EmergencePoint("run", 100, 300, True, 0.5, True, 9, evaluations)
    assert len(repr(point)) < 1000
    batch = TaskBatch(
        torch.zeros(512, 19, dtype=torch.long),
        torch.zeros(512, dtype=torch.long),
        torch.full((512,), 18),
        prompts=["x" * 40] * 512,
        task="repetition",
    )
    assert batch == TaskBatch(
        batch.tokens.clone(), batch.answers.clone(), batch.answer_pos.clone(), list(batch.prompts), "repetition"
    )
    assert len(repr(batch)) < 1000 and "512 items" in repr(batch)
    assert "<table" in batch._repr_html_() and "<table" in point._repr_html_()


def test_main_job_report_prints_short_and_equals_its_saved_copy(tmp_path):
    sys.path.insert(0, str(ROOT / "tests"))
    from interp.main_job.report import MainJobReport
    from tests.interp.report.test_display import make_run

    report = MainJobReport(runs=[make_run(1), make_run(3, emerged=False)], title="toy report")
    assert len(repr(report)) < 600 and "MainJobReport(" in repr(report)
    report.save(tmp_path / "r")
    again = MainJobReport.load(tmp_path / "r")
    assert again == again and isinstance(again == report, bool)
    assert all(a.heads.equals(b.heads) for a, b in zip(again.runs, report.runs) if a.heads is not None)
    assert [r == s for r, s in zip(again.runs, report.runs)] == [True] * len(report.runs)


# --------------------------------------------------------------------------- notebooks use the cached suite


def test_cached_suite_runs_uses_the_full_suite_when_only_it_is_cached(tmp_path, monkeypatch):
    from interp.sources import embedded
    from interp.sources.catalogue import FULL, QUICK, suite_dir

    def refuse(*args, **kwargs):
        raise AssertionError("trained although a suite was cached")

    monkeypatch.setattr(embedded, "ensure_suite", refuse)
    for name in FULL.run_names():
        (suite_dir(FULL, tmp_path) / name).mkdir(parents=True)
        (suite_dir(FULL, tmp_path) / name / "suite.json").write_text(json.dumps({}))
    found = embedded.cached_suite_runs(QUICK, root=tmp_path)
    assert found == [suite_dir(FULL, tmp_path) / n for n in QUICK.run_names()]  # the quick suite's runs, same scale
    (suite_dir(FULL, tmp_path) / QUICK.run_names()[0] / "suite.json").unlink()  # incomplete: all runs of nothing
    trained = []
    monkeypatch.setattr(embedded, "ensure_suite", lambda cfg, **kw: trained.append(cfg) or ["trained"])
    assert embedded.cached_suite_runs(QUICK, root=tmp_path) == ["trained"] and trained == [QUICK]


def test_notebooks_use_the_one_import_and_the_cached_suite():
    for path in sorted((ROOT / "analyses" / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        assert "import emergence_lens as el" in code, path.name
        assert "from interp." not in code and "import interp" not in code, path.name
        assert "ensure_suite(" not in code, path.name  # train only when no suite is cached


# --------------------------------------------------------------------------- labels and docstrings that are true


@pytest.fixture
def seeded_suite(tiny_local_suite, tmp_path):
    """The tiny local suite under a run id with a seed (``toy-2l-seed2``)."""
    from interp.sources import LocalSuiteSource

    return LocalSuiteSource(tiny_local_suite, model_id="toy/toy-2l-seed2")


def test_loading_pre_leaves_post_weights_untouched(seeded_suite):
    post = seeded_suite.load(200).model
    before = {name: p.detach().clone() for name, p in post.named_parameters()}
    pre = seeded_suite.load(0).model
    assert pre is not post
    diff = max(float((p.detach() - before[name]).abs().max()) for name, p in post.named_parameters())
    assert diff == 0.0  # the docstring of rank_heads_between says so
    differs = max(float((a.detach() - b.detach()).abs().max()) for a, b in zip(pre.parameters(), post.parameters()))
    assert differs > 0.0  # pre really is another checkpoint


def test_tables_carry_the_sources_model_and_seed(seeded_suite):
    from interp.decomposition import DecomposeOptions, decompose_jump
    from interp.ranking import rank_heads_between
    from interp.scores import head_scores_over_checkpoints
    from interp.tasks import RepetitionTask

    scores = head_scores_over_checkpoints(seeded_suite, [0, 200], n_prompts=2, period=5)
    assert set(scores["model"]) == {"toy-2l"} and set(scores["seed"]) == {2}
    batch = RepetitionTask(n_prompts=4, length=5).build(seeded_suite.tokenizer())
    ranking = rank_heads_between(seeded_suite, 0, 200, batch, StudyConfig(n_boot=20, ks=[1], decompose=False))
    for table in (ranking.heads, ranking.topk):
        assert list(table.columns[:2]) == ["model", "seed"]
        assert set(table["model"]) == {"toy-2l"} and set(table["seed"]) == {2}
    post = seeded_suite.load(200).model
    pre = seeded_suite.load(0).model
    table = decompose_jump(pre, post, batch, StudyConfig(ks=[1], n_boot=20), DecomposeOptions(targets=["pattern"]))
    for column in ("model", "seed", "pre_step", "post_step"):  # the docstring: NaN when not given
        assert table[column].isna().all() and table[column].dtype == float, column


def test_attention_views_refuse_inputs_they_would_crop():
    patterns = torch.rand(2, 19, 19).softmax(-1)
    tokens = [str(i) for i in range(19)]
    with pytest.raises(
        ValueError,
        match=r"patterns \[2, 19, 19\], 5 tokens, 1 names: 5 tokens for 19 query / 19 key "
        r"positions; 1 names for 2 patterns",
    ):
        el.show_attention(tokens[:5], patterns, ["one"])
    with pytest.raises(ValueError, match=r"query_pos 19 != key_pos 18"):
        el.show_attention(tokens, patterns[:, :, :18], ["a", "b"])
    with pytest.raises(ValueError, match=r"must be \[n, query_pos, key_pos\], got shape \[19, 19\]"):
        el.show_attention(tokens, patterns[0], ["a"])
    assert "CircuitsVis.render" in str(el.show_attention(tokens, patterns, ["a", "b"]))


# --------------------------------------------------------------------------- labels follow the metric


def _report_for(ranking, metric):
    from interp.emergence import EmergencePoint
    from interp.main_job.report import MainJobReport, RunAnalysis

    curve = pd.DataFrame({"step": [0, 100, 200], "accuracy": [0.0, 0.2, 0.8], "p_answer": [0.1, 0.2, 0.7]})
    point = EmergencePoint("toy/toy-2l-seed2", 100, 200, True, 0.5, True, 3, curve.assign(order=[1, 2, 3]))
    run = RunAnalysis(model="toy-2l", seed=2, model_id=point.model_id, point=point, curve=curve)
    for key in (
        "value_pre",
        "value_post",
        "delta",
        "heads",
        "topk",
        "metric",
        "unit",
        "example_tokens",
        "example_patterns",
        "example_names",
    ):
        setattr(run, key, getattr(ranking, key))
    return MainJobReport(runs=[run], title=f"toy {metric}")


@pytest.mark.parametrize("metric", ["p", "logprob", "logit-diff"])
def test_labels_follow_the_metric(metric, seeded_suite, tmp_path):
    from interp.core.metrics import METRICS, patching_metric_names
    from interp.main_job.report import MainJobReport
    from interp.ranking import rank_heads_between
    from interp.tasks import RepetitionTask

    assert metric in patching_metric_names()
    spec = METRICS[metric]
    batch = RepetitionTask(n_prompts=4, length=5).build(seeded_suite.tokenizer())
    ranking = rank_heads_between(
        seeded_suite, 100, 200, batch, StudyConfig(n_boot=20, ks=[1, 2], metric=metric, decompose=False)
    )
    assert ranking.unit == spec.unit and set(ranking.heads["unit"]) == {spec.unit} == set(ranking.topk["unit"])
    report = _report_for(ranking, metric)
    for table in (report.heads, report.topk, report.summary()):
        assert not {"delta_p", "p_patched", "p_pre", "p_post", "top_delta_p"} & set(table.columns)
    summary = report.summary().iloc[0]
    assert (summary["metric"], summary["unit"]) == (metric, spec.unit)
    assert summary["top_delta"] == pytest.approx(float(ranking.heads["delta"].max()))
    page = report.html()
    visible = re.sub(r"<script.*?</script>", "", page, flags=re.S)
    section = visible.split(f"{spec.delta_label} per head</h3>")[1].split("<h3>")[0]  # the heatmap's section
    assert f"metric {metric}, {spec.unit}" in section and spec.label in section
    legend = visible.split("Summary</h2>")[1].split("</h2>")[0]
    assert f"{metric} = {spec.description} ({spec.unit})" in legend
    if metric != "p":  # nothing claims a probability for a metric that is not one
        assert "Δp" not in section and "probability" not in section
        assert not re.search(r"(?<!log )p\(answer\)", legend)
        heatmap = report.heatmaps()[0]
        assert spec.label in heatmap.layout.title.text and spec.unit in heatmap.data[0].colorbar.title.text
    report.save(tmp_path / "r")
    again = MainJobReport.load(tmp_path / "r")
    assert again.runs[0].unit == spec.unit and again.heads.equals(report.heads)


def test_synthetic_results_print_short_and_compare():
    from synthetic.training import TrainConfig, train

    config = TrainConfig(
        task="linear-map",
        S=4,
        s=1,
        d_head=4,
        n_heads=2,
        n_layers=1,
        steps=3,
        tokens_per_step=64,
        eval_every=1,
        eval_tokens=64,
        warmup_steps=1,
        seed=0,
    )
    a, b = train(config, progress=False), train(config, progress=False)
    assert len(repr(a)) < MAX_REPR_CHARS and "DataFrame[" in repr(a)
    assert a == b  # same settings, same seed: same metrics and the same weights
    c = train(TrainConfig(**{**config.__dict__, "seed": 1}), progress=False)
    assert a != c
