"""The tensor-parallel deck as SVG markup (geometry from :mod:`app.scenes.tensor_parallel.deck`).

Every step works on different tensors, so each frame is a whole page: only the current frame
is displayed (a style hides the others), and the lanes, their rank swatches and labels — the
same in every frame with lanes — are drawn once beneath the frames; a frame without lanes (the
check) covers them with its own background. ``current`` is the frame shown first; the frames
after it follow the ``<svg>`` in an inert ``<template class="deck-later">`` as empty layers
that carry their markup in an attribute (:func:`app.draw.svg.later_frames`): static/js/player.js
moves a layer into the deck and makes its elements when it is needed.
``standalone`` is a file of its own: the style sheet inlined, concrete colours, the caption
underneath, one frame.

Written with f-strings rather than a template loop: numbers and generated texts need no
escaping; the free texts (names, notes, captions) are escaped.
"""

from __future__ import annotations

from html import escape

from markupsafe import Markup

from app.scenes.tensor_parallel.deck import Deck
from app.scenes.tensor_parallel.deck_frames import FrameView, Text
from app.draw.svg import CAPTION_HEIGHT, deck_end, deck_open, esc

LEGEND_FILLS = {"grey": "#bcc3cb", "dark": "#3a4250", "shade": "url(#tp-shade)"}


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    height = deck.height + (CAPTION_HEIGHT if standalone else 0)
    out = [deck_open(deck.width, deck.height, deck.title, standalone=standalone, style=style,
                     cls="deck tp-deck",
                     defs='<linearGradient id="tp-shade" x1="0" x2="1" y1="0" y2="0"><stop '
                          'offset="0" stop-color="#eef0f2"/><stop offset="1" '
                          'stop-color="#0072B2"/></linearGradient>')]
    out.append(f'<rect class="bg" x="0" y="0" width="{deck.width}" height="{height}"/>'
               f'<text class="muted" x="{deck.width - 18}" y="32" text-anchor="end" '
               f'font-size="16">{escape(deck.title)}</text>')
    out += _flow(deck)
    out += _lanes(deck)
    shown = [f for f in deck.frames if f.index <= current]
    out.append('<g class="frames">')
    for f in shown:
        out += _frame(deck, f, current)
    out.append("</g>")
    out += _legend(deck)
    out.append(deck_end(standalone, caption, deck.height,
                        (_frame(deck, f, current) for f in deck.frames if f.index > current)))
    return Markup("".join(out))



def _text(t: Text) -> str:
    return (f'<text class="{t.cls}" x="{t.x}" y="{t.y}" text-anchor="{t.anchor}" '
            f'font-size="{t.size}" font-weight="{t.weight}">{escape(t.text)}</text>')


def _flow(deck: Deck) -> list[str]:
    """The block's data flow along the top."""
    out = ['<g class="flow">']
    for x0, x1, y in deck.flow_arrows:
        out.append(f'<line class="flow-arrow" x1="{x0}" x2="{x1 - 6:.1f}" y1="{y}" y2="{y}"/>'
                   f'<polygon class="flow-head" points="{x1},{y} {x1 - 8:.1f},{y - 5} '
                   f'{x1 - 8:.1f},{y + 5}"/>')
    for b in deck.flow:
        cx = round(b.x + b.w / 2, 2)
        out.append(f'<rect class="flow-box {b.region}" x="{b.x}" y="{b.y}" width="{b.w}" '
                   f'height="{b.h}" rx="8"/><text class="ink" x="{cx}" y="{b.y + 22}" '
                   f'text-anchor="middle" font-size="16" font-weight="700">'
                   f'{escape(b.label)}</text>')
        out += [f'<text class="muted" x="{cx}" y="{b.y + 40 + k * 16}" text-anchor="middle" '
                f'font-size="16">{escape(line)}</text>' for k, line in enumerate(b.lines)]
    out.append("</g>")
    return out


def _lanes(deck: Deck) -> list[str]:
    """Each rank's lane, swatch and label: beneath every frame that has lanes."""
    out = ['<g class="tp-lanes">']
    out += [f'<rect class="lane" x="104" y="{top - 4:.1f}" width="{deck.width - 112}" '
            f'height="{bottom - top + 8:.1f}" rx="6"/>' for top, bottom in deck.lanes]
    out += [f'<circle cx="{cx}" cy="{cy}" r="{r}" fill="{fill}"/>'
            for cx, cy, r, fill in deck.swatches]
    out += [f'<text class="ink" x="{t.x}" y="{t.y}" text-anchor="end" font-size="{t.size}" '
            f'font-weight="700">{t.text}</text>' for t in deck.lane_labels]
    out.append("</g>")
    return out


def _frame(deck: Deck, f: FrameView, current: int) -> list[str]:
    cls = "frame current" if f.index == current else "frame"
    hidden = ' display="none"' if f.index > current else ""
    out = [f'<g class="{cls}" data-frame="{f.index}" data-unit="{esc(f.unit)}"{hidden}>']
    if not f.lanes:    # a whole-page view: it covers the lanes
        out.append(f'<rect class="bg" x="0" y="124" width="{deck.width}" height="562"/>')
    if f.band:
        b = f.band
        out.append(f'<rect class="band" x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}" '
                   f'rx="12"/>')
        out += [f'<text class="{t.cls} halo-bg" x="{t.x}" y="{t.y}" text-anchor="middle" '
                f'font-size="{t.size}" font-weight="{t.weight}">{escape(t.text)}</text>'
                for t in b.lines]
    for p in f.matrices:
        if p.dx or p.dy:
            out.append(f'<g class="cell" data-dx="{p.dx}" data-dy="{p.dy}">{p.view.markup}</g>')
        else:
            out.append(p.view.markup)
    out += [_text(t) for t in f.texts]
    if f.arrows:
        out.append('<g class="only-current arrows">'
                   + "".join(f'<g class="arrow" style="color: {a.colour}"><path d="{a.d}" '
                             f'fill="none" stroke="{a.colour}" stroke-width="3" '
                             f'stroke-linecap="round"/><polygon points="{a.head}" '
                             f'fill="{a.colour}"/></g>' for a in f.arrows) + "</g>")
    if f.highlight:
        x, y, w, h = f.highlight
        out.append(f'<rect class="only-current flow-current" x="{x}" y="{y}" width="{w}" '
                   f'height="{h}" rx="10"/>')
    out.append(f'<text class="only-current ink step-header" x="20" y="32" font-size="21" '
               f'font-weight="700">{escape(f.header)}</text>')
    out.append("</g>")
    return out


def _legend(deck: Deck) -> list[str]:
    out = ['<g class="legend">']
    for kind, text, x, _ in deck.legend:
        if kind == "ranks":
            n = min(len(deck.swatches), 4)
            out += [f'<rect x="{x + k * 22}" y="695" width="20" height="16" fill="{s[3]}" rx="2"/>'
                    for k, s in enumerate(deck.swatches[:n])]
            out.append(f'<text class="muted" x="{x + n * 22 + 8}" y="708" font-size="16">'
                       f'{escape(text)}</text>')
        else:
            out.append(f'<rect x="{x}" y="695" width="22" height="16" rx="2" '
                       f'fill="{LEGEND_FILLS[kind]}"/><text class="muted" x="{x + 30}" y="708" '
                       f'font-size="16">{escape(text)}</text>')
    out.append("</g>")
    return out
