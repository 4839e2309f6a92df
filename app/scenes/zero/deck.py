"""The ZeRO scene as drawable geometry, laid out for its box (app/draw/box.py, docs/legibility.md):
a column of ranks on the left (the ring), each rank's three rows (parameters, gradients, Adam's
momentum) over the padded layer units in the middle, each rank's note beside its rows, and the
real-sized model's memory per GPU as a bar on the right (:mod:`app.scenes.zero.deck_panel`),
one overlay group per phase of the step.

Layers as in every deck: frame 0 holds the whole starting grid, frame k only the cells phase k
changed, plus what shows only while it is current (``only-current``): its memory bar, arrows,
notes and header. Colours: a shard in its owner's colour; a gradient not yet reduced in the colour
of the rank that computed it; the mean gradient dark; stale copies faded; padding hatched;
what a rank does not hold, dashed.

Every column is as wide as its texts at the box's sizes; a label is drawn at ``box.text`` or
``box.small`` or not at all: the cells' numbers only where a cell holds them, the rows' names
only where a row is as tall as a label (else the legend names the rows), a layer's label
shortened to what its columns hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.draw.box import Box
from app.draw.geometry import Point, arrow
from app.draw.layout import LINE, Spots, heading, legend_rows, text_box
from app.draw.shapes import Label
from app.draw.text import fits, text_width
from app.draw.widen import least_box
from app.scenes.zero.deck_grid import (MAX_TITLED, ROW_NAMES, Cell, Numbers, colour,
                                       display_columns, frame_cells, grid_layout, tip)
from app.scenes.zero.deck_panel import Panel, memory_panel
from app.sim.mesh import node_of
from app.sim.zero.frames import ROWS
from app.sim.zero.simulate import STAGE_NAMES, ZeroTrace
from app.draw.palette import SUMMED as COMPLETE
from app.draw.palette import rank_colour, text_on
from app.scenes.zero.deck_grid import REPLICATED

MIN_WIDTH, MIN_HEIGHT = 640, 320
"""The smallest box the deck is laid out for: a narrower frame (a phone) scrolls it."""
ROWS_KEY = "rows: params · grads · Adam m"
"""The legend's key to a rank's three rows, where the rows are too thin for their names."""


@dataclass(frozen=True)
class Ring:
    rank: int
    x: float
    y: float
    r: float
    fill: str
    ink: str
    numbered: bool = True
    """its number written in it (left out where it does not fit: the shards' labels and the
    colour still tell)"""


@dataclass(frozen=True)
class Arrow:
    d: str
    head: str
    colour: str
    dashed: bool


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    cells: tuple[Cell, ...]
    tips: tuple[str, ...]                    # each cell's hover text; none on large decks
    numbers: tuple[Numbers, ...]
    arrows: tuple[Arrow, ...]
    notes: tuple[Label, ...]
    unit: str = ""
    """what the step is, for the player's position text (training step 3, phase 2 of 7: backward)"""


@dataclass(frozen=True)
class LegendItem:
    kind: str                # owner | local | mean | stale | pad | empty | rows (no swatch)
    x: float                 # the swatch's top left
    y: float
    colour: str
    text: Label


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    box: Box
    """the box asked for (its bucket is the deck's ``data-box``); width × height is what it
    was laid out in (wider on a phone: :data:`MIN_WIDTH`)"""
    title: str
    """the deck's title, whole (its accessible name)"""
    title_lines: tuple[Label, ...]
    header: Label
    """where each frame writes its header (the text is the frame's)"""
    ring: tuple[Ring, ...]
    ring_size: float
    """the rank numbers' size"""
    ring_label: tuple[Label, ...]
    ellipsis: tuple[Label, ...]
    row_labels: tuple[Label, ...]
    unit_labels: tuple[Label, ...]
    shard_labels: tuple[Label, ...]
    separators: tuple[tuple[float, float, float], ...]
    frames: tuple[FrameView, ...]
    legend: tuple[LegendItem, ...]
    swatch: float
    number_size: float
    panel: Panel
    arrow_width: float = 3.5


def headers(p, trace: ZeroTrace, last: int) -> tuple[list[str], list[str]]:
    """Every frame's header and its unit (the player's position text)."""
    g = trace.grids
    n_frames = len(trace.frames) - 1
    out, units = [], []
    for k in range(last + 1):
        phase = g.phases[k]
        what = (f"{phase.phase.replace('_', '-')}"
                + (f" · layer {phase.unit}" if phase.unit >= 0 else ""))
        out.append(f"Before training step {p.steps}" if k == 0 else
                   f"Training step {p.steps} · phase {k} of {n_frames} · {what}")
        units.append(f"before training step {p.steps}" if k == 0 else
                     f"training step {p.steps}, phase {k} of {n_frames}: {what}")
    return out, units


