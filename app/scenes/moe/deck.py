"""The MoE scene as drawable geometry: one MoE layer's forward pass in eight layered frames, laid
out for its box (app/draw/box.py, docs/legibility.md).

Frames 0–3, the router (:mod:`.deck_router`, :mod:`.deck_bins`): the token × expert table on
the left — logits, softmax probabilities with their mean P̄, the top-k choice with its gate
weights — and the experts' bins on the right, grouped by the expert-parallel rank that holds
them, filling with the assignments, then the capacity line and the dropped slots. Frames 4–7,
expert parallelism (:mod:`.deck_ep`, :mod:`.deck_columns`), cover that drawing: the ep × ep
dispatch matrix and the all-to-all's cost on the left, a column per rank on the right — the
token vectors it receives, its experts' outputs, the combine back, the weighted sum.

The step's header and the title take the top (app/draw/layout.py ``heading``), a line of notes
under them each half's own, the legend the bottom rows; between them the table is as wide as
its numbers need (at most :data:`TABLE_SHARE` of the width), the bins take the rest, and the
matrix's column is :data:`MATRIX_SHARE` of the width. Every size is the box's label or small
size: a number that does not fit its cell is left out (the table keeps its shading), a table
shows as many tokens as rows fit, never smaller type (docs/legibility.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.draw.box import Box
from app.draw.layout import heading, legend_rows
from app.draw.palette import rank_colour
from app.draw.shapes import Rect, Text
from app.draw.text import text_width
from app.scenes.moe import deck_bins as bin_frames
from app.scenes.moe import deck_columns, deck_ep
from app.scenes.moe import deck_router as router
from app.scenes.moe.deck_parts import LEVELS, FrameView, Lay

MIN_WIDTH, MIN_HEIGHT = 640, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
TABLE_SHARE = 0.52
"""The router's table and its gutter take at most this share of the width (the bins the rest)."""
MATRIX_SHARE = 0.4
"""Expert parallelism's matrix and cost column take this share of the width (the ranks the
rest)."""


@dataclass(frozen=True)
class MoeDeck:
    width: int
    height: int
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`)"""
    title: str
    """the deck's title, whole (its accessible name)"""
    title_lines: tuple[Text, ...]
    header: Text
    """where each frame writes its header (the text is the frame's)"""
    legend: tuple
    """the legend's swatches (Rects) and texts"""
    frames: tuple[FrameView, ...]


def deck_title(p) -> str:
    return (f"MoE layer · {p.tokens} tokens · {p.experts} experts · top-{p.top_k} · "
            f"ep {p.ep}")


STAGES = ("tokens and router logits", "softmax over the experts",
          "top-k choice and gate weights", "capacity and drops",
          "dispatch all-to-all", "the experts compute", "combine all-to-all",
          "weighted sum: the output")
"""a step is a stage of one MoE layer's forward pass: the header and the player name it"""
HEADERS = tuple(f"Stage {k} of {len(STAGES) - 1} · {s}" if k else f"Before routing · {s}"
                for k, s in enumerate(STAGES))
UNITS = tuple(f"MoE layer stage {k} of {len(STAGES) - 1}: {s}" if k else f"before routing: {s}"
              for k, s in enumerate(STAGES))


def legend_items(p) -> list[tuple[str, str]]:
    """(swatch, text): the first ranks' colours, the value ramp, the dropped hatching."""
    ranks = min(p.ep, 4)
    items = [(rank_colour(r, p.ep), f"rank {r}" + (" …" if r == ranks - 1 < p.ep - 1 else ""))
             for r in range(ranks)]
    return items + [("ramp", "value: darker is larger"), ("url(#drop-hatch)", "dropped")]


def layout(p, trace, box: Box) -> tuple[Lay, object, object]:
    area = box.at_least(MIN_WIDTH, MIN_HEIGHT)
    pad, small = area.pad, area.small
    top = heading(area, HEADERS, deck_title(p))
    legend = legend_rows(area, [text for _, text in legend_items(p)])
    sub_y = top.top + small * 0.8
    body = sub_y + small * 0.6
    bottom = legend.top - pad * 0.3
    cols = min(p.experts, router.TABLE_COLUMNS)
    labels = small * 1.5 + text_width(f"t{min(p.tokens, router.TABLE_ROWS) - 1}", small)
    wanted = pad + labels + cols * (text_width(router.widest_number(p, trace), area.text) + 9)
    inner = area.width - 2 * pad
    split = min(wanted, pad + inner * TABLE_SHARE - small * 2) + router.arrow_gap(area)
    return (Lay(area.width, area.height, area.text, small, area.head, pad, top.top - pad * 0.3,
                sub_y,
                body, bottom, split, pad + inner * MATRIX_SHARE), top, legend)


def _legend(p, lay: Lay, legend) -> list:
    out: list = []
    side = legend.swatch
    for (swatch, text), (x, y) in zip(legend_items(p), legend.at):
        if swatch == "ramp":
            out += [Rect(x + k * side / 3, y, side / 3, side, LEVELS[2 + 4 * k]) for k in range(3)]
        else:
            out.append(Rect(x, y, side, side, swatch))
        out.append(Text(x + legend.text_dx, y + legend.text_dy, text, size=lay.small,
                        cls="muted"))
    return out


def build_deck(trace, box: Box) -> MoeDeck:
    p = trace.params
    lay, top, legend = layout(p, trace, box)
    tab, bins = router.table(p, trace, lay), bin_frames.bins(p, trace, lay)
    cols = deck_columns.columns(p, trace, lay)
    arrows, labels = bin_frames.arrows(p, trace, lay, tab, bins)
    frames = [
        FrameView(0, HEADERS[0], tuple(router.frame0(p, trace, lay, tab)
                                       + bin_frames.bin_preview(p, trace, lay, bins))),
        FrameView(1, HEADERS[1], tuple(router.frame1(p, trace, lay, tab))),
        FrameView(2, HEADERS[2], tuple(router.frame2(p, trace, lay, tab)
                                       + bin_frames.bin_frame(p, trace, lay, bins, False)
                                       + bin_frames.arrow_slots(p, trace, tab, bins)),
                  arrows, arrow_labels=labels),
        FrameView(3, HEADERS[3], tuple(bin_frames.bin_frame(p, trace, lay, bins, True))),
        FrameView(4, HEADERS[4], tuple(deck_ep.frame4(p, trace, lay, cols))),
        FrameView(5, HEADERS[5], tuple(deck_ep.frame5(p, trace, lay, cols))),
        FrameView(6, HEADERS[6], tuple(deck_ep.frame6(p, trace, lay, cols))),
        FrameView(7, HEADERS[7], tuple(deck_ep.frame7(p, trace, lay, cols))),
    ]
    frames = [replace(f, unit=UNITS[f.index]) for f in frames]
    titles = tuple(Text(x, y, line, size=lay.small, anchor="end", cls="muted")
                   for x, y, line in top.title)
    return MoeDeck(int(lay.width), int(lay.height), box, deck_title(p), titles,
                   Text(top.header_x, top.header_y, "", size=lay.head, weight=700),
                   tuple(_legend(p, lay, legend)), tuple(frames))
