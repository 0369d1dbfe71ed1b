"""A run saved as one file per step (issue 67 item 1): PyTorch Lightning ``.ckpt`` files, nanoGPT
``.pt`` files, plain state dicts in ``.pt``/``.bin``/``.safetensors``, the config given once.

The files are written here in the layouts the libraries document (Lightning is not installed
here: its checkpoint dict as its docs' "Contents of a checkpoint" lists it; nanoGPT is not a
package: its ``GPT`` model below is a line-for-line copy of the parts of Karpathy's ``model.py``
that compute logits, MIT licence, with the non-flash attention path so that its ``attn.bias``
mask buffer is saved as it is on older torch). Tiny random models; nothing trains here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.nn import functional as F

from interp.sources import LocalSuiteSource, open_source
from interp.sources.checkpoint_files import KEY_PREFIXES, map_state_dict, nanogpt_config
from interp.sources.checkpoint_integrity import checkpoint_table
from interp.sources.loading import CorruptCheckpointError
from tests.conftest import save_byte_tokenizer

TOKENS = torch.tensor([[1, 7, 3, 9, 1, 7, 3, 200, 5]])


def one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


# ----------------------------------------------------------------------------- nanoGPT's model.py


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config["n_embd"], 3 * config["n_embd"], bias=config["bias"])
        self.c_proj = nn.Linear(config["n_embd"], config["n_embd"], bias=config["bias"])
        self.n_head, self.n_embd = config["n_head"], config["n_embd"]
        size = config["block_size"]
        self.register_buffer("bias", torch.tril(torch.ones(size, size)).view(1, 1, size, size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config["n_embd"], 4 * config["n_embd"], bias=config["bias"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config["n_embd"], config["n_embd"], bias=config["bias"])

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config["n_embd"], bias=config["bias"])
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config["n_embd"], bias=config["bias"])
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        n = config["n_embd"]
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config["vocab_size"], n),
                wpe=nn.Embedding(config["block_size"], n),
                h=nn.ModuleList([Block(config) for _ in range(config["n_layer"])]),
                ln_f=LayerNorm(n, bias=config["bias"]),
            )
        )
        self.lm_head = nn.Linear(n, config["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight
        for p in self.parameters():  # nanoGPT's init draws normal(0, 0.02); wider here so that errors show
            nn.init.normal_(p, 0.0, 0.3)

    def forward(self, idx):
        pos = torch.arange(idx.size(1))
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def nanogpt_run(root: Path, bias: bool, compiled: bool, steps=(100, 200)) -> dict[int, GPT]:
    """nanoGPT's ``out/`` folder with ``ckpt_{N}.pt`` files as its train.py writes them."""
    root.mkdir(parents=True)
    args = dict(n_layer=2, n_head=4, n_embd=32, block_size=64, bias=bias, vocab_size=256, dropout=0.0)
    models = {}
    for i, step in enumerate(steps):
        torch.manual_seed(i)
        model = GPT(args).eval()
        state = model.state_dict()
        if compiled:  # train.py saves the compiled model's state dict: every key under _orig_mod.
            state = {f"_orig_mod.{k}": v for k, v in state.items()}
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model(TOKENS).sum().backward()
        optimizer.step()
        checkpoint = {
            "model": state,
            "optimizer": optimizer.state_dict(),
            "model_args": args,
            "iter_num": step,
            "best_val_loss": torch.tensor(2.5),
            "config": {"batch_size": 12, "learning_rate": 6e-4, "dataset": "shakespeare_char", "compile": compiled},
        }
        torch.save(checkpoint, root / f"ckpt_{step}.pt")
        models[step] = model
    save_byte_tokenizer(root)
    return models


