"""ZeRO-3 gathers a layer's parameters before it runs and prefetches the next layer's while it
does (PyTorch FSDP's forward and backward prefetch, Zhao et al. 2023 §3.3; DeepSpeed stage 3's
``prefetch_bucket_size``), so two gathered layers are alive at once, and in backward one
layer's unsharded gradient waits for its reduce-scatter. Φ is one transformer layer's
parameters on this GPU (÷ tp for the split tensors), or the largest single tensor (the
embedding) where that is larger: the buffer is 2·Φ of 16-bit parameters + Φ of gradients.
Φ is counted here from the architecture's formulas, not from the code's tensor list."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.memory.ledger import MemoryConfig, ledger
from app.catalog.models import resolve
from app.sim.planner.cost import Cluster
from app.sim.planner.hardware import GPU_SPECS
from app.sim.planner.model import from_shape
from app.sim.planner.search import RECOMPUTES, evaluate


def layer_on_gpu(preset: str, tp: int) -> float:
    """One layer's parameters on one TP rank: GPT 12h² + 13h (biases and LayerNorms split as
    Megatron splits them is a detail: the replicated vectors count whole), Llama
    2h² + 2h·kv + 3hf + 2h; or the vocab × h embedding ÷ tp if larger."""
    m = resolve(preset)
    h, f, kv = m.hidden, m.ffn, m.hidden * m.kv_heads // m.heads
    if m.family == "gpt":
        split = h * (h + 2 * kv) + (h + 2 * kv) + h * h + 2 * h * f + f   # QKV, proj, fc, proj
        whole = h + h + 2 * 2 * h                                         # two biases, two LNs
    else:
        split = h * (h + 2 * kv) + h * h + 3 * h * f
        whole = 2 * h
    return max(split / tp + whole, m.vocab * h / tp)


CASES = [("gpt3-175b", 1, 8, "mixed"), ("gpt3-175b", 4, 8, "mixed"), ("llama3-8b", 1, 16, "mixed"),
         ("llama3-70b", 8, 4, "fp32"), ("gpt2", 1, 4, "mixed")]


@pytest.mark.parametrize("preset,tp,dp,precision", CASES)
def test_ledger_holds_two_gathered_layers(preset, tp, dp, precision):
    shape = resolve(preset)
    c = MemoryConfig(shape, dp=dp, tp=tp, zero=3, precision=precision,
                     sequence_parallel=tp > 1)
    item = next(i for i in ledger(c).items if i.key == "buffers.zero3")
    e = 2 if precision == "mixed" else 4
    phi = layer_on_gpu(preset, tp)
    assert item.bytes == pytest.approx(2 * e * phi + e * phi, rel=1e-9)


@pytest.mark.parametrize("preset,tp,dp,precision", [c for c in CASES if c[3] == "mixed"])
def test_planner_holds_two_gathered_layers(preset, tp, dp, precision):
    model = from_shape(resolve(preset))
    g = {k: np.array([x, x]) for k, x in zip(("tp", "cp", "ep", "pp", "v", "dp", "b", "m", "rc"),
                                             (tp, 1, 1, 1, 1, dp, 1, 8, RECOMPUTES.index("full")))}
    g["zero"] = np.array([1, 3])
    r = evaluate(model, Cluster(GPU_SPECS["h100-80"], tp * dp), 8 * dp, g)
    phi = layer_on_gpu(preset, tp)
    assert r["buffers"][1] - r["buffers"][0] == pytest.approx(3 * 2 * phi, rel=1e-9)
