"""The context-parallel scene (chapter 9): its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.context_parallel.check import CHECK
from app.scenes.context_parallel.page import export_view, form_view, page_view
from app.sim.context_parallel.params import ContextParallelParams
from app.sim.context_parallel.simulate import simulate

SCENE = Scene(
    slug="context-parallel",
    title="Long context: context parallelism",
    chapter=9,
    summary="Attention's s² wall on a real model and GPU; Ring Attention step by step with the "
            "online softmax's real numbers, zigzag against contiguous chunks, all-gather KV, "
            "DeepSpeed-Ulysses and the hybrid — the same result, different traffic; what each "
            "costs on NVLink and InfiniBand, and when the ring hides its transfers.",
    params=ContextParallelParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="cp",
    preview="frame=2",
    boxed=True,
)
