"""AdamW on the gradient buckets (Loshchilov & Hutter 2019, as torch.optim.AdamW computes it)
and gradient clipping by the global norm, computed across every group.

The global norm is ‖g‖ over the whole model — every tensor once. Each rank adds the squares of
what it holds, counting each element exactly once across the job:

    tp-cut tensors    every tp rank holds a different slice: all count
    tp-replicated     (norms, the router) every tp rank holds the same values: tp rank 0 counts
    dp·cp / edp       after ZeRO 0's all-reduce every replica holds the same sums: the first
                      replica counts; after ZeRO 1's reduce-scatter each holds its own slice:
                      all count
    pp, ep            different tensors on every stage and expert rank: all count

and one all-reduce over the layout's world gives ‖g‖² (Megatron-LM's
``get_grad_norm_fp32`` sums over the model-parallel group the same way). Every rank then
scales its gradients by min(1, max_norm / (‖g‖ + 10⁻⁶)), as torch.nn.utils.clip_grad_norm_.
"""

from __future__ import annotations

import math

import torch

from workers.train import comm

BETAS = (0.9, 0.999)
EPS = 1e-8


def global_norm(buckets, world) -> float:
    squares = torch.zeros(1, dtype=buckets[0].flat_grad.dtype if buckets else torch.float64)
    for b in buckets:
        if b.owner:
            g = b.grad[:b.hi - b.lo]
            squares += (b.norm_weight[b.lo:b.hi] * g * g).sum()
    return math.sqrt(float(comm.all_reduce(squares, world)[0]))


def clip_coefficient(norm: float, max_norm: float) -> float:
    return min(1.0, max_norm / (norm + 1e-6))


class AdamW:
    """torch.optim.AdamW's update on the slice [lo, hi) of every bucket this rank updates."""

    def __init__(self, buckets, lr: float, weight_decay: float):
        self.buckets, self.lr, self.weight_decay, self.t = buckets, lr, weight_decay, 0
        for b in buckets:
            b.exp_avg = torch.zeros(b.hi - b.lo, dtype=b.flat_grad.dtype)
            b.exp_avg_sq = torch.zeros(b.hi - b.lo, dtype=b.flat_grad.dtype)

    def step(self, scale: float) -> None:
        self.t += 1
        b1, b2 = BETAS
        correction1, correction2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        for b in self.buckets:
            grad = b.grad[:b.hi - b.lo] * scale
            param = b.flat_master[b.lo:b.hi]
            param.mul_(1 - self.lr * self.weight_decay)
            b.exp_avg.lerp_(grad, 1 - b1)
            b.exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denom = (b.exp_avg_sq.sqrt() / math.sqrt(correction2)).add_(EPS)
            param.addcdiv_(b.exp_avg, denom, value=-self.lr / correction1)
