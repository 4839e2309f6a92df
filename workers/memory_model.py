"""One pipeline stage of a GPT- or Llama-style model, tensor- and sequence-parallel like
Megatron-LM, with recomputation none / selective / full (Korthikanti et al. 2022, §5).

Full recompute checkpoints the input of every ``every``-th layer and re-runs that many layers at
once in backward: Megatron-LM's ``--recompute-granularity full --recompute-method uniform
--recompute-num-layers k`` (Chen et al. 2016's segments), written with
``torch.utils.checkpoint.checkpoint`` (reentrant, as Megatron's own CheckpointFunction).

``Stage`` holds the embeddings when it is the first stage, ``layers`` transformer layers, and
the final norm, output head and vocab-parallel cross-entropy when it is also the last. Parameter
names and shapes are those of :meth:`app.catalog.models.ModelShape.tensors`, so the measured model
states can be compared tensor by tensor with :mod:`app.sim.memory.rank_states`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from memory_layers import (ColumnParallel, Groups, Linear, RMSNorm, ScatterToSequence, SwiGLU,
                           all_reduce, dropout)
from torch import nn
from torch.utils.checkpoint import checkpoint

DROPOUT = 0.1
"""GPT-style dropout after the embedding, the attention scores, attention and MLP (GPT-3's 0.1)."""


class Attention(nn.Module):
    """Causal self-attention with a/t query heads and kv/t key/value heads on this rank."""

    def __init__(self, shape, g: Groups, seq: int):
        super().__init__()
        h, a, kv = shape.hidden, shape.heads, shape.kv_heads
        self.gpt, self.g = shape.family == "gpt", g
        self.d, self.heads, self.kv = h // a, a // g.size, kv // g.size
        if self.gpt:
            self.qkv = Linear(h, h + 2 * kv * self.d, "column", g, bias=True)
        else:
            self.wq = Linear(h, h, "column", g, bias=False)
            self.wk = Linear(h, kv * self.d, "column", g, bias=False)
            self.wv = Linear(h, kv * self.d, "column", g, bias=False)
        self.proj = Linear(h, h, "row", g, bias=self.gpt)
        group = self.heads // self.kv
        # row i of the stacked queries is position i mod s: a mask of (group·s, s)
        self.register_buffer("causal", torch.ones(seq, seq, dtype=torch.bool).triu(1)
                             .repeat(group, 1), persistent=False)
        if not self.gpt:   # rotary embeddings (Su et al. 2021), as buffers
            inv = 1.0 / 10000 ** (torch.arange(0, self.d, 2).float() / self.d)
            angles = torch.outer(torch.arange(seq).float(), inv).repeat(1, 2)  # (s, d)
            self.register_buffer("cos", angles.cos()[:, None, None, :], persistent=False)
            self.register_buffer("sin", angles.sin()[:, None, None, :], persistent=False)

    def rope(self, x):   # x: (s, b, heads, d)
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * self.cos + rotated * self.sin   # buffers: cast with the model, never saved

    def core(self, q, k, v):
        """softmax(QKᵀ/√d) V for q: (s, b, heads, d), k and v: (s, b, kv, d)."""
        s, b = q.shape[0], q.shape[1]
        group = self.heads // self.kv
        q = q.reshape(s, b, self.kv, group, self.d).permute(1, 2, 3, 0, 4)
        # Q, K and V are copied into tensors of their own, so the products keep each exactly
        # once. Without the copies, how much is kept would depend on the head counts: with one
        # key/value head per rank K and V are views of the fused QKV output, and the product
        # then keeps that whole output (Q included) beside its own copy of Q — 2sbh/t bytes
        # more than Korthikanti's count (issue 12 item 13: GPT-2 with GQA at t = 2).
        q = q.reshape(b, self.kv, group * s, self.d).contiguous()        # (b, kv, g·s, d)
        k = k.permute(1, 2, 0, 3).contiguous()                           # (b, kv, s, d)
        v = v.permute(1, 2, 0, 3).contiguous()
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))  # (b, kv, g·s, s)
        scores = scores.masked_fill(self.causal[:group * s, :s], float("-inf"))
        probs = dropout(F.softmax(scores, dim=-1), DROPOUT if self.gpt else 0.0, self.training)
        out = (probs @ v).reshape(b, self.kv, group, s, self.d)        # (b, kv, g, s, d)
        return out.permute(3, 0, 1, 2, 4).reshape(s, b, self.heads * self.d)

    def forward(self, x, selective: bool):
        s_full = x.shape[0] * (self.g.size if self.g.sp else 1)
        b = x.shape[1]
        if self.gpt:
            q, k, v = self.qkv(x).split(
                [self.heads * self.d, self.kv * self.d, self.kv * self.d], dim=-1)
        else:
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q = q.view(s_full, b, self.heads, self.d)
        k = k.view(s_full, b, self.kv, self.d)
        v = v.view(s_full, b, self.kv, self.d)
        if not self.gpt:
            q, k = self.rope(q), self.rope(k)
        if selective:   # keep Q, K, V; recompute the s² part in backward
            y = checkpoint(self.core, q, k, v, use_reentrant=True)
        else:
            y = self.core(q, k, v)
        return dropout(self.proj(y), DROPOUT if self.gpt else 0.0, self.training)


