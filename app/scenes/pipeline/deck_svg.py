"""The pipeline deck as SVG markup (geometry from :mod:`app.scenes.pipeline.deck`).

``current`` is the frame shown first: it carries class "current" (the passes that start in it
are outlined, its arrows show), and the cursor and header are drawn once, at its time
(static/js/pipeline.js moves them when the player shows another frame). The frames after it are
not part of the drawing yet: they follow the ``<svg>`` in an inert
``<template class="deck-later">`` as empty layers that carry their markup in an attribute
(:func:`app.draw.deck.later_frames`), so a slider move costs the browser neither their style
and layout nor the parsing of their elements; static/js/player.js moves a layer into the deck
and makes its elements when it is needed. Without JavaScript the page shows the frame in
its URL, which needs no later frame. ``standalone`` is a file of its own: the style sheet
inlined, concrete colours, the caption underneath, frames up to ``current`` only.

Written with f-strings rather than a template loop: a deck holds a thousand passes, and the
numbers and generated texts here need no escaping (the few free texts are escaped).
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.deck import frame_start, step_header, write_deck
from app.draw.palette import PASS, mix
from app.draw.svg import esc, esc_attr
from app.scenes.pipeline.deck import Deck, FrameView

MB_SWATCH = (PASS["F"], mix(PASS["F"], "#000000", 0.22), PASS["F"], mix(PASS["F"], "#000000", 0.22))
DEFS = ('<pattern id="pp-idle" patternUnits="userSpaceOnUse" width="8" height="8" '
        'patternTransform="rotate(45)"><line class="idle-line" x1="0" y1="0" x2="0" y2="8"/>'
        '</pattern><pattern id="pp-hatch" patternUnits="userSpaceOnUse" width="7" height="7" '
        'patternTransform="rotate(-45)"><line x1="0" y1="0" x2="0" y2="7" stroke="#ffffff" '
        'stroke-width="2.2" stroke-opacity="0.75"/></pattern>')


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    # the title (and a summarised timeline's note) right-aligned, a line each
    under = [f'<text class="muted title" text-anchor="end" font-size="{deck.small}">'
             + "".join(f'<tspan x="{x}" y="{y}">{esc(t)}</tspan>' for x, y, t in deck.title_lines)
             + "</text>"]
    under += _lanes(deck, standalone)
    over = _now(deck, deck.frames[current])
    over.append('<g class="pp-hover" aria-hidden="true"></g>')
    over += _legend(deck)
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, defs=DEFS, cls="deck pipeline-deck",
                      under=under, over=over, box=deck.box,
                      group=f'font-size="{deck.font}" text-anchor="middle"')


def _lanes(deck: Deck, standalone: bool) -> list[str]:
    """Lane stripes, rank labels, the busy shape, the time axis (and summarised strips)."""
    left, right, bottom = deck.left, deck.right, deck.bottom
    stripes = "".join(f"M{left} {l.y}H{right}v{l.h}H{left}z" for l in deck.lanes[::2])
    out = [f'<path class="lane-bg" d="{stripes}"/>']
    gap = deck.small * 0.8
    for l in deck.lanes:
        if l.label:
            y = l.y + (l.h / 2 if not l.stages else l.h / 2 - deck.small * 0.65)
            out.append(f'<text class="ink" x="{left - gap:.1f}" y="{y:.1f}" dy="0.35em" '
                       f'text-anchor="end" font-size="{l.font}" font-weight="700">{l.label}</text>')
        if l.stages:
            out.append(f'<text class="muted" x="{left - gap:.1f}" '
                       f'y="{l.y + l.h / 2 + l.font * 0.65:.1f}" dy="0.35em" text-anchor="end" '
                       f'font-size="{deck.small}">{l.stages}</text>')
    sides = [f'<text x="{deck.side_x}" y="{l.y + l.h / 2:.1f}" dy="0.35em">{l.side}</text>'
             for l in deck.lanes if l.side]
    if deck.side_header:
        sides.insert(0, f'<text x="{deck.side_x}" y="{deck.axis_y}">{deck.side_header}</text>')
    # the passes to come, faint in their kind's colour (a solid edge: a dashed one costs the
    # browser ten times the raster); the passes drawn in each frame cover them. On a page the
    # edge is one screen pixel wide (non-scaling): Chromium's software rasteriser draws that as
    # a hairline, where a 1.2-unit edge took it 150 ms for 256 micro-batches' thousand passes
    # (the next frame waits for it; 60 ms as a hairline)
    edge = ('stroke-width="1" vector-effect="non-scaling-stroke"' if not standalone
            else 'stroke-width="1.2"')
    out += [f'<path class="pp-todo" fill="{fill}" fill-opacity="0.3" stroke="{fill}" {edge} '
            f'd="{d}"/>' for fill, d in deck.ghost]
    out.append('<path class="grid" fill="none" d="'
               + "".join(f"M{x} {deck.grid_top}V{bottom}" for x, _ in deck.ticks) + '"/>')
    out.append(f'<g class="muted" font-size="{deck.small}" text-anchor="middle">'
               + "".join(f'<text x="{x}" y="{deck.axis_y}">{label}</text>'
                         for x, label in deck.ticks)
               + "".join(sides) + "</g>")
    out += [f'<path fill="{fill}" d="{d}"/>' for fill, d in deck.slices.items()]
    return out


def _frame(deck: Deck, f: FrameView, current: int, standalone: bool) -> list[str]:
    """Frame k's layer. What only the current frame shows is not repeated in every layer: the
    passes that start in it are outlined by a style (class "marked"), its arrows are drawn
    here, and the cursor, veil and header are drawn once (:func:`_now`) from the data
    attributes of the current layer (static/js/pipeline.js moves them)."""
    out = [frame_start(f.index, current, f.unit, classes=" marked" if f.marked else "",
                       data=f' data-x="{f.cursor}" data-pill="{f.pill}" '
                            f'data-t="{esc_attr(f.cursor_label)}" data-head="{esc_attr(f.header)}"',
                       hidden=f.index > current)]
    if f.idle:
        out.append(f'<path class="idle" d="{f.idle}"/>')
    if f.memory:
        out.append(f'<path class="mem" d="{f.memory}"/>')
    if f.sends:
        out.append(f'<path class="send" d="{f.sends}"/>')
    h = deck.band
    half = round(h / 2, 2)
    for b in f.blocks:
        deps = f' data-deps="{b.deps}"' if b.deps else ""
        tip = f' data-tip="{b.title}"' if b.title else ""
        body = f'x="{b.x}" y="{b.y}" width="{b.w}" height="{h}"'
        hatch = f'<rect {body} fill="url(#pp-hatch)" rx="2"/>' if b.kind == "I" else ""
        label = (f'<text x="{b.x + b.w / 2:.2f}" y="{b.y + half:.2f}" dy="0.35em" '
                 f'fill="{b.ink}">{b.label}</text>' if b.label else "")
        out.append(f'<g class="pp {b.kind}" data-pass="{b.index}"{deps}{tip}>'
                   f'<rect class="body" {body} fill="{b.fill}" rx="2"/>{hatch}{label}</g>')
    if f.arrows and ((not standalone) or f.index == current):
        out.append('<g class="only-current arrows">'
                   + "".join(f'<g class="arrow dep"><path d="{a.d}"/><polygon '
                             f'points="{a.head}"/></g>' for a in f.arrows) + "</g>")
    out.append("</g>")
    return out


def _now(deck: Deck, f: FrameView) -> list[str]:
    """The current frame's veil (summarised timelines), time cursor and header."""
    bottom, top, small = deck.bottom, deck.grid_top, deck.small
    pill_h = round(small * 1.7, 1)
    pill_y = round(bottom + small * 0.4, 1)
    out = ['<g class="pp-now">']
    if not deck.drawn:
        out.append(f'<rect class="veil" x="{f.cursor}" y="{top}" width="{f.veil}" '
                   f'height="{bottom - top:.1f}" data-right="{deck.right}"/>')
    hidden = ' display="none"' if f.index == 0 else ""
    x, y, size = deck.header
    out.append(f'<g class="pp-cursor"{hidden}><line class="cursor" x1="{f.cursor}" '
               f'x2="{f.cursor}" y1="{top}" y2="{pill_y:.1f}"/>'
               f'<rect class="cursor-pill" x="{f.pill - deck.pill_w / 2:.1f}" y="{pill_y}" '
               f'width="{deck.pill_w}" height="{pill_h}" rx="{pill_h / 2:.1f}"/>'
               f'<text class="cursor-label" x="{f.pill}" y="{pill_y + pill_h / 2:.1f}" '
               f'dy="0.35em" text-anchor="middle" font-size="{small}">{esc(f.cursor_label)}'
               f'</text></g>' + step_header(f.header, x=x, y=y, size=size) + "</g>")
    return out


