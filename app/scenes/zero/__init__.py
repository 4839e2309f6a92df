"""The zero scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.zero.check import CHECK
from app.scenes.zero.page import export_view, form_view, page_view
from app.sim.zero.params import ZeroParams
from app.sim.zero.simulate import simulate

SCENE = Scene(
    slug="zero",
    title="ZeRO: sharding optimizer states, gradients and parameters",
    chapter=5,
    summary="ZeRO-1/2/3 on a tiny model trained for real: who holds which shard through one "
            "step, memory per GPU (ZeRO Table 1), 2Ψ vs 3Ψ of communication, ZeRO-Offload and "
            "ZeRO-Infinity with the link that bounds the step.",
    params=ZeroParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="dp",
    preview="frame=5",
    boxed=True,
)
