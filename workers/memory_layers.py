"""The building blocks of workers/memory_model.py: Megatron-style tensor-parallel linears, the
collectives they need (as autograd functions that keep nothing), dropout, RMSNorm and SwiGLU.

Activations are laid out [s, b, h] (sequence first, as in Megatron) so that sequence
parallelism splits dimension 0. Every layer keeps for backward what Megatron's kernels keep —
the tensors Korthikanti et al. 2022 (§4) count — so a measurement with saved-tensor hooks can be
held against the ledger term by term:

- dropout keeps a 1-byte mask (CUDA's kernel does; PyTorch's CPU kernel would keep the mask in
  the activation dtype, so the mask is drawn here explicitly);
- a column-parallel linear under sequence parallelism keeps its s-sharded input and all-gathers
  it again in backward (Megatron's LinearWithGradAccumulationAndAsyncCommunication);
- RMSNorm keeps its input and an fp32 1/rms (Apex's and Transformer Engine's fused kernels);
- SwiGLU keeps the gate and up projections and recomputes silu in backward (Megatron's fused
  ``bias_swiglu``);
- (in memory_model.py) grouped-query attention stacks each group's queries against their
  shared K and V, never repeating them, and the embedding and the cross-entropy are
  vocab-parallel, the loss keeping the fp32 softmax.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Groups:
    """The tensor-parallel group of this rank, and whether sequence parallelism is on."""

    def __init__(self, tp_group, tp_size: int, tp_rank: int, sequence_parallel: bool):
        self.group, self.size, self.rank = tp_group, tp_size, tp_rank
        self.sp = sequence_parallel and tp_size > 1


def all_gather_s(x: torch.Tensor, g: Groups) -> torch.Tensor:
    out = torch.empty((x.shape[0] * g.size, *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.all_gather_single(out, x.contiguous(), group=g.group)
    return out


def reduce_scatter_s(x: torch.Tensor, g: Groups) -> torch.Tensor:
    out = torch.empty((x.shape[0] // g.size, *x.shape[1:]), dtype=x.dtype, device=x.device)
    dist.reduce_scatter_single(out, x.contiguous(), group=g.group)
    return out


def all_reduce(x: torch.Tensor, g: Groups, op=dist.ReduceOp.SUM) -> torch.Tensor:
    if g.size > 1:
        dist.all_reduce(x, op=op, group=g.group)
    return x


class ReduceOut(torch.autograd.Function):
    """A row-parallel layer's partial sums: all-reduce (or reduce-scatter along s under sequence
    parallelism) forward; identity (or all-gather) backward. Keeps nothing."""

    @staticmethod
    def forward(ctx, x, g: Groups):
        ctx.g = g
        if g.size == 1:
            return x
        return reduce_scatter_s(x, g) if g.sp else all_reduce(x.clone(), g)

    @staticmethod
    def backward(ctx, grad):
        g = ctx.g
        return (all_gather_s(grad, g) if g.sp else grad), None


class ScatterToSequence(torch.autograd.Function):
    """Keep this rank's slice of s (forward); all-gather the gradient (backward)."""

    @staticmethod
    def forward(ctx, x, g: Groups):
        ctx.g = g
        return x.chunk(g.size, dim=0)[g.rank].clone()

    @staticmethod
    def backward(ctx, grad):
        return all_gather_s(grad, ctx.g), None


class ColumnParallel(torch.autograd.Function):
    """y = x Wᵀ + b on this rank's rows of W. Keeps x as it arrives (s-sharded under sequence
    parallelism, all-gathered again in backward) and W."""

    @staticmethod
    def forward(ctx, x, weight, bias, g: Groups):
        ctx.g, ctx.has_bias = g, bias is not None
        ctx.save_for_backward(x, weight)
        total = all_gather_s(x, g) if g.sp else x
        return F.linear(total, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        g = ctx.g
        total = all_gather_s(x, g) if g.sp else x
        grad_input = grad @ weight
        grad_weight = grad.flatten(0, -2).t() @ total.flatten(0, -2)
        grad_bias = grad.flatten(0, -2).sum(0) if ctx.has_bias else None
        if g.sp:
            grad_input = reduce_scatter_s(grad_input, g)
        else:
            all_reduce(grad_input, g)
        return grad_input, grad_weight, grad_bias, None


class Linear(nn.Module):
    """A Megatron linear layer: "column" (W's rows split) or "row" (W's columns split; the bias
    is added after the reduction, whole on every rank)."""

    def __init__(self, d_in: int, d_out: int, kind: str, g: Groups, bias: bool):
        super().__init__()
        self.kind, self.g = kind, g
        shape = (d_out // g.size, d_in) if kind == "column" else (d_out, d_in // g.size)
        self.weight = nn.Parameter(torch.randn(shape) / math.sqrt(d_in))
        self.bias = nn.Parameter(torch.zeros(shape[0])) if bias else None

    def forward(self, x):
        if self.kind == "column":
            return ColumnParallel.apply(x, self.weight, self.bias, self.g)
        y = ReduceOut.apply(F.linear(x, self.weight), self.g)
        return y if self.bias is None else y + self.bias


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """Inverted dropout keeping a 1-byte boolean mask for backward."""
    if not training or p == 0:
        return x
    keep = torch.rand(x.shape, device=x.device) >= p
    return x * keep * (1.0 / (1.0 - p))


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps: float):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
        ctx.save_for_backward(x, weight, rstd)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        xn = x.float() * rstd
        gw = grad.float() * weight.float()
        grad_x = rstd * (gw - xn * (gw * xn).mean(-1, keepdim=True))
        return grad_x.to(x.dtype), (grad.float() * xn).flatten(0, -2).sum(0).to(weight.dtype), None


class RMSNorm(nn.Module):
    def __init__(self, h: int, eps: float = 1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(h)), eps

    def forward(self, x):
        return RMSNormFunction.apply(x, self.weight, self.eps)


class SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx, grad):
        gate, up = ctx.saved_tensors
        sig = torch.sigmoid(gate.float())
        silu = gate.float() * sig
        grad_gate = grad.float() * up.float() * sig * (1 + gate.float() * (1 - sig))
        return grad_gate.to(gate.dtype), (grad.float() * silu).to(up.dtype)
