"""The tiny model's training data: a deterministic synthetic token stream from the seed, nothing
downloaded.

Text has structure a model can learn; uniform random tokens have none (the loss could never
fall below log V). The stream is a seeded Markov chain: each token has :data:`SUCCESSORS` likely
next tokens, drawn once from the seed, and each step of a sequence picks one of them. A model
that learns the chain's table reaches log(SUCCESSORS) nats, so the loss falls visibly within a
few steps.

Step k's global batch is dp × m sequences; sequence j of step k is drawn from its own generator
``default_rng([seed, 1, k, j])``, so what a rank reads never depends on how many others there
are. Data-parallel replica d takes sequences d·m … d·m + m − 1 (one per micro-batch, as a
DistributedSampler hands out contiguous shares), and a context-parallel rank its zigzag
positions of each (app.sim.context_parallel.layout.tokens_table).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

SUCCESSORS = 4
"""Likely next tokens of each token."""


@lru_cache(maxsize=16)
def successor_table(vocab: int, seed: int) -> np.ndarray:
    """(vocab, SUCCESSORS) int array: the tokens that may follow each token."""
    rng = np.random.default_rng([seed, 0])
    table = rng.integers(0, vocab, size=(vocab, SUCCESSORS))
    table.flags.writeable = False
    return table


def sequences(vocab: int, seq: int, seed: int, step: int, indices) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of the global batch's sequences ``indices`` at ``step``: int arrays of
    shape (len(indices), seq); targets are the inputs shifted by one token."""
    table = successor_table(vocab, seed)
    indices = list(indices)
    tokens = np.empty((len(indices), seq + 1), dtype=np.int64)
    picks = np.empty((len(indices), seq), dtype=np.int64)
    for row, j in enumerate(indices):
        rng = np.random.default_rng([seed, 1, step, j])
        tokens[row, 0] = rng.integers(0, vocab)
        picks[row] = rng.integers(0, SUCCESSORS, size=seq)
    for i in range(seq):                                      # every sequence at once
        tokens[:, i + 1] = table[tokens[:, i], picks[:, i]]
    return tokens[:, :-1], tokens[:, 1:]


def replica_sequences(dp_rank: int, microbatches: int) -> range:
    """The global batch's sequences that data-parallel replica ``dp_rank`` trains on."""
    return range(dp_rank * microbatches, (dp_rank + 1) * microbatches)
