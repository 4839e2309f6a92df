"""The job runner's judgement of how a worker ended, with a stand-in worker
(tests/workers/abort_after_report.py) instead of a scene's."""

from __future__ import annotations

import pytest

from app.jobs.runner import TEARDOWN_NOTE, Check, JobRunner, Verdict, torch_available
from tests.workers.launch import ended

pytestmark = pytest.mark.skipif(not torch_available()[0], reason="needs torch")


def _check(seen: list) -> Check:
    def compare(params, trace, report):
        seen.append(report)
        return Verdict(report["ranks"] == [0, 1], 0.0, "every rank reported.")
    return Check(worker="tests/workers/abort_after_report.py", world=lambda p: 2,
                 args=lambda p: list(p), compare=compare)


@pytest.mark.parametrize("abort", [False, True])
def test_a_crash_after_the_report_is_judged_on_the_report_and_said(abort):
    runner = JobRunner(timeout_s=60)
    seen: list = []
    job = ended(runner.submit("stand-in", _check(seen), ["--abort"] if abort else [], None))
    runner.shutdown()
    assert job.status == "passed", job.to_dict()
    assert seen and seen[0]["ranks"] == [0, 1]
    assert (TEARDOWN_NOTE in job.detail) == abort
    if abort:
        assert "signal 6" in job.detail or "exit code" in job.detail


# -- no rank outlives its job (issue 12, items 6–9) ------------------------------------------

import os  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import psutil  # noqa: E402

from app.jobs.runner import clean_orphans  # noqa: E402

STAND_IN = "abort_after_report.py"


def _ranks(root_pid: int, script: str = STAND_IN, pool: bool = False) -> list[psutil.Process]:
    """The rank processes below ``root_pid`` (found by their command line)."""
    try:
        family = psutil.Process(root_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for proc in family:
        try:
            line = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if (script in line or (pool and "pool_rank.py" in line)) and "launcher.py" not in line:
            found.append(proc)
    return found


def _wait_for(condition, limit_s: float = 120, what: str = ""):
    deadline = time.monotonic() + limit_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _gone(procs: list[psutil.Process], limit_s: float) -> list[int]:
    """The pids of ``procs`` still alive after ``limit_s`` (zombies count as gone)."""
    _, alive = psutil.wait_procs(procs, timeout=limit_s)
    return [p.pid for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def _heartbeat_folder(rank: psutil.Process) -> Path:
    return Path(rank.environ()["SHARDSCOPE_HEARTBEAT"])


@pytest.mark.parametrize("when", ["while the ranks import torch", "mid-run"])
def test_no_rank_outlives_a_killed_launcher(when):
    runner = JobRunner(timeout_s=120)
    try:
        job = runner.submit("stand-in", _check([]), [], None, extra_args=("--hold-seconds", "60"))
        launcher = _wait_for(runner.live_pids, what="the launcher")[0]
        ranks = _wait_for(lambda: len(_ranks(launcher)) == 2 and _ranks(launcher),
                          what="torchrun's ranks")
        if when == "mid-run":  # past start(): beating, holding
            folder = _heartbeat_folder(ranks[0])
            _wait_for(lambda: all((folder / f"rank-{r}").exists() for r in (0, 1)),
                      what="the heartbeats")
        else:
            assert not (_heartbeat_folder(ranks[0]) / "rank-0").exists()  # still importing
        os.kill(launcher, signal.SIGKILL)
        assert _gone(ranks, 10) == [], f"ranks outlived their launcher ({when})"
        assert ended(job).status == "error"
    finally:
        runner.shutdown()


def test_a_stopped_rank_ends_the_job_with_the_reason_within_10_s():
    runner = JobRunner(timeout_s=120)
    try:
        job = runner.submit("stand-in", _check([]), [], None, extra_args=("--hold-seconds", "60"))
        launcher = _wait_for(runner.live_pids, what="the launcher")[0]
        ranks = _wait_for(lambda: len(_ranks(launcher)) == 2 and _ranks(launcher),
                          what="torchrun's ranks")
        folder = _heartbeat_folder(ranks[0])
        _wait_for(lambda: all((folder / f"rank-{r}").exists() for r in (0, 1)),
                  what="the heartbeats")
        stopped = time.monotonic()
        os.kill(ranks[1].pid, signal.SIGSTOP)
        ended(job)
        took = time.monotonic() - stopped
        assert job.status == "error", job.to_dict()
        assert "stopped" in job.detail and ("heartbeat" in job.detail or "SIGSTOP" in job.detail)
        assert took < 10, f"the stopped rank was noticed after {took:.1f} s"
        assert _gone(ranks, 10) == []
    finally:
        runner.shutdown()


def test_a_killed_servers_temp_folders_are_cleaned_by_the_next_start(tmp_path):
    dead = psutil.Popen(["true"])
    dead.wait()
    mine = tmp_path / f"shardscope-job-{os.getpid()}-abc"
    theirs = tmp_path / f"shardscope-job-{dead.pid}-abc"
    pool = tmp_path / f"shardscope-pool-{dead.pid}-abc"
    other = tmp_path / "shardscope-notes"
    for folder in (mine, theirs, pool, other):
        folder.mkdir()
        (folder / "report.json").write_text("{}")
    assert sorted(clean_orphans(tmp_path)) == sorted([theirs, pool])
    assert mine.exists() and other.exists() and not theirs.exists() and not pool.exists()


# -- the warm pool ------------------------------------------------------------------------------

def test_the_pool_gives_the_same_verdict_replaces_a_dead_rank_and_lets_go_when_idle():
    runner = JobRunner(timeout_s=120, pool=True, pool_idle_s=600)
    try:
        first_seen: list = []
        first = ended(runner.submit("stand-in", _check(first_seen), [], None))
        assert first.status == "passed", first.to_dict()
        assert first_seen[0]["ranks"] == [0, 1] and first_seen[0]["world"] == 2
        assert first.device == "CPU" and first.backend == "gloo"
        # the pool refills behind the job; a waiting rank that dies is replaced
        _wait_for(lambda: runner.ranks.waiting(2) == 2, what="the refill")
        victim = runner.ranks.pids()[0]
        os.kill(victim, signal.SIGKILL)
        _wait_for(lambda: runner.ranks.waiting(2) == 2 and victim not in runner.ranks.pids(),
                  limit_s=60, what="a replacement")
        waiting = set(runner.ranks.pids())
        seen: list = []
        second = ended(runner.submit("stand-in", _check(seen), ["--abort"], None))
        assert second.status == "passed" and TEARDOWN_NOTE in second.detail, second.to_dict()
        assert seen[0]["ranks"] == [0, 1]
        assert not waiting & set(runner.ranks.pids())  # each process serves one job
        # the idle timeout lets the size go
        runner.ranks.idle_s = 0.5
        _wait_for(lambda: runner.ranks.pids() == [] and runner.ranks.waiting(2) == 0,
                  limit_s=30, what="the idle timeout")
        assert _gone([psutil.Process(p) for p in waiting if psutil.pid_exists(p)], 10) == []
    finally:
        runner.shutdown()
