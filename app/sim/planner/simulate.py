"""``simulate(params) → PlannerTrace``: the search, the frames, and the accuracy ledger's
summary (:mod:`app.sim.planner.ledger`, computed once a process)."""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.planner.ledger import ledger
from app.sim.planner.params import PlannerParams
from app.sim.planner.search import Plan, search
from app.sim.trace import Frame


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
                "ledger": ledger_summary(),
                "frames": [{"step": f.step, "caption": f.caption} for f in self.frames]}


def ledger_summary() -> dict:
    """How far the planner is from the published runs, and where the rows are."""
    led = ledger()
    return {"rows": len(led.rows), "mean_abs_error": led.mean_abs_error,
            "max_abs_error": led.max_abs_error, "url": "/api/planner/ledger",
            "page": "/planner/accuracy"}


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
