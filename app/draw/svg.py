"""SVG elements as text, and their escaping: the primitives every deck writes with.

Decks are generated here rather than in Jinja: a template escapes every attribute of every
cell, which made a 12-rank deck take over 100 ms to render; formatting numbers straight into
strings takes a few. Only text content and free-form attributes are escaped.

:func:`el` writes any element from keyword attributes, in the order they are given (a deck keeps
the attribute order it has always written, so its output stays byte-identical across
refactors: bench/state_hashes.py); :func:`text`, :func:`group` and :func:`arrow` are the
shapes every deck draws. A deck's hot loops (a thousand pipeline passes, ten thousand optimizer
cells) format their own f-strings with :func:`esc` and :func:`app.draw.fmt.coord`.
The frames around them — a deck's open and close, its title, step header and layers — are
:mod:`app.draw.deck`; the shapes a deck's geometry is made of, :mod:`app.draw.shapes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape

from app.draw.fmt import coord

FONT = "'DejaVu Sans', 'Helvetica Neue', Arial, sans-serif"
SVG_NS = "http://www.w3.org/2000/svg"

_NAMES: dict[str, str] = {}
"""Keyword → attribute name, as attrs() spells them (a deck repeats a few dozen names)."""


def esc(content: str) -> str:
    """Text content or an attribute value, quotes included."""
    return escape(content, quote=True)


def esc_attr(value: str) -> str:
    """A double-quoted attribute's value: &, <, > and " escaped (an apostrophe needs none)."""
    return escape(value, quote=False).replace('"', "&quot;")


def esc_text(content: str) -> str:
    """Text content (between tags): only &, < and > need escaping."""
    return escape(content, quote=False)


def attrs(**values) -> str:
    """``x=1, fill="#fff", stroke_width=2`` → ``x="1" fill="#fff" stroke-width="2"``; None and
    "" are left out; a trailing underscore is dropped (``class_``); a float is written as a
    coordinate (one decimal at most)."""
    parts = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        name = _NAMES.get(key)
        if name is None:
            name = _NAMES[key] = key.rstrip("_").replace("_", "-")
        if isinstance(value, float):
            value = coord(value)
        parts.append(f'{name}="{value}"')
    return " ".join(parts)


def el(tag: str, text: str = "", /, **values) -> str:
    """One element; ``text`` is escaped."""
    head = f"<{tag} {attrs(**values)}".rstrip()
    return f"{head}>{esc_text(text)}</{tag}>" if text else f"{head}/>"


def title(text: str) -> str:
    """A ``<title>`` child (what a browser shows on hover and a screen reader reads)."""
    return f"<title>{esc_text(text)}</title>" if text else ""


def text(x: float, y: float, content: str, **values) -> str:
    """A ``<text>`` at (x, y) rounded to one decimal, then ``values`` as :func:`attrs`."""
    return el("text", content, x=round(x, 1), y=round(y, 1), **values)


def group(parts: Iterable[str], **values) -> str:
    """``<g …>parts</g>``: what its elements share (a class, a font, an anchor) said once."""
    head = attrs(**values)
    return (f"<g {head}>" if head else "<g>") + "".join(parts) + "</g>"


def spans_text(attributes: str, spans: list[str]) -> str:
    """One ``<text>`` holding several labels, each a ``<tspan>`` placed on its own: a browser
    lays out a text element at a cost that dwarfs its spans'."""
    return f"<text {attributes}>{''.join(spans)}</text>" if spans else ""


def arrow(d: str, head: str, colour: str, width: float, *, dashed: bool = False,
          label: str = "", style: str = "", merged: bool = False) -> str:
    """An arrow: its shaft ``d`` (a path, round caps) and its head in ``colour``, then
    ``label`` (markup, drawn over the arrow). ``head`` is a polygon's points, or with
    ``merged`` the path of several heads (one element for the arrows of a colour);
    ``style`` goes on the arrow's group (``color: …`` for what the theme derives from it).
    Every deck's arrows are this element, class "arrow" (the style sheet's hover and
    current-frame rules)."""
    dash = ' stroke-dasharray="10 6"' if dashed else ""
    look = f' style="{style}"' if style else ""
    tip = (f'<path d="{head}" fill="{colour}"/>' if merged
           else f'<polygon points="{head}" fill="{colour}"/>')
    return (f'<g class="arrow"{look}><path d="{d}" fill="none" stroke="{colour}" '
            f'stroke-width="{coord(width)}"{dash} stroke-linecap="round"/>{tip}{label}</g>')
