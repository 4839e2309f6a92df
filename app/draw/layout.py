"""Laying a deck out for its box (app/draw/box.py): the parts every deck shares — the step's
header and the deck's title along the top, a legend along the bottom — placed from the widths
of their texts at the box's type sizes, so that they never overlap and never shrink.

Sizes are the box's (``box.head`` for the header, ``box.small`` for the title and legend);
widths are DejaVu Sans's (app/draw/text.py). A deck writer asks for its top band with
:func:`heading`, for its legend's rows with :func:`legend_rows`, and lays its own drawing out
in what is left between them (docs/legibility.md has the memory deck as the worked example).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.draw.box import Box
from app.draw.text import text_width, wrap

LINE = 1.3
"""A line of text is this many times its size tall (baseline to baseline)."""


@dataclass(frozen=True)
class Heading:
    """The top band of a deck: the step's header at the left (each frame writes its own, at
    ``header_x, header_y``), the deck's title at the right — beside the header where both fit,
    else on lines of its own under it — and where the drawing below may start."""

    header_x: float
    header_y: float
    title: tuple[tuple[float, float, str], ...]
    """(x, baseline, text) of each line of the title, anchored at its end (right-aligned)"""
    top: float


def heading(box: Box, headers: Iterable[str], title: str, width: float | None = None) -> Heading:
    """The top band for ``headers`` (every frame's; the widest decides) and ``title``, across
    ``width`` units (the box's by default)."""
    width = box.width if width is None else width
    pad, head, small = box.pad, box.head, box.small
    header_y = pad + head * 0.8
    widest = max((text_width(h, head, bold=True) for h in headers), default=0.0)
    room = width - 2 * pad
    if widest + 2 * pad + text_width(title, small) <= room:
        lines = ((width - pad, header_y, title),)
        bottom = header_y + head * 0.3
    else:
        wrapped = wrap(title, small, room)
        lines = tuple((width - pad, header_y + (k + 1) * small * LINE, line)
                      for k, line in enumerate(wrapped))
        bottom = lines[-1][1] + small * 0.3 if lines else header_y + head * 0.3
    return Heading(pad, round(header_y, 1),
                   tuple((round(x, 1), round(y, 1), text) for x, y, text in lines),
                   round(bottom + pad * 0.6, 1))


@dataclass(frozen=True)
class Legend:
    """Legend items placed in rows along the bottom of a deck: ``at[k]`` is item k's (x, y)
    — the top left of its swatch — and ``top`` the upper edge of the first row."""

    at: tuple[tuple[float, float], ...]
    top: float
    swatch: float
    """the side of a swatch"""
    text_dx: float
    """from a swatch's x to its text's"""
    text_dy: float
    """from a swatch's y to its text's baseline"""


def legend_rows(box: Box, texts: list[str], swatch: bool = True,
                width: float | None = None, bottom: float | None = None) -> Legend:
    """Rows of legend items (a swatch, then its text at ``box.small``) filled left to right
    across ``width`` and stacked up from ``bottom`` (the box's edges by default)."""
    width = box.width if width is None else width
    bottom = box.height if bottom is None else bottom
    small, pad = box.small, box.pad
    side = round(small * 1.15, 1)
    dx = side + small * 0.45 if swatch else 0.0
    gap = small * 1.5
    rows: list[list[tuple[float, int]]] = [[]]
    x = pad
    for k, text in enumerate(texts):
        w = dx + text_width(text, small)
        if rows[-1] and x + w > width - pad:
            rows.append([])
            x = pad
        rows[-1].append((x, k))
        x += w + gap
    row_h = small * 1.6
    top = bottom - pad * 0.7 - len(rows) * row_h
    at: list[tuple[float, float]] = [(0.0, 0.0)] * len(texts)
    for r, row in enumerate(rows):
        y = top + r * row_h + (row_h - side) / 2
        for x, k in row:
            at[k] = (round(x, 1), round(y, 1))
    return Legend(tuple(at), round(top, 1), side, round(dx, 1), round(side * 0.5 + small * 0.36, 1))


def text_box(x: float, y: float, text: str, size: float, anchor: str = "start",
             bold: bool = False) -> tuple[float, float, float, float]:
    """The box (x0, y0, x1, y1) a label at baseline ``y`` covers (ascent and descent included)."""
    w = text_width(text, size, bold)
    x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    return (x0, y - size * 0.8, x0 + w, y + size * 0.25)


class Spots:
    """The boxes labels took so far: a label is placed only where it overlaps none of them
    (fewer labels where the box is small, never overlapping ones)."""

    def __init__(self, boxes=()):
        self.boxes: list[tuple[float, float, float, float]] = list(boxes)

    def free(self, box: tuple[float, float, float, float]) -> bool:
        x0, y0, x1, y1 = box
        return all(x1 <= a or x0 >= c or y1 <= b or y0 >= d for a, b, c, d in self.boxes)

    def take(self, box: tuple[float, float, float, float]) -> bool:
        """Whether ``box`` was free (it is taken then)."""
        if self.free(box):
            self.boxes.append(box)
            return True
        return False
