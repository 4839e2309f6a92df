"""The at-scale panels against published numbers (Korthikanti et al. 2022 Table 2; Narayanan et
al. 2021), against the simulated blocks' own collectives, and against the collectives chapter's
α–β model."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.sim.memory import activations
from app.sim.collectives.cost import Links, collective_time_us, curves
from app.catalog.models import PRESETS
from app.sim.tensor_parallel.simulate import simulate
from app.sim.flops import layer_forward_flops as forward_flops
from app.sim.tensor_parallel.scale import SP_LAYER, TP_LAYER, layer_shape, scale

MIB = 2**20
GPT3 = PRESETS["gpt3-175b"]


def gpt3(tp=8, sp=False, **kw):
    args = dict(seq=2048, micro_batch=1, tp=tp, sequence_parallel=sp, alpha_us=5.0,
                intra_node_gbs=300.0, inter_node_gbs=50.0, gpus_per_node=8, gpu_tflops=160.0)
    args.update(kw)
    return scale(GPT3, **args)


@pytest.mark.parametrize("tp,no_par,tp_mib,sp_mib", [(8, 2736, 552, 342), (1, 2736, 2736, 2736)])
def test_korthikanti_table2_gpt3(tp, no_par, tp_mib, sp_mib):
    """GPT-3 175B, s 2048, b 1: 2736 MiB per layer without parallelism; with t = 8, 552 MiB
    under TP and 342 MiB under TP + SP (Korthikanti et al. 2022, §4 and Table 2)."""
    s = gpt3(tp)
    assert s.no_parallelism_bytes / MIB == pytest.approx(no_par)
    assert s.tp_only.activation_bytes / MIB == pytest.approx(tp_mib)
    assert s.tp_sp.activation_bytes / MIB == pytest.approx(sp_mib)


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("tp", [1, 2, 8])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_breakdown_adds_up_to_per_layer_bytes(name, tp, sp, recompute):
    shape = layer_shape(PRESETS[name], 4096, 2)
    parts = activations.breakdown(shape, tp, sp, recompute)
    assert sum(b for _, b in parts) == pytest.approx(
        activations.per_layer_bytes(shape, tp, sp, recompute))
    for term, held in parts:
        assert held <= term.bytes


@pytest.mark.parametrize("sp", [False, True])
def test_layer_collectives_are_the_simulated_blocks(sp):
    """The per-layer list is exactly what the attention block and then the MLP block call in
    forward, and the MLP then attention in backward (the LayerNorm gradients' all-reduce happens
    once per step, not per micro-batch, so it is left out)."""
    def calls(block):
        p = SimpleNamespace(block=block, tp=2, sequence_parallel=sp, tokens=4, hidden=8,
                            ffn=16, heads=4, vocab=16, seed=0, preset="gpt2", seq=1024,
                            micro_batch=1, alpha_us=5.0, intra_node_gbs=300.0,
                            inter_node_gbs=50.0, gpus_per_node=8, gpu_tflops=100.0)
        return [(c.op, c.pass_) for c in simulate(p).comm if "LayerNorm" not in c.purpose]
    attention, mlp = calls("attention"), calls("mlp")
    forward = [c for c in attention + mlp if c[1] == "forward"]
    backward = [c for c in mlp + attention if c[1] == "backward"]
    assert [(op, pass_) for op, pass_, _ in (SP_LAYER if sp else TP_LAYER)] == forward + backward


@pytest.mark.parametrize("tp", [2, 4, 8, 16])
def test_sequence_parallel_forward_costs_what_tp_does(tp):
    """Ring all-reduce = reduce-scatter + all-gather: TP + SP's forward sends the same bytes as
    TP's; its backward sends 1.5× (one extra all-gather per column-parallel layer)."""
    s = gpt3(tp)
    full = 2048 * 12288 * 2
    assert s.tp_only.total("sent_bytes", "forward") == pytest.approx(2 * 2 * (tp - 1) / tp * full)
    assert s.tp_sp.total("sent_bytes", "forward") == pytest.approx(
        s.tp_only.total("sent_bytes", "forward"))
    assert s.tp_sp.total("sent_bytes", "backward") == pytest.approx(
        1.5 * s.tp_only.total("sent_bytes", "backward"))


def test_forward_flops_gpt3():
    """24·s·b·h²(1 + s/(6h)) per layer: Narayanan et al. 2021's 72·B·s·L·h²(1 + s/(6h) + …)
    is forward + backward (3×) over L layers, without the logit layer."""
    s, h = 2048, 12288
    assert forward_flops(GPT3, s, 1) == pytest.approx(24 * s * h * h * (1 + s / (6 * h)))


def test_gated_attention_flops_count_gqa_and_swiglu():
    m = PRESETS["llama3-70b"]
    s, h, f = 8192, m.hidden, m.ffn
    kv = h * m.kv_heads // m.heads
    assert forward_flops(m, s, 1) == pytest.approx(
        2 * s * (h * (h + 2 * kv) + h * h + 3 * h * f) + 4 * s * s * h)


def test_compute_time_shrinks_as_one_over_t():
    assert gpt3(4).compute_us == pytest.approx(2 * gpt3(8).compute_us)
    # 3 × forward FLOPs / t at 160 TFLOP/s
    assert gpt3(8).compute_us == pytest.approx(3 * forward_flops(GPT3, 2048, 1) / 8 / 160e6)


def test_collective_time_is_the_collectives_chapters_ring():
    links = Links(5.0, 300.0, 50.0, 8)
    size = 2**26
    ring = next(c for c in curves("all_reduce", 8, links, (size,)) if c.algorithm == "ring")
    assert collective_time_us("all_reduce", 8, links, size) == pytest.approx(ring.times_us[0])
    assert collective_time_us("all_reduce", 1, links, size) == 0.0


def test_infiniband_is_slower_by_about_the_bandwidth_ratio():
    s = gpt3(8, alpha_us=0.0)
    ratio = s.tp_only.total("infiniband_us") / s.tp_only.total("nvlink_us")
    assert ratio == pytest.approx(300 / 50)


def test_one_rank_communicates_nothing():
    s = gpt3(1)
    assert s.tp_only.collectives == () and s.tp_sp.collectives == ()


def test_sweep_only_keeps_sizes_that_divide_the_heads():
    s = scale(PRESETS["gpt2"], 1024, 1, 4, False, 5.0, 300.0, 50.0, 8, 100.0)
    assert [row[0] for row in s.sweep] == [1, 2, 4]      # 12 heads
    placed_16 = [row for row in gpt3().sweep if row[0] == 16][0]
    # beyond one node of 8 the ring crosses InfiniBand: placed ≈ InfiniBand only
    assert placed_16[2] > 3 * placed_16[4]
