"""Command-line interface: commands that run (bad input: tests/test_cli_bad_input.py)."""

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from emergence_lens.cli import app

runner = CliRunner()


def error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [l for l in result.output.strip().splitlines() if l.strip()]
    assert len(lines) == 1, result.output  # exactly one line, no traceback
    assert lines[0].startswith("error: ")
    return lines[0]


def test_rank_heads_writes_tables(tiny_local_suite, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["rank-heads", str(tiny_local_suite), "--pre", "0", "--post", "200", "--out", str(out)])
    assert result.exit_code == 0, result.output
    heads = pd.read_csv(out / "heads.csv")
    assert len(heads) == 2 * 4 and sorted(heads["rank"]) == list(range(1, 9))
    topk = pd.read_csv(out / "topk.csv")
    assert list(topk["k"]) == list(range(1, 9))
    assert sorted(p.name for p in out.iterdir()) == ["heads.csv", "topk.csv"]  # no temporary files left


@pytest.mark.slow
def test_bisect_on_a_local_suite(tiny_local_suite, tmp_path):
    result = runner.invoke(app, ["bisect", str(tiny_local_suite), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    points = pd.read_csv(tmp_path / "points.csv")
    # random tiny models never reach 50 % on digit repetition: reported as never emerging
    assert points["emerged"].tolist() == [False] and points["n_evaluations"].tolist() == [2]


def test_unknown_embedded_run_lists_valid_names():
    line = error_line(runner.invoke(app, ["bisect", "embedded/neox-9l-seed0"]))
    assert "neox-2l-64d-seed0" in line
    line = error_line(runner.invoke(app, ["bisect", "embedded-quick/neox-2l-128d-seed0"]))
    assert "neox-2l-64d-seed1, neox-2l-64d-seed2" in line  # the quick suite's runs only


def test_list_models_prints_usable_sources():
    result = runner.invoke(app, ["list-models"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "EleutherAI/pythia-410m-seed9" in lines and "embedded/neox-2l-128d-seed2" in lines
    assert "embedded-quick/neox-2l-64d-seed1" in lines  # a name for every run of the quick suite


def test_embedded_names_resolve_without_training(tmp_path, monkeypatch):
    """A source name means one set of weights whatever the cache holds (issue 55):
    ``embedded/<run>`` is the full suite's run, ``embedded-quick/<run>`` the quick one's, with
    neither suite, either or both cached. Resolution itself trains nothing."""
    from interp.sources.catalogue import FULL, QUICK, resolve_embedded, suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))

    def resolved() -> tuple:
        return (
            resolve_embedded("embedded/neox-2l-64d-seed1"),
            resolve_embedded("embedded-quick/neox-2l-64d-seed1"),
            {cfg for cfg, _ in resolve_embedded("embedded")},
            {cfg for cfg, _ in resolve_embedded("embedded-quick")},
        )

    expected = ([(FULL, "neox-2l-64d-seed1")], [(QUICK, "neox-2l-64d-seed1")], {FULL}, {QUICK})
    assert resolved() == expected  # an empty cache
    assert resolve_embedded("embedded/neox-2l-64d-seed0") == [(FULL, "neox-2l-64d-seed0")]
    assert [run for _, run in resolve_embedded("embedded-quick")] == ["neox-2l-64d-seed1", "neox-2l-64d-seed2"]
    quick = suite_dir(QUICK) / "neox-2l-64d-seed1"  # only the quick suite's run cached (the case)
    quick.mkdir(parents=True)
    (quick / "suite.json").write_text("{}")
    assert resolved() == expected
    full = suite_dir(FULL) / "neox-2l-64d-seed1"  # both cached
    full.mkdir(parents=True)
    (full / "suite.json").write_text("{}")
    assert resolved() == expected
    (quick / "suite.json").unlink()  # only the full one
    assert resolved() == expected
    assert not (suite_dir(FULL) / "neox-2l-64d-seed2").exists()  # nothing was trained
    with pytest.raises(
        ValueError,
        match=r"unknown embedded run 'neox-2l-64d-seed0' in 'embedded-quick'; did you mean 'embedded/neox-2l-64d-seed0'\? valid: ",
    ):
        resolve_embedded("embedded-quick/neox-2l-64d-seed0")


#: A transformers config.json for --config (a tiny GPT-2's).
CONFIG_FILE = str(Path(__file__).with_name("data") / "tiny-gpt2-config.json")
#: Fields whose flag is not their name with dashes.
FLAGS = {"model_config": "config"}
#: A value other than the default for every StudyConfig field, as typed (None: a switch) and as the
#: StudyConfig holds it. A field added to StudyConfig needs its row here (the first test says so).
NOT_DEFAULT = {
    "threshold": ("0.75", 0.75),
    "hold": ("3", 3),
    "scan": (None, True),
    "method": ("attribution", "attribution"),
    "metric": ("logprob", "logprob"),
    "prescreen_top_n": ("4", 4),
    "prescreen_steps": ("3", 3),
    "decompose": (None, False),
    "scores": (None, False),
    "scrub": (None, False),
    "dtype": ("bfloat16", "bfloat16"),
    "swap_weights": (None, False),
    "device": ("cpu", "cpu"),
    "ks": ("1,3", (1, 3)),
    "n_boot": ("0", 0),
    "allow_pickle": (None, True),
    "step_pattern": ("epoch{E}-step{N}", "epoch{E}-step{N}"),
    "model_config": (CONFIG_FILE, CONFIG_FILE),
}


def _flags(fields) -> list[str]:
    args = []
    for name in fields:
        text, value = NOT_DEFAULT[name]
        flag = FLAGS.get(name, name.replace("_", "-"))
        args += [f"--{flag}" if value else f"--no-{flag}"] if text is None else [f"--{flag}", text]
    return args


def _spy_on_the_runner(monkeypatch) -> list:
    """``run_study`` records the config it receives (and runs nothing); the summary prints nothing."""
    import interp.cli.main_job as commands
    from interp.main_job import runner as main_runner

    received = []
    monkeypatch.setattr(main_runner, "run_study", lambda sources, tasks, config, **kw: received.append(config))
    monkeypatch.setattr(commands, "_print_summary", lambda report, out: None)
    return received


def test_every_study_config_field_is_an_option_of_run_and_demo():
    """``emergence run`` offers every StudyConfig field (``demo`` every one but the two loading options
    of hub and local runs), named ``--field-with-dashes``, its help the field's metadata, its default
    the field's (``demo``: ``DEMO_CONFIG``'s)."""
    import dataclasses

    import typer

    from interp.cli.main_job import DEMO_EXCLUDES
    from interp.core.settings import DEMO_CONFIG, StudyConfig

    fields = dataclasses.fields(StudyConfig)
    assert set(NOT_DEFAULT) == {f.name for f in fields}
    # the embedded suite: safetensors and config.json in step{N}/
    assert set(DEMO_EXCLUDES) == {"allow_pickle", "step_pattern", "model_config"}
    group = typer.main.get_command(app)
    for command, defaults, left_out in (("run", StudyConfig(), set()), ("demo", DEMO_CONFIG, set(DEMO_EXCLUDES))):
        params = {p.name: p for p in group.commands[command].params}
        for f in fields:
            if f.name in left_out:
                assert f.name not in params
                continue
            option = params[f.name]
            flag = FLAGS.get(f.name, f.name.replace("_", "-"))
            assert f"--{flag}" in option.opts, (command, f.name, option.opts)
            assert option.help == f.metadata["help"] and len(option.help) > 20
            assert option.default == getattr(defaults, f.name), (command, f.name)
        assert params["scan"].default is (command == "demo")  # the demo scans; run bisects
    help_text = " ".join(
        runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}, terminal_width=200).output.split()
    )
    for flag in ("--threshold", "--scan", "--no-scan", "--prescreen-top-n", "--ks", "--n-boot", "--no-scrub"):
        assert flag in help_text


