"""The tensor parallel scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.tensor_parallel.check import CHECK
from app.scenes.tensor_parallel.page import export_view, form_view, page_view
from app.sim.tensor_parallel.params import TensorParallelParams
from app.sim.tensor_parallel.simulate import simulate

SCENE = Scene(
    slug="tensor-parallel",
    title="Tensor and sequence parallelism",
    chapter=6,
    summary="Megatron-LM's column- and row-parallel layers, MLP, attention heads and "
            "vocab-parallel cross-entropy on real matrices, forward and backward, with every "
            "all-reduce, all-gather and reduce-scatter; sequence parallelism's memory saving "
            "(Korthikanti Table 2) and why TP stays inside an NVLink node.",
    params=TensorParallelParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="tp",
    preview="block=mlp&tp=2&frame=4",
    boxed=True,
)
