"""Tensor parallelism's autograd operators, written once for any collective: the conjugate pairs
(Megatron-LM's f and g, sequence parallelism's all-gather / reduce-scatter, the column gathers)
and the vocab-parallel cross-entropy — used by /tensor-parallel's worker
(workers/tensor_parallel.py, collectives over the whole job, logged) and by the training
framework (workers/train/tensor.py, collectives over its tp group, timed).

A communication operator is a forward and its conjugate backward (Shoeybi et al. 2019, §3,
Fig. 3; Korthikanti et al. 2022, §4.2.2): f is the identity forward and an all-reduce backward,
g the reverse; SP's entry all-gathers the token shards and reduce-scatters the gradient, its
exit the reverse. :class:`Conjugate` is all of them: the caller names the two passes.

The vocab-parallel loss never gathers the logits (Megatron-LM's ``_VocabParallelCrossEntropy``):
three reductions of one number per token over the tp ranks — the row maximum, the target's
logit (held by one rank) and the sum of exponentials — give loss = log Σ exp − target logit, and
the gradient is this rank's columns of softmax − one-hot(target).
"""

from __future__ import annotations

import torch


class Conjugate(torch.autograd.Function):
    """``forward_op(x)`` forward, ``backward_op(grad)`` backward (each a function of one tensor
    that returns a new one)."""

    @staticmethod
    def forward(ctx, x, forward_op, backward_op):
        ctx.backward_op = backward_op
        return forward_op(x)

    @staticmethod
    def backward(ctx, grad):
        return ctx.backward_op(grad), None, None


def same(x: torch.Tensor) -> torch.Tensor:
    """The identity pass of f (forward) and g (backward)."""
    return x.view_as(x)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Per-token loss from this rank's V/tp logit columns [vocab_start, vocab_start + V/tp):
    log Σ exp − target logit. ``reduce(x, op)`` is the sum (op "sum") or maximum ("max") of
    ``x`` over the tp ranks, as a new tensor (``x`` itself on one rank)."""

    @staticmethod
    def forward(ctx, logits, targets, vocab_start, reduce):
        n, per = logits.shape
        row_max = reduce(logits.max(dim=1).values, "max")
        shifted = logits - row_max[:, None]
        mine = (targets >= vocab_start) & (targets < vocab_start + per)
        local = (targets - vocab_start).clamp(0, per - 1)
        target = torch.where(mine, shifted[torch.arange(n, device=logits.device), local], 0.0)
        target = reduce(target, "sum")
        exp = shifted.exp()
        sum_exp = reduce(exp.sum(dim=1), "sum")
        ctx.save_for_backward(exp / sum_exp[:, None], mine, local)
        return sum_exp.log() - target

    @staticmethod
    def backward(ctx, grad):
        softmax, mine, local = ctx.saved_tensors
        d = softmax.clone()
        rows = torch.nonzero(mine).flatten()
        d[rows, local[rows]] -= 1.0
        return d * grad[:, None], None, None, None
