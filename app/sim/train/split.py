"""A step's time split per rank — compute, exposed communication, bubble — the same way for the
predicted timeline and for the measured one, so that the two can be compared.

Per rank, of the step's time:

    compute         the compute lane busy (passes, recomputation, the optimizer)
    comm exposed    a communication lane (tp, cp, ep, dp) busy while compute is not: what no
                    computation hides
    bubble          the rest: the rank waits for another stage (its pipeline receives — the
                    transfer included — and the ends of the schedule)

Measured events come from the framework's timers (workers/train/comm.py): compute spans
contain the blocking calls they made, so a measured rank's compute is its spans' union less the
time its blocking calls held it; overlapped transfers (DP buckets in flight, marked
``overlapped``) hide behind compute as predicted ones do.
"""

from __future__ import annotations

COMM_LANES = ("tp", "cp", "ep", "dp")


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(intervals):
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def _by_rank(events: list[dict], world: int) -> list[list[dict]]:
    out: list[list[dict]] = [[] for _ in range(world)]
    for e in events:
        out[e["rank"]].append(e)
    return out


def predicted_split(events: list[dict], world: int, step_s: float,
                    alike: tuple[tuple[int, ...], ...] = ()) -> list[dict]:
    """Each rank's split of a predicted timeline (compute tasks never overlap the comm calls
    that hold the main thread). ``alike``: ranks known to share one timeline (the first of each
    is split, the others get its numbers)."""
    by_rank = _by_rank(events, world)
    out: dict[int, dict] = {}
    for ranks in alike or tuple((r,) for r in range(world)):
        mine = by_rank[ranks[0]]
        compute = [(e["start_s"], e["start_s"] + e["dur_s"]) for e in mine
                   if e["lane"] == "compute"]
        comm = [(e["start_s"], e["start_s"] + e["dur_s"]) for e in mine
                if e["lane"] in COMM_LANES]
        busy = _union_length(compute)
        exposed = _union_length(comm) - _intersection(comm, compute)
        for r in ranks:
            out[r] = {"rank": r, "step_s": step_s, "compute_s": busy, "comm_exposed_s": exposed,
                      "bubble_s": max(0.0, step_s - busy - exposed)}
    return [out[r] for r in range(world)]


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Length of (∪ a) ∩ (∪ b)."""
    return _union_length(a) + _union_length(b) - _union_length(a + b)


def measured_split(events: list[dict], world: int, step_s: list[float]) -> list[dict]:
    """Each rank's split of a measured timeline (``step_s[r]``: the rank's step time)."""
    out = []
    for r, mine in enumerate(_by_rank(events, world)):
        blocking = [(e["start_s"], e["start_s"] + e["dur_s"]) for e in mine
                    if e["lane"] in COMM_LANES and not e.get("overlapped")]
        spans = [(e["start_s"], e["start_s"] + e["dur_s"]) for e in mine
                 if e["lane"] == "compute"]
        exposed = _union_length(blocking)
        compute = max(0.0, _union_length(spans) - _intersection(spans, blocking))
        total = step_s[r]
        out.append({"rank": r, "step_s": total, "compute_s": compute, "comm_exposed_s": exposed,
                    "bubble_s": max(0.0, total - compute - exposed)})
    return out


def mean_split(rows: list[dict]) -> dict:
    """The contract's ``predicted`` / ``measured``: the step (the slowest rank) and each part's
    mean over the ranks."""
    n = max(1, len(rows))
    return {"step_s": max((r["step_s"] for r in rows), default=0.0),
            **{k: sum(r[k] for r in rows) / n for k in ("compute_s", "comm_exposed_s",
                                                         "bubble_s")}}
