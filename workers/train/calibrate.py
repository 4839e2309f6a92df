"""This machine, measured at the worker's start for the cost model (app/sim/train/cost.py): a
matmul rate, the fixed cost of one op, and the α–β model of its links (Hockney 1994: a message of
b bytes costs α + b/β).

Measured by every rank at once, as they will run — on a 2-core CPU eight ranks share two cores,
and what one rank gets is what the training step gets:

    gflops     2·n·h·f / t of the tiny model's largest matmul, median of repeats
    kernel_us  the time of an op on a handful of numbers: PyTorch's dispatch, no arithmetic
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


def _median_s(fn, repeats: int = REPEATS) -> float:
    fn()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def compute(tokens: int, hidden: int, ffn: int, dtype) -> dict:
    a = torch.randn(tokens, hidden, dtype=dtype)
    b = torch.randn(hidden, ffn, dtype=dtype)
    small = torch.randn(4, dtype=dtype)
    matmul = _median_s(lambda: a @ b)
    op = _median_s(lambda: [small.add(1.0) for _ in range(20)]) / 20
    flops = 2 * tokens * hidden * ffn
    return {"gflops": flops / max(matmul - op, 1e-9) / 1e9, "kernel_us": op * 1e6}


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


def measure(rank: int, world: int, tokens: int, hidden: int, ffn: int, dtype) -> dict:
    mine = compute(tokens, hidden, ffn, dtype)
    if world > 1:
        dist.barrier()
    mine.update(links(rank, world))
    return mine


def summary(per_rank: list[dict]) -> dict:
    """The medians over the ranks that measured each quantity."""
    keys = ("gflops", "kernel_us", "alpha_us", "link_gbs")
    return {k: statistics.median(r[k] for r in per_rank if k in r)
            for k in keys if any(k in r for r in per_rank)}
