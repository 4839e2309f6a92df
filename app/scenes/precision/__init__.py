"""The precision scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.precision.check import CHECK
from app.scenes.precision.page import export_view, form_view, page_view
from app.sim.precision.params import PrecisionParams
from app.sim.precision.simulate import simulate

SCENE = Scene(
    slug="precision",
    title="Mixed precision",
    chapter=8,
    summary="FP32, TF32, FP16, BF16 and FP8 bit by bit: what a number rounds to, which "
            "gradients underflow, dynamic loss scaling step by step (skip and halve on "
            "overflow), and FP8's per-tensor scales.",
    params=PrecisionParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="grad_center",
    preview="frame=9",
    boxed=True,
)
