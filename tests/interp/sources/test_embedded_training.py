"""The embedded trainer's resumable checkpoints: exact continuation, loss curve, metadata.

A tiny config (1 layer, d_model 32, 16 steps of 4 x 32 bytes) keeps these tests to seconds.
"""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from interp.core.training_state import NotResumableError, has_training_state, read_training_state
from interp.sources import embedded, environment, interrupted
from tiny_suite import TINY, tiny_suite

CFG = tiny_suite(seed=3)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("tiny")
    losses = embedded.train_run(TINY, 3, CFG, out)
    return out, losses


def _weights(folder: Path) -> dict:
    return load_file(str(folder / "model.safetensors"))


def test_schedule_and_state_files(tiny_run):
    out, losses = tiny_run
    assert CFG.checkpoint_steps == (0, 1, 2, 4, 8, 16)
    for step in CFG.checkpoint_steps:
        assert has_training_state(out / f"step{step}")
        assert read_training_state(out / f"step{step}")["step"] == step
    state = read_training_state(out / "step8")
    assert state["trainer"]["threads"] == 1
    assert state["trainer"]["lr_next"] == pytest.approx(CFG.lr)  # warm-up (4 steps) is over
    assert not list(out.rglob("*.bin")) and not list(out.rglob("*.pt"))  # no pickle anywhere
    assert list(losses["step"]) == list(range(16))
    # the first step's loss is close to uniform over 256 bytes (ln 256 nats) and training lowers it
    assert losses["loss"].iloc[0] == pytest.approx(np.log(256), abs=0.3)
    assert losses["loss"].iloc[-4:].mean() < losses["loss"].iloc[0] - 0.5
    assert losses["lr"].iloc[0] == pytest.approx(CFG.lr / 4) and losses["lr"].iloc[-1] == CFG.lr


