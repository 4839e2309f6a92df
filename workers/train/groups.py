"""Process groups of a 5D layout, built from the very code that lays out ``/parallelism``
(app.sim.parallelism.layout.Layout: ``arange(world).reshape`` over Megatron-LM's order, EP carved
out of dp·cp) — DESIGN principle 1: the mesh is data, and the simulation and the workers read
the same data.

Every rank of the job creates every group, in one fixed order (``dist.new_group`` is collective
over the whole job), and keeps the ones it belongs to. What each kind is for:

    tp      tensor parallelism: f/g all-reduces, SP all-gather/reduce-scatter, vocab-parallel loss
    cp      context parallelism: the ring that K/V blocks travel (and their gradients back)
    pp      pipeline parallelism: activations to the next stage, gradients to the previous
    dp_cp   where the dense gradients are reduced (dp replicas and cp ranks hold the same
            weights; Megatron's data-parallel group "with cp")
    ep      expert parallelism: the MoE all-to-all dispatch and combine
    edp     where the expert gradients are reduced (dp·cp / ep ranks hold the same experts)
    world   every rank of the layout: the global gradient norm

A group of one rank has no process group (``pg`` None): every call on it is skipped, as
Megatron-LM skips them — so one process with every size 1 runs the same code with no
torch.distributed at all (the reference run).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.distributed as dist

from app.sim.parallelism.layout import Layout

KINDS = ("tp", "cp", "pp", "dp_cp", "ep", "edp")
"""The group kinds the framework uses (Layout.groups names), in creation order."""


@dataclass
class Group:
    kind: str
    ranks: tuple[int, ...]
    """global ranks, ascending: a rank's index here is its coordinate on the axis"""
    pg: object = None
    """the torch.distributed process group; None for a group of one rank"""

    @property
    def size(self) -> int:
        return len(self.ranks)

    def index(self, rank: int) -> int:
        return self.ranks.index(rank)


@dataclass
class Groups:
    rank: int
    layout: Layout | None
    coords: dict[str, int]
    groups: dict[str, Group] = field(default_factory=dict)

    def __getitem__(self, kind: str) -> Group:
        return self.groups[kind]

    @property
    def world(self) -> int:
        return self.groups["world"].size

    def size(self, kind: str) -> int:
        return self.groups[kind].size

    # pipeline neighbours: global ranks of the previous and next stage (None at the ends)
    @property
    def pp_prev_rank(self) -> int | None:
        pp = self.coords["pp"]
        return self.groups["pp"].ranks[pp - 1] if pp > 0 else None

    @property
    def pp_next_rank(self) -> int | None:
        g, pp = self.groups["pp"], self.coords["pp"]
        return g.ranks[pp + 1] if pp + 1 < g.size else None

    # the context-parallel ring: global ranks of the next and previous member
    @property
    def cp_next_rank(self) -> int:
        g = self.groups["cp"]
        return g.ranks[(g.index(self.rank) + 1) % g.size]

    @property
    def cp_prev_rank(self) -> int:
        g = self.groups["cp"]
        return g.ranks[(g.index(self.rank) - 1) % g.size]


def solo() -> Groups:
    """One process holding the whole model: every group is just rank 0."""
    coords = {"tp": 0, "cp": 0, "dp": 0, "pp": 0, "ep": 0, "edp": 0}
    return Groups(0, None, coords, {k: Group(k, (0,)) for k in (*KINDS, "world")})


_MADE: dict[tuple[int, ...], object] = {}


def _new_group(ranks: tuple[int, ...]):
    """A process group over ``ranks``, made once per job (a suite of layouts reuses them)."""
    if ranks not in _MADE:
        _MADE[ranks] = dist.new_group(list(ranks))
    return _MADE[ranks]


def build(layout_params, rank: int) -> Groups:
    """The groups of ``layout_params`` (a ParallelismParams) for ``rank``; every rank of the job
    must call this with the same layout, in the same order, whether or not it takes part (a
    rank beyond the layout's world gets no groups: it waits out the layout)."""
    layout = Layout.of(layout_params)
    mine: dict[str, Group] = {}
    for kind in KINDS:
        for ranks in layout.groups(kind):
            pg = _new_group(tuple(ranks)) if len(ranks) > 1 else None
            if rank in ranks:
                mine[kind] = Group(kind, tuple(ranks), pg)
    everyone = tuple(range(layout.world))
    world_pg = (_new_group(everyone) if layout.world < dist.get_world_size() else
                dist.group.WORLD) if layout.world > 1 else None
    if rank < layout.world:
        mine["world"] = Group("world", everyone, world_pg)
        return Groups(rank, layout, layout.coords(rank), mine)
    return Groups(rank, layout, {}, {})
