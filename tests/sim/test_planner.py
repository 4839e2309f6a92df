"""The planner against independent references: a plain-Python brute force on small cases,
chapter 1's ledger, the published runs, and the launch configs' real names."""

from __future__ import annotations

import itertools
from dataclasses import replace
import json
from math import ceil

import numpy as np
import pytest

from app.sim.memory.ledger import MemoryConfig, ledger
from app.catalog.models import resolve
from app.sim.planner.cost import Cluster
from app.sim.planner.hardware import GPU_SPECS
from app.sim.planner.launch import deepspeed_config, megatron_flags, torchtitan_toml
from app.sim.planner.model import from_shape
from app.sim.planner.params import PlannerParams
from app.sim.planner.published import RUNS
from app.sim.planner.search import RECOMPUTES, Pins, evaluate, search

SMALL = [("llama3-8b", 16, 64, 4096, "h100-80"), ("gpt2", 8, 32, 1024, "a100-40"),
         ("llama3-70b", 32, 64, 4096, "h100-80"), ("gpt3-175b", 24, 48, 2048, "a100-80")]


def brute_force(model, cluster, batch):
    """Every mix by plain loops and the rules written out again, each evaluated alone."""
    best, count = None, 0
    W = cluster.gpus
    for tp, cp, pp in itertools.product([1, 2, 4, 8, 16, 32, 64], [1, 2, 4, 8, 16, 32, 64],
                                        range(1, model.layers + 1)):
        if (model.heads % tp or model.kv_heads % tp or model.ffn % tp or W % (tp * cp * pp)
                or tp > W or (cp > 1 and model.seq % (2 * cp)) or pp > 128):
            continue
        per = ceil(model.layers / pp)
        if model.layers - (pp - 1) * per < 1:
            continue
        dp = W // (tp * cp * pp)
        if batch % dp:
            continue
        for v in range(1, 9):
            if v > 1 and (pp == 1 or per % v):
                continue
            for b in range(1, 17):
                if (batch // dp) % b:
                    continue
                m = batch // dp // b
                if pp > 1 and (m < pp or (v > 1 and m % pp)):
                    continue
                for z in range(4):
                    if (dp * cp == 1 and z) or (z == 3 and pp > 1):
                        continue
                    for rc in range(3):
                        g = {k: np.array([x]) for k, x in zip(
                            ("tp", "cp", "ep", "pp", "v", "dp", "zero", "b", "m", "rc", "dual"),
                            (tp, cp, 1, pp, v, dp, z, b, m, rc, 0))}
                        r = evaluate(model, cluster, batch, g)
                        count += 1
                        if r["fits"][0] and (best is None or r["tokens_per_s"][0] > best[0]):
                            best = (float(r["tokens_per_s"][0]), (tp, cp, pp, v, dp, z, b, rc))
    return best, count


@pytest.mark.parametrize("preset,gpus,batch,seq,gpu", SMALL)
def test_search_finds_the_brute_force_optimum(preset, gpus, batch, seq, gpu):
    model = from_shape(resolve(preset, seq=seq))
    cluster = Cluster(GPU_SPECS[gpu], gpus)
    plan = search(model, cluster, batch)
    best, count = brute_force(model, cluster, batch)
    assert plan.searched == count
    if best is None:
        assert plan.best is None
        return
    b = plan.best
    got = (b.tp, b.cp, b.pp, b.chunks, b.dp, b.zero, b.micro_batch, RECOMPUTES.index(b.recompute))
    assert b.tokens_per_s == pytest.approx(best[0], rel=1e-9)
    assert got == best[1] or b.tokens_per_s == pytest.approx(best[0], rel=1e-12)


@pytest.mark.parametrize("preset,gpus,batch,seq,gpu", SMALL)
def test_every_candidate_divides_and_fits(preset, gpus, batch, seq, gpu):
    shape = resolve(preset, seq=seq)
    plan = search(from_shape(shape), Cluster(GPU_SPECS[gpu], gpus), batch)
    seen_unfit = False
    for c in plan.candidates:
        assert c.tp * c.cp * c.pp * c.dp == gpus
        assert shape.heads % c.tp == 0 and shape.kv_heads % c.tp == 0
        assert batch == c.dp * c.micro_batch * c.microbatches
        assert (c.peak_bytes <= GPU_SPECS[gpu].capacity) == c.fits
        assert not (seen_unfit and c.fits), "fitting mixes come first"
        seen_unfit |= not c.fits


@pytest.mark.parametrize("preset,tp,pp,dp,zero,b,rc", [
    ("llama3-8b", 1, 1, 8, 0, 1, "none"), ("llama3-8b", 2, 2, 4, 1, 2, "selective"),
    ("llama3-70b", 8, 4, 2, 2, 1, "full"), ("gpt3-175b", 8, 8, 4, 1, 1, "selective"),
    ("gpt2", 1, 1, 16, 3, 4, "none"), ("gpt3-175b", 4, 1, 8, 3, 1, "full")])
def test_memory_is_chapter_ones_ledger(preset, tp, pp, dp, zero, b, rc):
    """Chapter 1's ledger keeps Korthikanti's a·s² attention tensors: the planner equals it
    with attention materialised (FlashAttention drops them: tests/sim/test_planner_moe.py)."""
    shape = resolve(preset)
    model = replace(from_shape(shape), attention="materialized")
    g = {k: np.array([x]) for k, x in zip(("tp", "cp", "ep", "pp", "v", "dp", "zero", "b", "m",
                                           "rc"), (tp, 1, 1, pp, 1, dp, zero, b, 64,
                                                   RECOMPUTES.index(rc)))}
    r = evaluate(model, Cluster(GPU_SPECS["h100-80"], tp * pp * dp), 64 * dp * b, g)
    ref = ledger(MemoryConfig(shape, micro_batch=b, dp=dp, tp=tp, pp=pp, zero=zero,
                              sequence_parallel=tp > 1, recompute=rc)).peak
    assert r["peak"][0] == pytest.approx(ref, rel=1e-9)


def test_pins_evaluate_one_mix():
    p = PlannerParams(preset="llama3-8b", gpus=16, global_batch=64, seq=4096, tp=2, pp=2, dp=4,
                      cp=1, ep=1, zero=1, micro_batch=2, recompute="selective", schedule="1f1b")
    plan = search(p.plan_model(), p.cluster(), p.global_batch, p.pins())
    assert plan.searched == 1 and plan.candidates[0].tp == 2


def test_no_mix_fits_and_no_mix_divides():
    p = PlannerParams(preset="llama3-405b", gpus=8, global_batch=8, seq=8192)
    plan = search(p.plan_model(), p.cluster(), p.global_batch, p.pins())
    assert plan.best is None and plan.candidates and "no mix fits" in plan.message
    p = PlannerParams(preset="llama3-8b", gpus=7, global_batch=4, seq=4096)
    plan = search(p.plan_model(), p.cluster(), p.global_batch, p.pins())
    assert plan.best is None and plan.searched == 0 and "divides" in plan.message


def test_launch_configs_use_the_real_names():
    p = PlannerParams(preset="llama3-70b", gpus=64, global_batch=128, seq=4096, tp=8, pp=4,
                      chunks=2, zero=1, recompute="selective")
    plan = search(p.plan_model(), p.cluster(), p.global_batch, p.pins())
    c = plan.best
    flags = megatron_flags(c, p.plan_model(), 128, 4096)
    names = {f.split()[0] for f in flags}
    assert {"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
            "--context-parallel-size", "--num-layers-per-virtual-pipeline-stage",
            "--micro-batch-size", "--global-batch-size", "--recompute-granularity",
            "--sequence-parallel", "--use-distributed-optimizer"} <= names
    assert "--num-layers-per-virtual-pipeline-stage 10" in flags
    ds = json.loads(deepspeed_config(c, 128))
    assert ds["train_batch_size"] == ds["train_micro_batch_size_per_gpu"] * \
        ds["gradient_accumulation_steps"] * c.dp
    assert ds["zero_optimization"]["stage"] == 1 and ds["bf16"]["enabled"] is True
    toml = torchtitan_toml(c, 128, 4096)
    for key in ("data_parallel_shard_degree", "tensor_parallel_degree = 8",
                "pipeline_parallel_degree = 4", "context_parallel_degree = 1",
                'pipeline_parallel_schedule = "Interleaved1F1B"'):
        assert key in toml


def test_zero3_gathers_are_costed_per_layer():
    """ZeRO-3's exposed traffic of one micro-batch, written out by hand for tp 4 pp 1 of the
    1T model on 3,072 A100s: two exposed first gathers and the last reduce-scatter, then per
    layer max(0, traffic − the neighbouring layer's compute) in forward (one gather) and in
    backward (FSDP's count: one gather, serving the recomputed forward too, and one
    reduce-scatter)."""
    run = next(r for r in RUNS if r.name.startswith("PTD-P 1T"))
    query = {**run.query, "tp": 4, "pp": 1, "dp": None, "zero": 3, "micro_batch": 4,
             "attention": "flash"}          # forward exactly a quarter of the compute
    p = PlannerParams(**query)
    model, cluster = p.plan_model(), p.cluster()
    plan = search(model, cluster, p.global_batch, p.pins(), listed=1)
    c = plan.best
    n = c.dp
    layer_bytes = 2 * model.total_params / 4 / model.layers
    bw = cluster.ib_gbs * 1e9 * 0.8
    alpha = cluster.ib_alpha_us * 1e-6
    ag = (n - 1) * alpha + (n - 1) / n * layer_bytes / bw
    assert c.microbatches == 1 and n == 768
    layer = (c.budget["compute"] + c.budget["tp"]) / model.layers      # all passes of one layer
    # the forward share is a quarter under full recomputation (forward, 2 × backward, forward)
    fwd, bwd = layer / 4, 3 * layer / 4
    want = 3 * ag + model.layers * (max(0, ag - fwd) + max(0, 2 * ag - bwd))
    assert c.budget["dp"] == pytest.approx(want, rel=0.05)
    assert c.budget["dp"] > 4 * 3 * ag        # the layers' gathers are not all hidden
