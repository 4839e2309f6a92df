"""The α–β cost model of a collective schedule, and nccl-tests' bus bandwidth.

Hockney's model: a message of b bytes over a link costs α + b/β. A step of a schedule lasts as
long as its busiest sender: each rank pushes its messages of that step one after another
(α + bytes / bandwidth each, the bandwidth of the link it uses: NVLink inside a node,
InfiniBand between nodes), and all ranks send at once. The collective takes the sum of its
steps. This is evaluated on the very schedule the simulation animates, so the estimate and the
animation cannot disagree.

nccl-tests (doc/PERFORMANCE.md) reports ``algbw = S / t`` and ``busbw = algbw · factor`` where S
is the size of the whole tensor and the factor makes busbw comparable with the link speed:
all_reduce 2(n−1)/n; reduce_scatter, all_gather, all_to_all (n−1)/n; broadcast, reduce 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from app.sim.collectives.schedules import SUPPORTED, Schedule, build, is_power_of_two, step_count
from app.sim.mesh import node_of

BYTES_PER_ELEMENT: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def busbw_factor(op: str, world: int) -> float:
    """nccl-tests' bus-bandwidth factor for ``op`` on ``world`` ranks."""
    n = world
    return {
        "all_reduce": 2 * (n - 1) / n,
        "reduce_scatter": (n - 1) / n,
        "all_gather": (n - 1) / n,
        "all_to_all": (n - 1) / n,
        "broadcast": 1.0,
        "reduce": 1.0,
    }[op]


@dataclass(frozen=True)
class Links:
    """The machine the collective runs on: latency and two link speeds (GB/s = 10⁹ B/s)."""

    alpha_us: float
    intra_node_gbs: float
    inter_node_gbs: float
    gpus_per_node: int

    def crosses_nodes(self, src: int, dst: int) -> bool:
        return node_of(src, self.gpus_per_node) != node_of(dst, self.gpus_per_node)

    def gbs(self, src: int, dst: int) -> float:
        return self.inter_node_gbs if self.crosses_nodes(src, dst) else self.intra_node_gbs


@dataclass(frozen=True)
class StepCosts:
    """The schedule reduced to what the model needs, arrays of shape (steps, world):
    ``messages[s, r]``: how many messages rank r sends in step s (one per destination);
    ``us_per_byte[s, r]``: microseconds per byte of the whole tensor that rank r spends pushing
    its share of step s through its links."""

    messages: np.ndarray
    us_per_byte: np.ndarray


def step_costs(schedule: Schedule, links: Links) -> StepCosts:
    messages = np.zeros((len(schedule.steps), schedule.world))
    us_per_byte = np.zeros_like(messages)
    # 1 GB/s moves 10³ bytes per microsecond; a schedule uses the same few links step after
    # step, so each link's rate is looked up once
    us_per_element: dict[tuple[int, int], float] = {}
    for s, step in enumerate(schedule.steps):
        pairs: dict[tuple[int, int], int] = {}
        for m in step.moves:
            if m.src != m.dst:  # not a copy inside a rank (Move.local)
                pair = (m.src, m.dst)
                pairs[pair] = pairs.get(pair, 0) + m.length
        messages_s, us_s = messages[s], us_per_byte[s]
        for pair, elements in pairs.items():
            per = us_per_element.get(pair)
            if per is None:
                per = us_per_element[pair] = links.gbs(*pair) * 1e3
            src = pair[0]
            messages_s[src] += 1
            us_s[src] += elements / schedule.count / per
    return StepCosts(messages, us_per_byte)


def times_us(costs: StepCosts, alpha_us: float, sizes_bytes) -> np.ndarray:
    """α–β time of the schedule for tensors of each of ``sizes_bytes`` bytes (µs)."""
    sizes = np.atleast_1d(np.asarray(sizes_bytes, dtype=float))
    # busy[s, r, k]: how long rank r sends in step s for size k; a step lasts as long as its
    # busiest rank, and the steps follow one another.
    busy = (costs.messages[:, :, None] * alpha_us
            + costs.us_per_byte[:, :, None] * sizes[None, None, :])  # (steps, world, sizes)
    if busy.shape[0] == 0:
        return np.zeros_like(sizes)
    return busy.max(axis=1).sum(axis=0)


