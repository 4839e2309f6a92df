"""Verification jobs: run a scene as a real torch.distributed job and compare it with the trace.

A :class:`Check` says how a scene runs for real: which torchrun worker, how many ranks, its
arguments, and how to compare the worker's JSON report with the simulation. The
:class:`JobRunner` runs at most ``concurrency`` jobs at a time (the others queue, up to
``queue_limit``, at most ``per_client`` queued or running per client), each under a time limit,
either through ``torchrun --standalone`` (app/jobs/launcher.py) or on the warm pool's
pre-started ranks (app/jobs/pool.py): the same worker, environment and report.

No rank outlives its job, whatever dies when:

* the job ends (passed, failed, crashed, timed out, stalled): the runner kills every process it
  started, walking the tree (torchrun starts ranks in sessions of their own);
* the launcher dies, even while its ranks still import torch: each rank's guard
  (workers/common._guard) runs before torch loads — PR_SET_PDEATHSIG, then a check that its
  parent is still the launcher whose pid the environment names, then a polling thread;
* the server dies: the launcher (or a pooled rank) has PR_SET_PDEATHSIG on the server's
  thread that started it and checks the server's pid the same way; the kernel's signal does not
  depend on the server running any code. Its temp folders (``shardscope-job-<server pid>-…``,
  ``shardscope-pool-<pid>-…``) are removed by the next runner that starts, once that pid is gone;
* a rank stops making progress (SIGSTOP, a deadlock holding the GIL): every rank's guard thread
  touches ``heartbeat/rank-<r>`` in the job's folder every 0.25 s; a beat older than
  ``stall_s`` (or a process in the stopped state) ends the job with the reason, well within 10 s
  instead of at the time limit.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import socket
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
    fields: dict = field(default_factory=dict)
    """top-level fields the scene's contract adds to the job's status (DESIGN.md: /train's job
    adds ``losses``, ``reference_losses``, ``measured`` …); they never replace the job's own"""
    trace: dict | None = None
    """the run's measured timeline as Chrome Trace Event JSON, or None: served at
    ``/api/verify/jobs/{id}/trace`` and named by the status's ``trace`` field"""


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
    nodes: Callable[[Any], int] | None = None
    """params → how many torchrun launchers to start (``--nnodes``), meeting on 127.0.0.1;
    None or 1: one ``--standalone`` launch (or the warm pool)"""


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
    client: str = ""
    device: str = ""
    source: str = "server"
    """"server" (run here) or "uploaded" (a report from the visitor's own cluster)"""
    fields: dict = field(default_factory=dict)
    """the verdict's extra top-level status fields (:attr:`Verdict.fields`)"""
    trace: dict | None = None
    """the verdict's measured timeline (:attr:`Verdict.trace`)"""

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return (self.finished or time.monotonic()) - self.started

    @property
    def done(self) -> bool:
        return self.status in ("passed", "failed", "error")

    def to_dict(self) -> dict:
        own = {"job": self.id, "scene": self.scene, "status": self.status,
               "backend": self.backend, "world": self.world,
               "max_abs_diff": self.max_abs_diff, "detail": self.detail,
               "elapsed_s": round(self.elapsed_s, 3), "report": self.report,
               "device": self.device, "source": self.source}
        if self.trace is not None:
            own["trace"] = f"/api/verify/jobs/{self.id}/trace"
        return {**self.fields, **own}


def torch_available() -> tuple[bool, str]:
    """Whether this server can run real jobs, and if not, what to install."""
    if importlib.util.find_spec("torch") is None:
        return False, ("Real runs need PyTorch, which is not installed on this server: "
                       "install the verify extra with  pip install -e '.[verify]'  "
                       "(or run  make test, which installs it).")
    return True, ""


class QueueFull(Exception):
    pass


class ClientBusy(QueueFull):
    """This client already has its share of the queue."""


TEMP_PREFIX = "shardscope-"
_OWNED = re.compile(r"^shardscope-(?:job|pool)-(\d+)-")


