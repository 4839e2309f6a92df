"""``simulate(params) → PlannerTrace``: the search, the published comparison, the frames."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from app.sim.planner.params import PlannerParams
from app.sim.planner.published import RUNS, Run
from app.sim.planner.search import Candidate, Plan, search
from app.sim.trace import Frame


@dataclass(frozen=True)
class Comparison:
    run: Run
    predicted: Candidate | None
    best: Candidate | None

    @property
    def predicted_tflops(self) -> float | None:
        """As the source reports: Llama 3 model FLOPs (MFU × peak), PTD-P executed FLOPs."""
        p = self.predicted
        if p is None:
            return None
        return p.mfu * 989 if self.run.published_mfu is not None else p.tflops_per_gpu

    def to_dict(self) -> dict:
        p = self.predicted
        return {"name": self.run.name, "source": self.run.source, "mix": self.run.mix,
                "published_tflops": self.run.published_tflops,
                "published_mfu": self.run.published_mfu,
                "predicted_tflops": self.predicted_tflops,
                "predicted_mfu": p.mfu if p else None,
                "best_over_published": (self.best.tokens_per_s / p.tokens_per_s
                                        if p and self.best else None)}


@dataclass(frozen=True)
class PlannerTrace:
    params: PlannerParams
    plan: Plan
    frames: tuple[Frame, ...]

    def to_dict(self) -> dict:
        plan = self.plan
        return {"searched": plan.searched, "fitting": plan.fitting,
                "best": plan.best.to_dict() if plan.best else None,
                "candidates": [c.to_dict() for c in plan.candidates],
                "truncated": plan.truncated, "listed": len(plan.candidates),
                "message": plan.message,
                "rejected": [{"family": f, "reason": r} for f, r in plan.rejected],
                "published": [c.to_dict() for c in published()],
                "frames": [{"step": f.step, "caption": f.caption} for f in self.frames]}


def compare(run: Run) -> Comparison:
    p = PlannerParams(**run.query, **{k: v for k, v in run.mix.items() if k != "dp"})
    pinned = search(p.plan_model(), p.cluster(), p.global_batch, p.pins(), listed=1)
    free_params = PlannerParams(**run.query)
    free = search(free_params.plan_model(), free_params.cluster(), free_params.global_batch,
                  free_params.pins(), listed=1)
    return Comparison(run, pinned.best, free.best)


@cache
def published() -> tuple[Comparison, ...]:
    """The published runs against the planner (constants in, so computed once per process:
    every planner page shows them, and they are seven searches)."""
    return tuple(compare(r) for r in RUNS)


def simulate(p: PlannerParams) -> PlannerTrace:
    plan = search(p.plan_model(), p.cluster(), p.global_batch, p.pins())
    b = plan.best
    if b:
        top = max(b.budget, key=b.budget.get)
        frames = (
            Frame(0, f"{plan.searched:,} mixes of tp, pp, v, dp, cp, ep, ZeRO, micro-batch and "
                     f"recompute for {p.gpus:,} GPUs: each a point, peak memory against "
                     f"tokens/s; {plan.fitting:,} fit in {p.cluster().gpu.capacity / 2**30:.0f} GiB."),
            Frame(1, f"The Pareto front: no other mix is both leaner and faster. The best, tp "
                     f"{b.tp} pp {b.pp} dp {b.dp} cp {b.cp}, runs {b.tokens_per_s:,.0f} tokens/s "
                     f"at {b.mfu:.0%} MFU."),
            Frame(2, f"Where its {b.step_s:.2f} s step goes: {top} is the largest share "
                     f"({b.budget[top] / b.step_s:.0%}); bound: {b.bound}."),
        )
    else:
        frames = (Frame(0, plan.message),)
    return PlannerTrace(p, plan, frames)
