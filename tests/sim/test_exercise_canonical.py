"""The canonical problems of DESIGN.md's Exercises contract: their ids, their ``given`` keys,
their kinds and units, and their answers at the papers' own numbers — ZeRO Table 1's cells,
Korthikanti et al. 2022 Table 2's MiB for GPT-3 175B, get_capacity(4096, 64, 1.25) = 80,
Megatron's interleaved warm-up counts 10, 8, 6, 4, PTD-P's (p−1)/m, Llama 3 405B's 43 % MFU
(REFERENCES.md)."""

from __future__ import annotations

import math

import pytest

from app.exercises.model import BANK

CANONICAL = {  # id: (chapter, given keys, kind, unit)
    "zero-model-states": (5, {"params", "dp", "stage"}, "number", "bytes"),
    "ring-allreduce-bytes": (2, {"ranks", "bytes"}, "number", "bytes"),
    "ring-allreduce-time": (2, {"ranks", "bytes", "alpha_us", "link_gbs"}, "number", "s"),
    "pipeline-bubble": (7, {"stages", "microbatches", "schedule", "chunks"}, "number",
                        "fraction"),
    "moe-capacity": (10, {"tokens", "experts", "top_k", "capacity_factor"}, "integer",
                     "tokens"),
    "activation-memory": (8, {"seq", "micro_batch", "hidden", "heads", "tp",
                              "sequence_parallel"}, "number", "bytes"),
    "cp-ring-bytes": (9, {"cp", "seq", "kv_heads", "head_dim", "bytes_per_element"}, "number",
                      "bytes"),
    "layout-rank-coords": (11, {"tp", "cp", "dp", "pp", "order", "rank"}, "coords", ""),
    "mfu": (11, {"params", "tokens_per_s", "peak_tflops"}, "number", "fraction"),
}


def answer(id_: str, **given):
    return BANK.templates[id_].solve(given).answer


@pytest.mark.parametrize("id_", CANONICAL)
def test_canonical_ids_keys_kinds_and_units(id_):
    chapter, keys, kind, unit = CANONICAL[id_]
    t = BANK.templates[id_]
    assert (t.chapter, t.kind) == (chapter, kind)
    if unit:
        assert t.unit == unit
    for seed in range(20):
        assert set(t.given(seed)) == keys
    if kind == "coords":
        assert t.keys == ("tp", "cp", "dp", "pp")


# ZeRO Table 1 (GB = 10⁹ bytes): Ψ, N_d → (P_os, P_os+g, P_os+g+p)
ZERO_TABLE_1 = [
    (7.5e9, 1, (120, 120, 120)), (7.5e9, 4, (52.5, 41.3, 30)), (7.5e9, 16, (35.6, 21.6, 7.5)),
    (7.5e9, 64, (31.4, 16.6, 1.88)), (7.5e9, 1024, (30.1, 15.1, 0.12)),
    (128e9, 64, (536, 284, 32)), (128e9, 1024, (513, 257, 2)), (1e12, 16, (4750, 2875, 1000)),
    (1e12, 1024, (4011, 2013, 15.6)),
]


@pytest.mark.parametrize("psi,dp,cells", ZERO_TABLE_1)
def test_zero_model_states_reproduces_table_1(psi, dp, cells):
    assert math.isclose(answer("zero-model-states", params=int(psi), dp=dp, stage=0) / 1e9,
                        16 * psi / 1e9)
    for stage, gb in zip((1, 2, 3), cells):
        got = answer("zero-model-states", params=int(psi), dp=dp, stage=stage) / 1e9
        assert math.isclose(got, gb, rel_tol=0.01, abs_tol=0.006), (stage, got, gb)


# Korthikanti et al. 2022, Table 2, GPT-3 175B (a 96, h 12288, s 2048, b 1), MiB per layer
@pytest.mark.parametrize("tp,sp,mib", [(1, False, 2736), (8, False, 552), (8, True, 342)])
def test_activation_memory_reproduces_korthikanti_table_2(tp, sp, mib):
    got = answer("activation-memory", seq=2048, micro_batch=1, hidden=12288, heads=96, tp=tp,
                 sequence_parallel=sp)
    assert round(got / 2**20) == mib


def test_moe_capacity_is_megatrons_get_capacity():
    # get_capacity(4096, 64, 1.25) = 80: 4096 assignments, e.g. 2048 tokens × top-2
    assert answer("moe-capacity", tokens=2048, experts=64, top_k=2, capacity_factor=1.25) == 80
    assert answer("moe-capacity", tokens=4096, experts=64, top_k=1, capacity_factor=1.25) == 80
    assert answer("moe-capacity", tokens=1000, experts=8, top_k=2, capacity_factor=1.1) == 275


def test_megatron_interleaved_warmup_is_10_8_6_4():
    got = [answer("pipeline-warmup", schedule="interleaved", stages=4, microbatches=8,
                  chunks=2, rank=r) for r in range(4)]
    assert got == [10, 8, 6, 4]
    assert [answer("pipeline-warmup", schedule="1f1b", stages=4, microbatches=8, chunks=1,
                   rank=r) for r in range(4)] == [3, 2, 1, 0]


@pytest.mark.parametrize("schedule,p,m,v,fraction", [
    ("1f1b", 4, 8, 1, 3 / 8), ("gpipe", 8, 32, 1, 7 / 32), ("interleaved", 4, 8, 2, 3 / 16),
    ("interleaved", 8, 16, 4, 7 / 64), ("1f1b", 16, 64, 1, 15 / 64)])
def test_pipeline_bubble_is_ptdp_fraction_of_the_ideal(schedule, p, m, v, fraction):
    got = answer("pipeline-bubble", stages=p, microbatches=m, schedule=schedule, chunks=v)
    assert math.isclose(got, fraction, rel_tol=1e-9)


def test_ring_allreduce_volume_and_time():
    assert answer("ring-allreduce-bytes", ranks=8, bytes=2**30) == 2 * 7 / 8 * 2**30
    # 8 ranks, 1 GiB, α 5 µs, 100 GB/s: 14·5 µs + 1.75 · 2³⁰ / 10¹¹ s
    t = answer("ring-allreduce-time", ranks=8, bytes=2**30, alpha_us=5.0, link_gbs=100.0)
    assert math.isclose(t, 14 * 5e-6 + 1.75 * 2**30 / 1e11, rel_tol=1e-12)


def test_cp_ring_bytes():
    # Llama-3 70B-like: 8 KV heads of 128, 131,072 tokens on 16 ranks, bf16
    got = answer("cp-ring-bytes", cp=16, seq=131072, kv_heads=8, head_dim=128,
                 bytes_per_element=2)
    assert got == 15 * 2 * 8192 * 8 * 128 * 2


def test_layout_rank_coords_follow_megatrons_order():
    # tp-cp-ep-dp-pp: rank = tp_i + tp·(cp_i + cp·(dp_i + dp·pp_i)); 2·2·2·2, rank 13
    got = answer("layout-rank-coords", tp=2, cp=2, dp=2, pp=2, order="tp-cp-ep-dp-pp", rank=13)
    assert got == {"tp": 1, "cp": 0, "dp": 1, "pp": 1}


def test_mfu_of_llama3_405b():
    # Meta 2024, Table 4: 430 TFLOP/s per GPU on H100 (989 peak) is 43 % MFU; at 6N per token
    tokens_per_s = 430e12 / (6 * 405e9)
    got = answer("mfu", params=405_000_000_000, tokens_per_s=tokens_per_s, peak_tflops=989)
    assert round(got, 2) == 0.43
