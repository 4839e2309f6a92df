"""The shapes a deck's geometry is made of, and their markup: rectangles, labels, paths, arrows.

A scene's ``deck.py`` lays its drawing out as these frozen values (pure geometry: numbers,
colours, classes and words) and its ``deck_svg.py`` writes them with the functions below, so
that two decks that draw a labelled rectangle write it the same way. A shape's colour is
either a class (``cls``: the theme's colour, from the style sheet) or a concrete ``fill``
(a rank's colour: app.draw.palette); ``tip`` is its hover text on a page (static/js/tooltip.js),
left out of a standalone file.

Two ways of writing a label exist because decks style them two ways: :func:`text` gives the
label its own attributes (``fill`` is a presentation attribute under the class); :func:`label`
puts the class first and a ``fill`` over the theme (an inline style beats the class), with a
monospace family for commands. :func:`texts` writes labels in a row as ``<tspan>``s of as few
``<text>`` elements as share a style.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from app.draw.fmt import coord as _coord
from app.draw.svg import arrow as _arrow
from app.draw.svg import esc, esc_text, spans_text

coord = lru_cache(maxsize=8192)(_coord)
"""A deck of 64 ranks writes 25,000 coordinates, most of them a bar's or a row's again."""

FONT_SIZE = 14
"""A label's size unless it says otherwise: 12.9 px when a 1040-unit deck is 960 px wide."""
MONO = "'DejaVu Sans Mono', Menlo, Consolas, monospace"


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    w: float
    h: float
    fill: str = ""          # a colour or url(#pattern); "" leaves it to the class
    cls: str = ""
    tip: str = ""           # hover text (pages only)
    stroke: str = ""        # an outline's colour (a box's)


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    size: float = FONT_SIZE
    cls: str = "ink"        # ink | muted | bad-text | … (the theme's colours)
    anchor: str = "start"
    weight: int = 0         # 0: the regular weight, not written
    fill: str = ""          # a concrete colour (a label on a rank's colour)
    mono: bool = False      # a command or a value in the monospace family (label only)


@dataclass(frozen=True)
class Label:
    """A label whose colour its deck's writer reads: "" the ink, a colour its fill, or
    "class:name" a theme class (the collective, data-parallel and ZeRO decks)."""
    x: float
    y: float
    text: str
    colour: str = ""
    anchor: str = "middle"
    size: float = 16


@dataclass(frozen=True)
class Path:
    d: str
    fill: str = ""          # a filled shape's colour; "" with stroke or cls: an outline
    cls: str = ""
    stroke: str = ""        # a line's colour
    width: float = 0.0      # its width
    dashed: bool = False


@dataclass(frozen=True)
class Arrow:
    d: str                  # the shaft
    head: str               # the head's polygon points
    colour: str
    label: str = ""         # a number beside the shaft (not escaped: digits and separators)
    lx: float = 0.0
    ly: float = 0.0


def rect(r: Rect, tips: bool = True) -> str:
    """``<rect x y width height [class] [fill] [data-tip]>``; the tip only when ``tips``."""
    cls = f' class="{r.cls}"' if r.cls else ""
    paint = f' fill="{r.fill}"' if r.fill else ""
    tip = f' data-tip="{esc(r.tip)}"' if r.tip and tips else ""
    return (f'<rect x="{coord(r.x)}" y="{coord(r.y)}" width="{coord(r.w)}" '
            f'height="{coord(r.h)}"{cls}{paint}{tip}/>')


def box(r: Rect, rx: float = 6) -> str:
    """A rounded box styled by its class (a node, a swatch, a bar), then ``fill`` and
    ``stroke`` over it: ``<rect class x y width height rx [fill] [stroke]>``."""
    fill = f' fill="{r.fill}"' if r.fill else ""
    stroke = f' stroke="{r.stroke}"' if r.stroke else ""
    return (f'<rect class="{r.cls}" x="{coord(r.x)}" y="{coord(r.y)}" width="{coord(r.w)}" '
            f'height="{coord(r.h)}" rx="{coord(rx)}"{fill}{stroke}/>')


