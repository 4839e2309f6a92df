"""The tensor-parallel deck's labels in the boxes it is shown in (issue 27): every text at the
box's sizes (never below the small one; a matrix's numbers too), inside the deck, and no two
that show at once overlapping — a frame's texts with the title, the flow, the lanes' names
and the legend — widths measured with Pillow from DejaVu Sans, not with the deck's own width
table (tests/browser/test_deck_legibility.py measures the same as Chromium renders it)."""

from __future__ import annotations

from app.draw.box import Box
from app.scenes.tensor_parallel.deck import MIN_WIDTH, build_deck
from app.sim.tensor_parallel.params import TensorParallelParams
from app.sim.tensor_parallel.simulate import simulate
from tests.scenes.deck_boxes import BOXES, extent, in_boxes, tracer
from tests.scenes.test_memory_deck import apart

QUERIES = [{}, {"tp": 8}, {"block": "mlp", "sequence_parallel": True},
           {"block": "attention", "tp": 4}, {"block": "embedding", "tp": 4}, {"block": "row"}]


def _text(t):
    return (*extent(t.x, t.y, t.text, t.size, t.anchor, t.weight == "700"), t.text)


trace_of = tracer(simulate, TensorParallelParams)


LARGE_TYPE = [Box(920, 360, 1.15), Box(920, 360, 1.75), Box(840, 360, 2.0), Box(320, 520, 1.75),
              Box(320, 520, 2.0)]
"""A+ once, four and five times in the embed, on the page at 1280 × 720 and on a phone: the
deck is laid out wider for its headers, taller for its lanes (at 1.15 the row block's check
rows once ran into the legend)."""


@in_boxes(QUERIES, BOXES + LARGE_TYPE)
def test_labels_fit_stay_legible_and_apart(query, box):
    deck = build_deck(trace_of(query), box)
    g = deck.geometry
    small = box.small
    # its least box: wider where large type's headers need it (app/draw/widen.py)
    assert deck.width >= max(box.width, MIN_WIDTH) and deck.box == box
    if box.font == 1:
        assert deck.width == max(box.width, MIN_WIDTH)
    fixed = [(*extent(x, y, t, small, "end"), t) for x, y, t in deck.top.title]
    for b in deck.flow:
        first = b.y + small * 1.25 if b.lines else b.y + b.h / 2 + small * 0.35
        for k, line in enumerate((b.label, *b.lines)):
            box_ = extent(b.x + b.w / 2, first + k * small * 1.3, line, small, "middle", k == 0)
            assert b.x <= box_[0] and box_[2] <= b.x + b.w, line       # inside its box
            assert b.y <= box_[1] and box_[3] <= b.y + b.h + 0.5, line
            fixed.append((*box_, line))
    lanes = [_text(t) for t in deck.lane_labels]
    dx = deck.swatch + small * 0.45
    fixed += [(*extent(x + dx, y + deck.swatch * 0.5 + small * 0.36, t, small), t)
              for _, t, x, y in deck.legend]
    for f in deck.frames:
        x, y = deck.top.header_x, deck.top.header_y
        shown = fixed + (lanes if f.lanes else []) + [
            (*extent(x, y, f.header, g.head, bold=True), f.header)]
        texts = list(f.texts) + (list(f.band.lines) if f.band else [])
        for t in texts:
            assert t.size >= small - 1e-9, t
        shown += [_text(t) for t in texts]
        for p in f.matrices:
            if p.view.numbers:
                assert small - 1e-9 <= p.view.font, (f.header, p.view.font)
            assert p.view.y + p.view.h <= g.lanes_bottom + 0.5 and p.view.x + p.view.w <= g.right + 0.5
        for i, a in enumerate(shown):
            assert -0.5 <= a[0] and a[2] <= deck.width + 0.5, (f.header, a)
            assert -0.5 <= a[1] and a[3] <= deck.height + 0.5, (f.header, a)
            for b in shown[i + 1:]:
                assert apart(a, b), (f.header, a[4], b[4])
