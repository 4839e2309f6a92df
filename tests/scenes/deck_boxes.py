"""What the tests of the decks laid out for their box share (test_data_parallel_deck.py,
test_train_deck.py, test_tensor_parallel_labels.py, test_context_parallel_deck.py,
test_moe_deck.py): the boxes they lay a deck out in, a
label's extent measured with Pillow from DejaVu Sans (tests/scenes/deck_labels.py's width), each
state simulated once for all the boxes, and the parametrisation over states × boxes."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import pytest

from app.draw.box import Box
from tests.scenes.deck_labels import HAVE_FONTS, width

BOXES = [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(920, 360, 1.5)]
"""The embed's, the page's at 1280 × 720, presentation mode's at 1920 × 1080, a phone's (drawn
560 wide at least) and larger type."""


def extent(x, y, text, size, anchor="start", bold=False, middle=False):
    """A label's box: DejaVu's ascent 0.76 em and descent 0.24 em round its baseline (``y`` is
    the middle for the labels drawn with dy = 0.35 em)."""
    base = y + 0.35 * size if middle else y
    w = width(text, size, bold)
    x0 = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    return x0, base - 0.76 * size, x0 + w, base + 0.24 * size


def label_box(t):
    """:func:`extent` of a label value (``x``, ``y``, ``text``, ``size``, ``anchor``,
    ``weight``: app.draw.shapes.Text and the decks' own)."""
    return extent(t.x, t.y, t.text, t.size, t.anchor, t.weight >= 600)


def overlapping(labels) -> list[tuple[str, str]]:
    """The pairs of ``labels`` whose boxes share more than half a unit either way."""
    boxes = [label_box(t) for t in labels]
    return [(labels[i].text, labels[j].text) for i, a in enumerate(boxes)
            for j, b in enumerate(boxes[i + 1:], i + 1)
            if not (a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5
                    or b[3] <= a[1] + 0.5)]


def tracer(simulate: Callable, params: type) -> Callable[[dict], object]:
    """``trace(query)``: the state's trace, simulated once for all the boxes."""
    once = lru_cache(maxsize=8)(lambda items: simulate(params(**dict(items))))
    return lambda query: once(tuple(sorted(query.items())))


def in_boxes(queries: list[dict], boxes: list[Box] | None = None):
    """A test of ``(query, box)`` for every state and box (:data:`BOXES` by default; skipped
    without DejaVu Sans)."""
    boxes = BOXES if boxes is None else boxes

    def decorate(test):
        test = pytest.mark.parametrize("box", boxes, ids=[f"{b.key}x{b.font:g}" for b in boxes])(
            pytest.mark.parametrize("query", queries, ids=range(len(queries)))(test))
        return pytest.mark.skipif(not HAVE_FONTS,
                                  reason="DejaVu Sans not installed")(test)
    return decorate
