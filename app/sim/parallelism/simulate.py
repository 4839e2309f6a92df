"""``/parallelism``: a 5D layout stepped through — the mesh, each axis's groups, the nodes, the
traffic of every group, how the order changes the load between nodes, and the torchrun set-up.

Everything is derived from :class:`~app.sim.parallelism.layout.Layout` (the mesh is data,
DESIGN principle 1); the trace's ``to_dict()`` is the ``/api/parallelism`` contract.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.param_groups import AXES
from app.sim.parallelism.ddp_script import DdpStep
from app.sim.parallelism.ddp_script import steps as ddp_steps
from app.sim.parallelism.layout import GROUP_KINDS, Layout
from app.sim.parallelism.strategies import Strategy, strategies
from app.sim.parallelism.torchrun import Launch, launch
from app.sim.parallelism.traffic import (
    Flow,
    OrderLoad,
    flows,
    order_loads,
    why_tp_first,
)

LINK_NAMES = {"nvlink": "NVLink", "infiniband": "InfiniBand"}
AXIS_WORDS = {"tp": "tensor-parallel", "cp": "context-parallel", "ep": "expert-parallel",
              "dp": "data-parallel", "pp": "pipeline"}


@dataclass(frozen=True)
class MeshFrame:
    """One step of the scene. ``axis``: the group kind the figure highlights (None: all)."""

    step: int
    caption: str
    phase: str
    axis: str | None = None

    def to_dict(self) -> dict:
        return {"step": self.step, "caption": self.caption, "phase": self.phase,
                "axis": self.axis}


@dataclass(frozen=True)
class ParallelismTrace:
    params: object
    layout: Layout
    flows: tuple[Flow, ...]
    orders: tuple[OrderLoad, ...]
    why_tp_first: str
    launch: Launch
    strategies: tuple[Strategy, ...]
    ddp: tuple[DdpStep, ...]
    frames: tuple[MeshFrame, ...]

    @property
    def world(self) -> int:
        return self.layout.world

    def to_dict(self) -> dict:
        layout = self.layout
        dense_shape, dense_names = layout.torch_mesh()
        return {
            "world": layout.world,
            "order": self.params.order,
            "nodes": layout.nodes,
            "gpus_per_node": layout.gpus_per_node,
            "torch_mesh": {"shape": list(dense_shape), "mesh_dim_names": list(dense_names)},
            "ranks": layout.rank_rows(),
            "groups": {kind: [list(g) for g in layout.groups(kind)] for kind in GROUP_KINDS},
            "traffic": [f.to_dict() for f in self.flows],
            "orders": [o.to_dict() for o in self.orders],
            "why_tp_first": self.why_tp_first,
            "torchrun": self.launch.to_dict(),
            "strategies": [s.to_dict() for s in self.strategies],
            "ddp_script": [s.to_dict() for s in self.ddp],
            "frames": [f.to_dict() for f in self.frames],
        }


def simulate(params) -> ParallelismTrace:
    layout = Layout.of(params)
    fs = flows(params, layout)
    orders = order_loads(params)
    why = why_tp_first(params, fs)
    run = launch(params, layout)
    return ParallelismTrace(params, layout, fs, orders, why, run, strategies(params, fs),
                            ddp_steps(layout.world, params.gpus_per_node),
                            frames(params, layout, fs, orders, why, run))


def frames(params, layout: Layout, fs, orders, why: str, run: Launch) -> tuple[MeshFrame, ...]:
    size = layout.size
    shape, names = layout.torch_mesh()
    captions: list[tuple[str, str, str | None]] = []
    # 1. the mesh
    captions.append(("mesh", (f"{layout.world} ranks = tp {size['tp']} × cp {size['cp']} × dp "
                             f"{size['dp']} × pp {size['pp']}, numbered in the order "
                             f"{params.order}: the first axis varies fastest. torch writes the "
                             f"same mesh as shape {tuple(shape)} over {names} (its last "
                             f"dimension varies fastest)."), None))
    # 2. each axis's groups, in the order's sequence
    for axis in params.order.split("-"):
        groups = layout.groups(axis)
        n = len(groups[0])
        if axis == "ep":
            text = (f"ep {n}: the expert layers re-split dp·cp = {size['dp'] * size['cp']} as "
                    f"ep {n} × dp' {layout.expert_sizes()['edp']}; {len(groups)} groups, the "
                    f"first {list(groups[0])}, exchange tokens with all-to-all.")
        elif n == 1:
            text = f"{axis} = 1: no {AXIS_WORDS[axis]} groups — every rank is alone on this axis."
        else:
            stride = groups[0][1] - groups[0][0]
            text = (f"{len(groups)} {AXIS_WORDS[axis]} groups of {n}: the first is "
                    f"{list(groups[0])} — ranks {stride} apart, the ranks that differ only in "
                    f"their {axis} coordinate.")
        captions.append(("groups", text, axis))
    # 3. nodes
    crossing = [k for k in AXES if layout.crosses_nodes(k)]
    captions.append(("nodes", f"{layout.nodes} node{'s' if layout.nodes > 1 else ''} of "
                              f"{min(layout.world, layout.gpus_per_node)} GPUs: rank r runs on "
                              f"node r // {layout.gpus_per_node}. "
                              + (f"Groups that span nodes: {', '.join(crossing)}."
                                 if crossing else "No group leaves its node."), None))
    # 4. traffic, one group kind at a time
    for f in fs:
        gbs = params.inter_node_gbs if f.link == "infiniband" else params.intra_node_gbs
        captions.append(("traffic", (f"{f.group} ({f.collective}) sends "
                                    f"{f.bytes_per_step / 1e9:.3g} GB per rank per step over "
                                    f"{LINK_NAMES[f.link]} ({gbs:g} GB/s → "
                                    f"{f.bytes_per_step / (gbs * 1e9) * 1e3:.3g} ms): {f.what}."),
                         f.over))
    # 5. the order decides what crosses nodes
    valid = [o for o in orders if o.valid]
    best = min(valid, key=lambda o: o.inter_node_bytes)
    worst = max(valid, key=lambda o: o.inter_node_bytes)
    captions.append(("orders", f"Order decides which groups cross nodes: {best.order} puts "
                               f"{best.inter_node_bytes / 1e9:.3g} GB per rank per step on "
                               f"InfiniBand, {worst.order} {worst.inter_node_bytes / 1e9:.3g} GB. "
                               + why, None))
    # 6. torchrun
    others = "node 1" if layout.nodes == 2 else f"nodes 1…{layout.nodes - 1}"
    captions.append(("torchrun", f"Launch: {run.commands[0]}"
                                 + (f" — and the same on {others} with its --node-rank."
                                    if layout.nodes > 1 else "."), None))
    return tuple(MeshFrame(k, text, phase, axis)
                 for k, (phase, text, axis) in enumerate(captions))
