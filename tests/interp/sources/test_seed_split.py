"""A run's initialisation seed and data-order seed set apart (issue 72, item 1).

The default (no ``data_order_seeds``) must leave every shipped suite as it was: the same digest
(so the same cache folder and weights), the same run names, the same batches and initial
weights. A tiny config (1 layer, d_model 32, 4 steps of 4 x 32 bytes) keeps the training checks
to seconds.
"""

from dataclasses import asdict, replace

import pandas as pd
import pytest
import torch

from interp.sources import embedded
from interp.sources.catalogue import (
    load_suite_spec,
    run_name,
    shipped_spec_names,
    suite_config_from_spec,
)
from tiny_suite import TINY, tiny_suite

#: The digests of the shipped specs before the two seeds were set apart (computed at commit
#: 0575bcc, before ``data_order_seeds`` existed): they name the cache folders of every trained run.
DIGESTS_BEFORE = {
    "embedded": "7cdb30f57c9a",
    "embedded-quick": "ad5aea722ce5",
    "population": "4eb73a59c175",
    "population-8h-long": "8b323f6ade4a",
    "population-decoupled": "788016c980e0",
    "population-heads-dhead": "99e7e2e731e6",
}

CFG = tiny_suite(seed=3, steps=4, checkpoint_every=4, warmup_steps=2)


def test_shipped_specs_keep_their_digests_and_run_names():
    for name, digest in DIGESTS_BEFORE.items():
        cfg = load_suite_spec(name)
        assert cfg.digest() == digest, name
        assert cfg.data_order_seeds == ()
        assert cfg.run_names() == [f"{size.name}-seed{seed}" for size in cfg.sizes for seed in cfg.seeds]
        assert cfg.run_seeds() == [(s, s) for s in cfg.seeds]
    assert set(DIGESTS_BEFORE) | {"population-seed-split"} <= set(shipped_spec_names())


def test_crossed_spec_runs_and_names():
    cfg = load_suite_spec("population-seed-split")
    assert cfg.seeds == tuple(range(8)) and cfg.data_order_seeds == tuple(range(8))
    names = cfg.run_names()
    assert len(names) == len(set(names)) == 64
    assert names[:3] == ["neox-2l-64d-4h-r8-seed0", "neox-2l-64d-4h-r8-init0-data1", "neox-2l-64d-4h-r8-init0-data2"]
    assert cfg.find_run("neox-2l-64d-4h-r8-init3-data5")[1:] == (3, 5)
    assert cfg.find_run("neox-2l-64d-4h-r8-seed4")[1:] == (4, 4)
    with pytest.raises(ValueError, match="unknown run 'nope'"):
        cfg.find_run("nope")
    # the arm is the decoupled population's 4-head arm: same size and every training setting
    decoupled = load_suite_spec("population-decoupled")
    size = next(s for s in decoupled.sizes if s.name == "neox-2l-64d-4h-r8")
    assert cfg.sizes == (size,) and cfg.steps_for(size) == decoupled.steps_for(size) == 4000
    same = {k: v for k, v in asdict(cfg).items() if k not in embedded._RUN_SELECTION}
    assert same == {k: v for k, v in asdict(decoupled).items() if k not in embedded._RUN_SELECTION}
    assert cfg.digest() != decoupled.digest()


def test_spec_data_order_seeds_forms_and_errors():
    base = {"sizes": [{"n_layers": 1, "d_model": 32, "n_heads": 4}], "seeds": [3], "steps": 4, "checkpoint_every": 4}
    one = suite_config_from_spec({**base, "data_order_seeds": [5]})
    assert one.runs() == [(one.sizes[0], 3, 5)] and one.run_names() == ["neox-1l-32d-4h-init3-data5"]
    assert suite_config_from_spec({**base, "data_order_seeds": "2..3"}).data_order_seeds == (2, 3)
    # given, the field is hashed; absent, it is not
    assert suite_config_from_spec(base).digest() != one.digest()
    assert suite_config_from_spec({**base, "data_order_seeds": [3]}).run_names() == ["neox-1l-32d-4h-seed3"]
    with pytest.raises(ValueError, match=r"data_order_seeds=\[1, 1\] repeats a seed"):
        suite_config_from_spec({**base, "data_order_seeds": [1, 1]})
    with pytest.raises(ValueError, match=r"data_order_seeds='x'; give a list of seeds"):
        suite_config_from_spec({**base, "data_order_seeds": "x"})


def test_run_name_equal_seeds_is_the_seeds_name():
    assert run_name(TINY, 2) == run_name(TINY, 2, 2) == "neox-1l-32d-seed2"
    assert run_name(TINY, 2, 7) == "neox-1l-32d-init2-data7"


_BATCH_AT = embedded.batch_at


