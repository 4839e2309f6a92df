"""Several workers, one truth (issue 29, item 2), with real servers and real runs: two uvicorn
processes over one data directory — a job posted to one is run by the other (the runner) and
answered by both, the per-client limit counts both, only the runner keeps a warm pool —; a
server killed mid-job and started again marks that job "the server stopped" and runs the one
that was queued behind it; ``shardscope serve --workers 2`` elects one of its two workers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest

from app.jobs.election import holder
from app.jobs.runner import STOPPED, kill_tree, torch_available
from tests.conftest import free_port

pytestmark = pytest.mark.skipif(not torch_available()[0], reason="needs torch")
ROOT = Path(__file__).resolve().parents[2]
JOB = "/api/verify/collective?op=all_reduce&algorithm=ring&world=2&count=8"


def start(data: Path, **env) -> tuple[subprocess.Popen, str]:
    """A server over ``data`` (its own port), once it answers."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory",
                             "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                            cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "SHARDSCOPE_DATA": str(data),
                                 **env})
    base = f"http://127.0.0.1:{port}"
    ready(proc, base)
    return proc, base


def ready(proc, base: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while True:
        try:
            urllib.request.urlopen(base + "/api/openapi.json", timeout=2).read()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)


def post(base: str, path: str = JOB) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(urllib.request.Request(base + path, method="POST"),
                                    timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def status(base: str, job: str) -> dict:
    with urllib.request.urlopen(f"{base}/api/verify/jobs/{job}", timeout=30) as r:
        assert r.headers["Cache-Control"] == "no-store"
        return json.loads(r.read())


def until(condition, limit_s: float = 120, what: str = ""):
    deadline = time.monotonic() + limit_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def pool_ranks(pid: int) -> list[int]:
    found = []
    for proc in psutil.Process(pid).children(recursive=True):
        try:
            if "pool_rank.py" in " ".join(proc.cmdline()):
                found.append(proc.pid)
        except psutil.Error:
            pass
    return found


def test_a_job_posted_to_one_worker_is_run_by_the_runner_and_read_from_both(tmp_path):
    first, a = start(tmp_path, SHARDSCOPE_VERIFY_PER_CLIENT="1")
    second, b = None, None
    try:
        assert holder(tmp_path / "runner.lock") == first.pid  # the first to start runs jobs
        second, b = start(tmp_path, SHARDSCOPE_VERIFY_PER_CLIENT="1")
        code, body = post(b)
        assert code == 202, body
        job = body["job"]
        assert status(a, job)["status"] in ("queued", "running")  # the other worker knows it
        code, busy = post(a)  # the same client, through the other worker: its share is taken
        assert code == 429 and "per client" in busy["detail"]
        done = until(lambda: (s := status(a, job))["status"] not in ("queued", "running") and s,
                     what="the verdict")
        assert done["status"] == "passed", done["detail"]
        assert status(b, job) == done
        # one pool, in the runner: it refills there after the job; the other never starts one
        until(lambda: len(pool_ranks(first.pid)) >= 2, 90, "the runner's pool to refill")
        assert pool_ranks(second.pid) == []
    finally:
        for proc in (first, second):
            if proc is not None:
                kill_tree(proc.pid)


def test_a_server_killed_mid_job_marks_it_and_runs_the_queue_after_a_restart(tmp_path):
    proc, base = start(tmp_path, SHARDSCOPE_VERIFY_POOL="0")
    again = None
    try:
        code, first = post(base)
        assert code == 202
        code, second = post(base)
        assert code == 202
        until(lambda: status(base, first["job"])["status"] == "running", 30, "the first to run")
        assert status(base, second["job"])["status"] == "queued"
        os.kill(proc.pid, signal.SIGKILL)  # no shutdown code runs
        proc.wait(10)
        again, base = start(tmp_path, SHARDSCOPE_VERIFY_POOL="0")
        lost = status(base, first["job"])
        assert lost["status"] == "error" and lost["detail"] == STOPPED, lost
        done = until(lambda: (s := status(base, second["job"]))["status"]
                     not in ("queued", "running") and s, what="the queued job after the restart")
        assert done["status"] == "passed", done["detail"]
    finally:
        for p in (proc, again):
            if p is not None:
                kill_tree(p.pid)


def test_serve_runs_one_worker_per_core_and_elects_one_runner(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port),
                             "--workers", "2"], cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT),
                                 "SHARDSCOPE_DATA": str(tmp_path)},
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        ready(proc, base)
        def spawned():
            found = [c.pid for c in psutil.Process(proc.pid).children()
                     if "spawn_main" in " ".join(c.cmdline())]
            return found if len(found) == 2 else None
        workers = until(spawned, 30, "two workers")
        until(lambda: holder(tmp_path / "runner.lock") in workers, 10, "a runner")
        code, body = post(base)
        assert code == 202
        # a fresh connection each time: the kernel hands them to either worker
        answers = {status(base, body["job"])["job"] for _ in range(12)}
        assert answers == {body["job"]}
    finally:
        kill_tree(proc.pid)


def test_serve_defaults_to_one_worker_per_core(monkeypatch):
    import uvicorn

    from app import cli
    asked = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: asked.update(kw))
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    assert cli.main(["serve"]) == 0
    assert asked["workers"] == (os.cpu_count() or 1) and asked["factory"] is True
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    cli.main(["serve"])
    assert asked["workers"] == 3
