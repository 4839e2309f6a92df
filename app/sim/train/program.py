"""One training step as every rank issues it, and timed: the cost model of ``/train``.

Each rank's program is what workers/train issues, in its order — the schedule's passes
(app.sim.pipeline.orders, the order the worker runs), inside each pass the blocks' compute and
their messages, then the gradient buckets, the global norm and AdamW — written as tasks on the
rank's lanes (``compute``, ``tp``, ``cp``, ``pp``, ``ep``, ``dp``). Timing is a separate pass,
app.sim.timeline.schedule, as in the other timelines (DESIGN principle 4):

* a task on the main thread (compute, and every blocking collective) waits for the rank's
  previous main-thread task;
* a collective's tasks on its members are one call: each waits for what every member waited
  for, so all start together when the last arrives, and all take the α–β time (cost.py);
* what runs beside the main thread waits only for what it needs: a pipeline send for its pass,
  a ring step's K/V exchange for the block before, a gradient bucket's reduction for the last
  backward of its tensors; the compute that needs it waits for it.

The passes' own tasks (a block, the embedding, the head) are written by passes.py. The rank
programs are merged into one list in which every task follows what it waits for
(each rank's order kept), then scheduled.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from math import prod

from app.sim.pipeline.orders import build
from app.sim.parallelism.layout import Layout
from app.sim.timeline import Task, schedule
from app.sim.train.cost import BACKWARD, KERNELS, Machine
from app.sim.train.model import Shape, buckets, tensors
from app.sim.train.passes import (
    Sizes,
    block_backward,
    block_forward,
    head_backward,
    head_forward,
)

ELEMENT_BYTES = {"float64": 8, "float32": 4}
LANES = ("compute", "tp", "cp", "ep", "pp", "dp")
GROUP_LANE = {"tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "dp_cp": "dp", "edp": "dp",
              "world": "dp"}


@dataclass
class Job:
    rank: int
    lane: str
    kind: str
    cost: tuple
    """("compute", flops, kernels) | ("collective", op, bytes, ranks) | ("message", bytes):
    timed on a machine by :func:`duration`"""
    deps: list[str]
    name: str
    key: tuple | None = None
    meta: dict = field(default_factory=dict)


class Program:
    """One rank's step, built in the order the rank issues it."""

    def __init__(self, rank: int, groups: dict[str, tuple[int, ...]]):
        self.rank, self.groups = rank, groups
        self.jobs: list[Job] = []
        self.last_main: str | None = None
        self.pending = 0.0                       # compute (FLOPs, kernels) not yet a task
        self.pending_kernels = 0.0
        self.where: dict = {}                    # kind, microbatch, stage of the pass
        self.waits: list[str] = []               # what the next compute must wait for
        self.counters: dict = defaultdict(int)

    def _job(self, lane, kind, cost, deps, name=None, key=None, main=True, **meta) -> str:
        name = name or f"{self.rank}.{len(self.jobs)}"
        if main and self.last_main:
            deps = [self.last_main, *deps]
        self.jobs.append(Job(self.rank, lane, kind, cost, list(deps), name, key,
                             {**self.where, **meta}))
        if main:
            self.last_main = name
        return name

    # -- compute --------------------------------------------------------------------------

    def compute(self, flops: float, kernels: float) -> None:
        self.pending += flops
        self.pending_kernels += kernels

    def flush(self) -> str | None:
        """Write the compute since the last message as one task on the compute lane."""
        if self.pending <= 0 and self.pending_kernels <= 0 and not self.waits:
            return self.last_main
        kind = self.where.get("kind", "F")
        name = self._job("compute", kind, ("compute", self.pending, self.pending_kernels),
                         self.waits)
        self.pending, self.pending_kernels, self.waits = 0.0, 0.0, []
        return name

    # -- communication --------------------------------------------------------------------

    def collective(self, kind: str, op: str, size_bytes: float, *, main: bool = True,
                   after: tuple[str, ...] = (), ranks: tuple[int, ...] | None = None,
                   steps: str | None = None) -> str | None:
        """One collective ``op`` on this rank's group of ``kind``; None if the group is one
        rank. ``main``: the main thread waits in it."""
        ranks = ranks or self.groups[kind]
        if len(ranks) < 2:
            return None
        self.flush()
        key = (ranks, self.counters[ranks])
        self.counters[ranks] += 1
        cost = (("message", size_bytes) if op == "ring" else
                ("collective", op, size_bytes, len(ranks)))
        return self._job(GROUP_LANE[kind], op, cost, list(after), key=key, main=main,
                         group=kind, bytes=size_bytes)

    def send(self, dst: int, size_bytes: float, tag: str) -> None:
        """An isend to ``dst``: beside the main thread, after the pass that produced it."""
        last = self.flush()
        self._job("pp", "send", ("message", size_bytes), [last] if last else [],
                  name=f"send {self.rank}>{dst} {tag}", main=False, group="pp",
                  bytes=size_bytes, peer=dst)

    def receive(self, src: int, tag: str) -> None:
        """The next compute waits for ``src``'s send (the wait is bubble or transfer)."""
        self.flush()
        self.waits.append(f"send {src}>{self.rank} {tag}")