def _legend(deck: Deck) -> list[str]:
    out = ['<g class="legend">']
    side = deck.swatch
    half = round(side / 2, 1)
    for kind, fill, text, x, y in deck.legend:
        box = f'x="{x}" y="{y}" width="{side}" height="{side}"'
        if kind == "idle":
            out.append(f'<rect class="idle" {box}/><rect {box} fill="none" class="grid"/>')
        elif kind == "mem":
            out.append(f'<rect class="legend-mem" {box}/>')
        elif kind == "send":
            out.append(f'<line class="send" x1="{x}" y1="{y + side}" x2="{x + side}" y2="{y}"/>')
        elif kind == "todo":
            out += [f'<rect x="{x + k * half}" y="{y}" width="{half}" height="{side}" fill="{c}" '
                    f'fill-opacity="0.3" stroke="{c}" stroke-width="1.2"/>'
                    for k, c in enumerate((PASS["F"], PASS["B"]))]
        elif kind == "mb":
            quarter = round(side / 4, 1)
            out += [f'<rect x="{round(x + k * quarter, 1)}" y="{y}" width="{quarter}" '
                    f'height="{side}" fill="{c}"/>' for k, c in enumerate(MB_SWATCH)]
        else:
            w = ' class="legend-w"' if kind == "W" else ""
            out.append(f'<rect{w} {box} fill="{fill}" rx="2"/>')
            if kind == "I":
                out.append(f'<rect {box} fill="url(#pp-hatch)" rx="2"/>')
        out.append(f'<text class="muted" x="{round(x + side + deck.small * 0.45, 1)}" '
                   f'y="{round(y + side * 0.5 + deck.small * 0.36, 1)}" '
                   f'font-size="{deck.small}">{text}</text>')
    out.append("</g>")
    return out
