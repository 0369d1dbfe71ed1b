"""Every command's settings options come from StudyConfig's fields (issue 70, item 4).

One table (:data:`TAKES`) says, for each command, the StudyConfig fields it takes and the settings
it starts from. Each of those options is derived (:func:`interp.cli.options.study_options`: the
field's flag, help and default, checked by StudyConfig alone), none is declared by hand
(:func:`hand_built`, shown to catch one), a value typed reaches the StudyConfig the command builds,
and a bad value is refused with StudyConfig's own line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from emergence_lens.cli import app
from interp.core.settings import DEMO_CONFIG, TIMELINE_CONFIG, StudyConfig

runner = CliRunner()

#: A transformers config.json for --config (a tiny GPT-2's).
CONFIG_FILE = str(Path(__file__).resolve().parents[1] / "data" / "tiny-gpt2-config.json")
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


#: Every StudyConfig field, in field order.
ALL = tuple(f.name for f in dataclasses.fields(StudyConfig))
#: Every flag of a StudyConfig field (``--threshold``, ``--scan``, ``--no-scan``, ``--config``, ...).
FIELD_FLAGS = {
    *(f"--{FLAGS.get(name, name.replace('_', '-'))}" for name in ALL),
    *(f"--no-{name.replace('_', '-')}" for name in ALL),
}


def _but(*names: str) -> tuple[str, ...]:
    return tuple(name for name in ALL if name not in names)


#: For each command that takes study settings: the StudyConfig fields it offers (in field order)
#: and the settings it starts from (its options' defaults; ``rank-heads`` never decomposes).
TAKES = {
    "demo": (_but("allow_pickle", "step_pattern", "model_config"), DEMO_CONFIG),
    "run": (ALL, StudyConfig()),
    "curve": (("device", "allow_pickle", "step_pattern", "model_config"), StudyConfig()),
    "bisect": (("threshold", "hold", "device", "allow_pickle", "step_pattern", "model_config"), StudyConfig()),
    "rank-heads": (
        ("method", "metric", "prescreen_top_n", "prescreen_steps", "device", "ks", "n_boot")
        + ("allow_pickle", "step_pattern", "model_config"),
        StudyConfig(decompose=False),
    ),
    "decompose": (
        ("method", "metric", "device", "ks", "n_boot", "allow_pickle", "step_pattern", "model_config"),
        StudyConfig(),
    ),
    "readiness": (
        ("threshold", "hold", "method", "device", "n_boot", "allow_pickle", "step_pattern", "model_config"),
        StudyConfig(),
    ),
    "scrub": (
        ("threshold", "hold", "method", "metric", "prescreen_top_n", "prescreen_steps", "scores", "device")
        + ("allow_pickle", "step_pattern", "model_config"),
        StudyConfig(),
    ),
    "timeline": (_but("scan", "decompose", "scrub", "ks"), TIMELINE_CONFIG),
    "population": (("threshold", "hold", "device"), StudyConfig()),
}
#: The checkpoint-suite commands that read no study setting.
NO_SETTINGS = {"zoom", "train-suite", "download", "list-models", "list-tasks"}
#: Options named like a field that are not study settings, and why (the only ones allowed by hand).
NOT_SETTINGS = {("download", "allow_pickle"): "which files to fetch; download builds no StudyConfig"}
#: The fewest arguments each command parses with (its settings are checked before they are used).
ARGS = {
    "demo": [],
    "run": ["embedded-quick", "--out", "OUT"],
    "curve": ["SRC"],
    "bisect": ["SRC"],
    "rank-heads": ["SRC", "--pre", "0", "--post", "1"],
    "decompose": ["SRC", "--pre", "0", "--post", "1"],
    "readiness": ["SRC"],
    "scrub": ["SRC", "--out", "PAGE.html"],
    "timeline": ["SRC", "--out", "OUT"],
    "population": ["SRC", "--out", "OUT"],
}


def _commands() -> dict:
    """Command name -> (the function registered, the click command typer builds from it): the
    checkpoint-suite commands of :mod:`interp.cli` and ``population``."""
    import interp.cli
    import interp.population.cli

    group = typer.main.get_command(interp.cli.app)
    out = {}
    for info in interp.cli.app.registered_commands:
        name = info.name or info.callback.__name__.lower().replace("_", "-")
        out[name] = (info.callback, group.commands[name])
    (info,) = interp.population.cli.app.registered_commands
    out[info.name] = (info.callback, typer.main.get_command(interp.population.cli.app))
    return out


def settings_params(command: Any) -> dict[str, Any]:
    """The options of ``command`` that are StudyConfig's settings: named like a field or taking a
    field's flag, in the order ``--help`` lists them."""
    return {
        p.name: p
        for p in command.params
        if p.name in ALL or FIELD_FLAGS & {*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())}
    }


