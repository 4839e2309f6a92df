"""What one block, the embedding and the head issue on one rank for one micro-batch, as tasks
of a :class:`app.sim.train.program.Program` — read off the framework's code (workers/train/
model.py, tensor.py, context.py, expert.py): the compute between two messages is one task,
each message a collective on its group.

    attention   norm · [SP: all-gather] · Q, K, V · the core (cp > 1: the ring, each step's
                K/V exchange beside the block it overlaps) · output projection · all-reduce
                (SP: reduce-scatter)
    MLP         norm · [SP: all-gather] · SwiGLU · all-reduce (SP: reduce-scatter)
    MoE         [SP: all-gather] · router · all-to-all of the counts · dispatch · the local
                experts · combine · all-reduce (SP: reduce-scatter)

Backward runs the mirror image, f's all-reduces where forward had none, the ring's K, V, dK, dV
exchanges, and (full recomputation) the block's forward again first.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.train.cost import BACKWARD, KERNELS
from app.sim.train.model import Shape


@dataclass(frozen=True)
class Sizes:
    """A micro-batch's sizes on one rank."""

    n: int            # tokens this rank's cp share holds (gathered under SP for the matmuls)
    h: int
    e: int            # bytes per element
    tp: int
    cp: int
    sp: bool
    aux: bool = False  # the MoE layers add the load-balancing loss (workers/train/expert.py)


