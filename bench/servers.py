"""Start and stop the servers a benchmark measures (uvicorn, one worker, 127.0.0.1)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from app.jobs.runner import kill_tree

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(target: str, *factory: str, ready_path: str = "/"):
    """Run ``uvicorn target`` and yield its base URL; stop it by its process id."""
    port = free_port()
    # uvloop and httptools named, for the app and the bare yardstick alike (uvicorn's "auto"
    # would quietly fall back to asyncio and h11 where they are missing)
    command = [sys.executable, "-m", "uvicorn", target, *factory, "--host", "127.0.0.1",
               "--port", str(port), "--loop", "uvloop", "--http", "httptools",
               "--log-level", "warning", "--no-access-log"]
    # a data directory of its own: jobs of a server the developer runs meanwhile are not shared
    data = tempfile.mkdtemp(prefix="shardscope-bench-")
    proc = subprocess.Popen(command, cwd=ROOT, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "SHARDSCOPE_DATA": data})
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, base + ready_path, what=target)
        yield base
    finally:
        kill_tree(proc.pid)
        shutil.rmtree(data, ignore_errors=True)


def wait_until_up(proc: subprocess.Popen, url: str, limit_s: float = 30, what: str = "",
                  poll_s: float = 0.2) -> None:
    """Return once ``url`` answers; raise if ``proc`` ends first or ``limit_s`` pass."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what or url} did not start") from None
            time.sleep(poll_s)
