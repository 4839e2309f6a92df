"""A step's caption under its figure, wrapped to the width it gets (issue 27): the one caption
wrapper, for every standalone file of a step (app/export/captions.py lays the files out) and
for the decks' own standalone band (app/draw/deck.py).

A caption is measured in the font the files are drawn in — DejaVu Sans, the first of every
deck's fonts (app/export/raster.py) — with Pillow from the font file, at four times the size
for sub-unit precision: within 0.1 unit of the fonts' own advance widths (what
tests/scenes/deck_labels.py's ``width`` reads at 1000 units an em) on every caption the scenes
write, where app/draw/text.py's per-character table, made for short labels, counts each
character it does not list (η, ∇, a combining hat) as a whole em. Without the font file the
table measures (it never errs narrow on the characters it lists).

:func:`fitted` breaks a caption into the lines that fit a band of a given height: set at
:data:`SIZE`, smaller down to a least size where the lines would not fit, and past that the
band's last line ends "…" (the whole caption stays in the file's text alternative).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from html import escape
from pathlib import Path
from typing import NamedTuple

from app.draw import text as table
from app.draw.fmt import coord2

FONT_FILE = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
SIZE = 17.0              # caption type, in the drawing's units
SMALLEST = 13.0          # the least size a caption is set at to fit its band
LINE = 1.42              # line height, in ems
MARGIN = 22.0            # left and right of the caption text
PAD_TOP = 8.0            # between the drawing and the first line's top
PAD_BOTTOM = 14.0        # under the last line
CAPTION_HEIGHT = 90      # the band under a file drawn for a page (``box=``): three lines of 15


@lru_cache(maxsize=8)
def _font(size: float):
    try:
        from PIL import ImageFont
        return ImageFont.truetype(str(FONT_FILE), size=max(1, round(size * 4)))
    except (ImportError, OSError):
        return None


def text_width(text: str, size: float = SIZE) -> float:
    """The advance of ``text`` set in DejaVu Sans at ``size`` units."""
    font = _font(size)
    if font is None:
        return table.text_width(text, size)
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


class Caption(NamedTuple):
    """A caption laid out for its band: its lines, at ``size``."""

    lines: tuple[str, ...]
    size: float


def fitted(caption: str, width: float, band: float = CAPTION_HEIGHT,
           smallest: float = SMALLEST) -> Caption:
    """``caption`` wrapped under a drawing ``width`` units wide into a band ``band`` units
    tall: at :data:`SIZE`, smaller (down to ``smallest``) where its lines would not fit, and
    past that cut to the band's lines, the last ending "…"."""
    room = width - 2 * MARGIN
    size = SIZE
    lines = wrap(caption, room, size) if caption else []
    while lines and band_height(len(lines), size) > band and size > smallest:
        size -= 1
        lines = wrap(caption, room, size)
    most = max(1, int((band - PAD_TOP - PAD_BOTTOM) // (size * LINE)))
    if len(lines) > most:
        last = lines[most - 1]
        while last and text_width(last + " …", size) > room:
            last = last.rsplit(" ", 1)[0] if " " in last else last[:-1]
        lines = lines[:most - 1] + [last + " …"]
    return Caption(tuple(lines), size)


def caption_lines(caption: str, width: float) -> Caption:
    """``caption`` laid out for the band of :data:`CAPTION_HEIGHT` under a drawing ``width``
    units wide (a deck's standalone file, app/draw/deck.py)."""
    return fitted(caption, width)


def line_count(caption: str, width: float) -> int:
    """How many lines ``caption`` takes at :data:`SIZE` under a drawing ``width`` units wide
    (an animation's frames share the tallest band)."""
    return len(wrap(caption, width - 2 * MARGIN)) if caption else 0


def caption_texts(lines: Iterable[str], top: float, size: float = SIZE,
                  left: float = MARGIN) -> str:
    """A caption's lines as ``<text>`` elements under a drawing that ends at ``top``."""
    step = size * LINE
    return "".join(
        f'<text x="{coord2(left)}" y="{coord2(top + PAD_TOP + size + k * step - 0.25 * size)}" '
        f'font-size="{coord2(size)}" fill="#1a1a1a" class="caption-line">'
        f'{escape(line, quote=False)}</text>'
        for k, line in enumerate(lines))
