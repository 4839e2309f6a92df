"""The loss-scaling deck's geometry in the boxes it is shown in (issue 27): at every step, every
label is at one of the box's sizes, inside the deck and apart from every other label shown with
it; a zone's name inside its zone; the points of S inside the timeline — widths measured with
Pillow from DejaVu Sans (tests/scenes/labels.py). The zones are FP16's (IEEE 754 binary16:
subnormals from 2⁻²⁴, normals from 2⁻¹⁴, the largest finite value 65504 < 2¹⁶), and S halves
on an overflow and doubles after ``growth_interval`` clean steps, as torch.amp.GradScaler
does."""

from __future__ import annotations

import math

import pytest

from app.draw.box import Box
from app.scenes.precision.deck_scale import MIN_HEIGHT, MIN_WIDTH, scale_deck
from app.sim.precision.params import PrecisionParams
from app.sim.precision.simulate import simulate
from tests.scenes.labels import HAVE_FONTS, assert_legible, boxes_to_test, width

QUERIES = [{}, {"format": "fp8_e4m3"}, {"steps": 64, "growth_interval": 1},
           {"init_scale_log2": 24, "grad_center": -2, "grad_spread": 2.5}]
BOXES = boxes_to_test()


def fixed_labels(deck) -> list[tuple]:
    """(x, y, text, size, anchor, bold) of what every frame shows."""
    small = deck.small
    out = [(x, y, t, small, "end", False) for x, y, t in deck.title_lines]
    out += [(z.x + z.w / 2, deck.zone_label_y, z.label, small, "middle", False)
            for z in deck.zones if z.label]
    out += [(t.x, deck.tick_y, t.label, small, "middle", False) for t in deck.ticks]
    out.append((*deck.value_label, "|S·g|", small, "end", False))
    if deck.timeline_title[2]:
        out.append((*deck.timeline_title, small, "start", True))
    left, _, _, bottom = deck.timeline
    out += [(left - small * 0.5, y + small * 0.35, t, small, "end", False)
            for y, t in deck.y_ticks]
    out += [(x, bottom + small * 1.15, t, small, "middle", False) for x, t in deck.x_ticks]
    out += [(tx, ty, words, small, "start", False) for _, _, _, tx, ty, words in deck.legend]
    return out


@pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = simulate(PrecisionParams(**query))
    deck = scale_deck(trace, box)
    # its least box (wider where its widest header needs it, a phone at large type; taller
    # where its rows need it, large type in a short box)
    area = Box(deck.width, deck.height, box.font)
    assert deck.width >= max(box.width, MIN_WIDTH) and deck.height >= max(box.height, MIN_HEIGHT)
    assert deck.box == box
    fixed = fixed_labels(deck)
    left, top, right, bottom = deck.timeline
    for k, f in enumerate(deck.frames):
        labels = list(fixed)
        labels.append((*deck.header[:2], f.header, deck.header[2], "start", True))
        if f.verdict:
            labels.append((*deck.verdict_at[:2], f.verdict, deck.verdict_at[2], "start", True))
        if f.shift_label:
            labels.append((deck.shift_x, deck.verdict_at[1], f.shift_label, deck.small, "end",
                           False))
        if f.preview:
            labels += [(x, y, t, deck.small, "start", False) for x, y, t in f.preview[3]]
        boxes = assert_legible(labels, area, deck.width, deck.height, k)
        if f.preview:                     # step 0's note inside the timeline
            for b in boxes[len(boxes) - len(f.preview[3]):]:
                assert left <= b[0] and b[2] <= right + 0.5 and top <= b[1] and b[3] <= bottom
        if f.point:
            assert left <= f.point.x <= right and top - 0.5 <= f.point.y <= bottom + 0.5
    for z in deck.zones:
        if z.label:
            assert width(z.label, deck.small) <= z.w


def test_the_zones_are_fp16s_and_s_follows_gradscaler():
    trace = simulate(PrecisionParams(growth_interval=2, steps=12))
    deck = scale_deck(trace, Box(1240, 680))
    edges = [round(z.x, 1) for z in deck.zones] + [round(deck.zones[-1].x + deck.zones[-1].w, 1)]
    low, high = trace.hist_range
    per_binade = (deck.hist_right - deck.hist_left) / (high - low)
    for edge, log2 in zip(edges[1:4], (-24, -14, 16)):   # subnormal, normal, overflow from
        assert edge == pytest.approx(deck.hist_left + (log2 - low) * per_binade, abs=0.2)
    assert 65504 < 2 ** 16 and 2 ** -24 == 5.960464477539063e-08   # binary16's limits
    # S: halved on an overflow (the step skipped), doubled after growth_interval clean steps
    scale, clean = 2.0 ** trace.params.init_scale_log2, 0
    for s in trace.scale_steps:
        assert s.scale == scale
        if s.found_inf:
            scale, clean = scale / 2, 0
        else:
            clean += 1
            if clean == 2:
                scale, clean = scale * 2, 0
    ys = {f.point.y for f in deck.frames if f.point}
    assert len(ys) >= 2 and all(math.isfinite(y) for y in ys)