def area(p: Path) -> str:
    """A filled shape (its ``fill``) or an outline drawn by its class:
    ``<path [class] fill d>``."""
    cls = f' class="{p.cls}"' if p.cls else ""
    return f'<path{cls} fill="{p.fill or "none"}" d="{p.d}"/>'


def line(p: Path) -> str:
    """A line, never filled: drawn by its class, or in ``stroke`` at ``width`` with round caps
    (dashed 9 6): ``<path class d fill="none" [stroke …]>``."""
    if not p.stroke:
        return f'<path class="{p.cls}" d="{p.d}" fill="none"/>'
    dash = ' stroke-dasharray="9 6"' if p.dashed else ""
    return (f'<path class="{p.cls}" d="{p.d}" fill="none" stroke="{p.stroke}" '
            f'stroke-width="{coord(p.width)}" stroke-linecap="round"{dash}/>')


def _style(t: Text) -> list[str]:
    """A label's attributes but its place, for :func:`text` and :func:`texts`."""
    out = [f'class="{t.cls}"'] if t.cls else []
    if t.fill:
        out.append(f'fill="{t.fill}"')
    if t.size != FONT_SIZE:
        out.append(f'font-size="{coord(t.size)}"')
    if t.anchor != "start":
        out.append(f'text-anchor="{t.anchor}"')
    if t.weight:
        out.append(f'font-weight="{t.weight}"')
    return out


def text(t: Text) -> str:
    """One label with its own attributes: ``<text x y [class] [fill] font-size [anchor]
    [weight]>``."""
    cls = f' class="{t.cls}"' if t.cls else ""
    fill = f' fill="{t.fill}"' if t.fill else ""
    anchor = f' text-anchor="{t.anchor}"' if t.anchor != "start" else ""
    weight = f' font-weight="{t.weight}"' if t.weight else ""
    return (f'<text x="{coord(t.x)}" y="{coord(t.y)}"{cls}{fill} font-size="{coord(t.size)}"'
            f'{anchor}{weight}>{esc_text(t.text)}</text>')


def texts(labels: Iterable[Text]) -> str:
    """Labels in a row (a table's numbers, the names along an axis), those of one style as
    ``<tspan>``s of one ``<text>`` (:func:`app.draw.svg.spans_text`): a browser lays out a text
    element at a cost that dwarfs its spans'. The style stays on the ``<text>``, so the
    cascade is what it would be for each label alone; the default size is left to the deck's
    style sheet."""
    groups: dict[str, list[str]] = {}
    for t in labels:
        groups.setdefault(" ".join(_style(t)), []).append(
            f'<tspan x="{coord(t.x)}" y="{coord(t.y)}">{esc_text(t.text)}</tspan>')
    return "".join(spans_text(style, spans) for style, spans in groups.items())


def label(t: Text) -> str:
    """A label styled by its class: ``<text class x y font-size [anchor] [weight] [family]
    [style="fill: …"]>`` (a regular weight, 0 or 400, is not written)."""
    anchor = f' text-anchor="{t.anchor}"' if t.anchor != "start" else ""
    weight = f' font-weight="{t.weight}"' if t.weight not in (0, 400) else ""
    family = f' font-family="{MONO}"' if t.mono else ""
    fill = f' style="fill: {t.fill}"' if t.fill else ""
    return (f'<text class="{t.cls}" x="{coord(t.x)}" y="{coord(t.y)}" '
            f'font-size="{coord(t.size)}"{anchor}{weight}{family}{fill}>{esc_text(t.text)}</text>')


def arrow(a: Arrow, anchor: str = "middle", width: float = 2.5, number: bool = True) -> str:
    """An arrow (:func:`app.draw.svg.arrow`) with its number (unless ``number`` is off: a deck
    that writes the numbers over every line writes them with :func:`arrow_number`)."""
    return _arrow(a.d, a.head, a.colour, width, label=arrow_number(a, anchor) if number else "")


def arrow_number(a: Arrow, anchor: str = "middle") -> str:
    """An arrow's number, bold, ``anchor``-ed at (lx, ly) over a halo ("" without a label)."""
    return (f'<text class="ink halo-bg" x="{coord(a.lx)}" y="{coord(a.ly)}" '
            f'font-size="{FONT_SIZE}" font-weight="700" text-anchor="{anchor}">{a.label}'
            f'</text>' if a.label else "")
