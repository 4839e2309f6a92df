"""The checkpointing scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.checkpointing.check import CHECK
from app.scenes.checkpointing.page import export_view, form_view, page_view
from app.sim.checkpointing.params import CheckpointParams
from app.sim.checkpointing.simulate import simulate

SCENE = Scene(
    slug="checkpointing",
    title="Activation checkpointing and gradient accumulation",
    chapter=8,
    summary="Activation memory through forward and backward with no, selective, full or "
            "every-k-layers recompute, what the recompute costs in FLOPs and time, and "
            "micro-batch × accumulation × dp = global batch.",
    params=CheckpointParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="micro_batch",
    preview="frame=20",
    boxed=True,
)
