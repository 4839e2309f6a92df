"""The MoE deck as SVG markup (geometry from :mod:`app.scenes.moe.deck`).

``current`` is the frame shown first: it carries class "current" (its arrows and header
show). The frames after it wait in an inert ``<template class="deck-later">`` that
static/js/player.js moves into the deck when the player reaches them. ``standalone`` is a file
of its own: the style sheet inlined, concrete colours, frames up to ``current`` only and the
caption underneath.
"""

from __future__ import annotations

from html import escape
from itertools import groupby

from markupsafe import Markup

from app.draw.fmt import coord
from app.draw.svg import spans_text, titled_deck
from app.draw.svg import esc as _e
from app.scenes.moe.deck import Arrow, Batch, FrameView, MoeDeck, Rect, Stroke, Text

DEFS = ('<pattern id="drop-hatch" patternUnits="userSpaceOnUse" width="7" height="7" '
        'patternTransform="rotate(45)"><rect width="7" height="7" fill="#ffffff"/>'
        '<rect width="3" height="7" fill="#D55E00"/></pattern>'
        '<pattern id="pad-hatch" patternUnits="userSpaceOnUse" width="8" height="8" '
        'patternTransform="rotate(-45)"><rect width="8" height="8" fill="none"/>'
        '<rect width="1.5" height="8" fill="#8a939e"/></pattern>')


def render(deck: MoeDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    return Markup(titled_deck(deck, current, lambda f: _frame(f, current, standalone),
                              standalone=standalone, caption=caption, style=style, defs=DEFS))


def _frame(f: FrameView, current: int, standalone: bool) -> list[str]:
    css = "frame" + (" current" if f.index == current else "") + (" step" if f.index else "")
    out = [f'<g class="{css}" data-frame="{f.index}" data-unit="{_e(f.unit)}">']
    shown = not standalone or f.index == current
    # the arrows under the frame's own drawing: no line runs through a slot's number
    if shown and f.arrows:
        out.append('<g class="only-current arrows">')
        out += [_arrow(a) for a in f.arrows]
        out += [_arrow_label(a) for a in f.arrows if a.label]   # over every line, halo and all
        out.append("</g>")
    # labels in a row are written together (_texts)
    for labels, items in groupby(f.items, key=lambda item: isinstance(item, Text)):
        out += [_texts(items)] if labels else [_item(item, standalone) for item in items]
    if shown:
        out.append(f'<text class="only-current ink step-header" x="20" y="34" font-size="22" '
                   f'font-weight="700">{_e(f.header)}</text>')
    out.append("</g>")
    return out


def _style(t: Text) -> list[str]:
    """A label's attributes but its place."""
    attrs = [f'class="{t.cls}"'] if t.cls else []
    if t.fill:
        attrs.append(f'fill="{t.fill}"')
    if t.size != 14:
        attrs.append(f'font-size="{coord(t.size)}"')
    if t.anchor != "start":
        attrs.append(f'text-anchor="{t.anchor}"')
    if t.weight:
        attrs.append(f'font-weight="{t.weight}"')
    return attrs


def _texts(texts) -> str:
    """Labels in a row (the logits, the experts' and tokens' names), those of one style as
    ``<tspan>``s of one ``<text>`` (:func:`app.draw.svg.spans_text`): the default stage holds 33
    text elements instead of 173 and its markup is 12 % smaller (a tree parsed ahead, a swap,
    a style pass each cost less); Chromium's and resvg's pixels are the same. The style stays
    on the ``<text>``, so the cascade is what it was."""
    groups: dict[str, list[str]] = {}
    for t in texts:
        groups.setdefault(" ".join(_style(t)), []).append(
            f'<tspan x="{coord(t.x)}" y="{coord(t.y)}">{escape(t.text, quote=False)}</tspan>')
    return "".join(spans_text(style, spans) for style, spans in groups.items())


def _item(item, standalone: bool) -> str:
    if isinstance(item, Batch):
        moved = (f' data-dx="{coord(item.dx)}" data-dy="{coord(item.dy)}"'
                 if (item.dx or item.dy) else "")
        return (f'<g font-size="14"{moved}>'
                + "".join(f'<path fill="{fill}" d="{d}"/>' for fill, d in item.paths if d)
                + _texts(item.texts) + "</g>")
    if isinstance(item, Rect):
        paint = f' fill="{item.fill}"' if item.fill else ""
        cls = f' class="{item.cls}"' if item.cls else ""
        tip = f' data-tip="{_e(item.tip)}"' if item.tip and not standalone else ""
        return (f'<rect x="{coord(item.x)}" y="{coord(item.y)}" width="{coord(item.w)}" '
                f'height="{coord(item.h)}"{cls}{paint}{tip}/>')
    if isinstance(item, Stroke):
        return f'<path class="{item.cls}" d="{item.d}" fill="none"/>'
    raise TypeError(item)


def _arrow(a: Arrow) -> str:
    return (f'<g class="arrow"><path d="{a.d}" fill="none" stroke="{a.colour}" '
            f'stroke-width="2.5" stroke-linecap="round"/><polygon points="{a.head}" '
            f'fill="{a.colour}"/></g>')


def _arrow_label(a: Arrow) -> str:
    return (f'<text class="ink halo-bg" x="{coord(a.lx)}" y="{coord(a.ly)}" font-size="14" '
            f'font-weight="700" text-anchor="middle">{a.label}</text>')