def duration(cost: tuple, machine: Machine) -> float:
    if cost[0] == "compute":
        return machine.compute_s(cost[1], cost[2])
    if cost[0] == "message":
        return machine.message_s(cost[1])
    return machine.collective_s(cost[1], cost[2], cost[3])


@dataclass(frozen=True)
class Step:
    spans: tuple
    """app.sim.timeline.Span, one per task of the stages' programs; ``meta[name]`` says whose
    and what"""
    meta: dict
    makespan: float
    alike: tuple[tuple[int, ...], ...]
    """the ranks that share one timeline, in rank order (a stage's ranks); the first of each
    (a rank of rank 0's pipeline) is the one whose program was scheduled — see
    :func:`program_step`"""
    pipelines: dict[int, tuple[int, ...]]
    """every rank's pipeline (its pp group, by stage): where its sends go"""


def program_step(p, machines: tuple[Machine, ...]) -> tuple[Step, ...]:
    """Every rank's tasks of one step, scheduled on each of ``machines``.

    Only rank 0's pipeline — one rank of each stage — is written and timed: the ranks of one
    stage issue the same program (the same passes, messages and buckets, group sizes being
    equal in a layout, the cost model having no rank-dependent term), and every group they
    share ties them together, so their timelines are the same one, rank for rank. (A
    collective of the stage's ranks has the one member here; it still waits for its other
    members' inputs, the same as this one's.) tests/sim/test_train.py holds this against the
    step written and timed for every rank (``every_rank=True``) over a table of layouts."""
    return _program_step(p, machines, every_rank=False)


def stage_ranks(layout: Layout) -> tuple[tuple[int, ...], ...]:
    """Each pipeline stage's ranks, in rank order: the ranks that share one timeline."""
    stage = [layout.coords(r)["pp"] for r in range(layout.world)]
    return tuple(tuple(r for r in range(layout.world) if stage[r] == s)
                 for s in range(max(stage) + 1))


