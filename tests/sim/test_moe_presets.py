"""MoE presets against their published parameter counts, and the EP×DP×TP×PP split."""

from __future__ import annotations

import pytest

from app.sim.memory.model_states import per_gpu
from app.sim.moe.parallel import (MoeLayout, check_layout, expert_tp_choices, per_gpu_share,
                                  training_flops_per_token)
from app.sim.moe.presets import PRESETS


@pytest.mark.parametrize("name,total,active", [
    ("mixtral-8x7b", 46.7e9, 12.9e9),          # Mixtral of Experts (2024)
    ("deepseek-v3", 671e9, 37e9),              # DeepSeek-V3 technical report
    ("qwen1.5-moe-a2.7b", 14.3e9, 2.7e9),      # Qwen1.5-MoE-A2.7B model card
])
def test_published_counts_within_two_percent(name, total, active):
    m = PRESETS[name]
    assert m.total_params == pytest.approx(total, rel=0.02)
    assert m.active_params == pytest.approx(active, rel=0.02)


def test_mixtral_by_hand():
    m = PRESETS["mixtral-8x7b"]
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    layer = attention + 8 * 3 * 4096 * 14336 + 4096 * 8 + 2 * 4096
    assert m.total_params == 32 * layer + 4096 + 2 * 32000 * 4096


@pytest.mark.parametrize("name,layout", [
    ("deepseek-v3", MoeLayout(tp=1, pp=16, dp=128, ep=64, etp=1)),   # DeepSeek-V3's training
    ("mixtral-8x7b", MoeLayout(tp=2, pp=4, dp=4, ep=8, etp=1)),
    ("qwen1.5-moe-a2.7b", MoeLayout(tp=2, pp=3, dp=6, ep=4, etp=3)),
])
def test_every_parameter_is_held_once_per_replica(name, layout):
    m = PRESETS[name]
    s = per_gpu_share(m, layout, zero=1)
    assert s.dense_params * layout.tp * layout.pp == pytest.approx(m.dense_total)
    assert s.expert_params * layout.ep * layout.etp * layout.pp == pytest.approx(
        m.routed_expert_total)
    assert layout.ep * layout.etp * layout.edp * layout.pp == layout.world
    # optimizer states: dense sharded over dp, experts over edp (ZeRO-1)
    assert s.experts.optimizer == pytest.approx(
        12 * m.routed_expert_total / (layout.ep * layout.etp * layout.pp * layout.edp))
    assert s.dense.total == per_gpu(m.dense_total, dp=layout.dp, tp=layout.tp, pp=layout.pp,
                                    zero=1).total


def test_expert_tp_against_whole_experts():
    m = PRESETS["mixtral-8x7b"]
    choices = expert_tp_choices(m, tp=8, pp=1, dp=8, ep=8)
    assert choices["whole_experts"].expert_params == 8 * choices["expert_tp"].expert_params
    assert choices["whole_experts"].dense_params == choices["expert_tp"].dense_params


@pytest.mark.parametrize("layout,message", [
    (MoeLayout(tp=1, pp=1, dp=8, ep=3, etp=1), "ep (3) must divide experts (8)"),
    (MoeLayout(tp=1, pp=1, dp=4, ep=8, etp=1), "ep × etp (8 × 1) must divide tp × dp (1 × 4)"),
    (MoeLayout(tp=1, pp=64, dp=8, ep=8, etp=1), "pp (64) must be at most layers (32)"),
])
def test_bad_layouts(layout, message):
    assert check_layout(PRESETS["mixtral-8x7b"], layout) == message
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        per_gpu_share(PRESETS["mixtral-8x7b"], layout)


def test_flops_per_token_active_against_total():
    m = PRESETS["deepseek-v3"]
    f = training_flops_per_token(m)
    assert f.active == pytest.approx(6 * (37e9 - 7168 * 129280), rel=0.02)
    lookup = 7168 * 129280
    assert f.ratio == pytest.approx((671e9 - lookup) / (37e9 - lookup), rel=0.02)
