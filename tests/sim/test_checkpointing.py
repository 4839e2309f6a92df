"""The checkpointing timelines against Korthikanti et al.'s Table 2, the papers' FLOP formulas
and closed forms of each strategy's peak."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.params import ParamsError, parse
from app.sim.checkpointing.params import CheckpointParams
from app.sim.memory import activations
from app.sim.checkpointing.simulate import (FRAMES_TARGET, best_k, full_peak, layer_bytes,
                                   simulate, timeline)
from app.sim.flops import iteration_flops
from app.catalog.models import PRESETS, resolve

MIB = 2**20


def params(**query) -> CheckpointParams:
    return parse(CheckpointParams, {k: str(v) for k, v in query.items()})


# Korthikanti et al. 2022, Table 2, GPT-3 175B (a 96, h 12288, s 2048, b 1), MiB per layer
TABLE_2 = [(1, False, "none", 2736), (8, False, "none", 552), (8, True, "none", 342),
           (8, False, "selective", 312), (8, True, "selective", 102), (8, False, "full", 48)]


@pytest.mark.parametrize("tp,sp,recompute,mib", TABLE_2)
def test_per_layer_bytes_reproduce_table_2(tp, sp, recompute, mib):
    p = params(preset="gpt3-175b", micro_batch=1, tp=tp,
               sequence_parallel=str(sp).lower())
    per = layer_bytes(p.shape(), 2048, p)
    got = {"none": per.full, "selective": per.selective, "full": per.checkpoint}[recompute]
    assert got / MIB == pytest.approx(mib, abs=0.5)
    shape = activations.LayerShape(2048, 1, 12288, 96)
    assert got == activations.per_layer_bytes(shape, tp, sp, recompute)  # the ledger's code


@pytest.mark.parametrize("preset,micro_batch,accum,dp,tp", [
    ("gpt2", 4, 8, 8, 1), ("gpt2", 3, 5, 7, 2), ("gpt3-175b", 1, 2, 4, 8)])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_iteration_flops_match_the_closed_forms(preset, micro_batch, accum, dp, tp,
                                                recompute):
    """72·B·s·L·h²(1 + s/6h + V/12hL) without recompute, 96·…(… + V/16hL) with full recompute
    (Korthikanti 2022 §6; Narayanan 2021 eq. 3): summed over every GPU of one iteration."""
    p = params(preset=preset, micro_batch=micro_batch, grad_accum=accum, dp=dp, tp=tp,
               recompute=recompute)
    trace = simulate(p)
    m = trace.model
    total = trace.chosen.flops * accum * dp * tp
    expected = iteration_flops(trace.global_batch, m.seq, m.layers, m.hidden, m.vocab,
                               recompute == "full")
    assert total == pytest.approx(expected, rel=1e-12)
    assert trace.global_batch == micro_batch * accum * dp


def test_selective_recompute_costs_the_attention_core():
    p = params(preset="gpt3-175b", micro_batch=1, tp=8, recompute="selective")
    t = simulate(p).chosen
    s, h, L = 2048, 12288, 96
    assert t.recompute_flops == pytest.approx(L * 4 * s * s * h / 8, rel=1e-12)


@pytest.mark.parametrize("preset,layers", [("gpt2", None), ("gpt2", 13), ("llama3-8b", 5),
                                           ("gpt3-175b", None)])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 12])
def test_peaks_follow_the_closed_forms(preset, layers, k):
    query = {"preset": preset, "micro_batch": 2, "seq": 512}
    if layers:
        query["layers"] = layers
    p = params(**query)
    m = p.shape()
    k = min(k, m.layers)
    per = layer_bytes(m, m.seq, p)
    L = m.layers
    none, selective = timeline(m, m.seq, p, "none"), timeline(m, m.seq, p, "selective")
    full = timeline(m, m.seq, p, "full", k)
    assert none.peak == pytest.approx(L * per.full)
    assert selective.peak == pytest.approx((L - 1) * per.selective + per.full)
    assert full.peak == pytest.approx(full_peak(L, k, per))
    assert full.end_of_forward == pytest.approx(math.ceil(L / k) * per.checkpoint)
    assert selective.end_of_forward == pytest.approx(L * per.selective)
    for t in (none, selective, full):
        assert abs(t.events[-1].memory_after) < 1e-6 * t.peak  # everything freed
        assert min(e.memory_after for e in t.events) > -1e-6 * t.peak
        assert sorted(e.layer for e in t.events if e.kind == "F") == list(range(L))
        assert sorted(e.layer for e in t.events if e.kind == "B") == list(range(L))
    assert sorted(e.layer for e in full.events if e.kind == "R") == list(range(L))
    assert not [e for e in none.events if e.kind == "R"]
    # recompute costs the same whatever k; memory does not
    assert full.recompute_flops == timeline(m, m.seq, p, "full", 1).recompute_flops


@pytest.mark.parametrize("query,expected", [
    # GPT-2: a layer keeps 57× its input, so a checkpoint per layer is best
    ({"preset": "gpt2"}, 1),
    # GPT-3 with t = 8 and no SP: A/C = 552/48, √(L·C/A) = √(96/11.5) ≈ 2.9
    ({"preset": "gpt3-175b", "micro_batch": 1, "tp": 8}, 3),
    # with SP the checkpoint shrinks by t as well: A/C = 57 again
    ({"preset": "gpt3-175b", "micro_batch": 1, "tp": 8, "sequence_parallel": "true"}, 1)])
def test_best_k_balances_checkpoints_against_a_segment(query, expected):
    p = params(**query)
    m = p.shape()
    per = layer_bytes(m, m.seq, p)
    peaks = [full_peak(m.layers, k, per) for k in range(1, m.layers + 1)]
    assert best_k(m.layers, per) == peaks.index(min(peaks)) + 1 == expected
    assert simulate(p).best_k == expected


@pytest.mark.parametrize("preset", list(PRESETS))
def test_frames_cover_the_timeline_once(preset):
    trace = simulate(params(preset=preset, micro_batch=1, tp=8 if preset != "gpt2" else 1))
    spans = trace.frame_events[1:]
    assert spans[0][0] == 0 and spans[-1][1] == len(trace.chosen.events)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert len(trace.frames) == len(trace.frame_events) <= FRAMES_TARGET + 4
    assert all(f.caption for f in trace.frames)


def test_time_is_flops_over_throughput():
    p = params(achieved_tflops=250)
    t = simulate(p).chosen
    assert t.time_ms == pytest.approx(t.flops / 250e12 * 1e3, rel=1e-9)


def test_resolve_keeps_presets_and_applies_overrides():
    for name, m in PRESETS.items():
        assert resolve(name) == m
    m = resolve("llama3-70b", layers=4, hidden=4096)
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.ffn) == (4, 4096, 64, 8, 14336)
    assert resolve("gpt2", hidden=1024, heads=16).ffn == 4096


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preset=st.sampled_from(list(PRESETS)), layers=st.integers(1, 512),
       seq=st.integers(1, 1 << 20), micro_batch=st.integers(1, 4096),
       recompute=st.sampled_from(["none", "selective", "full"]), k=st.integers(1, 512),
       tp=st.sampled_from([1, 2, 4, 8]), sp=st.booleans(), accum=st.integers(1, 1024))
def test_any_accepted_input_is_finite_and_fast(preset, layers, seq, micro_batch, recompute, k,
                                               tp, sp, accum):
    try:
        p = params(preset=preset, layers=layers, seq=seq, micro_batch=micro_batch,
                   recompute=recompute, recompute_layers=k, tp=tp,
                   sequence_parallel=str(sp).lower(), grad_accum=accum)
    except ParamsError as error:
        assert {pr.param for pr in error.problems} <= {"recompute_layers", "tp"}
        return
    data = simulate(p).to_dict()  # its time is measured by make bench
    json.dumps(data, allow_nan=False)
