"""The checkpointing deck in the boxes it is shown in (issue 27): at every step every label shown
is at the box's sizes, inside the deck and apart from every other — widths measured with Pillow
from DejaVu Sans, not with the deck's own width table; the layer strip has one cell per layer
across the chart's width; the key lists every strategy once; the chosen curve's cursor lies on
the trace's memory at the end of the step. (tests/browser/test_deck_legibility.py measures the
same as Chromium renders it.)"""

from __future__ import annotations

import pytest

from app.draw.box import Box
from app.scenes.checkpointing.deck import MIN_WIDTH, build_deck
from app.sim.checkpointing.params import CheckpointParams
from app.sim.checkpointing.simulate import simulate
from tests.scenes.deck_labels import HAVE_FONTS, check_step

QUERIES = [{}, {"layers": 32}, {"recompute": "selective", "micro_batch": 8}]
BOXES = [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(320, 520),
         Box(920, 360, 1.5)]


@pytest.fixture(scope="module")
def traces():
    return {k: simulate(CheckpointParams(**q)) for k, q in enumerate(QUERIES)}


@pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(traces, query, box):
    trace = traces[query]
    deck = build_deck(trace, box)
    assert deck.width == max(box.width, MIN_WIDTH) and deck.box == box
    assert len(deck.frames) == len(trace.frames)
    left, right, _, _ = deck.strip
    cells = deck.frames[0].cells
    assert [c.layer for c in cells] == list(range(trace.model.layers))
    assert cells[0].x >= left and cells[-1].x + cells[-1].w <= right + 0.01
    labels = {(c.label, c.chosen) for c in deck.curves}
    assert len(labels) == len(deck.curves) == len({(s.recompute, s.k)
                                                   for s in trace.strategies})
    fixed = [*deck.titles, deck.strip_label, *deck.layer_labels,
             *([deck.chart_title] if deck.chart_title else []), *deck.ticks,
             *deck.legend_texts, *(t for c in deck.curves for t in c.texts)]
    for f in deck.frames:
        header = type(deck.header)(deck.header.x, deck.header.y, f.header, deck.header.size,
                                   weight=700)
        shown = fixed + [header] + ([f.cursor] if f.cursor else [])
        check_step(shown, box, deck.width, deck.height, f.header)


def test_the_cursor_follows_the_chosen_strategy():
    """The cursor's dot at the end of each step is the memory the trace holds then, on the
    chart's scale (read back from the axis)."""
    trace = simulate(CheckpointParams())
    deck = build_deck(trace, Box(920, 360))
    _, top, _, bottom = deck.chart
    peak = max(s.peak for s in trace.strategies) * 1.06
    for k in range(1, len(deck.frames)):
        i, j = trace.frame_events[k]
        memory = trace.chosen.events[j - 1].memory_after
        assert deck.frames[k].cursor_y == pytest.approx(bottom - (bottom - top) * memory / peak,
                                                        abs=0.1)
