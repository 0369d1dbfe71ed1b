"""Spec files mean what a person reads (issue 56, items 1 and 2): one YAML 1.2 reader for suite and
sweep specs, leading zeros refused, names ASCII with look-alikes named."""

from __future__ import annotations

import pytest

from interp.core.spec_file import SpecError, parse_spec_text
from interp.sources.catalogue import ModelSize, SuiteConfig, load_suite_spec
from sweeps.configs import resolve_dataclass_config
from sweeps.spec import SweepSpec

SUITE = "sizes:\n  - {n_layers: 1, d_model: 16, n_heads: 2}\nseeds: [1, 2]\nsteps: 40\ncheckpoint_every: 8\n"
TRAIN = "synthetic.sweeps:train_runner"


def _suite(tmp_path, text, name="s.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return load_suite_spec(path)


def _sweep(tmp_path, text, name="sw.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return SweepSpec.from_file(path)


def test_the_shipped_specs_keep_their_digests():
    """The reader changed (PyYAML -> ruamel.yaml, YAML 1.2): the shipped suites' cache folders do not."""
    digests = {name: load_suite_spec(name).digest() for name in ("embedded", "embedded-quick", "population")}
    assert digests == {"embedded": "7cdb30f57c9a", "embedded-quick": "ad5aea722ce5", "population": "4eb73a59c175"}
    decoupled = load_suite_spec("population-decoupled")
    assert [s.rotary_dim for s in decoupled.sizes] == [8, 8, 8, 8]
    assert [s.rotary_dims for s in decoupled.sizes] == [8, 8, 8, 8]


def test_yaml_1_2_core_schema_values(tmp_path):
    text = "a: 0o10\nb: 1e-3\nc: off\nd: yes\ne: 0x10\nf: 10\ng: .inf\nh: ~\n"
    assert parse_spec_text(text, ".yaml") == {
        "a": 8,
        "b": 0.001,
        "c": "off",
        "d": "yes",
        "e": 16,
        "f": 10,
        "g": float("inf"),
        "h": None,
    }
    # the same text means the same in a suite spec and a sweep spec
    cfg = _suite(tmp_path, SUITE + "lr: 1e-3\nwarmup_steps: 0o10\n")
    assert cfg.lr == 0.001 and isinstance(cfg.lr, float) and cfg.warmup_steps == 8
    sweep = _sweep(tmp_path, "lr: 1e-3\nname: off\n")
    assert sweep.fixed == {"lr": 0.001} and sweep.name == "off"


def test_the_suite_hash_follows_the_values_a_person_reads(tmp_path):
    cfg = _suite(tmp_path, SUITE + "lr: 1e-3\n")
    by_hand = SuiteConfig(
        sizes=(ModelSize("neox-1l-16d-2h", n_layers=1, d_model=16, n_heads=2),),
        seeds=(1, 2),
        steps=40,
        checkpoint_every=8,
        lr=0.001,
    )
    assert cfg == by_hand and cfg.digest() == by_hand.digest()
    assert _suite(tmp_path, SUITE.replace("seeds: [1, 2]", "seeds: [7, 10]")).seeds == (7, 10)


@pytest.mark.parametrize(
    "change, message",
    [
        (
            ("seeds: [1, 2]", "seeds: [007, 010]"),
            (
                r"s.yaml:3: suite spec: seeds\[0\] is written '007', a number with a leading zero: YAML 1.2 reads it"
                r" as 7, YAML 1.1 \(PyYAML\) as octal 7; write 7, or 0o7 for octal"
            ),
        ),
        (("seeds: [1, 2]", "seeds: 010"), "seeds is written '010'.*reads it as 10, YAML 1.1 \\(PyYAML\\) as octal 8"),
        (("steps: 40", "steps: 0400"), "steps is written '0400'.*as 400, YAML 1.1 \\(PyYAML\\) as octal 256"),
        (("n_heads: 2}", "n_heads: 02}"), r"sizes\[0\].n_heads is written '02'"),
        (("steps: 40", "steps: 09"), "as 9, YAML 1.1 \\(PyYAML\\) as the text '09'; write 9$"),
        (("steps: 40", "steps: 40\nsteps: 48"), r"s.yaml:5:1: suite spec: found duplicate key \"steps\"; give each"),
        (
            ("steps: 40", "steps: 40\ndescription: 2024-01-01"),
            "description is written '2024-01-01', which YAML reads as a timestamp",
        ),
    ],
)
def test_a_suite_spec_that_can_be_read_two_ways_is_one_line(tmp_path, change, message):
    with pytest.raises(SpecError, match=message) as error:
        _suite(tmp_path, SUITE.replace(*change))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    "text, message",
    [
        ("seeds: [007, 010]\n", r"sw.yaml:1: sweep spec: seeds\[0\] is written '007'"),
        ("seeds: 010\n", "sw.yaml:1: sweep spec: seeds is written '010'.*as 10, YAML 1.1 \\(PyYAML\\) as octal 8"),
        ("steps: 0400\n", "steps is written '0400'.*as 400"),
        ("grid:\n  S: [8, 016]\n", r"grid.S\[1\] is written '016'.*as 16.*octal 14"),
    ],
)
def test_a_sweep_spec_has_the_same_rules(tmp_path, text, message):
    with pytest.raises(SpecError, match=message) as error:
        _sweep(tmp_path, text)
    assert "\n" not in str(error.value)


def test_a_look_alike_key_is_escaped_and_named(tmp_path):
    cyrillic_es = "\u0441"  # looks like a Latin c
    with pytest.raises(SpecError) as error:
        _suite(tmp_path, SUITE + f"n_{cyrillic_es}tx: 64\n")
    assert str(error.value).startswith(
        "suite spec: unknown key 'n_\\u0441tx': '\\u0441' is CYRILLIC SMALL LETTER ES, not ASCII (names in specs are"
        " ASCII letters, digits, '.', '_' and '-'); it resembles 'n_ctx'; valid: sizes, seeds, steps,"
    )
    with pytest.raises(SpecError, match=r"sizes\[0\]: unknown key 'n_h\\u0435ads'.*it resembles 'n_heads'"):
        _suite(tmp_path, SUITE.replace("n_heads", "n_h\u0435ads"))
    # a size name is a name: ASCII only (it names the run folder and the run)
    with pytest.raises(
        SpecError, match=r"sizes\[0\].name='neox-\\u0441': a name is ASCII.*'\\u0441' is CYRILLIC SMALL LETTER ES"
    ):
        _suite(tmp_path, SUITE.replace("{n_layers", f"{{name: neox-{cyrillic_es}, n_layers"))
    # a plain typo is listed with the valid keys, not guessed at
    with pytest.raises(SpecError, match="unknown key 'heads'; valid: sizes"):
        _suite(tmp_path, SUITE + "heads: 4\n")


def test_a_sweep_field_look_alike_is_named():
    from synthetic.training import TrainConfig

    with pytest.raises(SpecError, match=r"TrainConfig: unknown config field 'st\\u0435ps': .*resembles 'steps'"):
        resolve_dataclass_config(TrainConfig, {"st\u0435ps": 10})


def test_a_field_name_without_a_field_list_is_ascii():
    from sweeps.runners import plan_runs

    def runner(config):
        return {}, None

    with pytest.raises(SpecError, match=r"config field='\\u0455eed'"):
        plan_runs({"\u0455eed": 1}, runner)


def test_the_stored_sweep_spec_reads_back_to_the_same_values(tmp_path):
    from interp.core.spec_file import dump_spec_text

    spec = {"note": "1e-3", "code": "010", "flag": "off", "lr": 0.001, "grid": {"S": [8, 16]}, "name": "off"}
    assert parse_spec_text(dump_spec_text(spec), ".yaml") == spec
    assert list(parse_spec_text(dump_spec_text(spec), ".yaml")) == list(spec)


def test_look_alike_values_are_shown_escaped_and_digits_are_ascii(tmp_path):
    with pytest.raises(ValueError, match=r"keep_optimizer='l\\u0430st'; valid: every, last"):
        _suite(tmp_path, SUITE + "keep_optimizer: l\u0430st\n")  # a Cyrillic a
    # Arabic-Indic digits: int() reads them, a person reading the file may not; a range is ASCII digits
    with pytest.raises(ValueError, match=r"seeds='\\u0660..\\u0663'; give a list of seeds"):
        _suite(tmp_path, SUITE.replace("seeds: [1, 2]", "seeds: \u0660..\u0663"))
    assert _suite(tmp_path, SUITE.replace("seeds: [1, 2]", "seeds: 0..3")).seeds == (0, 1, 2, 3)


def test_one_set_of_rules_for_yaml_and_json_and_aliases(tmp_path):
    with pytest.raises(SpecError, match=r"s.json: suite spec: found duplicate key 'steps'; give each key once"):
        _suite(tmp_path, '{"steps": 40, "steps": 48}', name="s.json")
    # a node that holds itself (an alias of its own anchor) is checked once, not forever
    assert parse_spec_text("a: &x [1, *x]\n", ".yaml")["a"][0] == 1
    with pytest.raises(SpecError, match=r"<spec>:1: spec: a\[0\] is written '010'"):
        parse_spec_text("a: &x [010]\nb: *x\n", ".yaml")
