"""The memory ledger against the published tables: ZeRO Table 1 (Rajbhandari et al. 2019) and
Korthikanti et al. 2022 Table 2 for GPT-3 175B; the pipeline rule; properties (hypothesis):
memory never grows with the ZeRO stage or with dp; bounded, finite answers for huge inputs."""

from __future__ import annotations

import math
from dataclasses import replace

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.memory.activations import LayerShape, korthikanti_table2, per_layer_bytes
from app.sim.memory.ledger import MemoryConfig, adafactor_elements, ledger
from app.catalog.gpus import GPUS
from app.sim.memory.fit import deepspeed_comparison, max_micro_batch, plan, suggestions
from app.sim.memory.simulate import simulate_config
from app.catalog.models import PRESETS, ModelShape

GPT3 = PRESETS["gpt3-175b"]
MiB = 2**20

# ZeRO Table 1: Ψ → N_d → (P_os, P_os+g, P_os+g+p) in GB, as printed (baseline = N_d 1)
ZERO_TABLE_1 = {
    7.5e9: {1: ("120", "120", "120"), 4: ("52.5", "41.3", "30"), 16: ("35.6", "21.6", "7.5"),
            64: ("31.4", "16.6", "1.88"), 1024: ("30.1", "15.1", "0.12")},
    128e9: {1: ("2048", "2048", "2048"), 4: ("896", "704", "512"), 16: ("608", "368", "128"),
            64: ("536", "284", "32"), 1024: ("513", "257", "2")},
    1e12: {1: ("16000", "16000", "16000"), 4: ("7000", "5500", "4000"),
           16: ("4750", "2875", "1000"), 64: ("4187", "2218", "250"),
           1024: ("4011", "2013", "15.6")},
}
ZERO_ROWS = [(psi, n, stage, printed)
             for psi, rows in ZERO_TABLE_1.items() for n, cells in rows.items()
             for stage, printed in zip((1, 2, 3), cells)]


def config(psi: float | None = None, **kw) -> MemoryConfig:
    base = {"model": GPT3, "optimizer": "adam", "precision": "mixed",
            "param_count": None if psi is None else int(psi)}
    return MemoryConfig(**{**base, **kw})


def model_states(led) -> float:
    return led.bytes("params") + led.bytes("grads") + led.bytes("optimizer")


@pytest.mark.parametrize("psi, n_d, stage, printed", ZERO_ROWS)
def test_zero_table_1(psi, n_d, stage, printed):
    """Every cell of Table 1, to the last digit the paper prints (it truncates some)."""
    got = model_states(ledger(config(psi, dp=n_d, zero=stage))) / 1e9
    digits = len(printed.split(".")[1]) if "." in printed else 0
    assert abs(got - float(printed)) <= 10 ** -digits, (got, printed)


@pytest.mark.parametrize("stage, params, grads, optimizer", [
    (0, 2, 2, 12), (1, 2, 2, 12 / 64), (2, 2, 2 / 64, 12 / 64), (3, 2 / 64, 2 / 64, 12 / 64)])
def test_zero_partitions_each_state(stage, params, grads, optimizer):
    led = ledger(config(7.5e9, dp=64, zero=stage))
    for key, k in (("params", params), ("grads", grads), ("optimizer", optimizer)):
        assert led.bytes(key) == pytest.approx(k * 7.5e9)


@pytest.mark.parametrize("optimizer, precision, k", [
    ("adam", "mixed", 16), ("adamw", "mixed", 16), ("adam", "fp32", 16), ("sgd", "fp32", 8),
    ("sgd", "mixed", 8), ("momentum", "fp32", 12), ("momentum", "mixed", 12),
    ("adam8bit", "mixed", 10)])
def test_bytes_per_parameter(optimizer, precision, k):
    """2 + 2 + 12 for mixed Adam, 4 + 4 + 8 for fp32 Adam (DESIGN.md), and the others."""
    led = ledger(config(1e9, optimizer=optimizer, precision=precision))
    assert model_states(led) == pytest.approx(k * 1e9)


@pytest.mark.parametrize("t, sp, recompute, mib", [
    (1, False, "none", 2736), (8, False, "none", 552), (8, True, "none", 342),
    (8, False, "selective", 312), (8, True, "selective", 102), (8, False, "full", 48)])
def test_korthikanti_table_2_gpt3(t, sp, recompute, mib):
    led = ledger(config(tp=t, sequence_parallel=sp, recompute=recompute))
    assert led.per_layer_bytes / MiB == pytest.approx(mib)
    layer_items = [i for i in led.items if i.category == "activations"
                   and i.source.endswith("Table 2")]
    assert sum(i.bytes for i in layer_items) == pytest.approx(mib * MiB * GPT3.layers)


