"""The ZeRO deck as SVG markup (geometry from :mod:`app.scenes.zero.deck`).

``current`` is the frame shown first. Frames 0…current are layers of the drawing; the frames
after it follow the ``<svg>`` in an inert ``<template class="deck-later">`` that the player moves
into the deck when it steps there (static/js/player.js), so a slider move lays out only what is
on screen. Each frame holds the cells its phase changed; its memory bar, arrows, notes and
header show only while it is current (class "only-current"), so no frame has to paint over the
previous one. Numbers take their anchor, weight and colour from a group (``cn`` classes) rather
than from attributes on every ``<text>``. ``standalone`` is a file of its own: the style sheet
inlined, concrete colours, frames up to ``current`` only, the caption underneath.
"""

from __future__ import annotations

from markupsafe import Markup

from app.draw.deck import deck_title, frame_start, step_header, write_deck
from app.draw.svg import arrow, esc, spans_text
from app.scenes.zero.deck import Deck, FrameView

DEFS = ('<pattern id="pad-hatch" patternUnits="userSpaceOnUse" width="7" height="7" '
        'patternTransform="rotate(45)"><rect width="7" height="7" fill="#d9dde3"/>'
        '<line x1="0" y1="0" x2="0" y2="7" stroke="#7d8896" stroke-width="3"/></pattern>')


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda f: _frame(deck, f, current, standalone), standalone=standalone,
                      caption=caption, style=style, defs=DEFS,
                      under=[deck_title(deck.title, deck.width), *_grid_frame(deck)],
                      over=_legend(deck), group=f'font-size="{deck.font}"')


def _grid_frame(deck: Deck) -> list[str]:
    """What every frame shares: the ring of ranks, the grid's labels and separators, and the
    memory panel's title and DDP's outline for scale."""
    first = deck.ring[0]
    out = [f'<text class="muted" x="{first.x}" y="{round(first.y - first.r - 14, 1)}" '
           f'text-anchor="middle" font-size="16">ranks</text>']
    out += [f'<circle cx="{n.x}" cy="{n.y}" r="{n.r}" fill="{n.fill}" class="node" '
            f'data-tip="rank {n.rank}"/>' for n in deck.ring]
    size = min(round(first.r * 0.9, 1), 16)
    out.append(spans_text(f'text-anchor="middle" font-weight="700" font-size="{size}"',
                     [f'<tspan x="{n.x}" y="{n.y}" dy="0.35em" fill="{n.ink}">{n.rank}</tspan>'
                      for n in deck.ring]))
    for lb in deck.ellipsis:
        out.append(f'<text class="ink" x="{lb.x}" y="{lb.y}" text-anchor="middle" '
                   f'font-size="{lb.size}">{lb.text}</text>')
    if deck.row_labels:
        out.append(spans_text(f'class="muted" text-anchor="end" '
                         f'font-size="{deck.row_labels[0].size}"',
                         [f'<tspan x="{lb.x}" y="{lb.y}" dy="0.35em">{lb.text}</tspan>'
                          for lb in deck.row_labels]))
    out.append(spans_text('class="ink" text-anchor="middle" font-weight="600"',
                     [f'<tspan x="{lb.x}" y="{lb.y}" font-size="{lb.size}">{lb.text}</tspan>'
                      for lb in deck.unit_labels]))
    out.append(spans_text('text-anchor="middle" font-weight="700" font-size="16"',
                     [f'<tspan x="{lb.x}" y="{lb.y}" fill="{lb.colour}">{lb.text}</tspan>'
                      for lb in deck.shard_labels]))
    out.append('<g class="axis-line" stroke-dasharray="3 3">')
    out += [f'<line x1="{x}" x2="{x}" y1="{y0}" y2="{y1}"/>' for x, y0, y1 in deck.separators]
    out.append("</g>")
    bx, bw = deck.bar
    gy, gh, glabel = deck.ghost
    out.append(f'<text class="ink" x="{bx - 20}" y="108" font-size="17" font-weight="700">'
               f'{deck.panel_title[0]}</text><text class="muted" x="{bx - 20}" y="130" '
               f'font-size="16">{deck.panel_title[1]}</text>'
               f'<text class="muted" x="{bx + bw / 2}" y="{round(gy - 8, 1)}" '
               f'text-anchor="middle" font-size="16">{glabel}</text>'
               f'<rect x="{bx}" y="{gy}" width="{bw}" height="{gh}" fill="none" class="cursor"/>')
    return out