def _program_step(p, machines: tuple[Machine, ...], every_rank: bool) -> tuple[Step, ...]:
    layout = Layout.of(p.layout_params())
    shape = Shape.of(p)
    e = ELEMENT_BYTES[p.dtype]
    orders = build(p.schedule, p.pp, p.microbatches).orders
    all_tensors = tensors(shape)
    per_stage = p.layers // p.pp
    sp = p.sequence_parallel and p.tp > 1
    kinds = ("tp", "cp", "pp", "ep", "dp_cp", "edp")
    programs = []
    pipeline = layout.group_of(0, "pp")
    stages = stage_ranks(layout)
    for r in (range(layout.world) if every_rank else pipeline):
        c = layout.coords(r)
        groups = {k: layout.group_of(r, k) for k in kinds}
        groups["world"] = tuple(range(layout.world))
        pr = Program(r, groups)
        pp_ranks = groups["pp"]
        first, last = c["pp"] == 0, c["pp"] == p.pp - 1
        z = Sizes(p.seq // p.cp, p.hidden, e, p.tp, p.cp, sp, p.aux_loss_coeff > 0)
        act_bytes = z.n // (p.tp if sp else 1) * p.hidden * e
        mine = [t for t in all_tensors if t.stage(p.layers, p.pp) == c["pp"]]
        stage_buckets = buckets(shape, mine, p.tp, p.ep)
        for action in orders[c["pp"]]:
            i = action.microbatch
            pr.where = {"kind": action.kind, "microbatch": i, "stage": action.stage}
            if action.kind == "F":
                if not first:
                    pr.receive(pp_ranks[c["pp"] - 1], f"F{i}")
                if first:
                    pr.compute(0, KERNELS["embed"])
                    pr.collective("tp", "reduce_scatter" if sp else "all_reduce",
                                  z.n * p.hidden * e)
                for _ in range(per_stage):
                    block_forward(pr, shape, z, p.recompute)
                if last:
                    head_forward(pr, p, z)
                else:
                    pr.send(pp_ranks[c["pp"] + 1], act_bytes, f"F{i}")
            else:
                last_mb = i == p.microbatches - 1
                if not last:
                    pr.receive(pp_ranks[c["pp"] + 1], f"B{i}")
                ready: dict[str, str] = {}        # whose gradients are complete after which task
                if last:
                    head_backward(pr, p, z)
                    ready["head"] = ready["final_norm"] = pr.flush()
                for layer in reversed(range(c["pp"] * per_stage, (c["pp"] + 1) * per_stage)):
                    block_backward(pr, shape, z, p.recompute, last_mb)
                    ready[f"layer {layer}"] = pr.flush()
                if first:
                    if sp:
                        pr.collective("tp", "all_gather", z.n * p.hidden * e)
                    pr.compute(0, BACKWARD * KERNELS["embed"])
                    ready["embed"] = pr.flush()
                if last_mb:
                    _buckets(pr, p, stage_buckets, ready, e)
                if not first:
                    pr.send(pp_ranks[c["pp"] - 1], act_bytes, f"B{i}")
            pr.flush()                              # a pass's compute is its own task
        pr.where = {"kind": "optimizer"}
        _optimizer(pr, p, stage_buckets, e)
        pr.flush()
        programs.append(pr)
    alike = tuple((r,) for r in range(layout.world)) if every_rank else stages
    pipelines = {r: layout.group_of(r, "pp") for r in range(layout.world)}
    return _schedule(programs, machines, alike, pipelines)


def _buckets(pr: Program, p, stage_buckets, ready: dict[str, str], e: int) -> None:
    """Each bucket's reduction starts once the last of its tensors has its gradient (``ready``:
    owner → the backward task that completes it, in the order backward ran: head, blocks from
    the last, embedding); the optimizer waits for all of them."""
    order = list(ready)
    for bucket in stage_buckets:
        owner = order[max(order.index(_owner(t)) for t in bucket)]
        numel = sum(prod(t.local_shape(p.tp, p.ep)) for t in bucket)
        task = pr.collective("edp" if bucket[0].expert else "dp_cp",
                             "reduce_scatter" if p.zero else "all_reduce", numel * e,
                             main=False, after=(ready[owner],))
        if task:
            pr.waits.append(task)


def _owner(t) -> str:
    return f"layer {t.layer}" if t.layer is not None else t.name


def _optimizer(pr: Program, p, stage_buckets, e: int) -> None:
    """The global norm's all-reduce over the layout, AdamW on what this rank updates, and
    ZeRO 1's all-gather of the updated slices."""
    pr.collective("world", "all_reduce", 8)
    for bucket in stage_buckets:
        numel = sum(prod(t.local_shape(p.tp, p.ep)) for t in bucket)
        group = pr.groups["edp" if bucket[0].expert else "dp_cp"]
        held = numel / len(group) if p.zero else numel
        pr.compute(12 * held, KERNELS["adamw"])
        if p.zero:
            pr.collective("edp" if bucket[0].expert else "dp_cp", "all_gather", numel * e)


def _schedule(programs: list[Program], machines: tuple[Machine, ...],
              alike: tuple[tuple[int, ...], ...], pipelines: dict) -> tuple[Step, ...]:
    """Members of a collective wait for what every member waits for; then the programs are
    merged (a task after everything it waits for, each rank's order kept) and timed."""
    members: dict[tuple, list[Job]] = defaultdict(list)
    for pr in programs:
        for job in pr.jobs:
            if job.key is not None:
                members[job.key].append(job)
    for jobs in members.values():
        union = list(dict.fromkeys(d for j in jobs for d in j.deps))
        for j in jobs:
            j.deps = union
    merged = _program_order(programs)
    meta = {j.name: j for j in merged}
    fixed = [(j.name, f"{j.rank}/{j.lane}", j.cost, tuple(j.deps), j.kind) for j in merged]
    out = []
    for machine in machines:
        timed: dict[tuple, float] = {}           # many tasks cost the same: time each once
        tasks = []
        for name, lane, cost, deps, kind in fixed:
            us = timed.get(cost)
            if us is None:
                us = timed[cost] = duration(cost, machine) * 1e6
            tasks.append(Task(name, lane, us, deps, kind))
        spans = schedule(tasks)
        out.append(Step(spans, meta, max((sp.end_us for sp in spans), default=0.0) * 1e-6,
                        alike, pipelines))
    return tuple(out)


def _program_order(programs: list[Program]) -> list[Job]:
    """The rank programs as one list in which every job follows what it waits for, each rank's
    order kept: a rank's program runs until a job waits for one not yet listed, and is woken
    when that one is (each job and each dependency looked at a bounded number of times)."""
    queues = [pr.jobs for pr in programs]
    heads = [0] * len(queues)
    done: set[str] = set()
    waiting: dict[str, list[int]] = defaultdict(list)
    merged: list[Job] = []
    ready = list(range(len(queues) - 1, -1, -1))
    while ready:
        k = ready.pop()
        q, i = queues[k], heads[k]
        while i < len(q):
            job = q[i]
            missing = next((d for d in job.deps if d not in done), None)
            if missing is not None:
                waiting[missing].append(k)
                break
            done.add(job.name)
            merged.append(job)
            i += 1
            ready.extend(waiting.pop(job.name, ()))
        heads[k] = i
    if len(merged) < sum(map(len, queues)):
        stuck = [q[heads[k]] for k, q in enumerate(queues) if heads[k] < len(q)]
        raise ValueError(f"the step's programs deadlock at "
                         f"{[(j.rank, j.kind, j.meta) for j in stuck[:4]]}")
    return merged


def block_cost(s: Shape, n: int, element_bytes: int) -> tuple[float, float]:
    """(FLOPs, kernels) of one block's forward and backward on one rank that holds it whole
    (no parallelism): what workers/train/calibrate.py times to measure the per-op cost."""
    pr = Program(0, {k: (0,) for k in ("tp", "cp", "pp", "ep", "dp_cp", "edp", "world")})
    z = Sizes(n, s.hidden, element_bytes, 1, 1, False)
    block_forward(pr, s, z, "none")
    block_backward(pr, s, z, "none", False)
    return pr.pending, pr.pending_kernels
