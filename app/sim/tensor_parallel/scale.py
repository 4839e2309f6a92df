"""Tensor and sequence parallelism at the scale of a real model: activation memory, what one
transformer layer communicates, and how long that takes next to its compute.

Activation memory per layer comes from :mod:`app.sim.memory.activations` (Korthikanti et al. 2022,
Table 2) — the same code as the memory ledger. For GPT-3 175B (s 2048, b 1, t 8) it gives
552 MiB per layer with tensor parallelism and 342 MiB with sequence parallelism added.

Communication per layer and micro-batch (Shoeybi et al. 2019 §3; Korthikanti §4.2.2): every
collective moves the layer's activations, S = s·b·h elements of 2 bytes (16-bit).
TP: 2 all-reduces forward (g after attention and after the MLP) and 2 backward (f in front of
each). TP+SP: each all-reduce becomes a reduce-scatter plus an all-gather — the same ring
traffic, 2(t−1)/t · S per rank — and backward adds one all-gather per column-parallel input
(attention's and the MLP's), because only the sequence shard of the input was kept. The list
is exactly what the simulated blocks call (tests/sim/test_tp_scale.py checks it against them).

Time: the α–β model of app/sim/collectives/cost.py on the ring schedules, the tensor-parallel
group inside one NVLink node, or spread one GPU per node over InfiniBand. Compute: the layer's
forward FLOPs from app/sim/flops.py (24·s·b·h²(1 + s/(6h)) for GPT-3), backward twice that,
split t ways, at the sustained throughput given.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.memory import activations
from app.sim.collectives.cost import Links, collective_time_us
from app.sim.flops import layer_forward_flops
from app.catalog.models import ModelShape

BYTES_PER_ACTIVATION = 2
"""16-bit activations (Korthikanti's assumption)."""
TP_SWEEP = (1, 2, 4, 8, 16, 32, 64)

# (op, pass, what it is for), per transformer layer, in the order a micro-batch calls them
TP_LAYER = (
    ("all_reduce", "forward", "attention: g sums the output projection's partial sums"),
    ("all_reduce", "forward", "MLP: g sums the second linear's partial sums"),
    ("all_reduce", "backward", "MLP: f sums the first linear's partial input gradients"),
    ("all_reduce", "backward", "attention: f sums the QKV projection's partial input gradients"),
)
SP_LAYER = (
    ("all_gather", "forward", "attention: gather LayerNorm's sequence shards"),
    ("reduce_scatter", "forward", "attention: sum the partial outputs, keep each rank's rows"),
    ("all_gather", "forward", "MLP: gather LayerNorm's sequence shards"),
    ("reduce_scatter", "forward", "MLP: sum the partial outputs, keep each rank's rows"),
    ("all_gather", "backward", "MLP: gather dZ's sequence shards"),
    ("all_gather", "backward", "MLP: re-gather its input for the weight gradient"),
    ("reduce_scatter", "backward", "MLP: sum the partial input gradients, keep each rank's rows"),
    ("all_gather", "backward", "attention: gather dZ's sequence shards"),
    ("all_gather", "backward", "attention: re-gather its input for the weight gradient"),
    ("reduce_scatter", "backward", "attention: sum the partial input gradients, keep rows"),
)
RING_SHARE = {"all_reduce": lambda t: 2 * (t - 1) / t, "all_gather": lambda t: (t - 1) / t,
              "reduce_scatter": lambda t: (t - 1) / t}
"""Bytes each rank sends in a ring collective, as a share of the whole tensor (nccl-tests)."""


@dataclass(frozen=True)
class LayerCollective:
    op: str
    pass_: str
    purpose: str
    elements: int
    sent_bytes: float           # per rank, ring
    nvlink_us: float
    infiniband_us: float


@dataclass(frozen=True)
class Variant:
    """TP or TP+SP on one layer: its collectives and their totals."""

    name: str
    collectives: tuple[LayerCollective, ...]
    activation_bytes: float

    def total(self, attr: str, pass_: str | None = None) -> float:
        return sum(getattr(c, attr) for c in self.collectives
                   if pass_ is None or c.pass_ == pass_)


@dataclass(frozen=True)
class Scale:
    model: ModelShape
    seq: int
    micro_batch: int
    tp: int
    terms: tuple[tuple[str, str, float, float, float], ...]
    """(name, formula, bytes without parallelism, with TP, with TP+SP) per activation term"""
    no_parallelism_bytes: float
    tp_only: Variant
    tp_sp: Variant
    forward_flops: float
    """one layer, one micro-batch, the whole layer (not split)"""
    compute_us: float
    """forward + backward of one layer on one GPU of the group"""
    sweep: tuple[tuple[int, float, float, float, float], ...]
    """(t, compute µs, TP comm placed on nodes µs, TP comm one GPU per node µs, TP comm NVLink
    only µs) for t in TP_SWEEP that divide the heads"""


def layer_shape(model: ModelShape, seq: int, micro_batch: int) -> activations.LayerShape:
    return activations.LayerShape(seq, micro_batch, model.hidden, model.heads, model.kv_heads,
                                  model.ffn, model.gated_mlp, dropout=model.family == "gpt")


def _variant(name, table, tp, elements, nvlink: Links, infiniband: Links, memory) -> Variant:
    size = elements * BYTES_PER_ACTIVATION
    items = tuple(
        LayerCollective(op, pass_, purpose, elements,
                        RING_SHARE[op](tp) * size if tp > 1 else 0.0,
                        collective_time_us(op, tp, nvlink, size),
                        collective_time_us(op, tp, infiniband, size))
        for op, pass_, purpose in (table if tp > 1 else ()))
    return Variant(name, items, memory)


def comm_time_us(table, tp: int, links: Links, size_bytes: float) -> float:
    """The time of every collective in ``table``, one after another."""
    if tp < 2:
        return 0.0
    ops = [op for op, _, _ in table]
    return sum(ops.count(op) * collective_time_us(op, tp, links, size_bytes) for op in set(ops))


def scale(model: ModelShape, seq: int, micro_batch: int, tp: int, sequence_parallel: bool,
          alpha_us: float, intra_node_gbs: float, inter_node_gbs: float, gpus_per_node: int,
          gpu_tflops: float) -> Scale:
    shape = layer_shape(model, seq, micro_batch)
    rows = zip(activations.breakdown(shape, 1), activations.breakdown(shape, tp),
               activations.breakdown(shape, tp, True))
    terms = tuple((a.name, a.formula, none, with_tp, with_sp)
                  for (a, none), (_, with_tp), (_, with_sp) in rows)
    elements = seq * micro_batch * model.hidden
    # inside: one node holds every rank of the sweep; across: one GPU per node
    inside = Links(alpha_us, intra_node_gbs, inter_node_gbs, max(TP_SWEEP))
    across = Links(alpha_us, intra_node_gbs, inter_node_gbs, 1)
    flops = layer_forward_flops(model, seq, micro_batch)
    per_us = gpu_tflops * 1e6          # FLOP per µs

    def compute(t: int) -> float:
        return 3 * flops / t / per_us   # forward + backward (twice the forward)

    size = elements * BYTES_PER_ACTIVATION
    table = SP_LAYER if sequence_parallel else TP_LAYER
    placed = Links(alpha_us, intra_node_gbs, inter_node_gbs, gpus_per_node)
    sweep = tuple((t, compute(t), comm_time_us(table, t, placed, size),
                   comm_time_us(table, t, across, size), comm_time_us(table, t, inside, size))
                  for t in TP_SWEEP if model.heads % t == 0)
    return Scale(
        model, seq, micro_batch, tp, terms,
        activations.per_layer_bytes(shape, 1),
        _variant("TP", TP_LAYER, tp, elements, inside, across,
                 activations.per_layer_bytes(shape, tp)),
        _variant("TP + SP", SP_LAYER, tp, elements, inside, across,
                 activations.per_layer_bytes(shape, tp, True)),
        flops, compute(tp), sweep)
