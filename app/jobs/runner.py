"""Verification jobs: run a scene as a real torch.distributed job and compare it with the trace.

A :class:`Check` says how a scene runs for real: which torchrun worker, how many ranks, its
arguments, and how to compare the worker's JSON report with the simulation. The
:class:`JobRunner` starts ``python -m torch.distributed.run --standalone`` (which picks a free
port for its rendezvous) as a subprocess in a new session, at most ``concurrency`` at a time
(the others queue, up to ``queue_limit``), under a time limit. When a job ends — passed, failed,
crashed or timed out — every process it started is killed, torchrun's workers included (they run
in sessions of their own, so the runner walks the process tree).
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    max_abs_diff: float
    detail: str
    report: dict = field(default_factory=dict)
    """what the page shows beyond the verdict (a diff table, timings)"""


@dataclass(frozen=True)
class Check:
    worker: str
    """path of the torchrun entry point, relative to the repository root"""
    world: Callable[[Any], int]
    args: Callable[[Any], list[str]]
    compare: Callable[[Any, Any, dict], Verdict]
    """(params, trace, the worker's report) → verdict"""
    unsupported: Callable[[Any], tuple[str, str] | None] | None = None
    """params → (parameter, why these params cannot run for real), or None when they can"""


@dataclass
class Job:
    id: str
    scene: str
    world: int
    backend: str
    status: str = "queued"
    max_abs_diff: float | None = None
    detail: str = ""
    report: dict = field(default_factory=dict)
    created: float = field(default_factory=time.monotonic)
    started: float | None = None
    finished: float | None = None
    ahead: int = 0

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started

    @property
    def done(self) -> bool:
        return self.status in ("passed", "failed", "error")

    def to_dict(self) -> dict:
        return {"job": self.id, "scene": self.scene, "status": self.status,
                "backend": self.backend, "world": self.world,
                "max_abs_diff": self.max_abs_diff, "detail": self.detail,
                "elapsed_s": round(self.elapsed_s, 3), "report": self.report}


def torch_available() -> tuple[bool, str]:
    """Whether this server can run real jobs, and if not, what to install."""
    if importlib.util.find_spec("torch") is None:
        return False, ("Real runs need PyTorch, which is not installed on this server: "
                       "install the verify extra with  pip install -e '.[verify]'  "
                       "(or run  make test, which installs it).")
    return True, ""


class QueueFull(Exception):
    pass


class JobRunner:
    def __init__(self, *, concurrency: int = 1, queue_limit: int = 8, timeout_s: float = 60.0,
                 backend: str = "gloo", max_world: int = 8, keep: int = 200):
        self.concurrency = concurrency
        self.queue_limit = queue_limit
        self.timeout_s = timeout_s
        self.backend = backend
        self.max_world = max_world
        self._keep = keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verify")
        self._ids = itertools.count(1)
        self._live: dict[str, subprocess.Popen] = {}
        self._closed = False

    @classmethod
    def from_environment(cls) -> JobRunner:
        env = os.environ
        return cls(concurrency=int(env.get("SHARDSCOPE_VERIFY_CONCURRENCY", "1")),
                   queue_limit=int(env.get("SHARDSCOPE_VERIFY_QUEUE", "8")),
                   timeout_s=float(env.get("SHARDSCOPE_VERIFY_TIMEOUT", "60")),
                   backend=env.get("SHARDSCOPE_VERIFY_BACKEND", "gloo"),
                   max_world=int(env.get("SHARDSCOPE_VERIFY_MAX_WORLD", "8")))

    # -- public ---------------------------------------------------------------------------

    def submit(self, scene: str, check: Check, params: Any, trace: Any,
               extra_args: tuple[str, ...] = ()) -> Job:
        with self._lock:
            waiting = sum(1 for j in self._jobs.values() if j.status == "queued")
            if self._closed or waiting >= self.queue_limit:
                raise QueueFull(f"{waiting} jobs are already waiting; try again in a moment")
            job = Job(f"{next(self._ids):06d}-{os.urandom(3).hex()}", scene,
                      check.world(params), self.backend)
            self._jobs[job.id] = job
            while len(self._jobs) > self._keep:
                oldest = next(iter(self._jobs.values()))
                if not oldest.done:
                    break
                self._jobs.popitem(last=False)
        self._pool.submit(self._run, job, check, params, trace, extra_args)
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job.status == "queued":
                job.ahead = sum(1 for j in self._jobs.values()
                                if j.status in ("queued", "running") and j.created < job.created)
            return job

    def info(self, check: Check, params: Any) -> dict:
        """What a page's "Run on real gloo" button needs to know."""
        available, reason = torch_available()
        world = check.world(params)
        too_big = (f"Real runs on this server are limited to {self.max_world} ranks; this "
                   f"one needs {world}. Lower the rank count, or run the command below on a "
                   f"cluster." if world > self.max_world else "")
        why = check.unsupported(params) if check.unsupported is not None else None
        if why is not None and not too_big:
            too_big = why[1][:1].upper() + why[1][1:] + "."
        return {"available": available, "reason": reason, "too_big": too_big,
                "backend": self.backend}

    def live_pids(self) -> list[int]:
        """Process ids of torchrun launchers still running (for tests and shutdown)."""
        with self._lock:
            return [p.pid for p in self._live.values() if p.poll() is None]

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live.values())
        for proc in live:
            kill_tree(proc.pid)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one job ---------------------------------------------------------------------------

    def _run(self, job: Job, check: Check, params: Any, trace: Any,
             extra_args: tuple[str, ...]) -> None:
        job.started = time.monotonic()
        job.status = "running"
        ok, reason = torch_available()
        if not ok:
            return self._finish(job, "error", reason)
        workdir = Path(tempfile.mkdtemp(prefix="shardscope-job-"))
        report_path = workdir / "report.json"
        log_path = workdir / "torchrun.log"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", str(job.world), "--max-restarts", "0",
                   str(ROOT / check.worker), *check.args(params), "--backend", self.backend,
                   "--out", str(report_path), *extra_args]
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
               "PYTHONUNBUFFERED": "1", "SHARDSCOPE_JOB": job.id}
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                with self._lock:
                    self._live[job.id] = proc
                try:
                    code = proc.wait(timeout=self.timeout_s)
                except subprocess.TimeoutExpired:
                    kill_tree(proc.pid)
                    return self._finish(job, "error", f"the workers did not finish within "
                                                      f"{self.timeout_s:g} s and were stopped")
                finally:
                    kill_tree(proc.pid)
                    with self._lock:
                        self._live.pop(job.id, None)
            if not report_path.exists():
                return self._finish(job, "error", _failure_reason(code, log_path))
            report = json.loads(report_path.read_text())
            job.backend = report.get("backend", job.backend)
            verdict = check.compare(params, trace, report)
            job.max_abs_diff = verdict.max_abs_diff
            job.report = verdict.report
            detail = verdict.detail
            if code != 0:
                detail += f" {TEARDOWN_NOTE} ({_failure_reason(code, log_path)})"
            self._finish(job, "passed" if verdict.passed else "failed", detail)
        except Exception as error:  # a bad report must not take the server down
            self._finish(job, "error", f"{type(error).__name__}: {error}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _finish(self, job: Job, status: str, detail: str) -> None:
        job.detail = detail
        job.finished = time.monotonic()
        job.status = status


def kill_tree(pid: int) -> None:
    """Kill ``pid`` and every process below it, including children in other sessions."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    try:
        family = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        family = [root]
    for proc in family:
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(family, timeout=5)
    try:  # reap the launcher so it leaves no zombie
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


TEARDOWN_NOTE = ("The report was complete, then a rank crashed while leaving the process group: "
                 "gloo can abort a rank whose peer closes its connection right after the final "
                 "barrier (pytorch/gloo#155); the numbers above are unaffected.")
"""Why a job whose workers wrote their report but then exited badly is still judged: rank 0
writes the report only after gathering every rank's results (workers/common.py finish), so
what fails afterwards is the teardown, not the computation."""


def _failure_reason(code: int, log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
    interesting = [line for line in lines if any(word in line for word in (
        "Error", "error", "exitcode", "Signal", "signal", "Traceback", "Killed"))]
    tail = " | ".join((interesting or lines)[-4:])[-600:]
    how = f"exit code {code}" if code >= 0 else f"signal {-code}"
    return f"the workers stopped with {how}: {tail or 'no output'}"
