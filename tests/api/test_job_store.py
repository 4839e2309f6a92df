"""The job store and the one runner (issue 29, item 2), in one process: two JobRunners over one
data directory behave as two workers of a server do — one holds the runner lock and runs every
job, either answers about any job, the queue limits count both, a runner that dies leaves its
running jobs marked "the server stopped" and its queue to the next, the store keeps a bounded
number of jobs, and a report's fields survive the round trip through SQLite.

No process is started: the runners' ``_run`` is a stand-in that holds each job until the test
lets it go. The real thing — two uvicorn servers, torchrun, a killed server — is
tests/workers/test_jobs_shared.py."""

from __future__ import annotations

import math
import threading
import time

import pytest

from app.jobs.election import RunnerLock, data_dir
from app.jobs.job import Check, ClientBusy, Job, QueueFull, Verdict
from app.jobs.runner import STOPPED, JobRunner
from app.jobs.store import JobStore

CHECK = Check(worker="workers/none.py", world=lambda p: 2, args=lambda p: [],
              compare=lambda p, t, r: Verdict(True, 0.0, "agrees"))


class Held(JobRunner):
    """Jobs 'run' until ``release`` is set, then pass; nothing is launched."""

    def __init__(self, data, **kw):
        self.release = threading.Event()
        self.ran: list[str] = []
        super().__init__(data=data, poll_s=0.05, **kw)
        self.resolve = lambda scene, query: (CHECK, {"query": query}, None, ())

    def _run(self, job, check, params, trace, extra_args):
        self.ran.append(job.id)
        self.release.wait(30)
        self._finish(job, "passed", f"ran {params}")


def wait_for(condition, limit_s: float = 10.0, what: str = ""):
    deadline = time.monotonic() + limit_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return value


@pytest.fixture
def two(tmp_path):
    first = Held(tmp_path, queue_limit=2, per_client=2)
    second = Held(tmp_path, queue_limit=2, per_client=2)
    yield first, second
    for runner in (first, second):
        runner.release.set()
        runner.shutdown()


def test_one_runner_runs_what_either_admits_and_either_answers(two):
    first, second = two
    assert first.is_runner and not second.is_runner
    job = second.submit("collective", CHECK, None, None, client="10.0.0.1", query="world=2")
    wait_for(lambda: first.get(job.id).status == "running", what="the runner to claim it")
    assert first.ran == [job.id] and second.ran == []  # the runner rebuilt it from its query
    assert second.get(job.id).status == "running"
    first.release.set()
    done = wait_for(lambda: (j := second.get(job.id)).done and j, what="the verdict")
    assert done.status == "passed" and done.detail == "ran {'query': 'world=2'}"
    assert first.get(job.id).to_dict() == done.to_dict()


def test_the_queue_limits_hold_across_workers(two):
    first, second = two
    a = first.submit("collective", CHECK, None, None, client="10.0.0.1", query="world=2")
    wait_for(lambda: first.get(a.id).status == "running", what="the first job to run")
    second.submit("collective", CHECK, None, None, client="10.0.0.1", query="world=3")
    with pytest.raises(ClientBusy, match="at most 2 per client"):
        first.submit("collective", CHECK, None, None, client="10.0.0.1", query="world=4")
    with pytest.raises(ClientBusy):
        second.submit("collective", CHECK, None, None, client="10.0.0.1", query="world=4")
    waiting = second.submit("collective", CHECK, None, None, client="10.0.0.2", query="world=5")
    assert second.get(waiting.id).ahead == 2  # one running, one queued before it
    with pytest.raises(QueueFull, match="2 jobs are already waiting"):
        first.submit("collective", CHECK, None, None, client="10.0.0.3", query="world=6")
    assert first.store.count("queued") == 2 and first.store.count("running") == 1


def test_a_dead_runners_running_job_is_marked_and_its_queue_runs_on(two):
    first, second = two
    running = second.submit("collective", CHECK, None, None, query="world=2")
    wait_for(lambda: first.get(running.id).status == "running", what="the first job to run")
    queued = second.submit("collective", CHECK, None, None, query="world=3")
    # the runner's process dies: the kernel lets its lock go; no code of it runs any more
    first._closed = True
    first.lock.release()
    wait_for(lambda: second.is_runner, what="the other worker to take over")
    lost = second.get(running.id)
    assert lost.status == "error" and lost.detail == STOPPED and lost.finished is not None
    wait_for(lambda: second.get(queued.id).status == "running", what="the queue to go on")
    second.release.set()
    assert wait_for(lambda: second.get(queued.id).done and second.get(queued.id)).status == "passed"


def test_a_restarted_server_finds_every_job(tmp_path):
    before = Held(tmp_path)
    record = before.record("pipeline", Verdict(False, 0.5, "disagrees", report={"x": [1, 2]},
                                               fields={"losses": [2.5, math.inf]},
                                               trace={"traceEvents": []}),
                           world=4, backend="nccl", device="H100")
    job = before.submit("collective", CHECK, None, None, query="world=2")
    wait_for(lambda: before.get(job.id).status == "running")
    before.shutdown()  # a clean stop marks its own running jobs at once
    after = Held(tmp_path)
    try:
        assert after.get(job.id).status == "error" and after.get(job.id).detail == STOPPED
        kept = after.get(record.id)
        assert kept.to_dict() == record.to_dict()
        assert kept.fields["losses"][1] == math.inf and kept.trace == {"traceEvents": []}
    finally:
        after.release.set()
        after.shutdown()


def test_old_jobs_are_pruned(tmp_path):
    store = JobStore(tmp_path, keep=5, max_age_s=3600)
    done = [Job(f"j{k}", "zero", 2, "gloo", status="passed", finished=time.time())
            for k in range(8)]
    for job in done:
        store.add(job)
    assert [store.get(j.id) is not None for j in done] == [False] * 3 + [True] * 5
    running = Job("r", "zero", 2, "gloo", status="running")
    store.add(running)  # a job not finished is never pruned, however old
    stale = Job("old", "zero", 2, "gloo", status="failed", finished=time.time() - 7200)
    store.add(stale)
    assert store.get("old") is None and store.get("r") is not None
    store.close()


def test_a_job_nobody_can_rebuild_is_an_error_that_says_so(tmp_path):
    runner = Held(tmp_path)
    other = Held(tmp_path)
    try:
        runner.resolve = None
        job = other.submit("stand-in", CHECK, None, None)  # no query: only `other` could run it
        done = wait_for(lambda: (j := runner.get(job.id)).done and j)
        assert done.status == "error" and "another process submitted" in done.detail
    finally:
        for r in (runner, other):
            r.release.set()
            r.shutdown()


def test_the_lock_is_held_by_one_open_file_at_a_time(tmp_path):
    a, b = RunnerLock(tmp_path / "runner.lock"), RunnerLock(tmp_path / "runner.lock")
    assert a.acquire() and not b.acquire()
    a.release()
    assert b.acquire()
    b.release()


def test_the_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("SHARDSCOPE_DATA", str(tmp_path / "mine"))
    assert data_dir() == (tmp_path / "mine").resolve() and (tmp_path / "mine").is_dir()
    monkeypatch.delenv("SHARDSCOPE_DATA")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert data_dir() == (tmp_path / "state" / "shardscope").resolve()
    from app.jobs.election import ROOT
    monkeypatch.setenv("SHARDSCOPE_DATA", str(ROOT / "data"))
    with pytest.raises(ValueError, match="must not be inside the source tree"):
        data_dir()
    assert not (ROOT / "data").exists()
