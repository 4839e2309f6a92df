"""The /parallelism deck as SVG markup (geometry from :mod:`app.scenes.parallelism.deck`).

The nodes and the numbered ranks are drawn once, beneath the frames; each frame is a whole
overlay and only the current one is displayed (the style hides the others). ``current`` is the
frame shown first; the frames after it follow the ``<svg>`` in an inert
``<template class="deck-later">`` (:func:`app.draw.deck.later_frames`), which static/js/player.js
moves into the deck when it steps there. Every rank's cell carries ``data-groups`` (the index
of its group of every kind) and five hidden strips, one per axis: static/js/mesh.js shows the
strips of the hovered rank's groups. ``standalone`` is a file of its own: the style inlined,
concrete colours, the caption underneath, the one frame. The frames are written by
:func:`app.draw.deck.write_deck`, the shapes by :mod:`app.draw.shapes`.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw import shapes
from app.draw.deck import frame_start, step_header, write_deck
from app.draw.shapes import Path, Rect, Text, coord
from app.draw.svg import esc
from app.scenes.parallelism.deck import Deck, FrameView
from app.scenes.parallelism.deck_geometry import AXIS_COLOURS, KINDS


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    under = [shapes.label(t) for t in deck.titles]
    under += [shapes.box(b) for b in deck.nodes]
    under += [shapes.label(t) for t in deck.node_labels]
    under.append(_cells(deck, standalone))
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current), standalone=standalone,
                      caption=caption, style=style, under=under,
                      over=[_shape(s) for s in deck.legend], every_frame=True, box=deck.box)


def _cells(deck: Deck, standalone: bool) -> str:
    out = ['<g class="ranks">']
    font = deck.cell_font
    for c in deck.cells:
        tip = "" if standalone else f' data-tip="{esc(c.tip)}"'
        strip_w = (c.s - 8) / len(KINDS)
        strips = "".join(
            f'<rect class="strip s-{k}" x="{coord(c.x + 4 + i * strip_w)}" '
            f'y="{coord(c.y + c.s - 3 - deck.strip)}" width="{coord(strip_w - 1)}" '
            f'height="{coord(deck.strip)}" fill="{AXIS_COLOURS[k]}"/>'
            for i, k in enumerate(KINDS)) if not standalone else ""
        y = c.y + c.s * deck.number_at
        out.append(f'<g class="mrank" data-rank="{c.rank}" data-groups="{c.groups}"{tip}>'
                   f'<rect class="cell-bg" x="{coord(c.x + 1)}" y="{coord(c.y + 1)}" '
                   f'width="{coord(c.s - 2)}" height="{coord(c.s - 2)}" rx="4"/>'
                   f'<text class="ink" x="{coord(c.x + c.s / 2)}" y="{coord(y)}" '
                   f'text-anchor="middle" dominant-baseline="central" font-size="{font}" '
                   f'font-weight="700">{c.rank}</text>{strips}</g>')
    out.append("</g>")
    return "".join(out)


def _frame(deck: Deck, f: FrameView, current: int) -> list[str]:
    out = [frame_start(f.index, current, f.unit, after=f' data-axis="{f.axis}"')]
    out += [_shape(s) for s in f.shapes]
    h = deck.header
    out.append(step_header(f.header, x=h.x, y=h.y, size=h.size))
    out.append("</g>")
    return out


def _shape(s) -> str:
    if isinstance(s, Text):
        return shapes.label(s)
    if isinstance(s, Rect):
        return shapes.box(s, rx=3 if s.cls == "swatch" else 6)
    if isinstance(s, Path):
        return shapes.line(s)
    raise TypeError(s)
