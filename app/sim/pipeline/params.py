"""The parameters of the pipeline scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from app.params import Chunks, Control, Invalid, Microbatches, Pp, SceneParams
from app.sim.pipeline.orders import SCHEDULE_KINDS, infeasible

MAX_PASSES = 65536
"""Bound on stages × chunks × micro-batches (each a forward and one or two backward passes):
64 ranks × 1024 micro-batches of 1F1B, about 0.1 s to simulate and serialise."""

ScheduleName = Literal["gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "zbv", "dualpipev"]
PassTime = Annotated[float, Field(gt=0, le=1000, description="time of a pass, > 0")]
OptionalTime = Annotated[float, Field(ge=0, le=1000, description="a time, ≥ 0")]


MICROBATCH_STOPS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 20, 24, 28, 32, 40,
                    48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640,
                    768, 896, 1024)
"""The micro-batches slider's stops: every count to 16, then four per doubling."""


class PipelineParams(SceneParams):
    # the order of forward and backward passes
    schedule: Annotated[ScheduleName, Control(
        "Schedule", kind="choice",
        help="GPipe and 1F1B run one stage per rank; interleaved 1F1B v stages per rank; ZB-V and "
             "DualPipeV two stages in a V. ZB-H1, ZB-V and DualPipeV split the backward into I "
             "(inputs) and W (weights).")] = "1f1b"
    # p: pipeline ranks (interleaved and V schedules: v stages each)
    stages: Annotated[Pp, Control(
        "Stages p", help="Pipeline ranks. Up to 32 the timeline is drawn pass by pass; beyond, as "
                         "strips of time.")] = 4
    # m: micro-batches per training step
    microbatches: Annotated[Microbatches, Control(
        "Micro-batches m", kind="values", values=MICROBATCH_STOPS,
        help="Micro-batches per step, 1 to 1024. More micro-batches shrink the bubble's "
             "share.")] = 8
    # v: model chunks per rank (interleaved 2–8; zbv, dualpipev 2; else 1)
    chunks: Annotated[Chunks, Control(
        "Chunks per rank v", bounds=(2, 8),
        help="Interleaving: rank r holds stages r, r + p, r + 2p, …; each chunk's pass takes 1/v "
             "of the time.")] = 1
    # forward of one micro-batch through one rank's layers
    t_f: Annotated[PassTime, Control(
        "Forward t_f", bounds=(0.1, 5), step=0.1,
        help="One micro-batch through all of a rank's layers.")] = 1.0
    # backward for the inputs (a full backward B is t_b + t_w)
    t_b: Annotated[PassTime, Control(
        "Backward for inputs t_b", bounds=(0.1, 5), step=0.1,
        help="The gradient the previous stage waits for.")] = 1.0
    # backward for the weights
    t_w: Annotated[OptionalTime, Control(
        "Backward for weights t_w", bounds=(0, 5), step=0.1,
        help="Nobody waits for it; a full backward B takes t_b + t_w.")] = 1.0
    # one send between ranks (0: free, as in the papers)
    t_comm: Annotated[OptionalTime, Control(
        "Send t_comm", bounds=(0, 2), step=0.05,
        help="One activation or gradient between two ranks. 0: free, as in the papers' "
             "formulas.")] = 0.0

    @model_validator(mode="before")
    @classmethod
    def _schedule_chunks(cls, data: Any) -> Any:
        """A missing chunks means the schedule's own: 2 for interleaved, zbv and dualpipev."""
        if isinstance(data, Mapping) and data.get("chunks") in (None, ""):
            kind = SCHEDULE_KINDS.get(data.get("schedule", "1f1b"))
            data = {**data, "chunks": (kind.chunks or 2) if kind else 1}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> PipelineParams:
        problem = infeasible(self.schedule, self.stages, self.microbatches, self.chunks)
        if problem is not None:
            raise Invalid(*problem)
        passes = self.stages * self.chunks * self.microbatches
        if passes > MAX_PASSES:
            most = MAX_PASSES // (self.stages * self.chunks)
            raise Invalid("microbatches", f"stages × chunks × microbatches ({self.stages} × "
                                          f"{self.chunks} × {self.microbatches} = {passes:,}) "
                                          f"must be at most {MAX_PASSES:,} — use microbatches ≤ "
                                          f"{most}")
        return self
