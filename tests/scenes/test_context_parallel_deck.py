"""The context-parallel deck's geometry in the boxes it is shown in (issue 27): at every step every
label is at the box's sizes (never below the small one), inside the deck, clear of every other
label shown with it, and a number on a chip stays inside its chip — widths measured with Pillow
from DejaVu Sans, not with the deck's own width table. The matrix is a square left of the rank
panel and every block lies inside it. (tests/browser/test_deck_legibility.py measures the same as
Chromium renders it.)"""

from __future__ import annotations

import pytest

from app.draw.box import Box
from app.draw.shapes import Path as Shape
from app.draw.shapes import Rect, Text
from app.scenes.context_parallel.deck import MIN_HEIGHT, MIN_WIDTH, build_deck
from app.sim.context_parallel.params import ContextParallelParams
from app.sim.context_parallel.simulate import simulate
from tests.scenes.deck_boxes import BOXES, label_box, overlapping, tracer
from tests.scenes.test_memory_deck import FONTS

QUERIES = [
    {}, {"cp": 16, "seq": 64}, {"cp": 8}, {"method": "ulysses", "cp": 4, "kv_heads": 4},
    {"method": "hybrid", "cp": 4, "ulysses": 2, "balance": "zigzag"},
    {"method": "all_gather", "causal": False},
]
CASES = [(q, b) for q in QUERIES for b in BOXES] + [
    ({"cp": 64, "seq": 256, "balance": "zigzag"}, b) for b in (Box(920, 360), Box(560, 520))]
"""Every query in every box, and the largest ring (64 ranks, 128 chunks) in the smallest."""


trace_of = tracer(simulate, ContextParallelParams)



def texts(items) -> list[Text]:
    return [t for t in items if isinstance(t, Text)]


@pytest.mark.skipif(not (FONTS / "DejaVuSans.ttf").exists(), reason="DejaVu Sans not installed")
@pytest.mark.parametrize("query,box", CASES,
                         ids=[f"{k}-{b.key}x{b.font:g}" for k, (_, b) in enumerate(CASES)])
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = trace_of(query)
    deck = build_deck(trace, box)
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    assert (deck.width, deck.height) == (area.width, area.height) and deck.box == box
    assert len(deck.frames) == len(trace.frames)
    matrix = next(r for r in deck.base if isinstance(r, Rect) and r.cls == "blank")
    assert matrix.w == matrix.h
    fixed = [*deck.title_lines, *texts(deck.base), *texts(deck.legend)]
    for frame in deck.frames:
        panel = next(r for r in frame.items if isinstance(r, Rect) and r.cls == "panel-bg")
        assert matrix.x + matrix.w <= panel.x, "the matrix runs under the rank panel"
        for block in (i for i in frame.items if isinstance(i, Shape) and i.fill):
            xs = [float(v) for v in block.d.replace("M", " ").replace("V", " ").replace(
                "H", " ").replace("Z", " ").replace("h", " ").replace("v", " ").split()[:2]]
            assert matrix.x - 0.06 <= xs[0] <= matrix.x + matrix.w + 0.06, block.d[:40]
        header = Text(deck.header.x, deck.header.y, frame.header, deck.header.size, weight=700)
        labels = [*fixed, header, *texts(frame.items), *frame.arrow_labels]
        chips = [r for r in frame.items if isinstance(r, Rect) and r.fill]
        for t in labels:
            assert t.size in (area.small, area.text, area.head), (t.text, t.size)   # the box's
            x0, y0, x1, y1 = label_box(t)
            assert -0.5 <= x0 and x1 <= deck.width + 0.5, (frame.index, t)
            assert 0 <= y0 and y1 <= deck.height + 0.5, (frame.index, t)
            if t.fill:   # a number on a chip: inside its chip
                chip = next((c for c in chips if c.x <= t.x <= c.x + c.w
                             and c.y <= t.y <= c.y + c.h), None)
                assert chip is not None, t
                assert chip.x <= x0 + 0.5 and x1 <= chip.x + chip.w + 0.5, (t, chip)
        assert overlapping(labels) == [], frame.index


def test_a_small_box_drops_lines_never_shrinks_them():
    """The softmax's numbers are drawn where the rows have room (presentation mode), and
    otherwise stay on the rank chip's hover; the sizes are the box's in both."""
    trace = simulate(ContextParallelParams())
    small, large = build_deck(trace, Box(840, 240)), build_deck(trace, Box(1840, 840))
    ring = next(k for k, f in enumerate(trace.frames) if f.phase == "ring")

    def softmax(deck):
        return [t for t in texts(deck.frames[ring].items) if t.text.startswith("q")]

    assert len(softmax(large)) == 4 and not softmax(small)
    chips = [r for r in small.frames[ring].items if isinstance(r, Rect) and r.tip]
    assert sum("l′ =" in c.tip or "unchanged" in c.tip for c in chips) == 4
    for deck, box in ((small, Box(840, 240)), (large, Box(1840, 840))):
        area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
        sizes = {t.size for f in deck.frames for t in texts(f.items)}
        assert sizes <= {area.text, area.small}, sizes
