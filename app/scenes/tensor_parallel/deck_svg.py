"""The tensor-parallel deck as SVG markup (geometry from :mod:`app.scenes.tensor_parallel.deck`).

Every step works on different tensors, so each frame is a whole page: only the current frame
is displayed (a style hides the others), and the lanes, their rank swatches and labels — the
same in every frame with lanes — are drawn once beneath the frames; a frame without lanes (the
check) covers them with its own background. ``current`` is the frame shown first; the frames
after it follow the ``<svg>`` in an inert ``<template class="deck-later">`` as empty layers
that carry their markup in an attribute (:func:`app.draw.deck.later_frames`): static/js/player.js
moves a layer into the deck and makes its elements when it is needed.
``standalone`` is a file of its own: the style sheet inlined, concrete colours, the caption
underneath, one frame.

Written with f-strings rather than a template loop: numbers and generated texts need no
escaping; the free texts (names, notes, captions) are escaped.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.deck import frame_start, step_header, write_deck
from app.draw.svg import arrow, esc
from app.scenes.tensor_parallel.deck import Deck
from app.scenes.tensor_parallel.deck_frames import FrameView, Text

LEGEND_FILLS = {"grey": "#bcc3cb", "dark": "#3a4250", "shade": "url(#tp-shade)"}
DEFS = ('<linearGradient id="tp-shade" x1="0" x2="1" y1="0" y2="0"><stop offset="0" '
        'stop-color="#eef0f2"/><stop offset="1" stop-color="#0072B2"/></linearGradient>')


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    title = (f'<text class="muted title" text-anchor="end" font-size="{deck.geometry.small}">'
             + "".join(f'<tspan x="{x}" y="{y}">{esc(t)}</tspan>' for x, y, t in deck.top.title)
             + "</text>")
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current), standalone=standalone,
                      caption=caption, style=style, defs=DEFS, cls="deck tp-deck",
                      under=[title, *_flow(deck), *_lanes(deck)], over=_legend(deck),
                      box=deck.box)


def _text(t: Text) -> str:
    return (f'<text class="{t.cls}" x="{t.x}" y="{t.y}" text-anchor="{t.anchor}" '
            f'font-size="{t.size}" font-weight="{t.weight}">{esc(t.text)}</text>')


def _flow(deck: Deck) -> list[str]:
    """The block's data flow along the top."""
    small = deck.geometry.small
    out = ['<g class="flow">']
    for x0, x1, y in deck.flow_arrows:
        out.append(f'<line class="flow-arrow" x1="{x0}" x2="{x1 - 6:.1f}" y1="{y}" y2="{y}"/>'
                   f'<polygon class="flow-head" points="{x1},{y} {x1 - 8:.1f},{y - 5} '
                   f'{x1 - 8:.1f},{y + 5}"/>')
    for b in deck.flow:
        cx = round(b.x + b.w / 2, 2)
        first = round(b.y + small * 1.25 if b.lines else b.y + b.h / 2 + small * 0.35, 1)
        out.append(f'<rect class="flow-box {b.region}" x="{b.x}" y="{b.y}" width="{b.w}" '
                   f'height="{b.h}" rx="8"/><text class="ink" x="{cx}" y="{first}" '
                   f'text-anchor="middle" font-size="{small}" font-weight="700">'
                   f'{esc(b.label)}</text>')
        out += [f'<text class="muted" x="{cx}" y="{first + (k + 1) * small * 1.3:.1f}" '
                f'text-anchor="middle" font-size="{small}">{esc(line)}</text>'
                for k, line in enumerate(b.lines)]
    out.append("</g>")
    return out


def _lanes(deck: Deck) -> list[str]:
    """Each rank's lane, swatch and label: beneath every frame that has lanes."""
    g = deck.geometry
    x0 = round(g.left - g.pad * 0.5, 1)
    out = ['<g class="tp-lanes">']
    out += [f'<rect class="lane" x="{x0}" y="{top - 4:.1f}" width="{deck.width - g.pad * 0.5 - x0:.1f}" '
            f'height="{bottom - top + 8:.1f}" rx="6"/>' for top, bottom in deck.lanes]
    out += [f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{fill}"/>'
            for cx, cy, r, fill in deck.swatches]
    out += [f'<text class="ink" x="{t.x}" y="{t.y}" text-anchor="end" font-size="{t.size}" '
            f'font-weight="700">{t.text}</text>' for t in deck.lane_labels]
    out.append("</g>")
    return out


def _frame(deck: Deck, f: FrameView, current: int) -> list[str]:
    g = deck.geometry
    out = [frame_start(f.index, current, f.unit, hidden=f.index > current)]
    if not f.lanes:    # a whole-page view: it covers the lanes
        top = round(g.lanes_top - g.pad * 0.4, 1)
        out.append(f'<rect class="bg" x="0" y="{top}" width="{deck.width}" '
                   f'height="{g.lanes_bottom + 6 - top:.1f}"/>')
    if f.band:
        b = f.band
        out.append(f'<rect class="band" x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" '
                   f'rx="12"/>')
        out += [f'<text class="{t.cls} halo-bg" x="{t.x}" y="{t.y}" text-anchor="middle" '
                f'font-size="{t.size}" font-weight="{t.weight}">{esc(t.text)}</text>'
                for t in b.lines]
    for p in f.matrices:
        if p.dx or p.dy:
            out.append(f'<g class="cell" data-dx="{p.dx}" data-dy="{p.dy}">{p.view.markup}</g>')
        else:
            out.append(p.view.markup)
    out += [_text(t) for t in f.texts]
    if f.arrows:
        out.append('<g class="only-current arrows">'
                   + "".join(arrow(a.d, a.head, a.colour, 3, style=f"color: {a.colour}")
                             for a in f.arrows) + "</g>")
    if f.highlight:
        x, y, w, h = f.highlight
        out.append(f'<rect class="only-current flow-current" x="{x}" y="{y}" width="{w}" '
                   f'height="{h}" rx="10"/>')
    out.append(step_header(f.header, x=deck.top.header_x, y=deck.top.header_y,
                           size=g.head, only_current=True))
    out.append("</g>")
    return out


def _legend(deck: Deck) -> list[str]:
    side, small = deck.swatch, deck.geometry.small
    out = ['<g class="legend">']
    for kind, text, x, y in deck.legend:
        if kind == "ranks":     # the first ranks' colours, side by side in one swatch
            n = min(len(deck.swatches), 4)
            w = round(side / n, 2)
            out += [f'<rect x="{round(x + k * w, 2)}" y="{y}" width="{w}" height="{side}" '
                    f'fill="{s[3]}"/>' for k, s in enumerate(deck.swatches[:n])]
        else:
            out.append(f'<rect x="{x}" y="{y}" width="{side}" height="{side}" rx="2" '
                       f'fill="{LEGEND_FILLS[kind]}"/>')
        out.append(f'<text class="muted" x="{round(x + side + small * 0.45, 1)}" '
                   f'y="{round(y + side * 0.5 + small * 0.36, 1)}" font-size="{small}">'
                   f'{esc(text)}</text>')
    out.append("</g>")
    return out
