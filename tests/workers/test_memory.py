"""The real run: workers/memory.py trains a scaled-down copy on gloo ranks and its measured bytes
must match the ledger — model states to the byte, activations within 10 %."""

from __future__ import annotations

import time

import pytest

from app.scenes.memory import SCENE
from app.sim.memory.params import MemoryParams
from app.scene import trace_of
from app.sim.memory.ledger import ledger
from app.sim.memory.rank_states import rank_states
from app.scenes.memory.check import compare, scaled_config

CASES = {
    # Llama: GQA, SwiGLU, RMSNorm; 2 data-parallel ranks, ZeRO-2, selective recompute
    "llama-dp2-zero2-selective": {},
    # GPT: 2 TP × 2 DP ranks with sequence parallelism, 2 micro-batches in flight on the first
    # pipeline stage, ZeRO-1, Adafactor's factored states
    "gpt-tp2-sp-dp2-pp2-adafactor": {
        "preset": "gpt3-175b", "tp": "8", "pp": "8", "dp": "4", "zero": "1",
        "sequence_parallel": "true", "recompute": "selective", "optimizer": "adafactor"},
    # one fp32 rank, full recompute, SGD with momentum
    "gpt-fp32-full-momentum": {
        "preset": "gpt2", "dp": "1", "zero": "0", "recompute": "full", "optimizer": "momentum",
        "precision": "fp32"},
}


def run(runner, query: dict):
    params = MemoryParams.model_validate(query)
    job = runner.submit("memory", SCENE.verify, params, trace_of(SCENE, params))
    deadline = time.monotonic() + 120
    while not job.done and time.monotonic() < deadline:
        time.sleep(0.3)
    return params, job


@pytest.mark.workers
@pytest.mark.parametrize("name", sorted(CASES))
def test_measured_matches_predicted(runner, name):
    pytest.importorskip("torch")
    params, job = run(runner, CASES[name])
    assert job.status == "passed", (job.status, job.detail)
    scaled = scaled_config(params.config())
    assert job.world == scaled.dp * scaled.tp
    rows = {row[0]: row for row in job.report["table"]["rows"]}
    for state in ("parameters", "gradients", "optimizer states"):
        assert rows[state][-1] == "exact", rows[state]
    error = float(rows["activations"][-1].rstrip("%"))
    assert abs(error) <= 10
    assert job.max_abs_diff == 0
    assert not runner.live_pids()


def test_a_wrong_measurement_fails():
    """compare() is not a rubber stamp: a byte off in the gradients, or activations 20 % away,
    fail the check."""
    params = MemoryParams(preset="gpt2", dp=1, zero=0)
    trace = trace_of(SCENE, params)
    scaled = scaled_config(params.config())
    exact = rank_states(scaled)
    activations = ledger(scaled).bytes("activations")
    good = {"params": exact.params, "grads": exact.grads, "optimizer": exact.optimizer,
            "step_counters": exact.step_counters, "activations": int(activations),
            "activations_by_part": {}}
    assert compare(params, trace, {"ranks": [good]}).passed
    assert not compare(params, trace, {"ranks": [{**good, "grads": exact.grads + 1}]}).passed
    wrong = {**good, "activations": int(activations * 1.2)}
    verdict = compare(params, trace, {"ranks": [wrong]})
    assert not verdict.passed and "+20.0%" in verdict.detail