def block_forward(pr, s: Shape, z: Sizes, recompute: str) -> None:
    """One block's forward (attention, then MLP or MoE) as the framework issues it."""
    n, h, tp, e = z.n, z.h, z.tp, z.e
    d, a, kv = s.head_dim, s.heads // tp, s.kv_heads // tp
    act = n * h * e
    enter_op, leave_op = ("all_gather", "reduce_scatter") if z.sp else (None, "all_reduce")
    # attention
    pr.compute(0, KERNELS["norm"])
    if enter_op:
        pr.collective("tp", enter_op, act)
    pr.compute(2 * n * h * (a + 2 * kv) * d, KERNELS["qkv"])
    _core_forward(pr, s, z)
    pr.compute(2 * n * a * d * h, KERNELS["out"])
    pr.collective("tp", leave_op, act)
    # MLP
    pr.compute(0, KERNELS["norm"])
    if s.moe:
        _moe_forward(pr, s, z)
    else:
        if enter_op:
            pr.collective("tp", enter_op, act)
        pr.compute(3 * 2 * n * h * s.ffn // tp, KERNELS["mlp"])
        pr.collective("tp", leave_op, act)


def _core_forward(pr, s: Shape, z: Sizes) -> None:
    a, d = s.heads // z.tp, s.head_dim
    block_flops = 2 * 2 * z.n * z.n * a * d
    if z.cp == 1:
        pr.compute(block_flops, KERNELS["core"])
        return
    kv_bytes = 2 * z.n * (s.kv_heads // z.tp) * d * z.e
    ready = pr.flush()
    for step in range(z.cp):
        exchange = (pr.collective("cp", "ring", kv_bytes, main=False, after=(ready,))
                    if step < z.cp - 1 else None)
        pr.compute(block_flops, KERNELS["ring_block"])
        pr.flush()
        if exchange:
            pr.waits.append(exchange)
            ready = exchange


def _core_backward(pr, s: Shape, z: Sizes, flash: bool) -> None:
    a, d = s.heads // z.tp, s.head_dim
    block_flops = 2 * 2 * z.n * z.n * a * d
    if z.cp == 1:
        again = (block_flops, KERNELS["core"]) if flash else (0, 0)
        pr.compute(BACKWARD * block_flops + again[0], BACKWARD * KERNELS["core"] + again[1])
        return
    kv_bytes = 2 * z.n * (s.kv_heads // z.tp) * d * z.e
    for step in range(z.cp):      # recompute the block's P, then dQ, dK, dV; pass K, V, dK, dV
        pr.compute((1 + BACKWARD) * block_flops, (1 + BACKWARD) * KERNELS["ring_block"])
        last = pr.flush()
        exchange = pr.collective("cp", "ring", kv_bytes * (1 if step == z.cp - 1 else 2),
                                 main=False, after=(last,))
        pr.waits.append(exchange)


def _moe_forward(pr, s: Shape, z: Sizes) -> None:
    n, h, tp, e = z.n, z.h, z.tp, z.e
    if z.sp:
        pr.collective("tp", "all_gather", n * h * e)
    pr.compute(2 * n * h * s.experts, KERNELS["router"])
    rows = n * s.top_k                                  # assignments sent (balanced: received)
    pr.collective("ep", "all_to_all", s.experts * 8)     # the per-expert counts
    pr.collective("ep", "all_to_all", rows * h * e)
    local = s.experts // max(1, len(pr.groups["ep"]))
    pr.compute(3 * 2 * rows * h * s.ffn // tp, KERNELS["expert"] * local)
    pr.collective("ep", "all_to_all", rows * h * e)
    pr.compute(rows * h, KERNELS["moe_combine"])
    if z.aux:            # the micro-batch's per-expert counts summed over cp (int64), the loss
        pr.collective("cp", "all_reduce", s.experts * 8)
        pr.compute(4 * n * s.experts, KERNELS["aux_loss"])
    pr.collective("tp", "reduce_scatter" if z.sp else "all_reduce", n * h * e)


def block_backward(pr, s: Shape, z: Sizes, recompute: str, last_mb: bool) -> None:
    """The block's backward (its forward again first under full recomputation)."""
    n, h, tp, e = z.n, z.h, z.tp, z.e
    d, a, kv = s.head_dim, s.heads // tp, s.kv_heads // tp
    act = n * h * e
    if recompute == "full":
        where = pr.where
        pr.flush()
        pr.where = {**where, "kind": "R"}
        block_forward(pr, s, z, "none")
        pr.flush()
        pr.where = where
    leave_back, enter_back = ("all_gather", "reduce_scatter") if z.sp else (None, "all_reduce")
    # MLP
    if leave_back:
        pr.collective("tp", leave_back, act)
    if s.moe:
        rows = n * s.top_k
        local = s.experts // max(1, len(pr.groups["ep"]))
        pr.compute(BACKWARD * rows * h, BACKWARD * KERNELS["moe_combine"])
        pr.collective("tp", "all_reduce", rows * e)                 # the gates' f
        pr.collective("ep", "all_to_all", rows * h * e)
        pr.compute(BACKWARD * 3 * 2 * rows * h * s.ffn // tp, BACKWARD * KERNELS["expert"] * local)
        pr.collective("ep", "all_to_all", rows * h * e)
        pr.compute(BACKWARD * 2 * n * h * s.experts, BACKWARD * KERNELS["router"])
        pr.collective("tp", "all_reduce", act)                      # the experts' input f
    else:
        pr.compute(BACKWARD * 3 * 2 * n * h * s.ffn // tp, BACKWARD * KERNELS["mlp"])
        pr.collective("tp", enter_back, act)
    pr.compute(0, BACKWARD * KERNELS["norm"])
    # attention
    if leave_back:
        pr.collective("tp", leave_back, act)
    pr.compute(BACKWARD * 2 * n * a * d * h, BACKWARD * KERNELS["out"])
    _core_backward(pr, s, z, flash=recompute == "selective")
    pr.compute(BACKWARD * 2 * n * h * (a + 2 * kv) * d, BACKWARD * KERNELS["qkv"])
    pr.collective("tp", enter_back, act)
    pr.compute(0, BACKWARD * KERNELS["norm"])
    if last_mb and z.sp:                 # the norms' partial gradients, summed over tp
        pr.collective("tp", "all_reduce", 2 * h * e)


def head_forward(pr, p, z: Sizes) -> None:
    e = z.e
    pr.compute(0, KERNELS["norm"])
    if z.sp:
        pr.collective("tp", "all_gather", z.n * p.hidden * e)
    pr.compute(2 * z.n * p.hidden * p.vocab // p.tp, KERNELS["head"] // 2)
    for _ in range(3):                    # the vocab-parallel loss: max, target, Σ exp
        pr.collective("tp", "all_reduce", z.n * e)
    pr.compute(0, KERNELS["head"] // 2)


def head_backward(pr, p, z: Sizes) -> None:
    pr.compute(BACKWARD * 2 * z.n * p.hidden * p.vocab // p.tp, BACKWARD * KERNELS["head"])
    pr.collective("tp", "reduce_scatter" if z.sp else "all_reduce", z.n * p.hidden * z.e)
    pr.compute(0, BACKWARD * KERNELS["norm"])
