"""Labels' boxes measured independently of the decks (issue 27): widths from DejaVu Sans and
DejaVu Sans Mono read with Pillow (not the decks' own width tables), ascent 0.76 em and descent
0.24 em round the baseline; and the check every laid-out deck's test makes of what one step
shows — each label at the box's sizes, inside the deck, apart from every other."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

FONTS = Path("/usr/share/fonts/truetype/dejavu")
HAVE_FONTS = (FONTS / "DejaVuSans.ttf").exists() and (FONTS / "DejaVuSansMono.ttf").exists()


@lru_cache(maxsize=4)
def font(name: str):
    from PIL import ImageFont
    return ImageFont.truetype(str(FONTS / name), 1000)


@lru_cache(maxsize=65536)
def em(text: str, bold: bool, mono: bool) -> float:
    name = ("DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf") if mono else (
        "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
    return font(name).getlength(text) / 1000


def width(text: str, size: float, bold: bool = False, mono: bool = False) -> float:
    """``text``'s advance width at ``size`` (every deck test's one measure of a label)."""
    return em(text, bold, mono) * size


def extent(t, central: bool = False) -> tuple[float, float, float, float]:
    """A label's box round its baseline (or round its middle, for ``dominant-baseline:
    central``)."""
    w = width(t.text, t.size, t.weight >= 600, getattr(t, "mono", False))
    x0 = t.x - w if t.anchor == "end" else t.x - w / 2 if t.anchor == "middle" else t.x
    if central:
        return x0, t.y - 0.5 * t.size, x0 + w, t.y + 0.5 * t.size
    return x0, t.y - 0.76 * t.size, x0 + w, t.y + 0.24 * t.size


def apart(a, b) -> bool:
    return a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5


def inside(e, x0, y0, x1, y1) -> bool:
    return x0 - 0.5 <= e[0] and e[2] <= x1 + 0.5 and y0 - 0.5 <= e[1] and e[3] <= y1 + 0.5


def check_step(shown, box, width_: float, height: float, step: str, boxes=None) -> None:
    """What one step shows: every label at least the box's small size, inside the deck of
    ``width_`` × ``height``, and apart from every other (``boxes``: their extents, where some
    are not measured round a baseline)."""
    boxes = boxes or [extent(t) for t in shown]
    for t, e in zip(shown, boxes):
        assert t.size >= box.small - 1e-9, (step, t.text, t.size)
        assert inside(e, 0, 0, width_, height), (step, t.text, e)
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            assert apart(a, boxes[j]), (step, shown[i].text, shown[j].text)