@pytest.mark.parametrize(("bias", "compiled"), [(True, False), (False, True)])
def test_nanogpt_checkpoints_give_nanogpts_logits(tmp_path, monkeypatch, bias, compiled):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    models = nanogpt_run(tmp_path / "out", bias=bias, compiled=compiled)
    source = LocalSuiteSource(tmp_path / "out")
    assert source.available_steps() == [100, 200]
    assert source.revision(200) == "ckpt_200.pt"
    assert "step from each file's record" in source.layout
    for step, model in models.items():
        loaded = source.load(step, device="cpu")
        with torch.no_grad():
            want = model(TOKENS)
            got = loaded.model(TOKENS)
        assert loaded.revision == f"ckpt_{step}.pt"
        assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
    assert checkpoint_table(source)["status"].tolist() == ["searchable", "searchable"]


def test_nanogpt_config_is_gpt2_with_exact_gelu():
    config = nanogpt_config(dict(n_layer=6, n_head=6, n_embd=384, block_size=256, bias=False, vocab_size=65))
    assert (config["n_layer"], config["n_head"], config["n_embd"], config["n_positions"]) == (6, 6, 384, 256)
    assert config["activation_function"] == "gelu" and config["tie_word_embeddings"] is True
    assert config["eos_token_id"] is None  # 50256 is outside a 65-token vocabulary


# ----------------------------------------------------------------------------- Lightning


def gpt2_config(seed_layers: int = 2) -> dict:
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=256, n_embd=32, n_layer=seed_layers, n_head=4, n_positions=64, bos_token_id=None, eos_token_id=None
    ).to_dict()


