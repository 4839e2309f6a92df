"""A step's caption under its figure, wrapped to the width it gets (issue 27).

Every standalone file of a step (``/svg``, and each frame of a PNG, GIF, MP4 or PDF export) is
the deck's drawing with the frame's caption beneath it. The decks wrote that caption themselves
at a fixed 128 characters a line, three lines at most — wider than the 1,040-unit MoE and
context-parallel decks, so the line ran past the right edge ("5 dropp"), and a long caption
lost its end. Here a caption is measured in the font the file is drawn in (DejaVu Sans, the
first of every deck's fonts: app/export/raster.py) and broken into as many lines as it needs
within the drawing's width; the band under the drawing is as tall as those lines.

:func:`captioned` lays a drawing and its caption out one above the other; :func:`slide`
letterboxes them into a page of a fixed aspect (16:9, for Beamer). Both nest the drawing as an
``<svg>`` of its own, so its style sheet, patterns and coordinates are untouched.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from html import escape
from pathlib import Path

FONT_FILE = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
FONT_FAMILY = "'DejaVu Sans', 'Helvetica Neue', Arial, sans-serif"
SIZE = 17.0              # caption type, in the drawing's units (as the decks wrote it)
LINE = 1.42              # line height, in ems
MARGIN = 22.0            # left and right of the caption text
PAD_TOP = 8.0            # between the drawing and the first line's top
PAD_BOTTOM = 14.0        # under the last line
AVERAGE_ADVANCE = 0.62   # ems a character takes where the font file is missing (DejaVu's widest
                         # usual text: digits and capitals, so the guess errs short)

_SVG_ROOT = re.compile(r"<svg\b[^>]*>")
_ATTR = re.compile(r'\s([\w:-]+)="([^"]*)"')


@lru_cache(maxsize=8)
def _font(size: float):
    try:
        from PIL import ImageFont
        return ImageFont.truetype(str(FONT_FILE), size=max(1, round(size * 4)))
    except (ImportError, OSError):
        return None


def text_width(text: str, size: float = SIZE) -> float:
    """The advance of ``text`` set in DejaVu Sans at ``size`` units (measured at 4× the size
    for sub-unit precision; an estimate when the font file is missing)."""
    font = _font(size)
    if font is None:
        return len(text) * size * AVERAGE_ADVANCE
    return font.getlength(text) / 4


def wrap(text: str, width: float, size: float = SIZE) -> list[str]:
    """``text`` broken at spaces into lines no wider than ``width`` units at ``size``; a word
    wider than a line is broken between characters."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        trial = f"{line} {word}" if line else word
        if text_width(trial, size) <= width:
            line = trial
            continue
        if line:
            lines.append(line)
        while len(word) > 1 and text_width(word, size) > width:
            cut = 1
            while cut < len(word) and text_width(word[:cut + 1], size) <= width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    if line:
        lines.append(line)
    return lines


def band_height(lines: int, size: float = SIZE) -> float:
    """The height of a caption band of ``lines`` lines (none: no band)."""
    return PAD_TOP + lines * size * LINE + PAD_BOTTOM if lines else 0.0


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
    return (f'<svg x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" height="{_n(height)}" {keep}>'
            f"{body}</svg>")


def caption_texts(lines: list[str], top: float, size: float = SIZE, left: float = MARGIN) -> str:
    step = size * LINE
    return "".join(
        f'<text x="{_n(left)}" y="{_n(top + PAD_TOP + size + k * step - 0.25 * size)}" '
        f'font-size="{_n(size)}" fill="#1a1a1a" class="caption-line">{escape(line, quote=False)}</text>'
        for k, line in enumerate(lines))


def _root(width: float, height: float, label: str, inner: str, alt: str = "") -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" height="{_n(height)}" '
            f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{escape(label)}" '
            f'font-family="{escape(FONT_FAMILY)}">{alt}'
            f'<rect x="0" y="0" width="{_n(width)}" height="{_n(height)}" fill="#ffffff"/>'
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
           smallest: float = 13.0) -> str:
    """``drawing`` with ``caption`` in a band of exactly ``band`` units beneath it: a file drawn
    for a page of a given size (``box=`` on /svg and /export) is that size. A caption too long
    for the band is set smaller, down to ``smallest``, and beyond that ends with "…" on the
    band's last line (the full caption stays in the file's text alternative)."""
    width, height = root_size(drawing)
    size = SIZE
    lines = wrap(caption, width - 2 * MARGIN, size) if caption else []
    while lines and band_height(len(lines), size) > band and size > smallest:
        size -= 1
        lines = wrap(caption, width - 2 * MARGIN, size)
    room = max(1, int((band - PAD_TOP - PAD_BOTTOM) // (size * LINE)))
    if len(lines) > room:
        last = lines[room - 1]
        while last and text_width(last + " …", size) > width - 2 * MARGIN:
            last = last.rsplit(" ", 1)[0] if " " in last else last[:-1]
        lines = lines[:room - 1] + [last + " …"]
    inner = nested(drawing, 0, 0, width, height) + caption_texts(lines, height, size)
    return _root(width, math.ceil(height + band), label, inner, alt)


def caption_lines(caption: str, width: float) -> int:
    """How many lines ``caption`` takes under a drawing ``width`` units wide."""
    return len(wrap(caption, width - 2 * MARGIN)) if caption else 0


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


def _n(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")
