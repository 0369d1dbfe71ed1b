"""Head count against head size (issue 52, item 1b): a suite size takes ``d_head`` apart from
``d_model`` (built as Phi: GPT-NeoX ties the head size to d_model / n_heads), its checkpoints load
back through LocalSuiteSource -> TransformerBridge with patterns of the right shape, logits equal to
the HF model's, and a patched pattern that moves the metric; the older suites keep their folders."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from analyses.results import REGISTRY
from interp.population import kept as pop
from interp.population.tables import SPEC_REFERENCES
from interp.sources.catalogue import load_suite_spec, suite_config_from_spec

SPEC = "population-heads-dhead"


def test_the_shipped_spec_crosses_heads_with_head_size_and_d_head_reaches_the_model():
    from interp.sources import embedded
    from interp.sources.suites import n_parameters

    cfg = load_suite_spec(SPEC)
    assert [(s.name, s.n_heads, s.d_head, s.rotary_dims, cfg.steps_for(s)) for s in cfg.sizes] == [
        ("phi-2l-64d-8h-dh16-r8", 8, 16, 8, 8000),
        ("phi-2l-64d-8h-dh8-r8", 8, 8, 8, 8000),
        ("phi-2l-64d-4h-dh8-r8", 4, 8, 8, 8000),
        ("phi-2l-64d-4h-dh16-r8", 4, 16, 8, 4000),
    ]
    assert cfg.seeds == tuple(range(24)) and cfg.checkpoint_every == 100 and cfg.keep_optimizer == "last"
    assert len(cfg.run_names()) == 96
    for size in cfg.sizes:  # read from the built model, not from the size
        model = embedded.build_model(size, cfg, seed=0)
        attn = model.model.layers[0].self_attn
        width = size.n_heads * size.d_head
        assert model.config.model_type == "phi" and model.config.hidden_size == 64
        assert tuple(attn.q_proj.weight.shape) == tuple(attn.k_proj.weight.shape) == (width, 64)
        assert tuple(attn.dense.weight.shape) == (64, width)
        assert attn.head_dim == size.d_head and attn.rotary_ndims == 8
        assert model.model.rotary_emb.inv_freq.numel() == 4  # 8 rotary dims = 4 frequencies per head
        assert n_parameters(size) == sum(p.numel() for p in model.parameters())  # the dry run's disk estimate
    # registered: kept curves on 256 prompts, a `make results` entry, the 4-head d_head-16 reference arm
    assert pop.SPECS[SPEC] == (pop.DATA / SPEC, 256)
    entry = {a.name: a for a in REGISTRY}["population_heads_dhead"]
    assert (entry.module, entry.args) == ("analyses.population_heads_dhead", ("--update-docs",))
    assert SPEC_REFERENCES[SPEC] in {s.name for s in cfg.sizes}


def test_older_suites_keep_their_digests_and_d_head_is_hashed_when_given():
    digests = {
        name: load_suite_spec(name).digest()
        for name in ("embedded", "embedded-quick", "population", "population-decoupled")
    }
    assert digests == {
        "embedded": "7cdb30f57c9a",
        "embedded-quick": "ad5aea722ce5",
        "population": "4eb73a59c175",
        "population-decoupled": "788016c980e0",
    }
    assert all(s.head_dim is None and s.architecture == "gpt_neox" for s in load_suite_spec("population").sizes)
    base = {"seeds": 2, "checkpoint_every": 100, "steps": 100}
    neox = suite_config_from_spec({**base, "sizes": [{"n_layers": 2, "d_model": 64, "n_heads": 4, "name": "a"}]})
    phi = suite_config_from_spec(
        {**base, "sizes": [{"n_layers": 2, "d_model": 64, "n_heads": 4, "d_head": 16, "name": "a"}]}
    )
    assert neox.sizes[0].d_head == phi.sizes[0].d_head == 16
    assert neox.digest() != phi.digest()  # same numbers, another architecture: another cache folder
    # d_head apart from d_model: 64 does not divide into 6 heads, yet 6 heads of 8 dims are a size
    odd = suite_config_from_spec({**base, "sizes": [{"n_layers": 1, "d_model": 64, "n_heads": 6, "d_head": 8}]})
    assert (odd.sizes[0].name, odd.sizes[0].d_head, odd.sizes[0].rotary_dims) == ("phi-1l-64d-6h-dh8", 8, 2)


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"d_head": 0}, r"^suite spec: sizes\[0\]\.d_head=0 must be an integer >= 2$"),
        ({"d_head": "16"}, r"^suite spec: sizes\[0\]\.d_head='16' must be an integer >= 2$"),
        ({"d_head": 4}, r"^suite spec: sizes\[0\]\.d_head=4 leaves Pythia's 25 % = 1 rotary dimensions per head"),
        ({"d_head": 8, "rotary_dim": 10}, r"^suite spec: sizes\[0\]\.rotary_dim=10 must be even and at most d_head=8 "),
    ],
)
def test_a_d_head_that_cannot_be_is_refused_in_one_line(extra, message):
    spec = {"sizes": [{"n_layers": 2, "d_model": 64, "n_heads": 8, **extra}], "seeds": 2}
    spec.update(checkpoint_every=100, steps=100)
    with pytest.raises(ValueError, match=message) as info:
        suite_config_from_spec(spec)
    assert "\n" not in str(info.value)


def _tiny_phi_run(out):
    """One tiny run (2 layers, d_model 32, 2 heads of d_head 24: attention width 48 != d_model),
    trained 4 steps by the suite trainer, laid out as a suite run (step folders + tokenizer/)."""
    from interp.sources import embedded
    from interp.sources.loading import make_byte_tokenizer

    torch.set_num_threads(1)
    spec = {
        "sizes": [{"n_layers": 2, "d_model": 32, "n_heads": 2, "d_head": 24, "rotary_dim": 8, "steps": 4}],
        "seeds": [0],
        "checkpoint_every": 4,
        "n_ctx": 32,
        "batch_size": 4,
        "warmup_steps": 2,
        "lr": 1e-2,
        "corpus_bytes": 200_000,
    }
    cfg = suite_config_from_spec(spec)
    embedded.train_run(cfg.sizes[0], 0, cfg, out, save_steps=[0, 4])
    make_byte_tokenizer().save_pretrained(out / "tokenizer")
    return out, cfg.sizes[0]


def test_a_trained_d_head_checkpoint_loads_through_the_bridge_and_patches(tmp_path):
    from transformers import AutoModelForCausalLM

    from interp.core.metrics import answer_logits, answer_logprob
    from interp.patching import IdealPatterns, ideal_pattern, metric_values, patch_values, pattern
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    folder, size = _tiny_phi_run(tmp_path)
    source = LocalSuiteSource(folder)
    try:
        assert source.available_steps() == [0, 4]
        source.swap_weights = True  # as `emergence run` loads: step 4 switched into step 0's bridge, or booted
        source.load(0)
        model = source.load(4).model
        assert (
            (model.cfg.n_heads, model.cfg.d_head, model.cfg.d_model) == (size.n_heads, size.d_head, 32) == (2, 24, 32)
        )
        tokens = torch.randint(1, 256, (3, 20), generator=torch.Generator().manual_seed(0))
        hf = AutoModelForCausalLM.from_pretrained(folder / "step4", dtype=torch.float32, attn_implementation="eager")
        assert tuple(hf.model.layers[0].self_attn.q_proj.weight.shape) == (48, 32)
        with torch.inference_mode():
            logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("attn.hook_pattern"))
            expected = hf.eval()(tokens).logits
        assert sorted(cache.keys()) == ["blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"]
        assert all(tuple(p.shape) == (3, 2, 20, 20) for p in cache.values())
        torch.testing.assert_close(logits, expected, atol=1e-5, rtol=0)

        # patching: layer 1's heads set to the previous-token pattern, through the engine and by hand
        batch = RepetitionTask(n_prompts=4, seed=0).build(source.tokenizer())
        heads = [(1, 0), (1, 1)]
        ideal = IdealPatterns.of("previous_token", heads)
        patched = patch_values(model, ideal, batch, [pattern(heads)], metric="logprob", method="reference")[0]
        plain = metric_values(model, batch, "logprob")

        def set_previous_token(value, hook):
            value[:] = ideal_pattern("previous_token", batch.tokens)[:, None].to(value.dtype)
            return value

        with torch.inference_mode():
            by_hand_logits = model.run_with_hooks(
                batch.tokens, fwd_hooks=[("blocks.1.attn.hook_pattern", set_previous_token)]
            )
        by_hand = answer_logprob(answer_logits(by_hand_logits, batch), batch)
        torch.testing.assert_close(patched, by_hand.float().cpu(), atol=1e-5, rtol=0)
        assert (patched - plain).abs().max() > 1e-3  # the edited pattern moves the metric
    finally:
        source.close()


def test_why_not_a_neox_subclass_its_checkpoint_does_not_load_back(tmp_path):
    """The road not taken: GPT-NeoX weights with attention width n_heads x d_head != d_model (a
    subclass's query_key_value of 3 x 8 x 16 rows at d_model 64) are refused by the loading road's
    ``AutoModelForCausalLM``, which rebuilds the stock attention (3 x 64 rows) from config.json."""
    from transformers import AutoModelForCausalLM, GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    model = GPTNeoXForCausalLM(neox_config(64, 1, 8, 256, 32))
    model.gpt_neox.layers[0].attention.query_key_value = torch.nn.Linear(64, 3 * 8 * 16)
    model.gpt_neox.layers[0].attention.dense = torch.nn.Linear(8 * 16, 64)
    model.save_pretrained(tmp_path)
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager")


def _crossed_curves(n_seeds: int, shift: dict):
    """Kept curves of the four arms: 4 heads emerge at 1000 + 100 * seed; the 8-head arms
    ``shift[d_head]`` steps later; a key ``(n_heads, d_head)`` sets that arm's delay instead (a
    list: one delay per seed)."""
    import numpy as np
    import pandas as pd

    cfg = load_suite_spec(SPEC)
    frames = []
    for size in cfg.sizes:
        budget = cfg.steps_for(size)
        steps = np.arange(0, budget + 1, 100)
        for seed in range(n_seeds):
            default = 0 if size.n_heads == 4 else shift.get(size.d_head, 0)
            delay = shift.get((size.n_heads, size.d_head), default)
            crossing = 1000 + 100 * seed + (delay[seed] if isinstance(delay, list) else delay)
            accuracy = np.where(steps >= crossing, 0.9, 0.1)
            frames.append(
                pd.DataFrame(
                    dict(
                        arm=size.name,
                        run=f"{size.name}-seed{seed}",
                        seed=seed,
                        n_layers=size.n_layers,
                        d_model=size.d_model,
                        n_heads=size.n_heads,
                        d_head=size.d_head,
                        budget=budget,
                        step=steps,
                        accuracy=accuracy,
                        p_answer=accuracy / 2,
                    )
                )
            )
    return pd.concat(frames, ignore_index=True)[pop.curve_columns()]


def test_crossed_arms_set_each_head_count_against_its_own_head_size_and_the_block_says_how_far():
    """Head count crossed with d_head: each 8-head arm is set against the 4-head arm of its own
    d_head (one factor), not against whichever comes next; the docs block opens on how many runs
    are measured, and the headline keeps claim 4 confounded until the arms are complete."""
    from analyses import population_heads_dhead as entry
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves

    curves = _crossed_curves(3, {16: 1000, 8: 3000})
    result = population_from_curves(curves, StudyConfig(threshold=0.5, hold=2), reference=SPEC_REFERENCES[SPEC])
    pairs = result.contrasts.set_index("arm")
    assert pairs.loc["phi-2l-64d-8h-dh16-r8", "versus"] == "phi-2l-64d-4h-dh16-r8"
    assert pairs.loc["phi-2l-64d-8h-dh8-r8", "versus"] == "phi-2l-64d-4h-dh8-r8"
    assert (pairs["also_varies"] == "").all()  # each pair varies the head count alone
    labels = result.grid.loc[result.grid["key"].str.startswith("contrast:"), "label"].unique().tolist()
    assert labels == [
        "claim 4: heads 4 → 8, d_model 64, phi-2l-64d-8h-dh16-r8 vs phi-2l-64d-4h-dh16-r8",
        "claim 4: heads 4 → 8, d_model 64, phi-2l-64d-8h-dh8-r8 vs phi-2l-64d-4h-dh8-r8",
    ]

    (heads,) = [line for line in result.claims if line.startswith("Claim 4, heads (phi, d_model 64")]
    # 3 seeds, each 8-head run 1000 or 3000 steps after its 4-head twin: stratified by seed, p = 0.083
    assert heads.startswith("Claim 4, heads (phi, d_model 64, 2 layers, heads 4, 8): not decidable, robust null")
    assert "4 → 8 heads at d_head 16: not decidable, robust null (log-rank stratified by seed p = 0.083" in heads
    # d_head 8 and 16 at both head counts: crossed, so the pooled fit is not confounded by d_head
    assert result.cox["also_varies"].tolist() == [""]
    from interp.population.shapes import also_varies

    chain = curves[curves["arm"].isin(["phi-2l-64d-4h-dh16-r8", "phi-2l-64d-8h-dh8-r8"])]
    assert also_varies(chain, sorted(set(chain["arm"])), "n_heads") == "d_head 16–8"  # not crossed: confounded
    block = entry.docs_block(curves, 96)
    assert block.startswith(
        "**Measured so far: 12 of the 96 planned runs** (phi-2l-64d-4h-dh16-r8 3, phi-2l-64d-4h-dh8-r8 3, "
        "phi-2l-64d-8h-dh16-r8 3, phi-2l-64d-8h-dh8-r8 3); until every arm has its 24 seeds nothing below is a "
        "population statistic"
    )
    # 8 heads of 16 dims (E 2000-2200) against 4 of 16 (1000-1200), both cut at the 4-head arm's 4000;
    # the Kaplan-Meier medians, the judge's word and robustness
    assert (
        "- 8 heads against 4, d_head 16 (cut at 4000 steps): emerged 3/3 against 3/3, Kaplan-Meier median E 2100 "
        "steps against 1100 steps: **not decidable**, robust null (log-rank stratified by seed p = 0.083; with it "
        "attention width 128 vs 64); best accuracy median 0.90 against 0.90" in block
    )
    # the population's contrast, 8 heads of 8 dims (E 4000-4200, none held by 4000) against 4 of 16
    assert (
        "- 8 heads of 8 dims against 4 of 16 (cut at 4000 steps): emerged 0/3 against 3/3, Kaplan-Meier median E "
        "not reached against 1100 steps: **confounded**, robust null (log-rank stratified by seed p = 0.083; also "
        "varies: d_head 8 vs 16)" in block
    )
    assert "earlier" not in block.split("Runs evaluated")[0] and "later" not in block.split("Runs evaluated")[0]
    assert "| phi-2l-64d-8h-dh16-r8 | 8 | 16 | 8 | n_heads; nothing else | 3 | 3 | 2100 (2000–2200) |" in block
    assert "| phi-2l-64d-8h-dh8-r8 | 8 | 8 | 8 | n_heads; d_head 8 vs 16 | 3 | 3 | 4100 (4000–4200) |" in block
    assert entry.headline_line(curves, 96).endswith(
        "12 of 96 runs trained so far, so claim 4's head-count contrast above stays confounded with d_head."
    )


def test_the_complete_cross_reads_claim_4_one_factor_at_a_time_beside_the_paper():
    from analyses import population_heads_dhead as entry

    # 8 seeds: 8 heads emerge 2000 (d_head 16) or 4000 (d_head 8) steps after 4 heads; d_head 8 and 16
    # do not differ at 4 heads
    curves = _crossed_curves(8, {16: 2000, 8: 4000})
    line = entry.headline_line(curves, 32)
    assert line.startswith(
        "- **Claim 4, one factor at a time, Phi** (`population-heads-dhead`: {4, 8 heads} × {d_head 8, 16}, 8 rotary "
        "dims per head, 32 runs, at threshold 0.5, hold 2; built as Phi, so these findings hold for Phi, not yet for "
        "the population's GPT-NeoX arms;"
    )
    # every 8-head run after its 4-head twin, 8 seeds: stratified log-rank chi2 = 8, p = 0.0047, in every cell
    assert (
        "Claim 4, heads (Phi, 8 heads against 4 at d_head 8 and 16) (the paper: more heads help): **contradicted**, "
        "robust (2 one-factor contrasts: 2 contradicted): 8 heads against 4, d_head 16 (cut at 4000 steps): emerged "
        "8/8 against 8/8, Kaplan-Meier median E 3350 steps against 1350 steps: **contradicted**, robust (log-rank "
        "stratified by seed p = 0.0047, later;" in line
    )
    found = {c["label"]: c for c in entry.contrasts(curves)}
    assert found["d_head 16 against 8, 8 heads"]["verdict"].side == "earlier"
    assert found["d_head 16 against 8, 8 heads"]["verdict"].word == "reproduced"
    # one head size decisive, the other not: the judge's "reproduced in part"
    assert (
        "Claim 4, head size (Phi, d_head 16 against 8 at 4 and 8 heads) (the paper: a larger head helps only up to a "
        "minimum capacity): **reproduced in part**, robust (2 one-factor contrasts: 1 not decidable, 1 reproduced)"
        in line
    )
    apart = entry.contrast_line(found["8 heads against 4, d_head 8"])  # every 4-head run emerged first: no ratio
    assert "HR ×" not in apart
    assert "**contradicted**, robust (log-rank stratified by seed p = 0.0047, later; with it attention width" in apart


def test_the_headline_says_which_factor_carries_the_populations_contrast():
    from analyses import population_heads_dhead as entry

    # d_head 8 emerges 2000 steps later at both head counts; the head count moves each seed 200 steps
    # either way (half the seeds earlier, half later): a robust null, not an identical pair
    either = [200, -200] * 4
    size_only = entry.headline_line(
        _crossed_curves(8, {(4, 8): 2000, (8, 8): [2000 + d for d in either], (8, 16): either}), 32
    )
    assert "(the paper: more heads help): **not decidable**, robust null (2 one-factor contrasts: 2 not decidable)" in (
        size_only
    )
    assert "8 heads against 4, d_head 16 (cut at 4000 steps): emerged 8/8 against 8/8, " in size_only
    assert (
        "(the paper: a larger head helps only up to a minimum capacity): **reproduced**, robust (2 one-factor "
        "contrasts: 2 reproduced)" in size_only
    )
    assert size_only.endswith(
        "The population's contrast, 8 heads of 8 dims against 4 of 16: confounded, robust (log-rank stratified by "
        "seed p = 0.0047, later; also varies: d_head 8 vs 16): its direction goes with the head size; the head count "
        "alone makes no significant difference at either d_head."
    )
    # 8 heads 2000 steps later at both head sizes: the head count carries it
    count_only = entry.headline_line(_crossed_curves(8, {16: 2000, 8: [2000 + d for d in either], (4, 8): either}), 32)
    assert count_only.endswith(
        "its direction goes with the head count; the head size alone makes no significant difference at either head "
        "count."
    )
    # the complete-cross case above: 8 heads later at both, d_head matters at 8 heads only
    mixed = entry.headline_line(_crossed_curves(8, {16: 2000, 8: 4000}), 32)
    assert mixed.endswith(
        "its direction is not carried by one factor alone; the one-factor contrasts disagree between levels."
    )


def test_a_confounded_contrast_is_never_reproduced_or_contradicted_and_a_robust_null_is_so_called():
    """The population's contrast varies the head count and d_head at once: whatever its test says
    (significant in every cell here), the judge calls it confounded; a one-factor contrast whose
    test is not significant in any cell of the rule grid is a robust null."""
    from analyses import population_heads_dhead as entry

    either = [200, -200] * 4
    for shift in ({16: 2000, 8: 4000}, {(4, 8): 2000, (8, 8): 2000, (8, 16): either}, {16: -600, 8: -600}):
        found = {c["factor"]: c for c in entry.contrasts(_crossed_curves(8, shift))}
        both = found["both"]["verdict"]
        assert both.word == "confounded" and "also varies: d_head 8 vs 16" in both.reason
        assert "reproduced" not in entry.both_reading(list(found.values()))
    found = {c["label"]: c["verdict"] for c in entry.contrasts(_crossed_curves(8, {(8, 16): either}))}
    null = found["8 heads against 4, d_head 16"]
    assert (null.word, null.robust) == ("not decidable", "robust null")
    assert "p = 1.00" in null.reason


def test_an_entrys_help_shows_its_whole_first_sentence(capsys):
    from analyses import population_heads_dhead

    with pytest.raises(SystemExit) as stop:
        population_heads_dhead.main(["--help"])
    assert stop.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "do more heads help, and does a larger head help, when the other is held fixed?" in text
