"""The training framework scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.train.check import CHECK
from app.scenes.train.page import export_view, form_view, page_view
from app.sim.train.params import TrainParams
from app.sim.train.simulate import simulate

SCENE = Scene(
    slug="train",
    title="The training framework: five parallelisms in one run",
    chapter=11,
    summary="A tiny GPT trained for real with TP, CP, PP, DP/ZeRO-1 and EP composed: one step "
            "drawn rank by rank — every pass and every message —, its predicted split into "
            "compute, exposed communication and bubble, and a real run that must match one "
            "process to 1e-9.",
    params=TrainParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="microbatches",
    preview="frame=6",
    boxed=True,
)
