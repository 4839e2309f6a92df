"""The collective deck as SVG markup (geometry from :mod:`app.scenes.collective.deck`).

``current`` is the frame shown first: it carries class "current" (its arrows, outlines and
header show). The frames after it are not part of the drawing yet: they follow the ``<svg>`` in
an inert ``<template class="deck-later">``, which costs the browser no style or layout work
until the player moves a frame into the deck (static/js/player.js). Without JavaScript the
page shows the frame in its URL, which needs no later frame. ``standalone`` is a file of its
own: the style sheet inlined, concrete colours, the caption underneath, frames up to
``current`` only.
"""

from __future__ import annotations

from functools import lru_cache

from markupsafe import Markup

from app.draw.deck import frame_start, write_deck
from app.draw.svg import arrow, attrs, el, esc, esc_text, text, title
from app.scenes.collective.deck import COMPLETE, Deck, MergedCells


def render(deck: Deck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    stripes = "".join(
        f'<pattern id="{s.id}" patternUnits="objectBoundingBox" '
        'patternContentUnits="objectBoundingBox" width="1" height="1">'
        + "".join(el("rect", x=round(k / len(s.colours), 4), y=0,
                     width=round(1 / len(s.colours) + 0.001, 4), height=1, fill=c)
                  for k, c in enumerate(s.colours))
        + "</pattern>" for s in deck.stripes)
    shown = deck.frames if not standalone else deck.frames[:current + 1]
    arrows, shared = _shared_arrows(deck, shown, current, standalone)
    lay = deck.layout
    # the title right-aligned, a line each (app/draw/layout.py heading)
    under = [f'<text class="muted title" text-anchor="end" font-size="{lay.small}">'
             + "".join(f'<tspan x="{x}" y="{y}">{esc(t)}</tspan>' for x, y, t in lay.title)
             + "</text>", *_topology(deck), *_labels(deck)]
    return write_deck(deck.width, deck.height, deck.title, deck.frames, current,
                      lambda frame: _frame(deck, frame, current, standalone, arrows),
                      standalone=standalone, caption=caption, style=style, box=lay.box,
                      defs=stripes + shared, under=under, over=_legend(deck),
                      group=f'font-size="{deck.font}" text-anchor="middle" '
                            f'dominant-baseline="central" font-weight="700"')


def _topology(deck: Deck) -> list[str]:
    out = ['<g class="topology">']
    for path, label in deck.node_arcs:
        out.append(el("path", class_="node-arc", d=path, fill="none"))
        if label.text:
            out.append(text(label.x, label.y, label.text, class_="muted",
                            text_anchor=label.anchor, font_size=label.size))
    for label in deck.lane_labels:
        out.append(text(label.x, label.y, label.text, class_="muted", text_anchor=label.anchor,
                        font_size=label.size))
    for line in deck.lines:
        out.append(el("path", class_="link inter" if line.dashed else "link", d=line.d,
                      fill="none"))
    for n in deck.nodes:
        out.append(f'<circle {attrs(cx=n.x, cy=n.y, r=n.r, fill=n.fill, class_="node")}>'
                   f'{title(f"rank {n.rank}")}</circle>')
        if n.label:
            if n.inside:
                out.append(text(n.lx, n.ly, n.label, dy="0.35em", text_anchor="middle",
                                font_size=deck.node_font, font_weight=700, fill=n.ink))
            else:
                out.append(text(n.lx, n.ly, n.label, dy="0.35em", text_anchor="middle",
                                font_size=deck.node_font, font_weight=700, class_="ink"))
    out.append("</g>")
    return out


def _labels(deck: Deck) -> list[str]:
    out = []
    for label in (*deck.area_labels, *deck.column_labels):
        out.append(text(label.x, label.y, label.text, class_="muted", text_anchor="middle",
                        font_size=label.size))
    for s in deck.row_swatches:
        out.append(el("circle", cx=s.x, cy=s.y, r=s.r, fill=s.fill))
    for label in deck.row_labels:
        out.append(text(label.x, label.y, label.text, class_="ink", text_anchor="end",
                        font_size=label.size))
    return out


def _shared_arrows(deck: Deck, frames, current: int, standalone: bool) -> tuple[dict, str]:
    """In a merged deck (33–64 ranks), the arrows of the frames drawn in the deck (up to
    ``current``): those of a step whose arrows another such step repeats (a ring sends along
    the same 64 links every step) are drawn once, in ``<defs>``, and each such step shows them
    with a ``<use>``. A later frame's arrows stay parts of their own, which the template of
    later frames writes once however many frames repeat them (app/draw/deck.py,
    later_frames). (frame index → its arrows' markup parts, the defs)."""
    if not deck.merged:
        return {}, ""
    markup: dict[tuple, str] = {}   # a step's arrows → their markup, written once
    drawn = {}
    for f in frames:
        if f.arrows and f.index <= current and (not standalone or f.index == current):
            m = markup.get(f.arrows)
            if m is None:
                m = markup[f.arrows] = "".join(_arrows(f.arrows))
            drawn[f.index] = m
    seen: dict[str, int] = {}
    for markup in drawn.values():
        seen[markup] = seen.get(markup, 0) + 1
    ids: dict[str, str] = {}
    defs = []
    for markup, times in seen.items():
        if times > 1:
            ids[markup] = f"links-{len(ids)}"
            defs.append(f'<g id="{ids[markup]}">{markup}</g>')
    parts = {k: [f'<use href="#{ids[m]}"/>' if m in ids else m] for k, m in drawn.items()}
    if not standalone:
        parts.update((f.index, _arrows(f.arrows)) for f in frames if f.index > current)
    return parts, "".join(defs)


def _frame(deck: Deck, frame, current: int, standalone: bool,
           arrows: dict | None = None) -> list[str]:
    index = frame.index
    out = [frame_start(index, current, frame.unit, step=True)]
    for c in () if deck.merged else frame.cells:
        tip = f' data-tip="{esc(c.tip)}"' if c.tip and not standalone else ""
        box = f'x="{c.x}" y="{c.y}" width="{c.w}" height="{c.h}" rx="3"'
        if not c.fill:
            out.append(f'<rect class="empty" {box}{tip}/>')
            continue
        moved = f' data-dx="{c.dx}" data-dy="{c.dy}"' if (c.dx or c.dy) else ""
        # a finished value takes its colours from the theme (class "complete")
        css, fill = ("cell complete", "") if c.fill == COMPLETE else ("cell", f' fill="{c.fill}"')
        if not c.text:
            out.append(f'<rect class="{css}" {box}{fill}{tip}{moved}/>')
            continue
        halo = ' class="halo"' if c.fill.startswith("url") else ""
        ink = f' fill="{c.ink}"' if c.ink else ""
        out.append(f'<g class="{css}"{tip}{moved}><rect {box}{fill}/>'
                   f'<text{halo} x="{c.x + c.w / 2:.1f}" y="{c.y + c.h / 2:.1f}"{ink}>'
                   f'{c.text}</text></g>')
    if deck.merged:
        out += _merged_cells(frame.cells)
    if not standalone or index == current:
        out.append('<g class="only-current arrows">')
        if deck.merged:
            out.extend(arrows.get(index, ()))
        else:
            out.extend(_arrows(frame.arrows))
        out.append("</g>")
        # the header's start tag a part of its own: every frame's is the same, and the
        # template of later frames writes it once (app/draw/deck.py, later_frames)
        x, y, size = deck.layout.header
        out += [_header_start(x, y, size), esc_text(frame.header), "</text>"]
    out.append("</g>")
    return out


@lru_cache(maxsize=64)
def _header_start(x: float, y: float, size: float) -> str:
    head = attrs(x=round(x, 1), y=round(y, 1), class_="only-current ink step-header",
                 font_size=size, font_weight=700, text_anchor="start", dominant_baseline="auto")
    return f"<text {head}>"


def _merged_cells(cells) -> list[str]:
    """A frame's cells as one path per (fill, flight): the picture of the cells' rectangles
    without an element each (a deck of 33–64 ranks, whose cells carry no number or tip).
    ``cells``: the deck's :class:`MergedCells` (grouped as they are built), or Cells."""
    if isinstance(cells, MergedCells):
        grouped = cells.groups
    else:
        groups: dict[tuple, list[str]] = {}
        for c in cells:
            groups.setdefault((c.fill, c.dx, c.dy), []).append(
                f"M{c.x} {c.y}h{c.w}v{c.h}h-{c.w}z")
        grouped = tuple((fill, dx, dy, "".join(parts))
                        for (fill, dx, dy), parts in groups.items())
    out = []
    for fill, dx, dy, d in grouped:
        if not fill:
            out.append(f'<path class="empty" d="{d}"/>')
            continue
        moved = f' data-dx="{dx}" data-dy="{dy}"' if (dx or dy) else ""
        paint = ' class="cell complete"' if fill == COMPLETE else f' class="cell" fill="{fill}"'
        out.append(f'<path{paint} d="{d}"{moved}/>')
    return out


def _legend(deck: Deck) -> list[str]:
    lay = deck.layout
    side, small = lay.swatch, lay.small
    out = ['<g class="legend">']
    for kind, label, x, y in deck.legend:
        box = {"x": x, "y": y, "width": side, "height": side}
        if kind == "stripes":
            out.append(el("rect", **box, fill="url(#legend-stripes)", rx=2))
        elif kind == "blues":
            out.append(el("rect", **box, fill="#4292c6", rx=2))
        elif kind == "complete":
            out.append(el("rect", **box, class_="complete", rx=2))
        elif kind == "empty":
            out.append(el("rect", **box, class_="empty", rx=2))
        else:
            out.append(el("line", x1=x, y1=round(y + side / 2, 1), x2=round(x + side, 1),
                          y2=round(y + side / 2, 1), class_="link inter"))
        out.append(text(x + side + small * 0.45, y + side * 0.5 + small * 0.36, label,
                        class_="muted", font_size=small))
    out.append("</g>")
    return out


MERGE_ARROWS = 16
"""Past this many arrows in a step (32–64 ranks all sending at once) the arrows of one colour
are one path and their heads another: the same drawing in a tenth of the markup."""


def _arrows(arrows) -> list[str]:
    if len(arrows) <= MERGE_ARROWS:
        return [_arrow(a) for a in arrows]
    groups: dict[tuple, list] = {}
    for a in arrows:
        groups.setdefault((a.colour, a.width, a.dashed), []).append(a)
    out = []
    for (colour, width, dashed), same in groups.items():
        heads = " ".join("M" + " L".join(a.head.split()) + "Z" for a in same)
        out.append(arrow(" ".join(a.d for a in same), heads, colour, width, dashed=dashed,
                         label="".join(_label(a) for a in same), merged=True))
    return out


@lru_cache(maxsize=4096)  # a schedule sends along the same few links step after step
def _arrow(a) -> str:
    return arrow(a.d, a.head, a.colour, a.width, dashed=a.dashed, label=_label(a))


def _label(a) -> str:
    """An arrow's label (what it carries), over a halo."""
    return (text(a.lx, a.ly, a.label, class_="ink halo-bg", font_size=a.size, font_weight=600)
            if a.label else "")
