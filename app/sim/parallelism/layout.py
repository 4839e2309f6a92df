"""The 5D rank layout as data: two meshes over the same ranks, as Megatron-LM builds them.

Megatron-LM (``megatron/core/parallel_state.py``: ``RankGenerator`` and
``initialize_model_parallel``) numbers ranks over the axes of ``order`` with the *first* name
varying fastest, so with ``tp-cp-ep-dp-pp``::

    rank = (((pp · dp + dp_i) · cp + cp_i) · tp + tp_i)          (ep has size 1 here)

A group of one axis is a line of that mesh along the axis: the ranks that agree on every other
coordinate. Expert layers use a second generator over the *same* ranks and the same order, with
cp folded away and dp·cp re-split as ep · dp' (dp' = dp·cp / ep)::

    dense  mesh  tp · cp · 1  · dp  · pp        groups tp, cp, dp, pp, dp·cp
    expert mesh  tp · 1  · ep · dp' · pp        groups ep, edp (= dp')

torch's ``init_device_mesh(device, shape, mesh_dim_names)`` numbers ranks C-style (the *last*
dimension varies fastest), so the same layout is ``shape = reversed(order)``:
``init_device_mesh("cuda", (pp, dp, cp, tp), mesh_dim_names=("pp", "dp", "cp", "tp"))``.

Coordinates of a rank (``Layout.coords``): ``tp``, ``cp``, ``dp``, ``pp`` are its indices on the
dense mesh — ``dp`` is the replica index among the ranks that share tp, cp and pp (Megatron's
``get_data_parallel_rank()``; it does *not* count cp); ``ep`` is its index on the expert mesh
(``get_expert_model_parallel_rank()``), ``edp`` its expert-data-parallel index. A rank's index
inside each of its groups equals its coordinate on that axis. Rank r runs on node
r // gpus_per_node as local rank r % gpus_per_node (torchrun fills nodes in order).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from app.sim.mesh import Mesh, local_rank, node_of

DENSE_AXES = ("tp", "cp", "dp", "pp")
EXPERT_AXES = ("ep", "edp")
GROUP_KINDS = ("tp", "cp", "dp", "pp", "ep", "edp", "dp_cp")
"""Every group list a layout derives: the contract's five plus Megatron's expert-data-parallel
(edp: where expert gradients are reduced) and data-parallel-with-CP (dp_cp: where the dense
gradients are reduced, since CP ranks hold the same weights)."""


@dataclass(frozen=True)
class Layout:
    """``names``: the axes fastest first; ``sizes``: tp, cp, dp, pp, ep; nodes of
    ``gpus_per_node``."""

    names: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]
    gpus_per_node: int

    @classmethod
    def of(cls, params) -> Layout:
        return cls(tuple(params.order.split("-")),
                   tuple((n, getattr(params, n)) for n in ("tp", "cp", "dp", "pp", "ep")),
                   params.gpus_per_node)

    @property
    def size(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def world(self) -> int:
        s = self.size
        return s["tp"] * s["cp"] * s["dp"] * s["pp"]

    @property
    def nodes(self) -> int:
        return -(-self.world // self.gpus_per_node)

    # -- the two meshes ----------------------------------------------------------------------

    def dense_sizes(self) -> dict[str, int]:
        """Axis sizes of the dense (attention, embeddings) generator: ep folded to 1."""
        return {**self.size, "ep": 1}

    def expert_sizes(self) -> dict[str, int]:
        """The expert generator: cp folded to 1 and dp replaced by dp' = dp·cp/ep, named edp
        (Megatron's expert_data_parallel_size) in the dp slot of ``order``."""
        s = self.size
        return {"tp": s["tp"], "cp": 1, "ep": s["ep"], "edp": s["dp"] * s["cp"] // s["ep"],
                "pp": s["pp"]}

    @cached_property
    def dense(self) -> Mesh:
        sizes = self.dense_sizes()
        outer_first = tuple(reversed(self.names))       # Mesh and numpy: last axis fastest
        return Mesh(outer_first, tuple(sizes[n] for n in outer_first))

    @cached_property
    def expert(self) -> Mesh:
        sizes = self.expert_sizes()
        outer_first = tuple("edp" if n == "dp" else n for n in reversed(self.names))
        return Mesh(outer_first, tuple(sizes[n] for n in outer_first))

    # -- groups and coordinates --------------------------------------------------------------

    @cached_property
    def _arrays(self) -> dict[str, np.ndarray]:
        """(groups, group size) rank arrays of every kind, rows sorted by first rank."""
        out = {axis: lines(self.dense, (axis,)) for axis in DENSE_AXES}
        out.update({axis: lines(self.expert, (axis,)) for axis in EXPERT_AXES})
        out["dp_cp"] = lines(self.dense, ("dp", "cp"))
        return out

    def groups(self, kind: str) -> tuple[tuple[int, ...], ...]:
        """Every group of ``kind`` (one of :data:`GROUP_KINDS`), sorted by first rank, each in
        ascending rank order — Megatron's ``get_ranks(kind)`` order."""
        return tuple(map(tuple, self._arrays[kind].tolist()))

    def group_of(self, rank: int, kind: str) -> tuple[int, ...]:
        array = self._arrays[kind]
        return tuple(array[(array == rank).any(axis=1)][0].tolist())

    @cached_property
    def _coords(self) -> np.ndarray:
        """(world, 6) int array: tp, cp, dp, pp, ep, edp of every rank."""
        columns = []
        for axis in DENSE_AXES:
            columns.append(axis_index(self.dense, axis))
        for axis in EXPERT_AXES:
            columns.append(axis_index(self.expert, axis))
        table = np.stack(columns, axis=1)                       # (world, 6)
        table.flags.writeable = False
        return table

    def coords(self, rank: int) -> dict[str, int]:
        return dict(zip(DENSE_AXES + EXPERT_AXES, (int(v) for v in self._coords[rank])))

    def rank_rows(self) -> list[dict]:
        """The contract's ``ranks``: {rank, node, local_rank, tp, cp, dp, pp, ep} (+ edp)."""
        g = self.gpus_per_node
        names = DENSE_AXES + EXPERT_AXES
        return [{"rank": r, "node": node_of(r, g), "local_rank": local_rank(r, g),
                 **dict(zip(names, map(int, row)))} for r, row in enumerate(self._coords)]

    def node_span(self, group: tuple[int, ...]) -> int:
        """How many nodes ``group`` touches."""
        return len({node_of(r, self.gpus_per_node) for r in group})

    def crosses_nodes(self, kind: str) -> bool:
        """Whether any group of ``kind`` spans more than one node."""
        nodes = self._arrays[kind] // self.gpus_per_node       # (groups, size)
        return bool((nodes.max(axis=1) != nodes.min(axis=1)).any())

    # -- torch's view of the same layout -----------------------------------------------------

    def torch_mesh(self, expert: bool = False) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """(shape, mesh_dim_names) for ``init_device_mesh``: the order reversed (torch's last
        dimension varies fastest), the folded axis (ep, or cp for the expert mesh) left out."""
        mesh = self.expert if expert else self.dense
        drop = "cp" if expert else "ep"
        pairs = [(n, s) for n, s in zip(mesh.axes, mesh.sizes) if n != drop]
        return tuple(s for _, s in pairs), tuple(n for n, _ in pairs)


def axis_index(mesh: Mesh, axis: str) -> np.ndarray:
    """The coordinate of every rank along ``axis`` (shape (world,))."""
    grid = np.indices(mesh.sizes)[mesh.axes.index(axis)]       # sizes-shaped index grid
    return grid.reshape(-1)                                     # rank order: C order of sizes


def lines(mesh: Mesh, axes: tuple[str, ...]) -> np.ndarray:
    """Groups spanning several axes at once (Megatron's ``get_ranks("dp-cp")``): the other axes
    fixed, the ranks of the named ones in ascending order."""
    positions = sorted(mesh.axes.index(a) for a in axes)       # keep outer→inner order
    rest = [i for i in range(len(mesh.axes)) if i not in positions]
    moved = np.transpose(mesh.ranks, rest + positions)          # (..others, ..named)
    size = int(np.prod([mesh.sizes[i] for i in positions]))
    return moved.reshape(-1, size)                              # (groups, size)


def pp_mismatch(params) -> str | None:
    """Megatron-LM asserts that the dense and expert generators give the same pipeline groups
    (a stage must hold the same layers for both); None when they do, else why not."""
    layout = Layout.of(params)
    dense, expert = layout.groups("pp"), layout.expert.groups("pp")
    if list(dense) == expert:
        return None
    return (f'order "{params.order}" gives the expert layers (ep {layout.size["ep"]} · dp\' '
            f"{layout.expert_sizes()['edp']}) pipeline groups {list(expert[0])}… but the dense "
            f"layers {list(dense[0])}…; Megatron-LM requires the same stages for both — put pp "
            f"last")
