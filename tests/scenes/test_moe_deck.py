"""The MoE deck's geometry in the boxes it is shown in (issue 27): at every stage every label is
at the box's sizes (never below the small one), inside the deck and clear of every other label
the stage draws with it (the arrows' numbers included), and a number written on a cell — a
logit, a probability, a slot's token, a matrix count — lies inside its cell; widths measured
with Pillow from DejaVu Sans, not with the deck's own width table. (tests/browser/
test_deck_legibility.py measures the same as Chromium renders it.)"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from app.draw.box import Box
from app.draw.shapes import Text
from app.scenes.moe.deck import MIN_HEIGHT, MIN_WIDTH, build_deck
from app.scenes.moe.deck_parts import Batch
from app.sim.moe.params import MoeParams
from app.sim.moe.simulate import simulate

FONTS = Path("/usr/share/fonts/truetype/dejavu")

QUERIES = [
    {}, {"experts": 64, "ep": 16, "tokens": 64}, {"experts": 32, "ep": 8},
    {"top_k": 1, "experts": 4, "ep": 1}, {"capacity_factor": 0, "top_k": 4, "ep": 4},
]
BOXES = [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(920, 360, 1.5)]
"""The embed's, the page's at 1280 × 720, presentation mode's at 1920 × 1080, a phone's (drawn
wider), and larger type."""
RECT = re.compile(r"M([-\d.]+),([-\d.]+)h([-\d.]+)v([-\d.]+)")


@lru_cache(maxsize=None)
def font(bold: bool):
    from PIL import ImageFont
    return ImageFont.truetype(str(FONTS / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")),
                              1000)


@lru_cache(maxsize=None)
def width(text: str, size: float, bold: bool) -> float:
    return font(bold).getlength(text) / 1000 * size


@lru_cache(maxsize=None)
def trace_of(query: tuple):
    return simulate(MoeParams(**dict(query)))


def extent(t: Text) -> tuple[float, float, float, float]:
    """A label's box: DejaVu's ascent 0.76 em and descent 0.24 em round its baseline."""
    w = width(t.text, t.size, t.weight >= 600)
    x0 = t.x - w if t.anchor == "end" else t.x - w / 2 if t.anchor == "middle" else t.x
    return x0, t.y - 0.76 * t.size, x0 + w, t.y + 0.24 * t.size


def apart(a, b) -> bool:
    return a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5


def inside(box, cell) -> bool:
    x0, y0, x1, y1 = box
    cx, cy, cw, ch = cell
    return cx - 0.5 <= x0 and x1 <= cx + cw + 0.5 and cy - 0.5 <= y0 and y1 <= cy + ch + 0.5


@pytest.mark.skipif(not (FONTS / "DejaVuSans.ttf").exists(), reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(query, box):
    deck = build_deck(trace_of(tuple(sorted(query.items()))), box)
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    assert (deck.width, deck.height) == (area.width, area.height) and deck.box == box
    fixed = [*deck.title_lines, *(t for t in deck.legend if isinstance(t, Text))]
    for frame in deck.frames:
        header = Text(deck.header.x, deck.header.y, frame.header, deck.header.size, weight=700)
        labels = [*fixed, header, *frame.arrow_labels]
        for item in frame.items:
            if isinstance(item, Text):
                labels.append(item)
            elif isinstance(item, Batch) and not (item.dx or item.dy):
                rects = [tuple(map(float, m.groups())) for _, d in item.paths
                         for m in RECT.finditer(d)]
                for t in item.texts:
                    if t.fill:     # a number on its cell
                        assert any(inside(extent(t), r) for r in rects), (frame.index, t.text)
                labels += item.texts
        for t in labels:
            assert t.size >= area.small - 1e-9, (frame.index, t.text, t.size)
            x0, y0, x1, y1 = extent(t)
            assert -0.5 <= x0 and x1 <= deck.width + 0.5, (frame.index, t)
            assert 0 <= y0 and y1 <= deck.height + 0.5, (frame.index, t)
        boxes = [extent(t) for t in labels]
        for i, a in enumerate(boxes):
            for j in range(i + 1, len(boxes)):
                assert apart(a, boxes[j]), (frame.index, labels[i].text, labels[j].text)


def test_numbers_show_where_cells_hold_them():
    """The table's probabilities are written in the embed (cells a label wide) and left to the
    shading where 16 experts share the table; never at a size of their own."""
    default, wide = trace_of(()), trace_of((("experts", 64), ("ep", 16), ("tokens", 64)))
    for trace, written in ((default, True), (wide, False)):
        deck = build_deck(trace, Box(920, 360))
        numbers = [t for item in deck.frames[1].items if isinstance(item, Batch)
                   for t in item.texts if t.fill]
        assert bool(numbers) == written
        assert {t.size for t in numbers} <= {Box(920, 360).text, Box(920, 360).small}
