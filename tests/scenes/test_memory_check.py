"""The scaled-down copies the memory scene's real run trains (app/scenes/memory/check.py)."""

from __future__ import annotations

from itertools import product

import pytest

from app.scenes.memory.check import scaled_config
from app.sim.memory.ledger import MemoryConfig
from app.sim.memory.rank_states import local_shapes
from app.catalog.models import PRESETS


@pytest.mark.parametrize("preset, tp, dp, pp, sp", [
    (p, tp, dp, pp, sp) for p, tp, dp, pp, sp in product(
        sorted(PRESETS), (1, 2, 8), (1, 2, 64), (1, 2, 8), (False, True))
    if PRESETS[p].layers % pp == 0])
def test_scaled_copy_shards_without_padding(preset, tp, dp, pp, sp):
    """The CPU copy keeps the family and divides evenly, so measured bytes can match exactly."""
    c = scaled_config(MemoryConfig(PRESETS[preset], tp=tp, dp=dp, pp=pp, zero=3,
                                   sequence_parallel=sp))
    m = c.model
    assert m.family == PRESETS[preset].family
    assert (m.kv_heads < m.heads) == (PRESETS[preset].kv_heads < PRESETS[preset].heads)
    assert c.dp * c.tp <= 4 and c.pp <= 2 and m.layers == 2 * c.pp
    for name, value in (("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn", m.ffn),
                        ("vocab", m.vocab), ("seq", m.seq if sp else c.tp)):
        assert value % c.tp == 0, name
    for shape in local_shapes(c, "first" if c.pp > 1 else "only"):
        assert shape[0] % c.dp == 0, shape
