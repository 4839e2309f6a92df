"""The planner scene (chapter 11): its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.planner.page import export_view, form_view, page_view
from app.sim.planner.params import PlannerParams
from app.sim.planner.simulate import simulate

SCENE = Scene(
    slug="planner",
    title="Choosing the best mix for a cluster",
    chapter=11,
    summary="Every mix of tp, pp, dp, cp, ep, ZeRO, micro-batch and recompute for a model on a "
            "cluster: memory from chapter 1's ledger, step time from the chapters' costs, the "
            "Pareto front, the best mix's time budget, checked against Llama 3 and PTD-P.",
    params=PlannerParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    key_slider="gpus",
    boxed=True,
)
