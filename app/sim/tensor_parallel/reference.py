"""Each block computed on one device, without any sharding: the numbers the tensor-parallel
result must equal. Forward and backward with the same numpy operations (app/sim/tensor_parallel/ops.py), on
whole tensors; the tests check these against torch's autograd."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from app.sim.tensor_parallel.inputs import BlockInputs
from app.sim.tensor_parallel.ops import (attention_heads, attention_heads_backward, concat_heads, gelu,
                            gelu_grad, layer_norm, layer_norm_backward, merge_heads, split_heads,
                            unconcat_heads)


@dataclass(frozen=True)
class Reference:
    output: np.ndarray
    grads: dict[str, np.ndarray]
    input_grad: np.ndarray | None
    extras: dict[str, np.ndarray] = field(default_factory=dict)


def reference(inp: BlockInputs, heads: int) -> Reference:
    return {"column": _linear, "row": _linear, "mlp": _mlp, "attention": _attention,
            "embedding": _embedding}[inp.block](inp, heads)


def _linear(inp: BlockInputs, heads: int) -> Reference:
    x, w, dy = inp.x, inp.weights["W"], inp.dy
    return Reference(x @ w, {"W": x.T @ dy}, dy @ w.T)


def _sublayer(inp: BlockInputs, core, core_backward) -> Reference:
    """out = x + dropout(core(LayerNorm(x))), and its backward."""
    w = inp.weights
    norm, cache = layer_norm(inp.x, w["gamma"], w["beta"])
    z, saved = core(norm)
    out = inp.x + z * inp.mask
    dz = inp.dy * inp.mask
    d_norm, grads = core_backward(dz, norm, saved)
    dx, dgamma, dbeta = layer_norm_backward(d_norm, cache)
    return Reference(out, {**grads, "gamma": dgamma, "beta": dbeta}, dx + inp.dy,
                     {"z": z, "norm": norm})


def _mlp(inp: BlockInputs, heads: int) -> Reference:
    a, b = inp.weights["A"], inp.weights["B"]

    def core(norm):
        p = norm @ a
        hidden = gelu(p)
        return hidden @ b, (p, hidden)

    def backward(dz, norm, saved):
        p, hidden = saved
        dp = (dz @ b.T) * gelu_grad(p)
        return dp @ a.T, {"A": norm.T @ dp, "B": hidden.T @ dz}

    return _sublayer(inp, core, backward)


def _attention(inp: BlockInputs, heads: int) -> Reference:
    w_qkv, w_o = inp.weights["W_qkv"], inp.weights["W_o"]

    def core(norm):
        q, k, v = split_heads(norm @ w_qkv, heads)
        p, c = attention_heads(q, k, v)
        context = concat_heads(c)
        return context @ w_o, (q, k, v, p, context)

    def backward(dz, norm, saved):
        q, k, v, p, context = saved
        dc = unconcat_heads(dz @ w_o.T, heads)
        dqkv = merge_heads(*attention_heads_backward(dc, q, k, v, p))
        return dqkv @ w_qkv.T, {"W_qkv": norm.T @ dqkv, "W_o": context.T @ dz}

    return _sublayer(inp, core, backward)


def _embedding(inp: BlockInputs, heads: int) -> Reference:
    """A zero-layer language model: embedding, tied output layer, mean cross-entropy."""
    e, one_hot = inp.weights["E"], inp.x
    n = one_hot.shape[0]
    hidden = one_hot @ e                                   # E[ids]
    logits = hidden @ e.T                                  # (n, V)
    shifted = logits - logits.max(axis=1, keepdims=True)
    sum_exp = np.exp(shifted).sum(axis=1)
    losses = np.log(sum_exp) - shifted[np.arange(n), inp.targets]
    probs = np.exp(shifted) / sum_exp[:, None]
    d_logits = (probs - np.eye(e.shape[0])[inp.targets]) / n
    d_hidden = d_logits @ e
    d_e = d_logits.T @ hidden + one_hot.T @ d_hidden       # output layer + embedding (tied)
    return Reference(hidden, {"E": d_e}, None,
                     {"logits": logits, "losses": losses, "loss": np.array(losses.mean())})
