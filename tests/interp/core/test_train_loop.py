"""The one training loop (interp/core/train_loop.py) under every caller: the bits of the loops it
replaced, and stop + resume = uninterrupted.

The digests below were recorded with the loops as they were before they became one (commit
bb97382, tests/interp/core/train_loop_scenarios.py, each scenario in a process with the kernel pins, one torch
thread) on the machine of :data:`REFERENCE_MACHINE`; they are asserted exactly wherever the pins
apply under the same environment key (checked on an AMD EPYC as well: the pins give the Intel
machine's bits there) and skipped, with the reason printed, elsewhere. The
embedded scenario's step-32 weights are the cached pinned quick suite's (``4d3d1eef…``), the
suite whose step 300 is docs/embedded.md's ``bd251a27c46af80c``. Stop + resume equal to the
uninterrupted run is asserted on every machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from interp.core import kernel_pins
from interp.core.train_loop import train_loop, warmup_constant
from interp.sources import embedded, environment

sys.path.insert(0, str(Path(__file__).parent))
import train_loop_scenarios as scenarios

#: Where :data:`REFERENCE` was recorded: the CPU model and the embedded trainer's environment key
#: (training text, torch and transformers versions, the kernel level: pinned AVX2).
REFERENCE_MACHINE = {"cpu_model": "Intel(R) Xeon(R) Processor", "environment_key": "66090669"}

#: sha256 of each scenario's files / weights / losses before the loops were merged.
REFERENCE = {
    "embedded_plain": {
        "step32/model.safetensors": "4d3d1eef554ebc93d2dd0d18ea42d28889a1339e69ac09f8b6dae06c9c2bf93a",
        "step32/optimizer.safetensors": "9fb59f3619db13686960b87f620afcc83be4c5531c1706512a45476797b06526",
        "step32/trainer_state.json": "04130da8ac2270818e556a9303766ae95463feafe0e4b752e1844fe0ca9c4590",
        "losses": "1c3b04aa736fe49f5cab960bdf08cd1ea3a8bc004f3d9a317465ac4a01b316dc",
    },
    "embedded_forced": {
        "step24/model.safetensors": "11a2a73d0fe3c7ec26a56d98be57ed74431e3ff805fa22dc4235655e2df88ad4",
        "step24/optimizer.safetensors": "a06c0c85a51a24ba317418c22958c3abe5ddb5ed59fc24e4aa3976f5b79df76c",
        "step24/trainer_state.json": "930b99c0037a6a7886a2098c6b91268f8c4a959bb18b56eace384bb597450eb8",
        "losses": "1ef14012773c5b5cb632236355021db3d31db065cc9fbd50b8a08c5991e90241",
    },
    "synthetic_linear_map": {
        "step60/model.safetensors": "55a97c8a89cc6f98ce458dc3dce80eb67347a8f8b49241297689129577e98786",
        "step60/optimizer.safetensors": "e980905a50e402fe5c990c8fd4ec614218017e616427a82d087cffa32bd9aeba",
        "step60/trainer_state.json": "d52ab265e6431870ddf421109007506838e1df38c6e35a39921264ca94e6357a",
        "weights": "a737e24fb51883e066198b47a01fe4bbf4eee99fa87001ba752abcac2c58a884",
        "metrics": "95f67df94424a3bd765ed5a4d5c09233cc1252468ccb79cf7122889023808f7a",
    },
    "synthetic_cellular_automata": {
        "step60/model.safetensors": "e47c13685e995bcc006e87ea143ff38a3c3d9e08cf588c6414fbeaaa74d6ade2",
        "step60/optimizer.safetensors": "1bc995497ab7e9dffa92d9be83d2eefa7bd1241f4c5dba986658565c4c7621a8",
        "step60/trainer_state.json": "8d3ce938fd88347384fcc31c780f98be264a21cb72bc721f22af5fbc9a33a64c",
        "weights": "c4bae1a864e6c77ed093274705e9336e2659bd3824764b2812d59287c145eb6b",
        "metrics": "7c45a30c3aa163d35036d1db5e5797c89b7f28c41b795bf06c3b456db2f318a2",
    },
    "synthetic_linear_map_bias": {
        "step60/model.safetensors": "01d4075192ed95ac4f55130b0b907cf50d73b982e60c9f56fef441f213489d52",
        "step60/optimizer.safetensors": "e3216c292ee145f991f7e85fe5ab990d4468917b0e738156fd7aa238fab2ceb0",
        "step60/trainer_state.json": "d52ab265e6431870ddf421109007506838e1df38c6e35a39921264ca94e6357a",
        "weights": "8500d9041b282bf0911bd0ff71f1c1ee0935604f1389d01a36fbc8d253c584f6",
        "metrics": "e9cf19b1984955baf74815f9a572dd8d203a12ed13241ce839074f4335b0c8aa",
    },
    "synthetic_ensemble": {
        "member0/weights": "3e9f7794520fa30b756e4ddc4c8f13edc3cc414727ec02249b10b66a82a3d36c",
        "member0/metrics": "5afe2dd1cebc945b056706c626dce4ad03bc4f6834a602e6502004c53546d100",
        "member1/weights": "4d06b21a8dc45f8885f5738f7b8f632eccf9cf790c45dcab67fcd36a197be7d3",
        "member1/metrics": "450aa2c6b647d5dc47351daf79b374f672238562d2a8fbf5b4b360adf2a3332e",
    },
    "pretraining_dyck": {
        "twin_state": "7738a388d459455d9f2a5195f921fac259c2436e6bce9505cba961418ca3ab3a",
        "pretrain_losses": "a92aa42d23d571f42a79e1364be70626165e98eea5231842a82cc65ac8bd23d0",
        "task_weights": "1995e0624b95c02072b5d463f23a03d4925c252967eec148e2e8c9f1fe6f5300",
        "task_metrics": "7470e7ad5d247876852018902159f507ae85fab87e5dff8e44e0125d7d3c76ca",
    },
    "pretraining_nca": {
        "twin_state": "dc35d8e59e18e43eec29420e868a160f73ccab7ca28b2e506563cb23566f7d73",
        "pretrain_losses": "bcc692e0e7de0ab6f168b86d8c2bf0d0a480b371317129e8bc32a74f48bb6437",
        "task_weights": "bd4fa807f3af35d91b1a6424654b68fc98406f37a2f511b67f72f134f8c0abb8",
        "task_metrics": "0088f7168385c4819853fc7bd9b7903bb06c5faffe53a4371d4e29984882c319",
    },
}


@pytest.fixture(scope="module")
def digests():
    """Every scenario, uninterrupted and stopped + resumed, in one pinned process."""
    return kernel_pins.run_pinned(scenarios.run_all, what="training-loop scenarios")


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_digests_equal_the_loops_before_the_merge(digests, name):
    # the pins give the reference machine's bits on any x86-64 CPU with AVX2 (an AMD EPYC too,
    # docs/embedded.md, Kernel pins); the environment key must match (same packages)
    here = environment.environment_key(embedded.QUICK)
    if not kernel_pins.pins_apply() or here != REFERENCE_MACHINE["environment_key"]:
        pytest.skip(
            f"digests recorded under environment key {REFERENCE_MACHINE['environment_key']} with the pins; "
            f"here {here}, pins apply: {kernel_pins.pins_apply()} (resume is still checked)"
        )
    assert digests[name] == REFERENCE[name]


@pytest.mark.parametrize("name", scenarios.RESUMABLE)
def test_stop_and_resume_equals_uninterrupted(digests, name):
    resumed, full = digests[f"{name}/resumed"], digests[name]
    assert set(resumed) == set(full) and len(full) >= 2
    assert resumed == full


def test_schedule_is_warmup_then_constant():
    lr_at = warmup_constant(1e-3, 4)
    assert [lr_at(t) for t in range(6)] == [1e-3 * 0.25, 1e-3 * 0.5, 1e-3 * 0.75, 1e-3, 1e-3, 1e-3]
    assert warmup_constant(0.5, 0)(0) == 0.5 and warmup_constant(0.5, 1)(0) == 0.5
    assert embedded.lr_at(embedded.QUICK, 7) == warmup_constant(embedded.QUICK.lr, embedded.QUICK.warmup_steps)(7)
    with pytest.raises(ValueError, match="warmup_steps=-1"):
        warmup_constant(1e-3, -1)


def _hand_loop(model, optimizer, batches, lr_at, clip, start, stop):
    """nanoGPT's loop written out: the reference the shared loop must equal."""
    for step in range(start, stop):
        x, y = batches[step]
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()