def build_deck(trace: ZeroTrace, box: Box, upto: int | None = None) -> Deck:
    """The deck laid out for ``box``: the header and title along the top, the legend's rows
    along the bottom, and between them the ring, the rows' names, the grid, the ranks' notes
    and the memory panel, each as wide as its texts need (the grid takes the rest)."""
    p, g = trace.params, trace.grids
    last = len(trace.frames) - 1 if upto is None else upto
    all_headers, units = headers(p, trace, len(trace.frames) - 1)
    title = deck_title(p, trace)
    cols, ranks = g.columns, g.ranks
    n_ranks, gapped = len(ranks), p.dp > len(g.ranks)
    area = least_box(box, MIN_WIDTH, MIN_HEIGHT, all_headers,
                     lambda a: _least_height(a, all_headers, title, p.stage, n_ranks, p.dp > 1))
    width, height = area.width, area.height
    pad, text, small = area.pad, area.text, area.small
    top = heading(area, all_headers, title)
    display, grouped = display_columns(trace)
    # --- rows: the layers' and shards' labels above the grid, the rank blocks below them
    legend_items = _legend_items(p.stage)
    label_rows = 2 * small * LINE
    grid_top = top.top + label_rows + small * 0.3
    for keyed in (False, True):   # the legend names the rows only where the rows cannot
        if keyed:
            legend_items.append(("rows", ROWS_KEY, ""))
        legend = legend_rows(area, [t for _, t, _ in legend_items])
        grid_bottom = legend.top - pad * 0.6
        block = (grid_bottom - grid_top) / n_ranks
        gap = min(small * 0.7, block * 0.16)
        row_h = min(text * 2.2, (block - gap) / 3)
        labelled_rows = row_h >= small * 1.05
        if labelled_rows:
            break
    block = 3 * row_h + gap
    # --- columns, left to right: the ring, the rows' names, the grid, notes, the memory panel
    widest_rank = max(text_width(str(r), small, bold=True) for r in ranks)
    radius = min(block * 0.48, text * 1.25,
                 max(block * 0.36, small * 0.72, widest_rank / 2 + 2))
    ring_size = text if 2 * radius >= max(text * 1.35, text_width(str(ranks[-1]), text, True) + 6) \
        else small
    # neighbours' arrows bulge to the right of the ring, further where the nodes are close;
    # the way back round the ring (last to first) to its left, clear of the nodes; no arrows
    # where the nodes leave no room for one (the notes still say what was sent)
    head = max(8.0, small * 0.8)
    arrows = n_ranks > 1 and block >= 2 * radius + head * 1.2
    bend = 0.32 if block >= 5 * radius else 0.6
    span = max(1.0, (n_ranks - 1) * block)
    back = max(0.09, 2 * (radius + 6) / span)
    ring_x = max(pad + radius, pad * 0.4 + (back * span / 2 + 3 if arrows else 0),
                 pad + text_width("ranks", small) / 2)
    ring_right = ring_x + max(radius, bend / 2 * block + 4 if arrows else 0)
    row_w = max(text_width(ROW_NAMES[r], small) for r in ROWS) if labelled_rows else 0.0
    grid_left = max(ring_right + small * 0.6 + (row_w + small * 0.6 if labelled_rows else 0.0),
                    ring_x + text_width("ranks", small) / 2 + small * 0.5)
    notes_by_frame = [_note_texts(trace, k) for k in range(len(trace.frames))]
    notes_w = max((text_width(t, small) for notes in notes_by_frame for t in notes.values()),
                  default=0.0)
    panel = memory_panel(trace, area, top.top, grid_bottom, last)
    grid_right = panel.left - pad - (notes_w + small * 0.6 if notes_w else 0.0)
    # x positions: units apart, an ellipsis gap where undrawn shards would be
    unit_gap = max(4.0, small * 0.7)
    ellipsis_gap = small * 1.4
    n_units = trace.model.layers
    gaps = (n_units - 1) * unit_gap + (n_units * ellipsis_gap if gapped else 0)
    col_w = min(text * 4.2, max(2.0, (grid_right - grid_left - gaps) / len(display)))
    xs, joins, x = [], [], float(grid_left)
    for k, (a, _) in enumerate(display):
        c = cols[a]
        joined = k > 0
        if k > 0:
            prev = cols[display[k - 1][0]]
            if prev.unit != c.unit:
                x += unit_gap
                joined = False
            elif gapped and prev.owner != c.owner and c.owner == ranks[-1]:
                x += ellipsis_gap
                joined = False
        xs.append(x)
        joins.append(joined)
        x += col_w
    grid_end = x
    number_size = text if col_w >= text_width("-.08", text) + 8 and row_h >= text * 1.2 else small
    show_numbers = (not grouped and col_w - 2.4 >= text_width("-.08", number_size) + 3
                    and row_h - 2.4 >= number_size * 0.95)
    grid = grid_layout(display, grouped, xs, col_w, row_h, block, grid_top, joins, n_ranks,
                       show_numbers)
    bottom = grid_top + n_ranks * block - gap
    unit_labels, shard_labels, separators = _unit_labels(trace, display, xs, col_w, grid_top,
                                                         bottom, small, gapped, block,
                                                         ellipsis_gap)
    # the ring of ranks
    ring, taken = [], Spots()
    for i, r in enumerate(ranks):
        y = round(grid_top + i * block + (block - gap) / 2, 1)
        number = text_width(str(r), ring_size, bold=True)
        numbered = (number + 2 <= 2 * radius and taken.take(
            text_box(ring_x, y + ring_size * 0.36, str(r), ring_size, "middle", bold=True)))
        ring.append(Ring(r, round(ring_x, 1), y, round(radius, 1), colour(trace, r),
                         text_on(colour(trace, r)), numbered))
    ring = tuple(ring)
    ring_label = (Label(round(ring_x, 1), round(grid_top - small * 0.45, 1), "ranks",
                        "class:muted", size=small),)
    ellipsis = ()
    if gapped and block - 2 * radius >= text * 0.9:
        ellipsis = (Label(round(ring_x, 1), round((ring[-2].y + ring[-1].y) / 2 + text * 0.3, 1),
                          "⋮", size=text),)
    row_labels = tuple(Label(round(grid_left - small * 0.6, 1),
                             round(grid_top + i * block + row * row_h + row_h / 2
                                   + small * 0.35, 1),
                             ROW_NAMES[name], anchor="end", size=small)
                       for i in range(n_ranks) for row, name in enumerate(ROWS)) \
        if labelled_rows else ()
    fills = (tuple(colour(trace, r) for r in ranks),
             np.array([ranks.index(cols[a].owner) for a, _ in display]))
    drawn = frame_cells(trace, last + 1, grid, fills)
    titled = sum(d.weight for d in drawn) <= MAX_TITLED    # hover texts while the deck is light
    notes_x = round(grid_end + small * 0.6, 1)
    frames = []
    for k in range(last + 1):
        phase = g.phases[k]
        spots = Spots()
        notes = []
        for node in ring:
            note = notes_by_frame[k].get(node.rank)
            if not note:
                continue
            y = round(node.y + small * 0.35, 1)
            if spots.take(text_box(notes_x, y, note, small)):
                notes.append(Label(notes_x, y, note, anchor="start", size=small))
        frames.append(FrameView(
            k, all_headers[k], tuple(drawn[k].cells),
            tuple(tip(trace, grid, k, c) for c in drawn[k].cells) if titled else (),
            tuple(drawn[k].numbers),
            _arrows(trace, phase, ring, head, bend, back) if arrows else (), tuple(notes),
            units[k]))
    items = []
    for (kind, words, fill), (sx, sy) in zip(legend_items, legend.at):
        tx = sx if kind == "rows" else sx + legend.text_dx
        items.append(LegendItem(kind, sx, sy, fill, Label(round(tx, 1),
                                                            round(sy + legend.text_dy, 1),
                                                            words, anchor="start", size=small)))
    titles = tuple(Label(x, y, line, anchor="end", size=small) for x, y, line in top.title)
    return Deck(width, height, box, title, titles,
                Label(top.header_x, top.header_y, "", anchor="start", size=area.head),
                ring, ring_size, ring_label, ellipsis, row_labels, tuple(unit_labels),
                tuple(shard_labels), tuple(separators), tuple(frames), tuple(items),
                legend.swatch, number_size, panel, round(max(2.5, small * 0.22), 1))


