"""This machine, measured at the worker's start for the cost model (app/sim/train/cost.py): a
matmul rate, the fixed cost of one op, and the α–β model of its links (Hockney 1994: a message of
b bytes costs α + b/β).

Measured by every rank at once, as they will run — on a 2-core CPU eight ranks share two cores,
and what one rank gets is what the training step gets:

    gflops     2·n·h·f / t of the tiny model's largest matmul, median of repeats
    kernel_us  one block of the model itself, forward and backward on one sequence in one
               process (workers/train/model.py, no messages): its time less its FLOPs at that
               rate, over the ops the cost model counts for a block (app.sim.train.passes.
               block_cost) — PyTorch's dispatch, autograd and allocation per op as training
               pays them
    alpha_us   half the round trip of an 8-byte message between rank pairs (r, r xor 1)
    link_gbs   bytes / (one-way time − α) of a 256 KiB message between the same pairs

The job's report carries the medians over the ranks; the check predicts the step again with
them, next to what the run measured.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist

REPEATS = 9
LARGE = 256 * 1024


def _sync() -> None:
    if torch.get_default_device().type == "cuda":
        torch.cuda.synchronize()


def _median_s(fn, repeats: int = REPEATS) -> float:
    fn()
    times = []
    for _ in range(repeats):
        _sync()
        began = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def compute(p, tokens: int, dtype) -> dict:
    from dataclasses import replace

    from app.sim.train.model import Shape
    from app.sim.train.passes import block_cost
    from app.sim.train.program import ELEMENT_BYTES
    from workers.train import groups
    from workers.train.model import StageModel
    a = torch.randn(tokens, p.hidden, dtype=dtype)
    b = torch.randn(p.hidden, p.ffn // p.tp, dtype=dtype)
    matmul = _median_s(lambda: a @ b, 15)
    gflops = 2 * tokens * p.hidden * (p.ffn // p.tp) / matmul / 1e9
    shape = replace(Shape.of(p), layers=1)
    model = StageModel(shape, groups.solo(), seed=p.seed, dtype=dtype, pp=1, sp=False,
                       recompute="none")
    x = torch.randn(p.seq, p.hidden, dtype=dtype)

    def block():
        h = x.clone().requires_grad_(True)
        model.block(h, 0).sum().backward()
    seconds = _median_s(block, 5)
    flops, kernels = block_cost(shape, p.seq, ELEMENT_BYTES[p.dtype])
    per_op = max(seconds - flops / (gflops * 1e9), 0.0) / kernels
    return {"gflops": gflops, "kernel_us": per_op * 1e6}


def links(rank: int, world: int) -> dict:
    """Ping-pong between rank pairs (r, r xor 1); an odd last rank sits it out."""
    if world < 2:
        return {}
    peer = rank ^ 1
    if peer >= world:
        return {}
    out = {}
    for size in (8, LARGE):
        buf = torch.zeros(size // 4, dtype=torch.float32)

        def ping():
            if rank < peer:
                dist.send(buf, peer)
                dist.recv(buf, peer)
            else:
                dist.recv(buf, peer)
                dist.send(buf, peer)
        out[size] = _median_s(ping) / 2                        # one way
    alpha = out[8]
    return {"alpha_us": alpha * 1e6, "link_gbs": LARGE / max(out[LARGE] - alpha, 1e-9) / 1e9}


def measure(p, rank: int, world: int, dtype) -> dict:
    mine = compute(p, p.seq // p.cp, dtype)
    if world > 1:
        dist.barrier()
    mine.update(links(rank, world))
    return mine


def summary(per_rank: list[dict]) -> dict:
    """The medians over the ranks that measured each quantity."""
    keys = ("gflops", "kernel_us", "alpha_us", "link_gbs")
    return {k: statistics.median(r[k] for r in per_rank if k in r)
            for k in keys if any(k in r for r in per_rank)}
