"""The ZeRO scene as drawable geometry: a ring of ranks on the left, each rank's three rows
(parameters, gradients, Adam's momentum) over the padded layer units in the middle, and the
real-sized model's memory per GPU on the right, one overlay group per phase of the step.

Layers as in every deck: frame 0 holds the whole starting grid, frame k only the cells phase k
changed, plus what shows only while it is current (``only-current``): its memory bar, arrows,
notes and header. Colours: a shard in its owner's colour; a gradient not yet reduced in the colour
of the rank that computed it; the mean gradient dark; stale copies faded; padding hatched;
what a rank does not hold, dashed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.sim.memory import model_states
from app.sim.mesh import node_of
from app.sim.zero.simulate import STAGE_NAMES, ZeroTrace
from app.sim.zero.frames import ROWS
from app.draw.shapes import Label
from app.draw.palette import SUMMED as COMPLETE
from app.draw.geometry import Point, arrow
from app.draw.palette import CATEGORY, rank_colour, text_on
from app.scenes.zero.deck_grid import (MAX_TITLED, REPLICATED, ROW_NAMES, Cell, Numbers, colour,
                                 display_columns, frame_cells, grid_layout, tip)
from app.scenes.zero.panels import human_count, human_gb

WIDTH, HEIGHT = 1280, 720
GRID_LEFT, GRID_RIGHT, GRID_TOP, GRID_BOTTOM = 178, 896, 122, 652
RING_X = 44
NOTE_X = 906
UNIT_GAP = 12                 # between layer units: the cells keep the room for their numbers
PANEL_X = 1000
MEMORY_COLOURS = (CATEGORY["params"], CATEGORY["grads"], CATEGORY["optimizer"])        # params, grads, optimizer states


@dataclass(frozen=True)
class Ring:
    rank: int
    x: float
    y: float
    r: float
    fill: str
    ink: str


@dataclass(frozen=True)
class Arrow:
    d: str
    head: str
    colour: str
    dashed: bool


@dataclass(frozen=True)
class Segment:
    y: float
    h: float
    colour: str
    label: str
    ly: float


@dataclass(frozen=True)
class FrameView:
    index: int
    header: str
    cells: tuple[Cell, ...]
    tips: tuple[str, ...]                    # each cell's hover text; none on large decks
    numbers: tuple[Numbers, ...]
    arrows: tuple[Arrow, ...]
    notes: tuple[Label, ...]
    segments: tuple[Segment, ...]
    memory_total: str
    sent_text: tuple[str, ...]
    unit: str = ""
    """what the step is, for the player's position text (training step 3, phase 2 of 7: backward)"""


@dataclass(frozen=True)
class Deck:
    width: int
    height: int
    title: str
    ring: tuple[Ring, ...]
    ellipsis: tuple[Label, ...]
    row_labels: tuple[Label, ...]
    unit_labels: tuple[Label, ...]
    shard_labels: tuple[Label, ...]
    separators: tuple[tuple[float, float, float], ...]
    frames: tuple[FrameView, ...]
    legend: tuple[tuple[str, str, float, str], ...]
    font: float
    ghost: tuple[float, float, str]          # y, height and label of DDP's memory, for scale
    bar: tuple[float, float]                 # x and width of the memory bar
    panel_title: tuple[str, str]


