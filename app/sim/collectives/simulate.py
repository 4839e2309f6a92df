"""Collective communication, simulated chunk by chunk with real numbers.

``simulate(params)`` builds the schedule of the chosen op and algorithm
(:mod:`app.sim.collectives.schedules`), runs it on seeded integer inputs with numpy — every
rank's work buffer after every step, plus which ranks' inputs each element contains — and costs
it with the α–β model (:mod:`app.sim.collectives.cost`). Integer inputs keep every sum exact, so
the result can be compared with ``torch.distributed`` element for element.

The final buffers are checked against torch.distributed semantics by :func:`reference_outputs`,
a plain numpy computation that knows nothing about schedules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.sim.collectives import cost
from app.sim.collectives.schedules import Schedule, build, depths, dtree_parents
from app.sim.collectives.schedules import elements_sent as sent_by_rank
from app.sim.trace import Frame, Transfer, plain, readonly

if TYPE_CHECKING:
    from app.sim.collectives.params import CollectiveParams

INPUT_LOW, INPUT_HIGH = 1, 9
"""Inputs are integers in [1, 9]: small enough to read in a cell, never 0 (which reads as empty)."""

SEMANTICS: dict[str, str] = {
    "all_reduce": "every rank holds the element-wise sum of all ranks' tensors",
    "reduce_scatter": "rank r holds chunk r of the element-wise sum (count / world elements)",
    "all_gather": "every rank holds all ranks' chunks side by side, in rank order",
    "broadcast": "every rank holds a copy of the root's tensor",
    "reduce": "the root holds the element-wise sum; the other ranks' buffers are undefined",
    "all_to_all": "rank r holds block r of every rank's tensor, in rank order",
}


@dataclass(frozen=True)
class Stats:
    steps: int
    elements_sent: tuple[int, ...]
    bytes_sent: tuple[int, ...]
    busbw_factor: float
    time_us: float
    algbw_gbs: float
    busbw_gbs: float


@dataclass(frozen=True)
class CostPanel:
    """The α–β model at the size chosen on the cost panel, and time against size."""

    size_bytes: int
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    latency_us: float
    """the α part alone: the time of the same steps with empty messages"""
    formula: str
    curves: tuple[cost.Curve, ...]
    crossover_bytes: int | None
    """where ring starts to beat the first latency-optimal algorithm, if it does"""


@dataclass(frozen=True)
class CollectiveTrace:
    params: CollectiveParams
    schedule: Schedule
    inputs: tuple[np.ndarray, ...]
    outputs: tuple[np.ndarray | None, ...]
    values: np.ndarray
    """(frames, world, buffer_len) int64: each rank's work buffer after each step"""
    filled: np.ndarray
    """(frames, world, buffer_len) bool: whether that element holds data yet"""
    sources: np.ndarray
    """(frames, world, buffer_len) uint64: bit k set when rank k's input is summed into it"""
    frames: tuple[Frame, ...]
    stats: Stats
    cost: CostPanel

    def buffers(self, frame: int) -> list[list[int | None]]:
        """Frame ``frame``'s work buffers, unfilled elements as None."""
        values = self.values[frame].astype(object)
        values[~self.filled[frame]] = None
        return values.tolist()

    def to_dict(self) -> dict:
        """The JSON contract of ``/api/collective`` (DESIGN.md)."""
        p = self.params
        return {
            "op": p.op, "algorithm": p.algorithm, "world": p.world, "count": p.count,
            "seed": p.seed, "root": p.root, "dtype": p.dtype,
            "semantics": SEMANTICS[p.op],
            "inputs": [plain(x) for x in self.inputs],
            "outputs": [None if y is None else plain(y) for y in self.outputs],
            "frames": [{
                "step": f.step, "phase": f.phase, "caption": f.caption,
                "transfers": [t.to_dict() for t in f.transfers],
                "buffers": self.buffers(k),
            } for k, f in enumerate(self.frames)],
            "stats": {
                "steps": self.stats.steps,
                "elements_sent": list(self.stats.elements_sent),
                "bytes_sent": list(self.stats.bytes_sent),
                "busbw_factor": self.stats.busbw_factor,
                "time_us": self.stats.time_us,
                "algbw_gbs": self.stats.algbw_gbs,
                "busbw_gbs": self.stats.busbw_gbs,
            },
            "cost": {
                "size_bytes": self.cost.size_bytes,
                "time_us": self.cost.time_us,
                "algbw_gbs": self.cost.algbw_gbs,
                "busbw_gbs": self.cost.busbw_gbs,
                "crossover_bytes": self.cost.crossover_bytes,
                "latency_us": self.cost.latency_us,
                "formula": self.cost.formula,
                "curves": [{"algorithm": c.algorithm, "sizes": list(c.sizes),
                            "times_us": list(c.times_us)} for c in self.cost.curves],
            },
        }


