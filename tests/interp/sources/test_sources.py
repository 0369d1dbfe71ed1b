"""Source names, device choice, and two checkpoints of one source held at once."""

from __future__ import annotations

import pytest
import torch

from interp.core.devices import check_device, choose_device
from interp.sources import check_one_run, check_source_name


def test_two_checkpoints_of_one_source_held_at_once_stay_correct(tiny_local_suite):
    """Loading a second step boots a new bridge; the first one keeps its own weights."""
    from interp.sources import LocalSuiteSource

    tokens = torch.arange(12).reshape(2, 6)
    source = LocalSuiteSource(tiny_local_suite)
    first = source.load(0, device="cpu")
    second = source.load(200, device="cpu")
    with torch.inference_mode():
        held, other = first.model(tokens), second.model(tokens)
    fresh = LocalSuiteSource(tiny_local_suite).load(0, device="cpu")
    with torch.inference_mode():
        assert torch.equal(held, fresh.model(tokens))  # the first checkpoint was not overwritten
    assert (held - other).abs().max() > 1e-3  # and the two really differ
    assert first.digest != second.digest


def test_device_names_checked_before_torch():
    assert check_device(None) == "auto" and check_device("cuda:1") == "cuda:1"
    for bad in ("gpu", "CUDA", "cuda:", "cuda:x", "tpu"):
        with pytest.raises(ValueError, match=f"device '{bad}' is not valid: use auto, cpu, cuda or cuda:N"):
            check_device(bad)
    assert choose_device("cpu") == "cpu"
    assert choose_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")


def test_cuda_on_a_cpu_only_torch_is_one_line(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match=r"device 'cuda': no CUDA GPU is usable here \(torch .*\)"):
        choose_device("cuda")
    assert choose_device("auto") == "cpu"


def test_source_names(tmp_path):
    assert check_source_name("EleutherAI/pythia-70m-seed3") == 1
    assert check_source_name("embedded") == 6 and check_source_name("embedded-quick") == 2
    assert check_source_name(str(tmp_path)) == 1
    with pytest.raises(ValueError, match=r"local suite folder '\./nope' does not exist"):
        check_source_name("./nope")
    with pytest.raises(ValueError, match="unknown checkpoint source 'gpt2'"):
        check_source_name("gpt2")
    with pytest.raises(
        ValueError,
        match="x takes one run, and 'embedded-quick' names 2: use one of "
        "embedded-quick/neox-2l-64d-seed1, embedded-quick/neox-2l-64d-seed2",
    ):
        check_one_run("embedded-quick", "x")


def test_ready_sources_hand_out_local_first_and_open_sources_keeps_the_names_order(
    quick_suite, tiny_local_suite, monkeypatch
):
    """A local suite is ready at once and comes first; the embedded run (cached here) follows;
    ``with_positions`` says where each belongs, and ``open_sources`` returns the names' order."""
    from interp.sources import ReadySources, open_sources

    folders, root = quick_suite
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(root))
    names = ["embedded-quick", str(tiny_local_suite), f"embedded-quick/{folders[1].name}"]
    ready = ReadySources(names, progress=False)
    assert len(ready) == 4
    arrived = [(position, str(source.root)) for position, source in ready.with_positions()]
    assert arrived == [(2, str(tiny_local_suite)), (0, str(folders[0])), (1, str(folders[1])), (3, str(folders[1]))]
    assert [str(source.root) for source in open_sources(names, progress=False)] == [
        str(folders[0]),
        str(folders[1]),
        str(tiny_local_suite),
        str(folders[1]),
    ]


def test_a_stopped_main_job_closes_its_sources_at_once(tiny_local_suite, monkeypatch):
    """Ctrl-C (or an error) while a run is analysed closes the sources' generator before the
    exception leaves :func:`interp.main_job.runner.run_study`: an embedded suite's training workers stop
    then, not when the traceback is dropped (Jupyter keeps the last one)."""
    from interp.main_job import runner
    from interp.sources import LocalSuiteSource, door
    from interp.tasks import RepetitionTask

    closed = []

    class StillTraining:  # door.ReadySources as the local executor uses it
        def __init__(self, names, progress=True, **options):
            self.names = names

        def with_positions(self):
            try:
                for i, _ in enumerate(self.names):
                    yield i, LocalSuiteSource(tiny_local_suite, model_id=f"suite-seed{i}")
            finally:
                closed.append(True)  # where iter_suite stops its workers

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(door, "ReadySources", StillTraining)
    monkeypatch.setattr(runner, "analyse_run", interrupted)
    with pytest.raises(KeyboardInterrupt) as caught:
        runner.run_study(
            ["test/suite-seed0", "test/suite-seed1"], RepetitionTask(n_prompts=4, length=4), progress=False
        )
    assert closed == [True] and caught.traceback  # closed although the traceback (and its frames) live on


@pytest.mark.slow
def test_main_job_reports_runs_in_the_order_of_the_names_whatever_their_arrival(tiny_local_suite, monkeypatch):
    """Sources that arrive late-first (as trained runs do) are reported in their named positions."""
    from interp.core.settings import StudyConfig
    from interp.main_job.runner import run_study
    from interp.sources import LocalSuiteSource, door
    from interp.tasks import RepetitionTask

    class LateFirst:  # door.ReadySources handing the last name's run out first
        def __init__(self, names, progress=True, **options):
            self.sources = [LocalSuiteSource(tiny_local_suite, model_id=f"suite-seed{i}") for i in range(len(names))]

        def with_positions(self):
            return reversed(list(enumerate(self.sources)))

    monkeypatch.setattr(door, "ReadySources", LateFirst)
    names = [f"test/suite-seed{i}" for i in range(3)]
    config = StudyConfig(device="cpu", decompose=False, scores=False)
    report = run_study(names, RepetitionTask(n_prompts=4, length=4), config, progress=False)
    assert [(run.model_id, run.seed) for run in report.runs] == [
        ("suite-seed0", 0),
        ("suite-seed1", 1),
        ("suite-seed2", 2),
    ]
    assert report.provenance["settings"]["sources"] == names


