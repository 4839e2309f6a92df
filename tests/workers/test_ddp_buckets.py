"""DDP's rebuilt buckets for every preset, simulated (app.sim.data_parallel.buckets) against
torch: the order gradients become ready is measured in a real backward of a model laid out like
the preset (workers/ddp_order.py: nanoGPT / torchtitan modules at small widths, hooks from
``register_post_accumulate_grad_hook``), and the real-sized tensors in that order are cut by
torch's own ``dist._compute_bucket_assignment_by_size`` with the limits DDP's reducer uses
(``_DEFAULT_FIRST_BUCKET_BYTES`` then the cap when ``bucket_cap_mb`` is left unset; the cap
for every bucket when it is given). Issue 12 item 11: a LayerNorm's weight gradient arrives
before its bias; the simulation had assumed exact reverse parameter order."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from app.sim.data_parallel import buckets as ddp_buckets  # noqa: E402
from app.catalog.models import PRESETS  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workers"))
from ddp_order import bucket_assignment, ready_names  # noqa: E402

SIZES_MB = (None, 0.001, 0.01, 0.25, 1.0, 4.0, 25.0, 256.0)
"""None: plain DDP() (bucket_cap_mb unset)."""


def test_torch_defaults_are_the_simulations():
    assert dist._DEFAULT_FIRST_BUCKET_BYTES == ddp_buckets.FIRST_BUCKET_BYTES == 2 ** 20
    from torch.nn.parallel import distributed
    assert distributed._DEFAULT_BUCKET_CAP_MB == ddp_buckets.DEFAULT_CAP_MB


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_ready_order_is_torchs(preset):
    shape = PRESETS[preset]
    names = [n for n, _ in shape.parameters()]
    assert list(ready_names(shape)) == [names[i] for i in ddp_buckets.ready_order(names)]


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("element_bytes", (4, 2))
def test_bucket_contents_are_torchs(preset, element_bytes):
    shape = PRESETS[preset]
    names = tuple(n for n, _ in shape.parameters())
    sizes = tuple(n for _, n in shape.parameters())
    for mb in SIZES_MB:
        cap = ddp_buckets.cap_bytes(ddp_buckets.DEFAULT_CAP_MB if mb is None else mb)
        limits = [dist._DEFAULT_FIRST_BUCKET_BYTES, cap] if mb is None else [cap]
        want = bucket_assignment(shape, element_bytes, limits)
        got = [list(b.tensors) for b in ddp_buckets.buckets(sizes, element_bytes, mb,
                                                             names=names)]
        assert got == want, (mb, sum(g != w for g, w in zip(got, want)))
