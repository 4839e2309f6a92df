"""The order in which a preset's gradients become ready in backward, measured with torch.

DDP's reducer rebuilds its buckets, after the first iteration, in the order its autograd
hooks fired (``torch/csrc/distributed/c10d/reducer.cpp``, ``rebuild_buckets``). This module
builds a model laid out like an app.catalog.models preset — the same modules, parameter names and
``model.parameters()`` order, at small widths — runs one backward and records the order with
``Tensor.register_post_accumulate_grad_hook`` (which fires where DDP's hook does: after the
gradient has been accumulated into ``.grad``). The GPT is nanoGPT's (Karpathy; fused QKV,
GeLU MLP, LayerNorm, learned positions, the output head tied to ``wte``), the Llama
torchtitan's (separate wq/wk/wv, rotary embeddings, SwiGLU ``w2(silu(w1(x)) · w3(x))``,
RMSNorm, untied output). :func:`bucket_assignment` then cuts the real-sized tensors (meta
tensors: no memory) with torch's own ``dist._compute_bucket_assignment_by_size``.

Used by workers/zero.py (the data-parallel real run) and tests/workers/test_ddp_buckets.py.
"""

from __future__ import annotations

from functools import cache

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

WIDTH, HEADS, VOCAB, SEQ = 16, 4, 32, 8
"""The small model's sizes (the order does not depend on them)."""


class GptBlock(nn.Module):
    def __init__(self, h: int, kv_dim: int):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = nn.LayerNorm(h), nn.Module(), \
            nn.LayerNorm(h), nn.Module()
        self.attn.qkv, self.attn.proj = nn.Linear(h, h + 2 * kv_dim), nn.Linear(h, h)
        self.mlp.fc, self.mlp.proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
        self.kv_dim = kv_dim

    def forward(self, x):
        b, s, h = x.shape
        d = h // HEADS
        q, k, v = self.attn.qkv(self.ln_1(x)).split([h, self.kv_dim, self.kv_dim], dim=2)
        q = q.view(b, s, HEADS, d).transpose(1, 2)
        k, v = (t.view(b, s, self.kv_dim // d, d).transpose(1, 2) for t in (k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.attn.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.mlp.proj(F.gelu(self.mlp.fc(self.ln_2(x))))


class LlamaAttention(nn.Module):
    def __init__(self, h: int, kv_dim: int):
        super().__init__()
        self.wq, self.wk = nn.Linear(h, h, bias=False), nn.Linear(h, kv_dim, bias=False)
        self.wv, self.wo = nn.Linear(h, kv_dim, bias=False), nn.Linear(h, h, bias=False)
        self.kv_dim = kv_dim

    def forward(self, x, cos, sin):
        b, s, h = x.shape
        d = h // HEADS
        q = self.wq(x).view(b, s, HEADS, d)
        k = self.wk(x).view(b, s, self.kv_dim // d, d)
        v = self.wv(x).view(b, s, self.kv_dim // d, d)

        def rope(t):
            return t * cos + torch.cat((-t[..., d // 2:], t[..., :d // 2]), -1) * sin
        q, k = rope(q), rope(k)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=True, enable_gqa=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, h))


class LlamaFeedForward(nn.Module):
    def __init__(self, h: int):
        super().__init__()
        self.w1 = nn.Linear(h, 3 * h, bias=False)
        self.w3 = nn.Linear(h, 3 * h, bias=False)
        self.w2 = nn.Linear(3 * h, h, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class LlamaBlock(nn.Module):
    def __init__(self, h: int, kv_dim: int):
        super().__init__()
        self.attention_norm, self.attention = nn.RMSNorm(h), LlamaAttention(h, kv_dim)
        self.ffn_norm, self.feed_forward = nn.RMSNorm(h), LlamaFeedForward(h)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Model(nn.Module):
    """A preset's layout at width :data:`WIDTH` (its layer count and GQA ratio kept)."""

    def __init__(self, shape):
        super().__init__()
        self.gpt = shape.family == "gpt"
        h = WIDTH
        kv_dim = h * shape.kv_heads // shape.heads if shape.heads % HEADS == 0 else h
        kv_dim = max(h // HEADS, kv_dim)
        if self.gpt:
            self.wte, self.wpe = nn.Embedding(VOCAB, h), nn.Embedding(SEQ, h)
            self.h = nn.ModuleList(GptBlock(h, kv_dim) for _ in range(shape.layers))
            self.ln_f = nn.LayerNorm(h)
        else:
            self.tok_embeddings = nn.Embedding(VOCAB, h)
            self.h = nn.ModuleList(LlamaBlock(h, kv_dim) for _ in range(shape.layers))
            self.norm, self.output = nn.RMSNorm(h), nn.Linear(h, VOCAB, bias=False)

    def forward(self, ids):
        if self.gpt:
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
            for block in self.h:
                x = block(x)
            return F.linear(self.ln_f(x), self.wte.weight)          # tied head
        d = WIDTH // HEADS
        angles = torch.outer(torch.arange(ids.shape[1]).float(), torch.ones(d))
        cos, sin = angles.cos()[None, :, None], angles.sin()[None, :, None]
        x = self.tok_embeddings(ids)
        for block in self.h:
            x = block(x, cos, sin)
        return self.output(self.norm(x))


@cache
def ready_names(shape) -> tuple[str, ...]:
    """Parameter names in the order their gradients became ready in one backward (once per
    shape)."""
    torch.manual_seed(0)
    model = Model(shape)
    name_of = {id(p): n for n, p in model.named_parameters()}
    seen: list[str] = []
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda t: seen.append(name_of[id(t)]))
    F.cross_entropy(model(torch.randint(VOCAB, (2, SEQ))).flatten(0, 1),
                    torch.randint(VOCAB, (2 * SEQ,))).backward()
    return tuple(seen)


def bucket_assignment(shape, element_bytes: int, limits: list[int]) -> list[list[int]]:
    """torch's buckets for ``shape``'s real-sized gradients in measured ready order (indices
    into app.catalog.models' ``parameters()``), with DDP's rebuild limits ``limits``."""
    params = shape.parameters()
    index = {name: i for i, (name, _) in enumerate(params)}
    order = [index[n] for n in ready_names(shape)]
    if sorted(order) != list(range(len(params))):
        raise AssertionError("the small model's parameters are not the preset's")
    dtype = {1: torch.float8_e4m3fn, 2: torch.bfloat16, 4: torch.float32}[element_bytes]
    tensors = [torch.empty(params[t][1], dtype=dtype, device="meta") for t in order]
    groups, _ = dist._compute_bucket_assignment_by_size(tensors, limits, [False] * len(order),
                                                        list(range(len(order))))
    return [[order[i] for i in group] for group in groups]
