"""What the MoE deck's halves share (:mod:`.deck`, :mod:`.deck_router`, :mod:`.deck_ep`): the
drawing's bands as the box lays them out, the value ramp, rectangles batched into paths, and the
frame's geometry types.

Colours: ranks take app.draw.palette's rank colours (a token's chip, a slot's sender, a
column's header); values (logits, probabilities, vector entries, matrix counts) a purple ramp,
darker for larger; experts are told apart by their labels E0, E1, …; dropped slots are hatched.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.draw.palette import ramp
from app.draw.shapes import Arrow, Rect, Text
from app.draw.text import fits

PURPLES = ("#f2f0f7", "#dadaeb", "#bcbddc", "#9e9ac8", "#807dba", "#6a51a3", "#4a1486")
CHOSEN = "#3f007d"
LEVELS = tuple(ramp(PURPLES, k / 10) for k in range(11))
"""the value ramp in 11 steps: few fills, so a frame's cells batch into few paths"""


def value_fill(t: float) -> str:
    """A value's shade, ``t`` ∈ [0, 1] (clipped)."""
    return LEVELS[min(10, max(0, int(round(t * 10))))] if t == t else LEVELS[0]


@dataclass(frozen=True)
class Lay:
    """The deck's bands: the heading above ``top``, a line of notes (each half's own, at
    baseline ``sub_y``) down to ``body``, the drawing down to ``bottom``, the legend under it.
    The router's table ends at ``split`` (its bins start there), expert parallelism's matrix
    column at ``ep_split``."""
    width: float
    height: float
    text: float
    small: float
    head: float
    pad: float
    top: float
    sub_y: float
    body: float
    bottom: float
    split: float
    ep_split: float


@dataclass(frozen=True)
class Batch:
    """Rectangles of one fill each drawn as one path, and texts, moved together: the rows a
    rank sends one other rank fly in from the sender's column by (dx, dy)."""
    paths: tuple[tuple[str, str], ...]     # (fill, d)
    texts: tuple[Text, ...]
    dx: float = 0.0
    dy: float = 0.0


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    items: tuple
    arrows: tuple[Arrow, ...] = ()
    unit: str = ""
    """what the step is, for the player's position text (stage 3 of 7 of the MoE layer: …)"""
    arrow_labels: tuple[Text, ...] = ()
    """the arrows' numbers, written over every arrow's line"""


def cells(boxes: dict[str, list[str]], x: float, y: float, w: float, h: float, fill: str):
    boxes[fill].append("M%.1f,%.1fh%.1fv%.1fh%.1fz" % (x, y, w, h, -w))


def batch(boxes: dict[str, list[str]], texts=(), dx=0.0, dy=0.0) -> Batch:
    return Batch(tuple((f, "".join(d)) for f, d in boxes.items()), tuple(texts), dx, dy)


def first_fit(options, size: float, width: float, bold: bool = False) -> str:
    """The first of ``options`` that fits ``width`` at ``size`` ("" when none does)."""
    return next((o for o in options if fits(o, size, width, bold)), "")


def note(lay: Lay, x0: float, x1: float, options, cover: bool = False) -> list:
    """A half's line of notes between ``x0`` and ``x1``: the first of ``options`` that fits at
    the small size; ``cover`` hides the line an earlier frame wrote there."""
    items: list = []
    if cover:
        items.append(Rect(x0 - 4, lay.top, x1 - x0 + 8, lay.body - lay.top, cls="panel-bg"))
    text = first_fit(options, lay.small, x1 - x0)
    if text:
        items.append(Text(x0, lay.sub_y, text, size=lay.small, cls="muted"))
    return items


def size_for(text: str, width: float, height: float, lay: Lay, bold: bool = False) -> float:
    """The label size or the small one, whichever fits ``width`` × ``height`` first (0: none)."""
    for size in (lay.text, lay.small):
        if fits(text, size, width, bold) and height >= size * 1.15:
            return size
    return 0.0
