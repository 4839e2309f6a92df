"""Launch a 5D layout for real: every rank reports what torchrun told it, builds its groups two
ways, and all-reduces in each.

    torchrun --standalone --nproc-per-node 8 workers/parallelism.py --tp 2 --dp 2 --pp 2 \
        --ep 2 --order tp-cp-ep-dp-pp --out report.json

Each rank (a) reads RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and
MASTER_PORT; (b) builds torch's own ``init_device_mesh`` for the dense and the expert layout
(shape = the order reversed) and records the ranks of its group on every dimension and its
coordinate; (c) builds every group of the simulation's lists with ``dist.new_group`` (all ranks
create all groups, in the same order); (d) all-reduces rank + 1 in its group of each kind, both
ways. Rank 0 writes every rank's findings; app/scenes/parallelism/check.py compares them with the
simulation (app.sim.parallelism — the same layout code, DESIGN principle 1).
"""

from __future__ import annotations

import argparse
import os

from common import add_fields, arguments, finish, gather, run_config, start  # noqa: I001 (first: its guard runs before torch loads)

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

from app.sim.parallelism.layout import DENSE_AXES, EXPERT_AXES, GROUP_KINDS, Layout
from app.sim.parallelism.params import ParallelismParams

ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
       "MASTER_PORT")


def params_from(args) -> ParallelismParams:
    return ParallelismParams(tp=args.tp, cp=args.cp, dp=args.dp, pp=args.pp, ep=args.ep,
                             gpus_per_node=args.gpus_per_node, order=args.order,
                             experts=args.ep, seq=1024 * args.cp)


def all_reduce_sum(value: int, group, device: torch.device) -> int:
    t = torch.tensor([float(value)], device=device)
    dist.all_reduce(t, group=group)
    return int(t.item())


MODEL_FIELDS = ("tp", "cp", "dp", "pp", "ep", "gpus_per_node", "order")
"""The options that are the layout scene's parameters (app/sim/parallelism/params.py)."""


def parser() -> argparse.ArgumentParser:
    """The worker's options, from the layout scene's params model."""
    p = arguments(__doc__.splitlines()[0])
    add_fields(p, ParallelismParams, MODEL_FIELDS)
    return p


def main() -> None:
    args = parser().parse_args()
    rank, world, device, backend = start(args)
    layout = Layout.of(params_from(args))
    if layout.world != world:
        raise SystemExit(f"the layout needs {layout.world} ranks, torchrun started {world}")
    found = {"rank": rank, "env": {k: os.environ.get(k) for k in ENV}, "mesh_groups": {},
             "mesh_coords": {}, "mesh_sums": {}, "new_group_ranks": {}, "new_group_sums": {}}

    # (b) torch's DeviceMesh, dense then expert
    for expert, axes in ((False, DENSE_AXES), (True, EXPERT_AXES)):
        shape, names = layout.torch_mesh(expert)
        mesh = init_device_mesh(device.type, shape, mesh_dim_names=names)
        coordinate = dict(zip(names, mesh.get_coordinate()))
        for axis in axes:
            group = mesh.get_group(axis)
            found["mesh_groups"][axis] = dist.get_process_group_ranks(group)
            found["mesh_coords"][axis] = int(coordinate[axis])
            found["mesh_sums"][axis] = all_reduce_sum(rank + 1, group, device)

    # (c) the simulation's lists with new_group: every rank creates every group, in order
    mine = {}
    for kind in GROUP_KINDS:
        for ranks in layout.groups(kind):
            group = dist.new_group(list(ranks))
            if rank in ranks:
                mine[kind] = (group, list(ranks))
    for kind in GROUP_KINDS:  # (d) one all-reduce in each
        group, ranks = mine[kind]
        found["new_group_ranks"][kind] = ranks
        found["new_group_sums"][kind] = all_reduce_sum(rank + 1, group, device)

    everyone = gather(found, rank, world)
    report = None
    if rank == 0:
        report = {"backend": backend, "world": world, "config": run_config(args),
                  "ranks": everyone}
    finish(report, rank, args.out)


if __name__ == "__main__":
    main()
