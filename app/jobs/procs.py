"""Processes and folders of real runs, found and ended without leaving anything behind.

The job runner (app/jobs/runner.py) and the warm pool (app/jobs/pool.py) both end processes
with :func:`kill_tree` and find ports with :func:`free_port`; they live here so that neither
module imports the other (issue 24: no two-file circles). :func:`clean_orphans` removes what a
killed server left in the temp folder: its jobs' folders, its pool's logs and, for a runner
with a private store, the store itself (``shardscope-{job,pool,data}-<pid>-…``).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from pathlib import Path

import psutil

TEMP_PREFIX = "shardscope-"
_OWNED = re.compile(r"^shardscope-(?:job|pool|data)-(\d+)-")


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


def beat_alive(beat: Path) -> bool:
    """Whether the rank that writes the heartbeat file ``beat`` (its pid inside) still runs."""
    try:
        text = beat.read_text()
        if not text:
            return True  # being written
        proc = psutil.Process(int(text))
        return proc.status() != psutil.STATUS_ZOMBIE
    except (ValueError, OSError, psutil.Error):
        return False
