"""The player's steps through one predicted training step, and their captions.

A step of the player is a moment a pass begins somewhere — stage s starts the forward or the
backward of micro-batch i — so stepping walks the pipeline's schedule as it unfolds on every
rank at once; then the optimizer, then the end. Each caption says what began, what is in
flight at that moment (by kind of group) and which ranks wait (the bubble).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from app.humanize import human_time_us

MAX_FRAMES = 40
"""At most this many steps: beyond, every k-th pass start."""

GROUP_WORDS = {"tp": "TP", "cp": "CP", "pp": "PP", "ep": "EP", "dp_cp": "DP", "edp":
               "expert DP", "world": "global norm"}
OP_WORDS = {"all_reduce": "all-reduce", "all_gather": "all-gather",
            "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all", "ring": "ring K/V send",
            "send": "send"}
PASS_WORDS = {"F": "forward", "B": "backward"}


@dataclass(frozen=True)
class TrainFrame:
    step: int
    time_s: float
    caption: str
    phase: str
    unit: str
    label: str = ""
    """the passes that begin, short: "stage 1 F0, stage 0 B2" """

    def to_dict(self) -> dict:
        return {"step": self.step, "time_s": self.time_s, "caption": self.caption,
                "phase": self.phase}


def _t(seconds: float) -> str:
    return human_time_us(seconds * 1e6)


def _ranks(ranks: list[int]) -> str:
    ranks = sorted(set(ranks))
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"ranks {ranks[0]}–{ranks[-1]}"
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def pass_starts(events: list[dict], alike: dict[int, tuple[int, ...]]
                ) -> list[tuple[float, str, int, int, list[int]]]:
    """(time, kind, stage, micro-batch, ranks) of every pass's first task, by time."""
    first: dict[tuple, float] = {}
    ranks: dict[tuple, set[int]] = {}
    for e in events:
        if e["lane"] == "compute" and e["kind"] in PASS_WORDS:
            key = (e["kind"], e["stage"], e["microbatch"])
            first[key] = min(first.get(key, float("inf")), e["start_s"])
            ranks.setdefault(key, set()).update(alike[e["rank"]])
    return sorted((t, k, s, m, sorted(ranks[(k, s, m)])) for (k, s, m), t in first.items())


def make_frames(p, events: list[dict], stages: tuple[tuple[int, ...], ...], step_s: float,
                split: dict, intro: str) -> tuple:
    """The player's steps from the events of each stage's first rank (``events``, by start):
    the ranks of a stage (``stages``) do as its first does, at the same moments."""
    alike = {ranks[0]: ranks for ranks in stages}
    starts = pass_starts(events, alike)
    optimizer = min((e["start_s"] for e in events if e["kind"] == "optimizer"),
                    default=step_s)
    times = sorted({round(t, 12) for t, *_ in starts})
    if len(times) > MAX_FRAMES - 3:
        every = -(-len(times) // (MAX_FRAMES - 3))
        times = times[::every]
    frames = [TrainFrame(0, 0.0, intro, "before", "before the step")]
    groups: list[list] = [[] for _ in times]
    for tt, k, s, m, rs in starts:                # each pass to the first moment at or after it
        groups[min(bisect.bisect_left(times, round(tt, 12)), len(times) - 1)].append(
            (k, s, m, rs))
    running = _Running(events)
    for t, began in zip(times, groups):
        label = ", ".join(f"stage {s} {k}{m}" for k, s, m, _ in began[:3]) + \
            (" …" if len(began) > 3 else "")
        frames.append(TrainFrame(len(frames), t, _caption(t, began, running.at(t), p.world,
                                                          alike),
                                 "passes", f"t = {_t(t)} of {_t(step_s)}", label))
    frames.append(TrainFrame(len(frames), optimizer, _optimizer_caption(p, optimizer),
                             "optimizer", f"t = {_t(optimizer)} of {_t(step_s)}: optimizer"))
    total = split["compute_s"] + split["comm_exposed_s"] + split["bubble_s"] or 1.0
    frames.append(TrainFrame(
        len(frames), step_s,
        f"Done at t = {_t(step_s)}. Of each rank's time, on average: compute "
        f"{split['compute_s'] / total:.0%}, communication nothing hid "
        f"{split['comm_exposed_s'] / total:.0%}, bubble {split['bubble_s'] / total:.0%} "
        f"(waiting for another stage). Every rank now holds the same new weights for its "
        f"shard — and the real run checks they are one process's.", "done",
        f"t = {_t(step_s)} of {_t(step_s)}: done"))
    return tuple(frames)


class _Running:
    """The events running at times asked in increasing order (started by then, not yet
    ended), in the events' order: one sweep over the events, sorted by start, for all of a
    step's frames."""

    def __init__(self, events: list[dict]):
        self.events, self.next, self.running = events, 0, []

    def at(self, t: float) -> list[dict]:
        events, i = self.events, self.next
        while i < len(events) and events[i]["start_s"] - 1e-15 <= t:
            self.running.append(events[i])
            i += 1
        self.next = i
        self.running = [e for e in self.running if t < e["start_s"] + e["dur_s"]]
        return self.running


def _caption(t: float, began, running: list[dict], world: int,
             alike: dict[int, tuple[int, ...]]) -> str:
    """What began at ``t``, what is in flight then by kind of group, and who waits."""
    parts = []
    for kind, stage, mb, ranks in began[:3]:
        parts.append(f"stage {stage} ({_ranks(ranks)}) starts the {PASS_WORDS[kind]} of "
                     f"micro-batch {mb}")
    if len(began) > 3:
        parts.append(f"{len(began) - 3} more passes start")
    text = f"t = {_t(t)}: " + "; ".join(parts) + "."
    flying: dict[str, set[int]] = {}
    busy: set[int] = set()
    for e in running:
        ranks = alike[e["rank"]]
        busy.update(ranks)
        if e["lane"] != "compute":
            word = f"{GROUP_WORDS.get(e.get('group', ''), e['lane'].upper())} " \
                   f"{OP_WORDS.get(e['kind'], e['kind'])}"
            flying.setdefault(word, set()).update(ranks)
    if flying:
        text += " In flight: " + ", ".join(f"{w} ({_ranks(list(rs))})"
                                           for w, rs in list(flying.items())[:3]) + "."
    idle = [r for r in range(world) if r not in busy]
    if idle:
        text += f" Waiting (bubble): {_ranks(idle)}."
    return text


def _optimizer_caption(p, t: float) -> str:
    zero = (" ZeRO 1: each replica updates its 1/(dp·cp) slice of every bucket, then the "
            "slices are all-gathered." if p.zero else " Every replica updates all of its "
            "shard with the summed gradients.")
    return (f"t = {_t(t)}: the optimizer. One all-reduce over all {p.world} ranks sums each "
            f"rank's share of ‖g‖² (every element counted once: tp slices, one replica, every "
            f"stage), the gradients are clipped to norm {p.clip:g}, and AdamW steps.{zero}")
