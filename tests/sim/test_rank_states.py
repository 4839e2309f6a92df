"""Per-GPU model states tensor by tensor (app/sim/memory/rank_states.py) against independent counts."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from app.sim.memory.ledger import MemoryConfig, ledger
from app.catalog.models import PRESETS
from app.sim.memory.rank_states import local_shapes, rank_states


def replicated(model) -> int:
    return sum(t.numel * (model.layers if t.place == "layer" else 1)
               for t in model.tensors() if t.tp_dim is None)


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("precision, pb", [("mixed", 2), ("fp32", 4)])
def test_one_gpu_holds_every_parameter(preset, precision, pb):
    m = PRESETS[preset]
    states = rank_states(MemoryConfig(m, precision=precision))
    assert states.param_count == m.param_count()
    assert states.params == pb * m.param_count()
    assert states.params == ledger(MemoryConfig(m, precision=precision)).bytes("params")


PADDED = {"gpt2": replace(PRESETS["gpt2"], vocab=50304),          # nanoGPT's padded vocabulary
          "gpt3-175b": replace(PRESETS["gpt3-175b"], vocab=51200)}   # Megatron's, 128 · t


@pytest.mark.parametrize("model, tp", [(PADDED["gpt3-175b"], 8), (PRESETS["llama3-70b"], 8),
                                       (PADDED["gpt2"], 4), (PRESETS["llama3-8b"], 2)])
def test_tensor_parallel_ranks_share_all_but_the_replicated(model, tp):
    """t ranks hold Ψ + (t − 1)·(norms and row-parallel biases): the even split's error."""
    m = model
    local = rank_states(MemoryConfig(m, tp=tp)).param_count
    assert tp * local == m.param_count() + (tp - 1) * replicated(m)


@pytest.mark.parametrize("preset, pp", [("gpt2", 2), ("gpt3-175b", 8), ("llama3-405b", 9)])
def test_first_stage_holds_the_embedding(preset, pp):
    m = PRESETS[preset]
    first = rank_states(MemoryConfig(m, pp=pp), "first").param_count
    embedding = sum(t.numel for t in m.tensors() if t.place == "first")
    assert first == embedding + m.layers // pp * m.layer_params()


@pytest.mark.parametrize("zero, dp", [(1, 4), (2, 3), (3, 64)])
def test_zero_shards_dimension_zero(zero, dp):
    c = MemoryConfig(PRESETS["gpt2"], dp=dp, zero=zero, optimizer="adam")
    shapes = local_shapes(c, "only")
    whole = sum(math.prod(s) for s in shapes)
    shard = sum(math.ceil(s[0] / dp) * math.prod(s[1:]) for s in shapes)
    states = rank_states(c)
    assert states.params == 2 * (shard if zero >= 3 else whole)
    assert states.grads == 2 * (shard if zero >= 2 else whole)
    assert states.optimizer == 12 * shard
    assert states.step_counters == 4 * len(shapes)


def test_an_undivided_vocabulary_is_padded():
    m = PRESETS["gpt2"]   # 50257 rows over 8 ranks: 6283 each (Megatron pads to 50304)
    local = rank_states(MemoryConfig(m, tp=8)).param_count
    assert 8 * local == m.param_count() + 7 * replicated(m) + (8 * 6283 - 50257) * m.hidden
