"""workers/tensor_parallel.py on real gloo ranks: every block, with and without sequence
parallelism, on 2 and 4 processes — outputs and weight gradients equal the simulation's to 1e-5
relative and the collectives called are the predicted ones with the predicted sizes; then the
same through the page's job runner, and a doctored report that the check must reject."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")

from app.sim.tensor_parallel.params import TensorParallelParams  # noqa: E402
from app.sim.tensor_parallel.simulate import simulate  # noqa: E402
from app.scenes.tensor_parallel.check import compare  # noqa: E402
from tests.workers.launch import torchrun  # noqa: E402

SIZES = dict(tokens=4, hidden=8, ffn=16, heads=4, vocab=16, seed=5)


def run_suite(world: int, out: Path) -> dict:
    args = [f"--{k}={v}" for k, v in SIZES.items()]
    report, _ = torchrun("workers/tensor_parallel.py", world, ["--suite", *args], out, 180)
    return report


@pytest.fixture(scope="module", params=[2, 4], ids=["2-ranks", "4-ranks"])
def suite(request, tmp_path_factory):
    world = request.param
    return world, run_suite(world, tmp_path_factory.mktemp("tp") / "report.json")


@pytest.mark.workers
def test_every_block_matches_the_simulation(suite):
    world, report = suite
    assert report["backend"] == "gloo" and report["world"] == world
    assert len(report["suite"]) == 10
    for entry in report["suite"]:
        p = TensorParallelParams(block=entry["block"], tp=world,
                                 sequence_parallel=entry["sequence_parallel"], **SIZES)
        verdict = compare(p, simulate(p), entry)
        assert verdict.passed, (entry["block"], entry["sequence_parallel"], verdict.detail)
        assert verdict.max_abs_diff < 1e-12       # float64 on both sides
        called = [c["op"] for c in entry["ranks"][0]["comm"]]
        assert called == [c.op for c in simulate(p).comm]


@pytest.mark.workers
def test_the_check_rejects_a_wrong_number_or_a_missing_collective(suite):
    world, report = suite
    entry = next(e for e in report["suite"] if e["block"] == "mlp" and e["sequence_parallel"])
    p = TensorParallelParams(block="mlp", tp=world, sequence_parallel=True, **SIZES)
    trace = simulate(p)
    wrong = copy.deepcopy(entry)
    wrong["ranks"][world - 1]["grads"]["B"][0][0] += 1e-3
    verdict = compare(p, trace, wrong)
    assert not verdict.passed and "relative" in verdict.detail
    missing = copy.deepcopy(entry)
    for rank in missing["ranks"]:
        rank["comm"] = rank["comm"][:-1]        # as if the LayerNorm all-reduce were skipped
    verdict = compare(p, trace, missing)
    assert not verdict.passed and "predicts" in verdict.detail


@pytest.mark.workers
def test_run_for_real_through_the_job_runner(client):
    query = "block=attention&tp=2&sequence_parallel=true&tokens=4&hidden=8&heads=4"
    r = client.post(f"/api/verify/tensor-parallel?{query}")
    assert r.status_code == 202
    job = r.json()["job"]
    deadline = time.monotonic() + 120
    while True:
        status = client.get(f"/api/verify/jobs/{job}").json()
        if status["status"] not in ("queued", "running"):
            break
        assert time.monotonic() < deadline, status
        time.sleep(0.5)
    assert status["status"] == "passed", status["detail"]
    assert status["world"] == 2 and status["backend"] == "gloo"
    assert "predicted collectives" in status["detail"]
    html = client.get(f"/verify/jobs/{job}").text
    assert "Passed" in html and "dW_qkv" in html