def test_run_and_demo_hand_every_flag_to_the_study_config(tmp_path, monkeypatch):
    """A value typed for each field reaches the StudyConfig the runner receives (one road: the
    flags, then ``StudyConfig(**flags)``, then ``run_study``)."""
    from interp.cli.main_job import DEMO_EXCLUDES
    from interp.core.settings import DEMO_CONFIG, StudyConfig

    received = _spy_on_the_runner(monkeypatch)
    result = runner.invoke(app, ["run", "embedded-quick", "--out", str(tmp_path / "run"), *_flags(NOT_DEFAULT)])
    assert result.exit_code == 0, result.output
    expected = StudyConfig(**{name: value for name, (_, value) in NOT_DEFAULT.items()})
    assert received == [expected]
    assert all(getattr(expected, name) != getattr(StudyConfig(), name) for name in NOT_DEFAULT)

    demo_fields = [name for name in NOT_DEFAULT if name not in DEMO_EXCLUDES and name != "scan"]
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "demo"), *_flags(demo_fields)])
    assert result.exit_code == 0, result.output
    assert received[1] == DEMO_CONFIG.replace(**{name: NOT_DEFAULT[name][1] for name in demo_fields})
    assert received[1].scan is True  # DEMO_CONFIG's, no flag given
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "demo"), "--no-scan"])
    assert result.exit_code == 0, result.output
    assert received[2].replace(device=None) == DEMO_CONFIG.replace(scan=False)  # the device: auto, resolved


