"""The optimizer scene's loss and its stability: the seeded quadratic the vector descends and
the float64 dry run that refuses a learning rate before the steps diverge.

L(w) = ½ Σᵢ aᵢ (wᵢ − cᵢ)², so g = a ⊙ (w − c), with curvatures aᵢ in [0.5, 4]. Gradient descent on
a quadratic is stable for η(a + λ) < 2, heavy-ball momentum for η(a + λ) < 2(1 + μ) (Polyak
1964). Read by the params model's validator and by the simulation (app/sim/optimizer/simulate.py),
so neither imports the other.
"""

from __future__ import annotations

import numpy as np

from app.sim.trace import readonly

F32 = np.float32
SIMULATED = ("sgd", "momentum", "adam", "adamw")
"""The optimizers this scene steps (model_states.OPTIMIZERS also prices Adafactor, 8-bit Adam)."""


def make_problem(size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(curvature a, minimum c, initial w): seeded, two decimals so they read well. The worker
    calls this too, so both runs start from the same numbers."""
    rng = np.random.default_rng(seed)
    curvature = np.round(rng.uniform(0.5, 4.0, size), 2).astype(F32)
    target = np.round(rng.uniform(-1.0, 1.0, size), 2).astype(F32)
    initial = np.round(rng.uniform(-1.0, 1.0, size), 2).astype(F32)
    return readonly(curvature), readonly(target), readonly(initial)


DIVERGENCE_LIMIT = 1e6
"""Steps whose weights would grow past this are refused: the numbers stop meaning anything long
before fp32 overflows (3.4e38), and a page must never show inf or NaN."""


def divergence(p) -> tuple[int, float] | None:
    """For ``p``, the optimizer scene's params (its optimizer, size, seed, steps, lr, momentum
    and weight_decay): (the first step at which |w| or the momentum buffer exceeds DIVERGENCE_LIMIT, the largest
    stable learning rate) for SGD and momentum, whose iteration on a quadratic is linear, or
    None when it stays bounded. A float64 dry run of the same recurrence (no rounding), so it
    costs microseconds. Adam's steps are bounded by about η·(1 − β₁)/√(1 − β₂) whatever the
    gradient, so only AdamW's factor 1 − ηλ needs a check (see the route)."""
    if p.optimizer not in ("sgd", "momentum"):
        return None
    a, c, w0 = (x.astype(np.float64) for x in make_problem(p.size, p.seed))
    w, buf = w0.copy(), None
    for t in range(1, p.steps + 1):
        g = a * (w - c) + p.weight_decay * w
        if p.optimizer == "momentum":
            buf = g if buf is None else p.momentum * buf + g
            g = buf
        w = w - p.lr * g
        if max(np.abs(w).max(), np.abs(g).max()) > DIVERGENCE_LIMIT:
            # gradient descent on a quadratic is stable for η(a + λ) < 2, heavy-ball
            # momentum for η(a + λ) < 2(1 + μ) (Polyak 1964)
            reach = 2 * (1 + (p.momentum if p.optimizer == "momentum" else 0))
            return t, reach / float(a.max() + p.weight_decay)
    return None
