"""The mixture-of-experts scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.moe.check import CHECK
from app.scenes.moe.page import export_view, form_view, page_view
from app.sim.moe.params import MoeParams
from app.sim.moe.simulate import simulate

SCENE = Scene(
    slug="moe",
    title="Mixture of experts",
    chapter=10,
    summary="One MoE layer token by token: router softmax and top-k, capacity and dropped "
            "tokens, the load-balancing and z losses against DeepSeek-V3's bias, the "
            "expert-parallel dispatch and combine All-to-All with real vectors, and EP × DP × "
            "TP × PP for Mixtral, DeepSeek-V3 and Qwen-MoE.",
    params=MoeParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="skew",
    preview="frame=3",
    boxed=True,
)
