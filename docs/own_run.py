"""Your own training run, end to end (docs/guide.md, "Your own training run").

Trains a tiny GPT-2 (2 layers, d_model 64, 4 heads, a 13-token word-level tokenizer) with
transformers' ``Trainer`` on the repetition task's distribution (10 random digits, then the same
10 again), saving ``checkpoint-{N}/`` folders every 20 steps as any ``Trainer`` run does and the
tokenizer once, at the end, in the run folder. Then, in a few lines of emergence-lens, finds the
point of emergence of the repetition capability over those checkpoints, ranks the heads whose
attention pattern carries it, and reads the run's training loss from ``trainer_state.json``.

300 steps of batch 32, one thread; the whole script took 20 s of CPU time on 2 cores (docs/guide.md)::

    python docs/own_run.py results/own-run            # trains into results/own-run/run, then analyses it
    emergence curve results/own-run/run               # the same checkpoints from the command line
    emergence run results/own-run/run --out results/own-run/report

The seeds are fixed, so the run is the same on every machine with the same library versions; the
capability jumps from chance (about 0.1) to 1.0 between two checkpoints a few hundred steps in.
"""

from __future__ import annotations

import sys
from pathlib import Path

#: The tokenizer's words: three special tokens, then the ten digits.
WORDS = ["<pad>", "<bos>", "<eos>", *"0123456789"]
#: Digits per random string: the model sees them twice, as the repetition task's prompts do.
LENGTH = 10


def make_tokenizer():
    """A word-level tokenizer: one token per digit (split on spaces), 13 tokens in all."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>")


class RepeatedDigits:
    """``n`` training sequences of ``2 * LENGTH`` tokens: ``LENGTH`` random digits, then again.

    Items are ``{"input_ids": Int[Tensor, "pos"], "labels": Int[Tensor, "pos"]}`` (the model
    shifts the labels itself), as ``Trainer`` takes them.
    """

    def __init__(self, n: int, seed: int):
        import numpy as np

        self.strings = np.random.default_rng(seed).integers(0, 10, size=(n, LENGTH))

    def __len__(self) -> int:
        return len(self.strings)

    def __getitem__(self, i: int) -> dict:
        import torch

        ids = torch.tensor([WORDS.index(str(d)) for d in list(self.strings[i]) * 2])
        return {"input_ids": ids, "labels": ids.clone()}


def train(run: str | Path, steps: int = 300, save_steps: int = 20, seed: int = 0) -> Path:
    """Train the tiny GPT-2 with ``Trainer`` into ``run`` (``run/checkpoint-{N}/``, then the final
    model and the tokenizer in ``run`` itself); returns ``run``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    run = Path(run)
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, and on a shared machine by far
    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(WORDS), n_positions=32, n_embd=64, n_layer=2, n_head=4, bos_token_id=1, eos_token_id=2
    )
    args = TrainingArguments(
        output_dir=str(run),
        per_device_train_batch_size=32,
        max_steps=steps,
        learning_rate=3e-3,
        warmup_steps=10,
        logging_steps=10,
        save_steps=save_steps,
        report_to=[],
        use_cpu=True,
        seed=seed,
        disable_tqdm=True,
    )
    trainer = Trainer(model=GPT2LMHeadModel(config), args=args, train_dataset=RepeatedDigits(steps * 32, seed))
    trainer.train()
    trainer.save_model(str(run))  # the final model, as a Trainer run ends
    make_tokenizer().save_pretrained(run)  # the tokenizer, once, in the run folder
    return run


def analyse(run: str | Path):
    """The few lines of emergence-lens on the run: the point of emergence, the heads, the loss."""
    import emergence_lens as el

    source = el.open_source(run)  # checkpoint-{N}/ folders are recognised
    batch = el.RepetitionTask(n_prompts=64).build(source.tokenizer())
    point = el.find_emergence(source, batch)
    ranking = el.rank_heads_between(source, point.pre_step, point.post_step, batch)
    return point, ranking, source.loss_curve()


def main(argv: list[str]) -> None:
    out = Path(argv[0] if argv else "results/own-run")
    run = train(out / "run")
    point, ranking, loss = analyse(run)
    print(f"point of emergence: step {point.pre_step} -> {point.post_step} ({point.as_row()['search']})")
    print(ranking.heads.head(4).to_string(index=False))
    print(
        f"training loss: {loss['loss'].iloc[0]:.3f} nats at step {loss['step'].iloc[0]}, "
        f"{loss['loss'].iloc[-1]:.3f} at step {loss['step'].iloc[-1]}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
