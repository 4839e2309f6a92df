"""The collective scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.collective.check import CHECK
from app.scenes.collective.page import export_view, form_view, page_view
from app.sim.collectives.params import CollectiveParams
from app.sim.collectives.simulate import simulate

SCENE = Scene(
    slug="collective",
    title="Collective communication",
    chapter=2,
    summary="AllReduce, ReduceScatter, AllGather, Broadcast, Reduce and All-to-All, chunk by "
            "chunk with real numbers; ring, double binary tree and halving-doubling; the α–β "
            "cost model and nccl-tests' bus bandwidth.",
    params=CollectiveParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="world",
    preview="world=6&count=12&frame=4",
    boxed=True,
)