@pytest.mark.parametrize("clip", [None, 0.05])
def test_loop_equals_the_hand_written_loop_and_calls_back_in_order(clip):
    gen = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 5, generator=gen), torch.randn(8, 3, generator=gen)) for _ in range(6)]
    lr_at = warmup_constant(0.05, 3)

    def fresh():
        torch.manual_seed(1)
        model = torch.nn.Linear(5, 3)
        return model, torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.01)

    hand, hand_opt = fresh()
    _hand_loop(hand, hand_opt, batches, lr_at, clip, 0, 6)
    model, opt = fresh()
    calls = []
    train_loop(
        model,
        opt,
        start=0,
        stop=6,
        batch_at=lambda t: batches[t],
        loss_fn=lambda m, b, t: torch.nn.functional.mse_loss(m(b[0]), b[1]),
        lr_at=lr_at,
        clip=clip,
        at_step=lambda t: calls.append(("at", t)),
        after_step=lambda t, loss: calls.append(("after", t)),
    )
    assert torch.equal(model.weight, hand.weight) and torch.equal(model.bias, hand.bias)
    assert calls == [c for t in range(6) for c in (("at", t), ("after", t))] + [("at", 6)]
    assert opt.param_groups[0]["lr"] == lr_at(5)


def test_loop_refuses_a_stop_before_the_start():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="stop_step=2 is before the start step 3"):
        train_loop(
            model, torch.optim.AdamW(model.parameters()), start=3, stop=2, batch_at=None, loss_fn=None, lr_at=None
        )


def test_pretraining_checkpoints_need_a_folder():
    from synthetic.pretraining import PretrainSpec, pretrain_model

    with pytest.raises(ValueError, match="checkpoint_every > 0 needs a checkpoint_dir"):
        pretrain_model(torch.nn.Linear(2, 2), PretrainSpec(), 4, 2, 8, checkpoint_every=2)
