"""The router of an MoE layer: seeded inputs, logits, probabilities, top-k choice, gate weights.

A linear router scores every token against every expert, ``logits = x · W_router`` (T × E),
plus, for this scene, ``skew · bias_e`` with a fixed bias falling linearly from +1 (expert 0) to
−1 (expert E−1), so a lecturer can dial in an unbalanced router. Two orders of softmax and
top-k exist (Megatron-LM ``moe_router_pre_softmax`` / ``topk_softmax_with_capacity``):

* ``softmax_topk`` — softmax over all E experts, then keep the k largest probabilities as the
  gate weights, not renormalised (Switch Transformer, GShard, DeepSeek's softmax variants);
* ``topk_softmax`` — keep the k largest logits, then softmax over those k (Mixtral: the k
  weights sum to 1).

Both choose the same experts (softmax is monotone), so the choice is made on the logits, which
are exact numbers here (below), in descending order; **ties go to the lower expert index**
(a stable sort). ``torch.topk`` on CPU does *not* promise that: on torch 2.13
``topk([1, 2, 2, 0, 2, 1], 3)`` returns indices ``[2, 4, 1]``; the worker therefore ranks with
``torch.sort(stable=True)``.

Exact inputs: token vectors are multiples of 1/8 in [−2, 2] and router weights multiples of 1/8
in [−1, 1] divided by a power of two near √hidden, so every product and partial sum of
``x · W_router`` is exactly representable in float64 and numpy and torch agree to the last bit
whatever order they add in. Ties between logits then really happen (often with ``skew`` 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MoeInputs:
    x: np.ndarray          # (T, hidden) token vectors
    w_router: np.ndarray   # (hidden, E)
    w_in: np.ndarray       # (E, hidden, 2·hidden) first layer of each expert
    w_out: np.ndarray      # (E, 2·hidden, hidden) second layer of each expert
    bias: np.ndarray       # (E,) the fixed skew direction, +1 … −1


def skew_bias(experts: int) -> np.ndarray:
    """+1 for expert 0 falling linearly to −1 for expert E−1."""
    return np.linspace(1.0, -1.0, experts)


def make_inputs(tokens: int, experts: int, hidden: int, seed: int) -> MoeInputs:
    """The scene's seeded numbers; the worker imports this, so both use the same ones."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-16, 17, size=(tokens, hidden)) / 8.0
    scale = 2.0 ** round(np.log2(hidden) / 2)
    w_router = rng.integers(-8, 9, size=(hidden, experts)) / 8.0 / scale
    # experts: small float64 MLPs hidden → 2·hidden → hidden, Kaiming-like scale
    w_in = rng.standard_normal((experts, hidden, 2 * hidden)) / np.sqrt(hidden)
    w_out = rng.standard_normal((experts, 2 * hidden, hidden)) / np.sqrt(2 * hidden)
    return MoeInputs(x, w_router, w_in, w_out, skew_bias(experts))


def router_logits(inputs: MoeInputs, skew: float) -> np.ndarray:
    """(T, E): x · W_router + skew · bias_e."""
    return inputs.x @ inputs.w_router + skew * inputs.bias[None, :]


def softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax, max subtracted."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def logsumexp(z: np.ndarray) -> np.ndarray:
    m = z.max(axis=-1)
    return m + np.log(np.exp(z - m[:, None]).sum(axis=-1))


def top_experts(scores: np.ndarray, top_k: int) -> np.ndarray:
    """(T, k) the ``top_k`` expert indices of each row by descending score, ties to the lower
    index: k rounds of argmax (which returns the first of equal maxima), each masking its pick.
    The same as ``argsort(-scores, kind="stable")[:, :k]``, and much faster for small k."""
    work = np.array(scores, dtype=float)
    rows = np.arange(work.shape[0])
    out = np.empty((work.shape[0], top_k), dtype=np.int64)
    for slot in range(top_k):
        out[:, slot] = work.argmax(axis=1)
        work[rows, out[:, slot]] = -np.inf
    return out


@dataclass(frozen=True)
class Routing:
    probs: np.ndarray      # (T, E) softmax over all experts
    experts: np.ndarray    # (T, k) chosen experts, descending
    weights: np.ndarray    # (T, k) their gate weights


def route(logits: np.ndarray, top_k: int, router: str,
          selection_bias: np.ndarray | None = None) -> Routing:
    """Choose ``top_k`` experts per token and their gate weights.

    ``selection_bias`` (E,): added to the logits for the choice only, never to the weights
    (DeepSeek-V3's auxiliary-loss-free balancing adds it to the sigmoid affinities; this router
    ranks logits, so it is added there)."""
    probs = softmax(logits)
    scores = logits if selection_bias is None else logits + selection_bias[None, :]
    experts = top_experts(scores, top_k)                            # (T, k)
    if router == "softmax_topk":
        weights = np.take_along_axis(probs, experts, axis=1)
    elif router == "topk_softmax":
        weights = softmax(np.take_along_axis(logits, experts, axis=1))
    else:
        raise ValueError(f"router must be softmax_topk or topk_softmax, got {router!r}")
    return Routing(probs, experts, weights)
