"""Comparing a real launch of a 5D layout (workers/parallelism.py) with the simulation.

The worker reports, per rank: the environment torchrun gave it, the groups and coordinates that
torch's own ``init_device_mesh`` derived for it, and the sums of one all-reduce of rank + 1 in
its group of every kind — once over the DeviceMesh's groups, once over ``dist.new_group`` built
from the simulation's lists. All must equal the simulation: the DeviceMesh groups are an
independent derivation (torch's), the sums prove the groups really connect those ranks.
LOCAL_RANK and GROUP_RANK are compared with the simulation's nodes when the job ran
gpus_per_node processes per node; a one-machine job (the runner's ``--standalone``) is checked
against its own LOCAL_WORLD_SIZE and says so.
"""

from __future__ import annotations

from app.jobs.runner import Check, Verdict
from app.sim.parallelism.layout import DENSE_AXES, EXPERT_AXES, GROUP_KINDS
from app.sim.parallelism.torchrun import nproc_per_node, processes

MESH_KINDS = DENSE_AXES + EXPERT_AXES


def compare(params, trace, report: dict) -> Verdict:
    layout = trace.layout
    world = layout.world
    problems: list[str] = []
    if report.get("world") != world:
        problems.append(f"the job ran {report.get('world')} ranks, the simulation {world}")
    rows = report.get("ranks") or []
    worst = 0
    nproc = nproc_per_node(layout)
    multi_node = False
    expected_procs = processes(layout)
    table = []
    for found in rows:
        r = found["rank"]
        env = found["env"]
        local_world = int(env.get("LOCAL_WORLD_SIZE") or world)
        multi_node = multi_node or local_world == nproc < world
        if int(env["RANK"]) != r or int(env["WORLD_SIZE"]) != world:
            problems.append(f"rank {r}: RANK={env['RANK']} WORLD_SIZE={env['WORLD_SIZE']}")
        if local_world == nproc:
            want = expected_procs[r]
            if (int(env["LOCAL_RANK"]), int(env["GROUP_RANK"])) != (want.local_rank, want.node):
                problems.append(f"rank {r}: LOCAL_RANK={env['LOCAL_RANK']} GROUP_RANK="
                                f"{env['GROUP_RANK']}, the simulation local rank "
                                f"{want.local_rank} on node {want.node}")
        elif int(env["LOCAL_RANK"]) != r % local_world:
            problems.append(f"rank {r}: LOCAL_RANK={env['LOCAL_RANK']} on a machine of "
                            f"{local_world}")
        coords = layout.coords(r)
        row = {"rank": r}
        for kind in MESH_KINDS:
            group = layout.group_of(r, kind)
            if tuple(sorted(found["mesh_groups"][kind])) != group:
                problems.append(f"rank {r}: DeviceMesh {kind} group {found['mesh_groups'][kind]}"
                                f", the simulation {list(group)}")
            if found["mesh_coords"][kind] != coords[kind]:
                problems.append(f"rank {r}: DeviceMesh {kind} coordinate "
                                f"{found['mesh_coords'][kind]}, the simulation {coords[kind]}")
        for kind in GROUP_KINDS:
            group = layout.group_of(r, kind)
            expected = sum(group) + len(group)
            sums = [found["new_group_sums"][kind]]
            if kind in MESH_KINDS:
                sums.append(found["mesh_sums"][kind])
            diff = max(abs(s - expected) for s in sums)
            row[kind] = diff
            worst = max(worst, diff)
            if diff:
                problems.append(f"rank {r}: all-reduce in its {kind} group gave {sums}, "
                                f"expected {expected}")
        table.append(row)
    if len(rows) != world:
        problems.append(f"{len(rows)} ranks reported, expected {world}")
    addresses = {(f["env"].get("MASTER_ADDR"), f["env"].get("MASTER_PORT")) for f in rows}
    if len(addresses) > 1:
        problems.append(f"ranks disagree on MASTER_ADDR:MASTER_PORT: {sorted(addresses)}")
    passed = not problems
    where = (f"{layout.nodes} nodes of {nproc}" if multi_node
             else "one machine (the node split of gpus_per_node was not exercised)")
    detail = (f"{len(rows)} ranks on {where}: DeviceMesh groups and coordinates "
              f"{'match' if passed else 'checked'} for {', '.join(MESH_KINDS)}; all-reduce sums "
              f"over {len(GROUP_KINDS)} group kinds differ by at most {worst}.")
    if problems:
        detail += " " + "; ".join(problems[:12])
    return Verdict(passed, float(worst), detail, {"diff_table": table})




def worker_argv(p) -> list[str]:
    """The worker's command line for ``p``: one option per field it runs (workers/parallelism.py
    builds the same options from the params model)."""
    return [word for name in ('tp', 'cp', 'dp', 'pp', 'ep', 'gpus_per_node', 'order')
            for word in ("--" + name.replace("_", "-"), _text(getattr(p, name)))]


def _text(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


CHECK = Check(worker="workers/parallelism.py", world=lambda p: p.world, args=worker_argv,
              compare=compare)
