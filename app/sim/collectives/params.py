"""The parameters of the collective scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from app.param_groups import NetworkGroup
from app.params import (
    DTYPE_TEXTS,
    Control,
    Dtype,
    Invalid,
    Rank,
    Seed,
    SizeBytes,
    World,
    multiples_near,
    suggest,
)
from app.sim.collectives.schedules import (
    SPLITTING_OPS,
    SUPPORTED,
    is_power_of_two,
    step_count,
)

MAX_CELLS = 2**20
"""Bound on the numbers a trace holds (frames × world × buffer length): about 1 M, which keeps
/api/collective under 5 MB (about 3.2 bytes of JSON a number) and under half a second; every
state the count slider reaches (up to 128 elements, 64 ranks) fits it."""

Op = Literal["all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"]
Algorithm = Literal["ring", "tree", "halving_doubling", "direct"]
Count = Annotated[int, Field(ge=1, le=65536, description="elements of the full logical tensor")]


class CollectiveParams(NetworkGroup):
    """The collective, its ranks and inputs, and the network group's cluster for its cost."""

    # the collective, with torch.distributed semantics
    op: Annotated[Op, Control("Collective", kind="choice", options={
        "all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter", "all_gather": "AllGather",
        "broadcast": "Broadcast", "reduce": "Reduce", "all_to_all": "All-to-All"})] = "all_reduce"
    # how the ranks exchange chunks
    algorithm: Annotated[Algorithm, Control(
        "Algorithm", kind="choice",
        options={"ring": "Ring", "tree": "Double binary tree",
                 "halving_doubling": "Halving-doubling", "direct": "Direct (pairwise)"},
        help="Tree and halving-doubling implement AllReduce; direct implements All-to-All; "
             "halving-doubling needs a power-of-two number of ranks.")] = "ring"
    # ranks taking part
    world: Annotated[World, Control("Ranks", help="GPUs in the group (world size).")] = 4
    # elements of the full logical tensor; the slider stops at 128, where every op and algorithm
    # fits MAX_CELLS up to 64 ranks, and moves in steps of world for the splitting ops
    count: Annotated[Count, Control(
        "Elements", bounds=(1, 128),
        help="Elements in the full tensor. ReduceScatter, AllGather and All-to-All cut it into "
             "one chunk per rank, so it moves in steps of the rank count.")] = 8
    # seed of the integer inputs
    seed: Annotated[Seed, Control(
        "Seed", help="Inputs are integers 1–9 drawn from this seed, so every sum is exact.",
        kind="number")] = 0
    # broadcast's source / reduce's destination
    root: Annotated[Rank, Control("Root rank")] = 0  # the slider stops at world - 1
    # element type, for bytes and time
    dtype: Annotated[Dtype, Control("Element type", kind="choice", widget="select", options=DTYPE_TEXTS)] = "fp32"
    # message size for the cost panel
    cost_bytes: Annotated[SizeBytes, Control("Message size for the cost panel", kind="choice", widget="select")] = 64 * 2**20

    @model_validator(mode="after")
    def _consistent(self) -> CollectiveParams:
        if self.op not in SUPPORTED[self.algorithm]:
            able = ", ".join(a for a, ops in SUPPORTED.items() if self.op in ops)
            raise Invalid("algorithm", f"algorithm {self.algorithm} does not implement "
                                       f"{self.op}; {self.op} supports: {able}")
        if self.algorithm == "halving_doubling" and not is_power_of_two(self.world):
            below = 1 << (self.world.bit_length() - 1)
            raise Invalid("world", f"halving_doubling needs a power-of-two world; world "
                                   f"({self.world}) is not"
                                   f"{suggest(self, 'world', [below, below * 2, below // 2])}")
        if self.op in SPLITTING_OPS and self.count % self.world:
            raise Invalid("count", f"count ({self.count}) must be divisible by world "
                                   f"({self.world}) for {self.op}"
                                   f"{suggest(self, 'count', multiples_near(self.count, self.world, 65536))}")
        if self.root >= self.world:
            raise Invalid("root", f"root ({self.root}) must be a rank from 0 to {self.world - 1}")
        steps = step_count(self.op, self.algorithm, self.world, self.count)
        width = 2 if self.op == "all_to_all" else 1
        cells = (steps + 1) * self.world * self.count * width
        if cells > MAX_CELLS:
            most = MAX_CELLS // ((steps + 1) * self.world * width)
            if self.op in SPLITTING_OPS:
                most = most // self.world * self.world
            raise Invalid("count", f"count ({self.count}) is too large for {self.op} on "
                                   f"{self.world} ranks: the trace would hold {cells:,} numbers "
                                   f"(at most {MAX_CELLS:,}) — use count ≤ {most}")
        return self
