"""The parameters of the pipeline scene: every field's type, range, default and help, defined once
(DESIGN principle 13) — the page's controls, the 422 messages, OpenAPI and the CLI read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from app.params import Chunks, Invalid, Microbatches, Pp, SceneParams
from app.sim.pipeline.orders import SCHEDULE_KINDS, infeasible

MAX_PASSES = 65536
"""Bound on stages × chunks × micro-batches (each a forward and one or two backward passes):
64 ranks × 1024 micro-batches of 1F1B, about 0.1 s to simulate and serialise."""

ScheduleName = Literal["gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "zbv", "dualpipev"]
PassTime = Annotated[float, Field(gt=0, le=1000, description="time of a pass, > 0")]
OptionalTime = Annotated[float, Field(ge=0, le=1000, description="a time, ≥ 0")]


class PipelineParams(SceneParams):
    schedule: ScheduleName = "1f1b"   # the order of forward and backward passes
    stages: Pp = 4                    # p: pipeline ranks (interleaved and V schedules: v stages each)
    microbatches: Microbatches = 8    # m: micro-batches per training step
    chunks: Chunks = 1                # v: model chunks per rank (interleaved 2–8; zbv, dualpipev 2; else 1)
    t_f: PassTime = 1.0               # forward of one micro-batch through one rank's layers
    t_b: PassTime = 1.0               # backward for the inputs (a full backward B is t_b + t_w)
    t_w: OptionalTime = 1.0           # backward for the weights
    t_comm: OptionalTime = 0.0        # one send between ranks (0: free, as in the papers)

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
