"""Collective algorithms as schedules: which rank sends which elements to whom, step by step.

A schedule is data, independent of the numbers it moves (DESIGN principle 4): a list of steps,
each a tuple of :class:`Move` — ``length`` elements from ``src``'s work buffer at ``src_lo`` to
``dst``'s work buffer at ``dst_lo``, added (``reduce``) or copied. Moves in one step happen at
once: each reads the buffers as they were before the step. The same schedule drives the numpy
executor (:mod:`app.sim.collectives.simulate`), the α–β cost model (:mod:`app.sim.collectives.cost`) and
the send/recv replay in ``workers/collective.py``.

Every rank keeps one work buffer of ``Layout.buffer_len`` elements; ``Layout`` says where its
input starts and where its output is read at the end, following torch.distributed semantics:

- all_reduce: in ``count`` → out ``count`` (the sum);
- reduce_scatter: in ``count`` → out chunk ``r`` (``count/world``) of the sum;
- all_gather: in ``count/world`` (placed at chunk ``r``) → out ``count``;
- broadcast / reduce: ``root`` sends to all / receives the sum of all;
- all_to_all: ``[send area | receive area]``, 2·count long: block ``d`` of the send area goes to
  rank ``d``, which stores it as block ``r`` of its receive area.

Algorithms (references):

- ring: the bandwidth-optimal ring of Patarasuk & Yuan 2009 and NCCL; all_reduce is a
  reduce-scatter followed by an all-gather, 2(n−1) steps, each rank sending 2(n−1)/n of the
  data (nccl-tests doc/PERFORMANCE.md). Broadcast and reduce pipeline ``world`` pieces down a
  chain. All-to-all forwards blocks around the ring (store and forward).
- tree: NCCL's double binary tree (Sanders, Speck & Träff 2009; NCCL ``src/graph/trees.cc``):
  two complementary in-order binary trees, each reducing then broadcasting half the data.
- halving_doubling: Rabenseifner's algorithm (Thakur, Rabenseifner & Gropp 2005): recursive
  halving reduce-scatter, then recursive doubling all-gather; world a power of two.
- direct: pairwise exchange all-to-all; in step s rank r sends to r+s and receives from r−s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial
from typing import NamedTuple

import numpy as np

OPS: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce",
                        "all_to_all")
ALGORITHMS: tuple[str, ...] = ("ring", "tree", "halving_doubling", "direct")
SUPPORTED: dict[str, tuple[str, ...]] = {
    "ring": OPS,
    "tree": ("all_reduce",),
    "halving_doubling": ("all_reduce",),
    "direct": ("all_to_all",),
}
SPLITTING_OPS: tuple[str, ...] = ("reduce_scatter", "all_gather", "all_to_all")
"""Ops whose semantics cut the tensor into ``world`` equal chunks: count must divide."""


class Move(NamedTuple):
    """One transfer of a step (immutable). A named tuple rather than a frozen dataclass: a ring
    of 64 ranks has 8,000 moves, and a tuple is built three times faster (a first visit of
    /collective builds two such schedules: the trace's and the cost panel's)."""

    src: int
    dst: int
    src_lo: int
    dst_lo: int
    length: int
    reduce: bool
    label: str

    @property
    def local(self) -> bool:
        """A copy inside one rank (all_to_all keeping its own block): no link is used."""
        return self.src == self.dst


@dataclass(frozen=True)
class Step:
    phase: str
    note: str
    """What every rank does in this step, in words (the caption adds the numbers)."""
    moves: tuple[Move, ...]


@dataclass(frozen=True)
class Layout:
    buffer_len: int
    inputs: tuple[tuple[int, int], ...]
    """per rank: ``(lo, hi)`` where its input sits in its work buffer at the start."""
    outputs: tuple[tuple[int, int] | None, ...]
    """per rank: ``(lo, hi)`` read as its output at the end; None where it has none."""


@dataclass(frozen=True)
class Schedule:
    op: str
    algorithm: str
    world: int
    count: int
    root: int
    layout: Layout
    steps: tuple[Step, ...]


def chunk_bounds(count: int, parts: int) -> np.ndarray:
    """Offsets of ``parts`` contiguous chunks of ``count`` elements, as ``np.array_split`` cuts
    them (the first ``count % parts`` chunks hold one element more). Shape ``(parts + 1,)``."""
    sizes = np.full(parts, count // parts)
    sizes[: count % parts] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def layout(op: str, world: int, count: int, root: int) -> Layout:
    full = (0, count)
    if op in ("all_reduce", "broadcast"):
        return Layout(count, (full,) * world, (full,) * world)
    if op == "reduce":
        return Layout(count, (full,) * world,
                      tuple(full if r == root else None for r in range(world)))
    chunk = count // world
    own = tuple((r * chunk, (r + 1) * chunk) for r in range(world))
    if op == "reduce_scatter":
        return Layout(count, (full,) * world, own)
    if op == "all_gather":
        return Layout(count, own, (full,) * world)
    if op == "all_to_all":
        return Layout(2 * count, (full,) * world, ((count, 2 * count),) * world)
    raise ValueError(f"unknown op {op!r}")


def _moves(*moves: Move) -> tuple[Move, ...]:
    """Drop empty moves (chunks of zero elements when count < world)."""
    return tuple(m for m in moves if m.length > 0)


def _span(bounds: np.ndarray, chunk: int) -> tuple[int, int]:
    return int(bounds[chunk]), int(bounds[chunk + 1] - bounds[chunk])


# ---------------------------------------------------------------------------------------------
# Ring
# ---------------------------------------------------------------------------------------------

def _ring_pass(world: int, bounds: np.ndarray, phase: str, note: str, reduce: bool,
               shift: int) -> list[Step]:
    """n−1 steps in which rank r sends chunk (r + ``shift`` − s) mod n to rank r+1 in step s (no
    move for an empty chunk: with count < world most chunks are empty)."""
    lo, length = zip(*(_span(bounds, c) for c in range(world)))  # each chunk's, once
    labels = [f"chunk {c}" for c in range(world)]
    nxt = [(r + 1) % world for r in range(world)]
    steps = []
    for s in range(world - 1):
        k = (shift - s) % world
        chunks = [*range(k, world), *range(k)]  # rank r's chunk, (r + k) mod n
        steps.append(Step(phase, note, tuple(
            _move((r, nxt[r], lo[c], lo[c], length[c], reduce, labels[c]))
            for r, c in enumerate(chunks) if length[c] > 0)))
    return steps


_move = partial(tuple.__new__, Move)
"""``Move(*fields)`` without the named tuple's Python-level ``__new__`` (half of building a
ring's 8,000 moves)."""


