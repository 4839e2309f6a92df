"""A tensor-parallel block as a recorded program: what every rank holds at every step.

Each block in :mod:`app.sim.tensor_parallel.blocks` runs its sharded forward and backward pass through a
:class:`Recorder`, which keeps one :class:`Step` per thing a lecturer would point at: a local
computation on every rank (``Yᵣ = X · Wᵣ``), a collective (all-reduce, all-gather,
reduce-scatter, with the number of elements it moves), or a check of the gathered result against
the unsharded computation. A step holds the real operands and result of every rank, and for
every cell where its value came from (:data:`REPLICATED`, :data:`SUMMED`, or a rank), which is
what the deck colours by.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from app.humanize import caption_number

REPLICATED = -1
"""the same value on every rank (an input every rank holds, or a replicated computation)"""
SUMMED = -2
"""the value was just completed by a collective that summed every rank's contribution"""


@dataclass(frozen=True)
class Operand:
    """A tensor as every rank holds it at one step.

    ``values[r]``: rank r's array, 2-D (rows × columns) or 3-D (heads × rows × columns).
    ``sources[r]``: same shape, int8: the rank each value comes from, or REPLICATED / SUMMED.
    ``per_rank``: the ranks hold different values (the name is drawn with the rank as a
    subscript: W₀, W₁ …); False when every rank holds the same tensor.
    """

    name: str
    values: tuple[np.ndarray, ...]
    sources: tuple[np.ndarray, ...]
    per_rank: bool
    note: str = ""

    @property
    def shape(self) -> tuple[int, ...]:
        return self.values[0].shape


@dataclass(frozen=True)
class Collective:
    """One call of a collective by every rank of the tensor-parallel group.

    ``elements`` follows /api/collective's ``count``: the full logical tensor — what all_reduce
    sums, what reduce_scatter takes in (each rank gets elements/tp back), what all_gather
    returns (each rank puts in elements/tp)."""

    op: str                 # all_reduce | all_gather | reduce_scatter
    pass_: str              # forward | backward
    elements: int
    reduce_op: str = "sum"  # sum | max (the cross-entropy's running maximum)
    purpose: str = ""

    def to_dict(self) -> dict:
        return {"op": self.op, "pass": self.pass_, "elements": self.elements,
                "reduce_op": self.reduce_op, "purpose": self.purpose}


@dataclass(frozen=True)
class Comparison:
    """A gathered tensor-parallel result next to the unsharded computation."""

    name: str
    sharded: np.ndarray
    sources: np.ndarray
    reference: np.ndarray
    error: float


@dataclass(frozen=True)
class Step:
    pass_: str                           # setup | forward | backward | check
    kind: str                            # setup | compute | collective | check
    title: str                           # a few words: "column-parallel matmul"
    formula: str                         # "Yᵣ = X · Wᵣ"
    flow: str                            # key of the FlowNode this step belongs to
    caption: str
    operands: tuple[Operand, ...] = ()
    symbols: tuple[str, ...] = ()        # drawn after each operand: "·", "=", "→"
    result: Operand | None = None
    collective: Collective | None = None
    comparisons: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class FlowNode:
    """One box of the block's data-flow strip (Megatron-LM Fig. 3, Korthikanti Fig. 5)."""

    key: str
    label: str
    detail: str
    region: str      # replicated | tensor | sequence | comm


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max(initial=0.0))


