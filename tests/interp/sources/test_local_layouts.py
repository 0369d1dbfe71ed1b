"""Local training runs as researchers have them (issue 57 items 1, 2 and 5; issue 56 item 5):
checkpoint folders named by transformers' Trainer, DeepSpeed/GPT-NeoX, Megatron and common
conventions or an explicit step pattern; the tokenizer saved once in the run folder; sharded
weights; pickle weights refused in one line unless allow_pickle / --allow-pickle; damaged
checkpoints named or marked in checkpoints.csv; the run's loss (trainer_state.json) as a table and
on the capability figure. Tiny random GPT-2s saved with save_pretrained; nothing trains here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from emergence_lens.cli import app
from interp.sources import LocalSuiteSource, open_source
from interp.sources.checkpoint_integrity import checkpoint_table, hazard_lines
from interp.sources.layouts import LAYOUTS, check_step_pattern, find_step_folders
from interp.sources.loading import CheckpointError, CorruptCheckpointError
from tests.conftest import save_byte_tokenizer, save_tiny_gpt2

runner = CliRunner()
TOKENS = torch.tensor([[1, 7, 3, 9, 1, 7, 3]])


def one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[int, Path]:
    """Tiny GPT-2s (seeds 0 to 5, standing for steps 10 to 60) and a byte tokenizer (at 0)."""
    base = tmp_path_factory.mktemp("models")
    saved = {step: save_tiny_gpt2(base / f"m{step}", seed=step // 10 - 1) for step in (10, 20, 30, 40, 50, 60)}
    save_byte_tokenizer(base / "tokenizer")
    return {**saved, 0: base / "tokenizer"}


def make_run(root: Path, models: dict, names: dict[int, str], tokenizer: str | None = "root") -> Path:
    """A run folder: ``names[step]/`` holding the model of that step (a Trainer checkpoint's extra
    files beside it), the tokenizer in the run folder (``"root"``), in every checkpoint
    (``"each"``) or nowhere (None)."""
    root.mkdir(parents=True)
    for step, name in names.items():
        shutil.copytree(models[step], root / name)
        torch.save({"output_dir": "run"}, root / name / "training_args.bin")  # as Trainer writes it
    if tokenizer == "root":
        shutil.copytree(models[0], root, dirs_exist_ok=True)
    elif tokenizer == "each":
        for name in names.values():
            shutil.copytree(models[0], root / name, dirs_exist_ok=True)
    return root


def hf_logits(folder: Path) -> torch.Tensor:
    from transformers import GPT2LMHeadModel

    with torch.no_grad():
        return GPT2LMHeadModel.from_pretrained(folder).eval()(TOKENS).logits


def bridge_logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model(TOKENS)


# ----------------------------------------------------------------------------- item 1: the layouts


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_known_layout_opens(tmp_path, models, layout):
    pattern = check_step_pattern(layout)
    names = {step: pattern.text.replace("{N:07d}", f"{step:07d}").replace("{N}", str(step)) for step in (10, 20)}
    run = make_run(tmp_path / "run", models, names)
    source = open_source(run)
    assert source.available_steps() == [10, 20]
    assert source.layout == layout
    assert [source.revision(s) for s in (10, 20)] == [names[10], names[20]]
    assert source.digest(20) != source.digest(10)  # training_args.bin is no weight file
    assert [p.name for p in source._require_weights(run / names[10], 10)] == ["model.safetensors"]


def test_megatron_names_have_seven_digits(tmp_path, models):
    folders, layout = find_step_folders(make_run(tmp_path / "run", models, {10: "iter_0000010", 20: "iter_0000020"}))
    assert (layout, sorted(folders)) == ("iter_{N:07d}", [10, 20])
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "iter_10").mkdir()  # not 7 digits: not Megatron's
    with pytest.raises(ValueError, match="has no checkpoint folders: found iter_10/"):
        find_step_folders(tmp_path / "odd")


def test_trainer_run_loads_like_the_hf_model(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "checkpoint-10", 20: "checkpoint-20"})
    source = LocalSuiteSource(run)
    checkpoint = source.load(20, device="cpu")
    assert (checkpoint.step, checkpoint.revision, checkpoint.commit) == (20, "checkpoint-20", None)
    torch.testing.assert_close(bridge_logits(checkpoint.model), hf_logits(models[20]), atol=1e-5, rtol=0)
    # the checkpoints hold no tokenizer: the run folder's is taken (a Trainer run saves it once, at the end)
    assert source._tokenizer_dir(10) == run
    assert source.tokenizer()("ab")["input_ids"] == [97, 98]


def test_explicit_step_pattern_and_its_refusals(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "epoch0-step10", 20: "epoch1-step20"})
    with pytest.raises(ValueError) as error:
        open_source(run)
    text = one_line(error)
    assert "has no checkpoint folders: found epoch0-step10/, epoch1-step20/" in text
    assert "tried " + ", ".join(LAYOUTS) in text and "--step-pattern" in text and "step_pattern=" in text
    with pytest.raises(ValueError, match=r"did you mean run/ \(epoch\{E\}-step\{N\}/ folders\)\?"):
        open_source(tmp_path, step_pattern="epoch{E}-step{N}")  # the folder above the run
    source = open_source(run, step_pattern="epoch{E}-step{N}")
    assert source.available_steps() == [10, 20] and source.revision(20) == "epoch1-step20"
    with pytest.raises(ValueError) as error:
        open_source(run, step_pattern="ckpt{N}")
    assert "found epoch0-step10/, epoch1-step20/; tried ckpt{N}" in one_line(error)
    for bad, why in (("epoch{E}", "no {N}"), ("{N}-{N}", "2 {N}"), ("step{N", "brace"), ("", "empty")):
        with pytest.raises(ValueError, match=why):
            check_step_pattern(bad)


def test_two_conventions_in_one_run_are_refused(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "checkpoint-10", 20: "global_step20"})
    with pytest.raises(ValueError) as error:
        open_source(run)
    text = one_line(error)
    assert "mixes checkpoint conventions: checkpoint-{N} (checkpoint-10/); global_step{N} (global_step20/)" in text
    assert "--step-pattern" in text
    assert open_source(run, step_pattern="global_step{N}").available_steps() == [20]
    clash = make_run(tmp_path / "clash", models, {10: "step-10", 20: "step-20"})
    shutil.copytree(clash / "step-10", clash / "step-010")
    with pytest.raises(ValueError, match="folders step-010, step-10 both name step 10"):
        open_source(clash)


def test_no_tokenizer_anywhere_names_where_it_looked(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "checkpoint-10", 20: "checkpoint-20"}, tokenizer=None)
    with pytest.raises(ValueError) as error:
        open_source(run).tokenizer()
    assert "has no tokenizer: looked in run/tokenizer/, run/ and its 2 checkpoint-{N}/ folders" in one_line(error)
    each = make_run(tmp_path / "each", models, {10: "checkpoint-10", 20: "checkpoint-20"}, tokenizer="each")
    assert open_source(each)._tokenizer_dir(20) == each / "checkpoint-20"


def test_sharded_weights_load_like_one_file(tmp_path, models):
    from transformers import GPT2LMHeadModel

    run = make_run(tmp_path / "run", models, {10: "checkpoint-10"})
    sharded = run / "checkpoint-20"
    GPT2LMHeadModel.from_pretrained(models[20]).save_pretrained(sharded, max_shard_size="40KB")
    shards = sorted(p.name for p in sharded.glob("*.safetensors"))
    assert len(shards) >= 2 and (sharded / "model.safetensors.index.json").is_file()
    source = open_source(run)
    assert len(source.file_digests(20)) == len(shards)
    assert checkpoint_table(source)["status"].tolist() == ["searchable", "searchable"]
    torch.testing.assert_close(
        bridge_logits(source.load(20, device="cpu").model), hf_logits(models[20]), atol=1e-5, rtol=0
    )


def test_weightless_folders_are_missing_with_the_reason(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "global_step10", 20: "global_step20"})
    (run / "global_step30").mkdir()
    torch.save({"module": {}}, run / "global_step30" / "mp_rank_00_model_states.pt")  # DeepSpeed, not converted
    source = open_source(run)
    assert source.available_steps() == [10, 20] and source.missing_steps() == [30]
    with pytest.raises(CheckpointError) as error:
        source.load(30)
    assert "(run/global_step30/: no weight files (found mp_rank_00_model_states.pt))" in one_line(error)
    assert checkpoint_table(source).set_index("step").loc[30, "status"] == "missing"
    only = tmp_path / "deepspeed"
    shutil.copytree(run / "global_step30", only / "global_step30")
    with pytest.raises(ValueError) as error:
        open_source(only)
    assert "none of its 1 global_step{N}/ folders holds Hugging Face weights" in one_line(error)


# ----------------------------------------------------------------------------- pickle weights (issue 56 item 5)


def pickle_run(tmp_path: Path, models: dict, extra: bool = False) -> Path:
    """Steps 10 and 20 as ``pytorch_model.bin`` only; with ``extra``, step 20's also holds a
    numpy array (an object torch's weights-only unpickler refuses)."""
    import numpy as np
    from safetensors.torch import load_file

    run = make_run(tmp_path / "pickled", models, {10: "checkpoint-10", 20: "checkpoint-20"})
    for step in (10, 20):
        folder = run / f"checkpoint-{step}"
        weights = load_file(folder / "model.safetensors")
        if extra and step == 20:
            weights["extra"] = np.zeros(3)
        torch.save(weights, folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    return run


def test_pickle_weights_refused_in_one_line_unless_allowed(tmp_path, models):
    run = pickle_run(tmp_path, models, extra=True)
    with pytest.raises(ValueError) as error:
        open_source(run).load(10)
    text = one_line(error)
    assert "step 10 has only pickle weights (pytorch_model.bin), refused" in text
    assert "allow_pickle (--allow-pickle)" in text and "weights_only" not in text and "training_args" not in text
    allowed = open_source(run, allow_pickle=True)
    checkpoint = allowed.load(10, device="cpu")
    torch.testing.assert_close(bridge_logits(checkpoint.model), hf_logits(models[10]), atol=1e-5, rtol=0)
    assert [p.name for p in allowed._require_weights(run / "checkpoint-10", 10)] == ["pytorch_model.bin"]
    with pytest.raises(CorruptCheckpointError) as error:  # torch's own refusal: one line, no advice
        allowed.load(20)
    text = one_line(error)
    assert "step 20: pytorch_model.bin: refused by torch's weights-only unpickler" in text
    assert "numpy" in text and "weights_only" not in text and "trust" not in text
    row = checkpoint_table(allowed).set_index("step").loc[20]
    assert row["status"] == "corrupt" and "weights-only unpickler" in row["detail"]


def test_every_loading_command_takes_allow_pickle_and_step_pattern(tmp_path, models):
    for command in ("run", "curve", "bisect", "rank-heads", "decompose", "readiness", "scrub"):
        result = runner.invoke(app, [command, "--help"], terminal_width=200)
        assert "--allow-pickle" in result.output and "--step-pattern" in result.output, command
        assert "--config" in result.output, command
    run = pickle_run(tmp_path, models)
    refused = runner.invoke(app, ["curve", str(run), "--task", "token-repetition", "--n-prompts", "4"])
    assert refused.exit_code == 2
    (line,) = [s for s in refused.output.splitlines() if s.startswith("error:")]
    assert "only pickle weights (pytorch_model.bin)" in line and "--allow-pickle" in line
    allowed = runner.invoke(
        app, ["curve", str(run), "--task", "token-repetition", "--n-prompts", "4", "--allow-pickle", "--steps", "20"]
    )
    assert allowed.exit_code == 0, allowed.output
    assert "token-repetition" in allowed.output and " 20 " in allowed.output
    bad = runner.invoke(app, ["bisect", str(run), "--step-pattern", "epoch{E}"])  # StudyConfig's check first
    assert bad.exit_code == 2 and "step_pattern='epoch{E}': must be text naming the step" in bad.output
    bad = runner.invoke(app, ["bisect", str(run), "--step-pattern", "step{N}-{N}"])  # then the pattern's own
    assert bad.exit_code == 2 and "--step-pattern: step pattern 'step{N}-{N}' has" in bad.output, bad.output
    renamed = tmp_path / "renamed"
    (renamed / "e0-s20").parent.mkdir()
    shutil.copytree(run / "checkpoint-20", renamed / "e0-s20")
    shutil.copytree(models[0], renamed, dirs_exist_ok=True)
    ok = runner.invoke(
        app,
        ["curve", str(renamed), "--task", "token-repetition", "--n-prompts", "4", "--allow-pickle"]
        + ["--step-pattern", "e{E}-s{N}"],
    )
    assert ok.exit_code == 0, ok.output


# ----------------------------------------------------------------------------- item 5: damaged checkpoints


def trainer_state(steps: list[int], loss_at=lambda s: 2.3 - s / 100) -> dict:
    history = [{"epoch": s / 100, "learning_rate": 1e-3 * (1 - s / 100), "loss": loss_at(s), "step": s} for s in steps]
    return {"global_step": steps[-1], "log_history": history + [{"step": steps[-1], "train_loss": 1.0}]}


def test_damaged_trainer_checkpoints_are_marked_never_loaded(tmp_path, models):
    run = make_run(tmp_path / "run", models, {s: f"checkpoint-{s}" for s in (10, 20, 30, 40, 50, 60)})
    # 30: killed while saving, model.safetensors half written; 40: no config.json; 50: another shape
    weights = run / "checkpoint-30" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (run / "checkpoint-40" / "config.json").unlink()
    config = json.loads((run / "checkpoint-50" / "config.json").read_text())
    (run / "checkpoint-50" / "config.json").write_text(json.dumps({**config, "n_head": 2}))
    source = open_source(run)
    assert source.available_steps() == [10, 20, 30, 40, 50, 60]
    table = checkpoint_table(source).set_index("step")
    assert table.loc[[10, 20, 60], "status"].tolist() == ["searchable", "searchable", "searchable"]
    assert table.loc[30, "status"] == "corrupt" and table.loc[30, "detail"].startswith("model.safetensors: truncated")
    assert table.loc[40, "status"] == "corrupt" and table.loc[40, "detail"].startswith("config.json: missing")
    assert table.loc[50, "detail"] == "config.json: another model's shape than step 60's (n_head 2 vs 4)"
    assert source.searchable_steps() == [10, 20, 60]
    lines = hazard_lines(table.reset_index(), "run")
    assert any(line.startswith("run: step 40 corrupt: config.json: missing") for line in lines)
    for step, text in ((30, "model.safetensors is corrupt (truncated"), (40, "config.json: missing")):
        with pytest.raises(CorruptCheckpointError) as error:
            source.load(step)
        assert text in one_line(error)
    with pytest.warns(RuntimeWarning, match=r"run step 50 \(checkpoint-50/\): config.json: another model's shape"):
        source.load(50, device="cpu")  # a whole model, asked for by step in Python: loaded, not silently
    result = runner.invoke(app, ["curve", str(run), "--steps", "50", "--task", "token-repetition"])
    assert result.exit_code == 2
    assert "error: emergence curve: run step 50: config.json: another model's shape than step 60's" in result.output


# ----------------------------------------------------------------------------- item 2: the loss


def test_loss_curve_from_trainer_state_and_a_state_cut_short(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "checkpoint-10", 20: "checkpoint-20"})
    (run / "checkpoint-10" / "trainer_state.json").write_text(json.dumps(trainer_state([5, 10])))
    state = json.dumps(trainer_state([5, 10, 15, 20]))
    (run / "checkpoint-20" / "trainer_state.json").write_text(state)
    loss = open_source(run).loss_curve()
    assert list(loss.columns) == ["step", "loss", "lr"] and loss["step"].tolist() == [5, 10, 15, 20]
    assert loss["loss"].tolist() == pytest.approx([2.25, 2.2, 2.15, 2.1], abs=1e-12)
    assert loss["lr"].tolist() == pytest.approx([9.5e-4, 9e-4, 8.5e-4, 8e-4], abs=1e-15)
    (run / "checkpoint-20" / "trainer_state.json").write_text(state[: len(state) // 2])  # killed while saving
    with pytest.warns(RuntimeWarning, match=r"checkpoint-20/trainer_state.json is not readable \(JSONDecodeError"):
        loss = open_source(run).loss_curve()
    assert loss["step"].tolist() == [5, 10]  # read from checkpoint-10's, named in the warning
    (run / "checkpoint-10" / "trainer_state.json").unlink()
    (run / "checkpoint-20" / "trainer_state.json").unlink()
    assert open_source(run).loss_curve() is None


def test_loss_curve_of_a_run_of_ours_is_its_loss_csv(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "step10", 20: "step20"})
    written = pd.DataFrame({"step": [1, 2, 3], "loss": [5.5, 5.25, 5.0], "lr": [1e-3, 1e-3, 9e-4]})
    written.to_csv(run / "loss.csv", index=False)  # what interp.sources.embedded writes beside its steps
    (run / "step20" / "trainer_state.json").write_text(json.dumps(trainer_state([10, 20])))  # not read
    pd.testing.assert_frame_equal(open_source(run).loss_curve(), written)


def test_capability_figure_draws_the_loss_in_a_panel_of_its_own():
    from interp.report.figures import capability_figure
    from interp.report.loss_axes import capability_with_loss

    emergence = pd.DataFrame(
        {"model": "run", "seed": 0, "step": [10, 20, 30, 40], "accuracy": [0.1, 0.1, 0.9, 1.0], "p_answer": 0.5}
    )
    points = pd.DataFrame([{"model": "run", "seed": 0, "pre_step": 20, "post_step": 30, "emerged": True}])
    loss = pd.DataFrame({"step": [5, 10, 15, 20, 25, 30, 35, 40], "loss": [2.3, 2.3, 2.2, 2.2, 1.6, 1.2, 1.1, 1.1]})
    fig = capability_with_loss(emergence, points, {("run", 0): loss})
    traces = [t for t in fig.data if t.yaxis == "y2"]
    assert [t.name for t in traces] == [
        "run seed 0: training loss (nats)",
        "run seed 0: point of emergence on the loss",
    ]
    assert list(traces[0].y) == loss["loss"].tolist() and list(traces[1].x) == [30] and list(traces[1].y) == [1.2]
    # below the capability panel (issue 71: drawn over the accuracy lines it hid them), on its step axis
    assert fig.layout.yaxis2.overlaying is None and fig.layout.yaxis2.domain[1] < fig.layout.yaxis.domain[0]
    assert fig.layout.xaxis.matches == "x2" and list(fig.layout.xaxis2.range) == [4.3, 40.7]  # data 5..40, 2 % pad
    assert not [t for t in fig.data if t.yaxis == "y2" and t.showlegend is not False]  # the run's one entry
    assert not [t for t in capability_figure(emergence, points).data if t.yaxis == "y2"]
    assert len(capability_with_loss(emergence, points, {}).data) == len(capability_figure(emergence, points).data)


# ----------------------------------------------------------------------------- issue 67 items 2 and 4


def test_a_run_level_config_serves_step_folders_without_one(tmp_path, models):
    run = make_run(tmp_path / "run", models, {10: "checkpoint-10", 20: "checkpoint-20", 30: "checkpoint-30"})
    shutil.copy(run / "checkpoint-10" / "config.json", run / "config.json")  # the run's config, saved once
    for name in ("checkpoint-10", "checkpoint-20", "checkpoint-30"):
        (run / name / "config.json").unlink()
    weights = run / "checkpoint-30" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-2000])  # really cut short
    source = LocalSuiteSource(run)
    table = checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "searchable", "corrupt"]
    assert table["detail"][2].startswith("model.safetensors: truncated")
    assert torch.allclose(bridge_logits(source.load(20, device="cpu").model), hf_logits(models[20]), atol=1e-5)
    # the step's own config wins: a step whose own config.json names another shape is marked
    other = json.loads((run / "config.json").read_text()) | {"n_layer": 3}
    (run / "checkpoint-20" / "config.json").write_text(json.dumps(other))
    assert LocalSuiteSource(run).corrupt_reason(20).startswith("config.json: another model's shape")
    # no run config: a folder without config.json keeps its cut-short reason
    (run / "config.json").unlink()
    assert (
        LocalSuiteSource(run).corrupt_reason(10) == "config.json: missing (the checkpoint was cut short while saving?)"
    )


def test_hub_branch_names_are_read_from_local_folders_with_their_tokens(tmp_path, models):
    names = {10: "step10-tokens20K", 20: "step20-tokens41K", 30: "step30-tokens61K"}
    source = LocalSuiteSource(make_run(tmp_path / "run", models, names))
    assert source.available_steps() == [10, 20, 30]
    assert [source.tokens_at(s) for s in (10, 20, 30)] == [20_000, 41_000, 61_000]
    assert checkpoint_table(source)["tokens"].tolist() == [20_000, 41_000, 61_000]
    assert source.revision(20) == "step20-tokens41K"
    staged = {10: "stage1-step10-tokens2B", 20: "stage1-step20-tokens4B"}
    assert LocalSuiteSource(make_run(tmp_path / "olmo2", models, staged)).tokens_at(20) == 4 * 10**9
    # plain step{N} folders stay the step{N} convention (no clash with the hub names)
    plain = LocalSuiteSource(make_run(tmp_path / "plain", models, {10: "step10", 20: "step20"}))
    assert plain.layout == "step{N}" and plain.tokens_at(10) is None
