"""The /train deck's geometry in the boxes it is shown in (issue 27): every label at the box's
sizes (never below the small one), inside the deck, a pass's label inside its rank's compute
row and inside the time axis, and no two labels overlapping (every layer shows at once: the
step so far) — widths measured with Pillow from DejaVu Sans, not with the deck's own width
table (tests/browser/test_deck_legibility.py measures the same as Chromium renders it). The
communication rows stay readable: a row per kind only where each is tall enough, else one."""

from __future__ import annotations

import pytest

from app.scenes.train.deck import LANE_MIN, MIN_WIDTH, build_deck, lanes_of
from app.sim.train.params import TrainParams
from app.sim.train.simulate import simulate
from tests.scenes.deck_boxes import extent, in_boxes, tracer
from tests.scenes.test_memory_deck import apart

QUERIES = [{}, {"tp": 2, "cp": 2, "pp": 2, "dp": 2, "ep": 2},
           {"tp": 1, "pp": 4, "dp": 4, "ep": 4, "microbatches": 8},
           {"tp": 2, "pp": 1, "dp": 1, "ep": 1, "recompute": "full"}]


trace_of = tracer(simulate, TrainParams)


@in_boxes(QUERIES)
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = trace_of(query)
    deck = build_deck(trace, box)
    p = trace.params
    assert deck.width == max(box.width, MIN_WIDTH) and deck.box == box
    text, small = box.text, box.small
    x, y, size = deck.header
    labels = [(*extent(x, y, max((f.header for f in deck.frames), key=len), size, bold=True),
               "header")]
    labels += [(*extent(tx, ty, t, small, "end"), t) for tx, ty, t in deck.title_lines]
    labels += [(*extent(tx, deck.axis_y, t, small, "middle"), t) for tx, t in deck.ticks]
    gap = small * 0.8
    named = 0
    for row in deck.rows:
        middle = row.compute_y + row.compute_h / 2
        if row.label:
            named += 1
            ly = middle if row.coords else row.y + row.h / 2
            labels.append((*extent(deck.axis.left - gap, ly, row.label, text, "end", True, True),
                           row.label))
        if row.coords:
            labels.append((*extent(deck.axis.left - gap, middle + text * 1.15, row.coords, small,
                                   "end", middle=True), row.coords))
        if row.side:
            labels.append((*extent(deck.side_x, row.y + row.h / 2, row.side, small,
                                   middle=True), row.side))
        # the communication rows: inside the block, a row per kind only where readable
        kinds = [lane for lane, _, _ in row.lanes]
        assert kinds in ([], ["comm"], list(lanes_of(p))), kinds
        for _, ly, lh in row.lanes:
            assert row.y + row.compute_h <= ly and ly + lh <= row.y + row.h + 0.5
            if kinds != ["comm"]:
                assert lh + 1.5 >= small * LANE_MIN - 1e-9, (lh, small)
    assert named >= (p.world + 1) // 2 or p.world > 8, (named, p.world)
    dx = deck.swatch + small * 0.45
    labels += [(*extent(lx + dx, ly + deck.swatch * 0.5 + small * 0.36, t, small), t)
               for _, _, t, lx, ly in deck.legend]
    for f in deck.frames:
        for t in f.labels:
            assert t.size >= small - 1e-9
            b = extent(t.x, t.y, t.text, t.size, "middle", True, True)
            row = min(deck.rows, key=lambda r: abs(r.compute_y + r.compute_h / 2 - t.y))
            assert row.compute_y - 0.5 <= b[1] and b[3] <= row.compute_y + row.compute_h + 0.5, t
            assert deck.axis.left - 0.5 <= b[0] and b[2] <= deck.axis.right + 0.5, t
            labels.append((*b, t.text))
    for b in labels:
        assert -0.5 <= b[0] and b[2] <= deck.width + 0.5 and -0.5 <= b[1], b
        assert b[3] <= deck.height + 0.5, b
    for i, a in enumerate(labels):
        for b in labels[i + 1:]:
            assert apart(a, b), (a[4], b[4])


