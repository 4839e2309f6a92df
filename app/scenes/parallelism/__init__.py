"""The parallelism scene (chapters 1 and 11): its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.parallelism.check import CHECK
from app.scenes.parallelism.page import export_view, form_view, page_view
from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.simulate import simulate

SCENE = Scene(
    slug="parallelism",
    title="The five parallelisms and the 5D rank layout",
    chapter=1,
    also_in=(11,),
    summary="What DP, TP, PP, CP and EP each split and send on one model; the world laid out "
            "as arange(world).reshape(…) over tp-cp-ep-dp-pp, its groups on the nodes, their "
            "traffic on NVLink or InfiniBand, the torchrun set-up, and a first DDP script.",
    params=ParallelismParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="dp",
    preview="frame=4",
    boxed=True,
)
