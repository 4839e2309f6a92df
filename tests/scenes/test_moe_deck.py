"""The MoE deck's geometry in the boxes it is shown in (issue 27): at every stage every label is
at the box's sizes (never below the small one), inside the deck and clear of every other label
the stage draws with it (the arrows' numbers included), and a number written on a cell — a
logit, a probability, a slot's token, a matrix count — lies inside its cell; widths measured
with Pillow from DejaVu Sans, not with the deck's own width table. (tests/browser/
test_deck_legibility.py measures the same as Chromium renders it.)"""

from __future__ import annotations

import re

from app.draw.box import Box
from app.draw.shapes import Text
from app.scenes.moe.deck import MIN_HEIGHT, MIN_WIDTH, build_deck, layout
from app.scenes.moe.deck_parts import Batch
from app.sim.moe.params import MoeParams
from app.sim.moe.simulate import simulate
from tests.scenes.deck_boxes import in_boxes, label_box, overlapping, tracer

QUERIES = [
    {}, {"experts": 64, "ep": 16, "tokens": 64}, {"experts": 32, "ep": 8},
    {"top_k": 1, "experts": 4, "ep": 1}, {"capacity_factor": 0, "top_k": 4, "ep": 4},
]
RECT = re.compile(r"M([-\d.]+),([-\d.]+)h([-\d.]+)v([-\d.]+)")


trace_of = tracer(simulate, MoeParams)



def inside(box, cell) -> bool:
    x0, y0, x1, y1 = box
    cx, cy, cw, ch = cell
    return cx - 0.5 <= x0 and x1 <= cx + cw + 0.5 and cy - 0.5 <= y0 and y1 <= cy + ch + 0.5


@in_boxes(QUERIES)
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = trace_of(query)
    deck = build_deck(trace, box)
    lay = layout(trace.params, trace, box)[0]
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    assert (deck.width, deck.height) == (area.width, area.height) and deck.box == box
    fixed = [*deck.title_lines, *(t for t in deck.legend if isinstance(t, Text))]
    for frame in deck.frames:
        header = Text(deck.header.x, deck.header.y, frame.header, deck.header.size, weight=700)
        labels = [*fixed, header, *frame.arrow_labels]
        for item in frame.items:
            if hasattr(item, "w"):     # a rectangle: never of a negative size (Chromium refuses it)
                assert item.w >= 0 and item.h >= 0, (frame.index, item)
            if isinstance(item, Text):
                labels.append(item)
            elif isinstance(item, Batch) and not (item.dx or item.dy):
                rects = [tuple(map(float, m.groups())) for _, d in item.paths
                         for m in RECT.finditer(d)]
                for t in item.texts:
                    if t.fill:     # a number on its cell
                        assert any(inside(label_box(t), r) for r in rects), (frame.index, t.text)
                labels += item.texts
        # the left half's labels stay in it: the table's (and the arrows' numbers) left of the
        # bins, the matrix column's left of the rank columns
        split = lay.split if frame.index < 4 else lay.ep_split + lay.pad * 0.5
        for t in labels[len(fixed) + 1:]:
            x0, _, x1, _ = label_box(t)
            assert not (x0 < split - 1 < x1), (frame.index, t.text, split)
        for t in labels:
            assert t.size in (area.small, area.text, area.head), (t.text, t.size)   # the box's
            x0, y0, x1, y1 = label_box(t)
            assert -0.5 <= x0 and x1 <= deck.width + 0.5, (frame.index, t)
            assert 0 <= y0 and y1 <= deck.height + 0.5, (frame.index, t)
        assert overlapping(labels) == [], frame.index


def test_numbers_show_where_cells_hold_them():
    """The table's probabilities are written in the embed (cells a label wide) and left to the
    shading where 16 experts share the table; never at a size of their own."""
    default, wide = trace_of({}), trace_of({"experts": 64, "ep": 16, "tokens": 64})
    for trace, written in ((default, True), (wide, False)):
        deck = build_deck(trace, Box(920, 360))
        numbers = [t for item in deck.frames[1].items if isinstance(item, Batch)
                   for t in item.texts if t.fill]
        assert bool(numbers) == written
        assert {t.size for t in numbers} <= {Box(920, 360).text, Box(920, 360).small}
