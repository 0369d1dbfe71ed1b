"""Synthetic next-token tasks whose true attention pattern is known.

Two tasks from Baherwani et al. 2026 (arXiv 2606.25010: the linear map and the cellular
automata; the paper's numbers each check uses are quoted in docs/results-synthetic.md):

* :class:`LinearMapTask`: ``x_{t+1} = A x_t mod 2`` with a fixed binary ``A`` (exactly ``s``
  ones per row). Output bit ``i`` of state ``t+1`` depends on the bits ``j`` of state ``t``
  with ``A[i, j] = 1``.
* :class:`CellularAutomatonTask`: ``S`` cells with ``k`` states, each updated from the window
  ``(i-1, i, i+1) mod S`` of the previous state by a lookup-table rule; every sequence uses one
  rule from a pool of ``n_rules``, so the rule must be inferred from context.

Token format (both tasks): a sequence is ``T + 1`` states of ``S`` tokens concatenated, no
separators, ``seq_len = (T + 1) * S``. The linear map has vocabulary 2 (bits), the cellular
automaton vocabulary ``k`` (cell states).

Position conventions, all indexed along the model's ``pos`` axis (length ``seq_len``):

* The logits at *query position* ``q`` predict token ``q + 1``. Token ``p = (t+1)·S + i``
  (cell ``i`` of state ``t + 1``) is therefore predicted at ``q = p - 1``: the off-by-one that
  :attr:`SyntheticTask.pattern_mask` encodes. For ``i = 0`` the query is the last token of
  state ``t`` itself.
* ``pattern_mask[q, k] = 1`` when key ``k`` is a true key for the prediction made at ``q``.
  Every true key lies in the previous state, so it is always causally visible (``k ≤ q``).
* ``loss_mask[q]``: the prediction at ``q`` counts in the loss (every ``q < seq_len - 1``, as
  in the paper: loss on all ``2S − 1`` next-token positions for ``T = 1``).
* ``target_mask[q]``: the prediction at ``q`` is a transition token (a cell of a state
  ``t ≥ 1``), i.e. a position whose pattern row is non-empty.
* ``output_index[q]``: the cell index ``i`` that ``q`` predicts when ``target_mask[q]``,
  else ``-1`` (used for "loss per output position").

Data are generated on the fly from seeds: the task structure (``A``, the rule pool) comes from
``data_seed``; the sequences from a ``torch.Generator`` the caller owns.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

CA_WINDOW = 3  # cells i-1, i, i+1 (periodic boundary)


def _check_int(name: str, value: int, low: int, what: str) -> None:
    """One-line ValueError when ``value < low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}={value!r} is invalid: {what}")


def _structure_generator(data_seed: int, salt: int) -> torch.Generator:
    """CPU generator for the task structure; ``salt`` keeps independent draws apart."""
    return torch.Generator().manual_seed(int(data_seed) * 1_000_003 + salt)


@dataclass
class SyntheticTask(ABC):
    """Common interface: sizes, masks, a sampler and the loss floor.

    Subclasses set :attr:`d_vocab` and implement :meth:`sample`, :meth:`true_keys` and
    :meth:`_compute_floor`.
    """

    S: int
    T: int = 1

    name: str = field(init=False, default="")
    d_vocab: int = field(init=False, default=0)
    pattern_mask: Float[Tensor, "query_pos key_pos"] = field(init=False, repr=False)
    loss_mask: Bool[Tensor, " pos"] = field(init=False, repr=False)
    target_mask: Bool[Tensor, " pos"] = field(init=False, repr=False)
    output_index: Int[Tensor, " pos"] = field(init=False, repr=False)
    _floor: float | None = field(init=False, default=None, repr=False)

    @property
    def seq_len(self) -> int:
        """Tokens per sequence: ``(T + 1) * S``."""
        return (self.T + 1) * self.S

    @property
    def plateau_loss(self) -> float:
        """Loss of the best context-free predictor, ``ln d_vocab`` nats.

        Every token of both tasks is marginally uniform (an XOR of ``s ≥ 1`` uniform bits; a
        uniformly random table entry), so a model that ignores the true keys sits at
        ``ln d_vocab``: the loss plateau before emergence (paper: initial loss ln 2 / ln 4).
        """
        return math.log(self.d_vocab)

    @property
    def floor(self) -> float | None:
        """Lowest achievable mean loss over :attr:`loss_mask` positions, nats per token."""
        if self._floor is None:
            self._floor = self._compute_floor()
        return self._floor

    @abstractmethod
    def true_keys(self, i: int) -> list[int]:
        """Cells ``j`` of state ``t`` that determine cell ``i`` of state ``t + 1``."""

    @abstractmethod
    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Int[Tensor, "batch pos"]:
        """Draw ``batch_size`` sequences on ``generator``'s device."""

    @abstractmethod
    def _compute_floor(self) -> float | None: ...

    def _build_masks(self) -> None:
        """Fill pattern/loss/target masks and output_index from :meth:`true_keys`."""
        S, T, L = self.S, self.T, self.seq_len
        pattern = torch.zeros(L, L)
        output_index = torch.full((L,), -1, dtype=torch.long)
        for t in range(T):
            for i in range(S):
                q = (t + 1) * S + i - 1  # query predicting cell i of state t+1
                output_index[q] = i
                for j in self.true_keys(i):
                    pattern[q, t * S + j] = 1.0
        self.pattern_mask = pattern
        self.output_index = output_index
        self.target_mask = output_index >= 0
        loss_mask = torch.ones(L, dtype=torch.bool)
        loss_mask[-1] = False  # the last position has no next token
        self.loss_mask = loss_mask

    def describe(self) -> dict:
        """Plain-JSON description (sizes, floor) for summaries."""
        return {
            "task": self.name,
            "S": self.S,
            "T": self.T,
            "d_vocab": self.d_vocab,
            "seq_len": self.seq_len,
            "floor": self.floor,
            "plateau_loss": self.plateau_loss,
        }


