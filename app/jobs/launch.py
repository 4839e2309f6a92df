"""The torchrun line a page shows for its real run, written from the scene's :class:`Check`.

The worker's path, its number of ranks and its arguments are the Check's (``worker``, ``world``,
``args`` — each scene's ``worker_argv`` in app/scenes/<slug>/check.py), so the line on the page
is the command the job runner starts (app/jobs/runner.py), less the runner's own options
(``--backend``) and with ``--out report.json`` (DESIGN principle 13).
"""

from __future__ import annotations

from typing import Any

from app.jobs.job import Check

OUT = "--out report.json"


def torchrun_text(worker: str, world: int, argv: list[str], *,
                  gpus_per_node: int | None = None) -> str:
    """``torchrun … worker argv --out report.json`` for ``world`` ranks: on one node
    (``--standalone``) unless ``gpus_per_node`` is given and ``world`` needs more than one, then
    the multi-node form (c10d rendezvous on ``$HEAD_NODE``) that each node runs."""
    per_node = world if gpus_per_node is None else min(world, gpus_per_node)
    nodes = 1 if gpus_per_node is None else -(-world // gpus_per_node)
    args = " ".join([*argv, OUT])
    if nodes == 1:
        return f"torchrun --standalone --nproc-per-node {per_node} {worker} {args}"
    return (f"torchrun --nnodes {nodes} --nproc-per-node {per_node} --rdzv-backend c10d "
            f"--rdzv-endpoint $HEAD_NODE:29500 {worker} {args}")


def torchrun_line(check: Check, params: Any, *, gpus_per_node: int | None = None) -> str:
    """The torchrun line of ``check``'s real run of ``params``."""
    return torchrun_text(check.worker, check.world(params), check.args(params),
                         gpus_per_node=gpus_per_node)
