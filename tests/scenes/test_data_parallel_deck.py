"""The data-parallel deck's geometry in the boxes it is shown in (issue 27): every label at the
box's sizes (never below the small one), inside the deck, bar labels inside their bars and
bucket numbers inside their buckets, and no two labels that show at once overlapping —
widths measured with Pillow from DejaVu Sans, not with the deck's own width table
(tests/browser/test_deck_legibility.py measures the same as Chromium renders it)."""

from __future__ import annotations

from app.scenes.data_parallel.deck import MIN_WIDTH, build_deck
from app.sim.data_parallel.params import DataParallelParams
from app.sim.data_parallel.simulate import simulate
from tests.scenes.deck_boxes import extent, in_boxes, tracer
from tests.scenes.test_memory_deck import apart

QUERIES = [{}, {"mode": "fsdp", "dp": 16}, {"mode": "dp", "dp": 8}, {"bucket_mb": 0.5, "dp": 32}]


trace_of = tracer(simulate, DataParallelParams)


@in_boxes(QUERIES)
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = trace_of(query)
    deck = build_deck(trace, box)
    assert deck.width == max(box.width, MIN_WIDTH) and deck.box == box
    small = box.small
    x, y, size = deck.header
    fixed = [(*extent(x, y, max((f.header for f in deck.frames), key=len), size, bold=True),
              "header")]
    fixed += [(*extent(tx, ty, t, small, "end"), t) for tx, ty, t in deck.title_lines]
    fixed += [(*extent(tx, deck.axis_y, t, small, "middle"), t) for tx, t in deck.ticks]
    fixed += [(*extent(t.x, t.y, t.text, t.size, t.anchor, middle=True), t.text)
              for t in deck.lane_names]
    fixed += [(*extent(t.x, t.y, t.text, t.size, bold=True, middle=True), t.text)
              for t in deck.utilisation]
    if deck.strip_title:
        t = deck.strip_title
        fixed.append((*extent(t.x, t.y, t.text, t.size, bold=True), t.text))
    dx = deck.swatch + small * 0.45
    fixed += [(*extent(lx + dx, ly + deck.swatch * 0.5 + small * 0.36, t, small), t)
              for lx, ly, _, t in deck.legend]
    for *b, t in fixed:
        assert 0 <= b[0] and b[2] <= deck.width and 0 <= b[1] and b[3] <= deck.height, t
    sizes = [deck.text, deck.small, size] + [t.size for t in (*deck.lane_names, *deck.utilisation)]
    assert min(sizes) >= small - 1e-9
    bars: list = []
    for f in deck.frames:
        bodies = {(p.x, p.y): p for p in f.pieces if not p.cls}
        strip = []
        for t in f.texts:
            assert t.size >= small - 1e-9, t
            box_ = extent(t.x, t.y, t.text, t.size, t.anchor, bold=t.anchor == "middle",
                          middle=True)
            if t.anchor == "start":         # a bar's label, inside its bar (its first piece)
                host = [p for p in bodies.values() if p.y <= t.y <= p.y + p.h] or \
                       [p for fr in deck.frames for p in fr.pieces if not p.cls
                        and p.y <= t.y <= p.y + p.h and p.x <= box_[0]]
                assert host and box_[1] >= host[0].y - 0.5, t
                bars.append((*box_, t.text))
            else:                           # a bucket's number, inside the strip
                s = deck.strip
                assert s.top <= box_[1] and box_[3] <= s.top + s.height + 0.5, t
                assert s.left - 0.5 <= box_[0] and box_[2] <= s.right + 0.5, t
                strip.append((*box_, t.text))
        now = list(strip)
        if f.note:
            now.append((*extent(f.note.x, f.note.y, f.note.text, f.note.size, bold=True),
                        f.note.text))
        if f.index:
            now.append((*extent(f.label_x, deck.cursor_y, f.cursor_label, small, "middle",
                                bold=True), f.cursor_label))
        shown = fixed + bars + now
        for i, a in enumerate(shown):
            assert a[2] <= deck.width + 0.5 and a[3] <= deck.height + 0.5, a
            for b in shown[i + 1:]:
                assert apart(a, b), (f.index, a[4], b[4])