@dataclass
class LinearMapTask(SyntheticTask):
    """Sequences ``x_0, A x_0, A² x_0, …`` (mod 2) of ``S``-bit states.

    Source: Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning Sparse
    Attention Patterns" (the linear-map task).

    Args:
        S: state size (bits per state), ≥ 1.
        s: sparsity, ones per row of ``A``, ``1 ≤ s ≤ S``.
        T: transitions per sequence (``T + 1`` states), ≥ 1; paper default 1 (``2S`` tokens).
        data_seed: seeds ``A``. Each row is an independent uniformly random ``s``-subset of
            the ``S`` columns (our guess: the paper states exactly ``s`` ones per row, not how
            the rows are drawn).
        A: optional ``Int[Tensor, "S S"]`` 0/1 map with ``s`` ones per row, used instead of
            sampling one (``data_seed`` is then ignored for ``A``).

    Raises:
        ValueError: ``S < 1``, ``s`` outside ``[1, S]``, ``T < 1``, a given ``A`` of the wrong
            shape, not 0/1, or without exactly ``s`` ones per row.
    """

    s: int = 3
    data_seed: int = 0
    A: Int[Tensor, "S S"] | None = field(default=None, repr=False)
    name: str = field(init=False, default="linear-map")

    def __post_init__(self) -> None:
        _check_int("S", self.S, 1, "state size S must be an integer ≥ 1")
        _check_int("T", self.T, 1, "T (transitions per sequence) must be an integer ≥ 1")
        if not isinstance(self.s, int) or not 1 <= self.s <= self.S:
            raise ValueError(f"s={self.s!r} is invalid: sparsity must satisfy 1 ≤ s ≤ S={self.S}")
        self.d_vocab = 2
        if self.A is None:
            self.A = self._sample_matrix()
        else:
            self.A = self._check_matrix(torch.as_tensor(self.A))
        self._build_masks()

    def _sample_matrix(self) -> Int[Tensor, "S S"]:
        gen = _structure_generator(self.data_seed, salt=1)
        # argsort of uniform noise = a uniformly random permutation per row; its first s
        # entries are a uniform s-subset.
        cols = torch.rand(self.S, self.S, generator=gen).argsort(dim=1)[:, : self.s]
        return torch.zeros(self.S, self.S, dtype=torch.long).scatter_(1, cols, 1)

    def _check_matrix(self, A: Tensor) -> Int[Tensor, "S S"]:
        if A.shape != (self.S, self.S) or not bool(((A == 0) | (A == 1)).all()):
            raise ValueError(f"A of shape {tuple(A.shape)} is invalid: need a 0/1 matrix of shape ({self.S}, {self.S})")
        rows = A.long().sum(1)
        if not bool((rows == self.s).all()):
            raise ValueError(f"A has row sums {rows.tolist()}: every row needs exactly s={self.s} ones")
        return A.long()

    def true_keys(self, i: int) -> list[int]:
        """Cells ``j`` of state ``t`` with ``A[i, j] = 1``, which determine bit ``i`` of state ``t + 1``.

        Returns:
            ``s`` cell indices in ``[0, S)``, ascending.
        """
        return torch.nonzero(self.A[i]).flatten().tolist()

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Int[Tensor, "batch pos"]:
        """Random ``x_0`` (uniform bits) then ``T`` transitions; tokens are the bits.

        Returns:
            ``Int[Tensor, "batch pos"]`` with values in {0, 1}, ``pos = (T+1)·S``, on the
            generator's device (CPU when ``generator`` is None).
        """
        device = generator.device if generator is not None else torch.device("cpu")
        # float matmul: integer matmul is unsupported on CUDA; sums ≤ S are exact in float32.
        A_t = self.A.to(device=device, dtype=torch.float32).T
        x = torch.randint(0, 2, (batch_size, self.S), generator=generator, device=device)
        states = [x]
        for _ in range(self.T):
            x = torch.remainder(x.float() @ A_t, 2).long()
            states.append(x)
        return torch.cat(states, dim=1)

    def _compute_floor(self) -> float:
        """``(S − 1)·ln 2 / ((T+1)·S − 1)``; for ``T = 1`` the paper's ``(S−1)/(2S−1)·ln 2``.

        The ``S − 1`` predicted bits of ``x_0`` are uniform (ln 2 each); every transition bit
        is a deterministic function of the previous state (A is fixed for the dataset), so a
        perfect model pays nothing there. Paper: 0.3235 / 0.3354 / 0.3411 for S = 8/16/32.
        """
        return (self.S - 1) * math.log(2) / (self.seq_len - 1)


