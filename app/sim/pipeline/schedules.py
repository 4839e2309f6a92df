"""Pipeline schedules as data: which rank runs which pass, in which order (DESIGN principle 4).

An :class:`Action` is one pass of one micro-batch through one stage, written as
torch.distributed.pipelining writes it: ``"2F0"`` is stage 2's forward of micro-batch 0. Kinds:

    F  forward                           B  full backward (inputs and weights)
    I  backward for the inputs only      W  backward for the weights only (needs I first)

A :class:`Schedule` maps each rank to its list of actions; the passes in
:mod:`app.sim.pipeline.passes` add communication, validate and time it, each separately. Stages
are numbered globally as in torch.distributed.pipelining: looped schedules put stage s on rank
s mod p (interleaved rank r holds r, r + p, r + 2p, …); V-shaped schedules put stages r and
2p − 1 − r on rank r. Internally an action is also an integer id, (stage · 4 + kind) · m +
micro-batch, so that schedules of 10⁵ actions are built and timed with numpy.

The orders themselves are built in :mod:`app.sim.pipeline.orders`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

from app.sim.trace import readonly

KINDS = ("F", "B", "I", "W")
KIND_CODE = {k: c for c, k in enumerate(KINDS)}
F, B, I, W = range(4)
KIND_NAMES = {"F": "forward", "B": "backward", "I": "backward for inputs",
              "W": "backward for weights"}


class Action(NamedTuple):
    """One pass of one micro-batch through one stage: ``Action(2, "F", 0)`` is ``"2F0"``."""

    stage: int
    kind: str
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"


_ACTION = re.compile(r"(\d+)([FBIW])(\d+)")


def parse_action(text: str) -> Action:
    """``"2F0"`` → ``Action(2, "F", 0)``; the inverse of ``str(action)``."""
    match = _ACTION.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an action: {text!r} (expected stage, F|B|I|W, micro-batch: '2F0')")
    return Action(int(match[1]), match[2], int(match[3]))


def format_order(order: Sequence[Action | None]) -> str:
    """A rank's order as torch prints it, idle slots as ``_``: ``"0F0 0F1 _ 0B0"``."""
    return " ".join("_" if a is None else str(a) for a in order)


def parse_order(text: str) -> list[Action | None]:
    return [None if word == "_" else parse_action(word) for word in text.split()]


def action_id(stage: int, kind: int, microbatch, m: int):
    """(stage · 4 + kind) · m + micro-batch (works on numpy arrays too)."""
    return (stage * 4 + kind) * m + microbatch


def decode(action: int, m: int) -> Action:
    stage_kind, microbatch = divmod(int(action), m)
    stage, kind = divmod(stage_kind, 4)
    return Action(stage, KINDS[kind], microbatch)


# --- which stage lives where -----------------------------------------------------------------

def stage_to_rank(stage: int, ranks: int, style: str) -> int:
    """Rank holding global ``stage``: ``loop`` → stage mod p; ``v`` → down, then back up."""
    if style == "loop":
        return stage % ranks
    lap, offset = divmod(stage, ranks)
    return offset if lap % 2 == 0 else ranks - 1 - offset


@dataclass(frozen=True, eq=False)
class Schedule:
    """rank → its actions in execution order, plus what the passes need to know."""

    name: str
    ranks: int
    microbatches: int
    chunks: int
    """model chunks (stages) per rank"""
    style: str
    """``loop`` or ``v`` (stage placement)"""
    ids: tuple[np.ndarray, ...]
    """per rank, the action ids in execution order"""
    overlapped: frozenset[tuple[int, int]] = field(default=frozenset())
    """(rank, index) where actions index and index + 1 form an overlapped F&B pair"""

    @classmethod
    def from_orders(cls, name: str, ranks: int, microbatches: int, chunks: int, style: str,
                    orders: Sequence[Sequence[Action | None]]) -> Schedule:
        """A schedule from lists of actions (idle slots, ``None``, are dropped)."""
        ids = tuple(readonly(np.array([action_id(a.stage, KIND_CODE[a.kind], a.microbatch,
                                                 microbatches)
                                       for a in order if a is not None], dtype=np.int64))
                    for order in orders)
        return cls(name, ranks, microbatches, chunks, style, ids)

    @property
    def stages(self) -> int:
        return self.ranks * self.chunks

    @cached_property
    def orders(self) -> tuple[tuple[Action, ...], ...]:
        return tuple(tuple(decode(a, self.microbatches) for a in rank_ids.tolist())
                     for rank_ids in self.ids)

    def rank_of(self, stage: int) -> int:
        return stage_to_rank(stage, self.ranks, self.style)

    @cached_property
    def rank_of_stage(self) -> np.ndarray:
        return readonly(np.array([self.rank_of(s) for s in range(self.stages)]))
