"""The optimizer scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.optimizer.check import CHECK
from app.scenes.optimizer.page import export_view, form_view, page_view
from app.sim.optimizer.params import OptimizerParams
from app.sim.optimizer.simulate import simulate

SCENE = Scene(
    slug="optimizer",
    title="Optimizers",
    chapter=3,
    summary="SGD, momentum, Adam and AdamW stepping a small parameter vector with the real "
            "numbers — m, v, bias correction, decoupled weight decay, the fp32 master copy — "
            "the bytes each keeps per parameter, and why ZeRO shards Adam's state first.",
    params=OptimizerParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="steps",
    preview="frame=12",
    boxed=True,
)
