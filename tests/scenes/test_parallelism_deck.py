"""The /parallelism deck's geometry in the boxes it is shown in (issue 27): in every frame, every
label is at the box's sizes, inside the deck, and apart from every other label shown with it;
a cell's number and notes stay inside its cell, a node's label inside its box, the panel's
lines inside the panel — widths measured with Pillow from DejaVu Sans and DejaVu Sans Mono, not
with the deck's own width tables. (tests/browser/test_deck_legibility.py measures the same as
Chromium renders it.)"""

from __future__ import annotations

import pytest

from app.draw.box import Box
from app.draw.shapes import Rect, Text
from app.scenes.parallelism.deck import DETAILED_MAX, MIN_WIDTH, build_deck
from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.simulate import simulate
from tests.scenes.deck_labels import HAVE_FONTS, check_step, extent, inside

QUERIES = [{}, {"dp": 4}, {"tp": 4, "dp": 8}, {"dp": 32}, {"tp": 8, "gpus_per_node": 8, "pp": 4}]
"""8 ranks (the default), 16, 64 (detailed where the box allows, else a summary), 128 (always
a summary), 8-GPU nodes."""
BOXES = [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(320, 520),
         Box(920, 360, 1.5)]
"""The embed's, the page's at 1280 × 720, presentation mode's at 1920 × 1080, a phone's (drawn
at the deck's least width), and larger type."""


@pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(query, box):
    params = ParallelismParams(**query)
    trace = simulate(params)
    deck = build_deck(trace, box)
    assert deck.width == max(box.width, MIN_WIDTH) and deck.box == box
    assert len(deck.frames) == len(trace.frames)
    if params.world > DETAILED_MAX:
        assert not deck.detailed
    numbers = []
    for c in deck.cells:
        t = Text(c.x + c.s / 2, c.y + c.s * deck.number_at, str(c.rank), deck.cell_font,
                 weight=700, anchor="middle")
        e = extent(t, central=True)
        assert inside(e, c.x, c.y, c.x + c.s, c.y + c.s), (c.rank, e, c)
        numbers.append((t, e))
    node_labels = [(t, extent(t)) for t in deck.node_labels]
    for t, e in node_labels:
        assert any(inside(e, b.x, b.y, b.x + b.w, b.y + b.h) for b in deck.nodes), t
    fixed = [(t, extent(t)) for t in (*deck.titles, *(s for s in deck.legend
                                                       if isinstance(s, Text)))]
    for frame in deck.frames:
        header = deck.header
        texts = [(t, extent(t)) for t in frame.shapes if isinstance(t, Text)]
        covered = any(isinstance(s, Rect) and s.cls == "cover" for s in frame.shapes)
        shown = fixed + texts + [(Text(header.x, header.y, frame.header, header.size,
                                       weight=700), None)]
        if not covered:
            shown += numbers + node_labels
        shown = [(t, e or extent(t)) for t, e in shown]
        check_step([t for t, _ in shown], box, deck.width, deck.height, frame.header,
                   [e for _, e in shown])
        for t, e in texts:   # a cell's notes stay in their cell
            if "cell-note" in t.cls:
                assert any(inside(e, c.x, c.y, c.x + c.s, c.y + c.s) for c in deck.cells), t


def test_a_bigger_box_draws_every_rank_a_smaller_one_summarises():
    """64 ranks: every rank numbered in presentation mode at 1920 × 1080, node 0 and the nodes'
    ranges in the embed (cells never shrink below their number at the label size)."""
    trace = simulate(ParallelismParams(tp=4, dp=8))
    big, small = build_deck(trace, Box(1840, 840)), build_deck(trace, Box(920, 360))
    assert big.detailed and len(big.cells) == 64
    assert not small.detailed and len(small.cells) == 4
    ranges = [t.text for t in small.node_labels if t.text.startswith("ranks")]
    assert ranges[:2] == ["ranks 0–3", "ranks 4–7"]
    assert any(t.text.endswith("more") for t in small.node_labels)
