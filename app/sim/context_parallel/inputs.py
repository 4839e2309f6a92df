"""The seeded Q, K and V of the worked example — one function, so that the simulation, the
torchrun worker (workers/context_parallel.py) and the tests all use the very same numbers."""

from __future__ import annotations

import numpy as np


def make_inputs(seq: int, heads: int, kv_heads: int, head_dim: int, seed: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(q, k, v) in float64: q is seq × heads × head_dim, k and v seq × kv_heads × head_dim.

    Standard normal numbers rounded to two decimals, so that a page can print them whole; the
    rounding happens once, here, and every consumer reads the rounded values."""
    rng = np.random.default_rng(seed)
    q = np.round(rng.standard_normal((seq, heads, head_dim)), 2)
    k = np.round(rng.standard_normal((seq, kv_heads, head_dim)), 2)
    v = np.round(rng.standard_normal((seq, kv_heads, head_dim)), 2)
    return q, k, v