def _least_height(area: Box, all_headers, title: str, stage: int, n_ranks: int,
                  sending: bool) -> float:
    """The height the deck needs at ``area``'s type: the top band, the legend (with the rows'
    key), and the taller of the grid (its labels' rows, a rank's block at least 0.9 labels
    high) and the memory panel (DDP's line, a bar 2.5 labels high, the total, what was sent)."""
    small, text, pad = area.small, area.text, area.pad
    top = heading(area, all_headers, title).top
    items = [t for _, t, _ in _legend_items(stage)] + [ROWS_KEY]
    legend = area.height - legend_rows(area, items).top
    grid = 2 * small * LINE + small * 0.3 + n_ranks * small * 0.9 + pad * 0.6
    panel = small * 5.1 + (small * LINE if sending else 0.0) + text * 1.8 + pad * 0.6
    return top + max(grid, panel) + legend


def deck_title(p, trace: ZeroTrace) -> str:
    return (f"{STAGE_NAMES[p.stage]} · {p.dp} rank{'s' if p.dp > 1 else ''} · "
            f"tiny MLP {trace.model.layers} × {trace.model.width}")


def _unit_labels(trace, display, xs, col_w, top, bottom, small, gapped, block, ellipsis_gap):
    """Each layer's label over its columns (shortened to what they hold), each shard's owner
    over its columns where "r7" fits, and the dotted lines between shards."""
    cols = trace.grids.columns
    unit_labels, shard_labels, separators = [], [], []
    unit_y, shard_y = top - small * (LINE + 0.45), top - small * 0.45
    for u in trace.training.units:
        idx = [k for k, (a, _) in enumerate(display) if cols[a].unit == u.index]
        x0, x1 = xs[idx[0]], xs[idx[-1]] + col_w
        size = f" · {u.numel} + {u.padding} pad" if u.padding else f" · {u.numel}"
        for words in (f"layer {u.index}{size}", f"layer {u.index}", f"L{u.index}"):
            if fits(words, small, x1 - x0, bold=True):
                unit_labels.append(Label(round((x0 + x1) / 2, 1), round(unit_y, 1), words,
                                         "class:ink", size=small))
                break
        owners = []
        for k in idx:
            owner = cols[display[k][0]].owner
            if owners and owners[-1][0] == owner:
                owners[-1][2] = xs[k] + col_w
            else:
                owners.append([owner, xs[k], xs[k] + col_w])
        for j, (owner, a, b) in enumerate(owners):
            if fits(f"r{owner}", small, b - a - 2, bold=True):
                shard_labels.append(Label(round((a + b) / 2, 1), round(shard_y, 1), f"r{owner}",
                                          colour(trace, owner), size=small))
            if j > 0:
                separators.append((round(a - 0.5 if a - owners[j - 1][2] < 2 else
                                         (a + owners[j - 1][2]) / 2, 1),
                                   round(top - 3, 1), round(bottom + 3, 1)))
        if gapped and ellipsis_gap >= text_width("⋯", small) + 2:
            a = owners[-1][1]
            unit_labels.append(Label(round(a - ellipsis_gap / 2, 1),
                                     round(top + (bottom - top) / 2 + small * 0.35, 1), "⋯",
                                     "class:ink", size=small))
    return unit_labels, shard_labels, separators