def _frame(deck: Deck, f: FrameView, current: int, standalone: bool) -> list[str]:
    out = [frame_start(f.index, current, f.unit)]
    tips = f.tips if not standalone else ()
    for k, c in enumerate(f.cells):
        tip = f' data-tip="{esc(tips[k])}"' if tips else ""
        box = f'x="{c.x}" y="{c.y}" width="{c.w}" height="{c.h}"'
        if c.cls:
            out.append(f'<rect class="{c.cls}" {box}{tip}/>')
        elif c.stale:                        # faded over the background, not over the past
            out.append(f'<rect class="panel-bg" {box}/><rect {box} fill="{c.fill}" '
                       f'opacity="0.3"{tip}/>')
        else:
            out.append(f'<rect {box} fill="{c.fill}"{tip}/>')
    # anchor and colour from the cn classes; 16 units and regular weight (not the class's
    # bold): "-.08" then leaves a margin in a 42-unit cell instead of touching its edges
    look = f'class="cn {{}}" font-size="{min(deck.font, 16)}" style="font-weight:400"'
    for n in f.numbers:
        if standalone:      # a text each: an editor may not pass the centring on to tspans
            out += [f'<text {look.format(n.ink)} x="{x}" y="{y}">{text}</text>'
                    for x, y, text in n.at]
        else:               # a span on the same row as the one before keeps its y
            out.append(spans_text(look.format(n.ink), [
                f'<tspan x="{x}" y="{y}">{text}</tspan>' if k == 0 or y != n.at[k - 1][1]
                else f'<tspan x="{x}">{text}</tspan>' for k, (x, y, text) in enumerate(n.at)]))
    if not standalone or f.index == current:
        out += _overlays(deck, f)
    out.append("</g>")
    return out


def _overlays(deck: Deck, f: FrameView) -> list[str]:
    """What shows only while the frame is current: its memory bar and what was sent, arrows,
    notes and the header."""
    bx, bw = deck.bar
    out = ['<g class="only-current">']
    out += [f'<rect x="{bx}" y="{s.y}" width="{bw}" height="{s.h}" fill="{s.colour}"/>'
            for s in f.segments]
    out.append(spans_text('class="ink" font-size="16"',
                     [f'<tspan x="{bx + bw + 10}" y="{s.ly}">{s.label}</tspan>'
                      for s in f.segments]))
    out.append(f'<text class="ink" x="{bx - 20}" y="596" font-size="17" font-weight="700">'
               f'total {f.memory_total}</text>')
    out.append(spans_text('class="muted" font-size="16"',
                     [f'<tspan x="{bx - 20}" y="{620 + k * 20}">{line}</tspan>'
                      for k, line in enumerate(f.sent_text)]))
    out.append(spans_text('class="ink halo-bg" font-size="16"',
                     [f'<tspan x="{n.x}" y="{n.y}">{n.text}</tspan>' for n in f.notes]))
    out.append("</g>")
    if f.arrows:
        out.append('<g class="only-current arrows">')
        out += [arrow(a.d, a.head, a.colour, 3.5, dashed=a.dashed) for a in f.arrows]
        out.append("</g>")
    out.append(step_header(f.header, only_current=True))
    return out


def _legend(deck: Deck) -> list[str]:
    out = ['<g class="legend">']
    for kind, text, x, colour in deck.legend:
        if kind == "local":
            out.append(f'<rect x="{x}" y="684" width="11" height="16" fill="#E69F00"/>'
                       f'<rect x="{x + 11}" y="684" width="11" height="16" fill="#009E73"/>')
        elif kind == "pad":
            out.append(f'<rect x="{x}" y="684" width="22" height="16" class="pad" rx="2"/>')
        elif kind == "empty":
            out.append(f'<rect x="{x}" y="684" width="22" height="16" class="freed"/>')
        else:
            faded = ' opacity="0.3"' if kind == "stale" else ""
            out.append(f'<rect x="{x}" y="684" width="22" height="16" fill="{colour}"{faded} '
                       f'rx="2"/>')
    out.append(spans_text('class="muted" y="697" font-size="16"',
                     [f'<tspan x="{round(x + 28, 1)}">{text}</tspan>'
                      for _, text, x, _ in deck.legend]))
    out.append("</g>")
    return out
