"""Every message the framework sends, timed: the collectives and point-to-point calls of all five
parallelisms go through here, and the :class:`Recorder` keeps one event per call — its lane
(the group kind it serves), what it is, when it started and how long this rank was held in it.

The events of one training step are the run's measured timeline (the job's Perfetto trace, and
the measured compute / exposed communication / bubble split): compute spans come from the
pipeline schedule (workers/train/pipeline.py), communication spans from here. A call on a group
of one rank sends nothing and records nothing (Megatron-LM skips such calls too).

Lanes: ``tp``, ``cp``, ``pp``, ``ep`` and ``dp`` (dense and expert gradient reduction and the
global norm); compute is ``compute``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch
import torch.distributed as dist

ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
LANES = {"tp": "tp", "cp": "cp", "pp": "pp", "ep": "ep", "dp_cp": "dp", "edp": "dp",
         "world": "dp"}


class Recorder:
    """This rank's events of the step being recorded (``start`` … ``stop``)."""

    def __init__(self) -> None:
        self.on = False
        self.events: list[dict] = []
        self.t0 = 0.0
        self.where: dict = {}
        """what the schedule is running now (microbatch, stage): tagged onto every event"""

    def start(self) -> None:
        self.events, self.t0, self.on = [], time.perf_counter(), True

    def stop(self) -> list[dict]:
        self.on = False
        return self.events

    def add(self, lane: str, kind: str, began: float, ended: float, group: str | None = None,
            **extra) -> None:
        if not self.on:
            return
        event = {"lane": lane, "kind": kind, "start_s": began - self.t0,
                 "dur_s": max(0.0, ended - began), **self.where, **extra}
        if group is not None:
            event["group"] = group
        self.events.append(event)

    @contextmanager
    def span(self, lane: str, kind: str, group: str | None = None, **extra):
        began = time.perf_counter()
        try:
            yield
        finally:
            self.add(lane, kind, began, time.perf_counter(), group, **extra)


REC = Recorder()


def _bytes(x: torch.Tensor) -> int:
    return x.numel() * x.element_size()


# --- collectives ---------------------------------------------------------------------------

def all_reduce(x: torch.Tensor, group, op: str = "sum") -> torch.Tensor:
    """The sum (or max) of ``x`` over ``group``, as a new tensor."""
    if group.size == 1:
        return x
    out = x.detach().contiguous().clone()
    with REC.span(LANES[group.kind], "all_reduce", group.kind, bytes=_bytes(out)):
        dist.all_reduce(out, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM,
                        group=group.pg)
    return out


