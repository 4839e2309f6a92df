"""Memory per rank for one training step of the tiny model: the ledger of chapter 1
(app.sim.memory) applied rank by rank.

Model states are counted from the tensors the rank really holds (app.sim.train.model: its
stage's tensors, cut over tp and ep), in the run's dtype: parameters, gradients, and AdamW's
two moments (ZeRO Table 1's K = 8 bytes per fp32 parameter is these two moments; in float64
they are 16) — divided over the replicas with ZeRO 1 (dp·cp for dense tensors, dp·cp/ep for
experts). The framework's flat bucket copies (a flat gradient and a flat parameter buffer per
bucket, workers/train/data.py) are its buffers.

Activations per block and micro-batch are Korthikanti et al. 2022's Table 2 terms
(app.sim.memory.activations.per_layer_bytes: this rank's seq/cp tokens, its tp share, sequence
parallelism and recomputation), without dropout (the tiny model has none) and in the run's
dtype, for the stage's blocks, times the micro-batches the schedule holds at its peak: GPipe
all m; 1F1B min(p − r, m) on stage r (PTD-P §2.2; the first stage holds p). An MoE block is
counted as its dense MLP (one expert's worth per token for each of its top-k).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from app.sim.memory.activations import LayerShape, per_layer_bytes
from app.sim.parallelism.layout import Layout
from app.sim.train.model import Shape, buckets, tensors
from app.sim.train.program import ELEMENT_BYTES


@dataclass(frozen=True)
class RankMemory:
    rank: int
    params: float
    grads: float
    optimizer: float
    activations: float
    buffers: float
    in_flight: int
    """micro-batches whose activations the rank holds at its peak"""

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations + self.buffers

    def to_dict(self) -> dict:
        return {"rank": self.rank, "params": self.params, "grads": self.grads,
                "optimizer": self.optimizer, "activations": self.activations,
                "buffers": self.buffers, "total": self.total, "in_flight": self.in_flight}


def in_flight(schedule: str, pp: int, stage: int, microbatches: int) -> int:
    return microbatches if schedule == "gpipe" else min(pp - stage, microbatches)


def per_rank(p) -> tuple[RankMemory, ...]:
    layout = Layout.of(p.layout_params())
    shape = Shape.of(p)
    e = ELEMENT_BYTES[p.dtype]
    every = tensors(shape)
    act_shape = LayerShape(p.seq // p.cp, 1, p.hidden, p.heads, p.kv_heads,
                           p.ffn * (p.top_k if shape.moe else 1), gated_mlp=True,
                           dropout=False, act_bytes=e)
    sp = p.sequence_parallel and p.tp > 1
    block = per_layer_bytes(act_shape, p.tp, sp, p.recompute)
    out = []
    for r in range(layout.world):
        c = layout.coords(r)
        mine = [t for t in every if t.stage(p.layers, p.pp) == c["pp"]]
        numel = {id(t): prod(t.local_shape(p.tp, p.ep)) for t in mine}
        held = sum(numel.values())
        optimizer = 0.0
        for t in mine:
            replicas = (p.dp * p.cp // p.ep) if t.expert else p.dp * p.cp
            optimizer += 2 * e * numel[id(t)] / (replicas if p.zero else 1)
        flat = sum(sum(numel[id(t)] for t in b) for b in buckets(shape, mine, p.tp, p.ep))
        flight = in_flight(p.schedule, p.pp, c["pp"], p.microbatches)
        out.append(RankMemory(r, held * e, held * e, optimizer,
                              block * (p.layers // p.pp) * flight, 2 * flat * e, flight))
    return tuple(out)