def clean_orphans(folder: Path | None = None) -> list[Path]:
    """Remove the temp folders of servers that were killed (their owner pid is gone)."""
    folder = Path(folder or tempfile.gettempdir())
    removed = []
    for path in folder.glob(TEMP_PREFIX + "*"):
        match = _OWNED.match(path.name)
        if match and path.is_dir() and not psutil.pid_exists(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JobRunner:
    def __init__(self, *, concurrency: int = 1, queue_limit: int = 8, timeout_s: float = 60.0,
                 backend: str = "gloo", max_world: int = 8, keep: int = 200,
                 per_client: int = 2, stall_s: float = 6.0, pool: bool = False,
                 pool_idle_s: float = 300.0):
        self.concurrency = concurrency
        self.queue_limit = queue_limit
        self.timeout_s = timeout_s
        self.backend = backend
        self.max_world = max_world
        self.per_client = per_client
        self.stall_s = stall_s
        self._keep = keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verify")
        self._ids = itertools.count(1)
        self._live: dict[str, list] = {}
        self._closed = False
        clean_orphans()
        self._env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
                     "PYTHONUNBUFFERED": "1", "SHARDSCOPE_SERVER_PID": str(os.getpid())}
        self.ranks = None
        if pool:
            from app.jobs.pool import RankPool
            self._pool_dir = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}pool-{os.getpid()}-"))
            self.ranks = RankPool(self._env, idle_s=pool_idle_s, log_dir=self._pool_dir)

    @classmethod
    def from_environment(cls) -> JobRunner:
        env = os.environ
        return cls(concurrency=int(env.get("SHARDSCOPE_VERIFY_CONCURRENCY", "1")),
                   queue_limit=int(env.get("SHARDSCOPE_VERIFY_QUEUE", "8")),
                   timeout_s=float(env.get("SHARDSCOPE_VERIFY_TIMEOUT", "60")),
                   backend=env.get("SHARDSCOPE_VERIFY_BACKEND", "gloo"),
                   max_world=int(env.get("SHARDSCOPE_VERIFY_MAX_WORLD", "8")),
                   per_client=int(env.get("SHARDSCOPE_VERIFY_PER_CLIENT", "2")),
                   stall_s=float(env.get("SHARDSCOPE_VERIFY_STALL", "6")),
                   pool=env.get("SHARDSCOPE_VERIFY_POOL", "1") != "0",
                   pool_idle_s=float(env.get("SHARDSCOPE_VERIFY_POOL_IDLE", "300")))

    # -- public ---------------------------------------------------------------------------

    def submit(self, scene: str, check: Check, params: Any, trace: Any,
               extra_args: tuple[str, ...] = (), client: str = "") -> Job:
        """Queue a job; ``client`` (the requester's address) may hold at most ``per_client``
        jobs queued or running, so that no one client holds every slot."""
        with self._lock:
            waiting = sum(1 for j in self._jobs.values() if j.status == "queued")
            if self._closed or waiting >= self.queue_limit:
                raise QueueFull(f"{waiting} jobs are already waiting; try again in a moment")
            mine = sum(1 for j in self._jobs.values() if not j.done and j.client == client)
            if client and mine >= self.per_client:
                raise ClientBusy(f"you already have {mine} real run{'s' if mine != 1 else ''} "
                                 f"queued or running (at most {self.per_client} per client); "
                                 f"wait for {'them' if mine != 1 else 'it'} to end")
            job = Job(f"{next(self._ids):06d}-{os.urandom(3).hex()}", scene,
                      check.world(params), self.backend, client=client)
            self._jobs[job.id] = job
            while len(self._jobs) > self._keep:
                oldest = next(iter(self._jobs.values()))
                if not oldest.done:
                    break
                self._jobs.popitem(last=False)
        self._pool.submit(self._run, job, check, params, trace, extra_args)
        return job

    def record(self, scene: str, verdict: Verdict, *, world: int, backend: str,
               device: str) -> Job:
        """A finished job for a report the visitor ran elsewhere (app/routes/verify.py)."""
        now = time.monotonic()
        job = Job(f"{next(self._ids):06d}-{os.urandom(3).hex()}", scene, world, backend,
                  status="passed" if verdict.passed else "failed",
                  max_abs_diff=verdict.max_abs_diff, detail=verdict.detail,
                  report=verdict.report, fields=dict(verdict.fields), trace=verdict.trace,
                  created=now, started=now, finished=now,
                  device=device, source="uploaded")
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > self._keep and next(iter(self._jobs.values())).done:
                self._jobs.popitem(last=False)
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
        """Process ids of the running jobs' launchers (torchrun), or their ranks on the pool."""
        with self._lock:
            procs = [p for ps in self._live.values() for p in ps]
        return [p.pid for p in procs if p.poll() is None]

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            live = [p for ps in self._live.values() for p in ps]
        for proc in live:
            kill_tree(proc.pid)
        if self.ranks is not None:
            self.ranks.shutdown()
            shutil.rmtree(self._pool_dir, ignore_errors=True)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- one job ---------------------------------------------------------------------------

    def _run(self, job: Job, check: Check, params: Any, trace: Any,
             extra_args: tuple[str, ...]) -> None:
        job.started = time.monotonic()
        job.status = "running"
        ok, reason = torch_available()
        if not ok:
            return self._finish(job, "error", reason)
        workdir = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}job-{os.getpid()}-"))
        report_path = workdir / "report.json"
        log_path = workdir / "torchrun.log"
        beats = workdir / "heartbeat"
        beats.mkdir()
        argv = [*check.args(params), "--backend", self.backend, "--out", str(report_path),
                *extra_args]
        env = {**self._env, "SHARDSCOPE_JOB": job.id, "SHARDSCOPE_HEARTBEAT": str(beats)}
        nodes = check.nodes(params) if check.nodes is not None else 1
        try:
            if nodes > 1:
                procs = self._launch_nodes(job, check.worker, argv, env, log_path, nodes)
            elif self.ranks is not None:
                procs = self._launch_pool(job, check.worker, argv, env, log_path)
            else:
                procs = [self._launch_torchrun(job, check.worker, argv, env, log_path)]
            with self._lock:
                self._live[job.id] = procs
            try:
                code, why = self._watch(job, procs, beats)
            finally:
                for proc in procs:
                    kill_tree(proc.pid)
                with self._lock:
                    self._live.pop(job.id, None)
                if self.ranks is not None and nodes == 1:
                    self.ranks.refill(job.world)
            if why:
                return self._finish(job, "error", why)
            if not report_path.exists():
                return self._finish(job, "error", _failure_reason(code, log_path))
            report = json.loads(report_path.read_text())
            job.backend = report.get("backend", job.backend)
            job.device = str(report.get("device", ""))
            verdict = check.compare(params, trace, report)
            job.max_abs_diff = verdict.max_abs_diff
            job.report = verdict.report
            job.fields = dict(verdict.fields)
            job.trace = verdict.trace
            detail = verdict.detail
            if code != 0:
                detail += f" {TEARDOWN_NOTE} ({_failure_reason(code, log_path)})"
            self._finish(job, "passed" if verdict.passed else "failed", detail)
        except Exception as error:  # a bad report must not take the server down
            self._finish(job, "error", f"{type(error).__name__}: {error}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _launch_torchrun(self, job: Job, worker: str, argv: list[str], env: dict,
                         log_path: Path) -> subprocess.Popen:
        command = [sys.executable, str(ROOT / "app/jobs/launcher.py"), "--standalone",
                   "--nproc-per-node", str(job.world), "--max-restarts", "0",
                   str(ROOT / worker), *argv]
        with open(log_path, "wb") as log:
            return subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def _launch_nodes(self, job: Job, worker: str, argv: list[str], env: dict,
                      log_path: Path, nodes: int) -> list[subprocess.Popen]:
        """``nodes`` torchrun launchers on this machine, as on a cluster: ``--nnodes``, node
        ranks 0 … nodes − 1, world/nodes ranks each, a static rendezvous on 127.0.0.1."""
        port, procs = str(free_port()), []
        for node in range(nodes):
            command = [sys.executable, str(ROOT / "app/jobs/launcher.py"), "--nnodes",
                       str(nodes), "--node-rank", str(node), "--nproc-per-node",
                       str(job.world // nodes), "--master-addr", "127.0.0.1", "--master-port",
                       port, "--max-restarts", "0", str(ROOT / worker), *argv]
            log = log_path.with_name(f"{log_path.stem}-node{node}{log_path.suffix}")
            with open(log if node else log_path, "wb") as out:
                procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=out,
                                              stderr=subprocess.STDOUT, start_new_session=True))
        return procs

    def _launch_pool(self, job: Job, worker: str, argv: list[str], env: dict,
                     log_path: Path) -> list[subprocess.Popen]:
        """The job's ranks from the warm pool, each given the environment torchrun gives."""
        ranks = self.ranks.take(job.world)
        port = str(free_port())
        for r, rank in enumerate(ranks):
            rank.give(worker, argv, {
                "SHARDSCOPE_JOB": job.id, "SHARDSCOPE_HEARTBEAT": env["SHARDSCOPE_HEARTBEAT"],
                "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(job.world),
                "LOCAL_WORLD_SIZE": str(job.world), "GROUP_RANK": "0", "ROLE_RANK": str(r),
                "ROLE_WORLD_SIZE": str(job.world), "ROLE_NAME": "default",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                "TORCHELASTIC_RUN_ID": job.id}, log_path)
        return [rank.proc for rank in ranks]

    def _watch(self, job: Job, procs: list[subprocess.Popen], beats: Path
               ) -> tuple[int, str]:
        """Wait for the job's processes: (exit code, "") when they end — for pooled ranks, as
        torchrun judges: the first rank that fails ends the others —, or (code, why) when
        the time limit passes or a rank stalls."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed or all(c == 0 for c in codes):
                if failed and len(procs) > 1:
                    time.sleep(0.2)  # let rank 0 finish a report it was writing
                return (failed[0] if failed else 0), ""
            if time.monotonic() > deadline:
                return -9, (f"the workers did not finish within {self.timeout_s:g} s and were "
                            f"stopped")
            why = self._stalled(job, procs, beats)
            if why:
                return -9, why
            time.sleep(0.25)

    def _stalled(self, job: Job, procs: list[subprocess.Popen], beats: Path) -> str:
        now = time.time()
        for r in range(job.world):
            beat = beats / f"rank-{r}"
            try:
                age = now - beat.stat().st_mtime
            except FileNotFoundError:
                continue  # not started yet: the time limit covers a rank that never starts
            if age > self.stall_s and _alive(beat):
                return (f"rank {r} stopped making progress: no heartbeat for {age:.1f} s "
                        f"(limit {self.stall_s:g} s), so the job was stopped")
        for proc in procs:
            try:
                family = [psutil.Process(proc.pid)]
                family += family[0].children(recursive=True)
                for member in family:
                    if member.status() == psutil.STATUS_STOPPED:
                        return (f"a rank (pid {member.pid}) was stopped (SIGSTOP) and made no "
                                f"progress, so the job was stopped")
            except psutil.NoSuchProcess:
                continue
        return ""

    def _finish(self, job: Job, status: str, detail: str) -> None:
        job.detail = detail
        job.finished = time.monotonic()
        job.status = status


def _alive(beat: Path) -> bool:
    """Whether the rank that writes ``beat`` (its pid inside) is still running."""
    try:
        text = beat.read_text()
        if not text:
            return True  # being written
        proc = psutil.Process(int(text))
        return proc.status() != psutil.STATUS_ZOMBIE
    except (ValueError, OSError, psutil.Error):
        return False


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
