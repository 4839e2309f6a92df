"""Watching a running job's processes: how they ended, or why they were stopped.

A job ends when its processes do — for ranks from the warm pool as torchrun judges: the first
rank that fails ends the others —, when its time limit passes, or when a rank stops making
progress: every rank's guard thread (workers/common._guard) touches ``heartbeat/rank-<r>`` in the
job's folder every 0.25 s, and a beat older than ``stall_s`` (or a process in the stopped state)
ends the job with the reason, well within 10 s instead of at the time limit.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil

from app.jobs.procs import beat_alive

TEARDOWN_NOTE = ("The report was complete, then a rank crashed while leaving the process group: "
                 "gloo can abort a rank whose peer closes its connection right after the final "
                 "barrier (pytorch/gloo#155); the numbers above are unaffected.")
"""Why a job whose workers wrote their report but then exited badly is still judged: rank 0
writes the report only after gathering every rank's results (workers/common.py finish), so
what fails afterwards is the teardown, not the computation."""


def watch(procs: list[subprocess.Popen], beats: Path, world: int, *, timeout_s: float,
          stall_s: float) -> tuple[int, str]:
    """Wait for ``procs``: (exit code, "") when they end, or (code, why) when the time limit
    passes or a rank stalls."""
    deadline = time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed or all(c == 0 for c in codes):
            if failed and len(procs) > 1:
                time.sleep(0.2)  # let rank 0 finish a report it was writing
            return (failed[0] if failed else 0), ""
        if time.monotonic() > deadline:
            return -9, f"the workers did not finish within {timeout_s:g} s and were stopped"
        why = stalled(procs, beats, world, stall_s)
        if why:
            return -9, why
        time.sleep(0.25)


def stalled(procs: list[subprocess.Popen], beats: Path, world: int, stall_s: float) -> str:
    """Why the job has stopped making progress, or ""."""
    now = time.time()
    for r in range(world):
        beat = beats / f"rank-{r}"
        try:
            age = now - beat.stat().st_mtime
        except FileNotFoundError:
            continue  # not started yet: the time limit covers a rank that never starts
        if age > stall_s and beat_alive(beat):
            return (f"rank {r} stopped making progress: no heartbeat for {age:.1f} s "
                    f"(limit {stall_s:g} s), so the job was stopped")
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


def failure_reason(code: int, log_path: Path) -> str:
    """What a worker's exit and the last telling lines of its log say."""
    lines = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
    interesting = [line for line in lines if any(word in line for word in (
        "Error", "error", "exitcode", "Signal", "signal", "Traceback", "Killed"))]
    tail = " | ".join((interesting or lines)[-4:])[-600:]
    how = f"exit code {code}" if code >= 0 else f"signal {-code}"
    return f"the workers stopped with {how}: {tail or 'no output'}"
