"""The bubble-against-m chart keeps each point's schedule across changes of the pass times
(issue 12 item 3): every schedule's order is built from (schedule, ranks, m, chunks) alone, so
the kept schedules re-timed must give exactly the bubble of a schedule built afresh and timed —
checked over a table of shapes and times, t_comm included."""

from __future__ import annotations

import inspect

import pytest

from app.caches import TRACES
from app.sim.pipeline.orders import SCHEDULE_KINDS, build
from app.sim.pipeline.passes import Times, timeline
from app.sim.pipeline.simulate import bubble_curves, curve_schedules

TIMES = [Times(1.0, 2.0, 1.0, 0.0), Times(0.1, 0.3, 0.7, 0.13), Times(999.7, 0.3, 0.7, 0.0),
         Times(1.0, 1.0, 0.0, 2.5)]


def test_no_schedule_is_built_from_the_times():
    """build and every order it draws from take (p, m[, v]) only."""
    from app.sim.pipeline import orders
    assert list(inspect.signature(build).parameters) == ["name", "p", "m", "v"]
    for f in (orders.gpipe, orders.one_f_one_b, orders.zb_h1, orders.interleaved_1f1b,
              orders.zbv, orders.dualpipev):
        assert set(inspect.signature(f).parameters) <= {"p", "m", "v"}, f.__name__


@pytest.mark.parametrize("ranks,chunks", [(2, 2), (4, 2), (5, 3), (8, 4), (64, 2)])
def test_kept_schedules_retimed_give_the_fresh_bubbles_exactly(ranks, chunks):
    TRACES.clear()
    for times in TIMES:                 # the first builds the schedules, the others reuse them
        bubble_curves.cache_clear()
        curves = bubble_curves(ranks, chunks, times)
        assert [c.schedule for c in curves] == list(SCHEDULE_KINDS)
        for c in curves:
            assert c.bubble == tuple(
                timeline(build(c.schedule, ranks, m, c.chunks), times,
                         method="worklist").bubble_fraction for m in c.microbatches)
    assert [len(points) for *_, points in curve_schedules(ranks, chunks)] == \
        [len(c.microbatches) for c in curves]
