"""The /parallelism deck's parts that its frame builder (:mod:`app.scenes.parallelism.deck`),
its panels (:mod:`app.scenes.parallelism.deck_panels`) and its launch frame
(:mod:`app.scenes.parallelism.deck_launch`) share: the group kinds and their colours, the links',
where a frame draws (:class:`Frame`), what an overlay is drawn on (:class:`Geometry`) and a
node's box. A module of its own so that the panels need not import the builder that calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.draw.box import Box
from app.draw.layout import LINE
from app.draw.shapes import Rect
from app.sim.parallelism.layout import Layout

KINDS = ("tp", "cp", "ep", "dp", "pp")
"""The hover strips of a cell, left to right, and the order of the legend."""

AXIS_COLOURS = {"tp": "#7570b3", "cp": "#c99400", "ep": "#e7298a", "dp": "#1f78b4",
                "pp": "#a6761d", "dp_cp": "#1f78b4", "edp": "#e7298a"}
"""One colour per axis (ColorBrewer Dark2 and Paired picks, none of them a rank colour: ranks are
numbered, never coloured, in this deck)."""
LINK_COLOURS = {"nvlink": "#1b9e77", "infiniband": "#d95f02"}
LINK_NAMES = {"nvlink": "NVLink", "infiniband": "InfiniBand"}
LEGEND = ("NVLink, inside a node", "InfiniBand, between nodes", *KINDS)
"""The legend's items: the two links (a line each, InfiniBand dashed), then the axes."""


@dataclass(frozen=True)
class Frame:
    """Where a frame draws: the box's sizes, the ranks' area and the panel's column, the body
    between the header and the legend (the orders and torchrun frames take all of it)."""

    box: Box
    ranks: tuple[float, float, float, float]
    """x, y, width, height"""
    panel_x: float
    panel_w: float
    top: float
    bottom: float
    left: float
    right: float

    @property
    def inset(self) -> float:
        """The margin inside a node's box."""
        return round(self.box.small * 0.45, 1)

    @property
    def label_h(self) -> float:
        """A node box's label row."""
        return round(self.box.small * LINE + self.inset * 0.6, 1)

    @property
    def gap(self) -> float:
        """Between node boxes."""
        return round(self.box.pad * 0.6, 1)


def node_box_of(deck_nodes: tuple[Rect, ...], node: int, detailed: bool) -> Rect | None:
    """The box drawing ``node`` (in a summary, box 0 is node 0's detail, box k+1 node k)."""
    index = node if detailed else node + 1
    if index < len(deck_nodes) and "more" not in deck_nodes[index].cls:
        return deck_nodes[index]
    return None


@dataclass(frozen=True)
class Geometry:
    """What a frame's overlay is drawn on: the frame's places, the layout, the drawn cells by
    rank, the node boxes and every group list."""

    frame: Frame
    layout: Layout
    detailed: bool
    cells: dict
    boxes: tuple
    groups: dict
    font: float
    """the cells' numbers' size"""

    def centre(self, r: int) -> tuple[float, float]:
        """Where a group's links meet a cell: near its top, above the rank number."""
        c = self.cells[r]
        return c.x + c.s / 2, c.y + min(self.frame.box.small * 0.8, c.s * 0.15)

    @property
    def side(self) -> float:
        return next(iter(self.cells.values())).s if self.cells else 0.0

    def notes(self, lines: int) -> bool:
        """Whether a cell holds ``lines`` small lines under its number."""
        s, small = self.side, self.frame.box.small
        return s * 0.6 >= self.font * 0.45 + lines * small * LINE + small * 0.4

    @property
    def number_at(self) -> float:
        """A cell's number: centred, or up in the cell where the cell holds a note under it."""
        return 0.36 if self.notes(1) else 0.5