def test_a_run_folder_cut_short_is_named_and_removed_never_trusted(tmp_path, capsys):
    """:func:`interp.sources.local.finished_run`: whole -> True; suite.json listing a step whose folder
    is gone (a removal cut short) or unreadable -> named on stderr, removed, False; no suite.json
    (a run still training) -> False, left in place."""
    import json

    from interp.sources.local import finished_run

    def run(name: str, steps: list[int], meta: str | None = None):
        folder = tmp_path / name
        for s in steps:
            (folder / f"step{s}").mkdir(parents=True)
        if meta is not None:
            (folder / "suite.json").write_text(meta)
        return folder

    whole = run("whole", [0, 8], json.dumps({"steps": [0, 8]}))
    assert finished_run(whole) and capsys.readouterr().err == ""
    cut = run("cut", [8], json.dumps({"steps": [0, 8]}))
    assert not finished_run(cut) and not cut.exists()
    assert capsys.readouterr().err.startswith(f"{cut}: damaged run folder (suite.json lists steps [0] without")
    garbled = run("garbled", [0], '{"steps": [0, "eight"]}')
    assert not finished_run(garbled) and not garbled.exists()
    assert "unreadable suite.json" in capsys.readouterr().err
    training = run("training", [0])
    assert not finished_run(training) and training.is_dir() and capsys.readouterr().err == ""
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".drop-")]  # removed, not renamed only


def test_the_package_offers_each_name_from_the_room_that_defines_it():
    """``interp.sources`` reads each name of its table from one room (no search across modules), the
    room that defines it (no re-export in between), and ``import interp.sources.catalogue`` (the
    command line's source names) imports no torch."""
    import inspect
    import re
    import subprocess
    import sys
    from pathlib import Path

    import interp.sources as sources

    for name, room in sources.WHERE.items():
        value = getattr(sources, name)
        module = f"interp.sources.{room}"
        assert value is getattr(sys.modules[module], name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__module__ == module, name
        else:  # a constant: assigned in its room's own text
            assert re.search(rf"^{name}\b[^\n]*=", Path(sys.modules[module].__file__).read_text(), re.M), name
    with pytest.raises(AttributeError, match="has no attribute 'SUITE_PREFIX'"):  # a catalogue name not offered
        sources.SUITE_PREFIX  # noqa: B018
    code = "import sys, interp.sources.catalogue, interp.sources; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_near_names_are_answered_with_did_you_mean():
    """A name one or two edits from a shipped one is a typo, not a hub repo to fetch (issue 71); a
    short or distant name gets the valid forms; a real hub id or Pythia id passes."""
    from interp.core.near_names import edit_distance, near_name
    from interp.sources.door import check_source_name

    assert [
        edit_distance(*pair) for pair in [("embeded", "embedded"), ("kitten", "sitting"), ("", "ab"), ("a", "a")]
    ] == [
        1,
        3,
        2,
        0,
    ]
    assert near_name("abc", ["abd"]) is None  # a third of a short name is no typo
    assert near_name("embedded", ["embedded"]) is None
    with pytest.raises(ValueError, match=r"did you mean 'embedded/neox-2l-64d-seed0'\? \(emergence list-models"):
        check_source_name("embeded/neox-2l-64d-seed0")
    with pytest.raises(ValueError, match=r"did you mean 'suite:population'\?"):
        check_source_name("suit:population")
    with pytest.raises(ValueError, match=r"in 'embedded'; did you mean 'embedded/neox-2l-128d-seed2'\? valid: "):
        check_source_name("embedded/neox-2l-128d-sed2")
    with pytest.raises(ValueError, match=r"file; did you mean 'population-decoupled'\?$"):
        check_source_name("suite:population-decupled")
    assert check_source_name("EleutherAI/pythia-70m-seed3") == 1 and check_source_name("someone/embedded-runs") == 1


@pytest.mark.slow
def test_the_units_line_starts_with_the_analysis_not_with_the_training(tiny_local_suite, monkeypatch, capsys):
    """While the sources train (here a stand-in that prints where the training would end), no
    units line is drawn; it starts when the first run is handed out, so its rate and time left
    are the analysis's (issue 71: "0/6" for 71 min, then an ETA of 6 h for 6 min of work), and,
    standard error not being a terminal here, it is plain lines."""
    import sys

    from interp.core.settings import StudyConfig
    from interp.main_job.runner import run_study
    from interp.sources import LocalSuiteSource, door
    from interp.tasks import RepetitionTask

    class TrainedFirst:  # door.ReadySources: the training comes first, then the runs
        def __init__(self, names, progress=True, **options):
            self.names = names

        def with_positions(self):
            print("TRAINING ENDS HERE", file=sys.stderr)
            for i, _ in enumerate(self.names):
                yield i, LocalSuiteSource(tiny_local_suite, model_id=f"suite-seed{i}")

    monkeypatch.setattr(door, "ReadySources", TrainedFirst)
    names = [f"test/suite-seed{i}" for i in range(2)]
    config = StudyConfig(device="cpu", decompose=False, scores=False)
    run_study(names, RepetitionTask(n_prompts=4, length=4), config)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    lines = [line for line in err.splitlines() if line.startswith(("units:", "TRAINING"))]
    assert lines[0] == "TRAINING ENDS HERE" and lines[1] == "units: 0/2 units (0 %), 00:00 elapsed"
    assert lines[-1].startswith("units: 2/2 units (100 %)")
