"""The memory scene: its declaration, read by the generic routers."""

from __future__ import annotations

from app.scene import Scene
from app.scenes.memory.check import CHECK
from app.scenes.memory.page import export_view, form_view, page_view
from app.sim.memory.params import MemoryParams
from app.sim.memory.simulate import simulate

SCENE = Scene(
    slug="memory",
    title="The training memory ledger",
    chapter=1,
    summary="Where a GPU's memory goes in training — parameters, gradients, optimizer states, "
            "activations, buffers — with every formula (ZeRO, Korthikanti), whether it fits, "
            "what to change, and a measurement of a real model beside the prediction.",
    params=MemoryParams,
    simulate=simulate,
    view=page_view,
    form=form_view,
    export=export_view,
    verify=CHECK,
    key_slider="micro_batch",
    preview="frame=4",
    boxed=True,
)