def make_inputs(op: str, world: int, count: int, seed: int) -> tuple[np.ndarray, ...]:
    """Each rank's input tensor: seeded integers in [1, 9]. all_gather's inputs are one chunk
    (count / world elements); every other op's are ``count`` long. The workers call this too."""
    length = count // world if op == "all_gather" else count
    rng = np.random.default_rng(seed)
    grid = rng.integers(INPUT_LOW, INPUT_HIGH + 1, size=(world, length), dtype=np.int64)
    return tuple(readonly(row) for row in grid)


def reference_outputs(op: str, inputs: tuple[np.ndarray, ...], root: int = 0):
    """What torch.distributed returns on each rank, by plain numpy (no schedule involved)."""
    world = len(inputs)
    stacked = np.stack(inputs)  # (world, length)
    total = stacked.sum(axis=0)
    if op == "all_reduce":
        return [total.copy() for _ in range(world)]
    if op == "reduce_scatter":
        return list(np.split(total, world))
    if op == "all_gather":
        return [stacked.reshape(-1).copy() for _ in range(world)]
    if op == "broadcast":
        return [inputs[root].copy() for _ in range(world)]
    if op == "reduce":
        return [total.copy() if r == root else None for r in range(world)]
    if op == "all_to_all":
        blocks = stacked.reshape(world, world, -1)  # (src, dst, block)
        return [blocks[:, r, :].reshape(-1).copy() for r in range(world)]
    raise ValueError(f"unknown op {op!r}")


def execute(schedule: Schedule, inputs: tuple[np.ndarray, ...]):
    """Run ``schedule`` on ``inputs`` (integers, or floats: moves add in the schedule's order).
    Returns ``(values, filled, sources)``, each shaped
    ``(steps + 1, world, buffer_len)``; index 0 is the state before the first step."""
    n, length = schedule.world, schedule.layout.buffer_len
    # the inputs' own type: int64 for this scene, float64 for the ZeRO gradients it also runs
    values = np.zeros((n, length), dtype=np.result_type(np.int64, *inputs))
    filled = np.zeros((n, length), dtype=bool)
    sources = np.zeros((n, length), dtype=np.uint64)
    for r, (lo, hi) in enumerate(schedule.layout.inputs):
        values[r, lo:hi] = inputs[r]
        filled[r, lo:hi] = True
        sources[r, lo:hi] = np.uint64(1) << np.uint64(r)
    # the whole history preallocated: step k+1 starts as a copy of step k, and its moves read
    # step k (every move of a step reads the buffers as they were before the step)
    steps = len(schedule.steps)
    all_values = np.empty((steps + 1, n, length), dtype=values.dtype)
    all_filled = np.empty((steps + 1, n, length), dtype=bool)
    all_sources = np.empty((steps + 1, n, length), dtype=np.uint64)
    all_values[0], all_filled[0], all_sources[0] = values, filled, sources
    for k, step in enumerate(schedule.steps):
        new = all_values[k + 1], all_filled[k + 1], all_sources[k + 1]
        old = all_values[k], all_filled[k], all_sources[k]
        for a, b in zip(new, old):
            a[...] = b
        if not _apply_step(step.moves, old, new, length):
            _apply_moves(step.moves, old, new)
    return tuple(readonly(a) for a in (all_values, all_filled, all_sources))