def _recorded_training(monkeypatch, seed: int, data_order_seed: int | None):
    """Train the tiny run, recording the seed each batch was drawn with; returns (losses, seeds,
    the initial weights)."""
    drawn: list[int] = []

    def recording(corpus, cfg, s, step):
        drawn.append(s)
        return _BATCH_AT(corpus, cfg, s, step)

    monkeypatch.setattr(embedded, "batch_at", recording)
    initial: dict = {}

    def at_zero(model, step):
        if step == 0:
            initial.update({k: v.clone() for k, v in model.state_dict().items()})

    torch.set_num_threads(1)
    losses = embedded.train_run(TINY, seed, CFG, None, eval_fn=at_zero, save_steps=[0], data_order_seed=data_order_seed)
    return losses, drawn, initial


def test_default_run_is_unchanged_and_the_two_seeds_act_apart(monkeypatch):
    base, drawn, init = _recorded_training(monkeypatch, 3, None)
    assert drawn == [3, 3, 3, 3]  # the data order of the run's seed, as before
    built = embedded.build_model(TINY, CFG, 3).state_dict()
    assert all(torch.equal(init[k], built[k]) for k in built)  # torch.manual_seed(seed), as before
    same, drawn_same, _ = _recorded_training(monkeypatch, 3, 3)
    assert same["loss"].tolist() == base["loss"].tolist() and drawn_same == drawn
    # data order 5, weights of seed 3: batches from 5, initial weights from 3, another loss curve
    split, drawn_split, init_split = _recorded_training(monkeypatch, 3, 5)
    assert drawn_split == [5, 5, 5, 5]
    assert all(torch.equal(init_split[k], built[k]) for k in built)
    assert split["loss"].iloc[0] != base["loss"].iloc[0]
    # and the other way round: data order 3 with the weights of seed 5 starts from other weights
    _, drawn_other, init_other = _recorded_training(monkeypatch, 5, 3)
    assert drawn_other == [3, 3, 3, 3]
    assert not all(torch.equal(init_other[k], built[k]) for k in built)


def test_checkpoint_records_the_data_order_seed(tmp_path):
    torch.set_num_threads(1)
    from interp.core.training_state import read_training_state

    embedded.train_run(TINY, 3, CFG, tmp_path / "a", save_steps=[4], data_order_seed=5)
    embedded.train_run(TINY, 3, CFG, tmp_path / "b", save_steps=[4])
    split, plain = read_training_state(tmp_path / "a" / "step4"), read_training_state(tmp_path / "b" / "step4")
    assert split["trainer"]["data_order_seed"] == 5 and "seed=5," in split["trainer"]["data_order"]
    assert "data_order_seed" not in plain["trainer"] and "seed=3," in plain["trainer"]["data_order"]


def test_plan_and_dict_round_trip_carry_both_seeds(tmp_path):
    from interp.sources.suites import plan_suite, suite_config_from_dict

    cfg = replace(CFG, seeds=(0, 1), data_order_seeds=(0, 2))
    plan = plan_suite(cfg, root=tmp_path)
    assert plan[["seed", "data_order_seed"]].values.tolist() == [[0, 0], [0, 2], [1, 0], [1, 2]]
    assert plan["run"].tolist() == ["neox-1l-32d-seed0", "neox-1l-32d-init0-data2", "neox-1l-32d-init1-data0",
                                    "neox-1l-32d-init1-data2"]  # fmt: skip
    import json

    back = suite_config_from_dict(json.loads(json.dumps(asdict(cfg))))
    assert back == cfg and back.digest() == cfg.digest()


def test_population_tables_carry_both_seeds():
    from interp.population.tables import check_curves, runs_from_curves

    rows = []
    for run, seed, init, data, acc in (("a", 0, 0, 1, 1.0), ("b", 1, 1, 1, 0.0)):
        for step in (0, 100, 200, 300):
            rows.append(dict(arm="x", run=run, seed=seed, n_layers=1, d_model=32, n_heads=4, d_head=8,
                             step=step, p_answer=0.5, accuracy=acc if step >= 100 else 0.0, budget=300,
                             init_seed=init, data_order_seed=data))  # fmt: skip
    runs = runs_from_curves(check_curves(pd.DataFrame(rows)), threshold=0.5, hold=1)
    assert runs[["run", "init_seed", "data_order_seed"]].values.tolist() == [["a", 0, 1], ["b", 1, 1]]
    assert runs["E"].iloc[0] == 100 and not runs["emerged"].iloc[1]
    # a table without them: both are the seed
    plain = pd.DataFrame(rows).drop(columns=["init_seed", "data_order_seed"])
    runs = runs_from_curves(check_curves(plain), threshold=0.5, hold=1)
    assert runs[["init_seed", "data_order_seed"]].values.tolist() == [[0, 0], [1, 1]]