def test_the_demo_plans_only_the_suite_it_analyses(tmp_path, monkeypatch):
    """``emergence demo`` (source ``embedded``) plans every unit, and opens every run, on the full
    suite, and ``demo --quick`` on the quick one, whatever the cache holds: the first run never
    trains or reads the other suite (issue 55: it analysed the quick suite's 2400-step runs)."""
    from interp.main_job.units import expand_sources
    from interp.sources.catalogue import FULL, QUICK, suite_dir
    from interp.sources.door import ReadySources

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))
    for name in QUICK.run_names():  # the quick suite cached, the full one not
        (suite_dir(QUICK) / name).mkdir(parents=True)
        (suite_dir(QUICK) / name / "suite.json").write_text("{}")
    assert expand_sources(["embedded"]) == [f"embedded/{n}" for n in FULL.run_names()]
    assert expand_sources(["embedded-quick"]) == [f"embedded-quick/{n}" for n in QUICK.run_names()]
    for names, cfg in ((["embedded"], FULL), (expand_sources(["embedded"]), FULL), (["embedded-quick"], QUICK)):
        slots = ReadySources(names, progress=False)._slots  # constructing it trains nothing
        assert [slot[1] for slot in slots] == [cfg] * len(cfg.run_names())
        assert [slot[2] for slot in slots] == cfg.run_names()


def test_open_source_opens_embedded_runs_like_the_cli(tiny_local_suite, tmp_path, monkeypatch):
    """``open_source`` (Python) and the command line resolve ``embedded[-quick]/<run>`` the same
    way; a whole suite is refused by ``open_source`` before anything is trained."""
    import shutil as _shutil

    from interp.sources import open_source
    from interp.sources.catalogue import QUICK, suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))
    run = suite_dir(QUICK) / "neox-2l-64d-seed1"  # a stand-in run folder: the tiny suite, marked complete
    _shutil.copytree(tiny_local_suite, run)
    (run / "suite.json").write_text('{"model_id": "embedded/neox-2l-64d-seed1"}')
    (suite_dir(QUICK) / "neox-2l-64d-seed2").mkdir()
    (suite_dir(QUICK) / "neox-2l-64d-seed2" / "suite.json").write_text("{}")
    source = open_source("embedded-quick/neox-2l-64d-seed1")
    # the quick suite keeps its own name (issue 67, item 6), whatever its suite.json says
    assert source.available_steps() == [0, 100, 200] and source.model_id == "embedded-quick/neox-2l-64d-seed1"
    assert source.root == run
    with pytest.raises(ValueError, match="open_source takes one run, and 'embedded-quick' names 2"):
        open_source("embedded-quick")
    result = runner.invoke(app, ["curve", "embedded-quick/neox-2l-64d-seed1", "--steps", "0,200"])
    assert result.exit_code == 0, result.output
    assert "neox-2l-64d" in result.output and len(result.output.strip().splitlines()) == 3


