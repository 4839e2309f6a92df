"""What the deck geometry tests share (issue 27): a label's box from DejaVu Sans's advance
widths as Pillow measures them from the fonts (not the decks' own width table), and a sweep
that holds every pair of boxes apart."""

from __future__ import annotations

from tests.scenes.deck_labels import HAVE_FONTS, apart, width  # noqa: F401  (the tests import them here)


def extent(x: float, y: float, text: str, size: float, anchor: str = "start",
           bold: bool = False, central: bool = False) -> tuple[float, float, float, float]:
    """A label's box: DejaVu's ascent 0.76 em and descent 0.24 em round its baseline ``y``
    (``central``: centred on ``y``, as digits 0.8 em tall)."""
    w = width(text, size, bold)
    x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    if central:
        return x0, y - 0.4 * size, x0 + w, y + 0.4 * size
    return x0, y - 0.76 * size, x0 + w, y + 0.24 * size


def assert_apart(boxes: list, texts: list, where="") -> None:
    """No two of ``boxes`` overlap (a sweep along x: only boxes that start before one ends)."""
    order = sorted(range(len(boxes)), key=lambda i: boxes[i][0])
    for n, i in enumerate(order):
        for j in order[n + 1:]:
            if boxes[j][0] >= boxes[i][2]:
                break
            assert apart(boxes[i], boxes[j]), (where, texts[i], texts[j])


def assert_inside(boxes: list, texts: list, width: float, height: float) -> None:
    for b, t in zip(boxes, texts):
        assert 0 <= b[0] and b[2] <= width + 0.5 and 0 <= b[1] and b[3] <= height + 0.5, (t, b)


def boxes_to_test():
    """The boxes a deck is held in: the embed's, the page's at 1280 × 720, presentation
    mode's at 1920 × 1080, a phone's (drawn at the deck's least width), larger type, and the
    largest type in the embed and on a phone (the deck laid out taller, or wider)."""
    from app.draw.box import Box
    return [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(920, 360, 1.5),
            Box(920, 360, 2.0), Box(320, 520, 2.0)]


def assert_legible(labels: list[tuple], area, deck_width: float, deck_height: float,
                   where="") -> list:
    """``labels`` — (x, baseline, text, size, anchor, bold) each — are at the box's sizes (a
    label, small or header; never below small), inside the deck and apart. Their boxes."""
    sizes = {area.text, area.small, area.head}
    for *_, text, size, _, _ in labels:
        assert size in sizes and size >= area.small - 1e-9, (text, size)
    boxes = [extent(x, y, t, s, a, b) for x, y, t, s, a, b in labels]
    texts = [t for _, _, t, *_ in labels]
    assert_inside(boxes, texts, deck_width, deck_height)
    assert_apart(boxes, texts, where)
    return boxes
