"""The context-parallel deck as SVG markup (geometry from :mod:`app.scenes.context_parallel.deck`).

``current`` is the frame shown first: it carries class "current" (its outlines, arrows and
header show). The frames after it wait in an inert ``<template class="deck-later">`` that
static/js/player.js moves into the deck when the player reaches them. ``standalone`` is a file
of its own: the style sheet inlined, concrete colours, frames up to ``current`` only and the
caption underneath.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

from markupsafe import Markup

from app.draw.fmt import coord as _coord
from app.draw.svg import titled_deck
from app.draw.svg import esc as _e
from app.scenes.context_parallel.deck import Arrow, CpDeck, FrameView, Path, Rect, Text

coord = lru_cache(maxsize=8192)(_coord)
"""A deck of 64 ranks writes 25,000 coordinates, most of them a bar's or a row's again."""

DEFS = ('<pattern id="pad-hatch" patternUnits="userSpaceOnUse" width="8" height="8" '
        'patternTransform="rotate(-45)"><rect width="8" height="8" fill="none"/>'
        '<rect width="1.5" height="8" fill="#8a939e"/></pattern>')


def render(deck: CpDeck, current: int, *, standalone: bool = False,
           caption: tuple[str, ...] = (), style: str = "") -> Markup:
    return Markup(titled_deck(deck, current, lambda f: _frame(f, current, standalone),
                              standalone=standalone, caption=caption, style=style, defs=DEFS))


def _frame(f: FrameView, current: int, standalone: bool) -> list[str]:
    css = "frame" + (" current" if f.index == current else "") + (" step" if f.index else "")
    out = [f'<g class="{css}" data-frame="{f.index}" data-unit="{_e(f.unit)}">']
    out += [_item(item, standalone) for item in f.items]
    if not standalone or f.index == current:
        out.append('<g class="only-current">')
        out += [_item(item, standalone) for item in f.current]
        out += [_arrow(a) for a in f.arrows]
        out.append(f'<text class="ink step-header" x="20" y="34" font-size="22" '
                   f'font-weight="700">{_e(f.header)}</text>')
        out.append("</g>")
    out.append("</g>")
    return out


def _text(t: Text) -> str:
    attrs = [f'x="{coord(t.x)}" y="{coord(t.y)}"']
    if t.cls:
        attrs.append(f'class="{t.cls}"')
    if t.fill:
        attrs.append(f'fill="{t.fill}"')
    if t.size != 14:
        attrs.append(f'font-size="{coord(t.size)}"')
    else:
        attrs.append('font-size="14"')
    if t.anchor != "start":
        attrs.append(f'text-anchor="{t.anchor}"')
    if t.weight:
        attrs.append(f'font-weight="{t.weight}"')
    return f'<text {" ".join(attrs)}>{escape(t.text, quote=False)}</text>'


def _item(item, standalone: bool) -> str:
    if isinstance(item, Text):
        return _text(item)
    if isinstance(item, Rect):
        paint = f' fill="{item.fill}"' if item.fill else ""
        cls = f' class="{item.cls}"' if item.cls else ""
        tip = f' data-tip="{_e(item.tip)}"' if item.tip and not standalone else ""
        return (f'<rect x="{coord(item.x)}" y="{coord(item.y)}" width="{coord(item.w)}" '
                f'height="{coord(item.h)}"{cls}{paint}{tip}/>')
    if isinstance(item, Path):
        paint = f' fill="{item.fill}"' if item.fill else ' fill="none"'
        cls = f' class="{item.cls}"' if item.cls else ""
        return f'<path{cls}{paint} d="{item.d}"/>'
    raise TypeError(item)


def _arrow(a: Arrow) -> str:
    label = (f'<text class="ink halo-bg" x="{coord(a.lx)}" y="{coord(a.ly)}" font-size="14" '
             f'font-weight="700" text-anchor="end">{a.label}</text>' if a.label else "")
    return (f'<g class="arrow"><path d="{a.d}" fill="none" stroke="{a.colour}" '
            f'stroke-width="2.5" stroke-linecap="round"/><polygon points="{a.head}" '
            f'fill="{a.colour}"/>{label}</g>')
