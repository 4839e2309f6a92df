"""The training loop: the same code for a layout of many ranks and for one process (the
reference), every parallelism composed in one step.

One step on one rank:

    1. data      this replica's m sequences of the step (app.sim.train.data), this cp rank's
                 zigzag tokens of each
    2. pipeline  the schedule's forward and backward passes (pipeline.py), TP, CP and EP
                 communicating inside the passes (tensor.py, context.py, expert.py); the last
                 micro-batch's backward reduces the gradient buckets as they fill (data.py)
    3. clip      the global gradient norm across every group, the clipping factor (optim.py)
    4. update    AdamW on what this rank updates; ZeRO 1 all-gathers the updated slices

The loss of a step is the mean cross-entropy over every token of the global batch (dp × m
sequences of seq tokens): each rank's loss is its tokens' sum divided by that count, so the
gradients summed over dp·cp are the gradient of the mean. With ``aux_loss_coeff`` α > 0 an MoE
model's objective adds, for every MoE layer and micro-batch (one sequence), the load-balancing
loss α·E·Σᵢ fᵢPᵢ over that micro-batch's tokens, averaged over the global batch's micro-batches
(expert.load_balancing_loss; Megatron-LM averages a micro-batch's losses the same way). One step (``record_step``) is
recorded: every compute pass and every message with its time (comm.REC).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from app.sim.train.data import replica_sequences, sequences
from app.sim.train.model import Shape, tensors
from workers.train import comm, optim, pipeline
from workers.train.data import GradientBuckets
from workers.train.model import StageModel

DTYPES = {"float64": torch.float64, "float32": torch.float32}


@dataclass
class Run:
    losses: list[float] = field(default_factory=list)
    """the global batch's mean loss per step (known on the last stage; 0 elsewhere)"""
    aux_losses: list[float] = field(default_factory=list)
    """the MoE layers' load-balancing loss per step, as it enters the objective: α · E · Σᵢ
    fᵢPᵢ of every MoE layer and micro-batch, summed over the layers and averaged over the
    global batch's micro-batches (0 with aux_loss_coeff 0 or no experts; known on every rank)"""
    norms: list[float] = field(default_factory=list)
    """the global gradient norm before clipping, per step"""
    step_s: list[float] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    """this rank's events of the recorded step"""
    shards: dict = field(default_factory=dict)
    """name → (tp rank, ep rank, final values as numpy) of this rank's tensors"""


def reference_params(p):
    """The same training in one process: every size 1, the global batch as micro-batches of one
    sequence, nothing recomputed (the ``batch`` sequences are the same ones)."""
    return p.model_copy(update={"tp": 1, "cp": 1, "pp": 1, "dp": 1, "ep": 1, "zero": 0,
                                "microbatches": p.batch, "schedule": "1f1b",
                                "recompute": "none", "sequence_parallel": False, "nodes": 1})


def barrier(group) -> None:
    if group.size > 1:
        dist.barrier(group=group.pg)


def train(p, groups, record_step: int | None = None) -> Run:
    c = groups.coords
    shape, dtype = Shape.of(p), DTYPES[p.dtype]
    aux = p.aux_loss_coeff if shape.moe else 0.0
    model = StageModel(shape, groups, seed=p.seed, dtype=dtype, pp=p.pp,
                       sp=p.sequence_parallel and p.tp > 1, recompute=p.recompute,
                       aux_weight=aux / p.batch)
    buckets = GradientBuckets(model, p.zero)
    adamw = optim.AdamW(buckets.buckets, p.lr, p.weight_decay)
    order = pipeline.orders(p.schedule, p.pp, p.microbatches)[c["pp"]]
    scale = 1.0 / (p.batch * p.seq)
    run = Run()
    for step in range(p.steps):
        ids, targets = sequences(p.vocab, p.seq, p.seed, step,                    # 1
                                 replica_sequences(c["dp"], p.microbatches))
        batch = [(model.local_tokens(ids[i]), model.local_tokens(targets[i]))
                 for i in range(p.microbatches)]
        for t in model.params.values():
            t.grad = None
        barrier(groups["world"])
        if step == record_step:
            comm.REC.start()
        began = time.perf_counter()
        loss = pipeline.run(model, order, batch, scale, buckets.arm)              # 2
        buckets.finish()
        with comm.REC.span("compute", "optimizer"):
            norm = optim.global_norm(buckets.buckets, groups["world"])           # 3
            adamw.step(optim.clip_coefficient(norm, p.clip))                     # 4
            buckets.gather_params()
        run.step_s.append(time.perf_counter() - began)
        if step == record_step:
            run.events = comm.REC.stop()
        run.norms.append(norm)
        run.losses.append(float(comm.all_reduce(torch.tensor([loss], dtype=torch.float64),
                                                groups["dp_cp"])[0]) if model.last else 0.0)
        run.aux_losses.append(aux_loss(model, groups) if aux else 0.0)
    run.shards = {name: (c["tp"], c["ep"], t.detach().cpu().numpy().copy())
                  for name, t in model.params.items()}
    return run


def aux_loss(model: StageModel, groups) -> float:
    """The step's load-balancing loss (Run.aux_losses) from every rank's parts: the cp ranks'
    parts of a micro-batch add up, every stage holds its own layers, every replica its own
    micro-batches; the tp ranks of a part hold the same number, so tp rank 0 counts it. Clears
    the parts for the next step."""
    mine = sum(model.aux.values()) if groups.coords["tp"] == 0 else 0.0
    model.aux.clear()
    return float(comm.all_reduce(torch.tensor([mine], dtype=torch.float64), groups["world"])[0])


def assemble(shape: Shape, parts: list[dict], tp: int, ep: int) -> dict[str, np.ndarray]:
    """Full tensors from every rank's shards (``Run.shards`` of each rank)."""
    out = {}
    for t in tensors(shape):
        pieces = {}
        for shards in parts:
            if t.name in shards:
                tp_rank, ep_rank, value = shards[t.name]
                pieces.setdefault((tp_rank if t.tp_dim is not None else 0,
                                   ep_rank if t.expert else 0), value)
        grid = [[pieces[(i, j)] for i in range(tp if t.tp_dim is not None else 1)]
                for j in range(ep if t.expert else 1)]
        rows = [np.concatenate(row, axis=t.tp_dim) if t.tp_dim is not None else row[0]
                for row in grid]
        out[t.name] = np.concatenate(rows, axis=0) if t.expert else rows[0]
    return out


def replica_spread(shape: Shape, parts: list[dict]) -> float:
    """The largest difference between two ranks holding the same values of a tensor — dp·cp or
    edp replicas, and the tp ranks of a replicated tensor (0: replicas agree)."""
    specs = {t.name: t for t in tensors(shape)}
    seen, worst = {}, 0.0
    for shards in parts:
        for name, (tp_rank, ep_rank, value) in shards.items():
            t = specs[name]
            key = (name, tp_rank if t.tp_dim is not None else 0, ep_rank if t.expert else 0)
            if key in seen:
                worst = max(worst, float(np.abs(seen[key] - value).max()))
            else:
                seen[key] = value
    return worst
