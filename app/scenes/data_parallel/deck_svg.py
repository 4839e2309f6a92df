"""The data-parallel deck as SVG markup (geometry from :mod:`app.scenes.data_parallel.deck`).

``current`` is the frame shown first. Frames 0…current are layers of the drawing; the frames
after it follow the ``<svg>`` in an inert ``<template class="deck-later">`` that the player moves
into the deck when it steps there (static/js/player.js), so a slider move lays out only what is
on screen. Labels that share a style are ``<tspan>``s of one ``<text>``: a browser lays out a
text element at a cost that dwarfs its spans'. ``standalone`` is a file of its own: the style
sheet inlined, concrete colours, frames up to ``current`` only, the caption underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.deck import frame_start, step_header, write_deck
from app.draw.shapes import Label
from app.draw.svg import esc, spans_text
from app.scenes.data_parallel.deck import Deck, FrameView


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    title = ('<text class="muted title" text-anchor="end" font-size="{}">'.format(deck.small)
             + "".join(f'<tspan x="{x}" y="{y}">{esc(t)}</tspan>' for x, y, t in deck.title_lines)
             + "</text>")
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone),
                      standalone=standalone, caption=caption, style=style,
                      under=[title, *_axes(deck)], over=_legend(deck), box=deck.box,
                      group='shape-rendering="crispEdges"')


def _paint(colour: str) -> str:
    """A label's colour: ``class:name`` is a theme class, a colour is a fill, "" is ink."""
    if colour.startswith("class:"):
        return f' class="{colour[6:]}"'
    return f' fill="{colour}"' if colour else ' class="ink"'


def _axes(deck: Deck) -> list[str]:
    """What every frame shares: lane names, the time axis and its grid, the strip's title and
    outline, DataParallel's busy shares."""
    a = deck.axis
    out = [spans_text(f'class="ink" text-anchor="end" font-size="{deck.text}"',
                      [f'<tspan x="{t.x}" y="{t.y}" dy="0.35em">{t.text}</tspan>'
                       for t in deck.lane_names]),
           '<path class="grid" fill="none" d="'
           + "".join(f"M{x} {deck.grid_top}V{deck.lanes_bottom}" for x, _ in deck.ticks) + '"/>',
           f'<line class="axis-line" x1="{a.left}" x2="{a.right}" y1="{deck.lanes_bottom}" '
           f'y2="{deck.lanes_bottom}"/>',
           spans_text(f'class="muted" text-anchor="middle" font-size="{deck.small}"',
                      [f'<tspan x="{x}" y="{deck.axis_y}">{label}</tspan>'
                       for x, label in deck.ticks])]
    if deck.strip_title:
        t = deck.strip_title
        out.append(f'<text class="ink" x="{t.x}" y="{t.y}" font-size="{t.size}" '
                   f'font-weight="600">{esc(t.text)}</text>')
    out.append(spans_text(f'class="ink" font-weight="600" font-size="{deck.text}"',
                          [f'<tspan x="{t.x}" y="{t.y}" dy="0.35em">{t.text}</tspan>'
                           for t in deck.utilisation]))
    s = deck.strip
    if s and s.outline:
        out.append(f'<rect class="freed" x="{s.left}" y="{s.top}" width="{s.right - s.left:.1f}" '
                   f'height="{s.height}"/>')
    return out


def _labels(labels: tuple[Label, ...], anchor: str) -> str:
    return spans_text(f'text-anchor="{anchor}"',
                      [f'<tspan x="{t.x}" y="{t.y}" dy="0.35em" font-size="{t.size}"'
                       f'{_paint(t.colour)}>{t.text}</tspan>'
                       for t in labels if t.anchor == anchor])


def _frame(deck: Deck, f: FrameView, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit)]
    for b in f.pieces:
        paint = f' class="{b.cls}"' if b.cls else f' fill="{b.fill}"'
        out.append(f'<rect{paint} x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}"/>')
    out.append(_labels(f.texts, "start"))
    out.append(_labels(f.texts, "middle"))
    if not standalone or f.index == current:
        out.append(f'<g class="only-current"><line class="cursor" x1="{f.cursor}" '
                   f'x2="{f.cursor}" y1="{deck.grid_top}" y2="{deck.lanes_bottom + 4}"/>')
        if f.index > 0:
            out.append(f'<text class="ink halo-bg" x="{f.label_x}" y="{deck.cursor_y}" '
                       f'text-anchor="middle" font-size="{deck.small}" font-weight="700">'
                       f'{f.cursor_label}</text>')
        if f.note:
            t = f.note
            out.append(f'<text class="ink" x="{t.x}" y="{t.y}" font-size="{t.size}" '
                       f'font-weight="600">{esc(t.text)}</text>')
        x, y, size = deck.header
        out.append(step_header(f.header, x=x, y=y, size=size) + "</g>")
    out.append("</g>")
    return out


def _legend(deck: Deck) -> list[str]:
    side = deck.swatch
    out = ['<g class="legend">']
    for x, y, paint, _ in deck.legend:
        fill = (f' class="{paint[6:]}"' if paint.startswith("class:") else
                f' fill="{paint}"' if paint else ' class="freed"')
        out.append(f'<rect x="{x}" y="{y}" width="{side}" height="{side}"{fill} rx="2"/>')
    dx, dy = round(side + deck.small * 0.45, 1), round(side * 0.5 + deck.small * 0.36, 1)
    out.append(spans_text(f'class="muted" font-size="{deck.small}"',
                          [f'<tspan x="{round(x + dx, 1)}" y="{round(y + dy, 1)}">{esc(text)}'
                           f'</tspan>' for x, y, _, text in deck.legend]))
    out.append("</g>")
    return out
