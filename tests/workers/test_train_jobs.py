"""/train's real run through the job runner, as the page starts it: POST /api/verify/train on
the warm pool (cold, then warm), two torchrun launchers as two nodes on loopback, and a killed
rank — the job says "error" within 10 s and leaves nothing running. The status carries the
contract's fields and a measured timeline that an independent reader opens."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest
from fastapi.testclient import TestClient

from app.jobs.runner import JobRunner
from app.main import create_app
from app.scenes.train import SCENE
from app.sim.train import TrainParams, simulate
from tests.trace_reader import read
from tests.workers.launch import ended, job_over_http

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.workers

FOUR = "tp=2&cp=1&pp=2&dp=1&ep=1&experts=4&steps=5"
SPLIT = ("step_s", "compute_s", "comm_exposed_s", "bubble_s")


@pytest.fixture(scope="module")
def pooled():
    runner = JobRunner(pool=True, timeout_s=240, max_world=8, stall_s=30)
    with TestClient(create_app(runner)) as client:
        yield client
    runner.shutdown()


def test_a_4_rank_run_passes_cold_then_warm_with_the_contract(pooled):
    seconds = []
    for attempt in ("cold", "warm"):
        began = time.monotonic()
        accepted = pooled.post(f"/api/verify/train?{FOUR}")
        assert accepted.status_code == 202 and accepted.json()["status"] == "queued"
        job = job_over_http(pooled, accepted.json()["job"], 240)
        seconds.append(time.monotonic() - began)
        assert job["status"] == "passed", job["detail"]
        assert job["world"] == 4 and job["backend"] == "gloo"
        assert len(job["losses"]) == len(job["reference_losses"]) == 5
        assert job["max_rel_loss_diff"] <= 1e-9 and job["max_rel_param_diff"] <= 1e-9
        for split in (job["measured"], job["predicted"]):
            assert set(split) == set(SPLIT) and all(v >= 0 for v in split.values())
        assert job["measured_over_predicted"] > 0
        assert set(job["calibration"]) == {"gflops", "kernel_us", "alpha_us", "link_gbs"}
        trace = pooled.get(job["trace"])
        assert trace.headers["content-type"].startswith("application/json")
        assert 'filename="train.trace.json"' in trace.headers["content-disposition"]
        lanes = read(trace.content)
        assert {pid for pid, _ in lanes} == {0, 1, 2, 3}       # a process per rank
        assert len(lanes) >= 4 * 3                             # compute, tp, pp, dp … per rank
    print(f"4 ranks, 5 steps: cold {seconds[0]:.1f} s, warm {seconds[1]:.1f} s")


def test_a_run_with_the_load_balancing_loss_reports_it_and_holds_it_to_one_process(pooled):
    """With α > 0 the verdict holds the load-balancing loss to the one process's too, and the
    report carries both series (cp 2 shares each micro-batch's tokens over two ranks)."""
    accepted = pooled.post("/api/verify/train?tp=1&cp=2&pp=1&dp=2&ep=2&experts=4&steps=2"
                           "&aux_loss_coeff=0.05")
    job = job_over_http(pooled, accepted.json()["job"], 240)
    assert job["status"] == "passed", job["detail"]
    assert len(job["aux_losses"]) == len(job["reference_aux_losses"]) == 2
    assert all(a > 0 for a in job["aux_losses"])
    assert job["max_rel_aux_loss_diff"] <= 1e-9
    assert "load-balancing loss to" in job["detail"]


def test_two_launchers_meet_as_two_nodes():
    p = TrainParams(tp=2, cp=1, pp=1, dp=2, ep=2, nodes=2, steps=2)
    runner = JobRunner(timeout_s=240, stall_s=30)
    try:
        job = ended(runner.submit("train", SCENE.verify, p, simulate(p)), 240)
    finally:
        runner.shutdown()
    status = job.to_dict()
    assert job.status == "passed", job.detail
    assert status["nodes"] == 2 and "2 launchers" in job.detail


def _ranks(launcher: int) -> list[psutil.Process]:
    try:
        family = psutil.Process(launcher).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in family if "workers/train/train.py" in " ".join(p.cmdline())
            and "launcher.py" not in " ".join(p.cmdline())]


def test_a_killed_rank_ends_the_job_as_error_within_10_s_leaving_nothing():
    p = TrainParams(tp=2, cp=1, pp=2, dp=1, ep=1, steps=2)
    runner = JobRunner(timeout_s=240, stall_s=30)
    try:
        job = runner.submit("train", SCENE.verify, p, simulate(p),
                            extra_args=("--hold-seconds", "60"))
        deadline = time.monotonic() + 120
        while not (runner.live_pids() and len(_ranks(runner.live_pids()[0])) == 4):
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.1)
        launcher = runner.live_pids()[0]
        ranks = _ranks(launcher)
        killed = time.monotonic()
        os.kill(ranks[2].pid, signal.SIGKILL)
        ended(job, 30)
        took = time.monotonic() - killed
        assert job.status == "error", job.to_dict()
        assert took < 10, f"the killed rank ended the job after {took:.1f} s"
        _, alive = psutil.wait_procs(ranks + [psutil.Process(launcher)]
                                     if psutil.pid_exists(launcher) else ranks, timeout=10)
        assert [q.pid for q in alive if q.status() != psutil.STATUS_ZOMBIE] == []
    finally:
        runner.shutdown()
