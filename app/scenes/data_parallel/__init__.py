"""The data parallel scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.data_parallel.check import CHECK
from app.scenes.data_parallel.page import export_view, form_view, page_view
from app.sim.data_parallel.params import DataParallelParams
from app.sim.data_parallel.simulate import simulate

SCENE = Scene(
    slug="data-parallel",
    title="Data parallelism: DP, DDP and FSDP",
    chapter=4,
    summary="Three generations on one model: DataParallel's GPU 0 bottleneck, DDP's bucketed "
            "all-reduce hiding behind backward, FSDP's per-layer gathers with prefetch; the "
            "first DDP script and what torchrun's RANK, LOCAL_RANK and WORLD_SIZE mean.",
    params=DataParallelParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="bucket_mb",
    preview="frame=8",
    boxed=True,
)
