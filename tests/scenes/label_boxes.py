"""Where a deck's label lies, measured independently of the deck's own width table: DejaVu Sans's
advance widths read with Pillow from the font files, its ascent (0.76 em) and descent (0.24 em)
round the baseline. Shared by the deck geometry tests (tests/scenes/test_*_deck.py)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

FONTS = Path("/usr/share/fonts/truetype/dejavu")
HAVE_FONTS = (FONTS / "DejaVuSans.ttf").exists()


@lru_cache(maxsize=None)
def font(bold: bool):
    from PIL import ImageFont
    return ImageFont.truetype(str(FONTS / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")),
                              1000)


@lru_cache(maxsize=None)
def width(text: str, size: float, bold: bool) -> float:
    return font(bold).getlength(text) / 1000 * size


def extent(t) -> tuple[float, float, float, float]:
    """The box (x0, y0, x1, y1) of a label (``x``, ``y`` its baseline's anchor, ``size``,
    ``anchor``, ``weight``)."""
    w = width(t.text, t.size, t.weight >= 600)
    x0 = t.x - w if t.anchor == "end" else t.x - w / 2 if t.anchor == "middle" else t.x
    return x0, t.y - 0.76 * t.size, x0 + w, t.y + 0.24 * t.size


def apart(a, b) -> bool:
    """Whether two label boxes share no more than half a unit either way."""
    return a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5


def overlapping(labels) -> list[tuple[str, str]]:
    """The pairs of ``labels`` whose boxes overlap."""
    boxes = [extent(t) for t in labels]
    return [(labels[i].text, labels[j].text) for i, a in enumerate(boxes)
            for j in range(i + 1, len(boxes)) if not apart(a, boxes[j])]
