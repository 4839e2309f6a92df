"""What one layer of workers/memory_model.py keeps for backward, measured in-process with
saved-tensor hooks (workers/saved_tensors.py), against the per-layer bytes of the checkpointing
simulation (app.sim.memory.activations: Korthikanti et al. 2022, Table 2, with grouped-query
attention's K and V kv_heads/heads as large).

Every kv_heads that divides GPT-2's 12 heads and Llama 3 8B's 32, with every tensor-parallel
size that divides kv_heads (up to 4): issue 12 item 13 found 1, 2, 3 and 6 key/value heads at
t = 2 measuring Q twice (33,792 B per layer more), because a key/value head per rank made K a
view of the fused QKV output instead of a copy. The tensor-parallel ranks' shards are built on
a one-rank gloo group (a rank's shapes are those of a t-rank job; its sums over one rank are
identities), without sequence parallelism (the torchrun tests in test_checkpointing.py cover it).
The only bytes the formula leaves out are the norms' statistics, 4 bytes per token and norm
on a CPU (LayerNorm's bf16 mean and 1/σ; RMSNorm's fp32 1/rms): the difference must be those,
to the byte."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from app.sim.memory import activations  # noqa: E402
from app.catalog.models import resolve  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workers"))
from memory_layers import Groups  # noqa: E402
from memory_model import Stage  # noqa: E402
from saved_tensors import SavedTensors  # noqa: E402

SEQ, BATCH, HEAD_DIM = 16, 2, 8
NORM_STATS = 2 * 4 * SEQ * BATCH
"""Two norms per layer, 4 bytes per token each."""


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    if dist.is_initialized():
        yield dist.group.WORLD
        return
    store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def cases():
    for preset, heads in (("gpt2", 12), ("llama3-8b", 32)):
        for kv in range(1, heads + 1):
            if heads % kv:
                continue
            for tp in (1, 2, 3, 4):
                if kv % tp == 0:
                    yield preset, heads, kv, tp


def measured(shape, tp: int, recompute: str, group) -> int:
    torch.manual_seed(0)
    g = Groups(group, tp, 0, False)
    model = Stage(shape, g, 1, first=True, last=True, recompute=recompute).to(torch.bfloat16)
    ids = torch.randint(shape.vocab, (2, SEQ, BATCH))
    saved = SavedTensors(model)
    with saved.hooks():
        loss = model(ids[0], ids[1])
        (per_layer,) = saved.by_layer(1)
        loss.backward()
    saved.close()
    return per_layer


@pytest.mark.parametrize("preset,heads,kv,tp", list(cases()))
def test_layer_bytes_match_the_simulation(one_rank, preset, heads, kv, tp):
    shape = resolve(preset, layers=1, hidden=heads * HEAD_DIM, heads=heads, kv_heads=kv,
                    ffn=4 * heads * HEAD_DIM, vocab=64 * tp, seq=SEQ)
    layer = activations.LayerShape(SEQ, BATCH, shape.hidden, heads, kv, shape.ffn,
                                   shape.gated_mlp, dropout=shape.family == "gpt")
    for recompute in ("none", "selective"):
        want = activations.per_layer_bytes(layer, tp, False, recompute)
        got = measured(shape, tp, recompute, one_rank)
        assert got - want == NORM_STATS, (recompute, got, want)
