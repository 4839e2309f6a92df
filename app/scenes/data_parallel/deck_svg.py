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

from app.draw.deck import deck_title, frame_start, step_header, write_deck
from app.draw.shapes import Label
from app.draw.svg import esc, spans_text
from app.scenes.data_parallel.deck import Deck, FrameView


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(f, current, standalone, deck.axis_y),
                      standalone=standalone, caption=caption, style=style,
                      under=[deck_title(deck.title, deck.width), *_axes(deck)],
                      over=_legend(deck), group='shape-rendering="crispEdges"')


def _paint(colour: str) -> str:
    """A label's colour: ``class:name`` is a theme class, a colour is a fill, "" is ink."""
    if colour.startswith("class:"):
        return f' class="{colour[6:]}"'
    return f' fill="{colour}"' if colour else ' class="ink"'


def _axes(deck: Deck) -> list[str]:
    """What every frame shares: lane names, the time axis, the strip's title and legend."""
    y = deck.axis_y
    out = [spans_text('class="ink" text-anchor="end"',
                 [f'<tspan x="{t.x}" y="{t.y}" dy="0.35em" font-size="{t.size}">{t.text}'
                  f'</tspan>' for t in deck.lane_names]),
           f'<line class="axis-line" x1="180" x2="1250" y1="{y}" y2="{y}"/>']
    out += [f'<line class="axis-line" x1="{x}" x2="{x}" y1="{y}" y2="{y + 6}"/>'
            for x, _ in deck.ticks]
    out.append(spans_text('class="muted" text-anchor="middle" font-size="16"',
                     [f'<tspan x="{x}" y="{y + 24}">{label}</tspan>'
                      for x, label in deck.ticks]))
    if deck.strip_title:
        out.append(f'<text class="ink" x="180" y="{deck.strip_y - 14}" font-size="16" '
                   f'font-weight="600">{esc(deck.strip_title)}</text>')
    for x, ly, colour, _ in deck.strip_legend:
        paint = (f' class="{colour[6:]}"' if colour.startswith("class:") else
                 f' fill="{colour}"' if colour else ' class="freed"')
        out.append(f'<rect x="{x}" y="{ly - 13}" width="24" height="16"{paint}/>')
    out.append(spans_text('class="muted" font-size="16"',
                     [f'<tspan x="{x + 30}" y="{ly}">{text}</tspan>'
                      for x, ly, _, text in deck.strip_legend]))
    out.append(spans_text('class="ink" font-weight="600"',
                     [f'<tspan x="{t.x}" y="{t.y}" font-size="{t.size}">{t.text}</tspan>'
                      for t in deck.utilisation]))
    if deck.strip_outline:
        out.append(f'<rect class="freed" x="180" y="{deck.strip_y}" width="1070" '
                   f'height="{deck.strip_h}"/>')
    return out


def _labels(labels: tuple[Label, ...], anchor: str) -> str:
    return spans_text(f'text-anchor="{anchor}"',
                 [f'<tspan x="{t.x}" y="{t.y}" font-size="{t.size}"{_paint(t.colour)}>{t.text}'
                  f'</tspan>' for t in labels if t.anchor == anchor])


def _frame(f: FrameView, current: int, standalone: bool, axis_y: float) -> list[str]:
    out = [frame_start(f.index, current, f.unit)]
    for b in f.pieces:
        paint = f' class="{b.cls}"' if b.cls else f' fill="{b.fill}"'
        out.append(f'<rect{paint} x="{b.x}" y="{b.y}" width="{b.w}" height="{b.h}"/>')
    out.append(_labels(f.texts, "start"))
    out.append(_labels(f.texts, "middle"))
    if not standalone or f.index == current:
        out.append(f'<g class="only-current"><line class="cursor" x1="{f.cursor}" '
                   f'x2="{f.cursor}" y1="84" y2="{axis_y + 4}"/>')
        if f.index > 0:
            out.append(f'<text class="ink halo-bg" x="{min(f.cursor, 1180)}" y="80" '
                       f'text-anchor="middle" font-size="16">{f.cursor_label}</text>')
        out += [f'<text class="ink" x="{t.x}" y="{t.y}" font-size="{t.size}" '
                f'font-weight="600">{esc(t.text)}</text>' for t in f.notes]
        out.append(step_header(f.header) + "</g>")
    out.append("</g>")
    return out


def _legend(deck: Deck) -> list[str]:
    out = ['<g class="legend">']
    out += [f'<rect x="{x}" y="684" width="22" height="16" fill="{colour}" rx="2"/>'
            for x, colour, _ in deck.legend]
    out.append(spans_text('class="muted" y="697" font-size="16"',
                     [f'<tspan x="{x + 28}">{text}</tspan>' for x, _, text in deck.legend]))
    out.append("</g>")
    return out
