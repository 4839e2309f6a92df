"""The ZeRO deck's geometry in the boxes it is shown in (issue 27): at every step, every label
is at one of the box's sizes, inside the deck and apart from every other label shown with it;
a cell's number inside its cell, a rank's number inside its node; the grid, the ranks' notes
and the memory panel side by side without crossing — widths measured with Pillow from DejaVu
Sans, not with the deck's own width table (tests/browser/test_deck_legibility.py measures the
same as Chromium renders it). The memory bar's segments are ZeRO's Table 1 bytes (Rajbhandari
et al. 2019: Ψ = 7.5 B, N_d = 4, stage 2 → 2Ψ + 2Ψ/4 + 12Ψ/4 = 15 + 3.75 + 22.5 GB; the bar
draws the phase's states) in proportion to DDP's 16Ψ = 120 GB."""

from __future__ import annotations

import pytest

from app.draw.box import Box
from app.draw.palette import CATEGORY
from app.scenes.zero.deck import MIN_HEIGHT, MIN_WIDTH, build_deck
from app.sim.zero.params import ZeroParams
from app.sim.zero.simulate import simulate
from tests.scenes.labels import HAVE_FONTS, assert_apart, boxes_to_test, width

QUERIES = [{}, {"dp": 32}, {"dp": 1, "stage": 0}, {"dp": 8, "stage": 3, "mlp_layers": 6,
                                                   "mlp_width": 8},
           {"dp": 6, "stage": 1, "steps": 1}]
BOXES = boxes_to_test()

BOLD = ("unit", "shard", "title", "total", "rank", "header")


def extent(kind: str, lb, central: bool = False) -> tuple[float, float, float, float]:
    """A label's box: DejaVu's ascent 0.76 em and descent 0.24 em round its baseline (a cell's
    number is centred on its y: its digits 0.73 em tall)."""
    w = width(lb.text, lb.size, kind in BOLD)
    x0 = lb.x - w if lb.anchor == "end" else lb.x - w / 2 if lb.anchor == "middle" else lb.x
    if central:
        return x0, lb.y - 0.4 * lb.size, x0 + w, lb.y + 0.4 * lb.size
    return x0, lb.y - 0.76 * lb.size, x0 + w, lb.y + 0.24 * lb.size


class Shown:
    def __init__(self, kind, x, y, text, size, anchor="start"):
        self.kind, self.x, self.y, self.text, self.size, self.anchor = (kind, x, y, text, size,
                                                                        anchor)


def shown_at(deck, k: int) -> list[tuple[str, object]]:
    """(kind, label) of everything deck frame ``k`` shows: the fixed labels, the frame's
    overlays, the rank numbers, and the numbers on the cells as they stand after frame k."""
    out = [("title", lb) for lb in deck.title_lines]
    out += [("ring", lb) for lb in (*deck.ring_label, *deck.ellipsis, *deck.row_labels)]
    out += [("unit", lb) for lb in deck.unit_labels]
    out += [("shard", lb) for lb in deck.shard_labels]
    out += [("legend", item.text) for item in deck.legend]
    p, f = deck.panel, deck.frames[k]
    out += [("title", lb) for lb in p.title] + [("panel", lb) for lb in (*p.subtitle,
                                                                         p.ghost_label)]
    pf = p.frames[k]
    out += [("panel", lb) for lb in (*pf.labels, *pf.sent)] + [("total", pf.total)]
    out += [("note", lb) for lb in f.notes]
    out.append(("header", Shown("header", deck.header.x, deck.header.y, f.header,
                                deck.header.size)))
    out += [("rank", Shown("rank", n.x, n.y + deck.ring_size * 0.36, str(n.rank),
                           deck.ring_size, "middle")) for n in deck.ring if n.numbered]
    return out


