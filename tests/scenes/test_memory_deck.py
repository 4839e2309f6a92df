"""The memory deck's geometry in the boxes it is shown in (issue 27): the squarified treemap tiles
its rectangle in proportion; every label is at the box's sizes, inside the deck, inside its
tile, and apart from every other label — widths measured with Pillow from DejaVu Sans, not
with the deck's own width table. (tests/browser/test_deck_legibility.py measures the same as
Chromium renders it.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.draw.box import Box
from app.scenes.memory.deck import HEADERS, MIN_WIDTH, build_deck, squarify
from app.scenes.memory.page import title
from app.sim.memory.params import MemoryParams
from app.sim.memory.simulate import simulate

FONTS = Path("/usr/share/fonts/truetype/dejavu")


@given(st.lists(st.floats(0.001, 1e6), min_size=1, max_size=30))
def test_squarify_tiles_in_proportion(sizes):
    sizes = sorted(sizes, reverse=True)
    rects = squarify(sizes, 10, 20, 800, 500)
    total = sum(sizes)
    assert sum(w * h for _, _, w, h in rects) == pytest.approx(800 * 500)
    for size, (x, y, w, h) in zip(sizes, rects):
        assert w * h == pytest.approx(size / total * 800 * 500, rel=1e-6)
        eps = 1e-3  # a thousandth of a pixel: rounding accumulates over many tiles
        assert 10 - eps <= x and x + w <= 810 + eps and 20 - eps <= y and y + h <= 520 + eps


QUERIES = [
    {}, {"preset": "gpt3-175b", "dp": 64, "tp": 8, "pp": 8, "zero": 1,
         "sequence_parallel": True, "recompute": "selective"},
    {"preset": "gpt2", "dp": 1, "zero": 0, "optimizer": "sgd", "precision": "fp32"},
    {"preset": "llama3-405b", "micro_batch": 64, "dp": 1, "zero": 0, "recompute": "none"},
    {"preset": "llama3-70b", "dp": 1024, "tp": 64, "pp": 16, "zero": 3, "gpu": "a100-40",
     "heads": 64, "kv_heads": 64, "layers": 1 * 16, "micro_batch": 4096},
]
BOXES = [Box(920, 360), Box(840, 360), Box(1240, 680), Box(1200, 520), Box(1840, 840),
         Box(320, 520), Box(920, 360, 1.5), Box(2560, 1440, 2.0), Box(920, 360, 1.75),
         Box(840, 360, 2.0), Box(320, 520, 2.0)]
"""The embed's, the pages' at 1280 × 720 and 1920 × 1080, presentation mode's at both, a
phone's, and larger type (A+ four times in the embed and on the page: the deck laid out
taller, and wider on a phone)."""


def width(text: str, size: float, bold: bool) -> float:
    from PIL import ImageFont
    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    return ImageFont.truetype(str(FONTS / name), 1000).getlength(text) / 1000 * size


def extent(t) -> tuple[float, float, float, float]:
    """A label's box: DejaVu's ascent 0.76 em and descent 0.24 em round its baseline."""
    w = width(t.text, t.size, t.weight >= 600)
    x0 = t.x - w if t.anchor == "end" else t.x - w / 2 if t.anchor == "middle" else t.x
    return x0, t.y - 0.76 * t.size, x0 + w, t.y + 0.24 * t.size


def apart(a, b) -> bool:
    return a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5


@pytest.mark.skipif(not (FONTS / "DejaVuSans.ttf").exists(), reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(query, box):
    params = MemoryParams(**query)
    trace = simulate(params)
    deck = build_deck(trace, title(params, trace), box)
    # its least box: at least the box (wider on a phone), larger where large type needs it
    assert deck.width >= max(box.width, MIN_WIDTH) and deck.height >= box.height
    assert deck.box == box
    if box.font == 1:
        assert (deck.width, deck.height) == (max(box.width, MIN_WIDTH), box.height)
    # the last step shows every layer: what it draws at once must be apart
    header = deck.header
    longest = max(HEADERS, key=len)
    labels = [*deck.title, *deck.ticks, *deck.capacity,
              type(header)(header.x, header.y, longest, header.size, weight=700)]
    if deck.hatch_legend:
        labels.append(deck.hatch_legend)
    for layer in deck.layers:
        labels += [*layer.legend, *layer.notes]
        for tile in (*layer.tiles, *((layer.bar,) if layer.bar else ())):
            assert " = " in tile.title and ("·" in tile.title or tile is layer.bar)
            for t in tile.labels:
                x0, y0, x1, y1 = extent(t)
                assert tile.x <= x0 and x1 <= tile.x + tile.w + 0.5, (t.text, tile)
                assert tile.y <= y0 and y1 <= tile.y + tile.h + 0.5, (t.text, tile)
            labels += tile.labels
    for t in labels:
        assert t.size >= box.small - 1e-9, (t.text, t.size)
        x0, y0, x1, y1 = extent(t)
        assert 0 <= x0 and x1 <= deck.width and 0 <= y0 and y1 <= deck.height, t
    boxes = [extent(t) for t in labels]
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            assert apart(a, boxes[j]), (labels[i].text, labels[j].text)