def _ring_all_reduce(world: int, count: int) -> list[Step]:
    bounds = chunk_bounds(count, world)
    # 1. reduce-scatter: after n−1 steps rank r holds the whole sum of chunk r+1.
    reduce_scatter = _ring_pass(
        world, bounds, "reduce-scatter",
        "every rank sends one chunk to its right neighbour, which adds it to its own copy",
        True, 0)
    # 2. all-gather: each finished chunk travels once around the ring.
    all_gather = _ring_pass(
        world, bounds, "all-gather",
        "every rank forwards a finished chunk to its right neighbour, which overwrites its copy",
        False, 1)
    return reduce_scatter + all_gather


def _ring_reduce_scatter(world: int, count: int) -> list[Step]:
    # Shifted by one against all_reduce's first phase so that rank r ends with chunk r.
    return _ring_pass(
        world, chunk_bounds(count, world), "reduce-scatter",
        "every rank sends one chunk to its right neighbour, which adds it to its own copy",
        True, -1)


def _ring_all_gather(world: int, count: int) -> list[Step]:
    return _ring_pass(
        world, chunk_bounds(count, world), "all-gather",
        "every rank forwards a chunk it holds to its right neighbour, which stores it",
        False, 0)


def _chain_pipeline(chain: list[int], count: int, reduce: bool, phase: str,
                    note: str) -> list[Step]:
    """Pieces flow down ``chain`` one hop per step; hop i carries piece t − i at step t."""
    pieces = min(len(chain), count)
    bounds = chunk_bounds(count, pieces)
    steps = []
    for t in range(pieces + len(chain) - 2):
        moves = []
        for hop in range(len(chain) - 1):
            piece = t - hop
            if 0 <= piece < pieces:
                lo, length = _span(bounds, piece)
                moves.append(Move(chain[hop], chain[hop + 1], lo, lo, length, reduce,
                                  f"piece {piece}"))
        steps.append(Step(phase, note, _moves(*moves)))
    return steps


def _ring_broadcast(world: int, count: int, root: int) -> list[Step]:
    chain = [(root + i) % world for i in range(world)]
    return _chain_pipeline(chain, count, False, "pipeline",
                           "pieces of the root's tensor flow down the chain, one hop per step")


def _ring_reduce(world: int, count: int, root: int) -> list[Step]:
    chain = [(root + 1 + i) % world for i in range(world)]  # ends at root
    return _chain_pipeline(chain, count, True, "pipeline",
                           "partial sums flow down the chain towards the root, each rank adding "
                           "its own piece")


