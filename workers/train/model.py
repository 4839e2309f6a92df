"""The tiny GPT, as one pipeline stage of it on one rank: this rank's shards of the stage's
tensors (app.sim.train.model says which, and their seeded values) and the forward pass of one
micro-batch — one sequence, this rank's seq/cp tokens of it.

    first stage   ids → vocab-parallel embedding                        (tensor.py)
    every block   x + attention(RMSNorm(x));  x + MLP or MoE(RMSNorm(x))
                  attention: column-parallel Q, K, V (this rank's heads), the ring
                  (context.py), row-parallel output, entered and left through tensor.py
                  MLP: SwiGLU, gate and up column-, down row-parallel; MoE: expert.py, with
                  its load-balancing loss (weight α / micro-batches of the global batch)
                  attached to the layer's output
    last stage    RMSNorm → vocab-parallel head → vocab-parallel cross-entropy, summed over
                  the tokens and scaled by 1 / (tokens in the global batch)

Recomputation (Chen et al. 2016; Korthikanti et al. 2022): ``full`` checkpoints every block
(torch.utils.checkpoint: only the block's input is kept, the block runs again in backward,
its collectives included); ``selective`` recomputes only the attention core (context.py's
FlashAttention-style function); ``none`` keeps everything autograd saves.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint

from app.sim.context_parallel.layout import tokens_table
from app.sim.train.model import Shape, initial, tensors
from workers.train import context, expert, tensor

EPS = 1e-6
"""RMSNorm's ε (Llama's)."""


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


class StageModel:
    """This rank's part of the model: the layers of its pipeline stage, cut over tp and ep."""

    def __init__(self, shape: Shape, groups, *, seed: int, dtype: torch.dtype, pp: int,
                 sp: bool, recompute: str, aux_weight: float = 0.0):
        c = groups.coords
        self.shape, self.groups, self.dtype, self.sp, self.recompute = (shape, groups, dtype,
                                                                        sp, recompute)
        self.aux_weight = aux_weight
        """the MoE layers' load-balancing loss: α / (micro-batches in the global batch)"""
        self.aux: dict[tuple[int, int], float] = {}
        """(micro-batch, layer) → this rank's part of that layer's load-balancing loss"""
        self.tp, self.ep = groups["tp"].size, groups["ep"].size
        self.first, self.last = c["pp"] == 0, c["pp"] == pp - 1
        self.specs, self.params = {}, {}
        for index, t in enumerate(tensors(shape)):
            if t.stage(shape.layers, pp) != c["pp"]:
                continue
            value = t.shard(initial(t, index, seed), c["tp"], self.tp, c["ep"], self.ep)
            self.specs[t.name] = t
            self.params[t.name] = torch.tensor(np.ascontiguousarray(value), dtype=dtype,
                                               requires_grad=True)
        self.layers = sorted({t.layer for t in self.specs.values() if t.layer is not None})
        cp = groups["cp"].size
        self.table = torch.tensor(np.asarray(tokens_table(shape.seq, cp, "zigzag")))  # (cp, n)
        self.positions = self.table[c["cp"]]
        self.vocab_start = c["tp"] * (shape.vocab // self.tp)

    # -- the data of one micro-batch ------------------------------------------------------

    def local_tokens(self, ids: np.ndarray) -> torch.Tensor:
        """This rank's zigzag share of a sequence's tokens."""
        mine = np.ascontiguousarray(ids[self.positions.cpu().numpy()])
        return torch.from_numpy(mine).to(torch.get_default_device())

    @property
    def activation_shape(self) -> tuple[int, int]:
        """What one stage sends the next: (tokens held, hidden) — seq/cp tokens, /tp with SP."""
        n = self.positions.numel() // (self.tp if self.sp else 1)
        return n, self.shape.hidden

    # -- forward ----------------------------------------------------------------------------

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None, scale: float,
                microbatch: int = 0):
        """The stage on one micro-batch: ``x`` is token ids on the first stage, else the
        previous stage's activations; the last stage returns the scaled loss."""
        p, tp = self.params, self.groups["tp"]
        if self.first:
            x = tensor.vocab_embedding(x, p["embed"], self.vocab_start, tp, self.sp)
        for layer in self.layers:
            if self.recompute == "full":
                x = checkpoint(self.block, x, layer, microbatch, use_reentrant=False)
            else:
                x = self.block(x, layer, microbatch)
        if not self.last:
            return x
        h = tensor.enter(rms_norm(x, p["final_norm"]), tp, self.sp)
        losses = tensor.vocab_parallel_loss(h @ p["head"], targets, self.vocab_start, tp)
        return losses.sum() * scale

    def block(self, x: torch.Tensor, layer: int, microbatch: int = 0) -> torch.Tensor:
        x = x + self.attention(rms_norm(x, self.params[f"layers.{layer}.attn_norm"]), layer)
        return x + self.mlp(rms_norm(x, self.params[f"layers.{layer}.mlp_norm"]), layer,
                            microbatch)

    def attention(self, h: torch.Tensor, layer: int) -> torch.Tensor:
        w = lambda name: self.params[f"layers.{layer}.{name}"]  # noqa: E731
        s, tp = self.shape, self.groups["tp"]
        h = tensor.enter(h, tp, self.sp)                                # (n, hidden)
        n, d = h.shape[0], s.head_dim
        q = (h @ w("wq")).view(n, s.heads // self.tp, d)
        k = (h @ w("wk")).view(n, s.kv_heads // self.tp, d)
        v = (h @ w("wv")).view(n, s.kv_heads // self.tp, d)
        core = context.attention(q, k, v, self.table, self.groups,
                                 flash=self.recompute == "selective")
        return tensor.leave(core.reshape(n, -1) @ w("wo"), tp, self.sp)

    def mlp(self, h: torch.Tensor, layer: int, microbatch: int = 0) -> torch.Tensor:
        w = lambda name: self.params[f"layers.{layer}.{name}"]  # noqa: E731
        tp = self.groups["tp"]
        if self.shape.moe:
            out, aux = expert.moe(h, {"router": w("router"), "w1": w("experts.w1"),
                                      "w3": w("experts.w3"), "w2": w("experts.w2")},
                                  self.groups, self.shape.top_k, self.sp, self.aux_weight)
            if aux is not None:      # full recomputation runs the block again: same key, value
                self.aux[(microbatch, layer)] = float(aux)
            return out
        h = tensor.enter(h, tp, self.sp)
        return tensor.leave(expert.swiglu(h, w("w1"), w("w3"), w("w2")), tp, self.sp)

