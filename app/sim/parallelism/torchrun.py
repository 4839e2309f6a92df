"""How a layout is launched: the torchrun line on every node, what each process is told, and the
torch calls that build its groups.

torchrun (``torch.distributed.run``) starts ``--nproc-per-node`` processes on each of
``--nnodes`` machines and sets, for every process, RANK (= node_rank · nproc_per_node +
LOCAL_RANK), LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK (the node) and
MASTER_ADDR / MASTER_PORT (where ``init_process_group`` meets the others). With
``--rdzv-backend c10d`` the nodes meet at ``--rdzv-endpoint`` and the rendezvous numbers them;
``--node-rank`` fixes the numbering for the static rendezvous (``--master-addr``/``--master-port``)
and documents which machine is which. Each process then uses GPU ``cuda:LOCAL_RANK``.
The MASTER_ADDR / MASTER_PORT shown are the head node and the rendezvous port; under c10d
torchrun sets them to the store it actually started (the first node, possibly another port).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.param_groups import AXES
from app.sim.parallelism.layout import DENSE_AXES, Layout

HEAD = "node0"
"""The first node's host name in the lines shown (MASTER_ADDR and the rendezvous endpoint)."""
PORT = 29500
SCRIPT = "train.py"

NCCL_ENV: tuple[tuple[str, str, str], ...] = (
    ("NCCL_DEBUG", "INFO", "prints the transports NCCL picked (NVLink P2P, IB) and every ring"),
    ("NCCL_SOCKET_IFNAME", "eth0", ("the network interface for NCCL's bootstrap and socket "
                                   "traffic (not docker0 or lo)")),
    ("NCCL_IB_HCA", "mlx5", "which InfiniBand adapters NCCL may use between nodes"),
)


@dataclass(frozen=True)
class Process:
    rank: int
    node: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int

    @property
    def device(self) -> str:
        return f"cuda:{self.local_rank}"

    def env(self) -> dict[str, str]:
        return {"RANK": str(self.rank), "LOCAL_RANK": str(self.local_rank),
                "WORLD_SIZE": str(self.world_size), "LOCAL_WORLD_SIZE": str(self.local_world_size),
                "GROUP_RANK": str(self.node), "MASTER_ADDR": self.master_addr,
                "MASTER_PORT": str(self.master_port)}

    def to_dict(self) -> dict:
        return {"rank": self.rank, "node": self.node, "local_rank": self.local_rank,
                "device": self.device, "env": self.env()}


def nproc_per_node(layout: Layout) -> int:
    return min(layout.world, layout.gpus_per_node)


def processes(layout: Layout) -> tuple[Process, ...]:
    n = nproc_per_node(layout)
    return tuple(Process(r, r // n, r % n, layout.world, n, HEAD, PORT)
                 for r in range(layout.world))


def command_lines(params, layout: Layout) -> tuple[str, ...]:
    """The torchrun line to type on each node, node 0 first."""
    n = nproc_per_node(layout)
    args = " ".join(f"--{a} {getattr(params, a)}" for a in AXES)
    return tuple(f"torchrun --nnodes {layout.nodes} --nproc-per-node {n} --node-rank {k} "
                 f"--rdzv-backend c10d --rdzv-endpoint {HEAD}:{PORT} {SCRIPT} {args}"
                 for k in range(layout.nodes))


def device_mesh_calls(layout: Layout) -> tuple[str, str]:
    """The two ``init_device_mesh`` calls (dense, expert) that build this layout's groups."""
    out = []
    for expert, var in ((False, "mesh"), (True, "expert_mesh")):
        shape, names = layout.torch_mesh(expert)
        out.append(f"{var} = init_device_mesh(\"cuda\", {shape!r}, "
                   f"mesh_dim_names={names!r})")
    return tuple(out)


def new_group_lines(layout: Layout, most: int = 16) -> tuple[str, ...]:
    """The same groups with ``dist.new_group``: every rank creates every group, in the same
    order, and keeps the one it belongs to. Lists longer than ``most`` groups are cut."""
    lines = []
    for kind in (*DENSE_AXES, "ep"):
        groups = [list(g) for g in layout.groups(kind)]
        shown = repr(groups[:most])[:-1] + (", …]" if len(groups) > most else "]")
        lines.append(f"for ranks in {shown}:  # {len(groups)} {kind} groups of {len(groups[0])}")
        lines.append("    group = dist.new_group(ranks)")
        lines.append(f"    if rank in ranks: {kind}_group = group")
    return tuple(lines)


def nccl_lines() -> tuple[str, ...]:
    return tuple(f"export {name}={value}  # {why}" for name, value, why in NCCL_ENV)


@dataclass(frozen=True)
class Launch:
    commands: tuple[str, ...]
    processes: tuple[Process, ...]
    device_mesh: tuple[str, str]
    new_groups: tuple[str, ...]
    nccl: tuple[str, ...]

    def to_dict(self, most_processes: int = 64) -> dict:
        return {"commands": list(self.commands),
                "processes": [p.to_dict() for p in self.processes[:most_processes]],
                "device_mesh": list(self.device_mesh), "new_groups": list(self.new_groups),
                "nccl": list(self.nccl)}


def launch(params, layout: Layout) -> Launch:
    return Launch(command_lines(params, layout), processes(layout), device_mesh_calls(layout),
                  new_group_lines(layout), nccl_lines())