@dataclass
class CellularAutomatonTask(SyntheticTask):
    """1-D cellular automata with a per-sequence rule drawn from a fixed pool.

    Cell ``i`` of state ``t + 1`` is ``rule[x_t[i-1]·k² + x_t[i]·k + x_t[i+1]]`` (indices mod
    ``S``, periodic boundary). Rules are uniformly random lookup tables over the ``k³``
    windows; the pool of ``n_rules`` tables comes from ``data_seed``; each sequence draws one
    rule uniformly from the pool and a uniformly random initial state.

    Source: Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning Sparse
    Attention Patterns" (the cellular-automaton task).

    Args:
        S: cells per state, ≥ 3 (the window).
        T: transitions per sequence (``T + 1`` states), ≥ 1.
        k: cell states (= vocabulary), ≥ 2; default 4 (the paper's initial loss ln 4).
        n_rules: size of the rule pool, ≥ 1.
        data_seed: seeds the rule pool.
        floor_samples: sequences in the Monte-Carlo floor estimate; None → 4096, fewer for
            long sequences (at least 256, about 2^20 transition tokens).

    Attributes:
        rules: ``Int[Tensor, "n_rules k^3"]`` lookup tables.

    Raises:
        ValueError: ``S < 3``, ``T < 1``, ``k < 2``, ``n_rules < 1``.
    """

    T: int = 3  # our choice (paper unknown): 4 states, enough transitions to infer the rule
    k: int = 4
    n_rules: int = 16
    data_seed: int = 0
    floor_samples: int | None = None
    rules: Int[Tensor, "n_rules table"] = field(init=False, repr=False)
    name: str = field(init=False, default="cellular-automata")

    def __post_init__(self) -> None:
        _check_int("S", self.S, CA_WINDOW, f"S must be ≥ the window size {CA_WINDOW} (cells i-1, i, i+1)")
        _check_int("T", self.T, 1, "T (transitions per sequence) must be an integer ≥ 1")
        _check_int("k", self.k, 2, "k (cell states) must be an integer ≥ 2")
        _check_int("n_rules", self.n_rules, 1, "the rule pool needs n_rules ≥ 1")
        self.d_vocab = self.k
        gen = _structure_generator(self.data_seed, salt=2)
        self.rules = torch.randint(0, self.k, (self.n_rules, self.k**CA_WINDOW), generator=gen)
        self._build_masks()

    def true_keys(self, i: int) -> list[int]:
        """Cells of state ``t`` in the window of cell ``i``, which determine cell ``i`` of state ``t + 1``.

        Returns:
            3 cell indices ``[(i - 1) mod S, i, (i + 1) mod S]`` (window order, periodic).
        """
        return [(i - 1) % self.S, i, (i + 1) % self.S]

    def _windows(self, states: Int[Tensor, "... S"]) -> Int[Tensor, "... S"]:
        """Table index of each cell's window ``(i-1, i, i+1)``, periodic."""
        left = states.roll(1, dims=-1)  # left[..., i] = states[..., i-1]
        right = states.roll(-1, dims=-1)  # right[..., i] = states[..., i+1]
        return (left * self.k + states) * self.k + right

    def sample_with_rules(
        self, batch_size: int, generator: torch.Generator | None = None
    ) -> tuple[Int[Tensor, "batch pos"], Int[Tensor, " batch"]]:
        """Like :meth:`sample`, also returning each sequence's index into :attr:`rules`."""
        device = generator.device if generator is not None else torch.device("cpu")
        rules = self.rules.to(device)
        rule_idx = torch.randint(0, self.n_rules, (batch_size,), generator=generator, device=device)
        tables = rules[rule_idx]
        x = torch.randint(0, self.k, (batch_size, self.S), generator=generator, device=device)
        states = [x]
        for _ in range(self.T):
            x = tables.gather(1, self._windows(x))
            states.append(x)
        return torch.cat(states, dim=1), rule_idx

    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> Int[Tensor, "batch pos"]:
        """``T + 1`` states of ``S`` cells, tokens in ``[0, k)``, on the generator's device."""
        return self.sample_with_rules(batch_size, generator)[0]

    def bayes_loss(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch query_pos"]:
        """Per-position loss of the Bayes-optimal predictor that knows the rule pool.

        At each position it mixes the pool's rules uniformly over those consistent with every
        earlier transition token in the sequence (the first state's cells carry no rule
        information). Returns ``-log p(token q+1 | tokens ≤ q)`` in nats for ``q < pos − 1``.
        """
        B, S, T = tokens.shape[0], self.S, self.T
        states = tokens.view(B, T + 1, S)
        rules = self.rules.to(tokens.device)
        # pred[r, b, t, i]: what rule r says cell i of state t+1 is.
        pred = rules[:, self._windows(states[:, :T])]
        match = (pred == states[:, 1:].unsqueeze(0)).flatten(2)  # [rule, batch, T*S]
        # consistent_before[..., p]: rule agrees with every transition token before p.
        consistent = torch.cumprod(match.long(), dim=2)
        ones = torch.ones_like(consistent[..., :1])
        consistent_before = torch.cat([ones, consistent[..., :-1]], dim=2)
        agree = (consistent_before * match.long()).sum(0)
        total = consistent_before.sum(0)  # ≥ 1: the true rule is always consistent
        transition_loss = -(agree.double() / total.double()).log()
        first_state = torch.full((B, S - 1), math.log(self.k), dtype=torch.float64, device=tokens.device)
        return torch.cat([first_state, transition_loss], dim=1)

    def _compute_floor(self) -> float:
        """Monte-Carlo mean of :meth:`bayes_loss` over ``floor_samples`` sequences, nats/token.

        By the chain rule a sequence's total transition loss is ``ln n_rules − ln C``, where
        ``C`` is the number of pool rules that agree with its rule on every window it shows,
        so the floor is ``((S−1)·ln k + ln n_rules − E[ln C]) / (seq_len − 1)``: only ``E[ln C]``
        needs sampling, and it is 0 once every sequence identifies its rule (large S·T). The
        estimate is deterministic given ``data_seed``; standard error < 2e-4 nats at S ≥ 4.
        Its first-state part alone, ``(S−1)·ln k / (seq_len − 1)``, is a strict lower bound.
        """
        gen = _structure_generator(self.data_seed, salt=3)
        n_samples = self.floor_samples or min(4096, max(256, 2**20 // (self.T * self.S)))
        # Bound the [n_rules, batch, T*S] working set to ~2^22 entries per chunk.
        chunk = max(1, 2**22 // (self.n_rules * self.T * self.S))
        total, done = 0.0, 0
        while done < n_samples:
            n = min(chunk, n_samples - done)
            tokens, _ = self.sample_with_rules(n, gen)
            total += self.bayes_loss(tokens).sum().item()
            done += n
        return total / (n_samples * (self.seq_len - 1))

    @property
    def floor_upper_bound(self) -> float:
        """``((S−1)·ln k + ln n_rules) / (seq_len − 1)``: the floor when every sequence
        identifies its rule, an upper bound otherwise, nats."""
        return ((self.S - 1) * math.log(self.k) + math.log(self.n_rules)) / (self.seq_len - 1)

    @property
    def floor_lower_bound(self) -> float:
        """``(S−1)·ln k / (seq_len − 1)``: the cost of the random first state alone, nats."""
        return (self.S - 1) * math.log(self.k) / (self.seq_len - 1)


#: Task name -> class: each name is the default of its class's ``name`` field (declared there once).
TASKS: dict[str, type[SyntheticTask]] = {cls.name: cls for cls in (LinearMapTask, CellularAutomatonTask)}


def make_task(
    task: str,
    S: int,
    s: int = 3,
    T: int | None = None,
    k: int = 4,
    n_rules: int = 16,
    data_seed: int = 0,
) -> SyntheticTask:
    """Build a task by name (``"linear-map"`` or ``"cellular-automata"``).

    ``T=None`` picks the task default (linear map 1, cellular automata 3). ``s`` is used by
    the linear map only; ``k`` and ``n_rules`` by the cellular automata only.

    Raises:
        ValueError: unknown task name, or any bad size (see the task classes).
    """
    if task not in TASKS:
        raise ValueError(f"task={task!r} is unknown: choose one of {', '.join(TASKS)}")
    maybe_T = {} if T is None else {"T": T}
    if TASKS[task] is LinearMapTask:
        return LinearMapTask(S=S, s=s, data_seed=data_seed, **maybe_T)
    return CellularAutomatonTask(S=S, k=k, n_rules=n_rules, data_seed=data_seed, **maybe_T)
