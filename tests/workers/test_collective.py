"""Real runs: 4 gloo ranks replay every collective and call torch's own; the job runner keeps
its promises when a worker crashes, hangs, or torch is missing."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from app.sim.collectives.params import CollectiveParams
from app.scene import trace_of
from app.scenes.collective import SCENE
from app.jobs import runner as jobs_module
from app.scenes.collective.check import CHECK, compare
from app.jobs.runner import JobRunner
from tests.workers.launch import ended, torchrun

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.workers

CASES = ["all_reduce:ring", "reduce_scatter:ring", "all_gather:ring", "broadcast:ring",
         "reduce:ring", "all_to_all:ring", "all_reduce:tree", "all_reduce:halving_doubling",
         "all_to_all:direct"]


def test_every_op_matches_the_simulation_frame_by_frame(tmp_path):
    out = tmp_path / "report.json"
    report, _ = torchrun("workers/collective.py", 4,
                         ["--cases", ",".join(CASES), "--count", "8", "--seed", "5", "--root",
                          "2", "--repeats", "2"], out)
    assert report["backend"] == "gloo" and report["world"] == 4
    assert len(report["cases"]) == len(CASES)
    for case in report["cases"]:
        params = CollectiveParams(op=case["op"], algorithm=case["algorithm"], world=4, count=8,
                                  seed=5, root=2)
        trace = trace_of(SCENE, params)
        verdict = compare(params, trace, {**report, "cases": [case]})
        assert verdict.passed, (case["op"], case["algorithm"], verdict.detail)
        assert verdict.max_abs_diff == 0
        assert len(verdict.report["diff_table"]) == trace.stats.steps
        assert verdict.report["timing"]["torch_us"] > 0


def test_a_wrong_report_fails():
    params = CollectiveParams(world=2, count=4)
    trace = trace_of(SCENE, params)
    outputs = [list(map(float, o)) for o in trace.outputs]
    replay = [[list(map(float, row)) for row in trace.values[k]] for k in range(1, 3)]
    good = {"world": 2, "cases": [{"torch_output": outputs, "replay": replay}]}
    assert compare(params, trace, good).passed
    outputs[1][0] += 1
    verdict = compare(params, trace, good)
    assert not verdict.passed and verdict.max_abs_diff == 1


def job_processes(job_id: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("SHARDSCOPE_JOB") == job_id:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return [p for p in found if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_verification_over_http_passes(client):
    r = client.post("/api/verify/collective?world=4&count=8&algorithm=tree")
    assert r.status_code == 202 and r.json()["status"] == "queued"
    job_id = r.json()["job"]
    deadline = time.monotonic() + 120
    while True:
        body = client.get(f"/api/verify/jobs/{job_id}").json()
        if body["status"] in ("passed", "failed", "error"):
            break
        assert time.monotonic() < deadline
        time.sleep(0.3)
    assert body["status"] == "passed", body
    assert body["backend"] == "gloo" and body["world"] == 4 and body["max_abs_diff"] == 0
    assert body["elapsed_s"] < 60


def test_a_killed_worker_gives_an_error_and_leaves_nothing_behind():
    runner = JobRunner(timeout_s=120)
    params = CollectiveParams(world=3, count=6)
    job = runner.submit("collective", CHECK, params, trace_of(SCENE, params),
                        extra_args=("--hold-seconds", "30"))
    deadline = time.monotonic() + 60
    while len(job_processes(job.id)) < 4:  # torchrun and its three ranks
        assert time.monotonic() < deadline, "the workers did not start"
        time.sleep(0.2)
    ranks = [p for p in job_processes(job.id) if "workers/collective.py" in " ".join(p.cmdline())
             and "torch.distributed.run" not in " ".join(p.cmdline())]
    os.kill(ranks[0].pid, signal.SIGKILL)
    finished = ended(job)
    assert finished.status == "error"
    assert "stopped" in finished.detail
    time.sleep(0.5)
    assert job_processes(job.id) == []
    runner.shutdown()


def test_a_hanging_job_times_out_and_is_killed():
    runner = JobRunner(timeout_s=4)
    params = CollectiveParams(world=2, count=4)
    job = runner.submit("collective", CHECK, params, trace_of(SCENE, params),
                        extra_args=("--hold-seconds", "60"))
    finished = ended(job, 60)
    assert finished.status == "error" and "did not finish within 4 s" in finished.detail
    time.sleep(0.5)
    assert job_processes(job.id) == []
    runner.shutdown()


def test_without_torch_a_job_is_an_error_that_says_what_to_install(monkeypatch):
    monkeypatch.setattr(jobs_module, "torch_available",
                        lambda: (False, "install the verify extra"))
    runner = JobRunner()
    params = CollectiveParams(world=2, count=4)
    job = ended(runner.submit("collective", CHECK, params, trace_of(SCENE, params)))
    assert job.status == "error" and "verify extra" in job.detail
    runner.shutdown()


def test_queue_limit_and_world_limit(client):
    r = client.post("/api/verify/collective?world=16&count=16")
    assert r.status_code == 422 and r.json()["detail"][0]["param"] == "world"
    assert client.get("/api/verify/jobs/nope").status_code == 404
    assert client.post("/api/verify/nothing?world=2").status_code == 404
