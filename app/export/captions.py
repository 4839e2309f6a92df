"""A step's file: its drawing with the caption beneath it (issue 27).

Every standalone file of a step (``/svg``, and each frame of a PNG, GIF, MP4 or PDF export) is
the deck's drawing with the frame's caption beneath it. The decks wrote that caption themselves
at a fixed 128 characters a line, three lines at most — wider than the 1,040-unit MoE and
context-parallel decks, so the line ran past the right edge ("5 dropp"), and a long caption
lost its end. The caption is wrapped by app/draw/caption.py (measured in the font the file is
drawn in) into as many lines as it needs within the drawing's width; the band under the
drawing is as tall as those lines, or exactly as tall as a page drawn for a box leaves.

:func:`captioned` lays a drawing and its caption out one above the other; :func:`banded` on a
page of a given size; :func:`slide` letterboxes them into a page of a fixed aspect (16:9, for
Beamer). All nest the drawing as an ``<svg>`` of its own, so its style sheet, patterns and
coordinates are untouched.
"""

from __future__ import annotations

import math
import re
from html import escape

from app.draw.caption import MARGIN, SIZE, band_height, caption_texts, fitted, wrap
from app.draw.fmt import coord2

FONT_FAMILY = "'DejaVu Sans', 'Helvetica Neue', Arial, sans-serif"

_SVG_ROOT = re.compile(r"<svg\b[^>]*>")
_ATTR = re.compile(r'\s([\w:-]+)="([^"]*)"')


def root_size(svg: str) -> tuple[float, float]:
    attrs = dict(_ATTR.findall(_SVG_ROOT.search(svg).group(0)))
    return float(attrs["width"]), float(attrs["height"])


def nested(svg: str, x: float, y: float, width: float, height: float) -> str:
    """A standalone drawing as an ``<svg>`` element placed at (x, y) in ``width`` × ``height``
    (scaled to fit, centred: its viewBox is kept)."""
    start = _SVG_ROOT.search(svg)
    attrs = dict(_ATTR.findall(start.group(0)))
    keep = " ".join(f'{k}="{v}"' for k, v in attrs.items()
                    if k in ("class", "viewBox", "font-family", "preserveAspectRatio"))
    body = svg[start.end():svg.rindex("</svg>")]
    return (f'<svg x="{coord2(x)}" y="{coord2(y)}" width="{coord2(width)}" '
            f'height="{coord2(height)}" {keep}>{body}</svg>')


def _root(width: float, height: float, label: str, inner: str, alt: str = "") -> str:
    w, h = coord2(width), coord2(height)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="{escape(label)}" '
            f'font-family="{escape(FONT_FAMILY)}">{alt}'
            f'<rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/>'
            f"{inner}</svg>")


def captioned(drawing: str, caption: str, label: str = "", min_lines: int = 0,
              alt: str = "") -> str:
    """``drawing`` (a standalone SVG, no caption) with ``caption`` wrapped beneath it, in a
    band of at least ``min_lines`` lines (an animation's frames share one size); ``alt``:
    the ``<title>``/``<desc>`` that the file's root carries."""
    width, height = root_size(drawing)
    lines = wrap(caption, width - 2 * MARGIN) if caption else []
    band = band_height(max(len(lines), min_lines))
    inner = nested(drawing, 0, 0, width, height) + caption_texts(lines, height)
    # a whole number of units: a renderer rounds a fractional size its own way
    return _root(width, math.ceil(height + band), label, inner, alt)


def banded(drawing: str, caption: str, band: float, label: str = "", alt: str = "",
           page: tuple[int, int] | None = None) -> str:
    """``drawing`` with ``caption`` in a band of exactly ``band`` units beneath it, on a
    ``page`` of exactly its size (``box=`` on /svg and /export; by default the drawing's width
    and its height plus the band): a drawing laid out larger than its page (a deck's least box
    at large type) is scaled down to fit above the band, centred. The caption is wrapped to the
    page's width (app/draw/caption.py's :func:`~app.draw.caption.fitted`)."""
    width, height = root_size(drawing)
    page_w, page_h = page or (width, math.ceil(height + band))
    room_h = page_h - band
    scale = min(1.0, page_w / width, room_h / height)
    w, h = width * scale, height * scale
    text = fitted(caption, page_w, band)
    inner = (nested(drawing, (page_w - w) / 2, (room_h - h) / 2, w, h)
             + caption_texts(text.lines, room_h, text.size))
    return _root(page_w, page_h, label, inner, alt)


def slide(drawing: str, caption: str, label: str = "", aspect: float = 16 / 9) -> str:
    """``drawing`` and its caption on a page of ``aspect`` (width / height) as wide as the
    drawing: the caption wrapped across the foot of the page, the drawing as large as the
    rest allows, centred. A caption too long for a third of the page is set smaller."""
    width, height = root_size(drawing)
    page_h = width / aspect
    size = SIZE
    lines = wrap(caption, width - 2 * MARGIN, size) if caption else []
    while lines and band_height(len(lines), size) > page_h / 3 and size > 11:
        size -= 1
        lines = wrap(caption, width - 2 * MARGIN, size)
    band = band_height(len(lines), size)
    box_h = page_h - band
    scale = min(1.0, box_h / height)
    w, h = width * scale, height * scale
    inner = (nested(drawing, (width - w) / 2, (box_h - h) / 2, w, h)
             + caption_texts(lines, box_h, size))
    return _root(width, page_h, label, inner)
