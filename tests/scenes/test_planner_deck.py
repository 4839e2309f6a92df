"""The planner's deck in the boxes it is shown in (issue 27): at every step every label shown
(the layers reached so far stay drawn) is at the box's sizes, inside the deck and apart from
every other — widths measured with Pillow from DejaVu Sans, not with the deck's own width
table; the budget's labels sit beside its bar, the best mix's label inside the plot. The
Pareto front is checked against a brute-force one. (tests/browser/test_deck_legibility.py
measures the same as Chromium renders it.)"""

from __future__ import annotations

import pytest

from app.draw.box import Box
from app.scenes.planner.deck import MIN_WIDTH, build_deck, pareto
from app.sim.planner.params import PlannerParams
from app.sim.planner.simulate import simulate
from tests.scenes.deck_labels import HAVE_FONTS, check_step

QUERIES = [{}, {"gpus": 4096, "preset": "llama3-405b", "global_batch": 2048}]
BOXES = [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(320, 520),
         Box(920, 360, 1.5)]


def test_the_pareto_front_is_what_no_other_fitting_mix_beats():
    points = [(10, 5, True), (12, 9, True), (11, 4, True), (30, 20, False), (20, 9, True),
              (25, 12, True), (8, 1, True)]
    brute = sorted((m, t) for m, t, f in points if f and not any(
        f2 and m2 <= m and t2 >= t and (m2, t2) != (m, t) for m2, t2, f2 in points))
    assert pareto(points) == brute


@pytest.fixture(scope="module")
def traces():
    return {k: simulate(PlannerParams(**q)) for k, q in enumerate(QUERIES)}


@pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(traces, query, box):
    deck = build_deck(traces[query], box)
    assert deck.width == max(box.width, MIN_WIDTH) and deck.box == box
    assert len(deck.layers) == len(traces[query].frames)
    fixed = [*deck.titles, *deck.legend]
    for k, layer in enumerate(deck.layers):
        header = type(deck.header)(deck.header.x, deck.header.y, layer.header, deck.header.size,
                                   weight=700)
        shown = fixed + [header, *layer.current] + [t for lay in deck.layers[:k + 1]
                                                    for t in lay.texts]
        check_step(shown, box, deck.width, deck.height, layer.header)
    best = deck.layers[1].texts
    assert len(best) == 1 and best[0].text.startswith("best")
    shares = [t for t in deck.layers[2].texts if t.text.endswith("%")]
    assert shares and all(t.text.split()[-2].isdigit() for t in shares)
