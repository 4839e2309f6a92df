"""Small geometry helpers shared by the drawings: node layouts and curved arrows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Point:
    x: float
    y: float


def on_circle(index: int, count: int, cx: float, cy: float, radius: float) -> Point:
    """Position ``index`` of ``count`` on a circle, the first at the top, going clockwise."""
    angle = -math.pi / 2 + 2 * math.pi * index / count
    return Point(cx + radius * math.cos(angle), cy + radius * math.sin(angle))


@dataclass(frozen=True)
class ArrowPath:
    d: str                 # SVG path of the shaft (quadratic Bézier)
    head: str              # polygon points of the arrowhead
    mid: Point             # the curve's midpoint, for a label


@lru_cache(maxsize=8192)  # a schedule sends along the same few links step after step
def arrow(p: Point, q: Point, bend: float, gap_start: float, gap_end: float,
          head: float = 12.0) -> ArrowPath:
    """A curved arrow from ``p`` to ``q`` stopping ``gap_*`` short of each point.

    ``bend`` pushes the control point to the left of the direction of travel by that fraction of
    the distance, so arrows p→q and q→p curve apart instead of overlapping.
    """
    dx, dy = q.x - p.x, q.y - p.y
    length = math.hypot(dx, dy) or 1.0
    # left of travel on screen (y grows downwards)
    c = Point((p.x + q.x) / 2 + bend * length * dy / length,
              (p.y + q.y) / 2 - bend * length * dx / length)
    start = _towards(p, c, gap_start)
    tip = _towards(q, c, gap_end)
    base = _towards(tip, c, head)
    ux, uy = (tip.x - base.x) / head, (tip.y - base.y) / head
    w = head * 0.5
    left = Point(base.x - uy * w, base.y + ux * w)
    right = Point(base.x + uy * w, base.y - ux * w)
    mid = Point(0.25 * p.x + 0.5 * c.x + 0.25 * q.x, 0.25 * p.y + 0.5 * c.y + 0.25 * q.y)
    return ArrowPath(
        f"M{start.x:.1f},{start.y:.1f} Q{c.x:.1f},{c.y:.1f} {base.x:.1f},{base.y:.1f}",
        f"{tip.x:.1f},{tip.y:.1f} {left.x:.1f},{left.y:.1f} {right.x:.1f},{right.y:.1f}",
        mid)


def _towards(p: Point, c: Point, distance: float) -> Point:
    dx, dy = c.x - p.x, c.y - p.y
    length = math.hypot(dx, dy) or 1.0
    return Point(p.x + dx / length * distance, p.y + dy / length * distance)