def all_gather(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Every member's ``x`` concatenated along ``dim``, in group order."""
    if group.size == 1:
        return x
    moved = x.detach().transpose(0, dim).contiguous()          # gather along dim 0
    out = moved.new_empty((group.size * moved.shape[0], *moved.shape[1:]))
    with REC.span(LANES[group.kind], "all_gather", group.kind, bytes=_bytes(out)):
        ALL_GATHER(out, moved, group=group.pg)
    return out.transpose(0, dim).contiguous()


def reduce_scatter(x: torch.Tensor, dim: int, group) -> torch.Tensor:
    """Chunk ``index`` (this member's) of the sum of every member's ``x``, cut along ``dim``."""
    if group.size == 1:
        return x
    moved = x.detach().transpose(0, dim).contiguous()
    out = moved.new_empty((moved.shape[0] // group.size, *moved.shape[1:]))
    with REC.span(LANES[group.kind], "reduce_scatter", group.kind, bytes=_bytes(moved)):
        REDUCE_SCATTER(out, moved, group=group.pg)
    return out.transpose(0, dim).contiguous()


def all_to_all(x: torch.Tensor, send_splits: list[int], recv_splits: list[int],
               group) -> torch.Tensor:
    """Rows ``send_splits[j]`` of ``x`` to member j, ``recv_splits[j]`` rows from it (uneven
    splits along dim 0: MoE's dispatch and combine)."""
    if group.size == 1:
        return x
    out = x.new_empty((sum(recv_splits), *x.shape[1:]))
    with REC.span(LANES[group.kind], "all_to_all", group.kind, bytes=_bytes(x)):
        dist.all_to_all_single(out, x.detach().contiguous(), recv_splits, send_splits,
                               group=group.pg)
    return out


def all_to_all_counts(counts: torch.Tensor, group) -> torch.Tensor:
    """Equal splits: member j receives chunk j of every member's ``counts``."""
    if group.size == 1:
        return counts
    out = torch.empty_like(counts)
    with REC.span(LANES[group.kind], "all_to_all", group.kind, bytes=_bytes(counts)):
        dist.all_to_all_single(out, counts.contiguous(), group=group.pg)
    return out


def async_reduce(buffer: torch.Tensor, group, op: str):
    """Start an all-reduce (``op`` "all_reduce") or reduce-scatter ("reduce_scatter") of a
    gradient bucket in the background; returns (result, handle). The event spans issue to
    completion (gloo finishes it on its own thread while backward goes on)."""
    began = time.perf_counter()
    if op == "all_reduce":
        result = buffer
        work = dist.all_reduce(result, group=group.pg, async_op=True)
    else:
        result = buffer.new_empty(buffer.numel() // group.size)
        work = REDUCE_SCATTER(result, buffer, group=group.pg, async_op=True)
    where = dict(REC.where)

    def done(_future):
        if REC.on:
            REC.events.append({"lane": "dp", "kind": op, "start_s": began - REC.t0,
                               "dur_s": time.perf_counter() - began, "group": group.kind,
                               "bytes": _bytes(buffer), "overlapped": True, **where})
    try:
        work.get_future().then(done)
    except (RuntimeError, AttributeError):   # a backend without futures: timed at wait()
        pass
    return result, work


# --- point to point ------------------------------------------------------------------------

class Sends:
    """Sends in flight (isend): kept until the step's end, so their buffers stay alive and no
    rank blocks on a send — only receives wait, which is what makes the pipeline's orders
    deadlock-free (Megatron-LM pairs its sends and receives for the same reason)."""

    def __init__(self) -> None:
        self.pending: list = []

    def send(self, x: torch.Tensor, dst: int, group, kind: str) -> None:
        x = x.detach().contiguous()
        with REC.span(LANES[group.kind], kind, group.kind, bytes=_bytes(x), peer=dst):
            self.pending.append((dist.isend(x, dst, group=group.pg), x))

    def wait(self) -> None:
        for work, _ in self.pending:
            work.wait()
        self.pending.clear()


def recv(shape: tuple[int, ...], dtype, src: int, group, kind: str) -> torch.Tensor:
    """A tensor from ``src``, waiting until it has arrived (the wait is the event: time this rank
    spent held by its neighbour, i.e. pipeline bubble or transfer)."""
    out = torch.empty(shape, dtype=dtype)
    with REC.span(LANES[group.kind], kind, group.kind, bytes=_bytes(out), peer=src):
        dist.recv(out, src, group=group.pg)
    return out


def exchange(x: torch.Tensor, dst: int, src: int, group, kind: str):
    """Send ``x`` to ``dst`` and receive a tensor like it from ``src``, both in flight at once
    (the context-parallel ring); returns (received, wait) — call wait() when the block is
    needed: the wait is the event (the part of the transfer compute did not hide)."""
    x = x.detach().contiguous()
    incoming = torch.empty_like(x)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, x, dst, group=group.pg),
                                    dist.P2POp(dist.irecv, incoming, src, group=group.pg)])

    def wait() -> torch.Tensor:
        with REC.span(LANES[group.kind], kind, group.kind, bytes=_bytes(x), peer=dst):
            for work in works:
                work.wait()
        return incoming
    return wait
