"""What a verification job is: how a scene runs for real (:class:`Check`), what its comparison
says (:class:`Verdict`) and the job's record (:class:`Job`), which the job store keeps
(app/jobs/store.py) and ``GET /api/verify/jobs/{id}`` answers (DESIGN.md's contract)."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DONE = ("passed", "failed", "error")
"""The statuses a job ends in; "queued" and "running" are the others."""


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
    created: float = field(default_factory=time.time)
    """wall-clock seconds (every process of a server reads the same store)"""
    started: float | None = None
    finished: float | None = None
    ahead: int = 0
    """jobs queued or running before this one (set when a queued job is read)"""
    client: str = ""
    device: str = ""
    source: str = "server"
    """"server" (run here) or "uploaded" (a report from the visitor's own cluster)"""
    fields: dict = field(default_factory=dict)
    """the verdict's extra top-level status fields (:attr:`Verdict.fields`)"""
    trace: dict | None = None
    """the verdict's measured timeline (:attr:`Verdict.trace`)"""
    query: str | None = None
    """the scene's query string it runs, from which any process of the server can rebuild the
    params and the trace; None for a job only the process that submitted it can run (a test's
    stand-in check)"""
    extra_args: list[str] = field(default_factory=list)
    """the runner's own worker options beyond the scene's (tests: ``--hold-seconds``)"""
    seq: int = 0
    """its place in the queue (the store's row number)"""

    @property
    def elapsed_s(self) -> float:
        if self.started is None:
            return 0.0
        return max(0.0, (self.finished or time.time()) - self.started)

    @property
    def done(self) -> bool:
        return self.status in DONE

    def to_dict(self) -> dict:
        own = {"job": self.id, "scene": self.scene, "status": self.status,
               "backend": self.backend, "world": self.world,
               "max_abs_diff": self.max_abs_diff, "detail": self.detail,
               "elapsed_s": round(self.elapsed_s, 3), "report": self.report,
               "device": self.device, "source": self.source}
        if self.trace is not None:
            own["trace"] = f"/api/verify/jobs/{self.id}/trace"
        return {**self.fields, **own}


class QueueFull(Exception):
    pass


class ClientBusy(QueueFull):
    """This client already has its share of the queue."""


def torch_available() -> tuple[bool, str]:
    """Whether this server can run real jobs, and if not, what to install."""
    if importlib.util.find_spec("torch") is None:
        return False, ("Real runs need PyTorch, which is not installed on this server: "
                       "install the verify extra with  pip install -e '.[verify]'  "
                       "(or run  make test, which installs it).")
    return True, ""
