"""What can be patched from the post checkpoint into the pre checkpoint: ``Target``.

A target names a component and an index set (a *location*, in pyvene's sense).  Activation targets replace the pre checkpoint's
activation at a hook by the post checkpoint's activation on the same prompts (all positions,
unless stated); weight targets swap the post checkpoint's parameters into the pre checkpoint for
one forward.  Per-head kinds (scope: one head, a set of heads, or ``heads=None`` = all):

================  ======================================================================
kind              what is swapped (hook or parameters of block ``l``)
================  ======================================================================
``pattern``       ``attn.hook_pattern`` (post-softmax), ``[batch, head, query_pos, key_pos]``;
                  optionally at one destination (query) position only
``q``/``k``/``v`` ``attn.hook_q`` / ``hook_k`` / ``hook_v`` (before rotary), ``[batch, pos, head, d_head]``
``z``             ``attn.hook_z``, the head's output before ``W_O``
``qk``            weights ``W_Q``, ``W_K``, ``b_Q``, ``b_K`` of the head
``ov``            weights ``W_V``, ``b_V``, ``W_O`` of the head; ``b_O`` (shared by the layer's
                  heads) too when the target holds every head of that layer
``path``          one head's output (``(z_post - z_pre) @ W_O``) added only to a later head's
                  query, key or value input (direct path patching, Wang et al. 2022)
================  ======================================================================

Per-key/value-head kinds (``kv_heads=``: ``(layer, kv_head)`` pairs, ``kv_head`` in
``[0, n_key_value_heads)``; None = all): ``k_kv``, ``v_kv`` (``attn.hook_k`` / ``hook_v``, which
hold ``n_key_value_heads`` heads under grouped-query attention, where the per-head ``k`` / ``v``
are refused). Per-neuron kind (``neurons=``: ``(layer, neuron)`` pairs; ``neurons=None`` = every
neuron of every layer): ``neuron`` (``mlp.hook_post``, the MLP's hidden activation after the
nonlinearity, ``[batch, pos, d_mlp]``). Both by full forwards, with either method.

Per-layer kinds (``layers=None`` = all): ``mlp`` (``hook_mlp_out``, activation), ``mlp_weights``
(the MLP's parameters), ``block`` (every parameter of the block: norms, attention, MLP).
Whole-model kinds: ``embed`` (token embedding ``W_E``), ``unembed`` (``W_U``, ``b_U``).

Each kind's facts (scope, hook, head axis, weight slices, TransformerLens setter, fast support,
decomposition row) are one entry of the kinds table :data:`interp.patching.kinds.KIND_TABLE`,
which ``Target`` and both engines read; a new kind is one entry there.

Sources: TransformerLens ``patching`` (activation targets; ``get_act_patch_attn_head_*``),
Wang et al. 2022 (arXiv:2211.00593, path patching), Olsson et al. 2022 (QK / OV circuits).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from interp.patching.kinds import KIND_TABLE, SCOPE_INDEX, get_kind, kind_names

__all__ = [
    "ACTIVATION_KINDS",
    "HEAD_KINDS",
    "KINDS",
    "KV_HEAD_KINDS",
    "LAYER_KINDS",
    "MODEL_KINDS",
    "NEURON_KINDS",
    "WEIGHT_KINDS",
    "Target",
    "block_weights",
    "embedding",
    "head_output",
    "keys",
    "kv_keys",
    "kv_values",
    "mlp_output",
    "mlp_weights",
    "neurons",
    "ov_weights",
    "path",
    "pattern",
    "qk_weights",
    "queries",
    "unembedding",
    "values",
]

#: the built-in kinds of each scope, in table order (:data:`interp.patching.kinds.KIND_TABLE`; a kind
#: added by :func:`interp.patching.kinds.register` is in the table, not in these tuples)
HEAD_KINDS = kind_names("head")
NEURON_KINDS = kind_names("neuron")
KV_HEAD_KINDS = kind_names("kv_head")
LAYER_KINDS = kind_names("layer")
MODEL_KINDS = kind_names("model")
KINDS = kind_names()
#: kinds patched by replacing one hook's activation (a TransformerLens patch exists for each)
ACTIVATION_KINDS = tuple(k.name for k in KIND_TABLE.values() if k.hook is not None)
WEIGHT_KINDS = tuple(k.name for k in KIND_TABLE.values() if k.is_weights)
#: hook (per block) of each built-in activation kind; the head axis of its activation
HOOKS = {k.name: (k.hook, k.head_axis) for k in KIND_TABLE.values() if k.hook is not None}


def hook_name(kind: str, layer: int) -> str:
    """``blocks.{layer}.<hook>`` of an activation kind (:meth:`interp.patching.kinds.Kind.hook_name`).

    Raises:
        ValueError: an unknown kind or a weight kind.
    """
    return get_kind(kind).hook_name(layer)


@dataclass(frozen=True)
class Target:
    """One patch: a component kind and its index set (see the module docstring for the kinds).

    Attributes:
        kind: one of ``KINDS``.
        heads: per-head kinds: the ``(layer, head)`` pairs patched jointly; None = every head.
            ``path``: ``((sender_layer, sender_head),)``.
        layers: per-layer kinds: the layers patched jointly; None = every layer.
        neurons: per-neuron kinds: the ``(layer, neuron)`` pairs patched jointly; None = every
            neuron of every layer.
        kv_heads: per-key/value-head kinds: the ``(layer, kv_head)`` pairs patched jointly; None =
            every key/value head of every layer.
        query_pos: ``pattern`` only: patch only this destination (query) position (negative
            counts from the end, ``-1`` = the last position); None = every position.
        receiver: ``path`` only: the later head ``(layer, head)`` whose input gets the sender's output.
        receiver_input: ``path`` only: ``"q"``, ``"k"`` or ``"v"``.

    Raises:
        ValueError: an unknown kind, a scope that does not fit the kind, or a malformed pair.
    """

    kind: str
    heads: tuple[tuple[int, int], ...] | None = None
    layers: tuple[int, ...] | None = None
    query_pos: int | None = None
    receiver: tuple[int, int] | None = None
    receiver_input: str = "q"
    neurons: tuple[tuple[int, int], ...] | None = None
    kv_heads: tuple[tuple[int, int], ...] | None = None

    def __post_init__(self) -> None:
        scope = get_kind(self.kind).scope  # an unknown kind: ValueError naming the valid ones
        if self.heads is not None:
            object.__setattr__(self, "heads", tuple(_pair(h) for h in self.heads))
        if self.layers is not None:
            object.__setattr__(self, "layers", tuple(int(l) for l in self.layers))
        for unit_scope, (_, _, field, _) in SCOPE_INDEX.items():  # kv_heads=, neurons=: their scope only
            if unit_scope == "head" or getattr(self, field) is None:
                continue
            object.__setattr__(self, field, tuple(_pair(u, unit_scope) for u in getattr(self, field)))
            if scope != unit_scope:
                raise ValueError(
                    f"target {self.kind!r} takes no {field}= (valid for {', '.join(kind_names(unit_scope))})"
                )
        if self.heads is not None and scope in SCOPE_INDEX and scope != "head":
            field = SCOPE_INDEX[scope][2]
            raise ValueError(f"target {self.kind!r} is per {scope}: give {field}=((layer, {scope}), ...), not heads=")
        if self.heads is not None and scope not in ("head", "path"):
            raise ValueError(f"target {self.kind!r} is per layer or per model: give layers=, not heads=")
        if self.layers is not None and scope != "layer":
            raise ValueError(f"target {self.kind!r} takes no layers= (valid for {', '.join(kind_names('layer'))})")
        if self.query_pos is not None and not get_kind(self.kind).query_pos:
            valid = ", ".join(repr(k.name) for k in KIND_TABLE.values() if k.query_pos)
            raise ValueError(f"query_pos applies to {valid} targets only, got kind {self.kind!r}")
        if scope == "path":
            if self.heads is None or len(self.heads) != 1 or self.receiver is None:
                raise ValueError(
                    "a 'path' target needs heads=((sender_layer, sender_head),) and receiver=(layer, head)"
                )
            object.__setattr__(self, "receiver", _pair(self.receiver))
            if self.receiver[0] <= self.heads[0][0]:
                raise ValueError(f"path receiver {self.receiver} must be in a later layer than sender {self.heads[0]}")
            if self.receiver_input not in ("q", "k", "v"):
                raise ValueError(f"receiver_input={self.receiver_input!r}; valid: 'q', 'k', 'v'")

    @property
    def is_weights(self) -> bool:
        """The target swaps parameters (its kind has ``weights`` in the kinds table)."""
        return get_kind(self.kind).is_weights

    def resolved_heads(self, n_layers: int, n_heads: int) -> tuple[tuple[int, int], ...]:
        """The patched ``(layer, head)`` pairs (every head when ``heads`` is None), range-checked.

        Raises:
            ValueError: a head out of range.
        """
        heads = self.heads if self.heads is not None else tuple((l, h) for l in range(n_layers) for h in range(n_heads))
        for layer, head in heads + ((self.receiver,) if self.receiver is not None else ()):
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise ValueError(
                    f"head {(layer, head)} out of range: layer in [0, {n_layers - 1}], head in [0, {n_heads - 1}]"
                )
        return heads

    def resolved_units(self, n_layers: int, n_units: int) -> tuple[tuple[int, int], ...]:
        """The patched ``(layer, unit)`` pairs of a per-unit target (heads, key/value heads or
        neurons: the kind's scope; every unit of every layer when its field is None), range-checked
        against ``n_units`` (``n_heads``, ``n_key_value_heads``, ``d_mlp``).

        Raises:
            ValueError: a target that is not per unit, or a unit out of range.
        """
        scope = get_kind(self.kind).scope
        if scope not in SCOPE_INDEX:
            raise ValueError(f"target {self.kind!r} has scope {scope!r}, not a per-unit one ({', '.join(SCOPE_INDEX)})")
        given = getattr(self, SCOPE_INDEX[scope][2])
        units = given if given is not None else tuple((l, u) for l in range(n_layers) for u in range(n_units))
        for layer, unit in units:
            if not (0 <= layer < n_layers and 0 <= unit < n_units):
                raise ValueError(
                    f"{scope} {(layer, unit)} out of range: layer in [0, {n_layers - 1}], {scope} in [0, {n_units - 1}]"
                )
        return units

    def resolved_layers(self, n_layers: int) -> tuple[int, ...]:
        """The patched layers (every layer when ``layers`` is None), range-checked.

        Raises:
            ValueError: a layer out of range ``[0, n_layers - 1]``.
        """
        layers = self.layers if self.layers is not None else tuple(range(n_layers))
        bad = [l for l in layers if not 0 <= l < n_layers]
        if bad:
            raise ValueError(f"layers {bad} out of range [0, {n_layers - 1}]")
        return layers

    def label(self) -> str:
        """Short text for tables: ``pattern L1H0+L0H2``, ``mlp all``, ``path L0H2->L1H0.k``,
        ``neuron L1N7+L1N30``."""
        scope = get_kind(self.kind).scope
        if scope == "path":
            (sl, sh), (rl, rh) = self.heads[0], self.receiver
            return f"{self.kind} L{sl}H{sh}->L{rl}H{rh}.{self.receiver_input}"
        if scope == "model":
            return self.kind
        if scope == "layer":
            where = "all" if self.layers is None else "+".join(f"L{l}" for l in self.layers)
        elif scope in SCOPE_INDEX and scope != "head":
            _, _, field, letter = SCOPE_INDEX[scope]
            units = getattr(self, field)
            where = "all" if units is None else "+".join(f"L{l}{letter}{u}" for l, u in units)
        else:
            where = "all" if self.heads is None else "+".join(f"L{l}H{h}" for l, h in self.heads)
        pos = "" if self.query_pos is None else f"@q{self.query_pos}"
        return f"{self.kind}{pos} {where}"


def _pair(item, unit: str = "head") -> tuple[int, int]:
    try:
        layer, index = (int(x) for x in item)
    except (TypeError, ValueError):
        raise ValueError(f"each {unit} must be a (layer, {unit}) pair, got {item!r}") from None
    return layer, index


def _heads(heads: Iterable | None) -> tuple | None:
    return None if heads is None else tuple(heads)


def pattern(heads: Sequence[tuple[int, int]] | None = None, query_pos: int | None = None) -> Target:
    """Attention pattern (``hook_pattern``, post-softmax) of ``heads``; optionally one query position."""
    return Target("pattern", _heads(heads), query_pos=query_pos)


def queries(heads: Sequence[tuple[int, int]] | None = None) -> Target:
    """Queries (``hook_q``) of ``heads``."""
    return Target("q", _heads(heads))


def keys(heads: Sequence[tuple[int, int]] | None = None) -> Target:
    """Keys (``hook_k``) of ``heads``."""
    return Target("k", _heads(heads))


def values(heads: Sequence[tuple[int, int]] | None = None) -> Target:
    """Values (``hook_v``) of ``heads``."""
    return Target("v", _heads(heads))


def head_output(heads: Sequence[tuple[int, int]] | None = None) -> Target:
    """Head output before ``W_O`` (``hook_z``) of ``heads``."""
    return Target("z", _heads(heads))


def qk_weights(heads: Sequence[tuple[int, int]] | None = None) -> Target:
    """QK weights (``W_Q``, ``W_K``, ``b_Q``, ``b_K``) of ``heads``."""
    return Target("qk", _heads(heads))


def ov_weights(heads: Sequence[tuple[int, int]] | None = None) -> Target:
    """OV weights (``W_V``, ``b_V``, ``W_O``; ``b_O`` for whole layers) of ``heads``."""
    return Target("ov", _heads(heads))


def path(sender: tuple[int, int], receiver: tuple[int, int], receiver_input: str = "q") -> Target:
    """Sender head's output patched only into the receiver head's ``receiver_input`` (q, k or v).

    Source: Wang et al. 2022, "Interpretability in the Wild" (path patching).
    """
    return Target("path", (sender,), receiver=receiver, receiver_input=receiver_input)


def mlp_output(layers: Sequence[int] | None = None) -> Target:
    """MLP output (``hook_mlp_out``) of ``layers``."""
    return Target("mlp", layers=None if layers is None else tuple(layers))


def neurons(pairs: Sequence[tuple[int, int]] | None = None) -> Target:
    """MLP neurons (``mlp.hook_post``, the hidden activation after the nonlinearity) at the
    ``(layer, neuron)`` pairs, patched jointly; None: every neuron of every layer."""
    return Target("neuron", neurons=None if pairs is None else tuple(pairs))


def kv_keys(pairs: Sequence[tuple[int, int]] | None = None) -> Target:
    """Keys (``hook_k``) of the key/value heads ``(layer, kv_head)`` (grouped-query attention)."""
    return Target("k_kv", kv_heads=None if pairs is None else tuple(pairs))


def kv_values(pairs: Sequence[tuple[int, int]] | None = None) -> Target:
    """Values (``hook_v``) of the key/value heads ``(layer, kv_head)`` (grouped-query attention)."""
    return Target("v_kv", kv_heads=None if pairs is None else tuple(pairs))


def mlp_weights(layers: Sequence[int] | None = None) -> Target:
    """Every MLP parameter of ``layers``."""
    return Target("mlp_weights", layers=None if layers is None else tuple(layers))


def block_weights(layers: Sequence[int] | None = None) -> Target:
    """Every parameter of blocks ``layers`` (norms, attention, MLP)."""
    return Target("block", layers=None if layers is None else tuple(layers))


def embedding() -> Target:
    """The token embedding ``W_E``."""
    return Target("embed")


def unembedding() -> Target:
    """The unembedding ``W_U`` and ``b_U``."""
    return Target("unembed")