def _arrows(trace, phase, ring, head: float, bend: float, back: float) -> tuple[Arrow, ...]:
    p = trace.params
    if phase.sent == 0 or p.dp < 2:
        return ()
    out = []
    by_rank = {node.rank: node for node in ring}
    for node in ring:
        nxt = (node.rank + 1) % p.dp
        if nxt not in by_rank:
            continue
        target = by_rank[nxt]
        wrap = target.y < node.y
        a = arrow(Point(node.x, node.y), Point(target.x, target.y), back if wrap else bend,
                  node.r + 2, target.r + 2, head=head)
        out.append(Arrow(a.d, a.head, node.fill, node_of(node.rank, p.gpus_per_node)
                         != node_of(nxt, p.gpus_per_node)))
    return tuple(out)


def _note_texts(trace, k) -> dict[int, str]:
    """Each drawn rank's note at frame ``k``: what it owns, its loss, what it updates or sent."""
    p, g, t = trace.params, trace.grids, trace.training
    phase = g.phases[k]
    out = {}
    for r in g.ranks:
        if phase.phase == "start":
            owned = sum(int(u.real_in_shard(r)) for u in t.units)
            text = (f"owns {owned}" + ("" if owned else " (pad)")) if p.stage else ""
        elif phase.phase == "forward" or (phase.phase == "all_gather"
                                          and phase.unit == trace.model.layers - 1
                                          and p.stage == 3):
            text = f"loss {t.last.losses[r]:.3f}"
        elif phase.phase == "optimizer":
            updates = (trace.model.param_count if p.stage == 0
                       else sum(int(u.real_in_shard(r)) for u in t.units))
            text = f"updates {updates}"
        elif phase.sent:
            text = f"sent {phase.sent}"
        else:
            text = ""
        if text:
            out[r] = text
    return out


def _legend_items(stage: int) -> list[tuple[str, str, str]]:
    """(kind, text, swatch colour) of each legend item."""
    owner = rank_colour(0, 8) if stage else REPLICATED
    return [("owner", "owner's shard" if stage else "whole on every rank", owner),
            ("local", "own gradient", ""), ("mean", "mean gradient", COMPLETE),
            ("stale", "stale", owner), ("pad", "padding", ""), ("empty", "not held", "")]
