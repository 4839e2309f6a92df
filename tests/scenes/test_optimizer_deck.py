"""The optimizer deck's geometry in the boxes it is shown in (issue 27): at every step, every
label is at one of the box's sizes, inside the deck and apart from every other label shown with
it; a cell's number inside its cell and equal to the value to the digits it shows; a bar
part's label inside its part; the loss inside its plot — widths measured with Pillow from
DejaVu Sans (tests/scenes/labels.py), not with the deck's own width table. The bytes bar is
ZeRO's K (Rajbhandari et al. 2019, §3.1: mixed-precision Adam keeps 2 + 2 + 12 bytes per
parameter, K = 12) in proportion."""

from __future__ import annotations

import math

import pytest

from app.draw.box import Box
from app.scenes.optimizer.deck import MIN_HEIGHT, MIN_WIDTH, build_deck
from app.scenes.optimizer.deck_svg import CENTRE
from app.sim.optimizer.params import OptimizerParams
from app.sim.optimizer.simulate import simulate
from tests.scenes.labels import HAVE_FONTS, assert_legible, boxes_to_test, width

QUERIES = [{}, {"size": 12, "steps": 6}, {"optimizer": "sgd", "precision": "fp32", "size": 2,
                                         "steps": 1},
           {"optimizer": "momentum", "size": 9, "steps": 2}]
BOXES = boxes_to_test()


def fixed_labels(deck) -> list[tuple]:
    """(x, y, text, size, anchor, bold) of what every frame shows."""
    small = deck.small
    out = [(t.x, t.y, t.text, small, "end", False) for t in deck.title_lines]
    out += [(t.x, t.y, t.text, small, "middle", False) for t in deck.columns]
    name_dy = -small * 0.3 if deck.sub_size else deck.name_size * 0.35
    for r in (r for r in deck.row_labels if r.named):
        out.append((deck.label_x, r.y + name_dy, r.label, deck.name_size, "end", True))
        if deck.sub_size:
            out.append((deck.label_x, r.y + small * 0.95, r.sub, deck.sub_size, "end", False))
    band = deck.band
    if band:
        out.append((*band.bar_title, small, "start", True))
        out += [(b.x + b.w / 2, band.bar_y + band.bar_h / 2 + CENTRE * small, b.label, small,
                 "middle", True) for b in band.parts if b.label]
        out += [(*t, small, "start", False) for t in (band.span_label, band.note) if t]
        if band.chart_title.text:
            out.append((*band.chart_title, small, "start", True))
        out += [(*t, small, "end", False) for t in band.y_ticks]
        out += [(*t, small, "middle", False) for t in band.x_ticks]
    return out


@pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = simulate(OptimizerParams(**query))
    deck = build_deck(trace, box)
    # its least box (wider where its widest header needs it, a phone at large type; taller
    # where its rows need it, large type in a short box)
    area = Box(deck.width, deck.height, box.font)
    assert deck.width >= max(box.width, MIN_WIDTH) and deck.height >= max(box.height, MIN_HEIGHT)
    assert deck.box == box
    fixed = fixed_labels(deck)
    standing: dict[float, tuple] = {}
    for k, f in enumerate(deck.frames):
        for row in f.rows:                # a row redrawn covers what it showed before
            standing[row.y] = row
        labels = list(fixed)
        labels.append((*deck.header[:2], f.header, deck.header[2], "start", True))
        if f.formula:
            labels.append((*deck.rule[:2], f.formula, deck.rule[2], "start", False))
        for row in standing.values():
            y = row.y + deck.cell_h / 2 + CENTRE * deck.font
            for j, (shown, written) in enumerate(zip(row.texts, row.numbers)):
                if written:
                    labels.append((deck.cell_xs[j] + deck.cell_w / 2, y, shown, deck.font,
                                   "middle", True))
        assert_legible(labels, area, deck.width, deck.height, k)
    for row in standing.values():         # a number inside its cell, equal to the value
        for j, (shown, written, exact) in enumerate(zip(row.texts, row.numbers, row.exact)):
            if not written:
                continue
            w = width(shown, deck.font, True)
            x0 = deck.cell_xs[j] + deck.cell_w / 2 - w / 2
            assert deck.cell_xs[j] <= x0 and x0 + w <= deck.cell_xs[j] + deck.cell_w
            assert deck.font * 1.0 <= deck.cell_h + 0.5
            digits = len(shown.replace("-", "").replace(".", "").split("e")[0].lstrip("0")) or 1
            value = float(shown if not shown.startswith((".", "-.")) else
                          shown.replace(".", "0.", 1))
            assert value == pytest.approx(float(exact), rel=10 ** (1 - digits) / 2 + 1e-12,
                                          abs=1e-300), (shown, exact)
    if deck.band:
        band = deck.band
        for b in band.parts:              # a part's label inside its part
            if b.label:
                assert width(b.label, deck.small, True) <= b.w
        left, top, right, bottom = band.plot
        for seg in band.segments.values():
            assert left <= seg.x <= right and top - 0.5 <= seg.y <= bottom + 0.5


def test_the_bytes_bar_is_zero_k():
    """Mixed-precision Adam: w₁₆ 2 + g 2 + (w 4 + m 4 + v 4 = K 12) = 16 bytes fill the bar;
    fp32 SGD keeps w 4 + g 4 = 8: half the bar, no optimizer state."""
    deck = build_deck(simulate(OptimizerParams(optimizer="adam", precision="mixed")),
                      Box(920, 360))
    parts = deck.band.parts
    full = sum(b.w for b in parts)
    states = [b for b in parts if b.state]
    assert sum(b.w for b in states) / full == pytest.approx(12 / 16, abs=0.01)
    assert "K = 12 B" in deck.band.span_label.text
    sgd = build_deck(simulate(OptimizerParams(optimizer="sgd", precision="fp32")),
                     Box(920, 360))
    assert sum(b.w for b in sgd.band.parts) / full == pytest.approx(8 / 16, abs=0.01)
    assert sgd.band.span is None and not math.isnan(sgd.band.bar_y)
