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

from app.draw.deck import frame_start, step_header, write_deck
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
                      under=[*_labels(deck.title_lines, "muted title"), *_grid_frame(deck)],
                      over=_legend(deck), box=deck.box)


def _labels(labels, cls: str = "ink", bold: bool = False) -> list[str]:
    """Labels of one class as the spans of one ``<text>`` (their own anchor, size and colour)."""
    if not labels:
        return []
    first = labels[0]
    attrs = f'class="{cls}"' + (' font-weight="700"' if bold else "")
    same = all((lb.size, lb.anchor) == (first.size, first.anchor) for lb in labels)
    if same:
        attrs += f' font-size="{first.size}"' + (
            f' text-anchor="{first.anchor}"' if first.anchor != "start" else "")
    spans = []
    for lb in labels:
        more = "" if same else f' font-size="{lb.size}" text-anchor="{lb.anchor}"'
        if lb.colour.startswith("class:"):
            more += f' class="{lb.colour[6:]}"'
        elif lb.colour:
            more += f' fill="{lb.colour}"'
        spans.append(f'<tspan x="{lb.x}" y="{lb.y}"{more}>{esc(lb.text)}</tspan>')
    return [spans_text(attrs, spans)]


def _grid_frame(deck: Deck) -> list[str]:
    """What every frame shares: the ring of ranks, the grid's labels and separators, and the
    memory panel's title and DDP's outline for scale."""
    out = _labels(deck.ring_label, "muted")
    out += [f'<circle cx="{n.x}" cy="{n.y}" r="{n.r}" fill="{n.fill}" class="node" '
            f'data-tip="rank {n.rank}"/>' for n in deck.ring]
    out.append(spans_text(f'text-anchor="middle" font-weight="700" font-size="{deck.ring_size}"',
                          [f'<tspan x="{n.x}" y="{round(n.y + deck.ring_size * 0.36, 1)}" '
                           f'fill="{n.ink}">{n.rank}</tspan>' for n in deck.ring if n.numbered]))
    out += _labels(deck.ellipsis)
    out += _labels(deck.row_labels, "muted")
    out += _labels(deck.unit_labels, "ink", bold=True)
    out += _labels(deck.shard_labels, "ink", bold=True)
    out.append('<g class="axis-line" stroke-dasharray="3 3">')
    out += [f'<line x1="{x}" x2="{x}" y1="{y0}" y2="{y1}"/>' for x, y0, y1 in deck.separators]
    out.append("</g>")
    panel = deck.panel
    gy, gh = panel.ghost
    out += _labels(panel.title, "ink", bold=True)
    out += _labels(panel.subtitle, "muted")
    out += _labels((panel.ghost_label,), "muted")
    out.append(f'<rect x="{panel.bar_x}" y="{gy}" width="{panel.bar_w}" height="{gh}" '
               f'fill="none" class="cursor"/>')
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
    # anchor and colour from the cn classes, regular weight (not the class's bold): "-.08"
    # then leaves a margin in its cell instead of touching its edges; centred on the cell
    size = deck.number_size
    look = f'class="cn {{}}" font-size="{size}" style="font-weight:400"'
    for n in f.numbers:
        if standalone:      # a text each: an editor may not pass the centring on to tspans
            out += [f'<text {look.format(n.ink)} x="{x}" y="{y}">{text}</text>'
                    for x, y, text in n.at]
        else:               # a span on the same row as the one before keeps its y
            out.append(spans_text(look.format(n.ink), [
                f'<tspan x="{x}" y="{y}">{text}</tspan>'
                if k == 0 or y != n.at[k - 1][1] else f'<tspan x="{x}">{text}</tspan>'
                for k, (x, y, text) in enumerate(n.at)]))
    if not standalone or f.index == current:
        out += _overlays(deck, f)
    out.append("</g>")
    return out


def _overlays(deck: Deck, f: FrameView) -> list[str]:
    """What shows only while the frame is current: its memory bar and what was sent, arrows,
    notes and the header."""
    panel = deck.panel
    pf = panel.frames[f.index]
    out = ['<g class="only-current">']
    out += [f'<rect x="{panel.bar_x}" y="{s.y}" width="{panel.bar_w}" height="{s.h}" '
            f'fill="{s.colour}"/>' for s in pf.segments]
    out += _labels(pf.labels)
    out += _labels((pf.total,), "ink", bold=True)
    out += _labels(pf.sent, "muted")
    out += _labels(f.notes, "ink halo-bg")
    out.append("</g>")
    if f.arrows:
        out.append('<g class="only-current arrows">')
        out += [arrow(a.d, a.head, a.colour, deck.arrow_width, dashed=a.dashed)
                for a in f.arrows]
        out.append("</g>")
    h = deck.header
    out.append(step_header(f.header, x=h.x, y=h.y, size=h.size, only_current=True))
    return out


def _legend(deck: Deck) -> list[str]:
    out = ['<g class="legend">']
    side = deck.swatch
    for item in deck.legend:
        x, y, half = item.x, item.y, round(side / 2, 1)
        geometry = f'x="{x}" y="{y}" width="{side}" height="{side}"'
        if item.kind == "local":
            out.append(f'<rect x="{x}" y="{y}" width="{half}" height="{side}" fill="#E69F00"/>'
                       f'<rect x="{round(x + half, 1)}" y="{y}" width="{half}" height="{side}" '
                       f'fill="#009E73"/>')
        elif item.kind == "pad":
            out.append(f'<rect {geometry} class="pad" rx="2"/>')
        elif item.kind == "empty":
            out.append(f'<rect {geometry} class="freed"/>')
        elif item.kind != "rows":
            faded = ' opacity="0.3"' if item.kind == "stale" else ""
            out.append(f'<rect {geometry} fill="{item.colour}"{faded} rx="2"/>')
    out += _labels([item.text for item in deck.legend], "muted")
    out.append("</g>")
    return out
