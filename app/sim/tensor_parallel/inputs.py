"""The seeded inputs of each tensor-parallel block: activations, weights, the upstream gradient
and the dropout mask, all full (unsharded). The simulation and the torchrun worker both call
:func:`make_inputs`, so they start from the very same numbers and cut them up independently.

Shapes (n tokens, h hidden, f the MLP's inner size, a heads, V vocabulary):

    column     x n×h · W h×f                               dy n×f
    row        x n×f · W f×h                               dy n×h
    mlp        x n×h · A h×f · B f×h · γ, β h · mask n×h    dy n×h
    attention  x n×h · W_qkv h×3h · W_o h×h · γ, β h · mask n×h   dy n×h
    embedding  ids n, targets n · E V×h (tied input embedding and output layer)

The linear blocks use integers in [−3, 3], so every product and sum is exact and can be checked
by hand; the others use one-decimal numbers in [−1, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sim.tensor_parallel.ops import dropout_scale, integers, tenths

BLOCKS = ("column", "row", "mlp", "attention", "embedding")

PRIMARY_WEIGHT = {"column": "W", "row": "W", "mlp": "A", "attention": "W_qkv", "embedding": "E"}
"""The weight DESIGN.md's ``weight`` field shows (in × out)."""


@dataclass(frozen=True)
class BlockInputs:
    block: str
    x: np.ndarray                       # the input activations (embedding: one-hot of ids)
    weights: dict[str, np.ndarray]      # full weights, by name
    dy: np.ndarray | None = None        # the gradient arriving from above (None: a loss)
    mask: np.ndarray | None = None      # dropout factors, 0 or 1/(1 − p)
    ids: np.ndarray | None = None       # embedding: token ids
    targets: np.ndarray | None = None   # embedding: the next token of each position
    extra: dict = field(default_factory=dict)


def make_inputs(block: str, tokens: int, hidden: int, ffn: int, heads: int, vocab: int,
                seed: int) -> BlockInputs:
    rng = np.random.default_rng(seed)
    n, h, f = tokens, hidden, ffn
    if block == "column":
        return BlockInputs(block, integers(rng, (n, h)), {"W": integers(rng, (h, f))},
                           dy=integers(rng, (n, f)))
    if block == "row":
        return BlockInputs(block, integers(rng, (n, f)), {"W": integers(rng, (f, h))},
                           dy=integers(rng, (n, h)))
    if block in ("mlp", "attention"):
        x = tenths(rng, (n, h))
        norm = {"gamma": 1 + rng.integers(-2, 3, size=h) / 10,
                "beta": rng.integers(-2, 3, size=h) / 10}
        if block == "mlp":
            weights = {"A": tenths(rng, (h, f)), "B": tenths(rng, (f, h))}
        else:
            weights = {"W_qkv": tenths(rng, (h, 3 * h)), "W_o": tenths(rng, (h, h))}
        return BlockInputs(block, x, {**weights, **norm}, dy=tenths(rng, (n, h)),
                           mask=dropout_scale(rng, (n, h)))
    if block == "embedding":
        ids = rng.integers(0, vocab, size=n + 1)
        one_hot = np.eye(vocab)[ids[:n]]                          # (n, V)
        return BlockInputs(block, one_hot, {"E": tenths(rng, (vocab, h))},
                           ids=ids[:n], targets=ids[1:])
    raise ValueError(f"unknown block {block!r}; blocks: {', '.join(BLOCKS)}")
