"""The /parallelism deck as SVG markup (geometry from :mod:`app.scenes.parallelism.deck`).

The nodes and the numbered ranks are drawn once, beneath the frames; each frame is a whole
overlay and only the current one is displayed (the style hides the others). ``current`` is the
frame shown first; the frames after it follow the ``<svg>`` in an inert
``<template class="deck-later">`` (:func:`app.draw.svg.later_frames`), which static/js/player.js
moves into the deck when it steps there. Every rank's cell carries ``data-groups`` (the index
of its group of every kind) and five hidden strips, one per axis: static/js/mesh.js shows the
strips of the hovered rank's groups. ``standalone`` is a file of its own: the style inlined,
concrete colours, the caption underneath, the one frame.
"""

from __future__ import annotations

from html import escape

from markupsafe import Markup

from app.draw.fmt import coord
from app.draw.svg import CAPTION_HEIGHT, deck_end, deck_open, esc
from app.scenes.parallelism.deck import (
    AXIS_COLOURS,
    KINDS,
    Box,
    Deck,
    FrameView,
    Path,
    Text,
)

MONO = "'DejaVu Sans Mono', Menlo, Consolas, monospace"


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    height = deck.height + (CAPTION_HEIGHT if standalone else 0)
    out = [deck_open(deck.width, deck.height, deck.title, standalone=standalone, style=style,
                     cls="deck"),
           f'<rect class="bg" x="0" y="0" width="{deck.width}" height="{height}"/>',
           _text(Text(deck.width - 18, 34, deck.title, 17, "muted", "end"))]
    out += [_box(b) for b in deck.nodes]
    out += [_text(t) for t in deck.node_labels]
    out.append(_cells(deck, standalone))
    out.append('<g class="frames">')
    shown = [f for f in deck.frames if f.index <= current] if not standalone else deck.frames
    for f in shown:
        out += _frame(f, current)
    out.append("</g>")
    out += [_shape(s) for s in deck.legend]
    out.append(deck_end(standalone, caption, deck.height,
                        (_frame(f, current) for f in deck.frames if f.index > current)))
    return Markup("".join(out))


def _cells(deck: Deck, standalone: bool) -> str:
    out = ['<g class="ranks">']
    font = deck.cell_font
    for c in deck.cells:
        tip = "" if standalone else f' data-tip="{escape(c.tip)}"'
        strip_w = (c.s - 8) / len(KINDS)
        strips = "".join(
            f'<rect class="strip s-{k}" x="{coord(c.x + 4 + i * strip_w)}" '
            f'y="{coord(c.y + c.s - 13)}" width="{coord(strip_w - 1)}" height="10" '
            f'fill="{AXIS_COLOURS[k]}"/>' for i, k in enumerate(KINDS)) if not standalone else ""
        y = c.y + (c.s * 0.36 if c.s >= 56 else c.s / 2)
        out.append(f'<g class="mrank" data-rank="{c.rank}" data-groups="{c.groups}"{tip}>'
                   f'<rect class="cell-bg" x="{coord(c.x + 1)}" y="{coord(c.y + 1)}" '
                   f'width="{coord(c.s - 2)}" height="{coord(c.s - 2)}" rx="4"/>'
                   f'<text class="ink" x="{coord(c.x + c.s / 2)}" y="{coord(y)}" '
                   f'text-anchor="middle" dominant-baseline="central" font-size="{font}" '
                   f'font-weight="700">{c.rank}</text>{strips}</g>')
    out.append("</g>")
    return "".join(out)


def _frame(f: FrameView, current: int) -> list[str]:
    css = "frame current" if f.index == current else "frame"
    out = [f'<g class="{css}" data-frame="{f.index}" data-unit="{esc(f.unit)}" data-axis="{f.axis}">']
    out += [_shape(s) for s in f.shapes]
    out.append(_text(Text(22, 36, f.header, 22, "ink step-header", weight=700)))
    out.append("</g>")
    return out


def _shape(s) -> str:
    if isinstance(s, Text):
        return _text(s)
    if isinstance(s, Box):
        return _box(s)
    if isinstance(s, Path):
        dash = ' stroke-dasharray="9 6"' if s.dashed else ""
        return (f'<path class="{s.cls}" d="{s.d}" fill="none" stroke="{s.stroke}" '
                f'stroke-width="{coord(s.width)}" stroke-linecap="round"{dash}/>')
    raise TypeError(s)


def _box(b: Box) -> str:
    fill = f' fill="{b.fill}"' if b.fill else ""
    stroke = f' stroke="{b.stroke}"' if b.stroke else ""
    return (f'<rect class="{b.cls}" x="{coord(b.x)}" y="{coord(b.y)}" width="{coord(b.w)}" '
            f'height="{coord(b.h)}" rx="6"{fill}{stroke}/>')


def _text(t: Text) -> str:
    anchor = f' text-anchor="{t.anchor}"' if t.anchor != "start" else ""
    weight = f' font-weight="{t.weight}"' if t.weight != 400 else ""
    family = f' font-family="{MONO}"' if t.mono else ""
    fill = f' style="fill: {t.fill}"' if t.fill else ""
    return (f'<text class="{t.cls}" x="{coord(t.x)}" y="{coord(t.y)}" font-size="{coord(t.size)}"'
            f'{anchor}{weight}{family}{fill}>{escape(t.text, quote=False)}</text>')