def numbers_at(deck, k: int) -> dict[tuple[float, float], object]:
    """The numbers standing on the cells after frame ``k`` (a later frame's number over an
    earlier one at the same place)."""
    standing = {}
    for f in deck.frames[:k + 1]:
        for group in f.numbers:
            for x, y, text in group.at:
                standing[(x, y)] = Shown("number", x, y, text, deck.number_size, "middle")
    return standing


@pytest.mark.skipif(not HAVE_FONTS, reason="DejaVu Sans not installed")
@pytest.mark.parametrize("box", BOXES, ids=[f"{b.key}x{b.font:g}" for b in BOXES])
@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_labels_fit_stay_legible_and_apart(query, box):
    trace = simulate(ZeroParams(**query))
    deck = build_deck(trace, box)
    # its least box (wider where its widest header needs it, a phone at large type; taller
    # where its rows need it, large type in a short box)
    area = Box(deck.width, deck.height, box.font)
    assert deck.width >= max(box.width, MIN_WIDTH) and deck.height >= max(box.height, MIN_HEIGHT)
    assert deck.box == box
    sizes = {area.text, area.small, area.head}
    cells_right = max(c.x + c.w for c in deck.frames[0].cells)
    for k in range(len(deck.frames)):
        labels = shown_at(deck, k)
        numbers = numbers_at(deck, k)
        boxes = [extent(kind, lb) for kind, lb in labels]
        boxes += [extent("number", n, central=True) for n in numbers.values()]
        texts = [lb.text for _, lb in labels] + [n.text for n in numbers.values()]
        for (kind, lb), b in zip(labels + [("number", n) for n in numbers.values()], boxes):
            assert lb.size in sizes and lb.size >= area.small - 1e-9, (kind, lb.text, lb.size)
            assert 0 <= b[0] and b[2] <= deck.width and 0 <= b[1] and b[3] <= deck.height, \
                (kind, lb.text, b)
        assert_apart(boxes, texts, k)
        for n in deck.frames[k].notes:    # notes between the grid and the panel
            assert cells_right < n.x and extent("note", n)[2] <= deck.panel.left
    for n in deck.ring:                   # a rank's number inside its node
        assert not n.numbered or width(str(n.rank), deck.ring_size, True) <= 2 * n.r
    assert all(n.numbered for n in deck.ring) or box.font > 1 or len(deck.ring) > 4
    cells = [c for f in deck.frames for c in f.cells]
    for f in deck.frames:                 # every number on a cell of its frame
        for group in f.numbers:
            for x, y, text in group.at:
                w = width(text, deck.number_size, False)
                assert any(c.x <= x - w / 2 and x + w / 2 <= c.x + c.w
                           and c.y <= y - 0.4 * deck.number_size
                           and y + 0.4 * deck.number_size <= c.y + c.h for c in cells), text


def test_the_memory_bar_is_zero_table_1_in_proportion():
    """Stage 2, N_d = 4, Ψ = 7.5 B (ZeRO Table 1's 41.3 GB): params 2Ψ = 15 GB, gradients
    2Ψ/4 = 3.75 GB once the step's gradients are reduced, Adam 12Ψ/4 = 22.5 GB; DDP's 16Ψ =
    120 GB is the outline."""
    trace = simulate(ZeroParams(stage=2, dp=4, param_count=7_500_000_000))
    deck = build_deck(trace, Box(920, 360))
    last = deck.panel.frames[-1]
    heights = {s.colour: s.h for s in last.segments}
    params, grads, adam = (heights[CATEGORY[c]] for c in ("params", "grads", "optimizer"))
    _, ghost_h = deck.panel.ghost
    for drawn, gb in ((params, 15), (grads, 3.75), (adam, 22.5)):
        assert drawn / ghost_h == pytest.approx(gb / 120, rel=0.02)
    assert {lb.text for lb in last.labels} >= {"params 15 GB", "Adam states 22.5 GB"}
    assert deck.panel.ghost_label.text == "DDP: 120 GB"
