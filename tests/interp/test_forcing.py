"""Forcing the pattern during training (interp/forcing.py, train_run(forcing=)): the bias makes a
forced head attend as its ideal pattern, other heads untouched; eager and SDPA attention agree; a
forced run resumed from a saved step equals the uninterrupted run bit for bit; forcing=None (and
a schedule whose β is 0 throughout) gives the plain trainer's bytes; eval_fn never sees the bias."""

from __future__ import annotations

import contextlib
import dataclasses
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp import forcing as forcing_module
from interp.forcing import Forcing, forced_attention
from interp.patching.ideal import ideal_pattern
from interp.sources import catalogue, embedded

TINY = dataclasses.replace(
    catalogue.QUICK, steps=24, checkpoint_every=8, seeds=(1,), warmup_steps=4, batch_size=4, n_ctx=48
)


def test_schedule():
    f = Forcing(((0, 1, "previous_token"),), beta=2.0, steps=3, anneal_steps=3)
    assert [f.beta_at(t) for t in range(8)] == [2.0, 2.0, 2.0, 1.5, 1.0, 0.5, 0.0, 0.0]
    assert f.last_forced_step == 5
    assert Forcing(((0, 0, "induction"),), steps=2, anneal_steps=0).beta_at(2) == 0.0


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(heads=((0, 0, "inductoin"),)), "'inductoin' is unknown; valid: previous_token"),
        (dict(heads=((0, 0),)), "must be (layer, head, pattern name)"),
        (dict(heads=((0, 0, "induction"),), beta=-1), "beta=-1 must be a finite number >= 0"),
        (dict(heads=((0, 0, "induction"),), eps=0), "eps=0 must be > 0"),
        (dict(heads=()), "at least one"),
    ],
)
def test_bad_forcing_is_one_line_error(kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Forcing(**kw)


def _model(impl: str):
    return embedded.build_model(catalogue.SMALL, dataclasses.replace(TINY, attn_implementation=impl), seed=3).eval()


def test_forced_head_attends_as_its_ideal_pattern():
    torch.manual_seed(0)
    tokens = torch.randint(0, 6, (3, 20))  # repeats: induction keys other than the first token
    forcing = Forcing(((0, 1, "previous_token"), (1, 2, "induction")), beta=4.0, steps=10, eps=1e-3)
    eager = _model("eager")
    with torch.no_grad():
        plain = eager(tokens, output_attentions=True).attentions
        with forced_attention(eager, forcing, tokens, step=0) as beta:
            forced = eager(tokens, output_attentions=True)
    assert beta == 4.0
    for layer, head, name in forcing.heads:
        ideal = ideal_pattern(name, tokens)
        # off-pattern keys get their weight multiplied by eps**beta = 1e-12: the pattern is the ideal one
        assert torch.allclose(forced.attentions[layer][:, head], ideal, atol=1e-6)
        assert not torch.allclose(plain[layer][:, head], ideal, atol=1e-2)
    assert torch.equal(forced.attentions[0][:, [0, 2, 3]], plain[0][:, [0, 2, 3]])  # layer 0, others untouched
    sdpa = _model("sdpa")
    with torch.no_grad(), forced_attention(sdpa, forcing, tokens, step=0):
        logits = sdpa(tokens).logits
    assert torch.allclose(logits, forced.logits, atol=1e-5)  # SDPA adds the same mask
    with torch.no_grad():  # the bias's hooks are removed on exit: the plain model again
        after = eager(tokens, output_attentions=True).attentions
    assert all(torch.equal(a, p) for a, p in zip(after, plain, strict=True))


def test_head_outside_model_refused():
    model = _model("sdpa")
    with (
        pytest.raises(ValueError, match="forcing head L2H0 is outside the model"),
        forced_attention(model, Forcing(((2, 0, "induction"),)), torch.zeros(1, 4, dtype=torch.long), 0),
    ):
        pass


def _weights(folder):
    return (folder / "model.safetensors").read_bytes()


FORCING = Forcing(((0, 0, "previous_token"), (1, 0, "induction")), beta=1.0, steps=10, anneal_steps=6)


def test_resume_equals_uninterrupted_bit_for_bit(tmp_path, one_torch_thread):
    full = embedded.train_run(catalogue.SMALL, 1, TINY, tmp_path / "a", forcing=FORCING, save_steps=[8, 24])
    first = embedded.train_run(catalogue.SMALL, 1, TINY, tmp_path / "b", forcing=FORCING, save_steps=[8], stop_step=8)
    rest = embedded.train_run(
        catalogue.SMALL, 1, TINY, tmp_path / "b", forcing=FORCING, save_steps=[24], resume_from=tmp_path / "b" / "step8"
    )
    assert _weights(tmp_path / "a" / "step24") == _weights(tmp_path / "b" / "step24")
    assert _weights(tmp_path / "a" / "step8") == _weights(tmp_path / "b" / "step8")
    assert full["loss"].tolist() == first["loss"].tolist() + rest["loss"].tolist()


def test_plain_bytes_and_bias_moves_weights(tmp_path, one_torch_thread, monkeypatch):
    seen = []
    inside = []  # one entry while the trainer is inside forced_attention (whose exit removes its hooks)

    @contextlib.contextmanager
    def watched(*args, _original=forced_attention, **kwargs):
        with _original(*args, **kwargs) as beta:
            inside.append(True)
            try:
                yield beta
            finally:
                inside.pop()

    monkeypatch.setattr(forcing_module, "forced_attention", watched)

    def eval_fn(model, step):  # capability is measured without the bias
        seen.append(not inside)

    plain = embedded.train_run(catalogue.SMALL, 1, TINY, tmp_path / "plain", save_steps=[24])
    off = embedded.train_run(
        catalogue.SMALL,
        1,
        TINY,
        tmp_path / "off",
        save_steps=[24],
        forcing=dataclasses.replace(FORCING, steps=0, anneal_steps=0),
    )
    embedded.train_run(
        catalogue.SMALL, 1, TINY, tmp_path / "forced", save_steps=[8, 24], forcing=FORCING, eval_fn=eval_fn
    )
    assert _weights(tmp_path / "plain" / "step24") == _weights(tmp_path / "off" / "step24")
    assert plain["loss"].tolist() == off["loss"].tolist()
    assert _weights(tmp_path / "plain" / "step24") != _weights(tmp_path / "forced" / "step24")
    assert seen == [True, True]


@pytest.mark.slow
def test_forcing_none_matches_the_cached_suite(quick_suite, one_torch_thread):
    """The plain trainer's bytes: a run trained with forcing=None reproduces the quick suite's step
    100 (trained by ensure_suite in this session, by the code under test; the cache key holds the
    kernel level, so the suite was trained with this code path's settings)."""
    from interp.sources.catalogue import run_name, suite_dir

    _, root = quick_suite
    folder = suite_dir(catalogue.QUICK, root=root) / run_name(catalogue.SMALL, 1)
    assert (folder / "suite.json").is_file(), folder
    import tempfile
    from pathlib import Path

    from interp.core import kernel_pins

    with tempfile.TemporaryDirectory() as tmp:
        # in a process with the suite's kernel pins, as ensure_suite trains (a test process may run others)
        kernel_pins.run_pinned(
            embedded.train_run,
            catalogue.SMALL,
            1,
            catalogue.QUICK,
            Path(tmp),
            stop_step=100,
            save_steps=[100],
            forcing=None,
        )
        assert _weights(Path(tmp) / "step100") == _weights(folder / "step100")