def _apply_moves(moves, old, new) -> None:
    """A step's moves one after another, each reading the buffers before the step."""
    values, filled, sources = old
    new_values, new_filled, new_sources = new
    for m in moves:
        src = slice(m.src_lo, m.src_lo + m.length)
        dst = slice(m.dst_lo, m.dst_lo + m.length)
        if m.reduce:
            new_values[m.dst, dst] += values[m.src, src]
            new_sources[m.dst, dst] |= sources[m.src, src]
            new_filled[m.dst, dst] |= filled[m.src, src]
        else:
            new_values[m.dst, dst] = values[m.src, src]
            new_sources[m.dst, dst] = sources[m.src, src]
            new_filled[m.dst, dst] = filled[m.src, src]


FEW_MOVES = 8
"""Below this many moves a step is run move by move: the flat indices cost as much to build."""


def _apply_step(moves, old, new, length: int) -> bool:
    """The same as :func:`_apply_moves`, all moves of the step at once on flat element indices
    (a ring of 64 ranks has 64 moves a step: a few array operations instead of six a move).
    Exact: each element of a step is written at most once, or only added to, and
    ``np.add.at`` adds repeated indices in the order given, the moves' order. Returns False,
    having done nothing, for a step it cannot do so (moves of both kinds, or two copies into
    one element) or a step of a few moves (the loop is as quick)."""
    if len(moves) < FEW_MOVES:
        return not moves
    reduce = moves[0].reduce
    if any(m.reduce != reduce for m in moves):
        return False
    lengths = np.fromiter((m.length for m in moves), dtype=np.intp, count=len(moves))
    src_start = np.fromiter((m.src * length + m.src_lo for m in moves), dtype=np.intp,
                            count=len(moves))
    dst_start = np.fromiter((m.dst * length + m.dst_lo for m in moves), dtype=np.intp,
                            count=len(moves))
    # element i of move j: start_j + i, for i < length_j, moves in order
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    src = np.repeat(src_start, lengths) + within
    dst = np.repeat(dst_start, lengths) + within
    once = len(np.unique(dst)) == len(dst)
    if not reduce and not once:
        return False
    (values, filled, sources), (new_values, new_filled, new_sources) = (
        [a.reshape(-1) for a in arrays] for arrays in (old, new))
    if reduce and not once:
        np.add.at(new_values, dst, values[src])
        np.bitwise_or.at(new_sources, dst, sources[src])
        np.logical_or.at(new_filled, dst, filled[src])
    elif reduce:
        new_values[dst] += values[src]
        new_sources[dst] |= sources[src]
        new_filled[dst] |= filled[src]
    else:
        new_values[dst] = values[src]
        new_sources[dst] = sources[src]
        new_filled[dst] = filled[src]
    return True


def outputs_of(schedule: Schedule, final_values: np.ndarray) -> tuple[np.ndarray | None, ...]:
    return tuple(None if span is None else readonly(final_values[r, span[0]:span[1]].copy())
                 for r, span in enumerate(schedule.layout.outputs))


def transfers_of(step) -> tuple[Transfer, ...]:
    """A step's moves between ranks, one transfer per (src, dst) pair."""
    pairs: dict[tuple[int, int], list] = {}
    for m in step.moves:
        if not m.local:
            pairs.setdefault((m.src, m.dst), []).append(m)
    return tuple(Transfer(src, dst, sum(m.length for m in moves), moves[0].reduce,
                          ", ".join(m.label for m in moves))
                 for (src, dst), moves in pairs.items())


def _numbers(values: np.ndarray, most: int = 4) -> str:
    shown = ", ".join(str(int(v)) for v in values[:most])
    return f"[{shown}{', …' if len(values) > most else ''}]"


