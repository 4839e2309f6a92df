"""The /train deck as SVG markup (geometry from :mod:`app.scenes.train.deck`).

``current`` is the frame shown first. Frames 0…current are layers of the drawing; the frames
after it follow the ``<svg>`` in an inert ``<template class="deck-later">``
(app.draw.svg.later_frames) that static/js/player.js moves into the deck when it steps there.
A frame's rectangles are one ``<path>`` per fill (thousands of tasks stay one element each
colour); its labels one ``<text>`` of ``<tspan>``s. A stage's ranks share one timeline, so
on the page the first rank's block of a frame is drawn and the others are ``<use>`` copies of
it (the browser parses a quarter of the markup at 4 ranks a stage); a copy is styled only by
what it carries (a document's style sheet does not reach into a ``<use>``'s copy), so what a
frame draws carries its own presentation attributes. ``standalone`` is a file of its own: the
style sheet inlined, concrete colours, frames up to ``current`` only, the caption underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.deck import CAPTION_HEIGHT, deck_end, deck_open, step_header
from app.draw.svg import esc, spans_text
from app.scenes.train.deck import Deck, FrameView, Rect

PATTERNS = ('<pattern id="tr-bubble-hatch" width="8" height="8" patternUnits="userSpaceOnUse">'
            '<circle class="tr-bubble-dot" cx="4" cy="4" r="1.6"/></pattern>'
            '<pattern id="tr-exposed-hatch" width="7" height="7" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect class="tr-exposed-line" x="0" y="0" width="3" '
            'height="7"/></pattern>')


def _path(rects) -> str:
    return "".join(f"M{x:.2f} {y:.1f}h{w:.2f}v{h:.1f}h{-w:.2f}z" for x, y, w, h, _ in rects)


def _filled(rects: tuple[Rect, ...], cls: str = "") -> list[str]:
    by_fill: dict[str, list[Rect]] = {}
    for r in rects:
        by_fill.setdefault(r.fill, []).append(r)
    extra = f' class="{cls}"' if cls else ""
    return [f'<path{extra} fill="{fill}" d="{_path(rs)}"/>' for fill, rs in by_fill.items()]


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    w = deck.width
    height = deck.height + (CAPTION_HEIGHT if standalone else 0)
    out = [deck_open(w, deck.height, deck.title, standalone=standalone, style=style,
                     defs=PATTERNS, box=deck.box),
           f'<rect class="bg" x="0" y="0" width="{w}" height="{height}"/>',
           f'<text class="muted title" text-anchor="end" font-size="{deck.small}">'
           + "".join(f'<tspan x="{x}" y="{y}">{esc(t)}</tspan>' for x, y, t in deck.title_lines)
           + "</text>"]
    out += _rows(deck)
    out.append('<g class="frames" shape-rendering="crispEdges">')
    for f in deck.frames[:current + 1]:
        out += _frame(deck, f, current, standalone)
    out.append("</g>")
    out += _legend(deck)
    later = (_frame(deck, f, current, standalone) for f in deck.frames[current + 1:])
    out.append(deck_end(standalone, caption, deck.height, later))
    return Markup("".join(out))


def _rows(deck: Deck) -> list[str]:
    """What every frame shares: the rows, the rank names, the time axis and its grid."""
    left, right = deck.axis.left, deck.axis.right
    out = ['<g class="tr-rows">']
    for row in deck.rows:
        out.append(f'<rect class="tr-row" x="{left}" y="{row.compute_y}" '
                   f'width="{right - left:.1f}" height="{row.compute_h}"/>')
        out += [f'<rect class="tr-lane" x="{left}" y="{y}" width="{right - left:.1f}" '
                f'height="{h}"/>' for _, y, h in row.lanes]
    out.append("</g>")
    gap = deck.small * 0.8
    names, coords, sides = [], [], []
    for row in deck.rows:
        middle = row.compute_y + row.compute_h / 2
        if row.label and row.coords:
            names.append(f'<tspan x="{left - gap:.1f}" y="{middle:.1f}" dy="0.35em">'
                         f'{esc(row.label)}</tspan>')
            coords.append(f'<tspan x="{left - gap:.1f}" y="{middle + deck.text * 1.15:.1f}" '
                          f'dy="0.35em">{esc(row.coords)}</tspan>')
        elif row.label:
            names.append(f'<tspan x="{left - gap:.1f}" y="{row.y + row.h / 2:.1f}" '
                         f'dy="0.35em">{esc(row.label)}</tspan>')
        if row.side:
            sides.append(f'<tspan x="{deck.side_x}" y="{row.y + row.h / 2:.1f}" dy="0.35em">'
                         f'{esc(row.side)}</tspan>')
    out.append(spans_text(f'class="ink" text-anchor="end" font-weight="600" '
                          f'font-size="{deck.text}"', names))
    out.append(spans_text(f'class="muted" text-anchor="end" font-size="{deck.small}"', coords))
    out.append(spans_text(f'class="muted" font-size="{deck.small}"', sides))
    out.append('<path class="grid" fill="none" d="'
               + "".join(f"M{x} {deck.grid_top}V{deck.bottom}" for x, _ in deck.ticks) + '"/>')
    out.append(spans_text(f'class="muted" text-anchor="middle" font-size="{deck.small}"',
                          [f'<tspan x="{x}" y="{deck.axis_y}">{esc(label)}</tspan>'
                           for x, label in deck.ticks]))
    return out


def _frame(deck: Deck, f: FrameView, current: int, standalone: bool) -> list[str]:
    css = "frame current" if f.index == current else "frame"
    out = [f'<g class="{css}" data-frame="{f.index}" data-unit="{esc(f.unit)}">']
    if f.index == 0:
        for rank, fills in deck.ghost:
            faint = [f'<path class="tr-ghost" fill="{fill}" fill-opacity="0.22" '
                     f'd="{_path(rects)}"/>' for fill, rects in fills]
            out += _copied(deck, f, rank, faint, standalone)
    for part in f.parts:
        inner = [f'<path class="tr-{kind}" fill="url(#tr-{kind}-hatch)" d="{_path(rects)}"/>'
                 for kind, rects in (("bubble", part.bubbles), ("exposed", part.exposed))
                 if rects]
        inner += _filled(part.rects)
        if part.labels:
            inner.append(spans_text(
                f'class="tr-pass" text-anchor="middle" dominant-baseline="central" '
                f'font-weight="700" pointer-events="none" font-size="{deck.small}"',
                [f'<tspan x="{t.x}" y="{t.y}" fill="{t.ink}">{esc(t.text)}</tspan>'
                 for t in part.labels]))
        out += _copied(deck, f, part.rank, inner, standalone)
    x, y, size = deck.header
    out.append(f'<g class="only-current"><line class="cursor" x1="{f.cursor}" x2="{f.cursor}" '
               f'y1="{deck.grid_top}" y2="{deck.bottom}"/>'
               + step_header(f.header, x=x, y=y, size=size) + "</g>")
    out.append("</g>")
    return out


def _copied(deck: Deck, f: FrameView, rank: int, inner: list[str], standalone: bool) -> list[str]:
    """``inner`` (what ``rank`` draws in frame ``f``) and a copy of it on each other rank of
    its stage: on the page a ``<use>`` of it (the markup the browser parses is the stage's
    first rank's alone), in a standalone file a moved group (the SVG readers of slide tools
    may not follow ``<use>``)."""
    offsets = dict(deck.copies).get(rank, ())
    body = "".join(inner)
    if not offsets:
        return [body]
    if standalone:
        return [f'<g>{body}</g>', *(f'<g transform="translate(0 {dy})">{body}</g>'
                                    for dy in offsets)]
    name = f"{deck.uid}-{f.index}-{rank}"
    return [f'<g id="{name}">{body}</g>', *(f'<use href="#{name}" y="{dy}"/>' for dy in offsets)]


def _legend(deck: Deck) -> list[str]:
    side = deck.swatch
    out = ['<g class="legend">']
    for kind, fill, _, x, y in deck.legend:
        paint = f'class="{fill[6:]}"' if fill.startswith("class:") else f'fill="{fill}"'
        out.append(f'<rect {paint} x="{x}" y="{y}" width="{side}" height="{side}" rx="2"/>')
    dx, dy = round(side + deck.small * 0.45, 1), round(side * 0.5 + deck.small * 0.36, 1)
    out.append(spans_text(f'class="muted" font-size="{deck.small}"',
                          [f'<tspan x="{round(x + dx, 1)}" y="{round(y + dy, 1)}">{esc(text)}'
                           f'</tspan>' for _, _, text, x, y in deck.legend]))
    out.append("</g>")
    return out
