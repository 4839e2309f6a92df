"""The tensor-parallel deck's check frames: the tensor-parallel result and the unsharded one
fit the drawing for every block and size (on the page at 1920 × 1080), and small results are
drawn big enough to carry their numbers (the point of the frame is to see them equal)."""

from __future__ import annotations

import re

import pytest

from app.draw.box import PAGE, Box
from app.sim.tensor_parallel.params import TensorParallelParams
from app.sim.tensor_parallel.simulate import simulate
from app.scenes.tensor_parallel.deck import build_deck


def checks(box: Box = PAGE, **query):
    trace = simulate(TensorParallelParams(**query))
    deck = build_deck(trace, box)
    return deck, [f for f, s in zip(deck.frames, trace.result.steps) if s.kind == "check"]


CASES = [dict(block=b, tp=t, sequence_parallel=sp, tokens=t * rows, hidden=8 * t, ffn=16 * t,
              heads=t, vocab=8 * t)
         for b in ("column", "row", "mlp", "attention", "embedding") for t in (1, 2, 4, 8)
         for sp in (False, True) for rows in (1, 4)]


@pytest.mark.parametrize("query", CASES, ids=lambda q: "-".join(map(str, q.values())))
def test_check_frames_stay_inside_the_drawing(query):
    deck, frames = checks(**query)
    g = deck.geometry
    assert frames
    for f in frames:
        for placed in f.matrices:
            m = placed.view
            assert g.lanes_top <= m.y and m.y + m.h <= g.lanes_bottom, (f.header, m.title, m.y)
            assert 0 <= m.x and m.x + m.w <= g.right, (f.header, m.title)
        boxes = [(p.view.x, p.view.y, p.view.x + p.view.w, p.view.y + p.view.h)
                 for p in f.matrices]
        for i, a in enumerate(boxes):   # no two matrices overlap
            for b in boxes[i + 1:]:
                assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_a_small_result_is_drawn_with_its_numbers_and_both_copies_agree():
    forward = checks(block="column", tp=2, tokens=4, hidden=8, ffn=16)[1][0]
    sharded, reference = forward.matrices
    assert sharded.view.numbers and reference.view.numbers
    assert sharded.view.w == reference.view.w and sharded.view.font >= 13
    # the numbers' markup is relative to each matrix: the same numbers at the same places
    # (their ink may differ: white on the deeper colours of a rank, black on the greys)
    numbers = [sorted(re.findall(r"<tspan[^>]*>[^<]*</tspan>", "".join(run.spans for run in
                                                                      m.view.numbers)))
               for m in (sharded, reference)]
    assert len(numbers[0]) == 4 * 16 and numbers[0] == numbers[1]
