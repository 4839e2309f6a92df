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

from app.draw.deck import deck_title, frame_start, step_header, write_deck
from app.draw.svg import arrow, esc
from app.scenes.tensor_parallel.deck import Deck
from app.scenes.tensor_parallel.deck_frames import FrameView, Text

LEGEND_FILLS = {"grey": "#bcc3cb", "dark": "#3a4250", "shade": "url(#tp-shade)"}
DEFS = ('<linearGradient id="tp-shade" x1="0" x2="1" y1="0" y2="0"><stop offset="0" '
        'stop-color="#eef0f2"/><stop offset="1" stop-color="#0072B2"/></linearGradient>')


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] | list[str] = (), style: str = "") -> Markup:
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current), standalone=standalone,
                      caption=caption, style=style, defs=DEFS, cls="deck tp-deck",
                      under=[deck_title(deck.title, deck.width, size=16, cls="muted", y=32),
                             *_flow(deck), *_lanes(deck)],
                      over=_legend(deck))


def _text(t: Text) -> str:
    return (f'<text class="{t.cls}" x="{t.x}" y="{t.y}" text-anchor="{t.anchor}" '
            f'font-size="{t.size}" font-weight="{t.weight}">{esc(t.text)}</text>')


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
                   f'{esc(b.label)}</text>')
        out += [f'<text class="muted" x="{cx}" y="{b.y + 40 + k * 16}" text-anchor="middle" '
                f'font-size="16">{esc(line)}</text>' for k, line in enumerate(b.lines)]
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
    out = [frame_start(f.index, current, f.unit, hidden=f.index > current)]
    if not f.lanes:    # a whole-page view: it covers the lanes
        out.append(f'<rect class="bg" x="0" y="124" width="{deck.width}" height="562"/>')
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
    out.append(step_header(f.header, x=20, y=32, size=21, only_current=True))
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
                       f'{esc(text)}</text>')
        else:
            out.append(f'<rect x="{x}" y="695" width="22" height="16" rx="2" '
                       f'fill="{LEGEND_FILLS[kind]}"/><text class="muted" x="{x + 30}" y="708" '
                       f'font-size="16">{esc(text)}</text>')
    out.append("</g>")
    return out
