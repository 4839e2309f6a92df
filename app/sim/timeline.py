"""Timelines of one training step as data: tasks on lanes, scheduled by one small pass.

A lane is a resource that does one thing at a time: a GPU's compute stream, its NCCL stream, a
PCIe link, an NVMe drive, the host CPU. A :class:`Task` occupies one lane for ``duration_us``
and may wait for other tasks (``after``). Each lane runs its tasks in the order they are listed
(a CUDA stream is a FIFO queue: work issued first runs first), so the list *is* the program:
"backward of layer 11, then launch bucket 3's all-reduce, then backward of layer 10 …".
:func:`schedule` places every task at the earliest time its lane is free and its inputs are
done. Building the task list (what a framework issues) and timing it (this pass) stay separate,
as in ``torch.distributed.pipelining`` where schedules are IR and timing is a pass.
"""

from __future__ import annotations

from dataclasses import dataclass


# Tasks and spans are never changed once made; they are plain (not frozen) dataclasses with
# slots because a step of /train makes tens of thousands of each, and a frozen dataclass's
# __init__ (object.__setattr__ per field) costs three times as much.
@dataclass(slots=True, unsafe_hash=True)
class Task:
    name: str
    lane: str
    duration_us: float
    after: tuple[str, ...] = ()
    kind: str = ""                 # what it is, for colours and legends: "forward", "all_reduce" …
    detail: str = ""               # one line for captions and tooltips
    earliest_us: float = 0.0       # issued at this time (when a finer-grained event releases it)


@dataclass(slots=True, unsafe_hash=True)
class Span:
    name: str
    lane: str
    start_us: float
    end_us: float
    kind: str
    detail: str
    waited_for: str = ""           # the task whose end set this one's start ("" at time 0)

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    def to_dict(self) -> dict:
        return {"name": self.name, "lane": self.lane, "start_us": self.start_us,
                "end_us": self.end_us, "kind": self.kind, "detail": self.detail}


def schedule(tasks: list[Task] | tuple[Task, ...]) -> tuple[Span, ...]:
    """Start every task when its lane is free and everything it waits for has ended.

    Tasks must be listed so that each comes after the tasks it waits for (a program order);
    a task that waits for one listed later, or an unknown name, is an error."""
    lane_free: dict[str, tuple[float, str]] = {}
    ends: dict[str, float] = {}
    spans = []
    for task in tasks:
        start, waited = lane_free.get(task.lane, (0.0, ""))
        if task.earliest_us > start:
            start, waited = task.earliest_us, ""
        for name in task.after:
            end = ends.get(name)
            if end is None:
                missing = [n for n in task.after if n not in ends]
                raise ValueError(f"task {task.name!r} waits for {missing}, which are not "
                                 f"listed before it")
            if end > start:
                start, waited = end, name
        end = start + max(0.0, task.duration_us)
        if task.name in ends:
            raise ValueError(f"two tasks are named {task.name!r}")
        ends[task.name] = end
        lane_free[task.lane] = (end, task.name)
        spans.append(Span(task.name, task.lane, start, end, task.kind, task.detail, waited))
    return tuple(spans)


def makespan(spans: tuple[Span, ...]) -> float:
    return max((s.end_us for s in spans), default=0.0)


def critical_path(spans: tuple[Span, ...]) -> tuple[Span, ...]:
    """The chain of tasks that sets the step time: from the task that ends last, back through
    whatever each one waited for. Shortening anything off this chain does not help."""
    by_name = {s.name: s for s in spans}
    if not spans:
        return ()
    chain = [max(spans, key=lambda s: s.end_us)]
    while chain[-1].waited_for:
        chain.append(by_name[chain[-1].waited_for])
    return tuple(reversed(chain))


def busy_us(spans: tuple[Span, ...], lane: str) -> float:
    return sum(s.duration_us for s in spans if s.lane == lane)


def exposed_us(spans: tuple[Span, ...], lane: str, behind: str) -> float:
    """Time ``lane`` is busy while ``behind`` is idle: the part of (say) communication that no
    computation hides."""
    mine = sorted((s.start_us, s.end_us) for s in spans if s.lane == lane and s.end_us > s.start_us)
    cover = _union(sorted((s.start_us, s.end_us) for s in spans
                          if s.lane == behind and s.end_us > s.start_us))
    exposed = 0.0
    for lo, hi in _union(mine):
        covered = sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in cover)
        exposed += (hi - lo) - covered
    return exposed


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for lo, hi in intervals:
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out
