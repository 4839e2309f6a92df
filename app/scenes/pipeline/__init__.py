"""The pipeline scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.pipeline.check import CHECK
from app.scenes.pipeline.page import export_view, form_view, page_view
from app.sim.pipeline.params import PipelineParams
from app.sim.pipeline.simulate import simulate

SCENE = Scene(
    slug="pipeline",
    title="Pipeline parallelism",
    chapter=7,
    summary="GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-V and DualPipeV as data: every pass "
            "timed on every rank, the bubble, activation memory and the sends between stages, "
            "checked against torch.distributed.pipelining.",
    params=PipelineParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="microbatches",
    preview="frame=12",
    boxed=True,
)