def test_resume_reproduces_later_checkpoint_bit_for_bit(tiny_run, tmp_path):
    out, losses = tiny_run
    resumed = embedded.train_run(TINY, 3, CFG, tmp_path, resume_from=out / "step4", stop_step=16, save_steps=[8, 16])
    for step in (8, 16):
        stored, again = _weights(out / f"step{step}"), _weights(tmp_path / f"step{step}")
        assert stored.keys() == again.keys()
        assert all(torch.equal(stored[k], again[k]) for k in stored)
    assert list(resumed["step"]) == list(range(4, 16))
    assert resumed["loss"].tolist() == losses["loss"].iloc[4:].tolist()
    # the optimizer moments come back exactly too
    a = load_file(str(out / "step16" / "optimizer.safetensors"))
    b = load_file(str(tmp_path / "step16" / "optimizer.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_training_text_is_the_recorded_shipped_text():
    """The training text is the package's own file, the recorded bytes (its sha256 is the suite
    key's ``corpus`` part), whatever interpreter runs: the documented suite's text."""
    import hashlib
    import lzma

    shipped = Path(environment.__file__).parents[1] / "data" / environment.TRAINING_TEXT["name"]
    whole = lzma.decompress(shipped.read_bytes())
    assert len(whole) == environment.TRAINING_TEXT["n_bytes"] == 4_000_000
    assert hashlib.sha256(whole).hexdigest() == environment.TRAINING_TEXT["sha256"]
    assert environment.TRAINING_TEXT["sha256"] == "7fb0c883bd8ae8a6745388c3a2d4db79c7ec6998d902576c818c8f61cbb3d196"
    assert environment.corpus_digest(CFG.corpus_bytes) == hashlib.sha256(whole[: CFG.corpus_bytes]).hexdigest()
    assert environment.training_text(1000).tobytes() == whole[:1000]
    assert whole.startswith(b'"""Record of phased-in incompatible language changes.')  # __future__.py, the first file
    for bad in (0, 4_000_001, 2.5, True):
        with pytest.raises(ValueError, match=r"corpus_bytes=.*use 1 \.\. 4000000"):
            environment.training_text(bad)


def test_damaged_training_text_is_named_not_trained_on(tmp_path, monkeypatch):
    """A shipped text whose bytes are not the recorded ones is refused with its path, never used."""
    import lzma
    from importlib import resources

    damaged = tmp_path / environment.TRAINING_TEXT["name"]
    damaged.write_bytes(lzma.compress(b"print('not the text')\n" * 1000))
    monkeypatch.setattr(resources, "files", lambda package: tmp_path)
    environment._training_text_bytes.cache_clear()
    try:
        with pytest.raises(environment.TrainingTextError, match=r"training-text-v1.xz is damaged: sha256 [0-9a-f]{16}"):
            environment.training_text(100)
        damaged.write_bytes(b"not xz at all")
        with pytest.raises(environment.TrainingTextError, match="cannot be read"):
            environment.training_text(100)
    finally:
        environment._training_text_bytes.cache_clear()


def test_batches_depend_on_step_and_seed_only():
    corpus = environment.training_text(CFG.corpus_bytes)
    first = embedded.batch_at(corpus, CFG, 3, 7)
    assert torch.equal(first, embedded.batch_at(corpus, CFG, 3, 7))
    assert not torch.equal(first, embedded.batch_at(corpus, CFG, 3, 8))
    assert not torch.equal(first, embedded.batch_at(corpus, CFG, 4, 7))
    assert first.shape == (CFG.batch_size, CFG.n_ctx)


def test_folder_without_state_is_not_resumable(tiny_run, tmp_path):
    out, _ = tiny_run
    for name in ("model.safetensors", "config.json"):
        (tmp_path / name).write_bytes((out / "step4" / name).read_bytes())
    with pytest.raises(NotResumableError, match="cannot be resumed"):
        embedded.train_run(TINY, 3, CFG, None, resume_from=tmp_path)


def test_environment_metadata_names_what_changes_weights():
    env = environment.environment(CFG)
    assert env["packages"]["torch"] == torch.__version__.split("+")[0] or env["packages"]["torch"].startswith(
        torch.__version__.split("+")[0]
    )
    assert len(env["corpus_sha256"]) == 64
    assert env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert env["python"].count(".") == 2  # the patch version, not only major.minor
    assert embedded.suite_dir(CFG).name.startswith(CFG.digest() + "-")


def test_loss_curve_figure_shows_loss_beside_capability(tiny_run):
    import pandas as pd

    from interp.report.figures import loss_curve_figure

    _, losses = tiny_run
    emergence = pd.DataFrame({"step": [0, 8, 16], "accuracy": [0.1, 0.2, 0.7]})
    points = pd.DataFrame({"pre_step": [8], "post_step": [16], "emerged": [True]})
    fig = loss_curve_figure(losses, emergence, points, smooth=4)
    names = [t.name for t in fig.data]
    assert names == ["loss (per step)", "loss (4-step mean)", "accuracy"]
    assert list(fig.data[0].y) == losses["loss"].tolist()
    assert fig.layout.shapes[0].x0 == 8 and fig.layout.shapes[0].x1 == 16  # the point of emergence shaded
    with pytest.raises(ValueError, match="expected 'step' and 'loss'"):
        loss_curve_figure(losses.rename(columns={"loss": "nats"}))


@pytest.mark.slow
def test_longer_suite_continues_a_shorter_cached_run_exactly(tmp_path):
    torch.set_num_threads(1)
    short = embedded.ensure_suite(CFG, root=tmp_path, n_jobs=1, progress=False)[0]
    longer_cfg = embedded.SuiteConfig(**{**CFG.__dict__, "steps": 24})
    (longer,) = embedded.ensure_suite(longer_cfg, root=tmp_path, n_jobs=1, progress=False)
    assert longer.parent != short.parent
    assert json.loads((longer / "suite.json").read_text())["continued_from"] == str(short)
    reference = tmp_path / "from-scratch"
    from interp.core.kernel_pins import run_pinned

    losses = run_pinned(embedded.train_run, TINY, 3, longer_cfg, reference)  # the workers' kernels
    for step in (16, 24):
        a, b = _weights(longer / f"step{step}"), _weights(reference / f"step{step}")
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert embedded.loss_curve(longer)["loss"].tolist() == losses["loss"].tolist()
    from interp.sources import LocalSuiteSource

    source = LocalSuiteSource(longer)
    assert source.available_steps() == list(longer_cfg.checkpoint_steps)
    assert source.final_digest() == source.digest(24) != source.digest(16)  # suite.json records the final model


@pytest.mark.slow
def test_a_killed_training_continues_from_its_last_checkpoint_exactly(tmp_path, monkeypatch, capfd):
    """A worker killed half-way (here SIGKILL at step 12; Ctrl-C does the same) leaves its folder;
    the next ensure_suite takes it over and trains on from step 8, its last checkpoint, to the
    weights and losses of a run never interrupted, and its progress (plain lines: standard error
    is not a terminal here) says so. A live worker's folder is left alone."""
    from interp.core.kernel_pins import WorkerDiedError, run_pinned

    torch.set_num_threads(1)
    suite = embedded.suite_dir(CFG, tmp_path)
    live = suite / f".tmp-neox-1l-32d-seed3-{os.getpid()}"  # this test's own process: alive
    live.mkdir(parents=True)
    monkeypatch.setenv(embedded._TEST_KILL_VAR, "12:SIGKILL")
    with pytest.raises(WorkerDiedError, match="at step 12"):
        embedded.ensure_suite(CFG, root=tmp_path, n_jobs=1, progress=False)
    monkeypatch.delenv(embedded._TEST_KILL_VAR)
    (left,) = [p for p in suite.glob(".tmp-*") if p != live]
    assert sorted(p.name for p in left.glob("step*")) == ["step0", "step1", "step2", "step4", "step8"]
    assert interrupted.PARTIAL_LOSS_FILE in os.listdir(left)
    capfd.readouterr()
    (run,) = embedded.ensure_suite(CFG, root=tmp_path, n_jobs=1, progress=True)
    err = capfd.readouterr().err
    assert "neox-1l-32d-seed3: continuing from step 8 of 16 (an interrupted run)" in err
    assert "\r" not in err and "\x1b" not in err  # no redrawn bar in a log
    assert err.splitlines()[-1].startswith("training suite ")
    assert " 16/16 steps (100 %)" in err.splitlines()[-1]
    meta = json.loads((run / "suite.json").read_text())
    assert meta["resumed_from_step"] == 8 and meta["continued_from"] is None
    assert sorted(p.name for p in suite.iterdir()) == [live.name, run.name]  # the dead worker's folder was taken over
    assert interrupted.PARTIAL_LOSS_FILE not in os.listdir(run)
    reference = tmp_path / "never-interrupted"
    losses = run_pinned(embedded.train_run, TINY, 3, CFG, reference)  # the workers' kernels
    for step in CFG.checkpoint_steps:
        a, b = _weights(run / f"step{step}"), _weights(reference / f"step{step}")
        assert all(torch.equal(a[k], b[k]) for k in a), step
    curve = embedded.loss_curve(run)
    assert curve["step"].tolist() == list(range(16)) and curve["loss"].tolist() == losses["loss"].tolist()


@pytest.mark.slow
def test_an_interrupt_stops_the_workers_at_once_and_says_where_each_run_continues(tmp_path):
    """Jupyter's interrupt: SIGINT to the calling process only (its workers do not get it). The
    caller stops its worker at once instead of waiting for the run, and says the step the run
    will continue from, which the worker's folder holds."""
    import signal
    import subprocess
    import sys
    import time

    long = embedded.SuiteConfig(**{**CFG.__dict__, "steps": 100_000})  # far longer than the test waits
    script = (  # CFG with 100 000 steps
        "import sys\n"
        "from interp.sources import embedded\n"
        "tiny = embedded.ModelSize('neox-1l-32d', n_layers=1, d_model=32, n_heads=4)\n"
        "cfg = embedded.SuiteConfig(sizes=(tiny,), seeds=(3,), steps=100_000, checkpoint_every=8, n_ctx=32,\n"
        "                           batch_size=4, warmup_steps=4, corpus_bytes=200_000)\n"
        "embedded.ensure_suite(cfg, root=sys.argv[1], n_jobs=1, progress=False)\n"
    )
    caller = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a terminal's default
    )
    suite, worker = embedded.suite_dir(long, tmp_path), None
    try:
        deadline = time.monotonic() + 240
        # until step 64 is resumable: its checkpoint and the loss rows kept after it (written in that order)
        while not any((found := interrupted.resumable_step(f)) and found[0] >= 64 for f in suite.glob(".tmp-*")):
            assert caller.poll() is None and time.monotonic() < deadline, caller.stderr.read() if caller.stderr else ""
            time.sleep(0.2)
        (left,) = suite.glob(".tmp-*")
        worker = int(left.name.rsplit("-", 1)[-1])
        caller.send_signal(signal.SIGINT)
        _, err = caller.communicate(timeout=600)  # a guard against a hang, not a timing assertion
    finally:  # whatever failed, leave no training behind
        caller.kill()
        if worker is not None and interrupted.process_alive(worker):
            os.kill(worker, signal.SIGKILL)
    assert caller.returncode != 0 and "KeyboardInterrupt" in err
    assert not interrupted.process_alive(worker)
    step = interrupted.resumable_step(left)[0]
    assert 64 <= step < 100_000  # stopped where it was, not after the ~100 000 steps the run had left
    assert not (suite / "neox-1l-32d-seed3").exists()  # the run was never finished and handed out
    assert f"training stopped; the next training of this suite continues neox-1l-32d-seed3 from step {step}" in err


@pytest.mark.slow
def test_iter_suite_hands_out_a_trained_run_while_the_last_one_trains(tmp_path, capsys):
    """A short run finished beside a long one is handed out at once, with the calling process set to
    the one idle core's thread count; the long run arrives after it, and the count is restored.
    (On a one-core machine no core is idle while the long run trains: both come at the end.)"""
    small = embedded.ModelSize("neox-1l-16d", n_layers=1, d_model=16, n_heads=4)
    cfg = embedded.SuiteConfig(
        sizes=(small, TINY),
        seeds=(3,),
        steps=8,
        checkpoint_every=8,
        n_ctx=32,
        batch_size=4,
        warmup_steps=4,
        corpus_bytes=200_000,
        size_steps=((TINY.name, 1500),),
    )
    threads, cores = torch.get_num_threads(), os.cpu_count() or 1
    spare = cores >= 2  # a core beside the one training the long run
    beside_training = max(1, min(threads, cores - 1)) if spare else threads
    seen = []
    for name, folder in embedded.iter_suite(cfg, root=tmp_path, n_jobs=2, progress=False):
        long_run = folder.parent / embedded.run_name(TINY, 3)
        seen.append((name, (long_run / "suite.json").exists(), torch.get_num_threads()))
        assert (folder / "suite.json").exists()
    assert seen == [
        (embedded.run_name(small, 3), not spare, beside_training),
        (embedded.run_name(TINY, 3), True, threads),
    ]
    assert torch.get_num_threads() == threads
    # cached now: both at once, in (size, seed) order, nothing trained
    assert [name for name, _ in embedded.iter_suite(cfg, root=tmp_path, progress=False)] == cfg.run_names()
    # the long run lost: the cached short run is handed out while it trains again, not after
    shutil.rmtree(folder)
    again = [
        (name, (folder / "suite.json").exists()) for name, _ in embedded.iter_suite(cfg, root=tmp_path, progress=False)
    ]
    assert again == [(embedded.run_name(small, 3), not spare), (embedded.run_name(TINY, 3), True)]
    # a removal cut short (suite.json kept, a checkpoint gone): named, trained again, never handed out as it is
    damaged = next(
        f for n, f in embedded.iter_suite(cfg, root=tmp_path, progress=False) if n == embedded.run_name(small, 3)
    )
    shutil.rmtree(damaged / "step0")
    capsys.readouterr()
    handed = dict(embedded.iter_suite(cfg, root=tmp_path, n_jobs=1, progress=False))
    assert f"{damaged}: damaged run folder (suite.json lists steps [0] without their step{{N}}/ folders)" in (
        capsys.readouterr().err
    )
    assert handed[embedded.run_name(small, 3)] == damaged and (damaged / "step0").is_dir()


def test_a_run_appears_whole_and_the_first_published_copy_is_kept(tmp_path):
    """Two processes sharing a cache (issue 55): a run trains in ``.tmp-<run>-<pid>`` and appears
    by one rename; when another process published the same run first, its folder is kept and
    this copy removed; a stray folder without suite.json under the run's name is replaced."""
    final = tmp_path / "neox-1l-32d-seed3"

    def trained(name: str, marker: str) -> Path:
        folder = tmp_path / name
        (folder / "step0").mkdir(parents=True)
        (folder / "suite.json").write_text(json.dumps({"steps": [0], "by": marker}))
        return folder

    first = trained(".tmp-neox-1l-32d-seed3-101", "first")
    assert interrupted.publish_run(first, final) == final and not first.exists()
    second = trained(".tmp-neox-1l-32d-seed3-102", "second")  # finished later, same run
    assert interrupted.publish_run(second, final) == final
    assert json.loads((final / "suite.json").read_text())["by"] == "first" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]  # nothing half-written left
    shutil.rmtree(final)
    (final / "step0").mkdir(parents=True)  # a folder under the run's name that holds no finished run
    third = trained(".tmp-neox-1l-32d-seed3-103", "third")
    interrupted.publish_run(third, final)
    assert json.loads((final / "suite.json").read_text())["by"] == "third"
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]