def test_the_mesh_is_drawn_once_per_layout():
    """/train's mesh panel is cached per layout (app/scenes/train/page.py): every micro-batch
    count of a layout draws the same mesh, byte for byte, as /parallelism's deck would."""
    from app.scenes.parallelism import deck as mesh_view, deck_svg as mesh_svg
    from app.scenes.train.page import mesh_markup
    from app.sim.parallelism.simulate import simulate as layout_simulate
    for query in QUERIES + [{"tp": 1, "pp": 1, "dp": 1, "ep": 1}]:
        for m in (1, 3, 8, 16):
            try:
                p = TrainParams(**{**query, "microbatches": m})
            except ValueError:
                continue
            own = mesh_svg.render(mesh_view.build_deck(layout_simulate(p.layout_params()),
                                                       only=0), 0)
            assert mesh_markup(p) == own, (query, m)


@pytest.mark.parametrize("query", QUERIES + [{"tp": 1, "pp": 1, "dp": 8, "ep": 2},
                                             {"tp": 2, "cp": 2, "pp": 1, "dp": 2, "ep": 2}])
def test_a_stages_ranks_are_drawn_as_copies_of_its_first(query):
    """The deck draws each stage's first rank and copies its block onto the stage's other ranks
    (deck_svg: ``<use>`` on the page). Drawn instead from each rank's own events — its
    passes, messages, labels and idle stretches, laid out exactly as the first rank's are — every
    rank's block in every frame is the first rank's moved down by the copy's offset."""
    from app.draw.box import PAGE
    from app.scenes.train.deck import _frame_of, _gaps, _labels, _merged, _rects
    trace = trace_of(query)
    deck = build_deck(trace, PAGE)
    p, rows, axis = trace.params, deck.rows, deck.axis
    times = [f.time_s for f in trace.frames]
    offsets = {lead: dict(zip(ranks[1:], dys)) | {lead: 0.0}
               for (lead, dys), ranks in zip(deck.copies, trace.alike)}
    assert [lead for lead, _ in deck.copies] == [ranks[0] for ranks in trace.alike]
    copied = 0
    for ranks in trace.alike:
        lead = ranks[0]
        for r in ranks:
            dy = offsets[lead][r]
            assert abs(rows[r].y - rows[lead].y - dy) < 1e-9
            mine = [e for e in trace.events if e["rank"] == r]
            drawn = _rects(mine, rows, axis, p.microbatches)
            gaps = _gaps(mine, trace.step_s)
            for f in deck.frames[1:]:
                ours = [i for i, e in enumerate(mine) if _frame_of(e["start_s"], times) == f.index]
                part = next((q for q in f.parts if q.rank == lead), None)
                want = _merged([drawn[i] for i in ours])
                got = [x._replace(y=round(x.y + dy, 1)) for x in part.rects] if part else []
                assert [tuple(x) for x in want] == [tuple(x) for x in got], (r, f.index)
                labels = _labels([mine[i] for i in ours], rows, axis, deck.small)
                assert [(t.x, t.y, t.text) for t in labels] == \
                    [(t.x, round(t.y + dy, 1), t.text) for t in (part.labels if part else ())]
                idle = [(a, z) for a, z in gaps[1] if _frame_of(a, times) == f.index
                        and axis.x(z) - axis.x(a) >= 0.8]
                assert len(idle) == len(part.bubbles if part else ())
                copied += bool(ours) and r != lead
    assert copied or all(len(ranks) == 1 for ranks in trace.alike)
    # the page draws each copy as a <use> of the first rank's block at that offset; a file of
    # its own as a moved group (slide tools' SVG readers may not follow <use>)
    from app.scenes.train.deck_svg import render
    page, file = str(render(deck, len(deck.frames) - 1)), str(render(deck, 3, standalone=True))
    assert "<use" not in file
    for f in deck.frames:
        for part in f.parts:
            name = f"{deck.uid}-{f.index}-{part.rank}"
            assert page.count(f'id="{name}"') == 1
            for dy in dict(deck.copies)[part.rank]:
                assert page.count(f'<use href="#{name}" y="{dy}"/>') == 1
                if f.index <= 3:
                    assert f'<g transform="translate(0 {dy})">' in file