def time_us(costs: StepCosts, alpha_us: float, size_bytes: float) -> float:
    return float(times_us(costs, alpha_us, size_bytes)[0])


def pairwise_time_us(payload: np.ndarray, links: Links) -> float:
    """α–β time of an exchange in which rank i sends ``payload[i][j]`` bytes to every j at
    once, each message on its own link (NVLink inside a node, InfiniBand between nodes): every
    rank pushes its messages one after another (α + bytes/β each, the diagonal stays home) and
    the exchange lasts as long as its busiest sender — NCCL's all-to-all, a send and a receive
    per peer, as /moe and Ulysses cost it. Unlike :func:`step_costs` on a shifted schedule,
    a rank's in-node peers never wait for another rank's InfiniBand message."""
    world = payload.shape[0]
    sent = np.array(payload, dtype=float)
    np.fill_diagonal(sent, 0)
    gbs = np.array([[links.gbs(i, j) for j in range(world)] for i in range(world)])
    messages = (sent > 0).sum(axis=1)[None, :].astype(float)          # (1 step, world)
    us_per_byte = (sent / (gbs * 1e3)).sum(axis=1)[None, :]             # per whole byte
    return time_us(StepCosts(messages, us_per_byte), links.alpha_us, 1.0)


def bandwidths(op: str, world: int, size_bytes: float, t_us: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for a ``size_bytes`` collective that took ``t_us``."""
    if t_us <= 0:
        return 0.0, 0.0
    algbw = size_bytes / (t_us * 1e3)
    return algbw, algbw * busbw_factor(op, world)


def algorithms_for(op: str, world: int) -> tuple[str, ...]:
    """The algorithms this op can use on this many ranks."""
    return tuple(a for a, ops in SUPPORTED.items()
                 if op in ops and (a != "halving_doubling" or is_power_of_two(world)))


def formula(op: str, algorithm: str, world: int, depth: int = 0) -> str:
    """The textbook α–β time of this schedule, S the tensor's bytes and β a link's bandwidth."""
    n = world
    if algorithm == "tree":
        return (f"reduce: {depth} levels × (α + (S/2)/β), then broadcast: {depth} levels × "
                f"(2α + S/β) — a parent feeds two children (depth {depth})")
    if algorithm == "halving_doubling":
        return f"2·log₂n·α + 2(n−1)/n · S/β = {2 * (n.bit_length() - 1)}·α + {2 * (n - 1) / n:.3g} · S/β"
    if op == "all_to_all":
        if algorithm == "direct":
            return f"(n−1)·α + (n−1)/n · S/β = {n - 1}·α + {(n - 1) / n:.3g} · S/β"
        return f"(n−1)·α + (n−1)/2 · S/β = {n - 1}·α + {(n - 1) / 2:.3g} · S/β (store and forward)"
    if op == "all_reduce":
        return f"2(n−1)·α + 2(n−1)/n · S/β = {2 * (n - 1)}·α + {2 * (n - 1) / n:.3g} · S/β"
    if op in ("broadcast", "reduce"):
        return (f"(2n−2)·α + (2n−2)/n · S/β = {2 * n - 2}·α + {(2 * n - 2) / n:.3g} · S/β "
                f"({n} pipelined pieces)")
    return f"(n−1)·α + (n−1)/n · S/β = {n - 1}·α + {(n - 1) / n:.3g} · S/β"


CURVE_SIZES: tuple[int, ...] = tuple(2 ** k for k in range(10, 35))  # 1 KiB … 16 GiB


@dataclass(frozen=True)
class Curve:
    algorithm: str
    sizes: tuple[int, ...]
    times_us: tuple[float, ...]


@lru_cache(maxsize=128)
def curves(op: str, world: int, links: Links,
           sizes: tuple[int, ...] = CURVE_SIZES) -> tuple[Curve, ...]:
    """Time against message size for every algorithm of ``op``, on a schedule of ``world``
    chunks (the shape of a schedule does not depend on the size, only the bytes scale)."""
    out = []
    for algorithm in algorithms_for(op, world):
        costs = schedule_costs(op, algorithm, world, links)
        out.append(Curve(algorithm, sizes, tuple(times_us(costs, links.alpha_us, sizes).tolist())))
    return tuple(out)


@lru_cache(maxsize=512)
def schedule_costs(op: str, algorithm: str, world: int, links: Links) -> StepCosts:
    """The step costs of ``op``'s schedule on ``world`` ranks (its shape does not depend on the
    size: only the bytes scale, so a schedule of ``world`` chunks stands for any size)."""
    if algorithm == "ring" and op in RING_PASS_OPS:
        return ring_pass_costs(op, world, links)
    return step_costs(build(op, algorithm, world, count=world * 2), links)


RING_PASS_OPS: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather")
"""The ring ops made of passes in which every rank sends one chunk to its right neighbour."""


def ring_pass_costs(op: str, world: int, links: Links) -> StepCosts:
    """``step_costs(build(op, "ring", world, 2·world), links)`` without building the schedule's
    2(n−1)·n moves (a first visit of 64 ranks spent more on them than on the page's own trace).

    Every step of ``schedules._ring_pass`` has each rank r send one chunk to r+1: one message,
    of 2 of the 2·world elements (the chunks are equal), through the link from r to r+1. The
    arithmetic is step_costs' own (elements / count / rate, rate = GB/s · 10³), so the arrays
    are equal to the last bit; tests/sim/test_collective_cost.py holds them to it for every op,
    world and node layout."""
    steps = step_count(op, "ring", world, 2 * world)
    rate = np.array([links.gbs(r, (r + 1) % world) * 1e3 for r in range(world)])
    row = 2 / (2 * world) / rate
    return StepCosts(np.ones((steps, world)), np.tile(row, (steps, 1)))


def collective_time_us(op: str, world: int, links: Links, size_bytes: float,
                       algorithm: str = "ring") -> float:
    """α–β time of one ``op`` over a ``size_bytes`` tensor (the full logical tensor, as
    /api/collective's ``count``) on ranks ``0 … world−1`` placed on ``links``' nodes. One rank
    communicates nothing: 0."""
    if world < 2:
        return 0.0
    return time_us(schedule_costs(op, algorithm, world, links), links.alpha_us, size_bytes)


def crossover_bytes(first: Curve, second: Curve) -> int | None:
    """The smallest plotted size from which ``second`` is faster than ``first``, if the lead
    changes hands exactly there (None when one is faster everywhere)."""
    a, b = np.asarray(first.times_us), np.asarray(second.times_us)
    faster = b < a
    if faster.all() or not faster.any():
        return None
    return int(first.sizes[int(np.argmax(faster))])



def ring_time_us(op: str, world: int, size_bytes: float, links: Links, root: int = 0) -> float:
    """The α–β time of ``build(op, "ring", world, …, root)`` for a ``size_bytes`` tensor, in
    closed form, so that groups of a thousand ranks cost nothing to evaluate.

    Every step of a ring schedule has each rank send one chunk of S/world bytes to its
    neighbour; the step lasts as long as the slowest of those links, which is the slower link
    kind as soon as the ring spans nodes. So t = steps · (α + S / (world · β_slowest)), with
    2(n−1) steps for all_reduce and n−1 for reduce_scatter / all_gather (``step_count``). The
    pipelined chains of broadcast / reduce have 2n−2 steps, in each of which only the hops that
    carry a piece are busy. The tests check this against :func:`time_us` on the built schedule
    for every op, size and node layout."""
    if world < 2 or size_bytes <= 0:
        return 0.0
    chunk_bytes = size_bytes / world
    if op in ("broadcast", "reduce"):
        first = root if op == "broadcast" else root + 1
        chain = [(first + i) % world for i in range(world)]
        hop_gbs = np.array([links.gbs(a, b) for a, b in zip(chain, chain[1:])])
        total = 0.0
        for t in range(2 * world - 2):    # hop i carries piece t − i, for 0 ≤ t − i < world
            slowest = hop_gbs[max(0, t - world + 1):min(t, world - 2) + 1].min()
            total += links.alpha_us + chunk_bytes / (slowest * 1e3)
        return float(total)
    steps = step_count(op, "ring", world, world)
    if links.gpus_per_node == 1:          # every hop leaves its node
        gbs = links.inter_node_gbs
    elif world > links.gpus_per_node:     # hops inside nodes and at least one between them
        gbs = min(links.inter_node_gbs, links.intra_node_gbs)
    else:
        gbs = links.intra_node_gbs
    return steps * (links.alpha_us + chunk_bytes / (gbs * 1e3))