def hand_built(function, command: Any) -> list[str]:
    """The settings options ``command`` declares by hand: every one that
    :func:`interp.cli.options.study_options` did not derive (``function.field_options``)."""
    derived = getattr(function, "field_options", ())
    return [name for name in settings_params(command) if name not in derived]


def test_each_command_takes_the_fields_of_its_table_derived_from_study_config():
    """Every command is in the table; each takes exactly its fields, every option derived: flag
    ``--name-with-dashes`` (a switch for a bool), help the field's, default the settings it starts
    from, no range or choice of its own (StudyConfig checks the values), in the settings' panel."""
    from interp.cli.options import SETTINGS_PANEL

    commands = _commands()
    assert set(commands) == set(TAKES) | NO_SETTINGS
    fields = {f.name: f for f in dataclasses.fields(StudyConfig)}
    for name, (function, command) in commands.items():
        taken, preset = TAKES.get(name, ((), StudyConfig()))
        own = [field for field in hand_built(function, command) if (name, field) not in NOT_SETTINGS]
        assert own == [], name
        params = {k: p for k, p in settings_params(command).items() if (name, k) not in NOT_SETTINGS}
        assert tuple(params) == taken, name
        for field, option in params.items():
            flag = FLAGS.get(field, field.replace("_", "-"))
            assert option.opts == [f"--{flag}"], (name, field, option.opts)
            is_switch = fields[field].type in ("bool", bool)
            assert option.secondary_opts == ([f"--no-{flag}"] if is_switch else []), (name, field)
            assert option.help == fields[field].metadata["help"] and len(option.help) > 20, (name, field)
            assert option.default == getattr(preset, field), (name, field)
            assert not option.required and option.min is None and option.max is None, (name, field)
            assert option.type_descriptor.annotation in (str, int, float, bool, str | None, int | None), field
            assert option.rich_help_panel == SETTINGS_PANEL, (name, field)
    assert settings_params(commands["demo"][1])["scan"].default is True  # the demo scans; run bisects
    help_text = " ".join(
        runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}, terminal_width=200).output.split()
    )
    for flag in ("Study settings (StudyConfig)", "--threshold", "--no-scan", "--prescreen-top-n", "--n-boot"):
        assert flag in help_text


def test_the_check_catches_a_hand_built_option():
    """:func:`hand_built` names an option declared by hand, whether named like the field or only
    taking its flag, and passes the derived ones."""
    from interp.cli.options import study_options
    from interp.core.field_options import field_help

    toy = typer.Typer()

    @toy.command("named")
    def named(threshold: float = typer.Option(0.5, help=field_help(StudyConfig, "threshold"))):
        pass

    @toy.command("flagged")
    @study_options(("hold",))
    def flagged(rule: float = typer.Option(0.5, "--threshold"), **settings):
        pass

    group = typer.main.get_command(toy)
    assert hand_built(named, group.commands["named"]) == ["threshold"]
    assert hand_built(flagged, group.commands["flagged"]) == ["rule"]
    assert list(settings_params(group.commands["flagged"])) == ["rule", "hold"]


class _Stop(Exception):
    """Raised by the spy once a command has built its StudyConfig."""