def build_deck(trace: ZeroTrace, upto: int | None = None) -> Deck:
    p, g = trace.params, trace.grids
    last = len(trace.frames) - 1 if upto is None else upto
    display, grouped = display_columns(trace)
    cols = g.columns
    ranks = g.ranks
    gapped = p.dp > len(ranks)
    # x positions: units apart, an ellipsis gap where undrawn shards would be
    n_units = trace.model.layers
    gaps = (n_units - 1) * UNIT_GAP + (n_units * 22 if gapped else 0)
    col_w = min(64.0, (GRID_RIGHT - GRID_LEFT - gaps) / len(display))
    xs, joins, x = [], [], float(GRID_LEFT)
    separators, unit_labels, shard_labels = [], [], []
    for k, (a, b) in enumerate(display):
        c = cols[a]
        joined = k > 0
        if k > 0:
            prev = cols[display[k - 1][0]]
            if prev.unit != c.unit:
                x += UNIT_GAP
                joined = False
            elif gapped and prev.owner != c.owner and c.owner == ranks[-1]:
                x += 22
                joined = False
        xs.append(x)
        joins.append(joined)
        x += col_w
    n_ranks = len(ranks)
    block = (GRID_BOTTOM - GRID_TOP) / n_ranks
    gap = min(12.0, block * 0.16)
    row_h = min(30.0, (block - gap) / 3)
    font = round(min(17.0, row_h * 0.7), 1)
    show_numbers = not grouped and col_w >= 40 and font >= 16
    # unit and shard labels, separators between shards
    bottom = GRID_TOP + n_ranks * block - gap
    for u in trace.training.units:
        idx = [k for k, (a, _) in enumerate(display) if cols[a].unit == u.index]
        x0, x1 = xs[idx[0]], xs[idx[-1]] + col_w
        text = f"layer {u.index}" + (f" · {u.numel} + {u.padding} pad" if u.padding else
                                     f" · {u.numel}")
        unit_labels.append(Label(round((x0 + x1) / 2, 1), GRID_TOP - 34, text,
                                 size=16))
        owners = []
        for k in idx:
            owner = cols[display[k][0]].owner
            if owners and owners[-1][0] == owner:
                owners[-1][2] = xs[k] + col_w
            else:
                owners.append([owner, xs[k], xs[k] + col_w])
        for j, (owner, a, b) in enumerate(owners):
            if b - a >= 26:
                shard_labels.append(Label(round((a + b) / 2, 1), GRID_TOP - 12, f"r{owner}",
                                          size=16, colour=colour(trace, owner)))
            if j > 0:
                separators.append((round(a - 0.5 if a - owners[j - 1][2] < 2 else
                                         (a + owners[j - 1][2]) / 2, 1), GRID_TOP - 4, bottom + 4))
        if gapped:
            a = owners[-1][1]
            unit_labels.append(Label(round(a - 11, 1), GRID_TOP + n_ranks * block / 2, "⋯",
                                     size=18))
    # the ring of ranks
    radius = min(20.0, block * 0.32)
    ring = tuple(Ring(r, RING_X, round(GRID_TOP + i * block + (block - gap) / 2, 1), radius,
                      colour(trace, r), text_on(colour(trace, r)))
                 for i, r in enumerate(ranks))
    ellipsis = ((Label(RING_X, round((ring[-2].y + ring[-1].y) / 2 + 6, 1), "⋮", size=22),)
                if gapped else ())
    row_labels = tuple(Label(GRID_LEFT - 10,
                             round(GRID_TOP + i * block + row * row_h + row_h / 2, 1),
                             ROW_NAMES[name], size=min(17.0, max(16.0, row_h * 0.7)), anchor="end")
                       for i in range(n_ranks) for row, name in enumerate(ROWS))
    # memory bar scale: the larger of DDP's 16Ψ and the largest frame
    ddp = model_states.per_gpu(p.param_count).total
    top_bytes = max([ddp] + [m.total for m in trace.memory])
    bar_top, bar_bottom = 168.0, 560.0
    scale = (bar_bottom - bar_top) / top_bytes
    ghost = (round(bar_bottom - ddp * scale, 1), round(ddp * scale, 1),
             f"DDP: {human_gb(ddp)}")
    grid = grid_layout(display, grouped, xs, col_w, row_h, block, GRID_TOP, joins, n_ranks,
                       show_numbers)
    fills = (tuple(colour(trace, r) for r in ranks),
             np.array([ranks.index(cols[a].owner) for a, _ in display]))
    drawn = frame_cells(trace, last + 1, grid, fills)
    titled = sum(d.weight for d in drawn) <= MAX_TITLED    # hover texts while the deck is light
    frames = []
    n_frames = len(trace.frames) - 1
    sent_so_far = 0
    for k in range(last + 1):
        phase = g.phases[k]
        sent_so_far += phase.sent
        what = (f"{phase.phase.replace('_', '-')}"
                + (f" · layer {phase.unit}" if phase.unit >= 0 else ""))
        header = (f"Before training step {p.steps}" if k == 0 else
                  f"Training step {p.steps} · phase {k} of {n_frames} · {what}")
        unit = (f"before training step {p.steps}" if k == 0 else
                f"training step {p.steps}, phase {k} of {n_frames}: {what}")
        frames.append(FrameView(
            k, header, tuple(drawn[k].cells),
            tuple(tip(trace, grid, k, c) for c in drawn[k].cells) if titled else (),
            tuple(drawn[k].numbers),
            _arrows(trace, phase, ring), _notes(trace, k, ring, block, gap),
            _segments(trace.memory[k], bar_bottom, scale), f"{human_gb(trace.memory[k].total)}",
            _sent_text(trace, sent_so_far), unit))
    legend = _legend(p.stage)
    return Deck(WIDTH, HEIGHT, deck_title(p, trace), ring, ellipsis, row_labels,
                tuple(unit_labels), tuple(shard_labels), tuple(separators), tuple(frames),
                legend, font, ghost, (PANEL_X + 30, 70),
                ("GPU memory per rank", f"Ψ = {human_count(p.param_count)}, mixed-precision Adam"))


