"""The device mesh as data: ranks laid out over named axes.

A mesh is ``np.arange(world).reshape(sizes)`` over named axes. A process group along an axis is
a slice of that array; coordinates, ring neighbours and nodes are derived from it, never stored.
The order of the parallel axes is fixed here and only here (outermost first), following
Megatron-LM's convention that tensor parallelism varies fastest, so that a TP group sits on
consecutive ranks and therefore inside one node:

    rank = ((((pp · dp_size + dp) · ep_size + ep) · cp_size + cp) · tp_size + tp)

The simulations and the torchrun workers both lay out ranks with this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

AXIS_ORDER: tuple[str, ...] = ("pp", "dp", "ep", "cp", "tp")
"""Outermost → innermost. Every multi-axis mesh orders its axes by this list."""


@dataclass(frozen=True)
class Mesh:
    """Ranks ``0 … world-1`` arranged over named axes.

    ``Mesh.line(8)`` is a single group of 8 ranks (the collectives chapter);
    ``Mesh.of(dp=2, tp=4)`` is a 2 × 4 grid with axes in :data:`AXIS_ORDER`.
    """

    axes: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.axes) != len(self.sizes):
            raise ValueError(f"{len(self.axes)} axes but {len(self.sizes)} sizes")
        if any(size < 1 for size in self.sizes):
            raise ValueError(f"axis sizes must be ≥ 1, got {self.sizes}")

    @classmethod
    def line(cls, world: int, axis: str = "world") -> Mesh:
        return cls((axis,), (world,))

    @classmethod
    def of(cls, **sizes: int) -> Mesh:
        unknown = set(sizes) - set(AXIS_ORDER)
        if unknown:
            raise ValueError(f"unknown mesh axes {sorted(unknown)}; known: {AXIS_ORDER}")
        axes = tuple(axis for axis in AXIS_ORDER if axis in sizes)
        return cls(axes, tuple(sizes[axis] for axis in axes))

    @property
    def world(self) -> int:
        return int(np.prod(self.sizes))

    @cached_property
    def ranks(self) -> np.ndarray:
        """rank ids, shape ``sizes`` (read-only)."""
        grid = np.arange(self.world).reshape(self.sizes)
        grid.flags.writeable = False
        return grid

    def coords(self, rank: int) -> dict[str, int]:
        """``{axis: index}`` of ``rank``."""
        return dict(zip(self.axes, (int(i) for i in np.unravel_index(rank, self.sizes))))

    def group(self, rank: int, axis: str) -> tuple[int, ...]:
        """The ranks that share every coordinate of ``rank`` except ``axis``, in axis order."""
        index = list(np.unravel_index(rank, self.sizes))
        index[self.axes.index(axis)] = slice(None)
        return tuple(int(r) for r in self.ranks[tuple(index)])

    def groups(self, axis: str) -> list[tuple[int, ...]]:
        """Every group along ``axis`` (one per combination of the other coordinates)."""
        moved = np.moveaxis(self.ranks, self.axes.index(axis), -1)  # (..., size_axis)
        return [tuple(int(r) for r in row) for row in moved.reshape(-1, moved.shape[-1])]


def node_of(rank: int, gpus_per_node: int) -> int:
    """The node that holds ``rank`` when ranks fill nodes in order (torchrun's default)."""
    return rank // gpus_per_node


def local_rank(rank: int, gpus_per_node: int) -> int:
    """LOCAL_RANK as torchrun sets it: the rank's index inside its node."""
    return rank % gpus_per_node
