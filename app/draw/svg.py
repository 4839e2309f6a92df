"""A minimal SVG writer for decks with thousands of elements.

Decks are generated here rather than in Jinja: a template escapes every attribute of every
cell, which made a 12-rank deck take over 100 ms to render; formatting numbers straight into
strings takes a few. Only text content and free-form attributes are escaped.
"""

from __future__ import annotations

from html import escape
from app.draw.fmt import coord
from app.draw.text import fits, wrap


_NAMES: dict[str, str] = {}
"""Keyword → attribute name, as attrs() spells them (a deck repeats a few dozen names)."""


def attrs(**values) -> str:
    """``x=1, fill="#fff", stroke_width=2`` → ``x="1" fill="#fff" stroke-width="2"``; None and
    "" are left out; a trailing underscore is dropped (``class_``)."""
    parts = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        name = _NAMES.get(key)
        if name is None:
            name = _NAMES[key] = key.rstrip("_").replace("_", "-")
        if isinstance(value, float):
            value = f"{value:.1f}".rstrip("0").rstrip(".")
        parts.append(f'{name}="{value}"')
    return " ".join(parts)


def el(tag: str, text: str = "", /, **values) -> str:
    """One element; ``text`` is escaped."""
    head = f"<{tag} {attrs(**values)}".rstrip()
    return f"{head}>{escape(text, quote=False)}</{tag}>" if text else f"{head}/>"


def title(text: str) -> str:
    return f"<title>{escape(text, quote=False)}</title>" if text else ""


def text(x: float, y: float, content: str, **values) -> str:
    return el("text", content, x=round(x, 1), y=round(y, 1), **values)


# --- what every scene's deck writer (app/scenes/*/deck_svg.py) shares --------------------------------

FONT = "'DejaVu Sans', 'Helvetica Neue', Arial, sans-serif"
CAPTION_HEIGHT = 90          # room under a standalone deck for its caption
SVG_NS = "http://www.w3.org/2000/svg"


def esc(content: str) -> str:
    """Text content or an attribute value, quotes included."""
    return escape(content, quote=True)


def spans_text(attributes: str, spans: list[str]) -> str:
    """One ``<text>`` holding several labels, each a ``<tspan>`` placed on its own: a browser
    lays out a text element at a cost that dwarfs its spans'."""
    return f"<text {attributes}>{''.join(spans)}</text>" if spans else ""


def deck_open(width: float, height: float, label: str, *, standalone: bool, style: str = "",
              defs: str = "", cls: str = "deck", box=None) -> str:
    """A deck's ``<svg>`` start tag and its ``<defs>``: ``height`` is the drawing's; a
    standalone file (an export) gets the caption's room beneath it, a size of its own and the
    style sheet inlined; ``defs`` holds the deck's patterns and gradients. A deck laid out for
    its ``box`` (app/draw/box.py) says so on a page: ``data-box`` and ``data-font`` are what it
    was asked for (static/js/box.js compares them with its frame), ``--deck-width`` the width
    it was drawn at (a phone's frame scrolls a wider deck sideways)."""
    if standalone:
        height += CAPTION_HEIGHT
    size = f'width="{width}" height="{height}" ' if standalone else ""
    if box is not None and not standalone:
        size = (f'data-box="{box.key}" data-font="{box.font:g}" '
                f'style="--deck-width: {coord(width)}px" ')
    inner = (f"<style>{style}</style>" if style else "") + defs
    return (f'<svg xmlns="{SVG_NS}" class="{cls}" viewBox="0 0 {coord(width)} {coord(height)}" '
            f'{size}role="img" aria-label="{esc(label)}" font-family="{FONT}">'
            + (f"<defs>{inner}</defs>" if inner else ""))


def titled_deck(deck, current: int, frame, *, standalone: bool, caption, style: str,
                defs: str) -> str:
    """A whole deck whose frames are layers in one ``<g class="frames">``: the background, the
    deck's title at the top right, frames 0…``current`` drawn, the later ones for the player
    (:func:`deck_end`). ``deck`` has ``width``, ``height``, ``title`` and ``frames``;
    ``frame(f)`` writes one frame's markup parts."""
    height = deck.height + (CAPTION_HEIGHT if standalone else 0)
    out = [deck_open(deck.width, deck.height, deck.title, standalone=standalone, style=style,
                     defs=defs),
           f'<rect class="bg" x="0" y="0" width="{deck.width}" height="{height}"/>',
           f'<text class="muted" x="{deck.width - 16}" y="32" text-anchor="end" '
           f'font-size="15">{esc(deck.title)}</text>',
           '<g class="frames">']
    for f in deck.frames[:current + 1]:
        out += frame(f)
    out.append("</g>")
    out.append(deck_end(standalone, caption, deck.height,
                        (frame(f) for f in deck.frames[current + 1:])))
    return "".join(out)


CAPTION_SIZE, CAPTION_LINES = 17, 3


def caption_lines(caption: str, width: float) -> tuple[str, ...]:
    """A standalone deck's caption broken into the lines that fit under a drawing ``width``
    units wide (at most :data:`CAPTION_LINES`; the last one ends "…" when the caption is
    longer)."""
    room = width - 44
    lines = wrap(caption, CAPTION_SIZE, room)
    if len(lines) <= CAPTION_LINES:
        return tuple(lines)
    last = lines[CAPTION_LINES - 1]
    while last and not fits(last + " …", CAPTION_SIZE, room):
        last = last.rsplit(" ", 1)[0] if " " in last else last[:-1]
    return (*lines[:CAPTION_LINES - 1], last + " …")


def caption_texts(caption, top: float) -> list[str]:
    """A standalone deck's caption, a line each, under the drawing that ends at ``top``."""
    return [f'<text class="ink" x="22" y="{coord(top + 22 + k * 24)}" font-size="{CAPTION_SIZE}">'
            f'{esc(line)}</text>' for k, line in enumerate(caption)]


def deck_end(standalone: bool, caption, top: float, later) -> str:
    """What closes every deck: a standalone file (an export) gets its caption under the drawing
    that ends at ``top``; a page's deck is followed by its later frames, ``later`` — an iterable
    of frames, consumed only then (:func:`later_frames`)."""
    if standalone:
        return "".join(caption_texts(caption, top)) + "</svg>"
    return "</svg>" + later_frames(later)


def later_frames(frames) -> str:
    """The frames after the current one (each a list of markup parts: its ``<g …>`` start tag
    … ``</g>``), in an inert ``<template class="deck-later">`` after the ``<svg>``, each as an
    empty layer that carries its content as text (:func:`lazy_layer`): a slider's swap then
    costs the browser neither their style and layout nor the parsing of their elements.
    static/js/player.js moves a layer into the deck and makes its elements when the player
    reaches it. "" when there are none."""
    layers = [lazy_layer(frame) for frame in frames]
    if not layers:
        return ""
    return f'<template class="deck-later"><svg xmlns="{SVG_NS}">{"".join(layers)}</svg></template>'


def lazy_layer(frame: list[str]) -> str:
    """A frame's group (its ``<g …>`` start tag, its content, ``</g>``) as an empty layer that
    carries its content as text: parsing an attribute costs the browser next to nothing,
    parsing its elements a few microseconds each. Inside a single-quoted attribute only ' and &
    need escaping."""
    markup = "".join(frame)
    head = markup.index(">") + 1
    assert markup.startswith("<g ") and markup.endswith("</g>"), markup[:80]
    body = markup[head:-4].replace("&", "&amp;").replace("'", "&#39;")
    return f"{markup[:head - 1]} data-markup='{body}'></g>"
