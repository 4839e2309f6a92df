"""Verification jobs: run a scene as a real torch.distributed job and compare it with the trace.

A :class:`Check` says how a scene runs for real: which torchrun worker, how many ranks, its
arguments, and how to compare the worker's JSON report with the simulation. The
:class:`JobRunner` admits jobs into the job store (app/jobs/store.py: at most ``queue_limit``
queued, at most ``per_client`` queued or running per client, across every worker of the server)
and, in the one process that holds the runner lock (app/jobs/election.py), runs at most
``concurrency`` of them at a time, oldest first, each under a time limit, either through
``torchrun --standalone`` (app/jobs/launcher.py) or on the warm pool's pre-started ranks
(app/jobs/pool.py): the same worker, environment and report. A job submitted in another worker
process is rebuilt from its scene and query (:attr:`JobRunner.resolve`, set by
app/routes/verify.py).

No rank outlives its job, whatever dies when:

* the job ends (passed, failed, crashed, timed out, stalled): the runner kills every process it
  started, walking the tree (torchrun starts ranks in sessions of their own);
* the launcher dies, even while its ranks still import torch: each rank's guard
  (workers/common._guard) runs before torch loads — PR_SET_PDEATHSIG, then a check that its
  parent is still the launcher whose pid the environment names, then a polling thread;
* the server dies: the launcher (or a pooled rank) has PR_SET_PDEATHSIG on the server's
  thread that started it and checks the server's pid the same way; the kernel's signal does not
  depend on the server running any code. Its temp folders (``shardscope-job-<server pid>-…``,
  ``shardscope-pool-<pid>-…``) are removed by the next runner that starts, once that pid is gone,
  and the next runner marks the job "error: the server stopped" in the store;
* a rank stops making progress (SIGSTOP, a deadlock holding the GIL): app/jobs/watch.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.jobs.election import RunnerLock, data_dir
from app.jobs.job import Check, ClientBusy, Job, QueueFull, Verdict, torch_available
from app.jobs.procs import TEMP_PREFIX, clean_orphans, free_port, kill_tree
from app.jobs.store import JobStore
from app.jobs.watch import TEARDOWN_NOTE, failure_reason, watch

__all__ = ["Check", "ClientBusy", "Job", "JobRunner", "QueueFull", "TEARDOWN_NOTE", "Verdict",
           "clean_orphans", "kill_tree", "torch_available"]

ROOT = Path(__file__).resolve().parents[2]

STOPPED = ("the server stopped while this job was running (it was restarted or killed); "
           "run it again")
"""The detail of a job whose runner died under it (DESIGN.md: "error: the server stopped")."""

Spec = tuple[Check, Any, Any, tuple[str, ...]]
"""What running a job takes: (check, params, trace, extra worker arguments)."""


class JobRunner:
    def __init__(self, *, concurrency: int = 1, queue_limit: int = 8, timeout_s: float = 60.0,
                 backend: str = "gloo", max_world: int = 8, keep: int = 200,
                 per_client: int = 2, stall_s: float = 6.0, pool: bool = False,
                 pool_idle_s: float = 300.0, data: Path | str | None = None,
                 poll_s: float = 0.2):
        """``data``: the server's data directory (:func:`app.jobs.election.data_dir`), whose
        store and runner lock every process of the server shares; None for a store of this
        runner's own in the temp folder, removed at shutdown (tests, one-process use)."""
        self.concurrency = concurrency
        self.queue_limit = queue_limit
        self.timeout_s = timeout_s
        self.backend = backend
        self.max_world = max_world
        self.per_client = per_client
        self.stall_s = stall_s
        self.poll_s = poll_s
        self._keep = keep
        clean_orphans()
        self._own_data = data is None
        folder = (Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}data-{os.getpid()}-"))
                  if data is None else Path(data))
        self.store = JobStore(folder, keep=keep)
        self.lock = RunnerLock(folder / "runner.lock")
        self._resolve: Callable[[str, str], Spec] | None = None
        self._ready = threading.Event()  # set once jobs from the store can be rebuilt
        self._jobs: OrderedDict[str, Job] = OrderedDict()  # this process's jobs, live objects
        self._local: dict[str, Spec] = {}  # what the jobs submitted here need to run
        self._running: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="verify")
        self._live: dict[str, list] = {}
        self._closed = False
        self._env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
                     "PYTHONUNBUFFERED": "1", "SHARDSCOPE_SERVER_PID": str(os.getpid())}
        self._pool_wanted, self._pool_idle_s = pool, pool_idle_s
        self.ranks = None
        if not self._lead():
            threading.Thread(target=self._campaign, daemon=True, name="runner-election").start()

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
                   pool_idle_s=float(env.get("SHARDSCOPE_VERIFY_POOL_IDLE", "300")),
                   data=data_dir())

    @property
    def resolve(self) -> Callable[[str, str], Spec] | None:
        """(scene, query) → what running that job takes, for jobs another process admitted
        (or a previous server: those still queued at a restart); set by app/routes/verify.py.
        The queue is not run before it is set (or a job is submitted here)."""
        return self._resolve

    @resolve.setter
    def resolve(self, function: Callable[[str, str], Spec] | None) -> None:
        self._resolve = function
        self._ready.set()

    @property
    def is_runner(self) -> bool:
        """Whether this process runs the jobs (holds the runner lock)."""
        return self.lock.held

    # -- public ---------------------------------------------------------------------------

    def submit(self, scene: str, check: Check, params: Any, trace: Any,
               extra_args: tuple[str, ...] = (), client: str = "",
               query: str | None = None) -> Job:
        """Queue a job; ``client`` (the requester's address) may hold at most ``per_client``
        jobs queued or running, so that no one client holds every slot. ``query`` (the scene's
        query string) lets any process of the server run it."""
        if self._closed:
            raise QueueFull("the server is stopping; try again in a moment")
        job = Job(_new_id(), scene, check.world(params), self.backend, client=client,
                  query=query, extra_args=list(extra_args))
        self.store.admit(job, queue_limit=self.queue_limit, per_client=self.per_client)
        with self._lock:
            self._local[job.id] = (check, params, trace, tuple(extra_args))
            self._remember(job)
        self._ready.set()
        self._wake.set()
        return job

    def record(self, scene: str, verdict: Verdict, *, world: int, backend: str,
               device: str) -> Job:
        """A finished job for a report the visitor ran elsewhere (app/routes/verify.py)."""
        now = time.time()
        job = Job(_new_id(), scene, world, backend,
                  status="passed" if verdict.passed else "failed",
                  max_abs_diff=verdict.max_abs_diff, detail=verdict.detail,
                  report=verdict.report, fields=dict(verdict.fields), trace=verdict.trace,
                  created=now, started=now, finished=now, device=device, source="uploaded")
        self.store.add(job)
        with self._lock:
            self._remember(job)
        return job

    def get(self, job_id: str) -> Job | None:
        """The job as the store has it (whichever process submitted or runs it)."""
        if self.store.closed:
            return self._jobs.get(job_id)
        return self.store.get(job_id)

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

    def settings(self) -> tuple:
        """What of this runner shapes a page (its real-run panel): fixed while it serves."""
        return (self.backend, self.max_world, torch_available()[0])

    def live_pids(self) -> list[int]:
        """Process ids of the running jobs' launchers (torchrun), or their ranks on the pool."""
        with self._lock:
            procs = [p for ps in self._live.values() for p in ps]
        return [p.pid for p in procs if p.poll() is None]

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            live = [p for ps in self._live.values() for p in ps]
        self._wake.set()
        for proc in live:
            kill_tree(proc.pid)
        if self.is_runner and not self.store.closed:
            self.store.abandon(STOPPED, owner=os.getpid())
        if self.ranks is not None:
            self.ranks.shutdown()
            shutil.rmtree(self._pool_dir, ignore_errors=True)
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()
        self.lock.release()
        if self._own_data:
            shutil.rmtree(self.store.folder, ignore_errors=True)

    # -- who runs the jobs -----------------------------------------------------------------

    def _lead(self) -> bool:
        """Become the runner if no other process is: then the jobs a dead runner left
        running are marked, the pool is made and the queue is run."""
        if self._closed or not self.lock.acquire():
            return False
        self.store.abandon(STOPPED)
        if self._pool_wanted:
            from app.jobs.pool import RankPool
            self._pool_dir = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}pool-{os.getpid()}-"))
            self.ranks = RankPool(self._env, idle_s=self._pool_idle_s, log_dir=self._pool_dir)
        threading.Thread(target=self._dispatch, daemon=True, name="verify-dispatch").start()
        return True

    def _campaign(self) -> None:
        while not self._closed and not self._lead():
            time.sleep(0.5)

    def _dispatch(self) -> None:
        """Start the oldest queued jobs while fewer than ``concurrency`` run (woken by a
        submission here, else every ``poll_s`` for those admitted by other processes)."""
        while not self._closed:
            self._wake.wait(self.poll_s)
            self._wake.clear()
            while (not self._closed and self._ready.is_set()
                   and len(self._running) < self.concurrency):
                try:
                    claimed = self.store.claim(os.getpid())
                except QueueFull:  # the store closed under us: stopping
                    return
                except sqlite3.Error as error:  # (busy past its timeout: the next round retries)
                    print(f"shardscope: the job store could not be read: {error}",
                          file=sys.stderr)
                    break
                if claimed is None:
                    break
                with self._lock:
                    job = self._jobs.get(claimed.id)
                    if job is None:
                        job = self._remember(claimed)
                    job.status, job.started = claimed.status, claimed.started
                    self._running.add(job.id)
                self._executor.submit(self._start, job)

    def _start(self, job: Job) -> None:
        try:
            spec = self._local.pop(job.id, None)
            if spec is None:
                if self.resolve is None or job.query is None:
                    return self._finish(job, "error", f"this server cannot run a {job.scene!r} "
                                                      f"job that another process submitted")
                spec = self.resolve(job.scene, job.query)
            self._run(job, *spec)
        except Exception as error:  # a job that cannot be rebuilt must not stop the queue
            self._finish(job, "error", f"{type(error).__name__}: {error}")
        finally:
            with self._lock:
                self._running.discard(job.id)
            self._wake.set()

    def _remember(self, job: Job) -> Job:
        """(under self._lock) keep this process's live object of ``job``, bounded."""
        self._jobs[job.id] = job
        while len(self._jobs) > self._keep:
            oldest = next(iter(self._jobs.values()))
            if not oldest.done:
                break
            self._jobs.popitem(last=False)
            self._local.pop(oldest.id, None)
        return job

    # -- one job ---------------------------------------------------------------------------

    def _run(self, job: Job, check: Check, params: Any, trace: Any,
             extra_args: tuple[str, ...]) -> None:
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
                code, why = watch(procs, beats, job.world, timeout_s=self.timeout_s,
                                  stall_s=self.stall_s)
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
                return self._finish(job, "error", failure_reason(code, log_path))
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
                detail += f" {TEARDOWN_NOTE} ({failure_reason(code, log_path)})"
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

    def _finish(self, job: Job, status: str, detail: str) -> None:
        """Store the job's end, then show it on the live object (whoever polls that object
        finds the store written once it says done)."""
        ended = replace(job, status=status, detail=detail, finished=time.time())
        self.store.save(ended)
        job.detail, job.finished, job.status = ended.detail, ended.finished, ended.status


def _new_id() -> str:
    """A job id, unique across the server's processes and restarts, in submission order."""
    return f"{int(time.time() * 1000):x}-{os.urandom(3).hex()}"
