"""ZeRO against the paper: Table 1's bytes per device, §7's communication volumes, DeepSpeed's
offload rules; and the ownership grids against what each stage must hold."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from app.sim.zero import frames as zero_frames

from app.sim.zero import scale as zero_scale
from app.sim.collectives.cost import Links
from app.sim.zero.simulate import simulate
from app.sim.zero.frames import CURRENT, EMPTY, LOCAL, PAD, STALE

# REFERENCES.md, ZeRO Table 1 (GB per device, mixed-precision Adam, K = 12)
TABLE1 = [  # (Ψ, N_d, P_os, P_os+g, P_os+g+p)
    (7.5e9, 1, 120, 120, 120), (7.5e9, 4, 52.5, 41.3, 30), (7.5e9, 16, 35.6, 21.6, 7.5),
    (7.5e9, 64, 31.4, 16.6, 1.88), (7.5e9, 1024, 30.1, 15.1, 0.12),
    (128e9, 1, 2048, 2048, 2048), (128e9, 4, 896, 704, 512), (128e9, 16, 608, 368, 128),
    (128e9, 64, 536, 284, 32), (128e9, 1024, 513, 257, 2),
    (1e12, 4, 7000, 5500, 4000), (1e12, 16, 4750, 2875, 1000), (1e12, 64, 4187, 2218, 250),
    (1e12, 1024, 4011, 2013, 15.6),
]


@pytest.mark.parametrize("psi,dp,p_os,p_os_g,p_os_g_p", TABLE1)
def test_table1(psi, dp, p_os, p_os_g, p_os_g_p):
    for stage, published in ((1, p_os), (2, p_os_g), (3, p_os_g_p)):
        got = zero_scale.placement(int(psi), dp, stage, "none").gpu.total / 1e9
        # the paper prints three significant figures, rounded or truncated
        assert got == pytest.approx(published, rel=6e-3, abs=0.006), (stage, got)
    assert zero_scale.placement(int(psi), dp, 0, "none").gpu.total == 16 * psi


def test_padding_counts_in_the_sharded_states():
    psi, dp = 10, 4                                        # shards of 3: 2 elements of padding
    gpu = zero_scale.placement(psi, dp, 3, "none").gpu
    assert (gpu.params, gpu.grads, gpu.optimizer) == (2 * 3, 2 * 3, 12 * 3)
    assert zero_scale.placement(psi, dp, 1, "none").gpu.params == 2 * psi   # replicated: no pad


@pytest.mark.parametrize("dp", [1, 2, 4, 7, 64, 1024])
def test_communication_volume(dp):
    psi = 7_500_000_000
    for stage, factor in ((0, 2), (1, 2), (2, 2), (3, 3)):
        elements = zero_scale.comm_elements(psi, dp, stage)
        # §7: 2Ψ (DDP, P_os, P_os+g) and 3Ψ (P_os+g+p), times (n−1)/n for a ring
        assert elements == pytest.approx(factor * psi * (dp - 1) / dp, rel=1e-9, abs=factor * dp)


def test_offload_moves_states_off_the_gpu():
    psi, dp = 7_500_000_000, 4
    cpu = zero_scale.placement(psi, dp, 2, "cpu")
    assert cpu.gpu.optimizer == 0 and cpu.gpu.grads == 0 and cpu.gpu.params == 2 * psi
    assert cpu.cpu == pytest.approx((12 + 2) * psi / dp)
    nvme = zero_scale.placement(psi, dp, 3, "nvme")
    assert nvme.gpu.total == 0 and nvme.nvme == pytest.approx((12 + 2) * psi / dp)


MACHINE = zero_scale.Machine(Links(5.0, 300.0, 50.0, 8), 150.0, 25.0, 3.5, 50.0)


def test_step_time_is_bound_by_the_slowest_link():
    psi, dp, tokens = 7_500_000_000, 4, 4096
    assert zero_scale.step(psi, dp, 2, "none", 3, tokens, MACHINE).bound == "GPU compute"
    nvme = zero_scale.step(psi, dp, 3, "nvme", 3, tokens, MACHINE)
    assert nvme.bound == "NVMe"
    # ZeRO-Infinity moves the fp16 parameters twice (forward, backward) and the states both ways
    assert nvme.transfers["NVMe"] == pytest.approx(2 * 2 * psi / dp + (12 + 12 + 2) * psi / dp,
                                                   rel=1e-6)
    slow_pcie = zero_scale.Machine(MACHINE.links, 150.0, 0.5, 3.5, 50.0)
    assert zero_scale.step(psi, dp, 2, "cpu", 3, tokens, slow_pcie).bound == "PCIe"
    slow_cpu = zero_scale.Machine(MACHINE.links, 150.0, 25.0, 3.5, 2.0)
    assert zero_scale.step(psi, dp, 2, "cpu", 3, tokens, slow_cpu).bound == "CPU"
    cpu = zero_scale.step(psi, dp, 2, "cpu", 3, tokens, MACHINE)
    assert cpu.transfers["PCIe"] == pytest.approx(4 * psi / dp, rel=1e-6)   # 2Ψ/N each way
    assert sum(cpu.critical_us.values()) == pytest.approx(cpu.step_us)


def params(**overrides):
    base = dict(stage=2, dp=4, steps=3, seed=0, mlp_layers=3, mlp_width=2, micro_batch=2,
                param_count=7_500_000_000, seq=2048, offload="none", gpu_tflops=150.0,
                pcie_gbs=25.0, nvme_gbs=3.5, cpu_mem_gbs=50.0, alpha_us=5.0,
                intra_node_gbs=300.0, inter_node_gbs=50.0, gpus_per_node=8)
    return SimpleNamespace(**{**base, **overrides})


@pytest.mark.parametrize("dp,layers,width", [(4, 3, 2), (3, 2, 3), (5, 1, 2), (1, 2, 2), (12, 2, 2)])
def test_final_params_are_the_same_bits_for_every_stage(dp, layers, width):
    runs = [simulate(params(stage=s, dp=dp, mlp_layers=layers, mlp_width=width))
            for s in range(4)]
    for trace in runs[1:]:
        assert trace.to_dict()["final_params"] == runs[0].to_dict()["final_params"]


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
@pytest.mark.parametrize("dp", [3, 4, 12])
def test_grids_hold_what_each_stage_keeps(stage, dp):
    trace = simulate(params(stage=stage, dp=dp))
    g = trace.grids
    own = np.array([[c.owner == r for c in g.columns] for r in g.ranks])
    real = np.array([c.flat >= 0 for c in g.columns])
    status = g.status
    # start: optimizer states whole in DDP, else only the own shard
    start_opt = status[0, 2] != EMPTY
    assert np.array_equal(start_opt, np.broadcast_to(real, own.shape) if stage == 0 else own)
    # end: parameters whole and current except ZeRO-3, which keeps its shard
    end_params = status[-1, 0]
    if stage < 3:
        assert np.all(end_params[:, real] == CURRENT)
    else:
        assert np.all((end_params != EMPTY) == own)
    # gradients: local before any reduction, then the mean on the owner
    assert (status[:, 1] == LOCAL).any()
    if stage >= 2:
        assert np.all((status[-1, 1] != EMPTY) == own)
    if stage == 1:
        assert (status[-1, 1] == STALE).any()
    # padding is drawn wherever a shard holds some (every stage pads its gradient buffers)
    if any(u.padding for u in trace.training.units):
        assert (status == PAD).any()
    # the last frame's parameters are the trained ones
    values = g.values[-1, 0]
    flat = trace.training.final_params
    cols = [k for k, c in enumerate(g.columns) if c.flat >= 0]
    held = [k for k in cols if status[-1, 0, 0, k] != EMPTY]
    assert np.array_equal(values[0, held], flat[[g.columns[k].flat for k in held]])


def test_memory_over_the_step_ends_at_table1():
    for stage in range(4):
        trace = simulate(params(stage=stage))
        assert trace.memory[-1].total == pytest.approx(trace.placement.gpu.total, rel=1e-9)
    zero3 = simulate(params(stage=3))
    # a gathered layer costs (N−1)/N of its parameters on top of the shards
    shard_only = zero_scale.placement(7_500_000_000, 4, 3, "none").gpu.params
    assert max(m.params for m in zero3.memory) == pytest.approx(
        shard_only + 2 * 7_500_000_000 / 3 * 3 / 4, rel=1e-6)


def test_contract_fields():
    d = simulate(params(dp=5)).to_dict()
    assert len(d["final_params"]) == 18
    assert len(d["per_rank_bytes"]) == 5
    assert set(d["per_rank_bytes"][0]) == {"params", "grads", "optimizer"}
    assert d["comm_elements_per_step"] == 2 * 4 * 1_500_000_000
    assert d["tiny"]["units"][0] == {"layer": 0, "numel": 6, "shard": 2, "padding": 4}
    assert d["tiny"]["per_rank_elements"][-1]["real_in_shard"] == 0   # rank 4: only padding
    assert d["frames"][0]["step"] == 0 and d["frames"][-1]["caption"].count("same bits") == 1


def test_drawn_ranks_include_the_last():
    assert zero_frames.drawn_ranks(4) == (0, 1, 2, 3)
    assert zero_frames.drawn_ranks(64) == (0, 1, 2, 3, 4, 5, 6, 63)
