"""The warm pool: rank processes started ahead of a job, torch already loaded.

A 4-rank job through torchrun spends most of its 9–13 s starting processes and importing torch
(torchrun's own import, then each rank's). The pool keeps, per world size, that many processes
(app/jobs/pool_rank.py) that have imported torch and wait on stdin for a job; a job takes
``world`` of them, gives each its RANK, WORLD_SIZE, MASTER_ADDR and a fresh MASTER_PORT, and they
run the worker's script as torchrun would have (workers/common.start reads the same environment),
so the report and the verdict are the ones of a torchrun launch. Each process serves one job and
exits; the pool starts replacements once the job has ended (not during it: on a small machine
their imports would slow the job being watched).

* **Lazily**, on the first real run of a world size: a server most visitors only read would
  otherwise hold 8 × ~200 MB of idle torch processes from start-up, and each test that builds an
  app would pay for them. The first run of a size is cold (the same time as torchrun); the next
  ones are warm.
* **No more memory than it must**: only the world sizes used are kept, and a size unused for
  ``idle_s`` seconds (SHARDSCOPE_VERIFY_POOL_IDLE, default 300) is let go.
* **A crashed rank is replaced**: a waiting process that has died is dropped and another started
  before any job is given to it.
* **Dies with the server**: every process is started from one long-lived thread (``spawner``)
  with the server's pid as its launcher (workers/common._guard: PR_SET_PDEATHSIG and the parent
  check before torch loads).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from app.jobs.procs import kill_tree

ROOT = Path(__file__).resolve().parents[2]
RANK_SCRIPT = Path(__file__).resolve().parent / "pool_rank.py"


@dataclass
class PoolRank:
    proc: subprocess.Popen
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def give(self, script: str, argv: list[str], env: dict, log: Path) -> None:
        line = json.dumps({"script": script, "argv": argv, "env": env, "log": str(log)})
        self.proc.stdin.write((line + "\n").encode())
        self.proc.stdin.flush()
        self.proc.stdin.close()


class RankPool:
    def __init__(self, env: dict, *, idle_s: float = 300.0, log_dir: Path):
        self._env = {**env, "SHARDSCOPE_LAUNCHER_PID": str(os.getpid())}
        self.idle_s = idle_s
        self._log_dir = log_dir
        self._idle: dict[int, list[PoolRank]] = {}
        self._used: dict[int, float] = {}
        self._lock = threading.Lock()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool-spawner")
        self._closed = False
        self._reaper = threading.Thread(target=self._reap, daemon=True, name="pool-reaper")
        self._reaper.start()

    def take(self, world: int) -> list[PoolRank]:
        """``world`` waiting ranks (started now if the pool has fewer; they may still be
        importing torch: they read their job when ready)."""
        with self._lock:
            self._used[world] = time.monotonic()
            ready = [r for r in self._idle.get(world, []) if r.alive()]
            for dead in [r for r in self._idle.get(world, []) if not r.alive()]:
                _close(dead)
            taken, self._idle[world] = ready[:world], ready[world:]
        if len(taken) < world:
            taken += self._spawner.submit(self._start, world - len(taken)).result()
        return taken

    def refill(self, world: int) -> None:
        """Start replacements, in the background, up to ``world`` waiting ranks."""
        if not self._closed:
            self._spawner.submit(self._top_up, world)

    def pids(self) -> list[int]:
        with self._lock:
            return [r.pid for ranks in self._idle.values() for r in ranks if r.alive()]

    def waiting(self, world: int) -> int:
        with self._lock:
            return sum(1 for r in self._idle.get(world, []) if r.alive())

    def shutdown(self) -> None:
        self._closed = True
        with self._lock:
            ranks = [r for rs in self._idle.values() for r in rs]
            self._idle.clear()
        for r in ranks:
            _close(r)
        self._spawner.shutdown(wait=False, cancel_futures=True)

    # -- inside ---------------------------------------------------------------------------

    def _start(self, n: int) -> list[PoolRank]:
        """(on the spawner thread: PR_SET_PDEATHSIG follows the thread that forked)"""
        ranks = []
        for _ in range(n):
            with open(self._log_dir / "pool.log", "ab") as log:
                proc = subprocess.Popen([sys.executable, str(RANK_SCRIPT)], cwd=ROOT,
                                        env=self._env, stdin=subprocess.PIPE, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            ranks.append(PoolRank(proc))
        return ranks

    def _top_up(self, world: int) -> None:
        if self._closed:
            return
        with self._lock:
            alive = [r for r in self._idle.get(world, []) if r.alive()]
            missing = world - len(alive)
        if missing <= 0:
            return
        fresh = self._start(missing)
        with self._lock:
            if self._closed:
                for r in fresh:
                    _close(r)
                return
            self._idle.setdefault(world, []).extend(fresh)

    def _reap(self) -> None:
        """Every second: let go of the sizes unused for idle_s, replace dead waiting ranks."""
        while not self._closed:
            time.sleep(1.0)
            now = time.monotonic()
            stale, refill = [], []
            with self._lock:
                for world, ranks in self._idle.items():
                    if now - self._used.get(world, now) > self.idle_s:
                        stale += ranks
                        self._idle[world] = []
                    elif any(not r.alive() for r in ranks):
                        for r in ranks:
                            if not r.alive():
                                _close(r)
                        self._idle[world] = [r for r in ranks if r.alive()]
                        refill.append(world)
            for r in stale:
                _close(r)
            for world in refill:
                self.refill(world)


def _close(rank: PoolRank) -> None:
    """Let a waiting rank go: an empty line ends it; then make sure."""
    try:
        if rank.proc.stdin and not rank.proc.stdin.closed:
            rank.proc.stdin.close()
    except OSError:
        pass
    kill_tree(rank.pid)