@pytest.mark.slow
def test_rank_heads_and_decompose_over_one_prompt_say_why_bounds_are_nan(tiny_local_suite, tmp_path):
    """One prompt: NaN bounds, a one-line warning, and the jump flagged (no standard error)."""
    for command, table, bounds in (
        ("rank-heads", "heads.csv", ["delta_lo", "delta_hi"]),
        ("decompose", "components.csv", ["recovered_lo", "recovered_hi"]),
    ):
        out = tmp_path / command
        result = runner.invoke(
            app, [command, str(tiny_local_suite), "--pre", "0", "--post", "200", "--n-prompts", "1", "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1 and "bootstrap over 1 prompt(s)" in warnings[0], result.output
        assert "RuntimeWarning" not in result.output
        assert "JUMP TOO SMALL: below 3 standard errors" in result.output
        frame = pd.read_csv(out / table)
        assert frame[bounds].isna().all().all() and frame["jump_too_small"].all()


def test_the_command_line_package_exports_and_imports_only_public_names():
    """``interp.cli`` lists no private name in ``__all__``, and no module imports a private name
    (``_x``) from :mod:`interp.cli.options`: the helpers the commands share are public there."""
    import ast
    from pathlib import Path

    import interp.cli

    assert interp.cli.__all__ and not [name for name in interp.cli.__all__ if name.startswith("_")]
    root = Path(interp.cli.__file__).parents[2]
    private, importers = [], set()
    for path in [*(root / "interp").rglob("*.py"), *(root / "emergence_lens").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "interp.cli.options":
                importers.add(path.name)
                private += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert {"main_job.py", "heads.py"} <= importers and private == []


def test_field_options_follow_the_dataclass():
    """The generic helper on a toy dataclass: one option per field (a switch for a bool, text read
    through ``parse``), defaults from the instance given, an excluded field absent; an unknown
    excluded name and an own parameter named like a field are refused."""
    import dataclasses

    import typer

    from interp.core.field_options import field_help, setting, with_field_options

    @dataclasses.dataclass(frozen=True)
    class Toy:
        n_items: int = setting(3, "How many items.")
        loud: bool = setting(False, "Shout.")
        sizes: tuple[int, ...] = setting(
            (1, 2), "Sizes, e.g. 1,2.", parse=lambda text: tuple(map(int, text.split(",")))
        )
        label: str = setting("x", "A label.")

    seen = []

    def command(name: str = typer.Option("a", "--name"), **fields):
        seen.append((name, Toy(**fields)))

    toy = typer.Typer()
    toy.command()(with_field_options(command, Toy, defaults=Toy(n_items=7), exclude=["label"]))
    toy.command("other")(lambda: None)  # two commands: the first is invoked by name
    ok = runner.invoke(toy, ["command", "--loud", "--sizes", "4,5,6", "--name", "b"])
    assert ok.exit_code == 0, ok.output
    assert seen == [("b", Toy(n_items=7, loud=True, sizes=(4, 5, 6)))]  # n_items: the instance's default
    excluded = runner.invoke(toy, ["command", "--label", "y"])
    assert excluded.exit_code == 2 and "No such option: --label" in excluded.output
    assert field_help(Toy, "loud") == "Shout."
    with pytest.raises(ValueError, match=r"exclude=\['lable'\]: not fields of Toy"):
        with_field_options(command, Toy, exclude=["lable"])

    def clashing(label: str = "z", **fields):
        pass

    with pytest.raises(ValueError, match=r"own parameters named like fields of Toy: \['label'\]"):
        with_field_options(clashing, Toy)