class MLP(nn.Module):
    def __init__(self, shape, g: Groups):
        super().__init__()
        h, f = shape.hidden, shape.ffn
        self.gpt = shape.family == "gpt"
        if self.gpt:
            self.fc = Linear(h, f, "column", g, bias=True)
        else:
            self.w1 = Linear(h, f, "column", g, bias=False)   # gate
            self.w3 = Linear(h, f, "column", g, bias=False)   # up
        self.proj = Linear(f, h, "row", g, bias=self.gpt)

    def forward(self, x):
        if self.gpt:
            return dropout(self.proj(F.gelu(self.fc(x), approximate="tanh")), DROPOUT,
                           self.training)
        return self.proj(SwiGLU.apply(self.w1(x), self.w3(x)))


class Block(nn.Module):
    def __init__(self, shape, g: Groups, seq: int, recompute: str):
        super().__init__()
        norm = (lambda: nn.LayerNorm(shape.hidden)) if shape.family == "gpt" else \
            (lambda: RMSNorm(shape.hidden))
        self.norm1, self.attention = norm(), Attention(shape, g, seq)
        self.norm2, self.mlp = norm(), MLP(shape, g)
        self.recompute = recompute

    def layer(self, x):
        x = x + self.attention(self.norm1(x), self.recompute == "selective")
        return x + self.mlp(self.norm2(x))

    def forward(self, x, rest: tuple[Block, ...] = ()):
        """This layer, then the ``rest`` of its checkpointed segment under full recompute."""
        if self.recompute == "full":   # keep only the segment's input
            return checkpoint(self.segment, x, *rest, use_reentrant=True)
        return self.layer(x)

    def segment(self, x, *rest: Block):
        for block in (self, *rest):
            x = block.layer(x)
        return x


class Embedding(nn.Module):
    """Vocab-parallel token embedding (this rank's V/t rows), GPT's learned positions, dropout,
    and the split along s under sequence parallelism."""

    def __init__(self, shape, g: Groups):
        super().__init__()
        self.g, self.gpt = g, shape.family == "gpt"
        self.rows = shape.vocab // g.size
        self.weight = nn.Parameter(torch.randn(self.rows, shape.hidden) * 0.02)
        if self.gpt:
            self.positions = nn.Parameter(torch.randn(shape.seq, shape.hidden) * 0.01)

    def forward(self, ids):   # ids: (s, b)
        start = self.g.rank * self.rows
        outside = (ids < start) | (ids >= start + self.rows)
        x = F.embedding((ids - start).masked_fill(outside, 0), self.weight)
        # sum the ranks' rows in place: identity backward, as Megatron's
        # reduce_from_tensor_model_parallel_region
        x = all_reduce(x.masked_fill(outside[..., None], 0.0), self.g)
        if self.gpt:
            x = x + self.positions[: ids.shape[0], None, :]
        if self.g.sp:
            x = ScatterToSequence.apply(x, self.g)
        return dropout(x, DROPOUT if self.gpt else 0.0, self.training)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Megatron's cross-entropy over logits split by vocabulary: keeps the fp32 softmax
    (4sbV/t bytes) and writes the gradient into it in backward."""

    @staticmethod
    def forward(ctx, logits, target, g: Groups):
        rows = logits.shape[-1]
        start = g.rank * rows
        x = logits.float()
        x -= all_reduce(x.max(dim=-1).values, g, torch.distributed.ReduceOp.MAX)[..., None]
        outside = (target < start) | (target >= start + rows)
        local = (target - start).masked_fill(outside, 0)
        picked = x.gather(-1, local[..., None])[..., 0].masked_fill(outside, 0.0)
        all_reduce(picked, g)
        softmax = x.exp_()
        total = all_reduce(softmax.sum(dim=-1), g)
        softmax /= total[..., None]
        ctx.save_for_backward(softmax, outside, local)
        ctx.dtype = logits.dtype
        return total.log() - picked

    @staticmethod
    def backward(ctx, grad):
        softmax, outside, local = ctx.saved_tensors
        softmax.scatter_add_(-1, local[..., None], -(~outside).float()[..., None])
        softmax *= grad[..., None]
        return softmax.to(ctx.dtype), None, None


class Stage(nn.Module):
    def __init__(self, shape, g: Groups, layers: int, first: bool, last: bool, recompute: str,
                 every: int = 1):
        super().__init__()
        self.g, self.gpt = g, shape.family == "gpt"
        self.embedding = Embedding(shape, g) if first else None
        self.layers = nn.ModuleList(Block(shape, g, shape.seq, recompute) for _ in range(layers))
        self.set_recompute(recompute, every)
        self.final_norm = None
        if last:
            self.final_norm = nn.LayerNorm(shape.hidden) if self.gpt else RMSNorm(shape.hidden)
            if not (self.gpt and first):   # GPT ties the head to the embedding
                self.head = nn.Parameter(torch.randn(shape.vocab // g.size, shape.hidden) * 0.02)

    def set_recompute(self, recompute: str, every: int = 1) -> None:
        """none, selective, or full with a checkpoint every ``every`` layers."""
        for block in self.layers:
            block.recompute = recompute
        self.every = every if recompute == "full" else 1   # layers per checkpointed segment

    def head_weight(self):
        return self.embedding.weight if self.gpt else self.head

    def forward(self, x, targets=None):
        if self.embedding is not None:
            x = self.embedding(x)
        for first in range(0, len(self.layers), self.every):
            x = self.layers[first](x, tuple(self.layers[first + 1:first + self.every]))
        if self.final_norm is None:
            return x
        logits = ColumnParallel.apply(self.final_norm(x), self.head_weight(), None, self.g)
        return VocabParallelCrossEntropy.apply(logits, targets, self.g).mean()