def _ring_all_to_all(world: int, count: int) -> list[Step]:
    """Store and forward: in step s rank r passes on the blocks of rank r−s+1 still in transit.

    The send area (block d at ``d·c``) doubles as the transit area: what rank r forwards in step
    s originated on rank r−s+1 and is for ranks r+1 … r+n−s. The receiver keeps the block
    addressed to itself (into its receive area, slot = origin) and forwards the rest next step.
    """
    c = count // world
    steps = []
    for s in range(1, world):
        moves = []
        for r in range(world):
            nxt, origin = (r + 1) % world, (r - s + 1) % world
            if s == 1:
                moves.append(Move(r, r, r * c, count + r * c, c, False, f"own block {r}"))
            # the block addressed to the neighbour lands in its receive area …
            moves.append(Move(r, nxt, nxt * c, count + origin * c, c, False,
                              f"block {origin}→{nxt}"))
            # … the others, for ranks r+2 … r+n−s, stay in its transit area at the same offsets:
            # one contiguous run of blocks, or two where it wraps past rank n−1
            first, last = r + 2, r + world - s  # in rank numbers before taking them mod n
            for lo, hi in ((first, min(last, world - 1)), (max(first, world) - world,
                                                           last - world)):
                if lo <= hi:
                    moves.append(Move(r, nxt, lo * c, lo * c, (hi - lo + 1) * c, False,
                                      f"blocks {origin}→{lo}…{hi}" if hi > lo
                                      else f"block {origin}→{lo}"))
        steps.append(Step("store and forward",
                          "every rank passes the blocks in transit to its right neighbour, "
                          "which keeps the one addressed to it", _moves(*moves)))
    return steps


# ---------------------------------------------------------------------------------------------
# Direct (pairwise exchange) all-to-all
# ---------------------------------------------------------------------------------------------

def _direct_all_to_all(world: int, count: int) -> list[Step]:
    c = count // world
    steps = []
    for s in range(1, world):
        moves = []
        for r in range(world):
            if s == 1:
                moves.append(Move(r, r, r * c, count + r * c, c, False, f"own block {r}"))
            d = (r + s) % world
            moves.append(Move(r, d, d * c, count + r * c, c, False, f"block {r}→{d}"))
        steps.append(Step("pairwise exchange",
                          f"every rank r sends the block addressed to rank r+{s} straight to it",
                          _moves(*moves)))
    return steps


# ---------------------------------------------------------------------------------------------
# Double binary tree (NCCL)
# ---------------------------------------------------------------------------------------------

def btree_parents(world: int) -> list[int]:
    """Parent of each rank in NCCL's in-order binary tree rooted at 0 (−1 for the root).

    A rank's lowest set bit ``b`` gives its level; its parent is ``(r ^ b) | (b << 1)``, or
    ``r ^ b`` when that is out of range. Rank 0 is the root with one child, the highest power
    of two below ``world``. E.g. 14 ranks: 0 → 8 → (4, 12) → (2, 6, 10) → odd ranks.
    """
    parents = [-1] * world
    for r in range(1, world):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parents[r] = up if up < world else r ^ bit
    return parents


def dtree_parents(world: int) -> tuple[list[int], list[int]]:
    """The two trees of NCCL's double binary tree: the btree, and its mirror (world even) or
    the btree shifted by one rank (world odd), so that most ranks are a leaf in one tree."""
    first = btree_parents(world)
    if world % 2 == 0:
        mirror = lambda r: world - 1 - r  # noqa: E731 - its own inverse
        second = [-1 if first[mirror(r)] < 0 else mirror(first[mirror(r)]) for r in range(world)]
    else:
        second = [-1] * world
        for r in range(world):
            p = first[(r - 1) % world]
            second[r] = -1 if p < 0 else (p + 1) % world
    return first, second


def depths(parents: list[int]) -> list[int]:
    out = []
    for r in range(len(parents)):
        d, p = 0, parents[r]
        while p >= 0:
            d, p = d + 1, parents[p]
        out.append(d)
    return out


def _tree_all_reduce(world: int, count: int) -> list[Step]:
    """Tree k reduces then broadcasts half k of the buffer, both trees at once, level by level
    (NCCL also pipelines each half in small pieces; here one piece, so every step is visible)."""
    half = count // 2
    spans = [(0, half), (half, count - half)]
    trees = dtree_parents(world)
    tree_depths = [depths(p) for p in trees]
    height = max(max(d) for d in tree_depths)
    steps = []
    # 1. reduce: the deepest ranks send first; a parent has heard from all its children before
    #    its own turn because children are exactly one level deeper.
    for level in range(height, 0, -1):
        moves = []
        for k, (parents, depth) in enumerate(zip(trees, tree_depths)):
            lo, length = spans[k]
            moves += [Move(r, parents[r], lo, lo, length, True, f"half {k} (tree {k})")
                      for r in range(world) if depth[r] == level]
        steps.append(Step("reduce up the trees",
                          "ranks at the deepest unfinished level send their partial sum of the "
                          "tree's half to their parent, which adds it", _moves(*moves)))
    # 2. broadcast: the roots hold the full sums and send them back down.
    for level in range(0, height):
        moves = []
        for k, (parents, depth) in enumerate(zip(trees, tree_depths)):
            lo, length = spans[k]
            moves += [Move(parents[r], r, lo, lo, length, False, f"half {k} (tree {k})")
                      for r in range(world) if depth[r] == level + 1]
        steps.append(Step("broadcast down the trees",
                          "ranks that hold the finished half send it to their children",
                          _moves(*moves)))
    return steps


