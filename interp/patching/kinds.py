"""The table of patch kinds: every fact about a kind of patch target, in one entry.

A *patch kind* says what a :class:`interp.patching.targets.Target` takes from the post
checkpoint into the pre checkpoint: a *location*, a component with an index set in pyvene's
sense (Wu et al. 2024, "pyvene"), whose index set the scope names:

=========  ==================================  =============================================
scope      index set (``Target`` field)         what bounds it
=========  ==================================  =============================================
``head``   ``(layer, head)`` (``heads=``)       ``n_layers``, ``n_heads``; the hook is an
                                                attention hook (``attn.*``)
``kv_head`` ``(layer, kv_head)``                ``n_layers``, ``n_key_value_heads`` (grouped-
           (``kv_heads=``)                      query attention: fewer than ``n_heads``); an
                                                attention hook (``attn.hook_k`` / ``hook_v``)
``neuron`` ``(layer, neuron)`` (``neurons=``)   ``n_layers``, ``d_mlp``; the hook is the
                                                MLP's hidden activation (``mlp.*``)
``path``   a sender and a receiver head         ``n_layers``, ``n_heads``
``layer``  layers (``layers=``)                 ``n_layers``
``model``  none                                 (the whole model)
=========  ==================================  =============================================

Positions are a further index of the head kinds with a query axis (``query_pos=``). Each
:class:`Kind` entry of :data:`KIND_TABLE` holds everything the code needs to know about it:

==================  ========================================================================
field               read by
==================  ========================================================================
``scope``           ``Target`` (which of ``heads=`` / ``layers=`` it takes, its label), the
                    decomposition's counts (``interp.ranking``)
``hook``,           the reference engine (``run_with_hooks``), ``capture_post``, the fast
``head_axis``       engine's hooks (``interp.patching.fast``); TransformerLens hook name
                    ``blocks.{layer}.<hook>`` and the axis of the index set's unit in its
                    activation (the head; the key/value head; the neuron)
``query_pos``       ``Target`` (whether ``query_pos=`` is allowed)
``weights``,        weight swapping (``interp.patching._weights``): the attention projections
``shared_bias``     of a head (``q``, ``k``, ``v``, ``o``), the block submodules of a layer
                    (``"mlp"``; ``""`` = the whole block) or the model attributes
                    (``"embed"``) whose parameters are swapped; ``shared_bias``: also the
                    output bias ``b_O`` when every head of a layer is in the target
``tl_setter``,      the reference engine: the TransformerLens ``patching`` setter used for one
``tl_activation``   head / one layer (``generic_activation_patch``), and its activation name
``fast``            the fast engine's way of computing the kind (see below); None: full
                    forwards only
``through_qk_norm`` the fast engine: the kind's change passes through the query / key norm,
                    so it reaches every head where that norm spans all heads (OLMo-2)
``component``       the decomposition (``interp.decomposition.COMPONENTS``): patched over every
                    head / layer as one row, with this label; None: not a row
==================  ========================================================================

``fast`` values: ``"hook"`` (a head activation replaced by a hook; also inside the tail of a
joint patch), ``"weights"`` (the head's weight slices swapped for one call of the block; with
``"o"`` among them the head's output runs through the post ``W_O``), ``"path"`` (a sender
head's output into a receiver head's input), ``"mlp_out"`` (a layer's MLP output replaced).

Adding a kind is one entry in :data:`_BUILT_IN` below (plus, if it wants one, an exact shortcut
in the fast engine: ``interp.patching.fast.changes.Z_SHORTCUTS``). :func:`register` adds one at
run time (extensions, tests); :func:`unregister` removes it.

Sources: TransformerLens ``patching`` (activation kinds; ``get_act_patch_attn_head_*``),
Wang et al. 2022 (arXiv:2211.00593, path patching), Olsson et al. 2022 (QK / OV circuits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "FAST_WAYS",
    "FULL_FORWARD_SCOPES",
    "KIND_TABLE",
    "SCOPES",
    "SCOPE_INDEX",
    "Kind",
    "get_kind",
    "kind_names",
    "register",
    "unregister",
]

SCOPES = ("head", "kv_head", "neuron", "path", "layer", "model")
#: each per-unit scope: the component whose hooks it indexes (hook prefix inside block ``l``), the
#: model dimension its unit ranges over, the ``Target`` field of its index set and the unit's
#: letter in labels (``L1H0``, ``L1KV0``, ``L1N7``): a neuron declared as a head kind is refused here
SCOPE_INDEX = {
    "head": ("attn.", "n_heads", "heads", "H"),
    "kv_head": ("attn.", "n_key_value_heads", "kv_heads", "KV"),
    "neuron": ("mlp.", "d_mlp", "neurons", "N"),
}
#: per-unit scopes patched by full forwards only (the fast engine's units are heads and layers)
FULL_FORWARD_SCOPES = ("kv_head", "neuron")
#: the fast engine's ways of computing a kind, by the scope they apply to
FAST_WAYS = {"hook": "head", "weights": "head", "path": "path", "mlp_out": "layer"}
#: the TransformerLens setters the reference engine knows (``transformer_lens.patching``; "whole_layer":
#: the post activation of the whole layer, every position)
TL_SETTERS = ("layer_head_pattern_patch_setter", "layer_head_vector_patch_setter", "whole_layer")


@dataclass(frozen=True)
class Kind:
    """One kind of patch target (see the module docstring for who reads which field).

    Attributes:
        name: the kind's name (``Target.kind``).
        scope: ``"head"`` (``heads=``), ``"kv_head"`` (``kv_heads=``: key/value heads of
            grouped-query attention), ``"neuron"`` (``neurons=``: MLP neurons), ``"path"``
            (a sender head and a receiver head), ``"layer"`` (``layers=``) or ``"model"`` (no scope).
        description: what is swapped, one line.
        hook: TransformerLens hook inside block ``l`` (``"attn.hook_pattern"``), None for weights.
        head_axis: axis of the unit in the hook's activation: the head (``[batch, head, q, k]``:
            1; ``[batch, pos, head, d_head]``: 2), the key/value head (``[batch, pos, kv_head,
            d_head]``: 2), the neuron (``[batch, pos, d_mlp]``: 2); None: no unit axis (a layer
            activation).
        query_pos: the activation has a query axis right after the head axis (``query_pos=``).
        weights: swapped parameters (see the module docstring); empty for activations.
        shared_bias: head weight kinds: also ``b_O`` when the target holds every head of a layer.
        tl_setter, tl_activation: TransformerLens's setter (one of ``TL_SETTERS``) and
            ``activation_name`` for ``generic_activation_patch`` of one head / one layer.
        fast: the fast engine's way (one of ``FAST_WAYS``), None for full forwards only.
        through_qk_norm: the change passes through the query / key norm.
        component: label of the decomposition row (``"all patterns"``), None for no row.

    Raises:
        ValueError: a field that does not fit the scope (one line naming it).
    """

    name: str
    scope: Literal["head", "kv_head", "neuron", "path", "layer", "model"]
    description: str
    hook: str | None = None
    head_axis: int | None = None
    query_pos: bool = False
    weights: tuple[str, ...] = ()
    shared_bias: bool = False
    tl_setter: str | None = None
    tl_activation: str | None = None
    fast: str | None = None
    through_qk_norm: bool = False
    component: str | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"kind name {self.name!r} must be a Python identifier")
        if self.scope not in SCOPES:
            raise ValueError(f"kind {self.name!r}: scope {self.scope!r}; valid: {', '.join(SCOPES)}")
        if self.hook is not None and self.weights:
            raise ValueError(
                f"kind {self.name!r} has both a hook and weights: an activation or a weight kind, not both"
            )
        if self.scope in SCOPE_INDEX and self.hook is not None:
            prefix, bound, _, _ = SCOPE_INDEX[self.scope]
            if not self.hook.startswith(prefix):
                fits = [s for s, index in SCOPE_INDEX.items() if self.hook.startswith(index[0])]
                raise ValueError(
                    f"kind {self.name!r} has scope {self.scope!r} (units up to {bound}) but hook {self.hook!r} "
                    f"is not a {prefix}* hook; "
                    + (f"declare it with scope {fits[0]!r}" if fits else "a per-layer kind takes scope 'layer'")
                )
            if self.head_axis is None:
                raise ValueError(
                    f"kind {self.name!r} is per {self.scope} with a hook: give head_axis (the unit's axis)"
                )
        if self.scope in FULL_FORWARD_SCOPES and (
            self.weights or self.hook is None or self.query_pos or self.fast is not None
        ):
            raise ValueError(
                f"kind {self.name!r}: scope {self.scope!r} takes a hook with head_axis, no weights, "
                "query_pos or fast way (it is patched by full forwards)"
            )
        if self.fast is not None and FAST_WAYS.get(self.fast) != self.scope:
            raise ValueError(
                f"kind {self.name!r}: fast={self.fast!r} does not fit scope {self.scope!r}; valid: "
                + ", ".join(f"{way} ({scope})" for way, scope in FAST_WAYS.items())
            )
        if (self.fast == "hook" and self.hook is None) or (self.fast == "weights" and not self.weights):
            raise ValueError(
                f"kind {self.name!r}: fast={self.fast!r} needs a {'hook' if self.fast == 'hook' else 'weights'}"
            )
        if self.tl_setter is not None and (self.tl_setter not in TL_SETTERS or self.hook is None):
            raise ValueError(
                f"kind {self.name!r}: tl_setter {self.tl_setter!r} needs a hook and one of {', '.join(TL_SETTERS)}"
            )

    @property
    def is_weights(self) -> bool:
        """The kind swaps parameters (not an activation)."""
        return bool(self.weights)

    def hook_name(self, layer: int) -> str:
        """``blocks.{layer}.<hook>``.

        Raises:
            ValueError: a weight kind (no hook).
        """
        if self.hook is None:
            raise ValueError(f"kind {self.name!r} has no hook (it swaps weights)")
        return f"blocks.{layer}.{self.hook}"


_H, _V = "layer_head_pattern_patch_setter", "layer_head_vector_patch_setter"

#: the built-in kinds, in the order of ``KINDS`` and of the decomposition's rows
_BUILT_IN = (
    Kind(
        "pattern",
        "head",
        "attention pattern (post-softmax), [batch, head, query_pos, key_pos]",
        hook="attn.hook_pattern",
        head_axis=1,
        query_pos=True,
        tl_setter=_H,
        fast="hook",
        component="all patterns",
    ),
    Kind(
        "q",
        "head",
        "queries (before rotary), [batch, pos, head, d_head]",
        hook="attn.hook_q",
        head_axis=2,
        tl_setter=_V,
        fast="hook",
        through_qk_norm=True,
        component="all queries",
    ),
    Kind(
        "k",
        "head",
        "keys (before rotary), [batch, pos, head, d_head]",
        hook="attn.hook_k",
        head_axis=2,
        tl_setter=_V,
        fast="hook",
        through_qk_norm=True,
        component="all keys",
    ),
    Kind(
        "v",
        "head",
        "values, [batch, pos, head, d_head]",
        hook="attn.hook_v",
        head_axis=2,
        tl_setter=_V,
        fast="hook",
        component="all values",
    ),
    Kind(
        "z",
        "head",
        "the head's output before W_O, [batch, pos, head, d_head]",
        hook="attn.hook_z",
        head_axis=2,
        tl_setter=_V,
        fast="hook",
        component="all head outputs (hook_z)",
    ),
    Kind(
        "qk",
        "head",
        "weights W_Q, W_K, b_Q, b_K of the head",
        weights=("q", "k"),
        fast="weights",
        through_qk_norm=True,
        component="all QK weights",
    ),
    Kind(
        "ov",
        "head",
        "weights W_V, b_V, W_O of the head; b_O too for every head of a layer",
        weights=("v", "o"),
        shared_bias=True,
        fast="weights",
        component="all OV weights",
    ),
    Kind(
        "path",
        "path",
        "one head's output ((z_post - z_pre) @ W_O) added only to a later head's q, k or v input",
        fast="path",
        through_qk_norm=True,
    ),
    Kind(
        "mlp",
        "layer",
        "MLP output, [batch, pos, d_model]",
        hook="hook_mlp_out",
        tl_setter="whole_layer",
        tl_activation="mlp_out",
        fast="mlp_out",
        component="all MLP outputs",
    ),
    Kind(
        "k_kv",
        "kv_head",
        "keys of a key/value head (grouped-query attention), [batch, pos, kv_head, d_head]",
        hook="attn.hook_k",
        head_axis=2,
    ),
    Kind(
        "v_kv",
        "kv_head",
        "values of a key/value head (grouped-query attention), [batch, pos, kv_head, d_head]",
        hook="attn.hook_v",
        head_axis=2,
    ),
    Kind(
        "neuron",
        "neuron",
        "MLP neurons: the MLP's hidden activation after the nonlinearity, [batch, pos, d_mlp]",
        hook="mlp.hook_post",
        head_axis=2,
    ),
    Kind("mlp_weights", "layer", "every MLP parameter of the layer", weights=("mlp",), component="all MLP weights"),
    Kind("block", "layer", "every parameter of the block (norms, attention, MLP)", weights=("",)),
    Kind("embed", "model", "the token embedding W_E", weights=("embed",), component="embedding"),
    Kind("unembed", "model", "the unembedding W_U, b_U", weights=("unembed",), component="unembedding"),
)

#: name -> :class:`Kind`, every kind the engines know (built-in ones first, in ``_BUILT_IN`` order)
KIND_TABLE: dict[str, Kind] = {k.name: k for k in _BUILT_IN}


def get_kind(name: str) -> Kind:
    """The table entry of kind ``name``.

    Raises:
        ValueError: an unknown kind (the message lists the valid ones).
    """
    try:
        return KIND_TABLE[name]
    except (KeyError, TypeError):
        raise ValueError(f"target kind {name!r}; valid: {', '.join(KIND_TABLE)}") from None


def kind_names(scope: str | None = None) -> tuple[str, ...]:
    """Names of the kinds of ``scope`` (``None``: every kind), in table order.

    Raises:
        ValueError: an unknown scope.
    """
    if scope is not None and scope not in SCOPES:
        raise ValueError(f"scope {scope!r}; valid: {', '.join(SCOPES)}")
    return tuple(name for name, k in KIND_TABLE.items() if scope is None or k.scope == scope)


def register(kind: Kind) -> Kind:
    """Add ``kind`` to the table (the engines pick it up; ``KINDS``-style tuples of
    ``interp.patching.targets`` list the built-in kinds only).

    Raises:
        ValueError: not a ``Kind``, or a name already in the table.
    """
    if not isinstance(kind, Kind):
        raise ValueError(f"register takes an interp.patching.kinds.Kind, got {type(kind).__name__}")
    if kind.name in KIND_TABLE:
        raise ValueError(f"kind {kind.name!r} is already in the table; unregister it first")
    KIND_TABLE[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind added by :func:`register`.

    Raises:
        ValueError: an unknown kind, or a built-in one.
    """
    if name not in KIND_TABLE or any(k.name == name for k in _BUILT_IN):
        raise ValueError(
            f"kind {name!r} was not added by register(); registered: "
            f"{', '.join(n for n in KIND_TABLE if n not in {k.name for k in _BUILT_IN}) or 'none'}"
        )
    del KIND_TABLE[name]
