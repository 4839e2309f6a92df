"""The /train deck as SVG markup (geometry from :mod:`app.scenes.train.deck`).

``current`` is the frame shown first. Frames 0…current are layers of the drawing; the frames
after it follow the ``<svg>`` in an inert ``<template class="deck-later">``
(app.draw.svg.later_frames) that static/js/player.js moves into the deck when it steps there.
A frame's rectangles are one ``<path>`` per fill (thousands of tasks stay one element each
colour); its labels one ``<text>`` of ``<tspan>``s. ``standalone`` is a file of its own: the
style sheet inlined, concrete colours, frames up to ``current`` only, the caption underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.svg import CAPTION_HEIGHT, deck_end, deck_open, esc, spans_text
from app.scenes.train.deck import BOTTOM, LEFT, RIGHT, TOP, Deck, FrameView, Rect

PATTERNS = ('<pattern id="tr-bubble-hatch" width="8" height="8" patternUnits="userSpaceOnUse">'
            '<circle class="tr-bubble-dot" cx="4" cy="4" r="1.6"/></pattern>'
            '<pattern id="tr-exposed-hatch" width="7" height="7" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect class="tr-exposed-line" x="0" y="0" width="3" '
            'height="7"/></pattern>')


def _path(rects) -> str:
    return "".join(f"M{r.x:.2f} {r.y:.1f}h{r.w:.2f}v{r.h:.1f}h{-r.w:.2f}z" for r in rects)


def _filled(rects: tuple[Rect, ...], cls: str = "") -> list[str]:
    by_fill: dict[str, list[Rect]] = {}
    for r in rects:
        by_fill.setdefault(r.fill, []).append(r)
    extra = f' class="{cls}"' if cls else ""
    return [f'<path{extra} fill="{fill}" d="{_path(rs)}"/>' for fill, rs in by_fill.items()]


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    w = deck.width
    height = deck.height + (CAPTION_HEIGHT if standalone else 0)
    out = [deck_open(w, deck.height, deck.title, standalone=standalone, style=style,
                     defs=PATTERNS),
           f'<rect class="bg" x="0" y="0" width="{w}" height="{height}"/>',
           f'<text class="muted" x="{w - 16}" y="32" text-anchor="end" font-size="17">'
           f'{esc(deck.title)}</text>']
    out += _rows(deck)
    out.append('<g class="frames" shape-rendering="crispEdges">')
    for f in deck.frames[:current + 1]:
        out += _frame(deck, f, current)
    out.append("</g>")
    out += _legend(deck)
    out.append(deck_end(standalone, caption, deck.height,
                        (_frame(deck, f, current) for f in deck.frames[current + 1:])))
    return Markup("".join(out))


def _rows(deck: Deck) -> list[str]:
    """What every frame shares: the rows, the rank names, the time axis."""
    out = ['<g class="tr-rows">']
    for row in deck.rows:
        out.append(f'<rect class="tr-row" x="{LEFT}" y="{row.compute_y}" '
                   f'width="{RIGHT - LEFT}" height="{row.compute_h}"/>')
        out += [f'<rect class="tr-lane" x="{LEFT}" y="{y}" width="{RIGHT - LEFT}" '
                f'height="{h}"/>' for _, y, h in row.lanes]
    out.append("</g>")
    names, coords, sides = [], [], []
    for row in deck.rows:
        if row.coords:
            names.append(f'<tspan x="{LEFT - 10}" y="{row.compute_y + row.compute_h / 2 - 2}" '
                         f'font-size="{row.font}">{esc(row.label)}</tspan>')
            coords.append(f'<tspan x="{LEFT - 10}" y="{row.compute_y + row.compute_h / 2 + 17}"'
                          f'>{esc(row.coords)}</tspan>')
        else:
            names.append(f'<tspan x="{LEFT - 10}" y="{row.compute_y + row.compute_h / 2 + 6}" '
                         f'font-size="{row.font}">{esc(row.label)}</tspan>')
        if row.side:
            sides.append(f'<tspan x="{RIGHT + 10}" y="{row.compute_y + row.compute_h / 2 + 6}">'
                         f'{esc(row.side)}</tspan>')
    out.append(spans_text('class="ink" text-anchor="end" font-weight="600"', names))
    out.append(spans_text('class="muted" text-anchor="end" font-size="15"', coords))
    out.append(spans_text('class="muted" font-size="15"', sides))
    y = BOTTOM + 4
    out.append(f'<line class="axis-line" x1="{LEFT}" x2="{RIGHT}" y1="{y}" y2="{y}"/>')
    out += [f'<line class="axis-line" x1="{x}" x2="{x}" y1="{y}" y2="{y + 6}"/>'
            for x, _ in deck.ticks]
    out.append(spans_text('class="muted" text-anchor="middle" font-size="16"',
                          [f'<tspan x="{x}" y="{y + 24}">{esc(label)}</tspan>'
                           for x, label in deck.ticks]))
    return out


def _frame(deck: Deck, f: FrameView, current: int) -> list[str]:
    css = "frame current" if f.index == current else "frame"
    out = [f'<g class="{css}" data-frame="{f.index}" data-unit="{esc(f.unit)}">']
    if f.index == 0:
        for fill, rects in deck.ghost:
            out.append(f'<path class="tr-ghost" fill="{fill}" d="{_path(rects)}"/>')
    if f.bubbles:
        out.append(f'<path class="tr-bubble" d="{_path(f.bubbles)}"/>')
    if f.exposed:
        out.append(f'<path class="tr-exposed" d="{_path(f.exposed)}"/>')
    out += _filled(f.rects)
    for size in sorted({t.size for t in f.labels}):
        spans = [f'<tspan x="{t.x}" y="{t.y}" fill="{t.ink}">{esc(t.text)}</tspan>'
                 for t in f.labels if t.size == size]
        out.append(spans_text(f'class="tr-pass" text-anchor="middle" '
                              f'dominant-baseline="central" font-size="{size:g}"', spans))
    out.append(f'<g class="only-current"><line class="cursor" x1="{f.cursor}" x2="{f.cursor}" '
               f'y1="{TOP - 8}" y2="{BOTTOM + 4}"/>'
               f'<text class="ink step-header" x="22" y="36" font-size="24" '
               f'font-weight="700">{esc(f.header)}</text></g>')
    out.append("</g>")
    return out


def _legend(deck: Deck) -> list[str]:
    out = ['<g class="legend">']
    for kind, fill, _, x, y in deck.legend:
        paint = f'class="{fill[6:]}"' if fill.startswith("class:") else f'fill="{fill}"'
        out.append(f'<rect {paint} x="{x}" y="{y - 14}" width="26" height="18" rx="2"/>')
    out.append(spans_text('class="muted" font-size="16"',
                          [f'<tspan x="{x + 34}" y="{y}">{esc(text)}</tspan>'
                           for _, _, text, x, y in deck.legend]))
    if deck.lane_note:
        out.append(f'<text class="muted" x="{LEFT}" y="{TOP - 16}" font-size="16">'
                   f'{esc(deck.lane_note)}</text>')
    out.append("</g>")
    return out