def _example(step, before: np.ndarray) -> str:
    """One move of the step spelled out with its numbers."""
    moves = [m for m in step.moves if not m.local]
    if not moves:
        return ""
    m = moves[0]
    sent = before[m.src, m.src_lo:m.src_lo + m.length]
    if m.reduce:
        held = before[m.dst, m.dst_lo:m.dst_lo + m.length]
        return (f"Rank {m.src} → rank {m.dst}: {m.label} {_numbers(sent)} is added to "
                f"{_numbers(held)}, giving {_numbers(held + sent)}.")
    return f"Rank {m.src} → rank {m.dst}: {m.label} {_numbers(sent)} is stored."


def _captions(p: CollectiveParams, schedule: Schedule, values: np.ndarray,
              elements_sent: np.ndarray) -> list[str]:
    n_steps = len(schedule.steps)
    first = (f"Before: each of the {p.world} ranks holds its own input. {p.op} with the "
             f"{p.algorithm.replace('_', '-')} algorithm takes {n_steps} communication steps; at the end, "
             f"{SEMANTICS[p.op]}.")
    captions = [first]
    sent_so_far = np.zeros(p.world, dtype=np.int64)
    for k, step in enumerate(schedule.steps, start=1):
        for m in step.moves:
            if not m.local:
                sent_so_far[m.src] += m.length
        text = (f"Communication step {k} of {n_steps} · {step.phase}: {step.note}. "
                f"{_example(step, values[k - 1])} "
                f"The busiest rank has sent {int(sent_so_far.max())} elements so far.")
        if k == n_steps:
            most = int(elements_sent.max())
            text += (f" Done: {SEMANTICS[p.op]}. The busiest rank sent {most} elements, "
                     f"{most / p.count:.3g}× the {p.count}-element tensor.")
        captions.append(text)
    return captions


def simulate(p: CollectiveParams) -> CollectiveTrace:
    schedule = build(p.op, p.algorithm, p.world, p.count, p.root)
    inputs = make_inputs(p.op, p.world, p.count, p.seed)
    values, filled, sources = execute(schedule, inputs)

    elements_sent = sent_by_rank(schedule)
    element_bytes = cost.BYTES_PER_ELEMENT[p.dtype]

    links = cost.Links(p.alpha_us, p.intra_node_gbs, p.inter_node_gbs, p.gpus_per_node)
    costs = cost.step_costs(schedule, links)
    size = p.count * element_bytes
    t = cost.time_us(costs, p.alpha_us, size)
    algbw, busbw = cost.bandwidths(p.op, p.world, size, t)
    stats = Stats(len(schedule.steps), tuple(int(e) for e in elements_sent),
                  tuple(int(e) * element_bytes for e in elements_sent),
                  cost.busbw_factor(p.op, p.world), t, algbw, busbw)

    t_panel = cost.time_us(costs, p.alpha_us, p.cost_bytes)
    curves = cost.curves(p.op, p.world, links)
    by_name = {c.algorithm: c for c in curves}
    latency_first = next((by_name[a] for a in ("tree", "halving_doubling") if a in by_name), None)
    crossover = (cost.crossover_bytes(latency_first, by_name["ring"])
                 if latency_first is not None else None)
    depth = (max(max(depths(t)) for t in dtree_parents(p.world)) if p.algorithm == "tree"
             else 0)
    panel = CostPanel(p.cost_bytes, t_panel, *cost.bandwidths(p.op, p.world, p.cost_bytes, t_panel),
                      cost.time_us(costs, p.alpha_us, 0), cost.formula(p.op, p.algorithm, p.world, depth),
                      curves, crossover)

    captions = _captions(p, schedule, values, elements_sent)
    frames = [Frame(0, captions[0], (), "start")]
    frames += [Frame(k, captions[k], transfers_of(step), step.phase)
               for k, step in enumerate(schedule.steps, start=1)]
    return CollectiveTrace(p, schedule, inputs, outputs_of(schedule, values[-1]), values, filled,
                           sources, tuple(frames), stats, panel)