def lightning_run(root: Path, steps=(500, 1000), hparams=None, last: bool = True) -> dict[int, torch.nn.Module]:
    """``lightning_logs/version_0/checkpoints/epoch={E}-step={N}.ckpt`` as ModelCheckpoint writes
    them: a LightningModule holding the transformers model as ``self.model``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = root / "lightning_logs" / "version_0" / "checkpoints"
    folder.mkdir(parents=True)
    config = gpt2_config()
    models = {}
    for epoch, step in enumerate(steps):
        torch.manual_seed(step)
        model = GPT2LMHeadModel(GPT2Config(**config)).eval()
        optimizer = torch.optim.Adam(model.parameters())
        checkpoint = {
            "epoch": epoch,
            "global_step": step,
            "pytorch-lightning_version": "2.4.0",
            "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
            "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": epoch + 1}}}},
            "callbacks": {
                "ModelCheckpoint{'monitor': None, 'mode': 'min'}": {
                    "best_model_score": None,
                    "best_model_path": "",
                    "dirpath": str(folder),
                }
            },
            "optimizer_states": [optimizer.state_dict()],
            "lr_schedulers": [],
            "hparams_name": "kwargs",
            "hyper_parameters": {"config": config, "lr": 3e-4} if hparams is None else hparams,
        }
        torch.save(checkpoint, folder / f"epoch={epoch}-step={step}.ckpt")
        models[step] = model
    if last:  # save_last=True: the last step once more
        torch.save(torch.load(folder / f"epoch={len(steps) - 1}-step={steps[-1]}.ckpt"), folder / "last.ckpt")
    save_byte_tokenizer(folder)
    return models


def test_lightning_checkpoints_load_with_the_config_from_their_hyperparameters(tmp_path, monkeypatch):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    models = lightning_run(tmp_path)
    version = tmp_path / "lightning_logs" / "version_0"
    with pytest.raises(ValueError) as err:  # the run's folder, not its checkpoints/ folder
        LocalSuiteSource(version)
    assert "nor checkpoint files" in one_line(err) and "version_0/checkpoints' (it holds checkpoint files)" in str(
        err.value
    )
    source = open_source(version / "checkpoints")
    assert source.available_steps() == [500, 1000]  # last.ckpt repeats step 1000 and is left out
    assert source.revision(500) == "epoch=0-step=500.ckpt"
    for step, model in models.items():
        with torch.no_grad():
            assert torch.allclose(source.load(step, device="cpu").model(TOKENS), model(TOKENS).logits, atol=1e-5)
    converted = json.loads((source._folders[500] / "source.json").read_text())
    assert converted["stripped"] == ["model."] and converted["kind"] == "lightning"


def test_a_config_object_in_the_hyperparameters_needs_allow_pickle(tmp_path, monkeypatch):
    from transformers import GPT2Config

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    models = lightning_run(tmp_path, hparams={"config": GPT2Config(**gpt2_config())}, last=False)
    folder = tmp_path / "lightning_logs" / "version_0" / "checkpoints"
    with pytest.raises(ValueError) as err:
        LocalSuiteSource(folder)
    text = one_line(err)
    assert "epoch=0-step=500.ckpt: refused by torch's weights-only unpickler" in text
    assert "GPT2Config" in text and "--allow-pickle" in text
    source = LocalSuiteSource(folder, allow_pickle=True)
    with torch.no_grad():
        assert torch.allclose(source.load(1000, device="cpu").model(TOKENS), models[1000](TOKENS).logits, atol=1e-5)


# ----------------------------------------------------------------------------- plain state dicts


def plain_run(root: Path, suffix: str, name: str = "step{N}") -> dict[int, torch.nn.Module]:
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel

    root.mkdir(parents=True)
    config = GPT2Config(**gpt2_config())
    config.save_pretrained(root)  # the run's config.json, given once
    save_byte_tokenizer(root)
    models = {}
    for step in (10, 20, 30):
        torch.manual_seed(step)
        model = GPT2LMHeadModel(config).eval()
        state = {k: v.clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        path = root / (name.replace("{N}", str(step)) + suffix)
        save_file(state, path) if suffix == ".safetensors" else torch.save(state, path)
        models[step] = model
    return models


@pytest.mark.parametrize("suffix", [".safetensors", ".bin", ".pt"])
def test_plain_state_dicts_with_the_run_config(tmp_path, monkeypatch, suffix):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    models = plain_run(tmp_path / "run", suffix)
    source = LocalSuiteSource(tmp_path / "run")
    assert source.available_steps() == [10, 20, 30]
    assert "step from the file names" in source.layout
    with torch.no_grad():
        assert torch.allclose(source.load(20, device="cpu").model(TOKENS), models[20](TOKENS).logits, atol=1e-5)


def test_step_pattern_names_the_files_and_a_file_without_a_step_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    plain_run(tmp_path / "run", ".pt", name="weights-{N}")
    with pytest.raises(ValueError) as err:
        LocalSuiteSource(tmp_path / "run")
    text = one_line(err)
    assert "weights-10.pt records no step" in text and "--step-pattern" in text and "epoch={E}-step={N}" in text
    source = LocalSuiteSource(tmp_path / "run", step_pattern="weights-{N}")
    assert source.available_steps() == [10, 20, 30]


def test_no_config_given_or_recorded_is_refused_naming_the_ways(tmp_path, monkeypatch):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    plain_run(tmp_path / "run", ".pt")
    config = tmp_path / "elsewhere" / "config.json"
    config.parent.mkdir()
    (tmp_path / "run" / "config.json").rename(config)
    with pytest.raises(ValueError) as err:
        LocalSuiteSource(tmp_path / "run")
    assert "record no transformers config" in one_line(err) and "--config" in str(err.value)
    assert LocalSuiteSource(tmp_path / "run", config=config.parent).available_steps() == [10, 20, 30]
    with pytest.raises(ValueError) as err:
        LocalSuiteSource(tmp_path / "run", config=tmp_path / "run" / "step10.pt")
    assert "is not a config.json file" in one_line(err) or "not readable JSON" in str(err.value)


def test_a_truncated_file_is_corrupt_with_its_reason_and_the_rest_load(tmp_path, monkeypatch):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    nanogpt_run(tmp_path / "out", bias=True, compiled=False, steps=(100, 200, 300))
    damaged = tmp_path / "out" / "ckpt_200.pt"
    damaged.write_bytes(damaged.read_bytes()[:5000])
    source = LocalSuiteSource(tmp_path / "out")
    table = checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "corrupt", "searchable"]
    assert table["detail"][1].startswith("ckpt_200.pt: not readable")
    assert source.searchable_steps() == [100, 300]
    with pytest.raises(CorruptCheckpointError) as err:
        source.load(200, device="cpu")
    assert "ckpt_200.pt: not readable" in one_line(err)


def test_identical_weights_in_two_files_are_duplicates(tmp_path, monkeypatch):
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    nanogpt_run(tmp_path / "out", bias=True, compiled=False, steps=(100, 200))
    again = torch.load(tmp_path / "out" / "ckpt_100.pt", weights_only=True)
    again["iter_num"], again["best_val_loss"] = 300, torch.tensor(1.0)  # other records, same weights
    torch.save(again, tmp_path / "out" / "ckpt_300.pt")
    source = LocalSuiteSource(tmp_path / "out")
    assert source.duplicate_groups() == [[100, 300]]


def test_a_file_or_a_folder_of_other_things_is_refused_saying_what_is_read(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.txt").write_text("hi")
    with pytest.raises(ValueError) as err:
        LocalSuiteSource(tmp_path / "notes")
    text = one_line(err)
    assert "found nothing" in text and "nor checkpoint files (.ckpt, .pt, .pth, .bin, .safetensors" in text
    (tmp_path / "ckpt_100.pt").write_bytes(b"x")
    with pytest.raises(ValueError) as err:
        open_source(tmp_path / "ckpt_100.pt")
    assert "is a file; give the folder that holds the run's checkpoints" in one_line(err)


# ----------------------------------------------------------------------------- the prefix table


def test_key_prefix_table_strips_what_trainers_add():
    from transformers import GPT2Config, GPT2LMHeadModel

    assert [p for p, _ in KEY_PREFIXES] == ["model.", "_orig_mod.", "module."]
    config = gpt2_config()
    state = GPT2LMHeadModel(GPT2Config(**config)).state_dict()
    wrapped = {f"module._orig_mod.model.{k}": v for k, v in state.items()}
    wrapped["module._orig_mod.criterion.weight"] = torch.ones(3)  # the trainer's own module
    mapped, stripped, notes = map_state_dict(wrapped, config)
    assert stripped == ["module.", "_orig_mod.", "model."]
    assert set(mapped) == set(state) - {"lm_head.weight"}  # the tie: not stored twice
    assert notes == ["1 tensors outside 'module._orig_mod.model.' left out"]
    # a model whose own names begin with "model." (Llama) keeps them
    from transformers import LlamaConfig, LlamaForCausalLM

    llama = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    llama_state = LlamaForCausalLM(llama).state_dict()
    mapped, stripped, _ = map_state_dict({f"model.{k}": v for k, v in llama_state.items()}, llama.to_dict())
    assert stripped == ["model."] and set(mapped) == set(llama_state)
    mapped, stripped, _ = map_state_dict(dict(llama_state), llama.to_dict())
    assert stripped == [] and set(mapped) == set(llama_state)


# ----------------------------------------------------------------------------- the command line


def test_curve_reads_plain_state_dicts_with_config_given_on_the_command_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    plain_run(tmp_path / "run", ".pt")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "run" / "config.json").rename(tmp_path / "cfg" / "config.json")
    args = ["curve", str(tmp_path / "run"), "--task", "token-repetition", "--n-prompts", "4"]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2
    (line,) = [s for s in refused.output.splitlines() if s.startswith("error:")]
    assert "record no transformers config" in line and "--config PATH" in line
    bad = CliRunner().invoke(app, [*args, "--config", str(tmp_path / "run" / "step10.pt")])
    assert bad.exit_code == 2 and "--config: config" in bad.output
    ok = CliRunner().invoke(app, [*args, "--config", str(tmp_path / "cfg" / "config.json")])
    assert ok.exit_code == 0, ok.output
    assert all(f" {step} " in ok.output for step in (10, 20, 30)), ok.output
