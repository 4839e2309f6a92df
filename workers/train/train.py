"""Train the tiny GPT of ``/train`` for real with all five parallelisms composed, and the same
model, data and seed in one process beside it.

    torchrun --standalone --nproc-per-node 8 workers/train/train.py --tp 2 --cp 1 --pp 2 \
        --dp 2 --ep 2 --experts 4 --steps 5 --out report.json

gloo on CPUs, NCCL where GPUs are present (each rank on cuda:LOCAL_RANK, every tensor made
there by ``torch.set_default_device``; the timers then read host time, unsynchronised). Every
rank: measures the machine (calibrate.py), builds its groups from the layout (groups.py), trains
``--steps`` steps (loop.py) recording one step's every pass and message, and sends rank 0 its
losses, timeline and final shards. Rank 0 then trains the same model on
the same global batch in one process (every size 1: no torch.distributed call at all) and
writes the report: both runs' losses (and the MoE layers' load-balancing losses,
``aux_losses`` and ``reference_aux_losses``: zeros unless ``--aux-loss-coeff``), every tensor's
largest difference once gathered back to full size, the replicas' agreement, the measured
timeline and the calibration.

``--suite FILE`` runs a JSON list of layouts (each a dict of this command's options) one after
another in this one job: layout k runs on ranks 0 … world_k − 1 over groups made for it, the
ranks beyond wait at the barrier. One launch proves a whole table (the tests use it; torchrun's
start costs seconds on two cores).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))       # workers/: common
from common import add_fields, arguments, finish, gather, start  # noqa: E402,I001 (the guard first)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from app.sim.train.model import Shape  # noqa: E402
from app.sim.train.params import RUN_FIELDS, TrainParams  # noqa: E402
from workers.train import calibrate, groups, loop  # noqa: E402

FIELDS = RUN_FIELDS
"""The options that are /train's parameters (app/sim/train/params.py)."""


def parser():
    out = arguments(__doc__.splitlines()[0])
    add_fields(out, TrainParams, FIELDS)
    out.add_argument("--suite", type=Path, default=None,
                     help="a JSON list of layouts (dicts of these options) to run in turn")
    return out


def params_of(values: dict) -> TrainParams:
    return TrainParams(**{k: v for k, v in values.items() if k in TrainParams.model_fields})


def reference(p: TrainParams, cache: dict) -> loop.Run:
    """The one-process run of ``p`` (cached: a suite's layouts share their global batch)."""
    ref = loop.reference_params(p)
    key = ref.model_dump_json()
    if key not in cache:
        cache[key] = loop.train(ref, groups.solo())
    return cache[key]


def compare(p: TrainParams, runs: list[loop.Run], ref: loop.Run) -> dict:
    """Losses and final tensors of the layout against the one-process run."""
    shape = Shape.of(p)
    losses = [max(r.losses[k] for r in runs) if any(r.losses[k] for r in runs) else 0.0
              for k in range(p.steps)]
    full = loop.assemble(shape, [r.shards for r in runs], p.tp, p.ep)
    ref_full = loop.assemble(shape, [ref.shards], 1, 1)
    tensors = [{"name": n, "max_abs_diff": float(np.abs(full[n] - ref_full[n]).max()),
                "max_abs": float(np.abs(ref_full[n]).max())} for n in ref_full]
    rel_loss = max(abs(a - b) / abs(b) for a, b in zip(losses, ref.losses))
    rel_param = max(t["max_abs_diff"] / t["max_abs"] for t in tensors)
    aux = runs[0].aux_losses
    rel_aux = max(abs(a - b) / abs(b) if b else abs(a) for a, b in zip(aux, ref.aux_losses))
    return {"losses": losses, "reference_losses": ref.losses, "aux_losses": aux,
            "reference_aux_losses": ref.aux_losses, "max_rel_aux_loss_diff": rel_aux,
            "norms": runs[0].norms,
            "reference_norms": ref.norms, "tensors": tensors,
            "max_rel_loss_diff": rel_loss, "max_rel_param_diff": rel_param,
            "replica_spread": loop.replica_spread(shape, [r.shards for r in runs]),
            "step_s": [r.step_s for r in runs]}


def layout_run(p: TrainParams, rank: int, world: int, record: bool, cache: dict,
               phases: dict | None = None) -> dict | None:
    """Train ``p`` on ranks 0 … p.world − 1 (the others wait); rank 0 returns the comparison."""
    phases = {} if phases is None else phases
    g = groups.build(p.layout_params(), rank)
    phases["grouped"] = time.perf_counter()
    run = loop.train(p, g, record_step=p.steps - 1 if record else None) \
        if rank < p.world else None
    phases["trained"] = time.perf_counter()
    parts = gather(run, rank, world)
    dist.barrier()
    if rank != 0:
        return None
    runs = parts[:p.world]
    ref = reference(p, cache)
    phases["referenced"] = time.perf_counter()
    out = compare(p, runs, ref)
    if "started" in phases:
        marks = list(phases.items())
        out["phases_s"] = {name: round(t - marks[k - 1][1], 3)
                           for k, (name, t) in enumerate(marks) if k}
    if record:
        out["events"] = [{"rank": r, **e} for r, run_r in enumerate(runs) for e in run_r.events]
        out["ranks"] = [{"rank": r, **g.layout.coords(r)} for r in range(p.world)]
    return out


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    rank, world, device, backend = start(args)
    torch.set_default_device(device)      # NCCL: every tensor on this rank's GPU; gloo: the CPU
    values = {k: getattr(args, k) for k in FIELDS}
    cache: dict = {}
    if args.suite is not None:
        table = json.loads(args.suite.read_text())
        suite = []
        for row in table:
            p = params_of({**values, **row})
            if p.world > world:
                raise SystemExit(f"layout {row} needs {p.world} ranks, the job has {world}")
            result = layout_run(p, rank, world, False, cache)
            if rank == 0:
                suite.append({"config": row, "world": p.world, **result})
        finish({"backend": backend, "world": world, "suite": suite} if rank == 0 else None,
               rank, args.out)
        return
    p = params_of(values)
    if p.world != world:
        raise SystemExit(f"the layout needs tp·cp·dp·pp = {p.world} ranks, torchrun started "
                         f"{world}")
    phases = {"started": time.perf_counter()}
    measured = calibrate.measure(p, rank, world, loop.DTYPES[p.dtype])
    node = int(os.environ.get("GROUP_RANK", "0"))
    machine = gather({"calibration": measured, "node": node}, rank, world)
    phases["calibrated"] = time.perf_counter()
    result = layout_run(p, rank, world, True, cache, phases)
    report = None
    if rank == 0:
        report = {"backend": backend, "world": world, **result,
                  "calibration": calibrate.summary([m["calibration"] for m in machine]),
                  "calibration_ranks": [m["calibration"] for m in machine],
                  "nodes": len({m["node"] for m in machine}),
                  "node_of_rank": [m["node"] for m in machine]}
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
