"""The checkpoint sources this toolkit knows by name, without importing torch.

One concept: a suite's identity, in the one table of names and suite specs the toolkit reads
before anything heavy loads (a refusal names the valid values without importing torch). Its config
(and digest), its sizes, the spec that writes them and the names of its runs (a run's two seeds
included, issue 72) must agree in one place, or a run name, a cache folder and a spec could drift
apart.

- Pythia / PolyPythia hub ids (:func:`pythia_model_ids`, :func:`is_pythia_id`).
- The embedded suites: their configs (:data:`FULL`, :data:`QUICK`), run names
  (``neox-2l-64d-seed1``), source names (``embedded``, ``embedded-quick``,
  ``embedded/<run>``, ``embedded-quick/<run>``) and cache folders. Training them lives in
  :mod:`interp.sources.embedded`; opening them in :mod:`interp.sources`.
- The GPT-NeoX config of a Pythia-shaped model (:func:`neox_config`), the one place that
  spells out Pythia's architecture choices.

Kept free of heavy imports so that ``emergence --help`` and ``emergence list-models`` start at
once and a bad source name is refused before anything is loaded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from interp.core.io import cache_root
from interp.core.near_names import near_name
from interp.core.spec_file import SpecError, check_name, read_spec_file, unknown_key_message

#: Version of the embedded training loop (data order, schedule, checkpoint contents); part of the
#: suite's cache key. 2: each step's batch derived from (data_seed, seed, step); optimizer state
#: saved with every checkpoint.
TRAINER_VERSION = 2

#: PolyPythia sizes with ten runs each: the default seed plus ``-seed1`` .. ``-seed9``
#: (written once, in :mod:`interp.sources.families`).
from interp.sources.families import (  # noqa: E402
    POLYPYTHIA_ID_PATTERN,
    POLYPYTHIA_SIZES,
    POLYPYTHIA_SPLIT_SEEDS,
    POLYPYTHIA_SPLIT_SIZES,
    PYTHIA_ID_PATTERN,
)

_POLYPYTHIA_ID = re.compile(POLYPYTHIA_ID_PATTERN)
_PYTHIA_ID = re.compile(PYTHIA_ID_PATTERN)


def pythia_model_ids() -> list[str]:
    """The 56 PolyPythia hub ids: five sizes x (default seed + ``-seed1`` .. ``-seed9``), then the
    160m runs with one part of the seed varied: ``-data-seed1`` .. ``-data-seed3`` (data order
    varied, initial weights fixed) and ``-weight-seed1`` .. ``-weight-seed3`` (the reverse).
    Every one has the 154 ``step{N}`` branches of Pythia's schedule.

    Source: van der Wal et al. 2025, "PolyPythias" (model cards of ``EleutherAI/pythia-*``,
    "Naming Convention" and "Available Checkpoints").
    """
    return [
        f"EleutherAI/pythia-{size}{suffix}"
        for size in POLYPYTHIA_SIZES
        for suffix in [""] + [f"-seed{i}" for i in range(1, 10)]
    ] + [
        f"EleutherAI/pythia-{size}-{part}-seed{i}"
        for size in POLYPYTHIA_SPLIT_SIZES
        for part in ("data", "weight")
        for i in POLYPYTHIA_SPLIT_SEEDS
    ]


def is_pythia_id(model_id: str) -> bool:
    """Whether ``model_id`` names a Pythia or PolyPythia repo with the ``step{N}`` branches."""
    return bool(_POLYPYTHIA_ID.fullmatch(model_id) or _PYTHIA_ID.fullmatch(model_id))


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_hub_id(model_id: str) -> bool:
    """Whether ``model_id`` can name a hub repo here: ``org/name``, and a known Pythia id if in
    the ``EleutherAI/pythia-`` namespace (an unknown size there is a typo, not a new repo)."""
    if not isinstance(model_id, str) or not _REPO_ID.fullmatch(model_id):
        return False
    return is_pythia_id(model_id) or not model_id.startswith("EleutherAI/pythia-")


def neox_config(d_model: int, n_layers: int, n_heads: int, vocab_size: int, n_ctx: int, **overrides):
    """A ``transformers.GPTNeoXConfig`` with Pythia's architecture at any size.

    Pythia's choices (Biderman et al. 2023, "Pythia", section 2 and its model cards): rotary
    embeddings on 25 % of each head's dims, parallel attention and MLP residual, untied
    input/output embeddings, MLP width 4·d_model.

    Args:
        d_model, n_layers, n_heads: the shape (d_model must divide by n_heads).
        vocab_size: tokens; n_ctx: context length in tokens.
        **overrides: any other ``GPTNeoXConfig`` field (e.g. ``bos_token_id``).
    """
    from transformers import GPTNeoXConfig

    fields = dict(
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=4 * d_model,
        max_position_embeddings=n_ctx,
        rotary_pct=0.25,
        use_parallel_residual=True,
        tie_word_embeddings=False,
    )
    return GPTNeoXConfig(**{**fields, **overrides})


def phi_config(
    d_model: int, n_layers: int, n_heads: int, d_head: int, rotary_dim: int, vocab_size: int, n_ctx: int, **overrides
):
    """A ``transformers.PhiConfig`` as close to :func:`neox_config` as an architecture with its own
    ``head_dim`` allows: a suite size whose ``d_head`` is set apart from ``d_model / n_heads``.

    Why Phi (Li et al. 2023, "Textbooks Are All You Need II: phi-1.5 technical report"): GPT-NeoX
    in transformers ties the head size to ``hidden_size // num_attention_heads``. A GPT-NeoX
    attention subclass with other shapes trains, but its checkpoints do not load back through the
    project's loading road (:class:`interp.sources.LocalSuiteSource` rebuilds the stock attention
    from ``config.json`` with ``AutoModelForCausalLM``: a size mismatch, checked here; and
    TransformerLens's GPT-NeoX adapter splits heads by ``d_model // n_heads``). Llama and OLMo-2
    take ``head_dim`` but rotate every dimension of a head, so the rotary dimensions per head would
    follow d_head again. Phi takes ``head_dim`` and a partial rotary factor, its bridge adapter
    splits heads by ``n_heads`` and computes attention itself (an edited ``hook_pattern`` changes
    the output; logits equal the HF model's), and it keeps Pythia's other choices: rotary
    embeddings on a leading part of each head (``partial_rotary_factor = rotary_dim / d_head``,
    NeoX's rotate-half), parallel attention and MLP, LayerNorm, GELU MLP of width 4·d_model,
    biases, untied embeddings. What differs from :func:`neox_config`: one LayerNorm feeds both the
    attention and the MLP of a block (GPT-NeoX has one each), the unembedding has a bias, and q, k,
    v are separate matrices (the same function). So a suite whose sizes set ``d_head`` compares
    those sizes with each other, not with GPT-NeoX arms. (The layer-skip patching engine does not
    know the shared LayerNorm: patching these models takes full forwards, with a RuntimeWarning.)

    Args:
        d_model, n_layers, n_heads: the shape; d_head: dimensions per head (any, independent of
            d_model); rotary_dim: rotary dimensions per head (even, <= d_head).
        vocab_size: tokens; n_ctx: context length in tokens.
        **overrides: any other ``PhiConfig`` field.
    """
    from transformers import PhiConfig

    fields = dict(
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        head_dim=d_head,
        intermediate_size=4 * d_model,
        max_position_embeddings=n_ctx,
        partial_rotary_factor=rotary_dim / d_head,
        hidden_act="gelu",  # GPT-NeoX's (Phi's default is the tanh approximation)
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attention_dropout=0.0,
        qk_layernorm=False,
        tie_word_embeddings=False,
    )
    return PhiConfig(**{**fields, **overrides})


@dataclass(frozen=True)
class ModelSize:
    """One model shape of a suite: GPT-NeoX (Pythia's architecture at toy scale), or Phi when
    ``head_dim`` is given.

    ``rotary_dim`` is the number of rotary dimensions per head (even, at most ``d_head``; each
    pair is one rotation frequency). ``None`` keeps Pythia's 25 % of ``d_head``, which halves
    with every doubling of ``n_heads`` at one ``d_model``: give it to hold the positional code
    per head fixed while the head count varies (issue 52: with 2 rotary dimensions, one
    frequency, a content-independent previous-token score aliases).

    ``head_dim`` (a spec's ``d_head``) sets the dimensions per head apart from ``d_model`` (issue 52,
    item 1b: head count against head size at one residual width). GPT-NeoX cannot hold it (see
    :func:`phi_config` for why), so such a size is built as a Phi model (:attr:`architecture`);
    ``None`` keeps GPT-NeoX with ``d_head = d_model // n_heads``. Hashed into the suite's digest
    only when given, like ``rotary_dim``.
    """

    name: str
    n_layers: int
    d_model: int
    n_heads: int
    rotary_dim: int | None = None
    head_dim: int | None = None

    @property
    def d_head(self) -> int:
        """Dimensions per head: ``head_dim`` when given, else ``d_model // n_heads`` (GPT-NeoX ties them)."""
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def architecture(self) -> str:
        """The transformers ``model_type`` this size is built as: ``"phi"`` when ``head_dim`` is
        given (:func:`phi_config`), else ``"gpt_neox"`` (:func:`neox_config`)."""
        return "gpt_neox" if self.head_dim is None else "phi"

    def model_class(self):
        """The transformers class of this size: ``GPTNeoXForCausalLM``, or ``PhiForCausalLM`` when
        ``head_dim`` is given (imports transformers)."""
        from transformers import GPTNeoXForCausalLM, PhiForCausalLM

        return GPTNeoXForCausalLM if self.architecture == "gpt_neox" else PhiForCausalLM

    @property
    def rotary_dims(self) -> int:
        """Rotary dimensions per head as the model applies them (``int(d_head * rotary_pct)``)."""
        return self.rotary_dim if self.rotary_dim is not None else int(self.d_head * 0.25)

    def hf_config(self, vocab_size: int, n_ctx: int, **overrides):
        """The ``GPTNeoXConfig`` of this size (:func:`neox_config`), or its ``PhiConfig`` when
        ``head_dim`` is given (:func:`phi_config`); byte 0 as BOS/EOS. ``overrides``: any other
        argument of the config class (``attn_implementation="eager"``)."""
        ids = {"bos_token_id": 0, "eos_token_id": 0, **overrides}
        if self.head_dim is not None:
            return phi_config(
                self.d_model, self.n_layers, self.n_heads, self.d_head, self.rotary_dims, vocab_size, n_ctx, **ids
            )
        extra = {} if self.rotary_dim is None else {"rotary_pct": self.rotary_dim / self.d_head}
        return neox_config(self.d_model, self.n_layers, self.n_heads, vocab_size, n_ctx, **ids, **extra)


@dataclass(frozen=True)
class SuiteConfig:
    """Everything that determines the embedded suite's weights (its hash names the cache folder).

    Units: ``steps``, ``size_steps`` and ``checkpoint_steps`` in optimizer steps; ``n_ctx`` in
    tokens (bytes); ``lr`` per step (AdamW, linear warmup over ``warmup_steps`` then constant).
    ``size_steps`` overrides ``steps`` for some sizes (``(("neox-2l-128d", 2000),)``): the larger
    model acquires the capability earlier, so it needs fewer steps to be well past its point of
    emergence. ``threads`` is the torch CPU thread count each run trains with (recorded because
    the weights may depend on it, see docs/embedded.md); ``attn_implementation`` the transformers
    attention kernel.

    A run's seed sets two things: its initial weights (``torch.manual_seed``,
    :func:`interp.sources.embedded.build_model`) and the order of its training data (each step's
    batch from ``default_rng([data_seed, data-order seed, step])``, :func:`interp.sources.embedded.batch_at`).
    With ``data_order_seeds`` empty (the default) both are the run's seed, one run per seed. Given,
    the runs are ``seeds`` (initialisation seeds) × ``data_order_seeds``, crossed
    (:meth:`run_seeds`), and a run whose two seeds differ is named ``{size}-init{i}-data{d}``
    (:func:`run_name`). ``data_seed`` is not a run's seed: a suite-wide constant mixed into every
    batch's generator.
    """

    sizes: tuple[ModelSize, ...]
    seeds: tuple[int, ...]
    steps: int
    checkpoint_every: int
    n_ctx: int = 128
    batch_size: int = 16
    lr: float = 2e-3
    warmup_steps: int = 50
    weight_decay: float = 0.01
    repeat_fraction: float = 0.5
    prefix_len: int = 40
    random_prefix: bool = True
    segment_min: int = 8
    segment_max: int = 32
    corpus_bytes: int = 4_000_000
    data_seed: int = 1234
    size_steps: tuple[tuple[str, int], ...] = ()
    threads: int = 1
    attn_implementation: str = "sdpa"
    trainer_version: int = TRAINER_VERSION
    keep_optimizer: str = "every"
    data_order_seeds: tuple[int, ...] = ()

    def steps_for(self, size: ModelSize) -> int:
        """Training steps of one size (``size_steps`` entry, else ``steps``)."""
        return dict(self.size_steps).get(size.name, self.steps)

    def checkpoint_steps_for(self, size: ModelSize) -> tuple[int, ...]:
        """Pythia-like schedule up to :meth:`steps_for` ``(size)``: 0, 1, 2, 4, ... (powers of two)
        below ``checkpoint_every``, then every ``checkpoint_every`` steps (Pythia: 0..512, then
        every 1000)."""
        last = self.steps_for(size)
        early = [0] + [2**i for i in range(32) if 2**i < self.checkpoint_every]
        linear = list(range(self.checkpoint_every, last + 1, self.checkpoint_every))
        return tuple(sorted(set(early + linear)))

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """The schedule up to ``steps`` (the longest run's schedule when no size is overridden)."""
        return self.checkpoint_steps_for(ModelSize("", 0, 0, 0))

    def digest(self) -> str:
        """Short hash of the config (names the cache folder, so a changed config retrains).

        ``keep_optimizer`` is hashed only when it is not ``"every"``, and a size's ``rotary_dim``
        only when given: the behaviours before those fields existed, so the suites trained then
        keep their folders. Likewise a size's ``head_dim``, and ``data_order_seeds`` (hashed only
        when given: empty means each run's data order is its seed, as before the field existed)."""
        from interp.core.io import config_json

        fields = asdict(self)
        if fields["keep_optimizer"] == "every":
            del fields["keep_optimizer"]
        if not fields["data_order_seeds"]:
            del fields["data_order_seeds"]
        for size in fields["sizes"]:  # likewise a size's rotary_dim: hashed only when given
            for key in ("rotary_dim", "head_dim"):
                if size[key] is None:
                    del size[key]
        return hashlib.sha256(config_json(fields).encode()).hexdigest()[:12]

    def run_seeds(self) -> list[tuple[int, int]]:
        """Each run's ``(initialisation seed, data-order seed)`` within one size, in order: ``(s, s)``
        for each of ``seeds`` when ``data_order_seeds`` is empty, else every initialisation seed
        crossed with every data-order seed (initialisation seed outer)."""
        if not self.data_order_seeds:
            return [(seed, seed) for seed in self.seeds]
        return [(seed, data) for seed in self.seeds for data in self.data_order_seeds]

    def runs(self) -> list[tuple[ModelSize, int, int]]:
        """Every run as ``(size, initialisation seed, data-order seed)``, in (size, seeds) order."""
        return [(size, seed, data) for size in self.sizes for seed, data in self.run_seeds()]

    def run_names(self) -> list[str]:
        """Run names in (size, seeds) order, as :func:`run_name` spells them."""
        return [run_name(size, seed, data) for size, seed, data in self.runs()]

    def find_run(self, name: str) -> tuple[ModelSize, int, int]:
        """The ``(size, initialisation seed, data-order seed)`` of the run named ``name``.

        Raises:
            ValueError: no run of this suite has that name (the valid names listed).
        """
        for size, seed, data in self.runs():
            if run_name(size, seed, data) == name:
                return size, seed, data
        raise ValueError(f"unknown run {name!r} of the suite; valid: {', '.join(self.run_names())}")


#: The suite specs shipped with the package (``interp/data/suites/<name>.yaml``): the embedded
#: default, the quick suite and the population of issue 44; ``suite:<name>`` names one.
SHIPPED_SPECS = Path(__file__).resolve().parents[1] / "data" / "suites"
#: File suffixes of a suite spec.
SPEC_SUFFIXES = (".yaml", ".yml", ".json")
#: Keys of a suite spec besides the SuiteConfig fields it sets: labels, never hashed.
_SPEC_LABELS = ("name", "description")
#: SuiteConfig fields a spec gives in its own forms (``sizes`` as mappings, ``seeds`` as a list,
#: a count or ``a..b``; per-size ``steps`` instead of ``size_steps``) or not at all.
_SPEC_SPECIAL = ("sizes", "seeds", "size_steps", "trainer_version", "data_order_seeds")
_SIZE_KEYS = ("name", "n_layers", "d_model", "n_heads", "d_head", "rotary_dim", "steps")


def _spec_int(where: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"suite spec: {where}={value!a} must be an integer >= {minimum}")
    return value


def _spec_seeds(value, key: str = "seeds") -> tuple[int, ...]:
    """``[0, 3, 7]``, a count ``24`` (0..23) or a range ``"0..23"`` (both ends included); ``key``
    names the spec's key in messages."""
    if isinstance(value, str) and re.fullmatch(r"\d+\.\.\d+", value.strip(), flags=re.ASCII):
        first, last = (int(v) for v in value.strip().split(".."))
        if last < first:
            raise ValueError(f"suite spec: {key}={value!a} is an empty range; write first..last with first <= last")
        return tuple(range(first, last + 1))
    if isinstance(value, int) and not isinstance(value, bool):
        return tuple(range(_spec_int(key, value)))
    if (
        isinstance(value, list)
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        if len(set(value)) != len(value):
            raise ValueError(f"suite spec: {key}={value!a} repeats a seed")
        return tuple(value)
    raise ValueError(f"suite spec: {key}={value!a}; give a list of seeds >= 0, a count (24) or a range ('0..23')")


def _spec_size(i: int, entry) -> tuple[ModelSize, int | None]:
    if not isinstance(entry, dict):
        raise ValueError(f"suite spec: sizes[{i}]={entry!a} must be a mapping with n_layers, d_model, n_heads")
    unknown = sorted(set(entry) - set(_SIZE_KEYS), key=str)
    if unknown:
        raise SpecError(unknown_key_message(f"suite spec: sizes[{i}]", unknown[0], _SIZE_KEYS))
    missing = [k for k in ("n_layers", "d_model", "n_heads") if k not in entry]
    if missing:
        raise ValueError(f"suite spec: sizes[{i}] lacks {missing[0]!r}; give n_layers, d_model and n_heads")
    n_layers, d_model, n_heads = (_spec_int(f"sizes[{i}].{k}", entry[k]) for k in ("n_layers", "d_model", "n_heads"))
    head_dim = _spec_int(f"sizes[{i}].d_head", entry["d_head"], minimum=2) if "d_head" in entry else None
    if head_dim is None and d_model % n_heads:
        raise ValueError(
            f"suite spec: sizes[{i}] d_model={d_model} does not divide into n_heads={n_heads} heads"
            " (or give d_head: dimensions per head apart from d_model)"
        )
    d_head = head_dim if head_dim is not None else d_model // n_heads
    rotary_dim = None
    if "rotary_dim" in entry:
        rotary_dim = _spec_int(f"sizes[{i}].rotary_dim", entry["rotary_dim"], minimum=2)
        if rotary_dim % 2 or rotary_dim > d_head:
            raise ValueError(
                f"suite spec: sizes[{i}].rotary_dim={rotary_dim} must be even and at most d_head={d_head}"
                " (rotary dimensions per head come in pairs, one frequency each)"
            )
    elif head_dim is not None and (int(d_head * 0.25) < 2 or int(d_head * 0.25) % 2):
        raise ValueError(
            f"suite spec: sizes[{i}].d_head={d_head} leaves Pythia's 25 % = {int(d_head * 0.25)} rotary dimensions"
            " per head (not an even number >= 2); give rotary_dim, even and at most d_head"
        )
    arch = "neox" if head_dim is None else "phi"
    default = f"{arch}-{n_layers}l-{d_model}d-{n_heads}h" + (f"-dh{head_dim}" if head_dim is not None else "")
    default += f"-r{rotary_dim}" if rotary_dim is not None else ""
    name = check_name(f"suite spec: sizes[{i}].name", entry.get("name", default))
    steps = _spec_int(f"sizes[{i}].steps", entry["steps"]) if "steps" in entry else None
    size = ModelSize(
        name, n_layers=n_layers, d_model=d_model, n_heads=n_heads, rotary_dim=rotary_dim, head_dim=head_dim
    )
    return size, steps


def suite_config_from_spec(spec: dict) -> SuiteConfig:
    """A :class:`SuiteConfig` from a suite spec's mapping (the YAML file's content).

    A spec has ``sizes`` (a list of ``{n_layers, d_model, n_heads}``, each with an optional
    ``d_head`` (dimensions per head apart from d_model; such a size is a Phi model, see
    :func:`phi_config`; default GPT-NeoX with d_model / n_heads), an optional
    ``rotary_dim`` (rotary dimensions per head, even, <= d_head; default Pythia's 25 % of d_head),
    an optional ``name``, default ``neox-{L}l-{d}d-{H}h`` (``phi-{L}l-{d}d-{H}h-dh{d_head}`` when
    d_head is given; ``-r{rotary_dim}`` appended when it is given), and an optional ``steps``: its
    step budget),
    ``seeds`` (a list, a count, or ``"0..23"``; each run's initialisation seed, and its data-order
    seed unless ``data_order_seeds`` is given), ``data_order_seeds`` (optional, the same forms: the
    runs are then ``seeds`` × ``data_order_seeds``, crossed; :class:`SuiteConfig`), ``steps`` (default: the largest per-size budget),
    ``checkpoint_every`` and any other field of :class:`SuiteConfig` (data settings such as
    ``repeat_fraction``, ``n_ctx``, ``lr``; ``keep_optimizer``), plus the labels ``name`` and
    ``description``. Units: steps are optimizer steps.

    Raises:
        ValueError: an unknown key (the valid ones listed), a missing ``sizes`` / ``seeds`` /
            ``checkpoint_every``, a value of the wrong type or range, two sizes with one name.
    """
    if not isinstance(spec, dict):
        raise ValueError(f"a suite spec is a mapping of settings, got {type(spec).__name__}")
    settable = [f.name for f in fields(SuiteConfig) if f.name not in _SPEC_SPECIAL]
    valid = ["sizes", "seeds", *settable, "data_order_seeds", *_SPEC_LABELS]
    unknown = sorted(set(spec) - set(valid), key=str)
    if unknown:
        raise SpecError(unknown_key_message("suite spec", unknown[0], valid))
    for key in ("sizes", "seeds", "checkpoint_every"):
        if key not in spec:
            raise ValueError(f"suite spec: {key!r} is missing (a spec needs sizes, seeds and checkpoint_every)")
    if not isinstance(spec["sizes"], list) or not spec["sizes"]:
        raise ValueError(f"suite spec: sizes={spec['sizes']!r} must be a non-empty list of sizes")
    sized = [_spec_size(i, entry) for i, entry in enumerate(spec["sizes"])]
    names = [size.name for size, _ in sized]
    if len(set(names)) != len(names):
        raise ValueError(f"suite spec: two sizes are named {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    budgets = [steps for _, steps in sized if steps is not None]
    if "steps" in spec:
        steps = _spec_int("steps", spec["steps"])
    elif len(budgets) == len(sized):
        steps = max(budgets)
    else:
        raise ValueError("suite spec: 'steps' is missing; give it, or a steps budget on every size")
    defaults: dict[str, Any] = {f.name: f.default for f in fields(SuiteConfig)}
    defaults["checkpoint_every"] = 100  # required: no default in the dataclass; an int
    settings: dict[str, Any] = {}
    for key in settable:
        if key in spec and key not in ("steps",):
            value, default = spec[key], defaults[key]
            if type(value) is not type(default) and not (isinstance(default, float) and type(value) is int):
                like = "true or false" if isinstance(default, bool) else f"a {type(default).__name__} like {default!r}"
                raise ValueError(f"suite spec: {key}={value!a} must be {like}")
            settings[key] = float(value) if isinstance(default, float) else value
    if settings.get("keep_optimizer", "every") not in KEEP_OPTIMIZER:
        raise ValueError(
            f"suite spec: keep_optimizer={settings['keep_optimizer']!a}; valid: {', '.join(KEEP_OPTIMIZER)}"
        )
    _spec_int("checkpoint_every", settings["checkpoint_every"])
    size_steps = tuple((size.name, budget) for size, budget in sized if budget is not None and budget != steps)
    return SuiteConfig(
        sizes=tuple(size for size, _ in sized),
        seeds=_spec_seeds(spec["seeds"]),
        data_order_seeds=_spec_seeds(spec["data_order_seeds"], "data_order_seeds")
        if "data_order_seeds" in spec
        else (),
        steps=steps,
        size_steps=size_steps,
        **settings,
    )


def spec_path(ref: str | Path) -> Path:
    """The file of a suite spec: a shipped name (``population``) or a path to a YAML/JSON file.

    Raises:
        ValueError: neither (the shipped names listed), or a path with another suffix.
    """
    text = str(ref)
    if (SHIPPED_SPECS / f"{text}.yaml").is_file():
        return SHIPPED_SPECS / f"{text}.yaml"
    path = Path(text).expanduser()
    if path.suffix.lower() not in SPEC_SUFFIXES:
        near = near_name(text, shipped_spec_names())
        raise ValueError(
            f"suite spec {text!r} is not a shipped spec ({', '.join(shipped_spec_names())}) "
            f"nor a {'/'.join(SPEC_SUFFIXES)} file" + (f"; did you mean {near!r}?" if near else "")
        )
    if not path.is_file():
        raise ValueError(f"suite spec file {text!r} does not exist")
    return path


def shipped_spec_names() -> list[str]:
    """The names of the suite specs shipped with the package (``interp/data/suites/*.yaml``)."""
    return sorted(p.stem for p in SHIPPED_SPECS.glob("*.yaml"))


def load_suite_spec(ref: str | Path) -> SuiteConfig:
    """The :class:`SuiteConfig` of a suite spec file or shipped name (:func:`spec_path`,
    :func:`suite_config_from_spec`).

    Raises:
        ValueError: as :func:`spec_path` and :func:`suite_config_from_spec`.
        SpecError: a file that is not valid YAML/JSON (named, with the parser's line), or that
            breaks a rule of :mod:`interp.core.spec_file` (a number with a leading zero, a date,
            a key given twice, a non-ASCII name).
    """
    path = spec_path(ref)
    data = read_spec_file(path, "suite spec")
    try:
        return suite_config_from_spec(data)
    except SpecError as error:
        raise SpecError(f"{error} (in {path})") from None
    except ValueError as error:
        raise ValueError(f"{error} (in {path})") from None


#: Which checkpoints keep the optimizer state (:attr:`SuiteConfig.keep_optimizer`).
KEEP_OPTIMIZER = ("every", "last")

#: The default: 2 sizes x 3 seeds; the small model trains 3000 steps (38 checkpoints), the base
#: model 2000 steps (28 checkpoints; it emerges earlier, see docs/embedded.md).
FULL = load_suite_spec("embedded")
#: CI-sized: the small model at two seeds, 2400 steps.
QUICK = load_suite_spec("embedded-quick")
SMALL, BASE = FULL.sizes

#: Source names of the embedded suites (every run), smallest first.
SUITES: dict[str, SuiteConfig] = {"embedded-quick": QUICK, "embedded": FULL}
#: A user's suite: ``suite:<spec>`` (every run) or ``suite:<spec>/<run>``.
SUITE_PREFIX = "suite:"


def run_name(size: ModelSize, seed: int, data_order_seed: int | None = None) -> str:
    """Folder and model id of one run: ``{size.name}-seed{seed}`` (PolyPythia-style suffix) when its
    data order is its seed (``data_order_seed`` None or equal to ``seed``), else
    ``{size.name}-init{seed}-data{data_order_seed}`` (``seed`` the initialisation seed)."""
    if data_order_seed is None or data_order_seed == seed:
        return f"{size.name}-seed{seed}"
    return f"{size.name}-init{seed}-data{data_order_seed}"


def model_and_seed(model_id: str) -> tuple[str, int]:
    """Split a run id into (model, seed): ``EleutherAI/pythia-70m-seed3`` -> (``pythia-70m``, 3).

    The PolyPythia base repos (``EleutherAI/pythia-70m``, trained with data seed 1234) are
    labelled seed 0, as in the PolyPythias release. Ids without a ``-seed{N}`` suffix get seed 0.
    """
    name = str(model_id).rstrip("/").split("/")[-1]
    match = re.fullmatch(r"(.+)-seed(\d+)", name)
    return (match.group(1), int(match.group(2))) if match else (name, 0)


#: Which part of a run's seed differs from its model's default run (:func:`seed_parts`).
SEED_VARIES = ("both", "data order", "initialisation")
_SPLIT_HUB = re.compile(r"(.+)-(data|weight)-seed(\d+)")
_SPLIT_RUN = re.compile(r"(.+)-init(\d+)-data(\d+)")


def seed_parts(model_id: str) -> tuple[str, int, int, str]:
    """A run id's model and the two parts of its seed: ``(model, init_seed, data_order_seed,
    varies)``; ``varies`` is one of :data:`SEED_VARIES`.

    - PolyPythia ``EleutherAI/pythia-160m-data-seed2`` -> (``pythia-160m``, 0, 2, ``"data order"``):
      the initial weights of the default run (labelled seed 0, as :func:`model_and_seed` labels
      it), the data order varied; ``-weight-seed{N}`` -> (model, N, 0, ``"initialisation"``).
      The model cards do not say whether ``-data-seed{N}``'s order is ``-seed{N}``'s, so the
      labels say which runs share a part with the default run, nothing more.
    - ``...-seed{N}`` and ids without a seed suffix: (model, N, N, ``"both"``), as
      :func:`model_and_seed`.
    - An embedded run whose seeds were set apart, ``neox-2l-64d-4h-r8-init3-data5``:
      (``neox-2l-64d-4h-r8``, 3, 5, ``"both"``) (a crossed design: no default run to vary from).
    """
    name = str(model_id).rstrip("/").split("/")[-1]
    match = _SPLIT_HUB.fullmatch(name)
    if match:
        seed = int(match.group(3))
        if match.group(2) == "data":
            return match.group(1), 0, seed, "data order"
        return match.group(1), seed, 0, "initialisation"
    match = _SPLIT_RUN.fullmatch(name)
    if match:
        return match.group(1), int(match.group(2)), int(match.group(3)), "both"
    model, seed = model_and_seed(model_id)
    return model, seed, seed, "both"


def run_label(model: str, seed: int) -> str:
    """How tables, figures and the CLI name one run: ``"pythia-70m seed 3"``."""
    return f"{model} seed {seed}".strip()


def suite_dir(cfg: SuiteConfig, root: str | Path | None = None) -> Path:
    """Cache folder of a suite config: ``embedded/<config hash>-<environment hash>``.

    The second hash covers what besides the config changes the trained weights (the training
    text, the torch and transformers versions, torch's CPU kernel level; measured in
    docs/embedded.md): :func:`interp.sources.environment.environment_key`, which imports torch.
    """
    from interp.sources.environment import environment_key

    root = Path(root).expanduser() if root is not None else cache_root()
    return root / "embedded" / f"{cfg.digest()}-{environment_key(cfg)}"


def is_embedded_name(spec: str) -> bool:
    """Whether ``spec`` names runs this toolkit trains: an embedded suite (``embedded``,
    ``embedded-quick`` or a run of either, ``embedded/<run>`` / ``embedded-quick/<run>``) or a
    suite spec (``suite:<spec>``, ``suite:<spec>/<run>``)."""
    return isinstance(spec, str) and (spec.split("/", 1)[0] in SUITES or spec.startswith(SUITE_PREFIX))


def suite_label(cfg: SuiteConfig) -> str:
    """How messages name a suite: its source name when it is a shipped one (``embedded``,
    ``embedded-quick``, ``suite:population``), else its config digest."""
    for name, known in SUITES.items():
        if known == cfg:
            return name
    for name in shipped_spec_names():
        if name not in SUITES and load_suite_spec(name) == cfg:
            return f"{SUITE_PREFIX}{name}"
    return cfg.digest()


def split_suite_name(spec: str) -> tuple[str, str]:
    """``suite:<spec>[/<run>]`` -> (spec reference, run or ""): the run is the last path part when
    what precedes it is a spec (a shipped name or a file with a spec suffix)."""
    ref = spec[len(SUITE_PREFIX) :]
    head, sep, tail = ref.rpartition("/")
    is_spec = head.lower().endswith(SPEC_SUFFIXES) or head in shipped_spec_names()
    if sep and not tail.lower().endswith(SPEC_SUFFIXES) and is_spec:
        return head, tail
    return ref, ""


def embedded_source_names() -> list[str]:
    """Every embedded source name, as ``emergence list-models`` prints them."""
    names = list(SUITES)
    for suite, cfg in SUITES.items():
        names += [f"{suite}/{name}" for name in cfg.run_names()]
    return names


def resolve_embedded(spec: str) -> list[tuple[SuiteConfig, str]]:
    """The (suite config, run name) pairs an embedded or suite-spec source name stands for; no training.

    ``embedded`` / ``embedded-quick`` / ``suite:<spec>``: every run of that suite.
    ``embedded/<run>`` / ``embedded-quick/<run>`` / ``suite:<spec>/<run>``: that run of the suite
    the name names, whatever the cache holds: a source name means one set of weights
    (``embedded/neox-2l-64d-seed1`` is the full suite's 3000-step run even when only the quick
    suite's 2400-step run of that name is cached; ``embedded-quick/neox-2l-64d-seed1`` is that one).

    Raises:
        ValueError: not an embedded name, an unknown run (the suite's valid names are listed), or a
            suite spec that cannot be read (:func:`load_suite_spec`).
    """
    if isinstance(spec, str) and spec.startswith(SUITE_PREFIX):
        ref, run = split_suite_name(spec)
        cfg = load_suite_spec(ref)
        if not run:
            return [(cfg, name) for name in cfg.run_names()]
        if run not in cfg.run_names():
            raise ValueError(f"unknown run {run!r} in {SUITE_PREFIX}{ref}; valid: {', '.join(cfg.run_names())}")
        return [(cfg, run)]
    suite, _, run = spec.partition("/")
    if suite not in SUITES:
        raise ValueError(f"{spec!r} is not an embedded source; valid: {', '.join(SUITES)}, or {SUITE_PREFIX}<spec>")
    if not run:
        cfg = SUITES[suite]
        return [(cfg, name) for name in cfg.run_names()]
    cfg = SUITES[suite]
    if run not in cfg.run_names():
        elsewhere = [f"{other}/{run}" for other, known in SUITES.items() if run in known.run_names()]
        close = near_name(run, cfg.run_names())
        near = elsewhere[0] if elsewhere else (f"{suite}/{close}" if close else None)
        hint = f"did you mean {near!r}? " if near else ""
        raise ValueError(f"unknown embedded run {run!r} in {suite!r}; {hint}valid: {', '.join(cfg.run_names())}")
    return [(cfg, run)]