def test_a_value_typed_for_each_field_reaches_the_study_config(monkeypatch):
    """Each command hands every field it takes to the StudyConfig it builds first (``readiness``
    ``--n-boot 0`` and ``--method attribution``, which the settings accept; ``scrub --hold``)."""
    import importlib

    for module in ("interp.population.cli", "interp.readiness"):  # before the spy: defaults made at import
        importlib.import_module(module)

    expected = {
        name: {**{f: getattr(preset, f) for f in ALL}, **{f: NOT_DEFAULT[f][1] for f in taken}}
        for name, (taken, preset) in TAKES.items()
    }
    assert all(getattr(StudyConfig(), f) != NOT_DEFAULT[f][1] for f in ALL)
    built = []

    def spy(self):
        built.append({f: getattr(self, f) for f in ALL})
        raise _Stop("stopped at StudyConfig")

    monkeypatch.setattr(StudyConfig, "__post_init__", spy)
    for name, (taken, _) in TAKES.items():
        result = runner.invoke(app, [name, *ARGS[name], *_flags(taken)])
        assert result.exit_code == 2 and "stopped at StudyConfig" in result.output, (name, result.output)
        assert built[-1] == expected[name], name
    assert expected["readiness"]["n_boot"] == 0 and expected["readiness"]["method"] == "attribution"
    assert expected["scrub"]["hold"] == 3


#: A bad value per checked field, as typed and as StudyConfig holds it.
BAD = {
    "threshold": ("0", 0.0),
    "hold": ("-1", -1),
    "method": ("exact", "exact"),
    "metric": ("kl", "kl"),
    "prescreen_top_n": ("0", 0),
    "prescreen_steps": ("0", 0),
    "n_boot": ("-1", -1),
    "ks": ("1,0", (1, 0)),
    "dtype": ("float8", "float8"),
    "device": ("gpu", "gpu"),
}


@pytest.mark.parametrize(
    "command, field", [(name, field) for name, (taken, _) in TAKES.items() for field in taken if field in BAD]
)
def test_a_bad_value_is_refused_with_study_configs_own_line(command, field, tmp_path):
    """Whatever the command, a bad setting is refused by StudyConfig, in its words, before anything
    loads (``rank-heads --prescreen-top-n 0`` was typer's range error; ``readiness`` had its own
    list of methods)."""
    text, value = BAD[field]
    with pytest.raises(ValueError) as error:
        StudyConfig(**{field: value})
    flag = FLAGS.get(field, field.replace("_", "-"))
    result = runner.invoke(app, [command, *ARGS[command], f"--{flag}", text])
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.strip()]
    assert line == f"error: emergence {command}: {error.value}"


def _spy_on_the_runner(monkeypatch) -> list:
    """``run_study`` records the config it receives (and runs nothing); the summary prints nothing."""
    import interp.cli.main_job as commands
    from interp.main_job import runner as main_runner

    received = []
    monkeypatch.setattr(main_runner, "run_study", lambda sources, tasks, config, **kw: received.append(config))
    monkeypatch.setattr(commands, "_print_summary", lambda report, out: None)
    return received


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
    with pytest.raises(ValueError, match=r"include=\['lable'\]: not fields of Toy"):
        with_field_options(clashing, Toy, include=["lable"])
    with pytest.raises(ValueError, match=r"give include or exclude, not both"):
        with_field_options(clashing, Toy, include=["loud"], exclude=["label"])

    def only_some(**fields):
        seen.append(Toy(**fields))

    some = typer.Typer()
    some.command()(with_field_options(only_some, Toy, include=("loud", "n_items"), panel="Toy settings"))
    some.command("other")(lambda: None)
    assert only_some.field_options == ("n_items", "loud")  # field order, whatever the order given
    ok = runner.invoke(some, ["only-some", "--n-items", "9"])
    assert ok.exit_code == 0, ok.output
    assert seen[-1] == Toy(n_items=9)
    assert "No such option: --label" in runner.invoke(some, ["only-some", "--label", "y"]).output
    assert "Toy settings" in runner.invoke(some, ["only-some", "--help"]).output

    def no_fields(name: str = "a"):
        pass

    with pytest.raises(ValueError, match=r"no_fields takes no \*\*fields to receive the options of Toy"):
        with_field_options(no_fields, Toy)