@settings(max_examples=60, deadline=None)
@given(s=st.integers(1, 8192), b=st.integers(1, 16), heads_log=st.integers(0, 7),
       head_dim=st.sampled_from([16, 64, 128]), t_log=st.integers(0, 3), sp=st.booleans(),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_terms_add_up_to_table_2(s, b, heads_log, head_dim, t_log, sp, recompute):
    """For Table 2's shape (MHA, 4h GeLU MLP, dropout) the term-by-term breakdown equals the
    closed forms for any sizes, parallelism and recompute."""
    a, t = 2**heads_log, 2**t_log
    h = a * head_dim
    got = per_layer_bytes(LayerShape(s, b, h, a), t, sp, recompute)
    assert got == pytest.approx(korthikanti_table2(s, b, h, a, t, sp, recompute))


def test_fp32_activations_double_except_masks():
    mixed = ledger(config(tp=1))
    fp32 = ledger(config(tp=1, precision="fp32"))
    s, h, a = GPT3.seq, GPT3.hidden, GPT3.heads
    masks = s * h * 2 + a * s * s   # two sbh masks and the as²b attention mask, b = 1
    assert fp32.per_layer_bytes == pytest.approx(2 * mixed.per_layer_bytes - masks)


@pytest.mark.parametrize("pp", [2, 4, 8, 16, 32])
def test_first_stage_holds_l_layers_under_1f1b(pp):
    """Korthikanti §4.2.3: p micro-batches of L/p layers on the first stage, one on the last."""
    led = ledger(config(tp=8, pp=pp, sequence_parallel=True, recompute="selective"))
    assert led.stage.name == "first"
    assert led.stage.layers_in_flight == GPT3.layers
    assert led.other.name == "last" and led.other.layers_in_flight == GPT3.layers // pp
    embedding = next(i for i in led.items if i.key == "activations.embedding")
    assert embedding.bytes == pytest.approx(GPT3.seq * GPT3.hidden / 8 * pp)
    assert not any(i.key == "activations.logits" for i in led.items)
    assert any(i.key == "activations.logits" for i in led.other.items)


def test_output_layer_terms():
    """§4.3: the last stage keeps 4sbh/t (1 + V/h) for the output layer and loss (with SP)."""
    led = ledger(config(tp=8, sequence_parallel=True))
    s, h, v = GPT3.seq, GPT3.hidden, GPT3.vocab
    output = sum(i.bytes for i in led.items if i.key in (
        "activations.final_norm", "activations.head", "activations.logits"))
    assert output == pytest.approx(4 * s * h / 8 * (1 + v / h))


def test_contract_totals():
    d = simulate_config(config(dp=8, zero=1, tp=8, pp=4)).to_dict()
    per = d["per_gpu_bytes"]
    assert per["total"] == pytest.approx(per["params"] + per["grads"] + per["optimizer"]
                                         + per["activations"], abs=4)
    assert d["peak_bytes"] == pytest.approx(per["total"] + d["buffers_bytes"], abs=4)
    assert d["param_count"] == GPT3.param_count()
    assert isinstance(d["activations_per_layer_bytes"], int)
    assert [f["step"] for f in d["frames"]] == [0, 1, 2, 3, 4]


@settings(max_examples=80, deadline=None)
@given(preset=st.sampled_from(sorted(PRESETS)), dp=st.sampled_from([1, 2, 3, 8, 64, 1024]),
       tp=st.sampled_from([1, 2, 8]), micro_batch=st.integers(1, 8),
       optimizer=st.sampled_from(["sgd", "momentum", "adamw", "adafactor", "adam8bit"]),
       precision=st.sampled_from(["fp32", "mixed"]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_memory_never_grows_with_zero_stage_or_dp(preset, dp, tp, micro_batch, optimizer,
                                                  precision, recompute):
    """Each category, and the contract's total, is non-increasing in the ZeRO stage and in dp
    (buffers aside: ZeRO-3's gathered layer is real overhead)."""
    base = config(model=PRESETS[preset], dp=dp, tp=tp, micro_batch=micro_batch,
                  optimizer=optimizer, precision=precision, recompute=recompute)
    by_stage = [ledger(replace(base, zero=z)) for z in range(4)]
    for before, after in zip(by_stage, by_stage[1:]):
        for key in ("params", "grads", "optimizer", "activations"):
            assert after.bytes(key) <= before.bytes(key) * (1 + 1e-12)
        assert after.total <= before.total * (1 + 1e-12)
    for zero in range(4):
        small, large = (ledger(replace(base, zero=zero, dp=n)) for n in (dp, 2 * dp))
        assert large.total <= small.total * (1 + 1e-12)


def test_adafactor_counts_rows_and_columns():
    tiny = ModelShape("tiny", "gpt", 2, 8, 2, 2, 32, 10, 4)
    # wte 10+8, wpe 4+8, per layer: ln 8+8+8+8, qkv 24+8, bias 24, proj 8+8, bias 8,
    # fc 32+8, bias 32, proj 8+32, bias 8; final ln 8+8
    per_layer = 8 * 4 + 32 + 24 + 16 + 8 + 40 + 32 + 40 + 8
    assert adafactor_elements(tiny) == 18 + 12 + 2 * per_layer + 16
    led = ledger(MemoryConfig(tiny, optimizer="adafactor", precision="fp32"))
    assert led.bytes("optimizer") == 4 * adafactor_elements(tiny)


@pytest.mark.parametrize("preset, gpu, kw", [
    ("gpt2", "a100-40", {}),
    ("llama3-8b", "h100-80", {"dp": 8, "zero": 2, "recompute": "selective"}),
    ("gpt3-175b", "h200-141", {"dp": 8, "tp": 8, "pp": 8, "zero": 1,
                               "sequence_parallel": True, "recompute": "selective"}),
    ("llama3-70b", "mi300x-192", {"dp": 16, "tp": 8, "pp": 4, "zero": 1})])
def test_largest_micro_batch_fits_and_the_next_does_not(preset, gpu, kw):
    c = config(model=PRESETS[preset], gpu=gpu, **kw)
    capacity = GPUS[gpu].capacity
    b = max_micro_batch(c, capacity)
    assert b >= 1
    assert ledger(replace(c, micro_batch=b)).peak <= capacity
    assert ledger(replace(c, micro_batch=b + 1)).peak > capacity


def test_no_micro_batch_fits_is_zero():
    c = config(model=PRESETS["llama3-8b"], dp=8, zero=2, gpu="h100-80")   # no recompute
    assert max_micro_batch(c, GPUS["h100-80"].capacity) == 0


def test_suggestions_lower_the_peak_and_the_plan_fits():
    c = config(model=PRESETS["llama3-70b"], dp=8, gpu="h100-80", optimizer="adamw")
    led = ledger(c)
    assert led.peak > GPUS["h100-80"].capacity
    found = suggestions(c, led)
    assert found and all(s.peak < led.peak for s in found)
    assert [s.fits for s in found] == sorted((s.fits for s in found), reverse=True)
    steps = plan(c)
    assert steps[-1].fits and len(steps) <= 8
    assert ledger(replace(c, **dict(steps[-1].changes))).peak == pytest.approx(steps[-1].peak)


def test_deepspeed_convention_differs_by_fp32_gradients():
    """ZeRO-2: 2Ψ + 18Ψ/N against 2Ψ + 14Ψ/N; ZeRO-3: 4·Φ_max + 18Ψ/N against 16Ψ/N."""
    c = config(7.5e9, dp=64)
    z2, z3 = deepspeed_comparison(c)
    assert z2.deepspeed - z2.paper == pytest.approx(4 * 7.5e9 / 64)
    largest = max(t.numel for t in GPT3.tensors())   # the vocab × h embedding
    assert z3.deepspeed - z3.paper == pytest.approx(2 * 7.5e9 / 64 + 4 * largest)
    assert z2.paper / 1e9 == pytest.approx(16.6, abs=0.05)   # Table 1's P_os+g


@pytest.mark.parametrize("kw", [
    {"micro_batch": 4096, "dp": 1},
    {"model": ModelShape("huge", "gpt", 512, 131072, 512, 512, 524288, 1048576, 1048576),
     "micro_batch": 4096, "dp": 1024, "tp": 64, "pp": 64, "zero": 3},
    {"model": ModelShape("tiny", "llama", 1, 1, 1, 1, 1, 1, 1), "param_count": 10**15}])
def test_huge_and_tiny_inputs_stay_finite(kw):
    d = simulate_config(config(**kw)).to_dict()
    numbers = [*d["per_gpu_bytes"].values(), d["peak_bytes"], d["buffers_bytes"],
               d["activations_per_layer_bytes"], *(i["bytes"] for i in d["items"])]
    assert all(math.isfinite(x) and x >= 0 for x in numbers)
    orjson.dumps(d)
