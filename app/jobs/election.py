"""Which process runs the jobs, and where a server keeps them.

``shardscope serve`` starts as many uvicorn workers as the machine has cores; each builds the
app and its :class:`app.jobs.runner.JobRunner` over the same data directory. Every worker admits
jobs into the store (app/jobs/store.py) and answers about any job, but only **one** runs them:
the process that holds an exclusive ``flock`` on ``<data>/runner.lock``. It alone keeps the warm
pool of started ranks and launches torchrun, so N workers never start N pools, and the
concurrency limit is one number for the whole server. The others try for the lock twice a
second: when the runner's process dies (the kernel releases its lock with it), one of them
takes over, marks the jobs the dead runner left running as errors ("the server stopped") and
runs the queue. A restarted server does the same, so a job is never lost or left "running".
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def data_dir() -> Path:
    """Where this server keeps its job store: ``SHARDSCOPE_DATA``, else the user's state
    directory (``$XDG_STATE_HOME/shardscope``, by default ``~/.local/state/shardscope``);
    created here. Never inside the source tree (a checkout stays clean, and a second checkout
    does not share the first one's jobs)."""
    env = os.environ
    if env.get("SHARDSCOPE_DATA"):
        folder = Path(env["SHARDSCOPE_DATA"]).expanduser()
    else:
        state = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
        folder = state / "shardscope"
    folder = folder.resolve()
    if folder == ROOT or ROOT in folder.parents:
        raise ValueError(f"SHARDSCOPE_DATA ({folder}) must not be inside the source tree "
                         f"({ROOT}): choose a folder outside it, e.g. ~/.local/state/shardscope")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class RunnerLock:
    """An exclusive lock on a file, held by at most one process (one open file, in fact: a
    second lock of the same file in the same process is refused too) until released or until
    its process dies."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock if it is free (never waits); whether this holds it now."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # who runs the jobs, for a person looking
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the file releases its flock


def holder(path: Path) -> int | None:
    """The pid written by the process that holds (or last held) the lock at ``path``."""
    try:
        return int(Path(path).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None