def deck_title(p, trace: ZeroTrace) -> str:
    return (f"{STAGE_NAMES[p.stage]} · {p.dp} rank{'s' if p.dp > 1 else ''} · "
            f"tiny MLP {trace.model.layers} × {trace.model.width}")


def _arrows(trace, phase, ring) -> tuple[Arrow, ...]:
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
        a = arrow(Point(node.x, node.y), Point(target.x, target.y), 0.09 if wrap else 0.32,
                  node.r + 3, target.r + 3, head=12)
        out.append(Arrow(a.d, a.head, node.fill, node_of(node.rank, p.gpus_per_node)
                         != node_of(nxt, p.gpus_per_node)))
    return tuple(out)


def _notes(trace, k, ring, block, gap) -> tuple[Label, ...]:
    p, g, t = trace.params, trace.grids, trace.training
    phase = g.phases[k]
    out = []
    for i, node in enumerate(ring):
        r = node.rank
        if phase.phase == "start":
            owned = sum(int(u.real_in_shard(r)) for u in t.units)
            # short enough to end before the memory panel's texts
            text = (f"owns {owned}" + ("" if owned else " (pad)")) if p.stage else ""
        elif phase.phase == "forward" or (phase.phase == "all_gather" and phase.unit == trace.model.layers - 1
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
            out.append(Label(NOTE_X, round(node.y + 5, 1), text, size=16, anchor="start"))
    return tuple(out)


def _segments(m: model_states.ModelStates, bottom: float, scale: float) -> tuple[Segment, ...]:
    out, y, last_label = [], bottom, bottom + 30
    for value, colour, name in zip((m.params, m.grads, m.optimizer), MEMORY_COLOURS,
                                   ("params", "grads", "Adam states")):
        h = value * scale
        y -= h
        ly = min(y + h / 2 + 5, last_label - 18)
        if value > 0:
            out.append(Segment(round(y, 1), round(h, 1), colour, f"{name} {human_gb(value)}",
                               round(ly, 1)))
            last_label = ly
    return tuple(out)


def _sent_text(trace, elements: int) -> tuple[str, ...]:
    p = trace.params
    if p.dp < 2:
        return ("one rank: nothing to send",)
    # the real model sends the same multiple of its shard as the tiny model does of its own
    shards = elements / max(1, sum(u.shard for u in trace.training.units))
    scenario = shards * math.ceil(p.param_count / p.dp) * 2
    return (f"sent this step: {elements} elements", f"(Ψ model: {human_gb(scenario)})")


def _legend(stage: int) -> tuple[tuple[str, str, float, str], ...]:
    """(kind, text, x, swatch colour) of each legend item along the bottom edge."""
    owner = rank_colour(0, 8) if stage else REPLICATED
    items = [("owner", "owner's colour: its shard" if stage else "grey: whole on every rank",
              owner),
             ("local", "rank's colour: own gradient", ""),
             ("mean", "dark: mean gradient", COMPLETE), ("stale", "faded: stale", owner),
             ("pad", "hatched: padding", ""), ("empty", "dashed: not held", "")]
    out, x = [], 22.0
    for kind, text, colour in items:
        out.append((kind, text, x, colour))
        x += 28 + len(text) * 7.7 + 22
    return tuple(out)


