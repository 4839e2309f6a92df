"""Running workers from tests: under torchrun as the job runner does (app/jobs/runner.py) —
gloo, one thread per rank, the repository on the path, every process killed afterwards — and
waiting for a runner's job to end.

gloo can abort a rank whose peer closes its connection right after the last collective
(pytorch/gloo#155: "Barrier followed by context destruction causes some participants to
fail"); on a loaded 2-core machine it happens now and then. A run is judged as the runner
judges it: a report written before the abort is the run's result; a run that aborts without
one is tried once more. Any other failure fails the test at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from app.jobs.runner import kill_tree

ROOT = Path(__file__).resolve().parents[2]
ABORTED = ("exitcode: -6", "(SIGABRT)")


def torchrun(script: str, world: int, args: list[str], out: Path | None = None,
             timeout: float = 240) -> tuple[dict | None, str]:
    """(the report ``script`` wrote to ``out``, or None; everything it printed)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", str(world), "--max-restarts", "0", str(ROOT / script),
               *args]
    if out is not None:
        command += ["--backend", "gloo", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for attempt in (1, 2):
        if out is not None and out.exists():
            out.unlink()
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True, text=True)
        try:
            output, _ = proc.communicate(timeout=timeout)
        finally:
            kill_tree(proc.pid)
        report = json.loads(out.read_text()) if out is not None and out.exists() else None
        if proc.returncode == 0:
            return report, output
        aborted = any(mark in output for mark in ABORTED)
        if aborted and report is not None:
            return report, output
        if not aborted or attempt == 2:
            raise AssertionError(f"torchrun {script} failed (exit {proc.returncode}):\n"
                                 + output[-3000:])
    raise AssertionError("unreachable")


def job_over_http(client, job_id: str, limit_s: float = 120) -> dict:
    """The job's JSON once it has ended, polled as the page does."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        job = client.get(f"/api/verify/jobs/{job_id}").json()
        if job["status"] not in ("queued", "running"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} did not finish in {limit_s} s")


def ended(job, limit_s: float = 120):
    """``job`` (a JobRunner's Job) once it has ended."""
    deadline = time.monotonic() + limit_s
    while not job.done:
        assert time.monotonic() < deadline, job.to_dict()
        time.sleep(0.2)
    return job
