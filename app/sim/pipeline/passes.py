"""Passes over a pipeline schedule — communication, validation, timing, activation memory —
each separate, as torch.distributed.pipelining separates them.

Dependencies (what each pass needs before it can start), for stage s of S and micro-batch i:

    F(s, i)        ← F(s − 1, i)                 the activation from the previous stage
    B|I(s, i)      ← F(s, i) and B|I(s + 1, i)   its own forward, the gradient from the next stage
    W(s, i)        ← I(s, i)

A dependency between stages on different ranks is a send/recv that takes ``t_comm`` (0 in the
papers' formulas); between stages on the same rank (the turn of a V) it is free. Communication
is asynchronous: a rank never waits for its own sends, only for the data it receives.

Timing runs every rank's list in order: an action starts when its rank is free and its input
has arrived, and lasts t_f / v (F), (t_b + t_w) / v (B), t_b / v (I) or t_w / v (W) — the
times are for a rank's whole share of the layers and its v chunks split it (DESIGN.md).
Activations of a micro-batch-chunk are held from the start of its F to the end of its last
backward pass (B, or W, which still reads the layer inputs).

Actions are handled as one flat array, rank after rank ("dense" indices), so that 10⁵ of them
are checked and timed in tens of milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from app.sim.pipeline.schedules import KINDS, Schedule, decode
from app.sim.trace import readonly


class InvalidSchedule(ValueError):
    """The schedule cannot run: an action missing, repeated, misplaced, or a deadlock."""


@dataclass(frozen=True)
class Times:
    t_f: float
    t_b: float
    t_w: float
    t_comm: float = 0.0

    def durations(self, chunks: int) -> np.ndarray:
        """Duration of one F, B, I, W of one chunk (indexed by kind code)."""
        return np.array([self.t_f, self.t_b + self.t_w, self.t_b, self.t_w]) / chunks


@dataclass(frozen=True, eq=False)
class Flat:
    """Every action of a schedule in one array, rank after rank."""

    ids: np.ndarray
    """(N,) action ids"""
    offsets: np.ndarray
    """(p + 1,) rank r's actions are ids[offsets[r]:offsets[r + 1]]"""
    m: int

    @classmethod
    def of(cls, schedule: Schedule) -> Flat:
        lengths = [len(a) for a in schedule.ids]
        ids = np.concatenate(schedule.ids) if schedule.ids else np.zeros(0, dtype=np.int64)
        return cls(readonly(ids), readonly(np.concatenate(([0], np.cumsum(lengths)))),
                   schedule.microbatches)

    @cached_property
    def rank(self) -> np.ndarray:
        return readonly(np.repeat(np.arange(len(self.offsets) - 1), np.diff(self.offsets)))

    @cached_property
    def stage(self) -> np.ndarray:
        return readonly(self.ids // (4 * self.m))

    @cached_property
    def kind(self) -> np.ndarray:
        return readonly((self.ids // self.m) % 4)

    @cached_property
    def microbatch(self) -> np.ndarray:
        return readonly(self.ids % self.m)

    def per_rank(self, values: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(values[a:b] for a, b in zip(self.offsets[:-1], self.offsets[1:]))


def validate(schedule: Schedule, flat: Flat | None = None) -> Flat:
    """Raise :class:`InvalidSchedule` unless every (stage, micro-batch) has exactly one F and
    either one B or one I and one W, on the rank holding the stage, with F before its backward
    and I before its W in that rank's order. Deadlocks are found by :func:`timeline`."""
    flat = flat or Flat.of(schedule)
    S, m = schedule.stages, schedule.microbatches
    ids, offsets = flat.ids, flat.offsets
    if ids.size and (ids.min() < 0 or ids.max() >= S * 4 * m):
        bad = ids[(ids < 0) | (ids >= S * 4 * m)][0]
        raise InvalidSchedule(f"action id {bad} is outside {S} stages × {m} micro-batches")
    misplaced = schedule.rank_of_stage[flat.stage] != flat.rank
    if misplaced.any():
        k = int(np.argmax(misplaced))
        raise InvalidSchedule(f"rank {flat.rank[k]} runs {decode(ids[k], m)}, but stage "
                              f"{flat.stage[k]} lives on rank {schedule.rank_of(flat.stage[k])}")
    seen = np.bincount(ids, minlength=S * 4 * m).reshape(S, 4, m)
    if (seen > 1).any():
        s, k, i = np.argwhere(seen > 1)[0]
        raise InvalidSchedule(f"{s}{KINDS[k]}{i} runs {seen[s, k, i]} times")
    has = seen == 1
    problems = [(~has[:, 0], "has no forward"), (has[:, 1] & (has[:, 2] | has[:, 3]), "has both B and I/W"),
                (~has[:, 1] & ~(has[:, 2] & has[:, 3]), "has neither B nor both I and W")]
    for mask, what in problems:
        if mask.any():
            s, i = np.argwhere(mask)[0]
            raise InvalidSchedule(f"stage {s}, micro-batch {i} {what}")
    position = np.zeros(S * 4 * m, dtype=np.int64)
    position[ids] = np.arange(ids.size) - offsets[flat.rank]
    position = position.reshape(S, 4, m)
    back = np.where(has[:, 1], position[:, 1], position[:, 2])
    if (back < position[:, 0]).any():
        s, i = np.argwhere(back < position[:, 0])[0]
        raise InvalidSchedule(f"stage {s} runs micro-batch {i}'s backward before its forward")
    early = has[:, 3] & (position[:, 3] < position[:, 2])
    if early.any():
        s, i = np.argwhere(early)[0]
        raise InvalidSchedule(f"stage {s} runs {s}W{i} before {s}I{i}")
    return flat


@dataclass(frozen=True, eq=False)
class Links:
    """The communication pass: for every action (dense index), the action whose output it
    needs (−1: none) and whether that data crosses ranks (a send/recv)."""

    source: np.ndarray
    remote: np.ndarray

    @property
    def sends(self) -> int:
        return int(self.remote.sum())


def communication(schedule: Schedule, flat: Flat) -> Links:
    S, m = schedule.stages, schedule.microbatches
    dense = np.full(S * 4 * m, -1, dtype=np.int64)    # action id → dense index
    dense[flat.ids] = np.arange(flat.ids.size)
    grid = np.arange(S * 4 * m).reshape(S, 4, m)       # (stage, kind, micro-batch) → id
    source = np.full((S, 4, m), -1, dtype=np.int64)
    source[1:, 0] = grid[:-1, 0]                       # F(s) ← F(s − 1)
    grad = np.where(dense[grid[1:, 1]] >= 0, grid[1:, 1], grid[1:, 2])
    source[:-1, 1] = source[:-1, 2] = grad             # B|I(s) ← B|I(s + 1)
    source[S - 1, 1] = source[S - 1, 2] = grid[S - 1, 0]   # the last stage turns its own F around
    source[:, 3] = grid[:, 2]                          # W(s) ← I(s)
    src = source.reshape(-1)[flat.ids]
    src = np.where(src >= 0, dense[np.maximum(src, 0)], -1)
    remote = (src >= 0) & (flat.rank[np.maximum(src, 0)] != flat.rank)
    return Links(readonly(src), readonly(remote))


@dataclass(frozen=True, eq=False)
class Timeline:
    """When every action ran (dense indices, see :class:`Flat`)."""

    start: np.ndarray
    end: np.ndarray
    makespan: float
    busy: np.ndarray
    """(p,) time each rank computed"""

    @property
    def bubble_fraction(self) -> float:
        """Idle rank-time over p · makespan."""
        if not self.makespan:
            return 0.0
        return float(max(0.0, 1.0 - self.busy.sum() / (len(self.busy) * self.makespan)))


def timeline(schedule: Schedule, times: Times, flat: Flat | None = None,
             links: Links | None = None, method: str = "auto") -> Timeline:
    """The timing pass: each rank runs its list in order, every action as soon as its rank is
    free and its input has arrived. Raises :class:`InvalidSchedule` on a deadlock.

    Two exact methods: ``worklist`` runs one rank until it blocks, then another (cheapest with
    few ranks); ``lockstep`` advances every rank that can by one action per round with numpy
    (cheapest with many). ``auto`` picks by the shape."""
    flat = flat or Flat.of(schedule)
    links = links or communication(schedule, flat)
    duration = times.durations(schedule.chunks)[flat.kind]
    comm = np.where(links.remote, times.t_comm, 0.0)
    lengths = np.diff(flat.offsets)
    if method == "auto":
        longest = int(lengths.max(initial=0))
        method = "lockstep" if flat.ids.size > 10 * longest else "worklist"
    run = _lockstep if method == "lockstep" else _worklist
    start, end = run(flat, links.source, duration, comm, schedule.microbatches)
    busy = np.array([float(duration[a:b].sum()) for a, b in zip(flat.offsets[:-1], flat.offsets[1:])])
    makespan = float(end.max(initial=0.0))
    return Timeline(readonly(start), readonly(end), makespan, readonly(busy))


def _deadlock(flat: Flat, source: np.ndarray, at: int, m: int) -> InvalidSchedule:
    rank = int(flat.rank[at])
    return InvalidSchedule(f"deadlock: rank {rank} waits forever at {decode(flat.ids[at], m)}, "
                           f"which needs {decode(flat.ids[source[at]], m)}")


def _worklist(flat, source, duration, comm, m):
    n = flat.ids.size
    src, dur, cost = source.tolist(), duration.tolist(), comm.tolist()
    start, end = [0.0] * n, [-1.0] * n
    waiting = [-1] * n                        # the rank parked on this action, if any
    bounds = flat.offsets.tolist()
    cursor, stop = bounds[:-1], bounds[1:]
    clock = [0.0] * len(cursor)
    ready = list(range(len(cursor) - 1, -1, -1))
    while ready:
        r = ready.pop()
        a, last, t = cursor[r], stop[r], clock[r]
        while a < last:
            d = src[a]
            if d >= 0:
                arrive = end[d]
                if arrive < 0:                # not produced yet: park this rank on it
                    waiting[d] = r
                    break
                arrive += cost[a]
                if arrive > t:
                    t = arrive
            start[a] = t
            t += dur[a]
            end[a] = t
            if waiting[a] >= 0:
                ready.append(waiting[a])
            a += 1
        cursor[r], clock[r] = a, t
    for r, (a, last) in enumerate(zip(cursor, stop)):
        if a < last:
            raise _deadlock(flat, source, a, m)
    return np.array(start), np.array(end)


def _lockstep(flat, source, duration, comm, m):
    """Each round, every rank whose next input is ready runs that action. Positions are
    spread out so that rank r's actions are followed by a sentinel of its own (position
    offsets[r + 1] + r) waiting on NEVER (end −1); actions without an input read ALWAYS (end
    0); ``end < 0`` means "not run yet"."""
    n, ranks = flat.ids.size, flat.offsets.size - 1
    shift = flat.rank                                    # dense k → position k + rank
    size = n + ranks
    never, always = size, size + 1
    src = np.full(size + 2, never)
    src[np.arange(n) + shift] = np.where(source >= 0, source + shift[np.maximum(source, 0)], always)
    cost, length = np.zeros(size + 2), np.zeros(size + 2)
    cost[np.arange(n) + shift] = comm
    length[np.arange(n) + shift] = duration
    end = np.full(size + 2, -1.0)
    end[always] = 0.0
    cursor = flat.offsets[:-1] + np.arange(ranks)
    clock = np.zeros(ranks)
    free = not comm.any()
    done = 0
    while done < n:
        arrived = end[src[cursor]]
        if arrived.min() >= 0:
            # every rank runs (most rounds): the same arithmetic as below, in place and
            # without picking the ranks out (+ cost left out when it is 0 everywhere)
            if not free:
                arrived += cost[cursor]
            np.maximum(clock, arrived, out=clock)
            clock += length[cursor]
            end[cursor] = clock
            cursor += 1
            done += ranks
            continue
        ready = np.flatnonzero(arrived >= 0)            # inputs produced in an earlier round
        if ready.size == 0:
            waiting = cursor[src[cursor] != never]
            stuck = int(waiting[0] - np.searchsorted(flat.offsets[1:] + np.arange(ranks),
                                                     waiting[0], side="right"))
            raise _deadlock(flat, source, stuck, m)
        a = cursor[ready]
        t = np.maximum(clock[ready], arrived[ready] + cost[a]) + length[a]
        end[a] = t
        clock[ready] = t
        cursor[ready] += 1
        done += ready.size
    finished = end[np.arange(n) + shift]
    return finished - duration, finished


@dataclass(frozen=True, eq=False)
class Memory:
    """Activations held per rank, a step function: held[r][k] micro-batch-chunks from times[r][k]
    to the next change; and each rank's peak."""

    times: tuple[np.ndarray, ...]
    held: tuple[np.ndarray, ...]
    peak: tuple[int, ...]


def memory(flat: Flat, line: Timeline) -> Memory:
    """+1 when an F starts, −1 when the last backward pass of that micro-batch-chunk ends
    (B, or W after an I). A rank's actions never overlap, so its count is a running sum in
    its own order."""
    kind = flat.kind
    delta = np.select([kind == 0, (kind == 1) | (kind == 3)], [1, -1], 0)
    at = np.where(kind == 0, line.start, line.end)
    times, held, peaks = [], [], []
    for d, t in zip(flat.per_rank(delta), flat.per_rank(at)):
        keep = d != 0
        count = np.cumsum(d[keep])
        times.append(readonly(np.concatenate(([0.0], t[keep]))))
        held.append(readonly(np.concatenate(([0], count))))
        peaks.append(int(count.max(initial=0)))
    return Memory(tuple(times), tuple(held), tuple(peaks))


def with_sends(schedule: Schedule, flat: Flat, links: Links, rank: int,
               limit: int | None = None) -> list[str]:
    """Rank ``rank``'s order with its sends and receives, as torch.distributed.pipelining's
    ``_add_send_recv`` writes them: ``1RECV_F0`` before ``1F0``, ``1SEND_F0`` after it;
    gradients travel as ``SEND_B`` / ``RECV_B``. An overlapped F&B pair (DualPipeV) is one
    step: its receives come before it and its sends after both passes. With ``limit``, the
    first ``limit`` tokens or a few more (a preview need not spell out 10⁵ actions)."""
    m = schedule.microbatches
    a, b = int(flat.offsets[rank]), int(flat.offsets[rank + 1])
    remote = links.remote
    sources = links.source[remote]   # the passes whose output another rank reads
    readers = set(sources[(sources >= a) & (sources < b)].tolist())
    out, k = [], a
    while k < b and (limit is None or len(out) < limit):
        step = 2 if (rank, k - a) in schedule.overlapped else 1
        passes = [decode(flat.ids[j], m) for j in range(k, k + step)]
        data = ["F" if p.kind == "F" else "B" for p in passes]
        out += [f"{p.stage}RECV_{d}{p.microbatch}" for j, p, d in zip(range(k, k + step), passes, data)
                if remote[j]]
        out += [str(p) for p in passes]
        out += [f"{p.stage}SEND_{d}{p.microbatch}" for j, p, d in zip(range(k, k + step), passes, data)
                if j in readers]
        k += step
    return out
