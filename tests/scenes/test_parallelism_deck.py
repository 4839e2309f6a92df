"""The /parallelism deck's geometry in the boxes it is shown in (issue 27): in every frame, every
label is at the box's sizes, inside the deck, and apart from every other label shown with it;
a cell's number and notes stay inside its cell, a node's label inside its box, the panel's
lines inside the panel — widths measured with Pillow from DejaVu Sans and DejaVu Sans Mono, not
with the deck's own width tables. (tests/browser/test_deck_legibility.py measures the same as
Chromium renders it.)"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from app.draw.box import Box
from app.draw.shapes import Rect, Text
from app.scenes.parallelism.deck import DETAILED_MAX, MIN_WIDTH, build_deck
from app.sim.parallelism.params import ParallelismParams
from app.sim.parallelism.simulate import simulate

FONTS = Path("/usr/share/fonts/truetype/dejavu")
QUERIES = [{}, {"dp": 4}, {"tp": 4, "dp": 8}, {"dp": 32}, {"tp": 8, "gpus_per_node": 8, "pp": 4}]
"""8 ranks (the default), 16, 64 (detailed where the box allows, else a summary), 128 (always
a summary), 8-GPU nodes."""
BOXES = [Box(920, 360), Box(840, 360), Box(1840, 840), Box(560, 520), Box(320, 520),
         Box(920, 360, 1.5)]
"""The embed's, the page's at 1280 × 720, presentation mode's at 1920 × 1080, a phone's (drawn
at the deck's least width), and larger type."""


@lru_cache(maxsize=4)
def font(name: str):
    from PIL import ImageFont
    return ImageFont.truetype(str(FONTS / name), 1000)


@lru_cache(maxsize=65536)
def em(text: str, bold: bool, mono: bool) -> float:
    name = ("DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf") if mono else (
        "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
    return font(name).getlength(text) / 1000


def width(text: str, size: float, bold: bool, mono: bool = False) -> float:
    return em(text, bold, mono) * size


def extent(t: Text, central: bool = False) -> tuple[float, float, float, float]:
    """A label's box: DejaVu's ascent 0.76 em and descent 0.24 em round its baseline (or round
    its middle, for ``dominant-baseline: central``)."""
    w = width(t.text, t.size, t.weight >= 600, t.mono)
    x0 = t.x - w if t.anchor == "end" else t.x - w / 2 if t.anchor == "middle" else t.x
    if central:
        return x0, t.y - 0.5 * t.size, x0 + w, t.y + 0.5 * t.size
    return x0, t.y - 0.76 * t.size, x0 + w, t.y + 0.24 * t.size


def apart(a, b) -> bool:
    return a[2] <= b[0] + 0.5 or b[2] <= a[0] + 0.5 or a[3] <= b[1] + 0.5 or b[3] <= a[1] + 0.5


def inside(e, x0, y0, x1, y1) -> bool:
    return x0 - 0.5 <= e[0] and e[2] <= x1 + 0.5 and y0 - 0.5 <= e[1] and e[3] <= y1 + 0.5


@pytest.mark.skipif(not (FONTS / "DejaVuSansMono.ttf").exists(), reason="DejaVu not installed")
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
        for t, e in shown:
            assert t.size >= box.small - 1e-9, (frame.header, t.text, t.size)
            assert inside(e, 0, 0, deck.width, deck.height), (frame.header, t.text, e)
        for i, (a, ea) in enumerate(shown):
            for b, eb in shown[i + 1:]:
                assert apart(ea, eb), (frame.header, a.text, b.text)
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