class Recorder:
    """Collects the steps of one block on ``tp`` ranks."""

    def __init__(self, tp: int):
        self.tp = tp
        self.steps: list[Step] = []

    # -- operands ----------------------------------------------------------------------------

    def replicated(self, name: str, x: np.ndarray, note: str = "") -> Operand:
        source = np.full(x.shape, REPLICATED, dtype=np.int8)
        return Operand(name, (x,) * self.tp, (source,) * self.tp, False, note)

    def summed(self, name: str, x: np.ndarray | list[np.ndarray], note: str = "") -> Operand:
        """The result of a summing collective: the same tensor on every rank (``x`` an array)
        or each rank's piece of it (``x`` a list, after a reduce-scatter)."""
        if self.tp == 1:  # one rank: nothing was summed
            return self.replicated(name, x if isinstance(x, np.ndarray) else x[0], note)
        if isinstance(x, np.ndarray):
            return Operand(name, (x,) * self.tp,
                           (np.full(x.shape, SUMMED, dtype=np.int8),) * self.tp, False, note)
        return Operand(name, tuple(x), tuple(np.full(p.shape, SUMMED, dtype=np.int8) for p in x),
                       True, note)

    def sharded(self, name: str, parts: list[np.ndarray], note: str = "") -> Operand:
        """What only rank r holds or computed: its shard, or its partial sum."""
        if self.tp == 1:
            return self.replicated(name, parts[0], note)
        return Operand(name, tuple(parts),
                       tuple(np.full(p.shape, r, dtype=np.int8) for r, p in enumerate(parts)),
                       True, note)

    def gathered(self, name: str, parts: list[np.ndarray], axis: int, note: str = "") -> Operand:
        """Every rank's piece side by side (an all-gather): each block keeps its rank's colour."""
        full = np.concatenate(parts, axis=axis)
        sources = np.concatenate([np.full(p.shape, r if self.tp > 1 else REPLICATED,
                                          dtype=np.int8) for r, p in enumerate(parts)], axis=axis)
        return Operand(name, (full,) * self.tp, (sources,) * self.tp, False, note)

    # -- steps -------------------------------------------------------------------------------

    def add(self, step: Step) -> None:
        self.steps.append(step)

    def compute(self, pass_: str, flow: str, title: str, formula: str, caption: str,
                operands: tuple[Operand, ...], symbols: tuple[str, ...], result: Operand) -> None:
        self.add(Step(pass_, "compute", title, formula, flow, caption, operands, symbols, result))

    def collective(self, op: str, pass_: str, flow: str, formula: str, caption: str,
                   before: Operand, after: Operand, elements: int, reduce_op: str = "sum",
                   purpose: str = "") -> None:
        """Record a collective; with one rank there is nothing to communicate, and no step."""
        if self.tp == 1:
            return
        title = op.replace("_", "-") + (" (max)" if reduce_op == "max" else "")
        self.add(Step(pass_, "collective", title, formula, flow, caption, (before,), ("→",),
                      after, Collective(op, pass_, elements, reduce_op, purpose)))

    def check(self, caption: str, comparisons: tuple[Comparison, ...], title: str) -> None:
        self.add(Step("check", "check", title, "", "", caption, comparisons=comparisons))

    @property
    def comm(self) -> tuple[Collective, ...]:
        return tuple(s.collective for s in self.steps if s.collective is not None)


def compare(name: str, sharded: Operand, reference: np.ndarray) -> Comparison:
    return Comparison(name, sharded.values[0], sharded.sources[0], reference,
                      max_abs_diff(sharded.values[0], reference))


# --- words and numbers for captions ---------------------------------------------------------

def dims(array: np.ndarray) -> str:
    return " × ".join(str(d) for d in array.shape)


def dot_text(row: np.ndarray, column: np.ndarray, most: int = 3) -> str:
    """"2·(−1) + 0·3 + … = 7": a dot product spelled out with its first terms."""
    def factor(v: float) -> str:
        text = caption_number(v)
        return f"({text})" if text.startswith("−") else text
    terms = [f"{factor(a)}·{factor(b)}" for a, b in zip(row[:most], column[:most])]
    more = " + …" if len(row) > most else ""
    return " + ".join(terms) + more + f" = {caption_number(float(row @ column))}"


def sum_text(values: list[float], most: int = 4) -> str:
    """"3 + (−5) + 1 = −1": one element of an all-reduce, rank by rank."""
    shown = [caption_number(v) if k == 0 or not caption_number(v).startswith("−") else f"({caption_number(v)})"
             for k, v in enumerate(values[:most])]
    more = " + …" if len(values) > most else ""
    return " + ".join(shown) + more + f" = {caption_number(sum(values))}"


@dataclass(frozen=True)
class BlockResult:
    """Everything one block produced, sharded, next to the unsharded reference."""

    steps: tuple[Step, ...]
    flow: tuple[FlowNode, ...]
    output: Operand
    """the forward result gathered from every rank (sources: which rank holds each part)"""
    shard_weights: tuple[dict[str, np.ndarray], ...]
    shard_outputs: tuple[np.ndarray, ...]
    """what each rank computes before the collective that completes it (a column block, a
    partial sum)"""
    shard_results: tuple[np.ndarray, ...]
    """what each rank holds when forward ends"""
    grads: dict[str, np.ndarray]
    """weight gradients, gathered from the ranks' shards"""
    shard_grads: tuple[dict[str, np.ndarray], ...]
    input_grad: np.ndarray | None
    extras: dict[str, np.ndarray] = field(default_factory=dict)