# ---------------------------------------------------------------------------------------------
# Recursive halving-doubling (Rabenseifner)
# ---------------------------------------------------------------------------------------------

def _halving_doubling_all_reduce(world: int, count: int) -> list[Step]:
    segments = [(0, count)] * world  # the part of the buffer each rank is still responsible for
    history = []
    steps = []
    # 1. reduce-scatter by recursive halving: partners at distance n/2, n/4, …, 1 each keep one
    #    half of their segment and send the other half, which the partner adds to its own.
    distance = world // 2
    while distance >= 1:
        moves, new_segments = [], []
        for r in range(world):
            lo, hi = segments[r]
            mid = lo + (hi - lo) // 2
            partner = r ^ distance
            keep, give = ((lo, mid), (mid, hi)) if r & distance == 0 else ((mid, hi), (lo, mid))
            moves.append(Move(r, partner, give[0], give[0], give[1] - give[0], True,
                              f"elements {give[0]}–{give[1] - 1}"))
            new_segments.append(keep)
        history.append(segments)
        segments = new_segments
        steps.append(Step("recursive halving",
                          f"partners {distance} apart swap halves of their segment; each adds "
                          "the half it keeps", _moves(*moves)))
        distance //= 2
    # 2. all-gather by recursive doubling: the same pairs in reverse order swap finished parts.
    distance = 1
    for before in reversed(history):
        moves = []
        for r in range(world):
            lo, hi = segments[r]
            moves.append(Move(r, r ^ distance, lo, lo, hi - lo, False, f"elements {lo}–{hi - 1}"))
        segments = before
        steps.append(Step("recursive doubling",
                          f"partners {distance} apart swap the finished parts they hold",
                          _moves(*moves)))
        distance *= 2
    return steps


# ---------------------------------------------------------------------------------------------

def elements_sent(schedule: Schedule) -> np.ndarray:
    """Elements each rank sends over links in the whole schedule, shape (world,): the sum of
    its moves to other ranks (a copy inside a rank sends nothing)."""
    sent = np.zeros(schedule.world, dtype=np.int64)
    for step in schedule.steps:
        for m in step.moves:
            if not m.local:
                sent[m.src] += m.length
    return sent


def step_count(op: str, algorithm: str, world: int, count: int) -> int:
    """How many steps ``build`` will produce, without building it (for bounding work)."""
    if algorithm == "tree":
        return 2 * max(max(depths(p)) for p in dtree_parents(world))
    if algorithm == "halving_doubling":
        return 2 * (world.bit_length() - 1)
    if op == "all_reduce":
        return 2 * (world - 1)
    if op in ("broadcast", "reduce"):
        return min(world, count) + world - 2
    return world - 1


@lru_cache(maxsize=128)
def build(op: str, algorithm: str, world: int, count: int, root: int = 0) -> Schedule:
    """The schedule of ``op`` on ``world`` ranks with ``algorithm``. Inputs are assumed valid
    (see :class:`app.scenes.collective.page.CollectiveParams` for the checks with messages).
    Schedules are immutable, so they are cached."""
    if op not in SUPPORTED.get(algorithm, ()):
        raise ValueError(f"algorithm {algorithm!r} does not implement {op!r}")
    if algorithm == "ring":
        steps = {
            "all_reduce": lambda: _ring_all_reduce(world, count),
            "reduce_scatter": lambda: _ring_reduce_scatter(world, count),
            "all_gather": lambda: _ring_all_gather(world, count),
            "broadcast": lambda: _ring_broadcast(world, count, root),
            "reduce": lambda: _ring_reduce(world, count, root),
            "all_to_all": lambda: _ring_all_to_all(world, count),
        }[op]()
    elif algorithm == "tree":
        steps = _tree_all_reduce(world, count)
    elif algorithm == "halving_doubling":
        steps = _halving_doubling_all_reduce(world, count)
    else:
        steps = _direct_all_to_all(world, count)
    return Schedule(op, algorithm, world, count, root, layout(op, world, count, root),
                    tuple(steps))
